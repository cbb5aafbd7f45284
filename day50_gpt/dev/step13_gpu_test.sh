#!/usr/bin/env bash
# Development run on one H200, from the repository root, of a change to the cluster decoder against the base
# (step 13: the sampling by a sort): health; builds side by side: the base (AB_BASE=DIR: a folder of the tree
# with the base's versions of the changed files at their repository paths, and DIR/.repo-commit the base's
# commit line), this tree (build/gpt, build/stage_floor) and this tree with the sub-stamps (-DDECODE_SUBSTAMPS,
# build/sub); stage_floor; `gpt --verify` of this tree (the gate); ROUNDS rounds of `--bench --bench-part
# generate`, base and var in the order base, var, var, base, ...; one run of the sub-stamped build. Writes one
# file into $OUT, results.tgz (the device tool brings back at most 8): logs/, stage_floor.json, verify.json,
# gen_<i>_<base|var>.json, gen_sub.json. Exit: 0 done, 1 a step failed, 3 unhealthy.
set -u
OUT=${OUT:-/tmp/step13}
ROUNDS=${ROUNDS:-3}
ROOT=$PWD
mkdir -p "$OUT/logs"
L=$OUT/logs
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
health() {
  nvidia-smi -q -d PERFORMANCE > "$L/health_$1.txt" 2>&1
  if grep -E "HW Slowdown|HW Power Brake|HW Thermal|SW Thermal" "$L/health_$1.txt" | grep -v "Not Active" | grep -q Active; then
    say "health $1: SLOWDOWN ACTIVE"; return 1
  fi
  say "health $1: healthy"
}
fin() { (cd "$OUT" && tar czf results.tgz logs ./*.json 2>/dev/null; rm -rf logs ./*.json); exit "$1"; }
health before || fin 3
[ -n "${AB_BASE:-}" ] || { say "AB_BASE not set"; fin 1; }
rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base
tar cf - --exclude=./results --exclude="./$AB_BASE" --exclude=./day50_gpt/build . | (cd /tmp/ab_base && tar xf -)
(cd "$AB_BASE" && find . -type f | while read -r f; do cp "$f" "/tmp/ab_base/$f"; done)
(make -C /tmp/ab_base/day50_gpt -j4 build/gpt > "$L/build_base.txt" 2>&1; echo "rc=$?" >> "$L/build_base.txt") &
# The variants' gpt.o beside the plain build; they link its sm_90a objects (build/*_sm90.o) after it.
(NVCCFLAGS=-DDECODE_SUBSTAMPS make -C day50_gpt -j2 BUILD=build/sub build/sub/gpt.o > "$L/build_sub.txt" 2>&1
 echo "rc=$?" >> "$L/build_sub.txt") &
NVCCFLAGS="-Xptxas -v" make -C day50_gpt -j6 build/gpt build/stage_floor > "$L/build.txt" 2>&1 || { say "build failed"; tail -30 "$L/build.txt"; fin 1; }
wait
NVCCFLAGS=-DDECODE_SUBSTAMPS make -C day50_gpt BUILD=build/sub build/sub/gpt >> "$L/build_sub.txt" 2>&1; echo "rc=$?" >> "$L/build_sub.txt"
for b in base sub; do
  [ "$(grep -c "rc=0" "$L/build_$b.txt")" -ge 1 ] && ! grep -q "rc=[1-9]" "$L/build_$b.txt" || { say "build $b failed"; tail -20 "$L/build_$b.txt"; fin 1; }
done
grep -A3 "decode_cluster" "$L/build.txt" | grep -E "spill|registers" > "$L/ptxas_decode_cluster.txt"
say "built; decode_cluster's ptxas lines:"; sort "$L/ptxas_decode_cluster.txt" | uniq -c
fail=0
(cd day50_gpt && timeout 200 ./build/stage_floor --json "$OUT/stage_floor.json") > "$L/floor.txt" 2>&1
rc=$?; say "stage_floor rc=$rc"; [ $rc -eq 0 ] || fail=1
(cd day50_gpt && timeout 330 ./build/gpt --verify --json "$OUT/verify.json") > "$L/verify.txt" 2>&1
rc=$?; say "verify rc=$rc"; [ $rc -eq 0 ] || fail=1
grep -E "FAIL" "$L/verify.txt" | head -20
gen() {  # gen LESSON_DIR BUILD NAME
  (cd "$1" && timeout 120 "./$2/gpt" --data ./data/shakespeare.txt --bench --bench-part generate --json "$OUT/gen_$3.json") > "$L/gen_$3.txt" 2>&1
  rc=$?; say "generate $3 rc=$rc"; [ $rc -eq 0 ] || fail=1
}
B=/tmp/ab_base/day50_gpt; V=$ROOT/day50_gpt
for i in $(seq 1 "$ROUNDS"); do
  if [ $((i % 2)) -eq 1 ]; then gen $B build "${i}_base"; gen $V build "${i}_var"
  else gen $V build "${i}_var"; gen $B build "${i}_base"; fi
done
gen $V build/sub sub
health after || fail=3
grep -E "sample |FAIL" "$L/floor.txt"
grep -h -A9 "sub-stamps" "$L/gen_sub.txt" | head -24
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "gen_*.json"))):
    d = json.load(open(f))
    row = {b["name"]: b for b in d["bench"]}
    tps = lambda w: row.get(f"generate {w}, batch 1, one cluster of 16 SMs", {}).get("tokens_per_s", float("nan"))
    tok = lambda w: row.get(f"generate {w}, batch 1, one cluster of 16 SMs", {}).get("extra", {}).get("stage_us", {}).get("token", float("nan"))
    print(f"{os.path.basename(f):18s} bf16 {tps('bf16'):8.0f} tok/s  fp32 {tps('fp32'):8.0f} tok/s   stamped token bf16 {tok('bf16'):6.2f} fp32 {tok('fp32'):6.2f} us  passed {d['passed']}")
PY
fin $fail
