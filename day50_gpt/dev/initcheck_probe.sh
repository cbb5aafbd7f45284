#!/usr/bin/env bash
# day50_gpt/dev/initcheck_probe.sh: runs dev/initcheck_probe.cu under compute-sanitizer's initcheck, on a
# fresh buffer and on the memset control, and writes both error counts to
# results/<gpu>/day50_gpt-initcheck_probe.json. Build first (make in day50_gpt). Exit 77 without a GPU.
set -u
cd "$(dirname "$0")/.." || exit 2
P=./build/initcheck_probe
[ -x "$P" ] || { echo "no $P: run make first"; exit 2; }
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
if [ -z "$gpu" ] || [ ! -x "$CS" ]; then echo "SKIP: no GPU or no compute-sanitizer"; exit 77; fi
slug=$(echo "$gpu" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
out=../results/$slug/day50_gpt-initcheck_probe.json
mkdir -p "$(dirname "$out")" build
count() {  # the first "ERROR SUMMARY: N errors" line (a second one counts what was not printed)
  grep -E 'ERROR SUMMARY: [0-9]+' "$1" | grep -v 'not printed' | head -n1 | grep -oE '[0-9]+' | head -n1
}
"$CS" --tool initcheck --print-limit 2 "$P" > build/initcheck_probe_fresh.log 2>&1; rc_f=$?
"$CS" --tool initcheck --print-limit 2 "$P" --control > build/initcheck_probe_control.log 2>&1; rc_c=$?
ef=$(count build/initcheck_probe_fresh.log); ec=$(count build/initcheck_probe_control.log)
# The code's commit: .repo-commit ("<hash> <dirty>", written where the tree travels without .git), else git.
if [ -f ../.repo-commit ]; then read -r commit dirty < ../.repo-commit
else commit=$(git rev-parse HEAD 2>/dev/null || echo unknown); dirty=$(git diff --quiet HEAD 2>/dev/null && echo 0 || echo 1); fi
cat > "$out" <<JSON
{
  "what": "compute-sanitizer initcheck over dev/initcheck_probe.cu: cuBLAS bf16 GEMM (beta 0) writes C, our kernel reads all of C",
  "env": {"gpu": "$gpu", "commit": "$commit", "dirty": $([ "${dirty:-1}" = 0 ] && echo false || echo true), "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
          "sanitizer": "$("$CS" --version 2>/dev/null | grep -m1 -oE 'Version [0-9.]+')"},
  "fresh_buffer_errors": ${ef:--1},
  "memset_control_errors": ${ec:--1},
  "exit_codes": [$rc_f, $rc_c],
  "tool_misses_library_writes": $([ "${ef:--1}" -gt 0 ] && [ "${ec:--1}" = 0 ] && echo true || echo false)
}
JSON
cat "$out"
grep -m2 -A2 'Uninitialized' build/initcheck_probe_fresh.log
