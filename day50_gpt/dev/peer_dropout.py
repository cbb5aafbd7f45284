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

VARIANTS = {"eager": None, "compile": {}, "compile reduce-overhead": {"mode": "reduce-overhead"}}
HYPER = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, clip=1.0)  # torch_peer.HYPER


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
    for name, kw in VARIANTS.items():
        t0 = time.time()
        v = tg.TrainStep(cfg, train, a.steps + 8, HYPER, kw, False, 1234)
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
        # 2. Train (TrainStep compiles its own forward, as the peer does), then score with dropout off.
        v.run(a.steps)
        torch.cuda.synchronize()
        v.model.eval()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            held_loss = sum(float(v.model(*held.get(i))) for i in range(8)) / 8
        tail = v.losses[a.steps - 20:a.steps].double().mean().item()
        row = dict(forward_losses=losses, replays_equal=losses[2] == losses[3],
                   distinct_forward_losses=len(set(losses)), train_loss_tail_mean=tail,
                   held_out_loss_dropout_off=held_loss, seconds=time.time() - t0)
        out["variants"][name] = row
        print(f"  {name:26s} forward losses {', '.join(f'{l:.5f}' for l in losses)}  "
              f"train tail {tail:.4f}  held-out (no dropout) {held_loss:.4f}", flush=True)
        del v, fwd
        torch._dynamo.reset()
    path = a.json.replace("{gpu}", tg.gpu_slug())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
