#!/usr/bin/env bash
# The call that wrote step17_dev/stage_floor_*.json and step18_dev/stage_floor_var_*.json, kept as it ran: placed as
# ab_var/run.sh in the tree of wip/xcluster (711eca5), with ab_var/decode_cluster.cuh and ab_var/.repo-commit those
# of wip/attn-merge (f9e3f34), and run from the repository root as `OUT=$OUT bash ab_var/run.sh`.
# stage_floor of this tree (base) and of this tree with ab_var/decode_cluster.cuh (var), in turn:
# base, var, base, var, base -> $OUT/floor_<i>_<base|var>.json; logs in $OUT/logs; one results.tgz.
set -u
cd "$(dirname "$0")/../day50_gpt"
. dev/gpu_lib.sh
health before || fin 3
rm -rf /tmp/var && mkdir -p /tmp/var
(cd .. && tar cf - --exclude=./results --exclude=./day50_gpt/build --exclude=./ab_var . | (cd /tmp/var && tar xf -))
cp ../ab_var/decode_cluster.cuh /tmp/var/day50_gpt/nn/kernels/ && cp ../ab_var/.repo-commit /tmp/var/.repo-commit
(make -C /tmp/var/day50_gpt -j8 build/stage_floor > "$L/build_var.txt" 2>&1; echo "rc=$?" >> "$L/build_var.txt") &
make -j8 build/stage_floor > "$L/build.txt" 2>&1; echo "rc=$?" >> "$L/build.txt"
wait
grep -q "rc=0" "$L/build.txt" && grep -q "rc=0" "$L/build_var.txt" || { say "a build failed"; tail -5 "$L"/build*.txt; fin 1; }
say built
rc=0; i=0
for w in base var base var base; do
  i=$((i + 1))
  if [ $w = base ]; then B=$PWD; else B=/tmp/var/day50_gpt; fi
  (cd "$B" && timeout 120 ./build/stage_floor --json "$OUT/floor_${i}_$w.json") > "$L/floor_${i}_$w.txt" 2>&1 || rc=1
  say "run $i $w rc=$rc"
done
health after || { [ $rc -eq 0 ] && rc=3; }
grep -hE "FAIL|not run: no" "$L"/floor_*.txt | head
for f in "$L/floor_1_base.txt" "$L/floor_2_var.txt"; do echo "== $(basename "$f")"; grep -A1 "^  attention" "$f" | cut -c1-150; done
fin $rc
