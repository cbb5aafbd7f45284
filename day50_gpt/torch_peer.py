#!/usr/bin/env python3
"""day50_gpt/torch_peer.py: ./build/gpt against PyTorch on the same GPU, model and batch (GPU machine only).

Times a training step of the same model (config, byte vocabulary, tied head, AdamW with the same
decay mask, clipping) in PyTorch fp32 eager, bf16 autocast eager and bf16 autocast + torch.compile,
each the median of many steps after warm-up (CUDA events around each step), with its peak memory;
times batch-1 generation with a KV cache in eager PyTorch; then runs this program's own benchmark
(`./build/gpt --bench`) in the same invocation, and writes both sides and the ratios to
results/<gpu>/day50_gpt-torch_peer.json. PyTorch uses its standard fast paths: scaled_dot_product_attention
(flash / memory-efficient kernels), fused AdamW, and in fp32 no TF32 (PyTorch's default for matmuls).

    cd day50_gpt && make && python3 torch_peer.py
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import torch_gpt as tg


def train_step_times(cfg, train, mode, steps, warmup):
    # GPU memory is measured the way ./build/gpt measures its own: device memory taken (cudaMemGetInfo)
    # from before the model exists to after the timed steps (PyTorch's caching allocator keeps what it
    # took at the peak), so workspaces and the allocator's pool count on both sides.
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    torch.manual_seed(0)
    model = tg.GPT(cfg, tg.init_like_gpt2(cfg))
    decay = [model.P(n) for n in model.names if tg.decays(n)]
    no_decay = [model.P(n) for n in model.names if not tg.decays(n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3,
                            betas=(0.9, 0.95), eps=1e-8, fused=True)
    autocast = mode != "fp32 eager"
    fwd = torch.compile(model) if mode == "bf16 compile" else model
    B, T = cfg["batch"], cfg["context"]
    pos = 0
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for i in range(warmup + steps):
        tok, tgt, pos = tg.batch(train, pos, B, T)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = fwd(tok, tgt, attention="sdpa")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        b.record()
        if i >= warmup:
            times.append((a, b))
        losses.append(loss.detach())
    torch.cuda.synchronize()
    device_mib = (free0 - torch.cuda.mem_get_info()[0]) / 2**20
    ms = sorted(x.elapsed_time(y) for x, y in times)
    out = dict(ms=float(np.median(ms)), min_ms=ms[0], max_ms=ms[-1], reps=len(ms), tokens_per_s=B * T / (np.median(ms) * 1e-3),
               device_mib=device_mib, peak_allocated_mib=torch.cuda.max_memory_allocated() / 2**20,
               peak_reserved_mib=torch.cuda.max_memory_reserved() / 2**20, last_loss=float(losses[-1]))
    del model, opt, fwd, losses, times
    return out


def generation_speed(cfg, n=200):
    model = tg.GPT(cfg, tg.init_like_gpt2(cfg))
    prompt = list(b"The GPU ")
    tg.generate_kv(model, prompt, 20)  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = tg.generate_kv(model, prompt, n)
    torch.cuda.synchronize()
    s = time.perf_counter() - t0
    return dict(tokens=len(out), seconds=s, tokens_per_s=len(out) / s, ms_per_token=1e3 * s / len(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="./build/gpt")
    ap.add_argument("--data", default="data/corpus.txt")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per PyTorch variant")
    ap.add_argument("--json", default="../results/{gpu}/day50_gpt-torch_peer.json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP: torch_peer: no CUDA GPU visible to PyTorch")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = dict(vocab=256, layers=6, heads=6, width=384, context=256, batch=64)
    train, _ = tg.corpus(args.data)
    torch_rows = {}
    for mode, warm in (("fp32 eager", 5), ("bf16 eager", 5), ("bf16 compile", 10)):
        t0 = time.time()
        torch_rows[mode] = r = train_step_times(cfg, train, mode, args.steps, warm)
        print(f"PyTorch {mode:13s}: {r['ms']:7.2f} ms/step = {r['tokens_per_s'] / 1e3:7.0f}k tok/s, peak allocated "
              f"{r['peak_allocated_mib']:.0f} MiB, device memory taken {r['device_mib']:.0f} MiB [{time.time() - t0:.0f} s]", flush=True)
    gen = generation_speed(cfg)
    print(f"PyTorch generation (eager, KV cache, batch 1, fp32): {gen['tokens_per_s']:.0f} tok/s", flush=True)

    # This program, in the same invocation and on the same GPU.
    with tempfile.TemporaryDirectory() as wd:
        path = os.path.join(wd, "ours.json")
        r = subprocess.run([args.bin, "--bench", "--bench-steps", "200", "--data", args.data, "--json", path], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"torch_peer: ./build/gpt --bench failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}")
        ours = json.load(open(path))
    rows = {b["name"]: b for b in ours["bench"]}
    o32, o16, og = rows["train step fp32"], rows["train step bf16"], rows["generate, batch 1, KV cache"]
    ratios = dict(
        bf16_vs_torch_compile=o16["tokens_per_s"] / torch_rows["bf16 compile"]["tokens_per_s"],
        bf16_vs_torch_bf16_eager=o16["tokens_per_s"] / torch_rows["bf16 eager"]["tokens_per_s"],
        fp32_vs_torch_fp32_eager=o32["tokens_per_s"] / torch_rows["fp32 eager"]["tokens_per_s"],
        generation_vs_torch_eager=og["tokens_per_s"] / gen["tokens_per_s"],
        memory_bf16_ours_over_torch_eager=o16["extra"]["peak_gpu_mib"] / torch_rows["bf16 eager"]["device_mib"],
        memory_fp32_ours_over_torch_eager=o32["extra"]["peak_gpu_mib"] / torch_rows["fp32 eager"]["device_mib"],
    )
    goals = [
        ("bf16 training >= 1.0x PyTorch bf16 torch.compile", ratios["bf16_vs_torch_compile"] >= 1.0, ratios["bf16_vs_torch_compile"]),
        ("fp32 training >= 1.2x PyTorch fp32 eager", ratios["fp32_vs_torch_fp32_eager"] >= 1.2, ratios["fp32_vs_torch_fp32_eager"]),
        ("generation (batch 1, KV cache) >= 3x PyTorch eager", ratios["generation_vs_torch_eager"] >= 3.0, ratios["generation_vs_torch_eager"]),
        ("GPU memory (bf16) <= PyTorch bf16 eager's (device memory taken; ratio)", ratios["memory_bf16_ours_over_torch_eager"] <= 1.0,
         ratios["memory_bf16_ours_over_torch_eager"]),
        ("GPU memory (fp32) <= PyTorch fp32 eager's (device memory taken; ratio)", ratios["memory_fp32_ours_over_torch_eager"] <= 1.0,
         ratios["memory_fp32_ours_over_torch_eager"]),
    ]
    print(f"\nours: fp32 {o32['tokens_per_s'] / 1e3:.0f}k tok/s, bf16 {o16['tokens_per_s'] / 1e3:.0f}k tok/s, generation {og['tokens_per_s']:.0f} tok/s; "
          f"memory fp32 {o32['extra']['peak_gpu_mib']:.0f} MiB, bf16 {o16['extra']['peak_gpu_mib']:.0f} MiB")
    for name, met, x in goals:
        print(f"  {'met   ' if met else 'MISSED'}  {name}: {x:.2f}")
    env = tg.environment()
    out = dict(lesson="day50_gpt", program="torch_peer.py", mode="bench", env=env, config=cfg, torch=torch_rows, torch_generation=gen,
               ours=dict(train_fp32=o32, train_bf16=o16, generate=og, env=ours["env"]), ratios=ratios,
               goals=[dict(goal=n, met=bool(m), value=x) for n, m, x in goals], checks=[], bench=[])
    path = args.json.replace("{gpu}", tg.gpu_slug())
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
