"""day50_gpt: training step, phases, attention, quality run, generation."""
from .text import fmt


def _steps(rows):
    """Training-step rows that carry what the tables need (a row missing a key is left out, not a crash)."""
    return [b for b in rows if str(b.get("name", "")).startswith("train step") and b.get("ms") is not None]


def step_lines(rows):
    out = ["| training step | ms/step (median of 20) | tokens/s | GPU memory | attention |", "|---|---:|---:|---:|---|"]
    for b in _steps(rows):
        ex = b.get("extra", {})
        out.append(f"| {b['name'][len('train step '):]} | {b['ms']:.2f} | {fmt(b.get('tokens_per_s'))} | {fmt(ex.get('peak_gpu_mib'))} MiB | "
                   f"{str(ex.get('attention', '')).split(' (')[0]} |")
    steps = [b for b in _steps(rows) if b.get("extra", {}).get("phase_ms") and b["extra"].get("phase_total_ms")]
    if not steps:
        return out
    out += ["", "Where one step's time goes (CUDA events between the phases of one step, ms):", "",
            "| phase | " + " | ".join(b["name"][len("train step "):] for b in steps) + " |", "|---|" + "---:|" * len(steps)]
    for ph in steps[0]["extra"]["phase_ms"]:
        cells = []
        for b in steps:
            ms = b["extra"]["phase_ms"].get(ph)
            cells.append("–" if ms is None else f"{ms:.3f} ({100 * ms / b['extra']['phase_total_ms']:.0f}%)")
        out.append(f"| {ph} | " + " | ".join(cells) + " |")
    return out


def attention_lines(rows):
    """Rows named 'attention fwd+bwd <dtype> <impl>' (in day50_gpt.json, or day50_gpt-attention.json)."""
    att = [b for b in rows if str(b.get("name", "")).startswith("attention") and b.get("ms") is not None]
    if not att:
        return []
    out = ["Attention alone (one layer, forward + backward, median ms; TFLOP/s counts the six full T×T products):", "",
           "| attention | dtype | forward ms | forward+backward ms | TFLOP/s |", "|---|---|---:|---:|---:|"]
    for b in att:
        fwd = b.get("extra", {}).get("forward_ms")
        out.append(f"| {b['name'].split()[-1]} | {b.get('dtype', '')} | {'–' if fwd is None else f'{fwd:.3f}'} | {b['ms']:.3f} | "
                   f"{fmt(b.get('tflops'))} |")
    return out


def curve_lines(cfg):
    curve = cfg.get("loss_curve", {})
    if not curve:
        return []
    vs, vl, tl = curve.get("val_step", []), curve.get("val_loss", []), curve.get("train_loss", [])
    best = min(range(len(vl)), key=lambda i: vl[i]) if vl else None
    return [f"Quality run ({curve.get('precision')}, {cfg.get('quality_steps')} steps, {curve.get('seconds', 0):.1f} s): "
            f"validation loss {fmt(cfg.get('val_loss_after_steps'), 3)} at the end"
            + (f", lowest {vl[best]:.3f} at step {vs[best]}" if best is not None else "")
            + (f"; last training loss {tl[-1]:.3f}." if tl else "."), "",
            "| step | " + " | ".join(str(x) for x in vs) + " |", "|---|" + "---:|" * len(vs),
            "| validation loss | " + " | ".join(f"{x:.3f}" for x in vl) + " |"]


def quality_lines(data):
    """The top-level quality objects (the default run on the plays, and on the 1.1 MB cut) and the goals."""
    out = []
    for key, what in (("quality", "the default run"), ("quality_cut", "the same run on a cut of the text")):
        q = data.get(key)
        if not isinstance(q, dict) or not q:
            continue
        limit = f" (its first {q['data_limit']:,} bytes)" if isinstance(q.get("data_limit"), (int, float)) else ""
        out += [f"Quality, {what}: `{q.get('data', '?')}`{limit}, {q.get('steps', '?')} steps, dropout "
                f"{q.get('dropout', '?')}, {fmt(q.get('seconds'))} s; validation loss lowest "
                f"{fmt(q.get('val_loss_min'), 3)} (step {q.get('val_loss_min_step', '?')}), final "
                f"{fmt(q.get('val_loss_final'), 3)}.", ""]
    goals = data.get("goals") or []
    if goals:
        out += ["| goal | value | |", "|---|---:|---|"]
        out += [f"| {g.get('goal')} | {fmt(g.get('value'), 3)} | {'met' if g.get('met') else '**missed**'} |" for g in goals]
        out += [""]
    q = data.get("quality")
    if isinstance(q, dict) and q.get("sample"):
        out += [f"Its sample ({q.get('sample_bytes_past_context', '?')} bytes of it past the context, through the "
                "sliding window):", "", "```", str(q["sample"]), "```"]
    return out[:-1] if out and out[-1] == "" else out


GENERATION_HOW = {
    "generate, batch 1, KV cache": "one CUDA graph per token, sampling on the GPU",
    "generate, batch 1, KV cache, no CUDA graph": "the same kernels launched one by one, host waits per token",
}


def generation_lines(rows):
    gens = [b for b in rows if str(b.get("name", "")).startswith("generate") and b.get("ms") is not None]
    if not gens:
        return []
    out = ["| generation, batch 1, fp32 | tokens/s | ms per token |", "|---|---:|---:|"]
    for b in gens:
        how = GENERATION_HOW.get(b["name"], b["name"])
        out.append(f"| {how} | {fmt(b.get('tokens_per_s'))} | {b['ms']:.3f} |")
    return out


def verify_headline(data):
    return f"gpt --verify: {len(data.get('checks', []))} checks of the GPU model against the CPU model"


def verify_block(data):
    """gpt --verify's results file: how many checks, grouped by what they check, and any that failed."""
    checks = data.get("checks", [])
    groups = {}
    for c in checks:
        name = str(c.get("name", ""))
        key = name.split(":")[0].split(" vs ")[0]
        for word in ("tiny GPT", "attention", "dropout", "random batches", "training", "generation", "sliding window",
                     "data parallel"):
            if word in name:
                key = word
                break
        g = groups.setdefault(key, [0, 0])
        g[0] += 1
        g[1] += 0 if c.get("passed") else 1
    out = [f"`gpt --verify`: {sum(g[0] for g in groups.values())} checks, "
           f"{sum(g[1] for g in groups.values())} failed.", "", "| what is checked | checks | failed |", "|---|---:|---:|"]
    out += [f"| {k} | {v[0]} | {v[1]} |" for k, v in groups.items()]
    return out + [""]


def day50_block(data):
    rows = data.get("bench", [])
    cfg = data.get("config", {})
    out = [f"Model: {cfg.get('layers')} layers, {cfg.get('heads')} heads, width {cfg.get('width')}, context {cfg.get('context')}, "
           f"batch {cfg.get('batch')} (byte vocabulary, 256).", ""] + step_lines(rows)
    for part in (attention_lines(rows), curve_lines(cfg), quality_lines(data), generation_lines(rows)):
        out += [""] + part if part else []
    if cfg.get("sample"):
        out += ["", "The sample it wrote (prompt `The GPU `, temperature 0.8, top-k 40):", "", "```", cfg["sample"], "```"]
    return out + [""]


def attention_block(data):
    return attention_lines(data.get("bench", [])) + [""]


def attention_headline(data):
    att = [b for b in data.get("bench", []) if str(b.get("name", "")).startswith("attention") and b.get("tflops") is not None]
    if not att:
        return "–"
    b = max(att, key=lambda b: b["tflops"])
    return f"fastest attention fwd+bwd: {b['name'].split()[-1]} {b.get('dtype', '')} {fmt(b['tflops'])} TFLOP/s"


def day50_headline(data):
    by = {b["name"]: b for b in data.get("bench", [])}
    parts = []
    for d in ("fp32", "bf16"):
        b = by.get(f"train step {d}")  # the fused (default) configuration
        if b and b.get("tokens_per_s") is not None:
            parts.append(f"{d} {fmt(b['tokens_per_s'] / 1e3)}k tok/s")
    curve = data.get("config", {}).get("loss_curve", {})
    q = data.get("quality")
    if isinstance(q, dict) and q.get("val_loss_min") is not None:
        parts.append(f"quality run: lowest val loss {q['val_loss_min']:.2f}")
    elif curve.get("val_loss") and curve.get("val_step"):
        i = min(range(len(curve["val_loss"])), key=lambda j: curve["val_loss"][j])
        parts.append(f"lowest val loss {curve['val_loss'][i]:.2f} (step {curve['val_step'][i]})")
    return "; ".join(parts) or "–"


def day50_plot(plt, data, png):
    rows = data.get("bench", [])
    steps = [b for b in _steps(rows) if b.get("extra", {}).get("phase_ms") and b.get("tokens_per_s")]
    curve = data.get("config", {}).get("loss_curve")
    if not steps or not curve or not all(k in curve for k in ("step", "train_loss", "val_step", "val_loss")):
        return False
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    ax.plot(curve["step"], curve["train_loss"], lw=0.8, color="#3a7", label="training loss (each step's batch)")
    ax.plot(curve["val_step"], curve["val_loss"], "o-", color="#c33", label="validation loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    ax.set_title(f"{curve.get('precision', '?')} training on the repository's notes")
    ax.legend(fontsize=8)
    phases = list(steps[0]["extra"]["phase_ms"].keys())
    left = [0.0] * len(steps)
    colors = ["#888", "#69c", "#3a7", "#c33", "#e92", "#a6d", "#333", "#bb3"]
    for i, ph in enumerate(phases):
        vals = [b["extra"]["phase_ms"].get(ph, 0.0) for b in steps]
        ax2.barh([b["name"][len("train step "):] for b in steps], vals, left=left, color=colors[i % len(colors)], label=ph)
        left = [l + v for l, v in zip(left, vals)]
    for i, b in enumerate(steps):
        ax2.text(left[i], i, f" {left[i]:.1f} ms, {b['tokens_per_s'] / 1e3:.0f}k tok/s", va="center", fontsize=8)
    ax2.set_xlim(0, max(left) * 1.35)
    ax2.set_xlabel("ms per training step")
    ax2.set_title(f"where the time goes, {data['env'].get('gpu', '?')}")
    ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return True


VIEWS = {
    "day50_gpt": dict(block=day50_block, plot=day50_plot, headline=day50_headline),
    "day50_gpt-attention": dict(block=attention_block, plot=None, headline=attention_headline),
    "day50_gpt-verify": dict(block=verify_block, plot=None, headline=verify_headline),
}
