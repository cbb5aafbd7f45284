"""day50_gpt/torch_gpt.py: the same GPT in PyTorch, for the oracle and peer scripts only.

Never a dependency of the lesson: gpt.cu needs no Python. Two models live here:
  - GPT, the oracle's twin (torch_oracle.py): it mirrors gpt_ref.h exactly: the flat parameter layout
    (so a checkpoint written by ./build/gpt loads as is), the tanh GELU, LayerNorm eps 1e-5, the tied
    head, AdamW with the same decay mask, clipping without an epsilon, and the warm-up + cosine
    schedule; batches are cut from the text the way train_ref.h cuts them;
  - NanoGPT and KVDecoder, the peer's (torch_peer.py): the same architecture written the way a PyTorch
    user writes it (nanoGPT's nn.Module layout, scaled_dot_product_attention, a static KV cache for
    generation as in gpt-fast), so that torch.compile and CUDA graphs see ordinary code.
"""
import contextlib
import math
import struct
import subprocess
import time

import numpy as np
import torch
import torch._dynamo  # noqa: F401  (imported here: an import inside a method would make `torch` local there)
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
    """results.h slug() of device 0's name (torch_peer.slug, the host-only copy of it)."""
    from torch_peer import slug

    return slug(torch.cuda.get_device_name(0))


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
    """The environment block of a results file (the fields scripts/plot.py reads), as PyTorch sees it,
    with the code's commit read the way common/env.cuh reads it (torch_peer.repo_commit: host-only, so
    it lives where it is tested without torch)."""
    from torch_peer import repo_commit

    commit, dirty = repo_commit()
    props = torch.cuda.get_device_properties(0)
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:  # no nvidia-smi on PATH: the field says unknown
        driver = ""
    return dict(gpu=torch.cuda.get_device_name(0), gpu_slug=gpu_slug(), sm_count=props.multi_processor_count, driver=driver or "?",
                cuda_runtime=torch.version.cuda, cudnn_loaded=str(torch.backends.cudnn.version()), torch=torch.__version__,
                date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), commit=commit, dirty=dirty)


# ---- The peer's model: nanoGPT's layout ------------------------------------------------------------
# Dropout sites are ./build/gpt's (nn/dropout.h): the embedding's output and each sublayer's output
# (attention projection, MLP), probability `dropout`. nanoGPT also drops attention probabilities; that is
# `attn_dropout` (SDPA's dropout_p), 0 by default because ./build/gpt has no such site.
class CausalSelfAttention(torch.nn.Module):
    def __init__(self, width, heads, dropout, attn_dropout):
        super().__init__()
        self.c_attn = torch.nn.Linear(width, 3 * width)
        self.c_proj = torch.nn.Linear(width, width)
        self.resid_drop = torch.nn.Dropout(dropout)
        self.heads, self.attn_dropout = heads, attn_dropout

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        p = self.attn_dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.resid_drop(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class MLP(torch.nn.Module):
    def __init__(self, width, dropout):
        super().__init__()
        self.c_fc = torch.nn.Linear(width, 4 * width)
        self.c_proj = torch.nn.Linear(4 * width, width)
        self.drop = torch.nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(torch.nn.Module):
    def __init__(self, width, heads, dropout, attn_dropout):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(width, eps=1e-5)
        self.attn = CausalSelfAttention(width, heads, dropout, attn_dropout)
        self.ln_2 = torch.nn.LayerNorm(width, eps=1e-5)
        self.mlp = MLP(width, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(torch.nn.Module):
    """GPT-2 small's shape at any size: learned positions, pre-LayerNorm blocks, tanh GELU, tied head.
    Initialised as gpt_ref.h's init_params (the distribution, not its numbers): N(0, 0.02) for every
    matrix and embedding, N(0, 0.02 / sqrt(2 L)) for the two residual projections, zero biases, LayerNorm
    1 and 0 (PyTorch's own default for LayerNorm)."""

    def __init__(self, vocab, context, layers, heads, width, dropout=0.0, attn_dropout=0.0):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, width)
        self.wpe = torch.nn.Embedding(context, width)
        self.drop = torch.nn.Dropout(dropout)
        self.h = torch.nn.ModuleList(Block(width, heads, dropout, attn_dropout) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(width, eps=1e-5)
        self.lm_head = torch.nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one (V, C) matrix, gradients from both uses
        for m in self.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, torch.nn.Linear) and m.bias is not None:
                torch.nn.init.zeros_(m.bias)
        for b in self.h:
            for proj in (b.attn.c_proj, b.mlp.c_proj):
                torch.nn.init.normal_(proj.weight, 0.0, 0.02 / math.sqrt(2 * layers))

    def logits(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))

    def forward(self, idx, targets):
        logits = self.logits(idx)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def param_groups(model, weight_decay):
    """train::decay_mask: matrices and embeddings (2-D) decay, biases and LayerNorm parameters do not.
    named_parameters() lists the tied wte/lm_head matrix once."""
    decay = [p for _, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for _, p in model.named_parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


class KVDecoder(torch.nn.Module):
    """One new position through a NanoGPT with a static KV cache (gpt-fast's layout): the caches are
    buffers of fixed shape (L, 1, H, T, D) written in place at `pos`, and the query attends to the whole
    cache under a mask row, so every call has the same shapes and CUDA graphs can replay it."""

    def __init__(self, model):
        super().__init__()
        self.m = model
        L, T = len(model.h), model.wpe.num_embeddings
        C, H = model.wte.embedding_dim, model.h[0].attn.heads
        dt, dev = model.wte.weight.dtype, model.wte.weight.device
        self.register_buffer("k_cache", torch.zeros(L, 1, H, T, C // H, dtype=dt, device=dev))
        self.register_buffer("v_cache", torch.zeros(L, 1, H, T, C // H, dtype=dt, device=dev))
        self.register_buffer("causal", torch.ones(T, T, dtype=torch.bool, device=dev).tril())
        for cache in (self.k_cache, self.v_cache):  # written in place: CUDA graphs must keep them where they are
            torch._dynamo.mark_static_address(cache)  # (as Hugging Face's StaticCache does)

    def forward(self, tok, pos):
        """tok, pos: int64 tensors of shape (1,). Returns the fp32 logits (V,) of the next byte."""
        m = self.m
        C = m.wte.embedding_dim
        H = m.h[0].attn.heads
        x = (m.wte(tok) + m.wpe(pos)).view(1, 1, C)
        mask = self.causal[pos].view(1, 1, 1, -1)
        for l, b in enumerate(m.h):
            q, k, v = b.attn.c_attn(b.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(1, 1, H, C // H).transpose(1, 2) for t in (q, k, v))
            self.k_cache[l].index_copy_(2, pos, k)
            self.v_cache[l].index_copy_(2, pos, v)
            y = F.scaled_dot_product_attention(q, self.k_cache[l], self.v_cache[l], attn_mask=mask)
            x = x + b.attn.c_proj(y.transpose(1, 2).reshape(1, 1, C))
            x = x + b.mlp(b.ln_2(x))
        return m.lm_head(m.ln_f(x)).view(-1).float()


def sample_top_k(logits, temperature, top_k):
    """Top-k sampling with no host synchronisation (gpt-fast's): argmax of p / Exp(1) draws a sample
    from p. Returns an int64 tensor of shape (1,)."""
    logits = logits / temperature
    pivot = torch.topk(logits, top_k).values[-1]
    probs = torch.softmax(torch.where(logits < pivot, float("-inf"), logits), dim=-1)
    return torch.argmax(probs / torch.empty_like(probs).exponential_(1)).view(1)


def decode_one(dec, tok, pos, temperature, top_k):
    """The step gpt-fast compiles: one position, then the sample. Returns (next byte, logits)."""
    logits = dec(tok, pos)
    return sample_top_k(logits, temperature, top_k), logits


def math_sdpa():
    """gpt-fast decodes under the math SDPA backend: Inductor writes the one-query attention itself."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.MATH)
    except ImportError:  # PyTorch before 2.3
        return torch.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False, enable_math=True)


class GpuBatches:
    """The training part of a text (train::split_bytes: the first 90%) as int64 on the GPU, and one
    random offset per sequence of every step, drawn up front from a seeded GPU generator. A step's batch
    is three small GPU ops (add, two gathers): no host copy, no synchronisation. Every user that counts
    its steps from 0 sees the same batches in the same order."""

    def __init__(self, path, B, T, total_steps, seed):
        raw = open(path, "rb").read()
        raw = raw[:len(raw) - int(len(raw) * 0.1)]
        self.data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to("cuda").long()
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        self.offsets = torch.randint(0, len(raw) - T - 1, (total_steps, B), device="cuda", generator=g)
        self.ar = torch.arange(T, device="cuda")

    def get(self, k):
        idx = self.offsets[k].unsqueeze(1) + self.ar
        return self.data[idx], self.data[idx + 1]


class TrainStep:
    """A NanoGPT, its fused AdamW and its training step (bf16 autocast, backward, clip_grad_norm_, step,
    zero_grad(set_to_none=True)), eager or compiled: compile_kw (torch.compile's keyword arguments) compiles
    the model's forward (AOTAutograd compiles its backward with it), or with whole=True the whole step
    function (Dynamo stops at loss.backward(); compiled autograd compiles the backward graph). Every
    step's loss is kept on the GPU (losses[k], NaN until step k runs)."""

    def __init__(self, cfg, batches, total_steps, hyper, compile_kw=None, whole=False, seed=0):
        torch.manual_seed(seed)  # the same initial weights for every variant
        self.model = NanoGPT(**cfg).cuda().train()
        params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(param_groups(self.model, hyper["weight_decay"]), lr=hyper["lr"],
                                     betas=hyper["betas"], eps=hyper["eps"], fused=True)
        self.whole = whole
        self.graphs = compile_kw is not None and compile_kw.get("mode") in ("reduce-overhead", "max-autotune")
        self.batches, self.k = batches, 0
        self.losses = torch.full((total_steps,), float("nan"), device="cuda")
        model, opt, clip = self.model, self.opt, hyper["clip"]
        fwd = model if compile_kw is None or whole else torch.compile(model, **compile_kw)

        def step(x, y):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = fwd(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        self.fn = torch.compile(step, **compile_kw) if whole else step

    def run(self, n):
        ctx = torch._dynamo.config.patch(compiled_autograd=True) if self.whole else contextlib.nullcontext()
        with ctx:
            for _ in range(n):
                if self.graphs:  # a new iteration for CUDA graph trees (reduce-overhead, max-autotune)
                    torch.compiler.cudagraph_mark_step_begin()
                x, y = self.batches.get(self.k)
                self.losses[self.k].copy_(self.fn(x, y))  # copied before a CUDA graph replay overwrites it
                self.k += 1

    def timed(self, warmup, steps):
        """warmup untimed steps, then ms/step over `steps` steps between two CUDA events."""
        self.run(warmup)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        self.run(steps)
        b.record()
        b.synchronize()
        return a.elapsed_time(b) / steps


class Generator:
    """gpt-fast's loop over a KVDecoder: decode_one (eager, or compiled with compile_kw) for each new
    byte, the token and position kept on the GPU (no host synchronisation per byte)."""

    def __init__(self, model, compile_kw, prompt, n, temperature, top_k):
        self.dec = KVDecoder(model.eval()).eval()
        self.fn = decode_one if compile_kw is None else torch.compile(decode_one, **compile_kw)
        self.prompt, self.n, self.sampling = prompt, n, (temperature, top_k)
        self.out = torch.zeros(n, dtype=torch.long, device=prompt.device)

    @torch.no_grad()
    def prefill(self):
        """The prompt but its last byte, one position at a time: outside every timed region."""
        pos = torch.zeros(1, dtype=torch.long, device=self.prompt.device)
        for i in range(len(self.prompt) - 1):
            self.fn(self.dec, self.prompt[i:i + 1], pos, *self.sampling)
            pos += 1
        return pos

    @torch.no_grad()
    def generate(self):
        """n decode steps (a position, then a sample) from the prompt's last byte: the work ./build/gpt's
        generation bench times. Returns tokens/s between two synchronisations."""
        with math_sdpa():
            pos = self.prefill()
            cur = self.prompt[-1:]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(self.n):
                nxt, _ = self.fn(self.dec, cur, pos, *self.sampling)
                self.out[i:i + 1].copy_(nxt)
                cur = self.out[i:i + 1]
                pos += 1
            torch.cuda.synchronize()
            return self.n / (time.perf_counter() - t0)

    @torch.no_grad()
    def last_prompt_logits(self):
        """The logits after the whole prompt, through the cache (for the check against a full forward)."""
        with math_sdpa():
            pos = self.prefill()
            return self.fn(self.dec, self.prompt[-1:], pos, *self.sampling)[1].clone()
