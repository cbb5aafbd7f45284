#!/usr/bin/env bash
# day50_gpt/make_corpus.sh: the second example text, data/corpus.txt, built from the repository's own
# notes (every README.md); `make notes-corpus`. The default text is data/shakespeare.txt
# (make_shakespeare.py, `make corpus`). Re-run after the notes change. Written to a temporary file and
# renamed, so a failure leaves the old corpus in place.
set -eu
cd "$(dirname "$0")/.."
out=day50_gpt/data/corpus.txt
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
for f in README.md day*/README.md; do
  [ -f "$f" ] || continue
  # The prose only: the notes' generated-figure markers (<!-- ... -->) are machinery, not English.
  sed -E 's/<!--[^>]*-->//g' "$f" >> "$tmp"
  printf '\n\n' >> "$tmp"
done
chmod 644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "wrote $out: $(wc -c < "$out") bytes from $(ls README.md day*/README.md | wc -l) notes"
