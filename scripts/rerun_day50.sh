#!/usr/bin/env bash
# scripts/rerun_day50.sh PART: every day50 results file of one build, re-run on a machine with two GPUs of one
# host, in three parts that each fit a 10-minute call (the order the day50 notes' "Measured" describes).
#   checks  build; GPU 0: gpt --verify (the gate: a failure stops here), the PyTorch oracle, the initcheck probe;
#           GPU 1: the sanitizers, then PyTorch's training variants compiled once (torch_peer.py --quick
#           --skip-ours) so that Inductor's caches are warm for the peer run (on a cold cache its memory
#           probes alone outlasted a 390 s limit on one loan)
#   bench   both GPUs: the data-parallel checks and make bench-multi; then GPU 0: make bench, while GPU 1 runs
#           make trace and the generation-only peer run
#   peer    GPU 0: the full peer run (make peer), alone on the host
# Each part checks the GPUs' health first and last (nvidia-smi -q -d PERFORMANCE: a HW slowdown or power brake
# makes timings meaningless), and, with OUT set (the device tool's output folder), packs the results files it
# wrote and its logs into OUT/results.tgz and OUT/logs.tgz. Exit: 0 done, 1 a step failed, 2 usage, 3 unhealthy.
set -u
cd "$(dirname "$0")/.." || exit 2
part=${1:-}
case "$part" in checks|bench|peer) ;; *) echo "usage: scripts/rerun_day50.sh checks|bench|peer"; exit 2;; esac
ROOT=$PWD
OUT=${OUT:-$ROOT/build/rerun_day50}
L=$OUT/logs
mkdir -p "$L"
touch "$OUT/.t0"
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
health() {
  nvidia-smi -q -d PERFORMANCE > "$L/health_$1.txt" 2>&1
  if grep -E "HW Slowdown|HW Power Brake|HW Thermal|SW Thermal" "$L/health_$1.txt" | grep -v "Not Active" | grep -q Active; then
    say "health $1: SLOWDOWN ACTIVE"; return 1
  fi
  say "health $1: healthy"
}
pack() {
  (cd "$ROOT" && find results -type f -newer "$OUT/.t0" > "$OUT/new.txt" && tar czf "$OUT/results.tgz" -T "$OUT/new.txt")
  (cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
}
fail=0
health before || { pack; exit 3; }
make -C day50_gpt -j"$(nproc)" > "$L/build_$part.log" 2>&1 || { say "build failed"; tail -20 "$L/build_$part.log"; pack; exit 1; }
make tools > "$L/tools_$part.log" 2>&1
case "$part" in
checks)
  (CUDA_VISIBLE_DEVICES=1 SANITIZE_TIMEOUT=400 timeout 470 scripts/sanitize.sh day50_gpt > "$L/sanitize.log" 2>&1
   echo "sanitize rc=$?" >> "$L/sanitize.log"
   cd day50_gpt && CUDA_VISIBLE_DEVICES=1 timeout 200 python3 torch_peer.py --quick --skip-ours > "$L/peer_warm.log" 2>&1
   echo "cache warm-up rc=$?" >> "$L/peer_warm.log") &
  side=$!
  (cd day50_gpt && CUDA_VISIBLE_DEVICES=0 timeout 300 ./build/gpt --verify --json "../results/{gpu}/day50_gpt-verify.json") > "$L/verify.log" 2>&1
  rc=$?; say "verify rc=$rc: $(grep -E '^RESULT' "$L/verify.log")"
  if [ $rc -ne 0 ]; then grep FAIL "$L/verify.log" | head; kill $side 2>/dev/null; wait; pack; exit 1; fi
  (cd day50_gpt && CUDA_VISIBLE_DEVICES=0 timeout 200 python3 torch_oracle.py) > "$L/oracle.log" 2>&1 || fail=1
  say "oracle: $(tail -1 "$L/oracle.log")"
  (cd day50_gpt && CUDA_VISIBLE_DEVICES=0 timeout 100 bash dev/initcheck_probe.sh) > "$L/initcheck_probe.log" 2>&1 || fail=1
  wait $side
  say "$(tail -2 "$L/sanitize.log" | tr '\n' ' ') $(tail -1 "$L/peer_warm.log")"
  grep -q "sanitize rc=0" "$L/sanitize.log" || fail=1
  ;;
bench)
  (cd day50_gpt && timeout 120 ./build/gpt --verify --verify-only dp --json "../results/{gpu}x{gpus}/day50_gpt-verify_dp.json") > "$L/verify_dp.log" 2>&1 || fail=1
  say "verify dp: $(grep -E '^RESULT' "$L/verify_dp.log")"
  timeout 280 make -C day50_gpt bench-multi > "$L/bench_multi.log" 2>&1 || fail=1
  say "bench-multi: $(grep -E '^RESULT' "$L/bench_multi.log")"
  (CUDA_VISIBLE_DEVICES=1 timeout 150 make trace > "$L/trace.log" 2>&1; echo "trace rc=$?" >> "$L/trace.log"
   cd day50_gpt && CUDA_VISIBLE_DEVICES=1 timeout 220 python3 torch_peer.py --generation-only > "$L/peer_gen.log" 2>&1
   echo "generation-only rc=$?" >> "$L/peer_gen.log") &
  side=$!
  CUDA_VISIBLE_DEVICES=0 timeout 330 make -C day50_gpt bench > "$L/bench.log" 2>&1 || fail=1
  say "bench: $(grep -E '^RESULT' "$L/bench.log" | tr '\n' ' ')"
  wait $side
  say "$(tail -1 "$L/trace.log") $(tail -1 "$L/peer_gen.log")"
  grep -q "trace rc=0" "$L/trace.log" && grep -q "generation-only rc=0" "$L/peer_gen.log" || fail=1
  ;;
peer)
  CUDA_VISIBLE_DEVICES=0 timeout 500 make -C day50_gpt peer > "$L/peer.log" 2>&1 || fail=1
  say "peer: $(tail -1 "$L/peer.log")"
  ;;
esac
health after || fail=1
pack
say "done, $([ $fail -eq 0 ] && echo all steps passed || echo A STEP FAILED: see the logs)"
exit $fail
