#!/usr/bin/env bash
# Development run of a change to the cluster decoder on one H200, from the repository root:
# health, build, `gpt --verify` (the gate: every decoder against the first generator, the new ones among them),
# then ROUNDS runs of `--bench --bench-part generate`. With AB_BASE=DIR (a folder of the tree holding the base's
# versions of the changed files at their repository paths, and DIR/.repo-commit the base's commit line) the base
# is built in /tmp/ab_base beside this build, and the rounds alternate base and this build (base, var, var,
# base, ...). FLOOR=1: also dev/stage_floor.cu, run before the verify (stage_floor.json). SUB=1: also this tree
# built with the sub-stamps (-DDECODE_SUBSTAMPS, build/sub), one run of the bench part after the rounds
# (gen_sub.json). Writes one file into $OUT, results.tgz: logs/ (ptxas's lines for the decoder among them),
# verify.json, gen_<i>_<base|var>.json and those above. Exit: 0 done, 1 a step failed, 3 unhealthy.
set -u
. "$(dirname "$0")/gpu_lib.sh"
ROUNDS=${ROUNDS:-3}
ROOT=$PWD
health before || fin 3
if [ -n "${AB_BASE:-}" ]; then
  rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base
  tar cf - --exclude=./results --exclude="./$AB_BASE" --exclude=./day50_gpt/build . | (cd /tmp/ab_base && tar xf -) ||
    { say "copying the tree for the base failed"; fin 1; }
  (cd "$AB_BASE" && find . -type f | while read -r f; do cp "$f" "/tmp/ab_base/$f" || exit 1; done) ||
    { say "copying the base's files failed"; fin 1; }
  (NVCCFLAGS="-Xptxas -v" make -C /tmp/ab_base/day50_gpt -j4 build/gpt > "$L/build_base.txt" 2>&1
   echo "rc=$?" >> "$L/build_base.txt") &
fi
# The sub-stamped gpt.o beside the plain build; it links the plain build's sm_90a objects (build/*_sm90.o) after it.
if [ "${SUB:-0}" = 1 ]; then
  (NVCCFLAGS=-DDECODE_SUBSTAMPS make -C day50_gpt -j2 BUILD=build/sub build/sub/gpt.o > "$L/build_sub.txt" 2>&1
   echo "rc=$?" >> "$L/build_sub.txt") &
fi
targets="build/gpt"
[ "${FLOOR:-0}" = 1 ] && targets="$targets build/stage_floor"
rm -f day50_gpt/build/gpt.o  # rebuilt, so that ptxas prints the decoder's lines (an up-to-date object prints none)
NVCCFLAGS="-Xptxas -v" make -C day50_gpt -j8 $targets > "$L/build.txt" 2>&1 || { say "build failed"; tail -30 "$L/build.txt"; fin 1; }
wait
if [ -n "${AB_BASE:-}" ]; then grep -q "rc=0" "$L/build_base.txt" || { say "base build failed"; tail -30 "$L/build_base.txt"; fin 1; }; fi
if [ "${SUB:-0}" = 1 ]; then
  NVCCFLAGS=-DDECODE_SUBSTAMPS make -C day50_gpt BUILD=build/sub build/sub/gpt >> "$L/build_sub.txt" 2>&1
  echo "rc=$?" >> "$L/build_sub.txt"
  ! grep -q "rc=[1-9]" "$L/build_sub.txt" || { say "sub-stamped build failed"; tail -30 "$L/build_sub.txt"; fin 1; }
fi
grep -A3 "Compiling entry function '_ZN1k3dec14decode_cluster" "$L/build.txt" | grep -E "Compiling|spill|Used" \
  > "$L/ptxas_decode_cluster.txt"
say "built; the decoder's spills (ptxas):"; grep spill "$L/ptxas_decode_cluster.txt" | sort | uniq -c
if [ -n "${AB_BASE:-}" ]; then
  grep -A3 "Compiling entry function '_ZN1k3dec14decode_cluster" "$L/build_base.txt" | grep -E "Compiling|spill|Used" \
    > "$L/ptxas_decode_cluster_base.txt"
  say "the base's:"; grep spill "$L/ptxas_decode_cluster_base.txt" | sort | uniq -c
fi
fail=0
if [ "${FLOOR:-0}" = 1 ]; then
  (cd day50_gpt && timeout 200 ./build/stage_floor --json "$OUT/stage_floor.json") > "$L/floor.txt" 2>&1
  rc=$?; say "stage_floor rc=$rc"; [ $rc -eq 0 ] || [ $rc -eq 77 ] || fail=1  # (77: no cluster of 16 here, skipped)
fi
(cd day50_gpt && timeout 330 ./build/gpt --verify --json "$OUT/verify.json") > "$L/verify.txt" 2>&1
rc=$?; say "verify rc=$rc"; [ $rc -eq 0 ] || fail=1
grep -E "FAIL" "$L/verify.txt" | head -20
B=/tmp/ab_base/day50_gpt; V=$ROOT/day50_gpt
for i in $(seq 1 "$ROUNDS"); do
  if [ -n "${AB_BASE:-}" ]; then
    if [ $((i % 2)) -eq 1 ]; then gen $B build "${i}_base"; gen $V build "${i}_var"
    else gen $V build "${i}_var"; gen $B build "${i}_base"; fi
  else
    gen $V build "${i}_var"
  fi
done
[ "${SUB:-0}" = 1 ] && gen $V build/sub sub
health after || { [ $fail -eq 0 ] && fail=3; }  # (a failed step's 1 stands)
[ "${FLOOR:-0}" = 1 ] && grep -E "us a|GB/s|FAIL" "$L/floor.txt" | head -60
[ "${SUB:-0}" = 1 ] && grep -h -A9 "sub-stamps" "$L/gen_sub.txt" | head -24
summary
fin $fail
