#!/usr/bin/env bash
# day50_gpt/dev/heads_gpu_test.sh: the decoder with a cluster a head (nn/kernels/decode_heads.cuh) on the GPU, in
# one device call: health, build, `--bench --bench-part generate` (every generator; the fp32 rows must write the
# current generator's bytes), then `gpt --verify` (every decoder's logits at every position against the current
# generator's, the sampled bytes), health again. Run from day50_gpt/: OUT=$OUT bash dev/heads_gpu_test.sh
# Files: $OUT/gen_1.json, $OUT/verify.json (or VERIFY_JSON), logs/ (packed into $OUT/results.tgz).
# Time: the rounds stop when fewer than VERIFY_S + 20 seconds of CALL_S (560) are left, so that --verify still runs.
cd "$(dirname "$0")/.." || exit 2
source dev/gpu_lib.sh
fail=0
health before || fin 3
say "build"
# VARIANTS="name:flags ...": more builds of the same tree, each with its NVCCFLAGS (e.g. r5:-DHEADS_RING=5; commas between flags), in
# build/<name>, built beside the plain one; then ROUNDS rounds of generate, the builds in turn (plain first).
# (a variant's gpt.o compiles beside the plain build; its link takes the plain build's sm_90a objects)
for v in ${VARIANTS:-}; do
  (NVCCFLAGS="$(echo "${v#*:}" | tr , " ")" make BUILD="build/${v%%:*}" "build/${v%%:*}/gpt.o" > "$L/build_${v%%:*}.txt" 2>&1 ||
     echo "build ${v%%:*} failed" >> "$L/build_failed.txt") &
done
make -j16 build/gpt > "$L/build.txt" 2>&1 || { say "build failed"; tail -30 "$L/build.txt"; fin 1; }
wait
for v in ${VARIANTS:-}; do
  NVCCFLAGS="$(echo "${v#*:}" | tr , " ")" make BUILD="build/${v%%:*}" "build/${v%%:*}/gpt" >> "$L/build_${v%%:*}.txt" 2>&1 ||
    echo "link ${v%%:*} failed" >> "$L/build_failed.txt"
done
[ -f "$L/build_failed.txt" ] && { cat "$L/build_failed.txt"; tail -5 "$L"/build_*.txt; fin 1; }
say "built"
left() { echo $(( ${CALL_S:-560} - ($(date +%s) - t0) )); }
reserve=$(( ${VERIFY:-1} == 1 ? ${VERIFY_S:-150} + 20 : 20 ))
for r in $(seq 1 "${ROUNDS:-1}"); do
  for b in build ${VARIANTS:-}; do
    [ "$(left)" -gt $(( reserve + 25 )) ] || { say "round $r: no time left for ${b%%:*}"; break 2; }
    if [ "$b" = build ]; then gen . build "$r"; else gen . "build/${b%%:*}" "${r}_${b%%:*}"; fi
  done
done
if [ "${VERIFY:-1}" = 1 ]; then
  (timeout "${VERIFY_S:-150}" ./build/gpt --data ./data/shakespeare.txt --verify --json "${VERIFY_JSON:-$OUT/verify.json}") > "$L/verify.txt" 2>&1
  rc=$?; say "verify rc=$rc"; [ $rc -eq 0 ] || fail=1
fi
health after || fail=1
for f in "$L"/gen_*.txt; do echo "== $f"; grep -E -A3 "^generate .*a head" "$f" | head -8; done
grep -E "FAIL" "$L"/*.txt | head -20
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "gen_*.json"))):
    d = json.load(open(f))
    for b in d["bench"]:
        if "cluster" in b["name"] and b.get("tokens_per_s"):
            print(f"{b['name']:60s} {b['tokens_per_s']:9.0f} tok/s  equal {b.get('extra', {}).get('bytes_equal_to_current')}")
    print("passed", d["passed"], [c["name"] for c in d["checks"] if not c["passed"]][:5])
PY
fin $fail
