# day50_gpt/dev/gpu_lib.sh: what the development GPU scripts of this folder share (sourced, not run): the output
# folder ($OUT, its logs in $L), a clock for their lines (say), the GPU's health before timing (health: fails
# when nvidia-smi reads a HW slowdown, power brake or thermal slowdown), and the end (fin): every file of $OUT
# packed into one archive, results.tgz, since the device tool brings back at most 8 files.
OUT=${OUT:-/tmp/day50_dev}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac  # the scripts change folders: an absolute path
mkdir -p "$OUT/logs"
L=$OUT/logs
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
health() {
  nvidia-smi -q -d PERFORMANCE > "$L/health_$1.txt" 2>&1 || { say "health $1: nvidia-smi failed"; return 1; }
  if grep -E "HW Slowdown|HW Power Brake|HW Thermal|SW Thermal" "$L/health_$1.txt" | grep -v "Not Active" | grep -q Active; then
    say "health $1: SLOWDOWN ACTIVE"; return 1
  fi
  say "health $1: healthy"
}
fin() {  # (the loose files are removed only once the archive holds them)
  wait  # no build left running in the background
  (cd "$OUT" && shopt -s nullglob && set -- logs ./*.json && tar czf results.tgz "$@" && rm -rf "$@")  # (no JSON: logs alone)
  exit "$1"
}
# gen DIR BUILD NAME: `--bench --bench-part generate` of DIR/BUILD/gpt into $OUT/gen_NAME.json (the data named
# explicitly: a gpt in a folder below build/ would look for it beside that folder).
gen() {
  (cd "$1" && timeout 120 "./$2/gpt" --data ./data/shakespeare.txt --bench --bench-part generate \
     --json "$OUT/gen_$3.json") > "$L/gen_$3.txt" 2>&1
  local rc=$?; say "generate $3 rc=$rc"; [ $rc -eq 0 ] || fail=1
}
# summary: each gen file's cluster decoders (16 SMs), tokens/s and the stamped token, one line a file.
summary() {
  python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "gen_*.json"))):
    d = json.load(open(f))
    row = {b["name"]: b for b in d["bench"]}
    get = lambda w: row.get(f"generate {w}, batch 1, one cluster of 16 SMs", {})
    tps = lambda w: get(w).get("tokens_per_s", float("nan"))
    tok = lambda w: get(w).get("extra", {}).get("stage_us", {}).get("token", float("nan"))
    print(f"{os.path.basename(f):18s} bf16 {tps('bf16'):8.0f} tok/s  fp32 {tps('fp32'):8.0f} tok/s   "
          f"stamped token bf16 {tok('bf16'):6.2f} fp32 {tok('fp32'):6.2f} us  passed {d['passed']}")
PY
}
