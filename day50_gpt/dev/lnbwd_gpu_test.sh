#!/usr/bin/env bash
# day50_gpt/dev/lnbwd_gpu_test.sh: branch lnbwd's fused LayerNorm backward (old dx loaded with x and dy,
# 2 blocks an SM, rows per warp up to 16) on one GPU, after `make -j16` at the repository root.
# Writes into $OUT: lnbwd_verify.json (gpt --verify), lnbwd_bench.json (--bench-part train-fp32,train-bf16),
# lnbwd.log. Expected: about 2.5 minutes. Compare with main's results/<gpu>/day50_gpt.json for the same GPU:
# extra.layernorm_alone.bwd_pct_of_copy of "train step bf16" / "train step fp32" and
# config.timed_choices["LayerNorm backward rows per warp 384x16384"].
set -u
OUT=${OUT:-/tmp/lnbwd_out}
mkdir -p "$OUT"
G=./day50_gpt/build/gpt
LOG="$OUT/lnbwd.log"
: >"$LOG"
[ -x "$G" ] || { echo "no $G: build first (make -j16)"; exit 1; }
timeout 90 "$G" --verify --json "$OUT/lnbwd_verify.json" >>"$LOG" 2>&1; rc_v=$?
timeout 150 "$G" --bench --bench-part train-fp32,train-bf16 --json "$OUT/lnbwd_bench.json" >>"$LOG" 2>&1; rc_b=$?
echo "verify rc=$rc_v  bench rc=$rc_b"
python3 - "$OUT/lnbwd_bench.json" <<'PY' || echo "(no bench file)"
import json, sys
d = json.load(open(sys.argv[1]))
for b in d["bench"]:
    la = b.get("extra", {}).get("layernorm_alone")
    if la:
        print(f"{b['name']:<28} {b['ms']:.3f} ms  LN fwd {la['fused_fwd_us']:.1f} us ({la['fwd_pct_of_copy']:.1f}% of copy)"
              f"  bwd {la['fused_bwd_us']:.1f} us ({la['bwd_pct_of_copy']:.1f}%)")
for k, v in d["config"].get("timed_choices", {}).items():
    if "LayerNorm" in k:
        print(k, "|", v)
for g in d.get("goals", []):
    if "LayerNorm" in g["goal"]:
        print(("met    " if g["met"] else "MISSED ") + g["goal"] + f": {g['value']:.1f}")
PY
