#!/usr/bin/env bash
# scripts/sanitize.sh: compute-sanitizer over every lesson's verification mode (`make sanitize`).
#
# Runs each program with `--verify --small` (small and odd shapes: the sanitizer makes
# kernels one to two orders of magnitude slower) under memcheck (out-of-bounds and
# misaligned accesses, leaks), racecheck (shared-memory hazards) and initcheck (reads of
# uninitialized device memory). A program passes a tool when the tool reports 0 errors and
# the program itself passes its checks. Needs a GPU; without one everything is SKIP.
# Writes results/<gpu>/sanitize.json (the tools' own counts, parsed from their output) and
# prints "N passed, N failed, N skipped".
# Usage: scripts/sanitize.sh [dayNN_x ...]   (default: every lesson). With lessons named, their
# entries in sanitize.json (for the tools run) are replaced and the rest are kept (each entry is dated).
# TOOLS="memcheck racecheck" picks tools; two runs with different TOOLS may run at once, each on a GPU of
# its own (CUDA_VISIBLE_DEVICES): each writes a file of its own and merges it into sanitize.json under a lock.
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
LOG=$ROOT/build/sanitize-logs
mkdir -p "$LOG"
export TOOLCHAIN_QUIET=1
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
TOOLS=${TOOLS:-memcheck racecheck initcheck}
TIMEOUT=${SANITIZE_TIMEOUT:-900}

if [ $# -gt 0 ]; then LESSONS=("$@"); else
  LESSONS=(); for m in day*/Makefile; do [ -f "$m" ] && LESSONS+=("${m%/Makefile}"); done
fi
for d in "${LESSONS[@]}"; do
  make -s -j"$(nproc)" -C "$d" all >>"$LOG/build.log" 2>&1 || { echo "FAIL  build $d (see $LOG/build.log)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
done

pass=0; fail=0; skip=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
if [ -z "$gpu" ] || [ ! -x "$CS" ]; then
  why=$([ -z "$gpu" ] && echo "no GPU" || echo "compute-sanitizer not found")
  for d in "${LESSONS[@]}"; do for t in $TOOLS; do printf 'SKIP  %-40s %s\n' "$d $t" "$why"; skip=$((skip+1)); done; done
  echo "$pass passed, $fail failed, $skip skipped"; exit 0
fi
slug=$(echo "$gpu" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
out="$ROOT/results/$slug/sanitize.json"
mkdir -p "$(dirname "$out")"
entries=()
for d in "${LESSONS[@]}"; do
  for p in $(make -s --no-print-directory -C "$d" print-PROGRAMS); do
    for t in $TOOLS; do
      log="$LOG/${d}_${p}_$t.log"
      extra=(); [ "$t" = memcheck ] && extra=(--leak-check full)
      # A lesson may restrict racecheck to its own kernels (RACECHECK_KERNELS_<program>: a regex of
      # kernel names), when the libraries' kernels make a full run too slow; the entry records it.
      filter=""; [ "$t" = racecheck ] && filter=$(make -s --no-print-directory -C "$d" "print-RACECHECK_KERNELS_$p" 2>/dev/null)
      [ -n "$filter" ] && extra+=(--kernel-regex "kns=$filter")
      # ... and extra program arguments for racecheck (RACECHECK_ARGS_<program>), e.g. to keep a library
      # kernel that cannot run beside the tool out of the run; the entry records them too.
      pargs=""; [ "$t" = racecheck ] && pargs=$(make -s --no-print-directory -C "$d" "print-RACECHECK_ARGS_$p" 2>/dev/null)
      start=$(date +%s)
      (cd "$d" && timeout "$TIMEOUT" "$CS" --tool "$t" "${extra[@]}" "./build/$p" --verify --small $pargs) >"$log" 2>&1; rc=$?
      secs=$(( $(date +%s) - start ))
      # memcheck/initcheck end with "ERROR SUMMARY: N errors"; racecheck with
      # "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)": count both E and W.
      # (past --print-limit, a second line "ERROR SUMMARY: M errors were not printed" follows: not the count)
      errs=$(grep -E 'ERROR SUMMARY: [0-9]+' "$log" | grep -v 'not printed' | tail -n1 | grep -oE 'SUMMARY: [0-9]+' | grep -oE '[0-9]+')
      if [ -z "$errs" ]; then
        errs=$(grep -oE 'RACECHECK SUMMARY: .*\(([0-9]+) errors, ([0-9]+) warnings\)' "$log" | tail -n1 |
               sed -E 's/.*\(([0-9]+) errors, ([0-9]+) warnings\)/\1 \2/' | awk '{print $1 + $2}')
      fi
      [ -n "$errs" ] || errs=-1
      result=$(grep -m1 '^RESULT' "$log" | cut -c1-60)
      if [ "$rc" -eq 77 ]; then status=SKIP; skip=$((skip+1))
      elif [ "$rc" -eq 0 ] && [ "$errs" = 0 ]; then status=PASS; pass=$((pass+1))
      else status=FAIL; fail=$((fail+1)); fi
      printf '%-5s %-40s %s errors, exit %s, %ss  %s\n' "$status" "$d/$p $t" "$errs" "$rc" "$secs" "$result"
      [ "$status" = FAIL ] && grep -m5 -E '^========= +(Invalid|Race|Uninitialized|Error|Leaked|Warning)|Program hit' "$log" | sed 's/^/        /'
      entries+=("{\"program\": \"$d/$p\", \"tool\": \"$t\", \"args\": \"--verify --small${pargs:+ $pargs}\", \"kernels\": \"${filter:-all}\", \"sanitizer_options\": \"${extra[*]}\", \"errors\": $errs, \"exit_code\": $rc, \"seconds\": $secs, \"status\": \"$status\", \"program_result\": \"$result\", \"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}")
    done
  done
done
{
  echo "{"
  echo "  \"what\": \"compute-sanitizer over every lesson's --verify --small\","
  echo "  \"gpu\": \"$gpu\","
  echo "  \"sanitizer\": \"$("$CS" --version 2>/dev/null | grep -m1 -oE 'Version [0-9.]+' )\","
  echo "  \"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  # The code the programs were built from (the build stamp every program links: .repo-commit, or git).
  stamp=$(make -s --no-print-directory -C day01_setup print-REPO_STAMP 2>/dev/null)
  c=$(echo "$stamp" | awk '{print $1}'); dflag=$(echo "$stamp" | awk '{print $2}')
  echo "  \"env\": {\"gpu\": \"$gpu\", \"commit\": \"${c:-unknown}\", \"dirty\": $([ "$dflag" = 0 ] && echo false || ([ "$dflag" = 1 ] && echo true || echo \"unknown\")), \"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"},"
  echo "  \"runs\": ["
  for i in "${!entries[@]}"; do sep=$([ "$i" -lt $((${#entries[@]}-1)) ] && echo "," || echo ""); echo "    ${entries[$i]}$sep"; done
  echo "  ],"
  echo "  \"passed\": $([ $fail -eq 0 ] && echo true || echo false)"
  echo "}"
} >"$out.new.$$"
# Another run (other tools, another GPU) may be merging into the same file: one at a time, by a lock folder
# (mkdir either makes it or fails, atomically; no flock needed). A lock older than 10 minutes is a dead run's.
lock="$out.lock.d"
until mkdir "$lock" 2>/dev/null; do
  [ -n "$(find "$lock" -maxdepth 0 -mmin +10 2>/dev/null)" ] && rmdir "$lock" 2>/dev/null
  sleep 1
done
if [ $# -gt 0 ] && [ -f "$out" ]; then
  # Keep the other lessons' entries from the previous file.
  TOOLS_RUN="$TOOLS" python3 - "$out" "$out.new.$$" "$@" <<'PY' || { rmdir "$lock"; echo "FAIL  merging into $out"; exit 1; }
import json, os, sys
old, new, lessons = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3:]
tools = os.environ["TOOLS_RUN"].split()
keep = [r for r in old.get("runs", []) if r["program"].split("/")[0] not in lessons or r["tool"] not in tools]
new["runs"] = keep + new["runs"]
new["what"] = old.get("what", new["what"])
new["passed"] = all(r["status"] != "FAIL" for r in new["runs"])
json.dump(new, open(sys.argv[2], "w"), indent=2)
PY
fi
mv "$out.new.$$" "$out"
rmdir "$lock"
echo "wrote ${out#$ROOT/}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
