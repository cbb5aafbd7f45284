#!/usr/bin/env bash
# GPU test of day50_gpt --backend cudnn (issue 26). Run from the repository root after `make -j16`.
# Writes into $OUT: cudnn_logs.txt (all output), cudnn_verify.json, cudnn_bench.json. About 3-5 minutes.
set -u
OUT=${OUT:-/tmp/cudnn_out}
mkdir -p "$OUT"
G=./day50_gpt/build/gpt
LOG="$OUT/cudnn_logs.txt"
: >"$LOG"
run() {  # name, command...: runs it, logs it, keeps its exit status
  local name=$1
  shift
  echo "=== $name: $*" | tee -a "$LOG"
  local t0=$(date +%s)
  timeout 420 "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "=== $name: rc=$rc ($(($(date +%s) - t0)) s)" | tee -a "$LOG"
  eval "rc_$name=$rc"
}
# 1. Bad input: refused before any GPU work.
$G --backend cudnn --precision fp32 >>"$LOG" 2>&1
rc_fp32=$?
# 2. A short training run through the cuDNN graphs (prints each refused graph once, with cuDNN's reason).
run train $G --backend cudnn --steps 30 --log-every 10 --warmup 5 --val-every 30
# 3. The checks: the tiny GPT vs the CPU (with and without dropout), cudnn vs custom (logits, loss, every
#    gradient), 12 training steps' losses vs custom's.
run verify $G --verify --verify-only cudnn --json "$OUT/cudnn_verify.json"
# 4. The bench row: cudnn step vs custom step (interleaved), the census and the plans.
run bench $G --bench --bench-part train-cudnn --json "$OUT/cudnn_bench.json"
# Summary (last).
python3 - "$OUT" "$rc_fp32" "$rc_train" "$rc_verify" "$rc_bench" <<'PY'
import json, os, sys
out, rc_fp32, rc_train, rc_verify, rc_bench = sys.argv[1], *map(int, sys.argv[2:])
print("\n==== day50 --backend cudnn: summary ====")
print(f"fp32 refused with exit 2: {'PASS' if rc_fp32 == 2 else 'FAIL rc=%d' % rc_fp32}")
print(f"training run (30 steps):  rc={rc_train} {'PASS' if rc_train == 0 else 'FAIL'}")
print(f"--verify-only cudnn:      rc={rc_verify} {'PASS' if rc_verify == 0 else 'FAIL'}")
def load(p):
    try:
        return json.load(open(os.path.join(out, p)))
    except Exception as e:
        print(f"  (no {p}: {e})"); return None
v = load("cudnn_verify.json")
if v:
    for c in v.get("checks", []):
        print(f"  {'PASS' if c.get('passed') else 'FAIL'}  {c.get('name')}  (max err {c.get('max_abs_err', '-')})")
    for g in v.get("goals", []):
        print(f"  goal {'met' if g.get('met') else 'NOT met'}: {g.get('goal')} = {g.get('value')}")
print(f"--bench train-cudnn:      rc={rc_bench} {'PASS' if rc_bench == 0 else 'FAIL'}")
b = load("cudnn_bench.json")
def f(x, spec=".3f"):
    return format(x, spec) if isinstance(x, (int, float)) else str(x)
if b:
  try:
    for r in b.get("bench", []):
        if "cuDNN graphs" not in r.get("name", ""): continue
        x = r.get("extra", {})
        print(f"  {r['name']}: {f(r.get('ms'))} ms vs custom {f(r.get('ref_ms'))} ms; vs_custom (custom/cudnn) = {f(x.get('vs_custom'))}")
        print(f"  hand_written_kernels = {x.get('hand_written_kernels')}: {', '.join(x.get('hand_written', []))}")
        print(f"  layers on the custom path: {x.get('layers_on_custom_path')}")
        print(f"  graphs: {x.get('graphs_built')} built of {x.get('graphs_cached')}; build {f(x.get('graph_build_ms'), '.0f')} ms; first step {f(x.get('first_step_ms'), '.0f')} ms")
        for k, g in sorted(x.get("graphs", {}).items()):
            print(f"    {k:52s} " + (f"REFUSED: {g['refused'][:110]}" if "refused" in g else f"engine {f(g.get('engine'), '.0f')} {g.get('compiled')} {f(g.get('build_ms'), '.0f')} ms ws {f(g.get('workspace_bytes'), '.0f')}"))
    for c in b.get("checks", []):
        print(f"  {'PASS' if c.get('passed') else 'FAIL'}  {c.get('name')}")
    for g in b.get("goals", []):
        print(f"  goal {'met' if g.get('met') else 'NOT met'}: {g.get('goal')} = {g.get('value')}")
  except Exception as e:
    print(f"  (summary of the bench file failed: {e!r})")
PY
