#!/usr/bin/env bash
# day50_gpt/dev/heads_results_gpu.sh: the results files of a build whose day50 change is the decoder with a cluster
# a head (nn/kernels/decode_heads.cuh), in one device call on one H200 (about 560 s with the machine's start):
# health; the build (make all), with the development switches' builds beside it (VARIANTS, as
# heads_gpu_test.sh); gpt --verify into results/<gpu>/day50_gpt-verify.json (the gate: a failure stops here);
# make bench (day50_gpt.json, day50_gpt-attention.json); the generation-only peer run
# (day50_gpt-torch_peer_generation.json); then, with time left, one round of --bench --bench-part generate of the
# plain build and of each variant, in turn, into DEV_DIR (a folder under results/<gpu>/; no rounds without it); health
# again. KEEP_BUILD=1: a machine that built this tree's parent in an earlier call keeps that build (the outputs
# touched, the tree copied anew is older), and only what includes nn/kernels/decode_heads.cuh is rebuilt.
# Run from the repository root: OUT=$OUT bash day50_gpt/dev/heads_results_gpu.sh. Every file the call wrote
# under results/, and its logs, come back in $OUT/results.tgz at their repository paths.
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/heads_results}
L=$OUT/logs
mkdir -p "$L"
touch "$OUT/.t0"
t0=$(date +%s)
CALL_S=${CALL_S:-540}
say() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { local l=$(( CALL_S - ($(date +%s) - t0) )); echo $(( l > 1 ? l : 1 )); }
health() {
  nvidia-smi -q -d PERFORMANCE > "$L/health_$1.txt" 2>&1 || { say "health $1: nvidia-smi failed"; return 1; }
  if grep -E "HW Slowdown|HW Power Brake|HW Thermal|SW Thermal" "$L/health_$1.txt" | grep -v "Not Active" | grep -q Active; then
    say "health $1: SLOWDOWN ACTIVE"; return 1
  fi
  say "health $1: healthy"
}
pack() {  # every file under results/ this call wrote, and the logs
  find results -type f -newer "$OUT/.t0" > "$OUT/files.txt"
  cp "$OUT/files.txt" "$L/"
  tar czf "$OUT/results.tgz" -T "$OUT/files.txt" -C "$OUT" logs
}
fail=0
health before || { pack; exit 3; }
cd day50_gpt || exit 2
if [ "${KEEP_BUILD:-0}" = 1 ] && [ -d build ]; then
  find build -type f -exec touch {} + && sleep 1 && touch nn/kernels/decode_heads.cuh
fi
for v in ${VARIANTS:-}; do
  (NVCCFLAGS="$(echo "${v#*:}" | tr , " ")" make BUILD="build/${v%%:*}" "build/${v%%:*}/gpt.o" > "$L/build_${v%%:*}.txt" 2>&1 ||
     echo "build ${v%%:*} failed" >> "$L/build_failed.txt") &
done
make -j16 > "$L/build.txt" 2>&1 || { say "build failed"; tail -20 "$L/build.txt"; cd ..; pack; exit 1; }
wait
for v in ${VARIANTS:-}; do
  NVCCFLAGS="$(echo "${v#*:}" | tr , " ")" make BUILD="build/${v%%:*}" "build/${v%%:*}/gpt" >> "$L/build_${v%%:*}.txt" 2>&1 ||
    echo "link ${v%%:*} failed" >> "$L/build_failed.txt"
done
say "built$([ -f "$L/build_failed.txt" ] && echo ", but: $(cat "$L/build_failed.txt")")"
timeout 200 ./build/gpt --verify --json "../results/{gpu}/day50_gpt-verify.json" > "$L/verify.txt" 2>&1
rc=$?; say "verify rc=$rc: $(grep -E '^RESULT' "$L/verify.txt")"
[ $rc -eq 0 ] || { grep FAIL "$L/verify.txt" | head; cd ..; pack; exit 1; }
timeout 240 make bench > "$L/bench.txt" 2>&1
rc=$?; [ $rc -eq 0 ] || fail=1
say "bench rc=$rc: $(grep -E '^RESULT' "$L/bench.txt" | tr '\n' ' ')"
PYTHONUNBUFFERED=1 timeout "$(( $(left) > 240 ? 240 : $(left) ))" python3 torch_peer.py --generation-only > "$L/peer_gen.txt" 2>&1 || fail=1
say "generation-only peer: $(tail -1 "$L/peer_gen.txt")"
D=${DEV_DIR:+../$DEV_DIR}
[ -n "$D" ] && mkdir -p "$D"
for b in ${D:+build ${VARIANTS:-}}; do
  name=${b%%:*}; dir=build; [ "$name" = build ] || dir=build/$name
  [ "$(left)" -gt 30 ] || { say "no time left for $name"; break; }
  [ -x "$dir/gpt" ] || continue
  timeout 60 "./$dir/gpt" --data ./data/shakespeare.txt --bench --bench-part generate --json "$D/gen_${name/build/plain}.json" \
    > "$L/gen_${name/build/plain}.txt" 2>&1 || fail=1
  say "generate ${name/build/plain}: $(grep -E '^generate fp32, batch 1, a cluster of 16 SMs a head' "$L/gen_${name/build/plain}.txt")"
done
cd ..
health after || fail=1
pack
say "done, fail=$fail"
exit $fail
