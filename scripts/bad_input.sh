#!/usr/bin/env bash
# scripts/bad_input.sh PROGRAM "ARGS ; ARGS ; ..." ["GPU-ONLY ARGS ; ..."]
# Runs PROGRAM with each argument set (the lesson's BAD_ARGS_<p> plus a few every program
# must refuse) and requires: exit code 2, exactly one line of output naming the problem,
# and no hang. Arguments are parsed before the GPU is touched, so this runs anywhere.
# The third list (BAD_ARGS_GPU_<p>) holds cases only a GPU can judge, such as a size that
# does not fit in its memory; without a GPU they are listed as not run.
set -u
prog=$1
extra=${2:-}
gpu_extra=${3:-}
# The generic cases: unknown and malformed flags, and --json paths that are no writable file (an empty
# value, a device that fails every write, a folder); every program takes --json.
cases=("--bogus" "stray-word" "--json" "--verify=yes" "--help-me" "--json=" "--json /dev/full" "--json /tmp")
IFS=';' read -ra more <<<"$extra"
for c in "${more[@]}"; do c=$(echo "$c" | xargs); [ -n "$c" ] && cases+=("$c"); done
if nvidia-smi -L >/dev/null 2>&1; then
  IFS=';' read -ra more <<<"$gpu_extra"
  for c in "${more[@]}"; do c=$(echo "$c" | xargs); [ -n "$c" ] && cases+=("$c"); done
elif [ -n "$(echo "$gpu_extra" | xargs)" ]; then
  echo "not run (no GPU): $gpu_extra"
fi
bad=0
for c in "${cases[@]}"; do
  # shellcheck disable=SC2086  # word splitting of the case is intended
  out=$(timeout 30 "$prog" $c 2>&1); rc=$?
  lines=$(printf '%s' "$out" | grep -c '')
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ]; then
    echo "FAIL: $prog $c -> exit $rc, $lines lines: $(printf '%s' "$out" | head -3 | tr '\n' '|')"
    bad=$((bad+1))
  else
    echo "ok:   $prog $c -> $out"
  fi
done
echo "${#cases[@]} bad argument sets refused with exit 2$([ $bad -gt 0 ] && echo ", $bad FAILED")"
[ $bad -eq 0 ]
