#!/usr/bin/env python3
"""day50_gpt/torch_oracle.py: PyTorch as an independent oracle for ./build/gpt (GPU machine only).

For a tiny and the default configuration it
  1. runs ./build/gpt in fp32 with --dump (the initial weights as a checkpoint, the first batch, its
     loss and every raw gradient) and --log (the loss of every step);
  2. loads that checkpoint into the PyTorch twin (torch_gpt.py), checks the first batch equals the one
     PyTorch cuts from the same text, and compares the loss and all gradients of step 0;
  3. trains the PyTorch twin from the same weights on the same batches with the same AdamW, clipping
     and schedule, and compares the two loss curves;
  4. repeats the curve comparison in bf16 (./build/gpt --precision bf16 against torch.autocast bf16).
It writes results/<gpu>/day50_gpt-torch_oracle.json and exits 1 if a comparison fails.

    cd day50_gpt && make && python3 torch_oracle.py
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import torch_gpt as tg

CONFIGS = {
    "tiny": dict(layers=2, heads=4, width=64, context=64, batch=8, steps=300, warmup=20, lr=3e-3),
    "default": dict(layers=6, heads=6, width=384, context=256, batch=64, steps=300, warmup=30, lr=1e-3),
}


def read_log(path):
    """--log lines: "step loss" per step, "step val loss" at validation. Returns (losses, last val loss)."""
    losses, val = [], float("nan")
    for line in open(path):
        parts = line.split()
        if len(parts) == 2:
            losses.append(float(parts[1]))
        elif len(parts) == 3 and parts[1] == "val":
            val = float(parts[2])
    return np.array(losses), val


def run_gpt(args, cfg, precision, workdir, dump):
    log = os.path.join(workdir, f"loss_{precision}.log")
    cmd = [args.bin, "--precision", precision, "--data", args.data, "--layers", str(cfg["layers"]), "--heads", str(cfg["heads"]),
           "--width", str(cfg["width"]), "--context", str(cfg["context"]), "--batch", str(cfg["batch"]), "--steps", str(cfg["steps"]),
           "--warmup", str(cfg["warmup"]), "--lr", str(cfg["lr"]), "--log", log, "--log-every", "50", "--val-every", str(cfg["steps"]),
           "--seed", str(args.seed),
           "--dropout", "0", "--batches", "sequential"]  # the PyTorch model here has no dropout: compare the deterministic model
    if dump:
        cmd += ["--dump", workdir]
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"torch_oracle: {' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    print(f"  ./build/gpt {precision}: {cfg['steps']} steps in {time.time() - t0:.1f} s")
    return read_log(log)


@torch.no_grad()
def torch_val(model, val, cfg, autocast):
    """Trainer::val_loss with ./build/gpt's default (no --val-batches): the mean loss of every whole batch
    the validation text holds, at least one, read from its start."""
    batches = max(1, len(val) // (cfg["batch"] * cfg["context"]))
    pos, total = 0, 0.0
    for _ in range(batches):
        tok, tgt, pos = tg.batch(val, pos, cfg["batch"], cfg["context"])
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            total += model(tok, tgt).item()
    return total / batches


def torch_curve(model_cfg, flat, train, val, cfg, autocast):
    model = tg.GPT(model_cfg, flat)
    opt = tg.AdamW(model, cfg["lr"])
    pos, losses = 0, []
    for step in range(cfg["steps"]):
        tok, tgt, pos = tg.batch(train, pos, cfg["batch"], cfg["context"])
        for p in model.parameters():
            p.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(tok, tgt)
        loss.backward()
        opt.step(tg.lr_at(step, cfg["warmup"], cfg["steps"], cfg["lr"], cfg["lr"] * 0.1))
        losses.append(loss.item())
    return np.array(losses), torch_val(model, val, cfg, autocast)


def check(results, name, passed, **numbers):
    results.append(dict(name=name, passed=bool(passed), **numbers))
    detail = "  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in numbers.items())
    print(f"  {'PASS' if passed else 'FAIL'}  {name:58s} {detail}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="./build/gpt")
    ap.add_argument("--data", default="data/corpus.txt")
    ap.add_argument("--seed", type=int, default=20261150)
    ap.add_argument("--configs", default="tiny,default")
    ap.add_argument("--json", default="../results/{gpu}/day50_gpt-torch_oracle.json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP: torch_oracle: no CUDA GPU visible to PyTorch")
        return 77
    if not os.path.exists(args.bin):
        sys.exit(f"torch_oracle: {args.bin} not found (run make first)")
    # fp32 means fp32 on both sides: no TF32 in PyTorch's matmuls.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    train, val = tg.corpus(args.data)
    results, report, info = [], {}, {}
    for name in args.configs.split(","):
        cfg = CONFIGS[name]
        print(f"\n== {name}: {cfg}")
        with tempfile.TemporaryDirectory() as wd:
            ours32, ours_val32 = run_gpt(args, cfg, "fp32", wd, dump=True)
            model_cfg, flat, meta = tg.read_checkpoint(os.path.join(wd, "init.ckpt"))
            tok0 = np.load(os.path.join(wd, "tokens0.npy"))
            tgt0 = np.load(os.path.join(wd, "targets0.npy"))
            loss0 = float(np.load(os.path.join(wd, "loss0.npy"))[0])
            grads0 = np.load(os.path.join(wd, "grads0.npy")).astype(np.float64)
            ours16, ours_val16 = run_gpt(args, cfg, "bf16", wd, dump=False)
        # 1. the batch: what PyTorch cuts from the text must be what the program trained on
        tok, tgt, _ = tg.batch(train, 0, cfg["batch"], cfg["context"])
        check(results, f"{name}: step 0 batch == PyTorch's cut of the text",
              np.array_equal(tok.cpu().numpy(), tok0) and np.array_equal(tgt.cpu().numpy(), tgt0))
        # 2. loss and gradients of step 0, fp32 on both sides, from the program's own initial weights
        model = tg.GPT(model_cfg, flat)
        loss = model(tok, tgt)
        loss.backward()
        g = model.flat_grad().double().cpu().numpy()
        rel = abs(loss.item() - loss0) / abs(loss.item())
        check(results, f"{name}: step 0 loss vs PyTorch fp32", rel < 1e-5, ours=loss0, torch=loss.item(), rel_err=rel)
        gmax = np.abs(g).max()
        err = np.abs(grads0 - g)
        bad = int((err > 1e-4 * gmax + 1e-3 * np.abs(g)).sum())
        rel_l2 = float(np.linalg.norm(grads0 - g) / np.linalg.norm(g))
        check(results, f"{name}: step 0 gradients ({g.size} values) vs PyTorch fp32", bad == 0 and np.isfinite(grads0).all(),
              max_abs_err=float(err.max()), rel_l2=rel_l2, out_of_tol=bad)
        # 3. loss curves: same weights, batches, optimizer and schedule
        t0 = time.time()
        theirs32, their_val32 = torch_curve(model_cfg, flat, train, val, cfg, autocast=False)
        t32 = time.time() - t0
        t0 = time.time()
        theirs16, their_val16 = torch_curve(model_cfg, flat, train, val, cfg, autocast=True)
        t16 = time.time() - t0
        print(f"  PyTorch: fp32 {t32:.1f} s, bf16 autocast {t16:.1f} s")
        tail = max(1, cfg["steps"] // 10)
        early = float(np.abs(ours32[:20] - theirs32[:20]).max())
        check(results, f"{name}: fp32 loss, first 20 steps, |ours - PyTorch| < 1e-3", early < 1e-3, max_abs_diff=early)
        # fp32 on both sides follows the same trajectory, so the training curves must agree. In bf16 the
        # rounding differs (autocast rounds other tensors than we do) and the trajectories part: the
        # yardstick there is the validation loss (the quality goal), and the training-loss gap
        # is reported next to PyTorch's own bf16-vs-fp32 gap, the size of that noise.
        a, b = float(ours32[-tail:].mean()), float(theirs32[-tail:].mean())
        check(results, f"{name}: fp32 training loss, mean of the last {tail} steps, within 2%", abs(a - b) / b < 0.02 and np.isfinite(a),
              ours=a, torch=b, rel_diff=abs(a - b) / b)
        for prec, ov, tv in (("fp32", ours_val32, their_val32), ("bf16", ours_val16, their_val16)):
            check(results, f"{name}: {prec} validation loss after {cfg['steps']} steps within 2%", abs(ov - tv) / tv < 0.02 and np.isfinite(ov),
                  ours=ov, torch=tv, rel_diff=abs(ov - tv) / tv)
        a, b, c = float(ours16[-tail:].mean()), float(theirs16[-tail:].mean()), float(theirs32[-tail:].mean())
        info[name] = dict(bf16_train_tail_ours=a, bf16_train_tail_torch=b, torch_bf16_vs_fp32_rel=abs(b - c) / c, ours_vs_torch_bf16_rel=abs(a - b) / b)
        print(f"  info  bf16 training loss, last {tail} steps: ours {a:.4f}, PyTorch {b:.4f} ({abs(a - b) / b:.2%}); "
              f"PyTorch bf16 vs its fp32: {abs(b - c) / c:.2%}")
        report[name] = dict(config=cfg, ours_fp32=ours32.tolist(), torch_fp32=theirs32.tolist(), ours_bf16=ours16.tolist(),
                            torch_bf16=theirs16.tolist(), val=dict(ours_fp32=ours_val32, torch_fp32=their_val32, ours_bf16=ours_val16,
                                                                   torch_bf16=their_val16))
    failed = sum(not r["passed"] for r in results)
    env = tg.environment()
    out = dict(lesson="day50_gpt", program="torch_oracle.py", mode="oracle", env=env, config=dict(configs=args.configs, seed=args.seed),
               checks=results, bench=[], info=info, curves=report, passed=failed == 0)
    path = args.json.replace("{gpu}", tg.gpu_slug())
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"\nwrote {path}\nRESULT: {'PASS' if failed == 0 else 'FAIL'} ({len(results)} checks, {failed} failed)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
