#!/usr/bin/env bash
# scripts/bad_input.sh PROGRAM "ARGS ; ARGS ; ..."
# Runs PROGRAM with each argument set (the lesson's BAD_ARGS_<p> plus a few every program
# must refuse) and requires: exit code 2, exactly one line of output naming the problem,
# and no hang. Arguments are parsed before the GPU is touched, so this runs anywhere.
set -u
prog=$1
extra=${2:-}
cases=("--bogus" "stray-word" "--json" "--verify=yes" "--help-me")
IFS=';' read -ra more <<<"$extra"
for c in "${more[@]}"; do c=$(echo "$c" | xargs); [ -n "$c" ] && cases+=("$c"); done
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
