#!/usr/bin/env bash
# scripts/run_all.sh: the verification behind `make test`.
#
#   1. builds everything that is missing (make -k all);
#   2. runs the host-only unit tests (common/tests and each lesson's HOST_TESTS);
#   3. runs every lesson program in its quick verification mode (--verify), then the lessons'
#      EXTRA_VERIFY commands;
#   4. feeds every program bad arguments (scripts/bad_input.sh): each must exit 2 with one line.
# Prints PASS/FAIL/SKIP per item (a SKIP shows the program's reason), then the line
# "N passed, N failed, N skipped", and exits 1 if anything failed.
# Logs: build/test-logs/. Usage: scripts/run_all.sh [dayNN_x ...]   (default: every lesson)
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
LOG=$ROOT/build/test-logs
rm -rf "$LOG"
mkdir -p "$LOG"
export TOOLCHAIN_QUIET=1

if [ $# -gt 0 ]; then LESSONS=("$@"); else
  LESSONS=(); for m in day*/Makefile; do [ -f "$m" ] && LESSONS+=("${m%/Makefile}"); done
fi
VERIFY_TIMEOUT=${VERIFY_TIMEOUT:-900}

pass=0; fail=0; skip=0
report() {  # status name detail
  printf '%-5s %-44s %s\n' "$1" "$2" "$3"
  case $1 in PASS) pass=$((pass+1));; FAIL) fail=$((fail+1));; SKIP) skip=$((skip+1));; esac
}
var_of() { make -s --no-print-directory -C "$1" "print-$2" 2>/dev/null; }

# 1. Build. `make -k` goes on past a broken lesson, so the others still get tested.
unset TOOLCHAIN_QUIET
if make -k -j"$(nproc)" all >"$LOG/build.log" 2>&1; then
  report PASS build "make -k all"
else
  report FAIL build "see $LOG/build.log"
  grep -E 'error|✗' "$LOG/build.log" | head -20
fi
export TOOLCHAIN_QUIET=1

# 2. Host unit tests (no GPU needed).
for dir in common/tests "${LESSONS[@]}"; do
  for t in $(var_of "$dir" HOST_TESTS); do
    name="$dir/$t"; log="$LOG/${name//\//_}.log"
    if [ ! -x "$dir/build/$t" ]; then report FAIL "$name" "not built (see build.log)"; continue; fi
    (cd "$dir" && timeout 600 "./build/$t") >"$log" 2>&1; rc=$?
    if [ $rc -eq 0 ]; then report PASS "$name" "$(tail -n1 "$log")"
    else report FAIL "$name" "exit $rc: $(grep -m1 -E 'FAIL|error' "$log")"; fi
  done
done

# The plotting script's table generation (and drawing, where matplotlib is installed).
if command -v python3 >/dev/null; then
  python3 scripts/test_plot.py >"$LOG/test_plot.log" 2>&1; rc=$?
  if [ $rc -eq 0 ]; then report PASS "scripts/test_plot.py" "$(grep -c '^ok' "$LOG/test_plot.log") checks$(grep -m1 '^note' "$LOG/test_plot.log" | sed 's/^note */; /')"
  else report FAIL "scripts/test_plot.py" "$(grep -m1 FAIL "$LOG/test_plot.log")"; fi
else
  report SKIP "scripts/test_plot.py" "python3 not found"
fi

# The Python tools' self-tests, each on inputs it makes itself (host-only; no GPU, no profiler):
# the kernel tracer's summary (scripts/trace_kernels.py: host-only parts, and its bad input) and the
# Nsight Compute stall summary (scripts/ncu_stalls.py), a wgmma GEMM's k-loop from a profile or a disassembly
# (scripts/ncu_kloop.py), the reading of a flag's effect across runs of the bf16 bench (scripts/ab_rows.py), and of
# two builds' runs interleaved in one call (scripts/ab_builds.py).
for tool in trace_kernels ncu_stalls ncu_kloop ab_rows ab_builds; do
  if command -v python3 >/dev/null; then
    python3 "scripts/$tool.py" --self-test >"$LOG/$tool.log" 2>&1; rc=$?
    if [ $rc -eq 0 ]; then report PASS "scripts/$tool.py --self-test" "$(tail -n1 "$LOG/$tool.log")"
    else report FAIL "scripts/$tool.py --self-test" "$(grep -m1 FAIL "$LOG/$tool.log")"; fi
  else
    report SKIP "scripts/$tool.py --self-test" "python3 not found"
  fi
done

# The notes against the committed results files: every generated table and inline figure (make check-notes).
if command -v python3 >/dev/null; then
  make -s --no-print-directory check-notes >"$LOG/check-notes.log" 2>&1; rc=$?
  if [ $rc -eq 0 ]; then report PASS "check-notes" "$(tail -n1 "$LOG/check-notes.log")"
  else report FAIL "check-notes" "$(grep -m1 -E '^(differs|cannot resolve|plot.py):' "$LOG/check-notes.log" | cut -c1-120) (log: $LOG/check-notes.log)"; fi
else
  report SKIP "check-notes" "python3 not found"
fi

# 3. Every program in its verification mode.
for dir in "${LESSONS[@]}"; do
  for p in $(var_of "$dir" PROGRAMS); do
    name="$dir/$p --verify"; log="$LOG/${dir}_$p.log"
    if [ ! -x "$dir/build/$p" ]; then report FAIL "$name" "not built (see build.log)"; continue; fi
    (cd "$dir" && timeout "$VERIFY_TIMEOUT" "./build/$p" --verify) >"$log" 2>&1; rc=$?
    case $rc in
      0)  report PASS "$name" "$(grep -m1 '^RESULT' "$log")";;
      77) report SKIP "$name" "$(grep -m1 '^SKIP' "$log" | sed 's/^SKIP: //')";;
      124) report FAIL "$name" "timed out after ${VERIFY_TIMEOUT}s (log: $log)";;
      *)  report FAIL "$name" "exit $rc: $(grep -m1 -E '^  FAIL|error' "$log" | cut -c1-120)"
          grep -E '^  FAIL|error|first at' "$log" | head -10 | sed 's/^/        /';;
    esac
  done
done

# 3b. A lesson's extra verification commands (EXTRA_VERIFY, separated by ';'), e.g. a multi-process run.
for dir in "${LESSONS[@]}"; do
  IFS=';' read -r -a extras <<<"$(var_of "$dir" EXTRA_VERIFY)"
  for cmd in "${extras[@]}"; do
    cmd=$(echo "$cmd" | sed 's/^ *//; s/ *$//'); [ -n "$cmd" ] || continue
    name="$dir/$cmd"; log="$LOG/${dir}_extra_$(echo "$cmd" | tr -c 'A-Za-z0-9' '_' | cut -c1-40).log"
    (cd "$dir" && timeout "$VERIFY_TIMEOUT" bash -c "$cmd") >"$log" 2>&1; rc=$?
    case $rc in
      0)  report PASS "$name" "$(grep -m1 '^RESULT' "$log")";;
      77) report SKIP "$name" "$(grep -m1 'SKIP' "$log" | sed 's/^SKIP: //')";;
      *)  report FAIL "$name" "exit $rc: $(grep -m1 -E '^  FAIL|error' "$log" | cut -c1-120)";;
    esac
  done
done

# 4. Bad input: every program refuses nonsense with exit 2 and one line, GPU or not.
for dir in "${LESSONS[@]}"; do
  for p in $(var_of "$dir" PROGRAMS); do
    name="$dir/$p bad input"; log="$LOG/${dir}_${p}_bad_input.log"
    [ -x "$dir/build/$p" ] || { report FAIL "$name" "not built"; continue; }
    if bash scripts/bad_input.sh "$dir/build/$p" "$(var_of "$dir" "BAD_ARGS_$p")" "$(var_of "$dir" "BAD_ARGS_GPU_$p")" >"$log" 2>&1; then
      report PASS "$name" "$(tail -n1 "$log")"
    else
      report FAIL "$name" "$(grep -m1 'FAIL' "$log")"
    fi
  done
done

echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
