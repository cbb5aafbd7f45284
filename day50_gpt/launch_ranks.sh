#!/usr/bin/env bash
# day50_gpt/launch_ranks.sh N [gpt arguments...]: a multi-process data-parallel run on this host, one
# process per GPU (ranks 0..N-1 on GPUs 0..N-1), meeting through a file that rank 0 writes NCCL's
# unique id into. Rank 0's output is shown; the other ranks' go to build/rank<R>.log. Exits non-zero
# if any rank failed. (Across hosts: start the same command on each host with --rank set by hand and
# --id-file on a shared file system.)
set -u
n=${1:?usage: launch_ranks.sh N [gpt arguments...]}
shift
cd "$(dirname "$0")" || exit 2
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # NVLink SHARP / multicast stays off (see the notes)
id=$(mktemp -u "${TMPDIR:-/tmp}/gpt_nccl_id.XXXXXX")
pids=()
for ((r = 1; r < n; r++)); do
  ./build/gpt --world "$n" --rank "$r" --id-file "$id" "$@" > "build/rank$r.log" 2>&1 &
  pids+=($!)
done
./build/gpt --world "$n" --rank 0 --id-file "$id" "$@"; rc=$?
for p in "${pids[@]}"; do wait "$p" || rc=1; done
rm -f "$id" "$id.tmp"
exit $rc
