"""day50_gpt-torch_oracle, day50_gpt-torch_peer and its generation-only run: the model against PyTorch (correctness, then speed)."""
import functools
import os
import subprocess

from .text import cell, fmt, goals_table

# torch_peer.py times the generation variants first, before any training variant exists in its process,
# since this commit; a full run of an older commit timed them in the rounds beside the training variants,
# where the compiled decoder ran slower than alone. Which one a file is decides how its ratio is labelled.
GEN_FIRST_SINCE = "0bd98ad"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def generation_alone(data):
    """True where the file's run timed the generation variants alone (its commit descends from GEN_FIRST_SINCE,
    or it is a generation-only run), False where beside the training variants, None where git cannot say."""
    if data.get("mode") == "generation":
        return True
    commit = data.get("env", {}).get("commit")
    return _descends_from_gen_first(commit) if isinstance(commit, str) and commit and commit != "unknown" else None


@functools.lru_cache(maxsize=None)
def _descends_from_gen_first(commit):
    """One git call per commit, however many labels of a file ask."""
    try:
        r = subprocess.run(["git", "-C", ROOT, "merge-base", "--is-ancestor", GEN_FIRST_SINCE, commit],
                           capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: True, 1: False}.get(r.returncode)


def _gen_label(data):
    return {True: "timed before the training variants", False: "beside its training variants"}.get(generation_alone(data))


def day50_oracle_block(data):
    out = [f"PyTorch {data.get('env', {}).get('torch', '?')} against ./build/gpt from the same initial weights "
           "(the program's own checkpoint), on the same batches:", "", "| check | result | numbers |", "|---|---|---|"]
    for c in data.get("checks", []):
        nums = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in c.items() if k not in ("name", "passed"))
        out.append(f"| {cell(c.get('name', '?'))} | {'PASS' if c.get('passed') else 'FAIL'} | {nums} |")
    return out + [""]


def day50_oracle_headline(data):
    cs = data.get("checks", [])
    return f"{sum(bool(c.get('passed')) for c in cs)}/{len(cs)} comparisons with PyTorch passed"


def day50_oracle_plot(plt, data, png):
    curves = data.get("curves", {}).get("default")
    if not curves:
        return False
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    for key, color, label in (("torch_fp32", "#999", "PyTorch fp32"), ("ours_fp32", "#3a7", "ours fp32"),
                              ("torch_bf16", "#e92", "PyTorch bf16 autocast"), ("ours_bf16", "#c33", "ours bf16")):
        ax.plot(range(1, len(curves[key]) + 1), curves[key], lw=0.8, color=color, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(f"same weights, same batches ({data['env'].get('gpu', '?')})")
    ax.legend(fontsize=8)
    # The curves overlap; their differences show how closely (fp32) and how loosely (bf16) they agree.
    for prec, color in (("fp32", "#3a7"), ("bf16", "#c33")):
        d = [a - b for a, b in zip(curves[f"ours_{prec}"], curves[f"torch_{prec}"])]
        ax2.plot(range(1, len(d) + 1), d, lw=0.8, color=color, label=f"{prec}: ours − PyTorch")
    ax2.axhline(0, color="#999", lw=0.5)
    ax2.set_xlabel("step")
    ax2.set_ylabel("training loss difference")
    ax2.set_title("default model: ours minus PyTorch, step by step")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return True


def _mib(row):
    """A PyTorch row's memory: the older files' device_mib/peak_allocated_mib, or the newer 'memory'
    (a number of MiB, or an object holding those two)."""
    m = row.get("memory")
    if isinstance(m, dict):
        return m.get("device_mib", m.get("mib")), m.get("peak_allocated_mib")
    if isinstance(m, (int, float)):
        return m, row.get("peak_allocated_mib")
    return row.get("device_mib"), row.get("peak_allocated_mib")


def _ms(row):
    """ms/step, with the spread over the repeats where the file gives it (min/max: the newer files)."""
    ms = row.get("ms")
    if not isinstance(ms, (int, float)):
        return "–"
    lo, hi = row.get("min"), row.get("max")
    return f"{ms:.2f}" + (f" ({lo:.2f}–{hi:.2f})" if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) else "")


RATIOS = (("bf16_vs_best_torch", "our bf16 step against PyTorch's fastest"),
          ("generation_vs_best_torch", "our fp32 generation against PyTorch's fastest fp32 decoder"),
          ("memory_bf16_vs_best_torch", "PyTorch's device memory over ours, bf16 (above 1: ours takes less)"))


def ratio_lines(data):
    """The newer files' ratios, each {median, min, max} over the interleaved repeats."""
    r = data.get("ratios", {})
    how = {True: " (its decoders timed alone, before the training variants)",
           False: " (its decoders beside the training variants)"}.get(generation_alone(data), "")
    rows = [(label + (how if k == "generation_vs_best_torch" else ""), r[k])
            for k, label in RATIOS if isinstance(r.get(k), dict) and r[k].get("median") is not None]
    if not rows:
        return []
    n = data.get("repeats")
    out = ["", f"Ratios (median of {n} interleaved repeats, min–max):" if n else "Ratios (median, min–max):", "",
           "| ratio | median | min–max |", "|---|---:|---:|"]
    for label, v in rows:
        out.append(f"| {label} | {v['median']:.2f}× | {fmt(v.get('min'), 2)}–{fmt(v.get('max'), 2)}× |")
    return out


def day50_peer_block(data):
    t, o = data.get("torch", {}), data.get("ours", {})
    out = [f"Same GPU, same model (6 layers, 6 heads, width 384, context 256, batch 64, byte vocabulary, tied head, AdamW), one run "
           f"(PyTorch {data.get('env', {}).get('torch', '?')}: scaled_dot_product_attention, fused AdamW, no TF32):", "",
           "| training step | ms/step | tokens/s | GPU memory taken | (PyTorch: tensors at the peak) |", "|---|---:|---:|---:|---:|"]
    if o.get("commit"):  # the ratios below hold for this build of ./build/gpt only
        out[1:1] = ["", f"Interleaved with ./build/gpt of commit `{str(o['commit'])[:7]}` (its row `{o.get('row', '?')}`): "
                    "the ratios below are that build's, not a later one's."]
    for mode, row in (t.items() if isinstance(t, dict) else []):
        if not isinstance(row, dict) or row.get("ms") is None:
            continue
        dev, peak = _mib(row)
        out.append(f"| PyTorch {mode} | {_ms(row)} | {fmt(row.get('tokens_per_s'))} | {fmt(dev)} MiB | "
                   f"{fmt(peak)} MiB |")
    for key, label in (("train_fp32", "./build/gpt fp32"), ("train_bf16", "./build/gpt bf16")):
        b = o.get(key)
        if isinstance(b, dict) and b.get("ms") is not None:
            out.append(f"| {label} | {b['ms']:.2f} | {fmt(b.get('tokens_per_s'))} | {fmt(b.get('extra', {}).get('peak_gpu_mib'))} MiB | |")
    g = data.get("torch_generation", {})
    if g and isinstance(o.get("generate"), dict):
        out += ["", f"Generation at batch 1 with a KV cache (fp32): PyTorch eager {fmt(g.get('tokens_per_s'))} tokens/s, "
                f"./build/gpt {fmt(o['generate'].get('tokens_per_s'))} tokens/s."]
    alone = generation_alone(data) if isinstance(data.get("ratios", {}).get("generation_vs_best_torch"), dict) else None
    tail = {False: ["", "The generation ratio and its goal row are this run's, where PyTorch's decoders shared the process with "
                    "the training variants; a generation-only run (`--generation-only`) times them with no training variant "
                    "in its process, meant as their strongest setting (the table under \"Generation\" shows how far the "
                    "compiled decoder's speed moves between runs).", ""],
            True: ["", "The generation rounds ran first, before any training variant existed in the process, each round "
                   "PyTorch's decoders then ./build/gpt --bench --bench-part generate; the training rounds followed.", ""]
            }.get(alone, [])
    return out + ratio_lines(data) + goals_table(data, 2) + tail


def _ratio(r, key):
    v = r.get(key)
    v = v.get("median") if isinstance(v, dict) else v
    return v if isinstance(v, (int, float)) else None


def day50_peer_headline(data):
    r = data.get("ratios", {})
    parts = []
    # how many training variants the run timed (a run may leave some out): "best" is the best of those
    timed = [k for k, v in data.get("torch", {}).items() if isinstance(v, dict) and isinstance(v.get("ms"), (int, float))]
    best = f"best of {len(timed)} PyTorch variant{'s' if len(timed) != 1 else ''} timed" if timed else "best PyTorch"
    for key, text, digits in (("bf16_vs_best_torch", "bf16 {}× " + best, 2), ("bf16_vs_torch_compile", "bf16 {}× torch.compile", 2),
                              ("fp32_vs_torch_fp32_eager", "fp32 {}× eager", 2),
                              # how the run timed PyTorch's decoders: alone first, or beside the training variants
                              ("generation_vs_best_torch", "generation {}× best PyTorch" +
                               (f", {label}" if (label := _gen_label(data)) else ""), 1),
                              ("generation_vs_torch_eager", "generation {}× eager", 1)):
        v = _ratio(r, key)
        if v is None:
            continue
        part = text.format(f"{v:.{digits}f}")
        # the rounds' spread beside the median: a headline must not hide that the peer's rounds disagreed
        lo, hi = (r[key].get("min"), r[key].get("max")) if isinstance(r.get(key), dict) else (None, None)
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and f"{lo:.{digits}f}" != f"{hi:.{digits}f}":
            part = part.replace("×", f"× ({lo:.{digits}f}–{hi:.{digits}f}×)", 1)
        parts.append(part)
    return "; ".join(parts) or "–"


GEN_RATIOS = (("generation_vs_best_torch", "fp32", "our fp32 generation against PyTorch's fastest fp32 decoder"),
              ("generation_vs_best_torch_bf16", "bf16", "our bf16 generation against PyTorch's fastest bf16 decoder"))


def day50_peer_generation_block(data):
    """torch_peer.py --generation-only: the decoders alone, each row's tokens/s over the rounds, the ratios."""
    g = data.get("generation", {})
    out = [f"Batch-1 generation of {g.get('tokens', '?')} new bytes after the prompt \"{cell(g.get('prompt', ''))}\", same GPU, "
           f"same model, no training variant in the process (PyTorch {data.get('env', {}).get('torch', '?')}; "
           f"{data.get('repeats', '?')} interleaved rounds; a PyTorch round is the median of its generations):", "",
           "| generator | weights | tokens/s (median of the rounds) | min–max | rounds |", "|---|---|---:|---:|---|"]
    rows = [(f"PyTorch {n}", r) for n, r in (g.get("torch") or {}).items() if isinstance(r, dict)]
    for key, row_key, dt in (("ours", "ours_row", "fp32"), ("ours_bf16", "ours_bf16_row", "bf16")):
        if isinstance(g.get(key), dict):
            rows.append((f"./build/gpt: {g.get(row_key) or '?'}", dict(g[key], dtype=dt)))
    for name, r in rows:
        if r.get("tokens_per_s") is None:
            out.append(f"| {cell(name)} | {r.get('dtype', '?')} | not run | | |")
            continue
        rounds = ", ".join(fmt(x) for x in r.get("rounds", []))
        out.append(f"| {cell(name)} | {r.get('dtype', '?')} | {fmt(r['tokens_per_s'])} | {fmt(r.get('min'))}–{fmt(r.get('max'))} | {rounds} |")
    rat = data.get("ratios", {})
    lines = [(label, rat[k]) for k, _, label in GEN_RATIOS if isinstance(rat.get(k), dict) and rat[k].get("median") is not None]
    if lines:
        out += ["", "| ratio (per round, then the median) | median | min–max |", "|---|---:|---:|"]
        out += [f"| {label} | {v['median']:.2f}× | {fmt(v.get('min'), 2)}–{fmt(v.get('max'), 2)}× |" for label, v in lines]
    return out + goals_table(data, 2)


def day50_peer_generation_headline(data):
    r = data.get("ratios", {})
    parts = []
    for key, dt, _ in GEN_RATIOS:
        v = r.get(key)
        if isinstance(v, dict) and isinstance(v.get("median"), (int, float)):
            lo, hi = v.get("min"), v.get("max")
            spread = f" ({lo:.1f}–{hi:.1f}×)" if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) else ""
            parts.append(f"{dt} {v['median']:.1f}×{spread}")
    return ("generation " + ", ".join(parts) + " the compiled PyTorch decoder") if parts else "–"


VIEWS = {
    "day50_gpt-torch_peer": dict(block=day50_peer_block, plot=None, headline=day50_peer_headline),  # a table, no plot
    "day50_gpt-torch_peer_generation": dict(block=day50_peer_generation_block, plot=None,
                                            headline=day50_peer_generation_headline),
    "day50_gpt-torch_oracle": dict(block=day50_oracle_block, plot=day50_oracle_plot, headline=day50_oracle_headline),
}
