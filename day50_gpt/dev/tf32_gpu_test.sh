#!/usr/bin/env bash
# day50_gpt/dev/tf32_gpu_test.sh: day50_gpt's --precision tf32 on one GPU (H200, after `make -j16` at the repository root).
# Run from the repository root. Writes into $OUT (3 files):
#   tf32_verify.json  gpt --verify --verify-only tf32 (tiny GPT vs CPU in tf32, tf32 vs fp32 on the GPU,
#                     60-step training curves tf32 vs fp32)
#   tf32_bench.json   gpt --bench --bench-part train-fp32,train-tf32 (fp32's step rows, the tf32 row with
#                     its interleaved ratio to fp32 and the 300-step accuracy comparison)
#   tf32.log          every program's output, including a short fp32 regression --verify (--verify-only fp32
#                     --small: fp32's path must be unchanged)
# Expected time: about 1.5 minutes; the timeouts (60 + 45 + 75 s) cap it at 3. Prints a summary table last.
set -u
OUT=${OUT:-/tmp/tf32_out}
mkdir -p "$OUT"
G=./day50_gpt/build/gpt
LOG="$OUT/tf32.log"
: >"$LOG"
if [ ! -x "$G" ]; then echo "no $G: build first (make -j16)"; exit 1; fi

run() {  # name timeout args...: runs, logs, prints rc
  local name=$1 t=$2
  shift 2
  echo "===== $name: $G $*" >>"$LOG"
  local s=$SECONDS
  timeout "$t" "$G" "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "===== $name: rc=$rc, $((SECONDS - s)) s" >>"$LOG"
  echo "$rc"
}

rc_v=$(run "verify tf32" 60 --verify --verify-only tf32 --json "$OUT/tf32_verify.json")
rc_f=$(run "verify fp32 --small (regression)" 45 --verify --verify-only fp32 --small)
rc_b=$(run "bench train-fp32,train-tf32" 75 --bench --bench-part train-fp32,train-tf32 --json "$OUT/tf32_bench.json")

echo "--- last lines of the log ---"
tail -n 25 "$LOG"
echo
echo "================ tf32 summary ================"
printf '%-44s %s\n' "gpt --verify --verify-only tf32" "rc=$rc_v (0 pass, 1 a check failed, 124 timeout)"
printf '%-44s %s\n' "gpt --verify --verify-only fp32 --small" "rc=$rc_f"
printf '%-44s %s\n' "gpt --bench --bench-part train-fp32,train-tf32" "rc=$rc_b"
python3 - "$OUT/tf32_verify.json" "$OUT/tf32_bench.json" <<'EOF' || echo "(python3 summary failed: see tf32.log)"
import json, sys
def load(p):
    try:
        return json.load(open(p))
    except Exception as e:
        print(f"(no {p}: {e})")
        return None
v, b = load(sys.argv[1]), load(sys.argv[2])
for title, d in (("verify", v), ("bench", b)):
    if not d:
        continue
    checks = [c for c in d.get("checks", []) if "tf32" in c["name"]]
    bad = [c for c in checks if not c["passed"]]
    print(f"\n{title}: {len(checks)} tf32 checks, {len(bad)} failed (whole file passed: {d.get('passed')})")
    print(f"  {'check':<92} {'ok':>4} {'max_abs':>10} {'max_rel':>10} {'atol':>9} {'rtol':>7}")
    for c in checks:
        print(f"  {c['name'][:92]:<92} {'yes' if c['passed'] else 'NO':>4} {c.get('max_abs_err', 0):10.3g} "
              f"{c.get('max_rel_err', 0):10.3g} {c.get('atol', 0):9.3g} {c.get('rtol', 0):7.3g}"
              + (f"  [{c['note']}]" if c.get('note') else ""))
if b:
    rows = {r["name"]: r for r in b.get("bench", [])}
    f32, t32 = rows.get("train step fp32"), rows.get("train step tf32")
    print("\nstep times (events between steps, median of 20):")
    for n in ("train step fp32 unfused", "train step fp32", "train step tf32"):
        r = rows.get(n)
        if r:
            ex = r.get("extra", {})
            print(f"  {n:<28} {r['ms']:8.2f} ms  ({r['min_ms']:.2f}..{r['max_ms']:.2f})  MFU {ex.get('mfu_pct', float('nan')):.1f}% "
                  f"of {ex.get('mfu_peak_tflops', float('nan'))} TFLOP/s; {r.get('tokens_per_s', 0):.0f} tokens/s")
    if t32 and "vs_fp32" in t32.get("extra", {}):
        x = t32["extra"]["vs_fp32"]
        print(f"  tf32 vs fp32, interleaved (median of 3 rounds): {x['tf32_ms']:.2f} ms vs {x['fp32_ms']:.2f} ms = "
              f"{x['speedup']:.2f}x (rounds {x['speedup_min']:.2f}x..{x['speedup_max']:.2f}x)")
        a = x["accuracy"]
        print(f"  accuracy after {a['steps']} steps from the same seed: loss (last 10 steps) tf32 {a['tf32_loss_last10']:.4f} "
              f"vs fp32 {a['fp32_loss_last10']:.4f}; validation ({a['val_batches']} batches) tf32 {a['tf32_val_loss']:.4f} "
              f"vs fp32 {a['fp32_val_loss']:.4f} (diff {a['val_loss_diff']:+.4f}); means of 10 steps at most "
              f"{a['max_abs_diff_means_of_10']:.4f} apart; first step's loss diff {a['first_step_loss_diff']:.2e}")
        ph = t32["extra"].get("phase_ms", {})
        if ph and f32:
            p32 = f32["extra"].get("phase_ms", {})
            print("  phases (one eager step), fp32 -> tf32 ms: " +
                  ", ".join(f"{k} {p32.get(k, float('nan')):.2f}->{ph[k]:.2f}" for k in ph))
    elif b:
        print("  (no tf32 row in the bench file)")
    for g in b.get("goals", []):
        if "tf32" in g["goal"]:
            print(f"  goal {'met' if g['met'] else 'MISSED'}: {g['goal']}: {g['value']:.3g}")
EOF
