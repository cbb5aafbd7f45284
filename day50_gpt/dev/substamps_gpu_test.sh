#!/usr/bin/env bash
# Development run on one H200, from the repository root: dev/stage_floor.cu (a stage of the cluster decoder,
# piece by piece, alone) and the decoder's sub-stamps (built with -DDECODE_SUBSTAMPS: every block's clock64()
# at eight points of every stage, printed and written under stage_us.sub by `--bench --bench-part generate`).
# Health; build/gpt and build/stage_floor as they are and build/sub/gpt with the sub-stamps, side by side;
# stage_floor; then ROUNDS rounds of the generate bench part, the plain build and the sub-stamped one in turn
# (plain, sub, sub, plain, ...). Writes into $OUT one file, results.tgz: logs/, stage_floor.json and
# gen_<i>_<plain|sub>.json (one file: the device tool brings back at most 8).
# Exit: 0 done, 1 a step failed, 3 unhealthy.
set -u
. "$(dirname "$0")/gpu_lib.sh"
ROUNDS=${ROUNDS:-2}
health before || fin 3
# (the sub-stamped build links the plain build's sm_90a objects, build/*_sm90.o: it comes second, its gpt.o
# compiling beside the plain one's)
(NVCCFLAGS=-DDECODE_SUBSTAMPS make -C day50_gpt -j8 BUILD=build/sub build/sub/gpt.o > "$L/build_sub.txt" 2>&1
 echo "rc=$?" >> "$L/build_sub.txt") &
make -C day50_gpt -j8 build/gpt build/stage_floor > "$L/build.txt" 2>&1 || { say "build failed"; tail -30 "$L/build.txt"; fin 1; }
wait
NVCCFLAGS=-DDECODE_SUBSTAMPS make -C day50_gpt -j8 BUILD=build/sub build/sub/gpt >> "$L/build_sub.txt" 2>&1
echo "rc=$?" >> "$L/build_sub.txt"
[ "$(grep -c "rc=0" "$L/build_sub.txt")" = 2 ] || { say "sub-stamps build failed"; tail -30 "$L/build_sub.txt"; fin 1; }
say "built"
fail=0
(cd day50_gpt && timeout 200 ./build/stage_floor --json "$OUT/stage_floor.json") > "$L/floor.txt" 2>&1
rc=$?; say "stage_floor rc=$rc"; [ $rc -eq 0 ] || [ $rc -eq 77 ] || fail=1  # (77: no cluster of 16 here, skipped)
for i in $(seq 1 "$ROUNDS"); do
  if [ $((i % 2)) -eq 1 ]; then gen day50_gpt build "${i}_plain"; gen day50_gpt build/sub "${i}_sub"
  else gen day50_gpt build/sub "${i}_sub"; gen day50_gpt build "${i}_plain"; fi
done
health after || { [ $fail -eq 0 ] && fail=3; }  # (a failed step's 1 stands)
grep -E "us a stage|GB/s|FAIL" "$L/floor.txt"
grep -h -A8 "one cluster of 16\|sub-stamps" "$L"/gen_1_sub.txt | head -40
summary
fin $fail
