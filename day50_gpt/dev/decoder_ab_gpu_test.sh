#!/usr/bin/env bash
# Development run of a change to the cluster decoder on one H200, from the repository root:
# health, build, `gpt --verify` (the gate: every decoder against the first generator, the new ones among them),
# then ROUNDS runs of `--bench --bench-part generate`. With AB_BASE=DIR (a folder of the tree holding the base's
# versions of the changed files at their repository paths, and DIR/.repo-commit the base's commit line) the base
# is built in /tmp/ab_base beside this build, and the rounds alternate base and this build (base, var, var,
# base, ...). Writes into $OUT: logs.tgz, verify.json, gen_<i>_<base|var>.json. Exit: 0 done, 1 a step failed,
# 3 unhealthy.
set -u
OUT=${OUT:-/tmp/decoder_ab}
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
fin() { (cd "$OUT" && tar czf logs.tgz logs && rm -rf logs); exit "$1"; }
health before || fin 3
if [ -n "${AB_BASE:-}" ]; then
  rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base
  tar cf - --exclude=./results --exclude="./$AB_BASE" --exclude=./day50_gpt/build . | (cd /tmp/ab_base && tar xf -)
  (cd "$AB_BASE" && find . -type f | while read -r f; do cp "$f" "/tmp/ab_base/$f"; done)
  (make -C /tmp/ab_base/day50_gpt -j8 build/gpt > "$L/build_base.txt" 2>&1; echo "rc=$?" >> "$L/build_base.txt") &
fi
make -C day50_gpt -j16 build/gpt > "$L/build.txt" 2>&1 || { say "build failed"; tail -30 "$L/build.txt"; fin 1; }
wait
if [ -n "${AB_BASE:-}" ]; then grep -q "rc=0" "$L/build_base.txt" || { say "base build failed"; tail -30 "$L/build_base.txt"; fin 1; }; fi
cuobjdump --dump-resource-usage day50_gpt/build/gpt.o > "$L/resource_usage.txt" 2>&1
say "built"
fail=0
(cd day50_gpt && timeout 330 ./build/gpt --verify --json "$OUT/verify.json") > "$L/verify.txt" 2>&1
rc=$?; say "verify rc=$rc"; [ $rc -eq 0 ] || fail=1
grep -E "FAIL" "$L/verify.txt" | head -20
gen() {  # gen DIR NAME
  (cd "$1" && timeout 120 ./build/gpt --bench --bench-part generate --json "$OUT/gen_$2.json") > "$L/gen_$2.txt" 2>&1
  rc=$?; say "generate $2 rc=$rc"; [ $rc -eq 0 ] || fail=1
}
for i in $(seq 1 "$ROUNDS"); do
  if [ -n "${AB_BASE:-}" ]; then
    if [ $((i % 2)) -eq 1 ]; then gen /tmp/ab_base/day50_gpt "${i}_base"; gen "$ROOT/day50_gpt" "${i}_var"
    else gen "$ROOT/day50_gpt" "${i}_var"; gen /tmp/ab_base/day50_gpt "${i}_base"; fi
  else
    gen "$ROOT/day50_gpt" "${i}_var"
  fi
done
health after || fail=3
grep -h "one cluster of 16" "$L"/gen_*.txt | sort
fin $fail
