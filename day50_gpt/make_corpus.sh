#!/usr/bin/env bash
# day50_gpt/make_corpus.sh: the default training text, built from the repository's own notes
# (every README.md), so that the GPT trains with no download. Re-run after the notes change.
set -eu
cd "$(dirname "$0")/.."
out=day50_gpt/data/corpus.txt
: > "$out"
for f in README.md day*/README.md; do
  [ -f "$f" ] || continue
  cat "$f" >> "$out"
  printf '\n\n' >> "$out"
done
echo "wrote $out: $(wc -c < "$out") bytes from $(ls README.md day*/README.md | wc -l) notes"
