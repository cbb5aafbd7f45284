#!/usr/bin/env bash
# call 3: ROUNDS rounds of --bench --bench-part generate, aff9915's build (/tmp/ab_base) and this one in turn
# (base, var, var, base, ...), into $OUT/gen_<i>_<base|var>.json; the dev library's health, gen, summary, fin.
set -u
. day50_gpt/dev/gpu_lib.sh
ROUNDS=${ROUNDS:-4}
ROOT=$PWD
fail=0
health before || fin 3
[ -x /tmp/ab_base/day50_gpt/build/gpt ] || { say "no base build"; fin 1; }
find day50_gpt/build -type f -exec touch {} +
cp /tmp/ab_base_build.log "$L/build_base.txt" 2>/dev/null
grep -A3 "Compiling entry function '_ZN1k3dec14decode_cluster" "$L/build_base.txt" | grep -E "Compiling|spill|Used" > "$L/ptxas_decode_cluster_base.txt"
B=/tmp/ab_base/day50_gpt; V=$ROOT/day50_gpt
for i in $(seq 1 "$ROUNDS"); do
  [ $(( $(date +%s) + 75 )) -le "${DEADLINE:-99999999999}" ] || { say "round $i: no time left"; break; }
  if [ $((i % 2)) -eq 1 ]; then gen $B build "${i}_base"; gen $V build "${i}_var"
  else gen $V build "${i}_var"; gen $B build "${i}_base"; fi
done
health after || fail=3
summary
fin $fail
