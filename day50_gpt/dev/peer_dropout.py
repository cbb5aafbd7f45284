#!/usr/bin/env python3
"""day50_gpt/dev/peer_dropout.py: do the PyTorch peer's variants draw fresh dropout masks every step?

Why: in torch_peer.py's run with dropout 0.2, the two CUDA-graph variants ("reduce-overhead",
"max-autotune") ended their 521 training steps with a clearly lower training loss than eager on the
same batches, while the variants without CUDA graphs stayed close to eager. A lower *training* loss
under dropout is what a repeated (or weaker) mask would give, so this script measures the masks instead
of guessing:

1. Same weights, same batch, two forward passes in training mode (each followed by its backward, as a
   training step does, with no optimizer step): a fresh mask gives two different losses; a replayed
   mask gives the same loss twice. Eager, compile default and compile "reduce-overhead", the peer's
   own model (torch_gpt.NanoGPT) at the peer's size.
2. The number that matters for a fair comparison: each variant trains --steps steps on the same
   batches (torch_gpt.TrainStep, as torch_peer.py does), then the same held-out batches are scored
   with dropout off (model.eval(), eager). If the CUDA-graph variant's masks are fine, its held-out
   loss matches eager's within run-to-run noise, whatever its training loss says.
3. Two controls that say what that noise is: "eager, other seed" (the same initial weights and
   batches, only other dropout masks: how far another random stream alone moves the loss) and
   "compile, eager's random numbers" (Inductor's fallback_random, so it draws the masks eager draws:
   how far the compiled arithmetic alone moves it). If the first gap is as large as eager's against
   Inductor's, the streams explain it; if the second is small and the first is not, the compiled
   path is fine and the tolerance, not the peer, is what to change.

Writes results/<gpu>/day50_gpt-peer_dropout.json. Without torch or a GPU: one SKIP line, exit 77.
    cd day50_gpt && python3 dev/peer_dropout.py [--steps 300] [--dropout P]
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

# name: (torch.compile kwargs or None for eager, dropout seed for training, Inductor's fallback_random)
VARIANTS = {
    "eager": (None, 1234, False),
    "eager, other seed": (None, 4321, False),
    "compile": ({}, 1234, False),
    "compile, eager's random numbers": ({}, 1234, True),
    "compile reduce-overhead": ({"mode": "reduce-overhead"}, 1234, False),
}
HYPER = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, clip=1.0)  # torch_peer.HYPER


def measure(torch, tg, cfg, train, held, steps, kw, train_seed):
    """One variant: 1. four forwards (each with its backward) on the same weights and batch; 2. --steps
    training steps from the same initial weights with masks drawn from train_seed, then the held-out
    batches scored with dropout off."""
    t0 = time.time()
    v = tg.TrainStep(cfg, train, steps + 8, HYPER, kw, False, 1234)  # the same initial weights
    graphs = kw is not None and kw.get("mode") in ("reduce-overhead", "max-autotune")
    fwd = v.model if kw is None else torch.compile(v.model, **kw)
    x, y = held.get(0)
    losses = []
    for _ in range(4):  # the first calls compile and record; the last two are replays
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        losses.append(float(loss.detach()))
        v.model.zero_grad(set_to_none=True)
    torch.manual_seed(train_seed)  # the dropout masks' stream from here on (CPU and CUDA generators)
    v.run(steps)  # TrainStep compiles its own forward, as torch_peer.py does
    torch.cuda.synchronize()
    v.model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        held_loss = sum(float(v.model(*held.get(i))) for i in range(8)) / 8
    tail = v.losses[max(0, steps - 20):steps].double().mean().item()
    return dict(forward_losses=losses, replays_equal=losses[2] == losses[3], distinct_forward_losses=len(set(losses)),
                train_loss_tail_mean=tail, held_out_loss_dropout_off=held_loss, seconds=time.time() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--dropout", type=float, default=None, help="default: ./build/gpt's (options.h)")
    ap.add_argument("--json", default=os.path.join(HERE, "..", "results", "{gpu}", "day50_gpt-peer_dropout.json"))
    a = ap.parse_args()
    if a.steps < 1 or a.steps > 100000:
        print("peer_dropout: --steps must be in 1..100000", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("SKIP peer_dropout: no torch")
        return 77
    if not torch.cuda.is_available():
        print("SKIP peer_dropout: no CUDA GPU")
        return 77
    import torch_gpt as tg
    from torch_peer import default_dropout

    p = default_dropout() if a.dropout is None else a.dropout
    if not 0.0 <= p < 1.0:
        print("peer_dropout: --dropout must be in [0, 1)", file=sys.stderr)
        return 2
    cfg = dict(vocab=256, context=256, layers=6, heads=6, width=384, dropout=p, attn_dropout=0.0)
    B, T = 64, 256
    data = os.path.join(HERE, "data", "shakespeare.txt")
    train = tg.GpuBatches(data, B, T, a.steps + 8, seed=1234)
    held = tg.GpuBatches(data, B, T, 8, seed=4321)  # the same 8 batches for every variant
    out = dict(lesson="day50_gpt", program="peer_dropout", env=tg.environment(),
               config=dict(cfg, batch=B, steps=a.steps, held_out_batches=8), variants={})
    for name, (kw, train_seed, fallback_random) in VARIANTS.items():
        with torch._inductor.config.patch(fallback_random=fallback_random):
            row = measure(torch, tg, cfg, train, held, a.steps, kw, train_seed)
        row.update(compile=kw, train_seed=train_seed, fallback_random=fallback_random)
        out["variants"][name] = row
        print(f"  {name:32s} forward losses {', '.join(f'{x:.5f}' for x in row['forward_losses'])}  "
              f"train tail {row['train_loss_tail_mean']:.4f}  held-out (no dropout) "
              f"{row['held_out_loss_dropout_off']:.4f}", flush=True)
        torch._dynamo.reset()
    path = a.json.replace("{gpu}", tg.gpu_slug())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
