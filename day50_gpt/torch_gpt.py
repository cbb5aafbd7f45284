"""day50_gpt/torch_gpt.py: the same GPT in PyTorch, for the oracle and peer scripts only.

Never a dependency of the lesson: gpt.cu needs no Python. This module mirrors gpt_ref.h exactly:
the flat parameter layout (so a checkpoint written by ./build/gpt loads as is), the tanh GELU,
LayerNorm eps 1e-5, the tied head, AdamW with the same decay mask, clipping without an epsilon, and
the warm-up + cosine schedule; batches are cut from the text the way train_ref.h cuts them.
"""
import math
import struct
import subprocess
import time

import numpy as np
import torch
import torch.nn.functional as F

MAGIC = b"GPTCKPT1"


def read_checkpoint(path):
    """Parses checkpoint.h's format: header, then params, m, v as float32, then a CRC-32."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != MAGIC:
        raise ValueError(f"{path}: not a gpt checkpoint")
    version, header = struct.unpack_from("<II", buf, 8)
    vocab, context, layers, heads, width = struct.unpack_from("<5i", buf, 16)
    step, data_pos, rng, n = struct.unpack_from("<qQQQ", buf, 36)
    at = header
    params = np.frombuffer(buf, dtype="<f4", count=n, offset=at).copy()
    cfg = dict(vocab=vocab, context=context, layers=layers, heads=heads, width=width)
    return cfg, params, dict(step=step, data_pos=data_pos, version=version)


def layout(cfg):
    """(name, shape) in gpt_ref.h's Layout order."""
    V, T, C = cfg["vocab"], cfg["context"], cfg["width"]
    out = [("wte", (V, C)), ("wpe", (T, C))]
    for l in range(cfg["layers"]):
        out += [(f"h{l}.ln1_w", (C,)), (f"h{l}.ln1_b", (C,)), (f"h{l}.qkv_w", (3 * C, C)), (f"h{l}.qkv_b", (3 * C,)),
                (f"h{l}.proj_w", (C, C)), (f"h{l}.proj_b", (C,)), (f"h{l}.ln2_w", (C,)), (f"h{l}.ln2_b", (C,)),
                (f"h{l}.fc_w", (4 * C, C)), (f"h{l}.fc_b", (4 * C,)), (f"h{l}.fc2_w", (C, 4 * C)), (f"h{l}.fc2_b", (C,))]
    out += [("lnf_w", (C,)), ("lnf_b", (C,))]
    return out


def decays(name):
    """train::decay_mask: matrices and embeddings decay, biases and LayerNorm gains do not."""
    last = name.split(".")[-1]
    return last in ("wte", "wpe", "qkv_w", "proj_w", "fc_w", "fc2_w")


class GPT(torch.nn.Module):
    def __init__(self, cfg, flat=None, device="cuda"):
        super().__init__()
        self.cfg = cfg
        self.names = [n for n, _ in layout(cfg)]
        self.p = torch.nn.ParameterDict()
        at = 0
        for name, shape in layout(cfg):
            size = int(np.prod(shape))
            data = torch.zeros(shape) if flat is None else torch.from_numpy(flat[at:at + size].reshape(shape))
            self.p[name.replace(".", "_")] = torch.nn.Parameter(data.to(device=device, dtype=torch.float32))
            at += size

    def P(self, name):
        return self.p[name.replace(".", "_")]

    def forward(self, tok, tgt, attention="math"):
        cfg = self.cfg
        B, T = tok.shape
        C, H = cfg["width"], cfg["heads"]
        D = C // H
        x = self.P("wte")[tok] + self.P("wpe")[:T]
        mask = torch.ones(T, T, dtype=torch.bool, device=tok.device).tril()
        for l in range(cfg["layers"]):
            h = F.layer_norm(x, (C,), self.P(f"h{l}.ln1_w"), self.P(f"h{l}.ln1_b"), eps=1e-5)
            qkv = F.linear(h, self.P(f"h{l}.qkv_w"), self.P(f"h{l}.qkv_b"))
            q, k, v = qkv.split(C, dim=-1)
            q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
            if attention == "sdpa":
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
                a = s.masked_fill(~mask, float("-inf")).softmax(-1) @ v
            a = a.transpose(1, 2).reshape(B, T, C)
            x = x + F.linear(a, self.P(f"h{l}.proj_w"), self.P(f"h{l}.proj_b"))
            h = F.layer_norm(x, (C,), self.P(f"h{l}.ln2_w"), self.P(f"h{l}.ln2_b"), eps=1e-5)
            h = F.gelu(F.linear(h, self.P(f"h{l}.fc_w"), self.P(f"h{l}.fc_b")), approximate="tanh")
            x = x + F.linear(h, self.P(f"h{l}.fc2_w"), self.P(f"h{l}.fc2_b"))
        x = F.layer_norm(x, (C,), self.P("lnf_w"), self.P("lnf_b"), eps=1e-5)
        logits = x @ self.P("wte").t()
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))

    def flat_grad(self):
        return torch.cat([self.P(n).grad.reshape(-1) for n in self.names])


def lr_at(step, warmup, total, lr_max, lr_min):
    """train::lr_at."""
    if step < warmup:
        return lr_max * (step + 1) / warmup
    if step >= total:
        return lr_min
    r = (step - warmup) / max(1, total - warmup)
    return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + math.cos(math.pi * r))


class AdamW:
    """train::AdamW / kernels.cuh adamw_clipped, including clipping by the global norm (no epsilon)."""

    def __init__(self, model, lr, wd=0.1, b1=0.9, b2=0.95, eps=1e-8, clip=1.0):
        self.model, self.lr, self.wd, self.b1, self.b2, self.eps, self.clip = model, lr, wd, b1, b2, eps, clip
        self.m = {n: torch.zeros_like(model.P(n)) for n in model.names}
        self.v = {n: torch.zeros_like(model.P(n)) for n in model.names}
        self.t = 0

    @torch.no_grad()
    def step(self, lr):
        self.t += 1
        grads = [self.model.P(n).grad for n in self.model.names]
        norm = torch.sqrt(sum((g.float() ** 2).sum() for g in grads))
        scale = torch.where(norm > self.clip, self.clip / norm, torch.ones_like(norm))
        bc1, bc2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        for n, g in zip(self.model.names, grads):
            p = self.model.P(n)
            g = g * scale
            self.m[n].mul_(self.b1).add_(g, alpha=1 - self.b1)
            self.v[n].mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            upd = (self.m[n] / bc1) / (torch.sqrt(self.v[n] / bc2) + self.eps)
            if decays(n):
                upd = upd + self.wd * p
            p.sub_(lr * upd)
        return norm


def corpus(path, val_fraction=0.1):
    """train::split_bytes: the last 10% of the bytes are the validation text."""
    data = np.frombuffer(open(path, "rb").read(), dtype=np.uint8).astype(np.int64)
    nval = int(len(data) * val_fraction)
    return data[:len(data) - nval], data[len(data) - nval:]


def batch(data, pos, B, T, device="cuda"):
    """train::batch / kernels.cuh gather_batch: B consecutive sequences from `pos`, wrapping."""
    n = len(data)
    idx = (pos + np.arange(B * T)) % n
    tok = torch.from_numpy(data[idx].reshape(B, T)).to(device)
    tgt = torch.from_numpy(data[(idx + 1) % n].reshape(B, T)).to(device)
    return tok, tgt, (pos + B * T) % n


def gpu_slug():
    """results.h slug(): lower-case letters and digits, anything else one '-'."""
    name = torch.cuda.get_device_name(0)
    out, dash = "", False
    for ch in name.lower():
        if ch.isalnum() and ch.isascii():
            out += ch
            dash = False
        elif not dash and out:
            out += "-"
            dash = True
    return out.strip("-")


@torch.no_grad()
def generate_kv(model, prompt, n, temperature=0.8, top_k=40):
    """Batch-1 generation with a KV cache, eager PyTorch: each new byte runs one position, its key and
    value appended to each layer's cache (the peer of ./build/gpt --sample). Returns the new bytes."""
    cfg = model.cfg
    C, H = cfg["width"], cfg["heads"]
    D = C // H
    dev = model.P("wte").device
    ks = [torch.empty(1, H, cfg["context"], D, device=dev) for _ in range(cfg["layers"])]
    vs = [torch.empty(1, H, cfg["context"], D, device=dev) for _ in range(cfg["layers"])]

    def step(tok, t):
        x = model.P("wte")[tok] + model.P("wpe")[t]
        x = x.view(1, 1, C)
        for l in range(cfg["layers"]):
            h = F.layer_norm(x, (C,), model.P(f"h{l}.ln1_w"), model.P(f"h{l}.ln1_b"), eps=1e-5)
            q, k, v = F.linear(h, model.P(f"h{l}.qkv_w"), model.P(f"h{l}.qkv_b")).split(C, dim=-1)
            ks[l][:, :, t] = k.view(1, H, D)
            vs[l][:, :, t] = v.view(1, H, D)
            a = F.scaled_dot_product_attention(q.view(1, 1, H, D).transpose(1, 2), ks[l][:, :, :t + 1], vs[l][:, :, :t + 1])
            x = x + F.linear(a.transpose(1, 2).reshape(1, 1, C), model.P(f"h{l}.proj_w"), model.P(f"h{l}.proj_b"))
            h = F.layer_norm(x, (C,), model.P(f"h{l}.ln2_w"), model.P(f"h{l}.ln2_b"), eps=1e-5)
            h = F.gelu(F.linear(h, model.P(f"h{l}.fc_w"), model.P(f"h{l}.fc_b")), approximate="tanh")
            x = x + F.linear(h, model.P(f"h{l}.fc2_w"), model.P(f"h{l}.fc2_b"))
        x = F.layer_norm(x, (C,), model.P("lnf_w"), model.P("lnf_b"), eps=1e-5)
        return (x @ model.P("wte").t()).view(-1)

    t = 0
    for b in prompt:
        logits = step(int(b), t)
        t += 1
    out = []
    for _ in range(n):
        v, i = torch.topk(logits / temperature, top_k)
        nxt = i[torch.multinomial(torch.softmax(v, -1), 1)]
        out.append(nxt)
        logits = step(nxt, t)
        t += 1
    return torch.stack(out).view(-1).tolist()


def init_like_gpt2(cfg, seed=0):
    """gpt::init_params' distribution (not its exact numbers): N(0, 0.02), the two residual projections
    N(0, 0.02 / sqrt(2L)), zero biases, unit LayerNorm gains. For timing runs."""
    rng = np.random.default_rng(seed)
    parts = []
    resid = 0.02 / math.sqrt(2 * cfg["layers"])
    for name, shape in layout(cfg):
        last = name.split(".")[-1]
        if last in ("ln1_w", "ln2_w", "lnf_w"):
            parts.append(np.ones(shape, np.float32))
        elif last.endswith("_b"):
            parts.append(np.zeros(shape, np.float32))
        else:
            std = resid if last in ("proj_w", "fc2_w") else 0.02
            parts.append(rng.normal(0, std, size=shape).astype(np.float32))
    return np.concatenate([p.reshape(-1) for p in parts])


def environment():
    """The environment block of a results file (the fields scripts/plot.py reads), as PyTorch sees it."""
    props = torch.cuda.get_device_properties(0)
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:  # no nvidia-smi on PATH: the field says unknown
        driver = ""
    return dict(gpu=torch.cuda.get_device_name(0), gpu_slug=gpu_slug(), sm_count=props.multi_processor_count, driver=driver or "?",
                cuda_runtime=torch.version.cuda, cudnn_loaded=str(torch.backends.cudnn.version()), torch=torch.__version__,
                date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
