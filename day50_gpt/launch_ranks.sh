#!/usr/bin/env bash
# day50_gpt/launch_ranks.sh N [gpt arguments...]: data-parallel training with one process per GPU on
# this host: ranks 0..N-1 on GPUs 0..N-1, meeting through a file into which rank 0 writes NCCL's
# unique id. Rank 0's output is shown; rank R's goes to build/rank<R>.log (its tail is shown if it
# failed). Exits 0 if every rank passed, else the first failing rank's code (1 a check failed, 2 usage;
# 77 skipped only when no rank failed).
#
#   ./launch_ranks.sh 2 --steps 400 --log build/dp.log
#
# Across hosts, start ./build/gpt yourself on each host: --world N --rank R (0 on exactly one host)
# --device D (the GPU on that host) and --id-file PATH, the same PATH on a file system every host sees.
#
# The arguments are judged first (gpt --check-args: one line and exit 2 if gpt would refuse them), so
# a bad argument is reported even on a machine that would skip for lack of GPUs.
set -u
n=${1:-}
if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: launch_ranks.sh N [gpt arguments...]  (N: processes, one per GPU)" >&2
  exit 2
fi
shift
cd "$(dirname "$0")" || exit 2
[ -x build/gpt ] || { echo "launch_ranks.sh: build/gpt is missing: run make first" >&2; exit 2; }
id=$(mktemp -u "${TMPDIR:-/tmp}/gpt_nccl_id.XXXXXX")
./build/gpt --check-args --world "$n" --rank 0 --device 0 --id-file "$id" "$@" || exit $?
# NVLink SHARP (multicast) stays off unless the caller chose otherwise: see the notes, "Several GPUs".
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
if command -v nvidia-smi >/dev/null 2>&1; then
  have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${CUDA_VISIBLE_DEVICES+set}" = set ]; then have=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .); fi
  if [ "$have" -lt "$n" ]; then
    echo "SKIP: launch_ranks.sh: $n ranks need $n GPUs, this machine shows $have"
    exit 77
  fi
else
  echo "SKIP: launch_ranks.sh: no nvidia-smi, so no GPU to run ranks on"
  exit 77
fi
pids=()
for ((r = 1; r < n; r++)); do
  ./build/gpt --world "$n" --rank "$r" --device "$r" --id-file "$id" "$@" >"build/rank$r.log" 2>&1 &
  pids+=($!)
done
./build/gpt --world "$n" --rank 0 --device 0 --id-file "$id" "$@"
rc=$?
for ((r = 1; r < n; r++)); do
  wait "${pids[$((r - 1))]}"
  c=$?
  if [ $c -ne 0 ]; then
    echo "rank $r exited with $c; the end of build/rank$r.log:"
    tail -5 "build/rank$r.log"
  fi
  # a failure (1, 2, ...) wins over a skip (77), which wins over a pass
  if [ $c -ne 0 ] && { [ $rc -eq 0 ] || { [ $rc -eq 77 ] && [ $c -ne 77 ]; }; }; then rc=$c; fi
done
rm -f "$id" "$id.tmp"
exit $rc
