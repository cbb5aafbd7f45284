#!/usr/bin/env bash
# scripts/rerun_day50.sh PART: every day50 results file of one build, re-run on a machine with two GPUs of one
# host, in four parts of one 10-minute device call each, issued back to back on the same machine (it keeps its
# build and PyTorch's compile caches between calls; a machine left idle goes back within a minute).
#   checks  t=0, GPU 1: PyTorch's max-autotune training variant compiled once, nothing timed (its cold compile
#           is the long one: it times candidate kernels for every GEMM shape, and on a fresh H200 it had not
#           finished after 314 s, where eager, default and reduce-overhead took 19, 37 and 30 s), then
#           compute-sanitizer's initcheck; beside it the build, then GPU 0: gpt --verify (the gate: a failure
#           stops here), the PyTorch oracle, the initcheck probe, with AB_ROUNDS=N AB_DIR=DIR N runs of the
#           bf16 step's rows into DIR (what scripts/ab_rows.py reads; with AB_BASE=BASEDIR too, N runs of a base
#           build in turn with this one's: below), compute-sanitizer's memcheck and racecheck
#           (left to the part sanitize, and said so, when under 280 s of the call remain)
#   sanitize GPU 0: compute-sanitizer's memcheck and racecheck alone, sanitize.json packed with the results
#   bench   both GPUs: the data-parallel checks and make bench-multi; then GPU 0: make bench, while GPU 1 runs
#           make trace and then compiles PyTorch's other variants (torch_peer.py --quick --skip-ours, untimed)
#   peer    GPU 0: the full peer run (make peer's command) on the caches the parts before filled (at edfc621 only
#           max-autotune's: it compiled the other four itself), then, with time left, the generation-only run; GPU 1 idle
#   gen     GPU 0: the generation-only run alone (for a call where the part peer had no time left for it)
#   multi   every GPU of the host (results/<gpu>x<N>/): the data-parallel checks and make bench-multi alone (about
#           three minutes): the multi-GPU files of a build whose one-GPU files were measured on a machine of one GPU
#           (the code unchanged since); skipped (77) with fewer than two GPUs
#   warm    one GPU only, before bench: PyTorch's variants compiled with nothing else on the GPU, max-autotune's
#           memory probe first, then the others (untimed: it fills Inductor's caches for the part peer)
#   traces  GPU 0: make trace-peer (PyTorch's reduce-overhead and max-autotune steps traced kernel by kernel, on
#           the caches the parts before filled); a part of its own so that nothing runs beside the peer's timings
# bench, peer and traces reuse the checks part's build (the sources are copied anew each call, so the outputs are touched
# to stay newer; on a fresh machine make rebuilds, about two minutes). A part that finds a step too long for its
# call's time skips it and says so. Each part checks the GPUs' health first and last (nvidia-smi -q -d
# PERFORMANCE: a HW slowdown or power brake makes timings meaningless), and, with OUT set (the device tool's
# output folder), packs the results files it wrote and its logs into OUT/results.tgz and OUT/logs.tgz.
# Unpack each call's results.tgz into the tree before the next call: the tree (results/ with it) is copied anew each
# call, so a file two parts both write (sanitize.json: initcheck in checks, memcheck and racecheck in sanitize) would
# otherwise come back from the later part with the earlier part's entries as they were before the loan.
# On a machine with one GPU (ONE=1, set from nvidia-smi) the parts run what one GPU can, one thing after another:
# checks compiles nothing of PyTorch's beside its steps (max-autotune picks its kernels by timing candidates on the
# GPU, and the A/B rounds are timed), and runs memcheck, racecheck and initcheck at once beside its checks (nothing
# in it is timed) or, with A/B rounds, after them, one after another; the part warm compiles
# PyTorch's variants alone, in a call of its own before bench; bench leaves out the data-parallel checks and
# make bench-multi, whose files (results/<gpu>x2/) then stay those of the last two-GPU run (the part multi, on a
# later loan of two), and runs make trace before make bench instead of beside it. (A loan of one GPU in this mode
# before the part warm existed compiled PyTorch's variants beside the checks: 2026-12-01, build d68f0e1.)
# What the parts took on one H200 at db5a91a (2026-12-01, one machine, back to back; plan a loan's device time by them,
# about 1,800 s a session with about 70 s to start a machine): checks 415 s (its build 113), memcheck and initcheck alone
# together 352, bench 140, gen 138 (PyTorch's decoders compiled cold in it), warm's max-autotune probe 318, traces 189;
# the full peer run took 309 s on warm caches at d68f0e1 (its config.seconds), and 429 s at edfc621 (441 s of its call): the
# call before it, on the fresh machine, built the code (95 s) and ran warm, whose quick run of the other four variants,
# given 108 s after the 322 s probe, stopped in their memory probes, so the timed run compiled them; no time was left in
# its call for the generation-only run.
# Outside these parts, on a fresh H200 at 3387e05: `bash scripts/run_all.sh day50_gpt` (the build, the host tests,
# --verify, the bad arguments) took 306 s and `make -C day50_gpt bench` after it 122 s. All of them do not fit one session:
# checks, warm, bench and peer come first; the rest can follow on a later loan while the day50 code stays as it is.
# Exit: 0 done, 1 a step failed, 2 usage, 3 unhealthy, 77 a part that this machine cannot run.
set -u
cd "$(dirname "$0")/.." || exit 2
part=${1:-}
case "$part" in checks|bench|multi|warm|peer|gen|traces|sanitize) ;; *) echo "usage: scripts/rerun_day50.sh checks|bench|multi|warm|peer|gen|traces|sanitize"; exit 2;; esac
case "${AB_ROUNDS:-0}" in ''|*[!0-9]*) echo "rerun_day50.sh: AB_ROUNDS is a count of runs"; exit 2;; esac
if [ "${AB_ROUNDS:-0}" -gt 0 ]; then  # checked before any GPU work
  case "${AB_DIR:-}" in results/*/*) ;; *) echo "rerun_day50.sh: AB_DIR names a folder under results/<gpu>/ for the rounds"; exit 2;; esac
fi
# AB_BASE=BASEDIR (checks part, with AB_ROUNDS and AB_DIR): the build before a change, against this one in the same
# call. BASEDIR (a folder of the tree that git does not ignore, so that it travels to the device) holds the base's
# versions of the files the change touched, at their paths in the repository (BASEDIR/day50_gpt/nn/gemm_sm90.cu),
# and BASEDIR/.repo-commit the base's commit line. The base is built in /tmp/ab_base beside this build, and each
# round runs both, in turn (base, var, var, base, ...), into AB_DIR/round_<i>_base.json and round_<i>_var.json;
# scripts/ab_builds.py reads them (AB_DIR/ab_builds.json), scripts/ab_rows.py the variant's rounds.
if [ -n "${AB_BASE:-}" ]; then
  [ "${AB_ROUNDS:-0}" -gt 0 ] || { echo "rerun_day50.sh: AB_BASE goes with AB_ROUNDS and AB_DIR"; exit 2; }
  [ "$part" = checks ] || { echo "rerun_day50.sh: AB_BASE is the checks part's"; exit 2; }
  [ -d "$AB_BASE" ] && [ -f "$AB_BASE/.repo-commit" ] || { echo "rerun_day50.sh: AB_BASE names a folder with the base's files and its .repo-commit"; exit 2; }
fi
ROOT=$PWD
OUT=${OUT:-$ROOT/build/rerun_day50}
L=$OUT/logs
CALL_S=${CALL_S:-570}  # what a part may use of its call (the device tool's limit is 600 s, the transfers included)
mkdir -p "$L"
touch "$OUT/.t0"
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { local l=$(( CALL_S - ($(date +%s) - t0) )); echo $(( l > 1 ? l : 1 )); }  # (timeout 0 would mean no limit)
killtree() { local c; for c in $(pgrep -P "$1"); do killtree "$c"; done; kill "$1" 2>/dev/null; }  # a side job and what it started
health() {
  nvidia-smi -q -d PERFORMANCE > "$L/health_$1.txt" 2>&1 || { say "health $1: nvidia-smi failed"; return 1; }
  if grep -E "HW Slowdown|HW Power Brake|HW Thermal|SW Thermal" "$L/health_$1.txt" | grep -v "Not Active" | grep -q Active; then
    say "health $1: SLOWDOWN ACTIVE"; return 1
  fi
  say "health $1: healthy"
}
pack() {
  (cd "$ROOT" && find results -type f -newer "$OUT/.t0" > "$OUT/new.txt" && tar czf "$OUT/results.tgz" -T "$OUT/new.txt")
  (cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
}
# PyTorch's variants compiled, nothing timed: fills Inductor's caches (kept in /tmp between calls on one machine).
warm() {  # warm GPU LOG LIMIT ARGS...
  local gpu=$1 log=$2 limit=$3; shift 3
  (cd day50_gpt && CUDA_VISIBLE_DEVICES=$gpu PYTHONUNBUFFERED=1 timeout "$limit" python3 torch_peer.py --quick --skip-ours "$@") \
    > "$L/$log" 2>&1
  echo "warm-up rc=$? ($limit s allowed)" >> "$L/$log"
}
# The generation-only peer run on GPU 0 with what is left of the call (the parts peer and gen).
gen_only() {
  (cd day50_gpt && CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 timeout "$(left)" python3 torch_peer.py --generation-only) \
    > "$L/peer_gen.log" 2>&1 || fail=1
  say "generation-only: $(tail -1 "$L/peer_gen.log")"
}
fail=0
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
ONE=0; [ "$ngpu" -eq 1 ] && ONE=1
health before || { pack; exit 3; }
say "GPUs: $ngpu$([ $ONE -eq 1 ] && echo ' (one: the data-parallel steps are left out)')"
if [ "$part" != checks ] && [ -x day50_gpt/build/gpt ]; then
  find day50_gpt/build build -type f -exec touch {} + 2>/dev/null  # the checks part's build, kept on this machine
fi
case "$part" in
checks)
  side=
  if [ $ONE -eq 0 ]; then
    (warm 1 warm_max_autotune.log 380 --memory-of max-autotune
     CUDA_VISIBLE_DEVICES=1 TOOLS=initcheck SANITIZE_TIMEOUT=300 timeout 320 scripts/sanitize.sh day50_gpt \
       > "$L/sanitize_initcheck.log" 2>&1
     echo "sanitize rc=$?" >> "$L/sanitize_initcheck.log") &
    side=$!
  fi  # one GPU: nothing beside this part's steps (PyTorch's compiles: the part warm); initcheck after memcheck
  if [ -n "${AB_BASE:-}" ]; then  # the base build beside this one (the tree with the base's files over it)
    rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base && cp -r Makefile common day50_gpt /tmp/ab_base/ &&
      rm -rf /tmp/ab_base/day50_gpt/build && cp -r "$AB_BASE"/. /tmp/ab_base/
    (make -C /tmp/ab_base/day50_gpt -j"$(nproc)" build/gpt > "$L/build_base.log" 2>&1; echo "rc=$?" >> "$L/build_base.log") &
    base_build=$!
  fi
  make -C day50_gpt -j"$(nproc)" > "$L/build_$part.log" 2>&1 || { say "build failed"; tail -20 "$L/build_$part.log"; [ -n "$side" ] && killtree $side; wait; pack; exit 1; }
  make tools > "$L/tools_$part.log" 2>&1
  say "built"
  # One GPU and no A/B rounds: nothing in this part is timed, so the three sanitizers (each a process of its own,
  # merging into sanitize.json under sanitize.sh's lock) run beside the checks below, which saves the call most
  # of their sum (memcheck 193 s, racecheck 71 s, initcheck about 150 s alone at f0d2f32). PyTorch compiles
  # nothing here: even its default mode times candidate configurations, so it stays for the part warm, alone.
  # Sharing the GPU slows them: at db5a91a, beside --verify, the oracle and the probe, racecheck took 109 s, and
  # memcheck and initcheck ran past the 300 s they were given then (alone together, later: 351 and 333 s), so
  # each gets the rest of the call.
  together=0; sides=()
  if [ $ONE -eq 1 ] && [ "${AB_ROUNDS:-0}" -eq 0 ]; then
    together=1
    for t in memcheck racecheck initcheck; do
      (CUDA_VISIBLE_DEVICES=0 TOOLS=$t SANITIZE_TIMEOUT=$(( $(left) > 30 ? $(left) - 15 : 15 )) timeout "$(left)" scripts/sanitize.sh day50_gpt \
         > "$L/sanitize_$t.log" 2>&1
       echo "sanitize rc=$?" >> "$L/sanitize_$t.log") &
      sides+=($!)
    done
    say "memcheck, racecheck and initcheck started beside the checks"
  fi
  slow=1; [ $together -eq 1 ] && slow=2  # the GPU shared with the sanitizers: the limits doubled
  (cd day50_gpt && CUDA_VISIBLE_DEVICES=0 timeout $((200 * slow)) ./build/gpt --verify --json "../results/{gpu}/day50_gpt-verify.json") > "$L/verify.log" 2>&1
  rc=$?; say "verify rc=$rc: $(grep -E '^RESULT' "$L/verify.log")"
  if [ $rc -ne 0 ]; then
    grep FAIL "$L/verify.log" | head; [ -n "$side" ] && killtree $side
    for j in ${sides[@]+"${sides[@]}"}; do killtree "$j"; done; wait; pack; exit 1
  fi
  (cd day50_gpt && CUDA_VISIBLE_DEVICES=0 timeout $((150 * slow)) python3 torch_oracle.py) > "$L/oracle.log" 2>&1 || fail=1
  say "oracle: $(tail -1 "$L/oracle.log")"
  (cd day50_gpt && CUDA_VISIBLE_DEVICES=0 timeout $((60 * slow)) bash dev/initcheck_probe.sh) > "$L/initcheck_probe.log" 2>&1 || fail=1
  # AB_ROUNDS=N AB_DIR=results/<gpu>/<folder>: N runs of the bf16 step's rows (about 19 s each on an H200), read
  # with scripts/ab_rows.py; before the sanitizers, so that GPU 0 runs nothing else meanwhile. Paths relative to the
  # repository (the script runs from its root), so that the logs and ab_rows.json committed with them name no machine.
  if [ "${AB_ROUNDS:-0}" -gt 0 ] && [ -z "${AB_BASE:-}" ]; then
    mkdir -p "$AB_DIR"
    for i in $(seq 1 "$AB_ROUNDS"); do
      (cd day50_gpt && CUDA_VISIBLE_DEVICES=0 timeout 60 ./build/gpt --bench --bench-part train-bf16 \
         --json "../$AB_DIR/round_$i.json") > "$AB_DIR/round_$i.log" 2>&1 || fail=1
    done
    python3 scripts/ab_rows.py "$AB_DIR"/round_*.json --json "$AB_DIR/ab_rows.json" > "$L/ab_rows.txt" 2>&1 || fail=1
    say "A/B rounds: $AB_ROUNDS in $AB_DIR"; cat "$L/ab_rows.txt"
  elif [ "${AB_ROUNDS:-0}" -gt 0 ]; then
    mkdir -p "$AB_DIR"
    wait "$base_build"
    if grep -q "^rc=0" "$L/build_base.log"; then
      for i in $(seq 1 "$AB_ROUNDS"); do
        order="base var"; [ $((i % 2)) -eq 0 ] && order="var base"  # base, var, var, base, base, var, ...
        for who in $order; do
          dir=day50_gpt; [ "$who" = base ] && dir=/tmp/ab_base/day50_gpt
          (cd "$dir" && CUDA_VISIBLE_DEVICES=0 timeout 60 ./build/gpt --bench --bench-part train-bf16 \
             --json "$ROOT/$AB_DIR/round_${i}_$who.json") > "$AB_DIR/round_${i}_$who.log" 2>&1 || fail=1
        done
      done
      # the base runs from /tmp/ab_base, so both builds were given absolute --json paths: the committed logs name them
      # relative to the repository, as the other parts' logs do
      sed -i "s#$ROOT/##g" "$AB_DIR"/round_*_base.log "$AB_DIR"/round_*_var.log
      python3 scripts/ab_builds.py --base "$AB_DIR"/round_*_base.json --var "$AB_DIR"/round_*_var.json \
        --json "$AB_DIR/ab_builds.json" > "$L/ab_builds.txt" 2>&1 || fail=1
      python3 scripts/ab_rows.py "$AB_DIR"/round_*_var.json --json "$AB_DIR/ab_rows.json" > "$L/ab_rows.txt" 2>&1 || fail=1
      say "A/B rounds of two builds: $AB_ROUNDS in $AB_DIR"; cat "$L/ab_builds.txt"
    else
      say "the base build failed: no A/B rounds"; tail -5 "$L/build_base.log"; fail=1
    fi
  fi
  # memcheck and racecheck took 193 + 71 s at f0d2f32; with six A/B rounds on a fresh machine (its build and
  # cold caches) they ran out of the call, so with too little time left they are left to the part `sanitize`.
  if [ $together -eq 1 ]; then
    for j in ${sides[@]+"${sides[@]}"}; do wait "$j"; done
  elif [ "$(left)" -ge 280 ]; then
    CUDA_VISIBLE_DEVICES=0 TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=300 timeout "$(left)" scripts/sanitize.sh day50_gpt \
      > "$L/sanitize_memcheck_racecheck.log" 2>&1
    echo "sanitize rc=$?" >> "$L/sanitize_memcheck_racecheck.log"
    if [ $ONE -eq 1 ]; then  # initcheck after them on the one GPU (it took about 150 s), or left to the part sanitize
      if [ "$(left)" -ge 170 ]; then
        CUDA_VISIBLE_DEVICES=0 TOOLS=initcheck SANITIZE_TIMEOUT=300 timeout "$(left)" scripts/sanitize.sh day50_gpt \
          > "$L/sanitize_initcheck.log" 2>&1
        echo "sanitize rc=$?" >> "$L/sanitize_initcheck.log"
      else
        echo "not run: $(left) s left; run the part sanitize with TOOLS=initcheck" > "$L/sanitize_initcheck.log"
        echo "sanitize rc=skipped" >> "$L/sanitize_initcheck.log"
      fi
    fi
  else
    echo "not run: $(left) s left; run the part sanitize" > "$L/sanitize_memcheck_racecheck.log"
    echo "sanitize rc=skipped" >> "$L/sanitize_memcheck_racecheck.log"
    say "memcheck and racecheck: no time left ($(left) s), run: scripts/rerun_day50.sh sanitize"
    if [ $ONE -eq 1 ]; then
      echo "not run: $(left) s left; run the part sanitize with TOOLS=initcheck" > "$L/sanitize_initcheck.log"
      echo "sanitize rc=skipped" >> "$L/sanitize_initcheck.log"
    fi
  fi
  [ -n "$side" ] && wait $side
  logs="sanitize_memcheck_racecheck sanitize_initcheck"; [ $together -eq 1 ] && logs="sanitize_memcheck sanitize_racecheck sanitize_initcheck"
  for f in $logs; do
    say "$f: $(grep -E '^(PASS|FAIL)' "$L/$f.log" | awk '{print $1, $3}' | tr '\n' ' ')$(tail -1 "$L/$f.log")"
    grep -q "sanitize rc=0\|sanitize rc=skipped" "$L/$f.log" || fail=1
  done
  [ $ONE -eq 0 ] && say "$(tail -1 "$L/warm_max_autotune.log")"
  [ $ONE -eq 1 ] && say "one GPU: PyTorch's variants not compiled here; run the part warm before bench"
  ;;
warm)
  [ $ONE -eq 1 ] || { say "warm is the one-GPU machines' part (with two, checks and bench compile on the second GPU)"; pack; exit 77; }
  warm 0 warm_max_autotune.log 380 --memory-of max-autotune
  say "$(tail -1 "$L/warm_max_autotune.log")"
  rest=$(( $(left) - 10 ))
  if [ $rest -gt 30 ]; then warm 0 warm_others.log $rest; else echo "no time for the warm-up" > "$L/warm_others.log"; fi
  say "$(tail -1 "$L/warm_others.log")"
  ;;
bench)
  make -C day50_gpt -j"$(nproc)" > "$L/build_$part.log" 2>&1 || { say "build failed"; pack; exit 1; }
  make tools > "$L/tools_$part.log" 2>&1
  say "build checked"
  if [ $ONE -eq 1 ]; then
    (CUDA_VISIBLE_DEVICES=0 timeout 170 make trace > "$L/trace.log" 2>&1; echo "trace rc=$?" >> "$L/trace.log")
    say "one GPU: no data-parallel checks, no bench-multi; $(tail -1 "$L/trace.log")"
    CUDA_VISIBLE_DEVICES=0 timeout "$(left)" make -C day50_gpt bench > "$L/bench.log" 2>&1 || fail=1
    say "bench: $(grep -E '^RESULT' "$L/bench.log" | tr '\n' ' ')"
    grep -q "trace rc=0" "$L/trace.log" || fail=1
  else
    (cd day50_gpt && timeout 120 ./build/gpt --verify --verify-only dp --json "../results/{gpu}x{gpus}/day50_gpt-verify_dp.json") > "$L/verify_dp.log" 2>&1 || fail=1
    say "verify dp: $(grep -E '^RESULT' "$L/verify_dp.log")"
    timeout 240 make -C day50_gpt bench-multi > "$L/bench_multi.log" 2>&1 || fail=1
    say "bench-multi: $(grep -E '^RESULT' "$L/bench_multi.log")"
    (CUDA_VISIBLE_DEVICES=1 timeout 170 make trace > "$L/trace.log" 2>&1; echo "trace rc=$?" >> "$L/trace.log"
     rest=$(( $(left) - 10 ))
     if [ $rest -gt 30 ]; then warm 1 warm_others.log $rest; else echo "no time for the warm-up" > "$L/warm_others.log"; fi) &
    side=$!
    CUDA_VISIBLE_DEVICES=0 timeout "$(left)" make -C day50_gpt bench > "$L/bench.log" 2>&1 || fail=1
    say "bench: $(grep -E '^RESULT' "$L/bench.log" | tr '\n' ' ')"
    wait $side
    say "$(tail -1 "$L/trace.log"); $(tail -1 "$L/warm_others.log")"
    grep -q "trace rc=0" "$L/trace.log" || fail=1
  fi
  ;;
multi)
  [ "$ngpu" -ge 2 ] || { say "multi needs two GPUs or more: $ngpu here (skipped)"; pack; exit 77; }
  make -C day50_gpt -j"$(nproc)" > "$L/build_$part.log" 2>&1 || { say "build failed"; pack; exit 1; }
  say "built"
  (cd day50_gpt && timeout 120 ./build/gpt --verify --verify-only dp --json "../results/{gpu}x{gpus}/day50_gpt-verify_dp.json") > "$L/verify_dp.log" 2>&1 || fail=1
  say "verify dp: $(grep -E '^RESULT' "$L/verify_dp.log")"
  timeout "$(left)" make -C day50_gpt bench-multi > "$L/bench_multi.log" 2>&1 || fail=1
  say "bench-multi: $(grep -E '^RESULT' "$L/bench_multi.log")"
  ;;
peer)
  make -C day50_gpt -j"$(nproc)" > "$L/build_$part.log" 2>&1 || { say "build failed"; pack; exit 1; }
  say "build checked"
  (cd day50_gpt && CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 timeout "$(left)" python3 torch_peer.py) > "$L/peer.log" 2>&1 || fail=1
  say "peer: $(tail -1 "$L/peer.log")"
  if [ "$(left)" -gt 160 ]; then  # the generation-only run took 139 s on one loan and 95 s on another (its config.seconds)
    gen_only
  else
    say "no time for the generation-only run ($(left) s left): run the part gen, or its file stays the last one"
  fi
  ;;
gen)
  make -C day50_gpt -j"$(nproc)" > "$L/build_$part.log" 2>&1 || { say "build failed"; pack; exit 1; }
  say "build checked"
  gen_only
  ;;
sanitize)
  # The checks part's build, then memcheck and racecheck on GPU 0 (a call of their own when the checks part
  # had no time left for them); sanitize.json comes back with the other results.
  make -C day50_gpt -j"$(nproc)" > "$L/build_$part.log" 2>&1 || { say "build failed"; pack; exit 1; }
  tools=${TOOLS:-memcheck racecheck}; log=sanitize_$(echo "$tools" | tr ' ' '_')
  CUDA_VISIBLE_DEVICES=0 TOOLS="$tools" SANITIZE_TIMEOUT=300 timeout "$(left)" scripts/sanitize.sh day50_gpt \
    > "$L/$log.log" 2>&1
  echo "sanitize rc=$?" >> "$L/$log.log"
  say "sanitize: $(grep -E '^(PASS|FAIL)' "$L/$log.log" | awk '{print $1, $3}' | tr '\n' ' ')"
  grep -q "sanitize rc=0" "$L/$log.log" || fail=1
  ;;
traces)
  make tools > "$L/tools_$part.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 timeout "$(left)" make trace-peer > "$L/trace_peer.log" 2>&1 || fail=1
  say "trace-peer: $(grep -E '^RESULT' "$L/trace_peer.log" | tr '\n' ' ')"
  ;;
esac
health after || fail=1
pack
say "done, $([ $fail -eq 0 ] && echo all steps passed || echo A STEP FAILED: see the logs)"
exit $fail
