#!/usr/bin/env python3
"""scripts/plot.py: draw the results files and regenerate the README results tables.

    python3 scripts/plot.py            # (= make plots)
    python3 scripts/plot.py --no-png   # tables only (no matplotlib needed)
    python3 scripts/plot.py --loss-log train.log   # a day50_gpt training run's curve -> train.png

Reads results/<gpu>/<lesson>.json (written by the programs with --json), writes
results/<gpu>/<lesson>.png, and rewrites the text between the markers

    <!-- results:LESSON -->  ...  <!-- /results:LESSON -->   (in LESSON/README.md)
    <!-- results:summary -->  ...  <!-- /results:summary -->  (in README.md)

so that every number in the notes comes from a results file, never from a hand.
"""
import argparse
import glob
import json
import math
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def load_results(root):
    """{lesson: [(gpu_slug, data), ...]} for every results/<gpu>/<lesson>.json."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "results", "*", "*.json"))):
        with open(path) as f:
            data = json.load(f)
        if not isinstance(data, dict) or "env" not in data or "bench" not in data:
            continue  # not a program's results file (e.g. sanitize.json, written by scripts/sanitize.sh)
        gpu = os.path.basename(os.path.dirname(path))
        lesson = os.path.splitext(os.path.basename(path))[0]
        data["_path"] = os.path.relpath(path, root)
        out.setdefault(lesson, []).append((gpu, data))
    return out


def fmt(x, digits=1):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def rate_of(b):
    if b.get("tflops") is not None:
        return b["tflops"], "TFLOP/s"
    if b.get("gbps") is not None:
        return b["gbps"], "GB/s"
    if b.get("tokens_per_s") is not None:
        return b["tokens_per_s"], "tok/s"
    return None, ""


def version_text(v):
    """cuDNN reports its version as one integer (91900 = 9.19.0); PyTorch writes it that way."""
    v = str(v)
    if v.isdigit() and int(v) >= 10000:
        n = int(v)
        return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"
    return v


def env_line(data):
    e = data.get("env", {})
    parts = [f"{e.get('gpu', '?')}, {e.get('sm_count', '?')} SMs, driver {e.get('driver', '?')}, CUDA {e.get('cuda_runtime', '?')}"]
    if "cublas" in e or "torch" not in e:  # a PyTorch-written file has no cuBLAS field: say PyTorch's version instead
        parts.append(f"cuBLAS {e.get('cublas', '?')}")
    parts.append(f"cuDNN {version_text(e.get('cudnn_loaded', '?'))}")
    if "torch" in e:
        parts.append(f"PyTorch {e['torch']}")
    parts.append(e.get("date", "?")[:10])
    return ", ".join(parts)


def checks_line(data):
    cs = data.get("checks", [])
    if not cs and data.get("goals"):
        return f"timings only; {sum(1 for g in data['goals'] if g.get('met'))}/{len(data['goals'])} goals met"
    ok = sum(1 for c in cs if c.get("passed"))
    return f"{ok}/{len(cs)} checks passed"


def bench_table(rows):
    """The generic table: one line per benchmark row."""
    lines = ["| benchmark | dtype | shape | ms | rate | % of baseline | % of peak |",
             "|---|---|---|---:|---:|---:|---:|"]
    for b in rows:
        r, unit = rate_of(b)
        shape = "×".join(str(s) for s in b.get("shape", []))
        ref = f"{fmt(b.get('pct_of_ref'))}% of {b['ref']}" if b.get("ref") else "–"
        lines.append(f"| {b['name']} | {b.get('dtype', '')} | {shape} | {b['ms']:.4g} | {fmt(r)} {unit} | {ref} | "
                     f"{fmt(b.get('pct_of_peak'))}% |")
    return lines


# ---- lesson-specific views -----------------------------------------------------------
# A lesson can register (table, plot, headline) functions; the generic ones serve the rest.

def day01_headline(data):
    by = {b["name"]: b for b in data.get("bench", [])}
    cp = max((by[k]["gbps"] for k in ("copy_cudaMemcpy_d2d", "copy_kernel_float4") if k in by), default=None)
    fp = by.get("fp32_fma_chains", {}).get("tflops")
    return f"copy {fmt(cp)} GB/s, FP32 FMA {fmt(fp)} TFLOP/s"


def day10_table(rows, size=4096):
    at = [b for b in rows if b.get("shape") == [size, size, size]]
    if not at:
        return bench_table(rows)
    lines = [f"At M = N = K = {size}:", "",
             "| kernel | dtype | ms | TFLOP/s | % of cuBLAS | % of peak |", "|---|---|---:|---:|---:|---:|"]
    for b in at:
        ref = f"{fmt(b.get('pct_of_ref'))}% ({b['ref']})" if b.get("ref") else "–"
        lines.append(f"| {b['name']} | {b['dtype']} | {b['ms']:.4g} | {fmt(b.get('tflops'))} | {ref} | "
                     f"{fmt(b.get('pct_of_peak'))}% |")
    return lines


def day10_headline(data):
    at = [b for b in data.get("bench", []) if b.get("shape") == [4096, 4096, 4096] and b.get("ref")]
    simt = [b for b in at if b["dtype"] == "fp32" and not b["name"].startswith("cublas")]
    tc = [b for b in at if b["dtype"] == "bf16" and not b["name"].startswith("cublas")]
    parts = []
    if simt:
        b = max(simt, key=lambda b: b["tflops"])
        parts.append(f"best FP32 SIMT {fmt(b['tflops'])} TFLOP/s = {fmt(b['pct_of_ref'])}% of cuBLAS")
    if tc:
        b = max(tc, key=lambda b: b["tflops"])
        parts.append(f"best BF16 {fmt(b['tflops'])} TFLOP/s = {fmt(b['pct_of_ref'])}% of cuBLAS (n = 4096)")
    return "; ".join(parts) or "–"


def day10_plot(plt, data, png):
    rows = [b for b in data.get("bench", []) if b.get("tflops") is not None]
    square = [b for b in rows if len(set(b["shape"])) == 1]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6))
    names = list(dict.fromkeys(b["name"] for b in square))
    colors = plt.cm.tab20.colors  # 20 distinct colours: the ladder has 14 lines
    for i, name in enumerate(names):
        pts = sorted((b["shape"][0], b["tflops"]) for b in square if b["name"] == name)
        style = "--" if name.startswith("cublas") else "-"
        ax1.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", ms=3, label=name,
                 color=colors[i % len(colors)])
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xlabel("M = N = K")
    ax1.set_ylabel("TFLOP/s")
    ax1.set_title("TFLOP/s vs size")
    ax1.legend(fontsize=7)
    ax1.grid(True, which="both", alpha=0.3)
    at = [b for b in rows if b["shape"] == [4096, 4096, 4096]]
    ax2.barh([b["name"] for b in at], [b["tflops"] for b in at],
             color=["#999" if b["name"].startswith("cublas") else "#3a7" for b in at])
    for i, b in enumerate(at):
        ax2.text(b["tflops"], i, f" {b['tflops']:.1f}", va="center", fontsize=7)
    ax2.set_xscale("log")
    ax2.invert_yaxis()
    ax2.set_xlabel("TFLOP/s (log scale)")
    ax2.set_title("n = 4096")
    fig.suptitle(f"day10_matmul on {data['env'].get('gpu', '?')}")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def conv_shape_str(sh):
    n, c, h, w, k, r, s_, pad, stride, dil = sh
    out = f"{n}×{c}×{h}×{w}, K = {k}, {r}×{s_}"
    if pad:
        out += f", pad {pad}"
    if stride != 1:
        out += f", stride {stride}"
    if dil != 1:
        out += f", dilation {dil}"
    return out


def by_shape(rows):
    shapes = {}
    for b in rows:
        shapes.setdefault(tuple(b["shape"]), []).append(b)
    return shapes


def day20_table(rows):
    out = []
    for sh, rs in by_shape(rows).items():
        out += [f"*{conv_shape_str(sh)}*", "", "| variant | µs | rate | % of cuDNN's best | % of peak |",
                "|---|---:|---:|---:|---:|"]
        for b in rs:
            r, unit = rate_of(b)
            ref = f"{fmt(b.get('pct_of_ref'))}%" if b.get("ref") else "–"
            out.append(f"| {b['name']} | {b['ms'] * 1e3:.1f} | {fmt(r)} {unit} | {ref} | {fmt(b.get('pct_of_peak'))}% |")
        out.append("")
    return out


def day20_headline(data):
    shapes = by_shape(data.get("bench", []))
    parts = []
    for sh, rs in shapes.items():
        custom = [b for b in rs if b.get("ref") and not b["name"].startswith(("cudnn", "copy_floor"))]
        if not custom:
            continue
        best = max(custom, key=lambda b: b["pct_of_ref"])
        if sh[1] == 1 and sh[4] == 1:
            parts.append(f"1-channel 3×3: {best['ms'] * 1e3:.1f} µs = {best['pct_of_ref'] / 100:.2f}× cuDNN's speed")
        elif sh[0] == 32 and sh[1] == 64:
            parts.append(f"32×64×56×56: best {best['name'].split()[0]} = {fmt(best['pct_of_ref'])}% of cuDNN")
    return "; ".join(parts) or "–"


def day20_plot(plt, data, png):
    shapes = list(by_shape(data.get("bench", [])).items())
    fig, axes = plt.subplots(len(shapes), 1, figsize=(10, 2.2 * len(shapes) + 3))
    if len(shapes) == 1:
        axes = [axes]
    for ax, (sh, rs) in zip(axes, shapes):
        names = [b["name"] for b in rs]
        us = [b["ms"] * 1e3 for b in rs]
        colors = ["#999" if n.startswith("cudnn") else "#ccc" if n.startswith("copy_floor") else "#3a7" for n in names]
        ax.barh(names, us, color=colors)
        for i, b in enumerate(rs):
            lab = f" {us[i]:.1f} µs" + (f" ({b['pct_of_ref']:.0f}% of cuDNN)" if b.get("ref") else "")
            ax.text(us[i], i, lab, va="center", fontsize=7)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title(conv_shape_str(sh), fontsize=9)
        ax.set_xlim(min(us) / 2, max(us) * 8)
    axes[-1].set_xlabel("time per convolution, µs (log scale; shorter is faster)")
    fig.suptitle(f"day20_conv_slow_fast on {data['env'].get('gpu', '?')} (fp32, no TF32)")
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def generic_plot(plt, data, png):
    rows = [b for b in data.get("bench", []) if rate_of(b)[0] is not None]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.5))
    labels = [f"{b['name']} {'×'.join(map(str, b.get('shape', [])))}" for b in rows]
    vals = [rate_of(b)[0] for b in rows]
    ax.barh(labels, vals, color="#3a7")
    for i, b in enumerate(rows):
        pct = f" ({b['pct_of_peak']:.0f}% of peak)" if b.get("pct_of_peak") is not None else ""
        ax.text(vals[i], i, f" {vals[i]:.1f} {rate_of(b)[1]}{pct}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(vals) * 1.45)
    ax.set_title(f"{data.get('lesson')} on {data['env'].get('gpu', '?')}")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return True


def day30_contest_lines(data):
    rows = data.get("config", {}).get("contest", [])
    if not rows:
        return []
    out = ["The contest (fp32, same inputs, outputs checked against the CPU and against each other before timing):", "",
           "| case | shape | our best | µs | cuDNN's best | µs | winner | by |", "|---|---|---|---:|---|---:|---|---:|"]
    for c in rows:
        sp = c["custom_speedup"]
        out.append(f"| {c['case']} | {c['shape']} | {c['custom']} | {c['custom_ms'] * 1e3:.1f} | {c['cudnn']} | "
                   f"{c['cudnn_ms'] * 1e3:.1f} | {c['winner']} | {max(sp, 1 / sp):.2f}× |")
        if "floor_ms" in c:
            out.append(f"| | floors of {c['case']} | fewest bytes at copy bandwidth | {c['floor_ms'] * 1e3:.1f} | "
                       f"cudaMemcpy of the same bytes / empty kernel | {c['memcpy_same_bytes_ms'] * 1e3:.1f} / "
                       f"{c.get('empty_kernel_ms', float('nan')) * 1e3:.1f} | | |")
    return out + [""]


def day30_survey_lines(data):
    out = ["The survey: each direction and configuration, every algorithm cuDNN ran, re-timed (µs, median); "
           "`–` = not supported for this problem:", ""]
    for sv in data.get("config", {}).get("survey", []):
        algos = [a for a in sv.get("algorithms", []) if a.get("ms") is not None]
        if not algos:
            continue
        best = min(algos, key=lambda a: a["ms"])
        cells = ", ".join(f"{a['algo']}{'' if a['math'] in ('FMA', '') else ' (' + a['math'] + ')'} {a['ms'] * 1e3:.0f}"
                          for a in sorted(algos, key=lambda a: a["ms"]))
        out.append(f"- **{sv['direction']}, {sv['config']}, {sv['shape']}**: fastest {best['algo']} "
                   f"{best['ms'] * 1e3:.1f} µs; all: {cells}")
    return out + [""]


def day30_conv_block(data):
    return day30_contest_lines(data) + day30_survey_lines(data)


def day30_conv_headline(data):
    parts = []
    for c in data.get("config", {}).get("contest", []):
        sp = c["custom_speedup"]
        parts.append(f"{c['case']} {c['winner']} {max(sp, 1 / sp):.2f}×")
    return "contest: " + ", ".join(parts) if parts else "–"


def day30_conv_plot(plt, data, png):
    contest = data.get("config", {}).get("contest", [])
    surveys = [sv for sv in data.get("config", {}).get("survey", []) if sv.get("direction") == "forward"
               and any(a.get("ms") is not None for a in sv.get("algorithms", []))]
    if not contest and not surveys:
        return False
    fig, axes = plt.subplots(2, 1, figsize=(10, 9))
    ax = axes[0]
    labels = [f"{c['case']} {c['shape']}" for c in contest]
    y = range(len(contest))
    ax.barh([i - 0.2 for i in y], [c["custom_ms"] * 1e3 for c in contest], height=0.4, color="#3a7", label="our best kernel")
    ax.barh([i + 0.2 for i in y], [c["cudnn_ms"] * 1e3 for c in contest], height=0.4, color="#999", label="cuDNN's best algorithm")
    ax.set_yticks(list(y), labels, fontsize=7)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.legend(fontsize=8)
    ax.set_xlabel("µs per convolution (log scale)")
    ax.set_title("the contest (fp32)", fontsize=9)
    ax = axes[1]
    names, vals, cols = [], [], []
    palette = ["#3a7", "#37a", "#a73", "#a37", "#7a3"]
    for k, sv in enumerate(surveys):
        for a in sorted((a for a in sv["algorithms"] if a.get("ms") is not None), key=lambda a: a["ms"]):
            names.append(f"{sv['config']}: {a['algo']}" + ("" if a["math"] in ("FMA", "") else f" [{a['math']}]"))
            vals.append(a["ms"] * 1e3)
            cols.append(palette[k % len(palette)])
    ax.barh(names, vals, color=cols)
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:.0f}", va="center", fontsize=6)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=6)
    ax.set_xlabel("µs (log scale)")
    ax.set_title(f"forward algorithms, {surveys[0]['shape'] if surveys else ''}", fontsize=9)
    fig.suptitle(f"day30 conv_cudnn on {data['env'].get('gpu', '?')}")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return True


def day30_toolbox_headline(data):
    rows = [b for b in data.get("bench", []) if b.get("pct_of_peak") is not None]
    if not rows:
        return "–"
    best = max(rows, key=lambda b: b["pct_of_peak"])
    worst = min(rows, key=lambda b: b["pct_of_peak"])
    return (f"{len(rows)} calls at {fmt(worst['pct_of_peak'])}–{fmt(best['pct_of_peak'])}% of copy bandwidth "
            f"(slowest: {worst['name']})")


def day40_block(data):
    pats = data.get("config", {}).get("patterns", [])
    out = ["Fused graph against the same math unfused (median µs, L2 flushed; the engine is the one the plan used):", "",
           "| pattern | dtype | shape | fused µs | unfused µs | speedup | other | engine | plan build | goal |",
           "|---|---|---|---:|---:|---:|---|---|---:|---|"]
    for p in pats:
        other = ""
        for k, label in (("handwritten_ms", "hand-written kernel"), ("cublaslt_epilogue_ms", "cuBLASLt epilogue"),
                         ("conv_alone_ms", "conv alone")):
            if p.get(k) is not None:
                other = f"{label} {p[k] * 1e3:.1f} µs"
        kind = "runtime-compiled" if p.get("engine_runtime_compiled") else "pre-compiled"
        goal = f"{p['goal']}: {'met' if p['goal_met'] else 'missed'}" if not p["goal"].startswith("(") else p["goal"]
        dtype = p["dtype"] + (" (TF32)" if p.get("tf32") else "")
        out.append(f"| {p['pattern']} | {dtype} | {p['shape']} | {p['fused_ms'] * 1e3:.1f} | {p['unfused_ms'] * 1e3:.1f} | "
                   f"{p['speedup']:.2f}× | {other} | {p['engine_global_index']} ({kind}) | {p['plan_build_ms']:.1f} ms | {goal} |")
    out += ["", "Rates for every row (including the unfused parts):", ""] + bench_table(data.get("bench", []))
    return out + [""]


def day40_headline(data):
    pats = data.get("config", {}).get("patterns", [])
    parts = []
    for p in pats:
        if p["pattern"].startswith("pointwise") and p["dtype"] == "fp32":
            b = [r for r in data.get("bench", []) if r["name"].endswith("fused graph") and r["name"].startswith("chain fp32")]
            if b:
                parts.append(f"sigmoid(a+b·c) fused at {fmt(b[0]['pct_of_peak'])}% of copy bandwidth")
        if p["pattern"] == "matmul+bias+gelu" and p["dtype"] == "bf16":
            parts.append(f"matmul+bias+GELU bf16 fused {p['speedup']:.2f}× unfused")
        if p["pattern"] == "conv+bias+relu" and p["dtype"] == "fp16" and p["shape"].startswith("NHWC 32"):
            parts.append(f"conv+bias+ReLU fp16 N=32 {p['speedup']:.2f}×")
    return "; ".join(parts) or "–"


def day40_plot(plt, data, png):
    pats = data.get("config", {}).get("patterns", [])
    if not pats:
        return False
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 1.1 * len(pats) + 4))
    labels = [f"{p['pattern']} {p['dtype']} {p['shape']}" for p in pats]
    y = list(range(len(pats)))
    ax.barh([i - 0.2 for i in y], [p["unfused_ms"] * 1e3 for p in pats], height=0.4, color="#999", label="unfused")
    ax.barh([i + 0.2 for i in y], [p["fused_ms"] * 1e3 for p in pats], height=0.4, color="#3a7", label="fused cuDNN graph")
    for i, p in enumerate(pats):
        ax.text(p["fused_ms"] * 1e3, i + 0.2, f" {p['speedup']:.2f}×", va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.legend(fontsize=8)
    ax.set_xlabel("µs (log scale; shorter is faster; the label is unfused ÷ fused)")
    ax.set_title(f"day40_graph_fusion on {data['env'].get('gpu', '?')}")
    # The same rows as a fraction of the ceiling each is measured against (copy bandwidth for the
    # pointwise chain, the FP32 FMA or cuBLAS GEMM rate for conv and matmul).
    rows = {b["name"]: b for b in data.get("bench", []) if b.get("pct_of_peak") is not None}
    fused_pct, unfused_pct, names = [], [], []
    for b in rows.values():
        if b["name"].endswith(" fused graph"):
            stem = b["name"][: -len(" fused graph")]
            un = next((r for n, r in rows.items() if n.startswith(stem + " unfused")), None)
            names.append(stem)
            fused_pct.append(b["pct_of_peak"])
            unfused_pct.append(un["pct_of_peak"] if un else 0)
    y2 = list(range(len(names)))
    ax2.barh([i - 0.2 for i in y2], unfused_pct, height=0.4, color="#999", label="unfused")
    ax2.barh([i + 0.2 for i in y2], fused_pct, height=0.4, color="#3a7", label="fused cuDNN graph")
    ax2.set_yticks(y2, names, fontsize=6)
    ax2.invert_yaxis()
    ax2.set_xlabel("% of the ceiling (pointwise: copy bandwidth; conv/matmul: FP32 FMA or cuBLAS GEMM rate)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return True


def day50_block(data):
    rows = data.get("bench", [])
    cfg = data.get("config", {})
    out = [f"Model: {cfg.get('layers')} layers, {cfg.get('heads')} heads, width {cfg.get('width')}, context {cfg.get('context')}, "
           f"batch {cfg.get('batch')} (byte vocabulary, 256).", "",
           "| training step | ms/step (median of 20) | tokens/s | GPU memory | attention |", "|---|---:|---:|---:|---|"]
    for b in rows:
        if b["name"].startswith("train step"):
            ex = b.get("extra", {})
            out.append(f"| {b['name'][len('train step '):]} | {b['ms']:.2f} | {fmt(b['tokens_per_s'])} | {fmt(ex.get('peak_gpu_mib'))} MiB | "
                       f"{ex.get('attention', '').split(' (')[0]} |")
    out += ["", "Where one step's time goes (CUDA events between the phases of one step, ms):", "",
            "| phase | " + " | ".join(b["name"][len("train step "):] for b in rows if b["name"].startswith("train step")) + " |",
            "|---|" + "---:|" * sum(1 for b in rows if b["name"].startswith("train step"))]
    steps = [b for b in rows if b["name"].startswith("train step")]
    phases = list(steps[0].get("extra", {}).get("phase_ms", {}).keys()) if steps else []
    for ph in phases:
        cells = []
        for b in steps:
            ms = b["extra"]["phase_ms"][ph]
            cells.append(f"{ms:.3f} ({100 * ms / b['extra']['phase_total_ms']:.0f}%)")
        out.append(f"| {ph} | " + " | ".join(cells) + " |")
    out += ["", "Attention alone (one layer, forward + backward, median ms; TFLOP/s counts the six full T×T products):", "",
            "| attention | dtype | forward ms | forward+backward ms | TFLOP/s |", "|---|---|---:|---:|---:|"]
    for b in rows:
        if b["name"].startswith("attention"):
            out.append(f"| {b['name'].split()[-1]} | {b['dtype']} | {b['extra']['forward_ms']:.3f} | {b['ms']:.3f} | {fmt(b.get('tflops'))} |")
    curve = cfg.get("loss_curve", {})
    if curve:
        vs, vl = curve.get("val_step", []), curve.get("val_loss", [])
        best = min(range(len(vl)), key=lambda i: vl[i]) if vl else None
        out += ["", f"Quality run ({curve.get('precision')}, {cfg.get('quality_steps')} steps, {curve.get('seconds', 0):.1f} s): "
                f"validation loss {fmt(cfg.get('val_loss_after_steps'), 3)} at the end"
                + (f", lowest {vl[best]:.3f} at step {vs[best]}" if best is not None else "")
                + f"; last training loss {curve['train_loss'][-1]:.3f}.", "",
                "| step | " + " | ".join(str(x) for x in vs) + " |", "|---|" + "---:|" * len(vs),
                "| validation loss | " + " | ".join(f"{x:.3f}" for x in vl) + " |"]
    gens = [b for b in rows if b["name"].startswith("generate")]
    if gens:
        out += ["", "| generation, batch 1, KV cache, fp32 (200 bytes) | tokens/s | ms per token |", "|---|---:|---:|"]
        for b in gens:
            how = "one CUDA graph per token, sampling on the GPU" if b["name"] == "generate, batch 1, KV cache" else \
                "the same kernels launched one by one, host waits per token"
            out.append(f"| {how} | {fmt(b['tokens_per_s'])} | {b['ms']:.3f} |")
    if cfg.get("sample"):
        out += ["", "The sample it wrote (prompt `The GPU `, temperature 0.8, top-k 40):", "", "```", cfg["sample"], "```"]
    return out + [""]


def day50_headline(data):
    by = {b["name"]: b for b in data.get("bench", [])}
    parts = []
    for d in ("fp32", "bf16"):
        b = by.get(f"train step {d}")  # the fused (default) configuration
        if b:
            parts.append(f"{d} {fmt(b['tokens_per_s'] / 1e3)}k tok/s")
    curve = data.get("config", {}).get("loss_curve", {})
    if curve.get("val_loss"):
        i = min(range(len(curve["val_loss"])), key=lambda j: curve["val_loss"][j])
        parts.append(f"lowest val loss {curve['val_loss'][i]:.2f} (step {curve['val_step'][i]})")
    return "; ".join(parts) or "–"


def day50_plot(plt, data, png):
    rows = data.get("bench", [])
    steps = [b for b in rows if b["name"].startswith("train step")]
    curve = data.get("config", {}).get("loss_curve")
    if not steps or not curve:
        return False
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    ax.plot(curve["step"], curve["train_loss"], lw=0.8, color="#3a7", label="training loss (each step's batch)")
    ax.plot(curve["val_step"], curve["val_loss"], "o-", color="#c33", label="validation loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    ax.set_title(f"{curve['precision']} training on the repository's notes")
    ax.legend(fontsize=8)
    phases = list(steps[0]["extra"]["phase_ms"].keys())
    left = [0.0] * len(steps)
    colors = ["#888", "#69c", "#3a7", "#c33", "#e92", "#a6d", "#333", "#bb3"]
    for i, ph in enumerate(phases):
        vals = [b["extra"]["phase_ms"][ph] for b in steps]
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


def day50_oracle_block(data):
    out = [f"PyTorch {data.get('env', {}).get('torch', '?')} against ./build/gpt from the same initial weights "
           "(the program's own checkpoint), on the same batches:", "", "| check | result | numbers |", "|---|---|---|"]
    for c in data.get("checks", []):
        nums = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in c.items() if k not in ("name", "passed"))
        out.append(f"| {c['name']} | {'PASS' if c['passed'] else 'FAIL'} | {nums} |")
    return out + [""]


def day50_oracle_headline(data):
    cs = data.get("checks", [])
    return f"{sum(c['passed'] for c in cs)}/{len(cs)} comparisons with PyTorch passed"


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


def goals_table(data, digits):
    """A results file's performance goals: met, or missed in bold."""
    out = ["", "| goal | measured | |", "|---|---:|---|"]
    for g in data.get("goals", []):
        out.append(f"| {g['goal']} | {g['value']:.{digits}f} | {'met' if g['met'] else '**missed**'} |")
    return out + [""]


def day50_peer_block(data):
    t, o, r = data.get("torch", {}), data.get("ours", {}), data.get("ratios", {})
    out = [f"Same GPU, same model (6 layers, 6 heads, width 384, context 256, batch 64, byte vocabulary, tied head, AdamW), one run "
           f"(PyTorch {data['env'].get('torch', '?')}: scaled_dot_product_attention, fused AdamW, no TF32):", "",
           "| training step | ms/step | tokens/s | GPU memory taken | (PyTorch: tensors at the peak) |", "|---|---:|---:|---:|---:|"]
    for mode, row in t.items():
        out.append(f"| PyTorch {mode} | {row['ms']:.2f} | {fmt(row['tokens_per_s'])} | {fmt(row['device_mib'])} MiB | "
                   f"{fmt(row['peak_allocated_mib'])} MiB |")
    for key, label in (("train_fp32", "./build/gpt fp32"), ("train_bf16", "./build/gpt bf16")):
        if key in o:
            b = o[key]
            out.append(f"| {label} | {b['ms']:.2f} | {fmt(b['tokens_per_s'])} | {fmt(b['extra']['peak_gpu_mib'])} MiB | |")
    g = data.get("torch_generation", {})
    if g and "generate" in o:
        out += ["", f"Generation at batch 1 with a KV cache (fp32): PyTorch eager {fmt(g['tokens_per_s'])} tokens/s, "
                f"./build/gpt {fmt(o['generate']['tokens_per_s'])} tokens/s."]
    return out + goals_table(data, 2)


def day50_peer_headline(data):
    r = data.get("ratios", {})
    if not r:
        return "–"
    return (f"bf16 {r['bf16_vs_torch_compile']:.2f}× torch.compile; fp32 {r['fp32_vs_torch_fp32_eager']:.2f}× eager; "
            f"generation {r['generation_vs_torch_eager']:.1f}× eager")


def multi_rows(data):
    """day50_gpt_multi's training rows by model: {config: {"one": row, "share": row, "many": [rows]}} in file order."""
    out = {}
    for b in data.get("bench", []):
        ex = b.get("extra", {})
        if not b["name"].startswith("train step") or "config" not in ex:
            continue
        c = out.setdefault(ex["config"], {"one": None, "share": None, "many": []})
        if ex.get("gpus", 1) > 1:
            c["many"].append(b)
        elif "batch" in ex:
            c["share"] = b
        else:
            c["one"] = b
    return out


def multi_block(data):
    cfg, n = data.get("config", {}), data.get("config", {}).get("gpus", "?")
    out = [f"Data parallel, one thread per GPU, NCCL {cfg.get('nccl', '?')} (NCCL_NVLS_ENABLE={cfg.get('NCCL_NVLS_ENABLE', '?')}); "
           f"{cfg.get('precision', '?')} training, the gradient all-reduced in fp32; medians of 30 steps. *Scaling* is tokens/s on {n} GPUs "
           f"over {n} × one GPU's with the same global batch; *weak* compares with {n} × one GPU running one replica's share of it; "
           "*exposed* is the step's time beyond that share's.", "",
           "| model | global batch | GPUs | all-reduce | ms/step | tokens/s | scaling | weak | exposed ms | all-reduce in training |",
           "|---|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for name, c in multi_rows(data).items():
        one, share = c["one"], c["share"]
        if one:
            out.append(f"| {name} | {one['shape'][4]} | 1 | – | {one['ms']:.2f} | {fmt(one['tokens_per_s'])} | | | | |")
        if share:
            out.append(f"| {name} | {share['shape'][4]} (one replica's share) | 1 | – | {share['ms']:.2f} | {fmt(share['tokens_per_s'])} | "
                       f"≤ {share['extra']['ideal_scaling_pct']:.1f}% with free communication | | | |")
        for b in c["many"]:
            ex = b["extra"]
            mode = ex["mode"] + (" (default)" if ex.get("default_bucket") else "")
            out.append(f"| {name} | {b['shape'][4]} | {ex['gpus']} | {mode} | {b['ms']:.2f} | {fmt(b['tokens_per_s'])} | "
                       f"{ex['scaling_efficiency_pct']:.1f}% | {ex['weak_scaling_pct']:.1f}% | {ex['exposed_ms']:.2f} | "
                       f"{ex['comm_ms_in_training']:.2f} ms, {ex['bus_gbps_in_training']:.0f} GB/s bus |")
    alone = [b for b in data.get("bench", []) if b["name"] == "nccl all-reduce alone"]
    if alone:
        out += ["", f"NCCL's all-reduce alone on idle GPUs (fp32, {n} GPUs; bus bandwidth = 2(N−1)/N × bytes / time, "
                "the figure nccl-tests prints):", "",
                "| message | " + " | ".join(f"{b['shape'][0] / 2**20:g} MiB" for b in alone) + " |",
                "|---|" + "---:|" * len(alone),
                "| ms | " + " | ".join(f"{b['ms']:.3f}" for b in alone) + " |",
                "| GB/s bus | " + " | ".join(f"{b['gbps']:.0f}" for b in alone) + " |"]
    lc = cfg.get("loss_curves")
    if lc:
        diffs = [abs(a - b) / b for a, b in zip(lc["loss_ngpu"], lc["loss_1gpu"])]
        out += ["", f"The same training on 1 and {n} GPUs (default model, {lc['step'][-1]} steps): training loss in means of "
                f"{lc['window']} steps differs by at most {100 * max(diffs):.2f}%; validation loss {lc['val_1gpu']:.4f} on 1 GPU, "
                f"{lc['val_ngpu']:.4f} on {n}."]
    return out + (goals_table(data, 1) if data.get("goals") else [""])


def multi_headline(data):
    n = data.get("config", {}).get("gpus", "?")
    parts = []
    for name, c in multi_rows(data).items():
        d = [b for b in c["many"] if b["extra"].get("default_bucket")]
        if d:
            parts.append(f"{name} (batch {d[0]['shape'][4]}) {d[0]['extra']['scaling_efficiency_pct']:.0f}%")
    return f"scaling on {n} GPUs: " + ", ".join(parts)


def multi_plot(plt, data, png):
    rows = multi_rows(data)
    alone = [b for b in data.get("bench", []) if b["name"] == "nccl all-reduce alone"]
    lc = data.get("config", {}).get("loss_curves")
    if not rows or not alone or not lc:
        return False
    n = data["config"]["gpus"]
    fig, (ax, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.6))
    names = list(rows)
    kinds = [("1 GPU", "#999"), (f"{n} GPUs, one all-reduce", "#e92"), (f"{n} GPUs, default buckets", "#3a7"),
             (f"{n} × one replica's share (free communication)", "#69c")]
    w = 0.2
    for k, (label, color) in enumerate(kinds):
        vals, texts = [], []
        for name in names:
            c = rows[name]
            if k == 0:
                v, t = c["one"]["tokens_per_s"], ""
            elif k == 3:
                v = n * c["share"]["tokens_per_s"] if c["share"] else 0
                t = f"{c['share']['extra']['ideal_scaling_pct']:.0f}%" if c["share"] else ""
            else:
                want = (lambda b: b["extra"]["bucket_bytes"] == 0) if k == 1 else (lambda b: b["extra"].get("default_bucket"))
                b = next((b for b in c["many"] if want(b)), None)
                v, t = (b["tokens_per_s"], f"{b['extra']['scaling_efficiency_pct']:.0f}%") if b else (0, "")
            vals.append(v / 1e6)
            texts.append(t)
        xs = [i + (k - 1.5) * w for i in range(len(names))]
        ax.bar(xs, vals, w, color=color, label=label, hatch="//" if k == 3 else None, edgecolor="white" if k != 3 else "#369")
        for x, v, t in zip(xs, vals, texts):
            if t:
                ax.text(x, v, t, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([f"{nm}\n(batch {rows[nm]['one']['shape'][4]})" for nm in names], fontsize=8)
    ax.set_ylabel("million tokens/s")
    ax.set_title(f"training throughput, 1 vs {n} × {data['env'].get('gpu', '?')}")
    ax.legend(fontsize=7)
    ax2.semilogx([b["shape"][0] for b in alone], [b["gbps"] for b in alone], "o-", color="#333", label="NCCL all-reduce alone")
    for name in names:
        d = next((b for b in rows[name]["many"] if b["extra"]["bucket_bytes"] == 0), None)
        if d:
            grad = d["extra"]["largest_bucket_bytes"]
            ax2.plot([grad], [d["extra"]["bus_gbps_in_training"]], "s", label=f"{name}: whole gradient, inside a training step")
    ax2.set_xlabel("message (bytes)")
    ax2.set_ylabel("bus bandwidth (GB/s)")
    ax2.set_title(f"all-reduce bus bandwidth, {n} GPUs")
    ax2.legend(fontsize=7)
    ax3.plot(lc["step"], lc["loss_1gpu"], "o-", color="#999", label="1 GPU")
    ax3.plot(lc["step"], lc["loss_ngpu"], "x--", color="#c33", label=f"{n} GPUs")
    ax3.set_xlabel("step")
    ax3.set_ylabel(f"training loss (mean of {lc['window']} steps)")
    ax3.set_title("same global batch: same training")
    ax3.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return True


VIEWS = {
    "day50_gpt_multi": dict(block=multi_block, plot=multi_plot, headline=multi_headline),
    "day50_gpt-torch_peer": dict(block=day50_peer_block, plot=None, headline=day50_peer_headline),  # a table, no plot
    "day50_gpt": dict(block=day50_block, plot=day50_plot, headline=day50_headline),
    "day50_gpt-torch_oracle": dict(block=day50_oracle_block, plot=day50_oracle_plot, headline=day50_oracle_headline),
    "day01_setup": dict(headline=day01_headline),
    "day40_graph_fusion": dict(block=day40_block, plot=day40_plot, headline=day40_headline),
    "day30_conv_vs_cudnn": dict(block=day30_conv_block, plot=day30_conv_plot, headline=day30_conv_headline),
    "day30_conv_vs_cudnn-toolbox": dict(headline=day30_toolbox_headline),
    "day10_matmul": dict(table=day10_table, plot=day10_plot, headline=day10_headline),
    "day20_conv_slow_fast": dict(table=day20_table, plot=day20_plot, headline=day20_headline),
}


def lesson_block(lesson, entries):
    view = VIEWS.get(lesson, {})
    table = view.get("table", bench_table)
    out = []
    for gpu, data in entries:
        out += [f"**{gpu_label(gpu, data)}** ({env_line(data)}; {checks_line(data)}; "
                f"file `{data['_path']}`)", ""]
        out += view["block"](data) if "block" in view else table(data.get("bench", []))
        if view.get("plot", generic_plot) is not None:
            png = os.path.splitext(data["_path"])[0] + ".png"
            out += ["", f"![{lesson} on {gpu}](../{png})", ""]
    return out


def gpu_label(gpu, data):
    """The GPU name, with the count for a run over several."""
    n = data.get("config", {}).get("gpus", 1)
    name = data["env"].get("gpu", gpu)
    return f"{n} × {name}" if isinstance(n, int) and n > 1 else name


def summary_block(results):
    out = ["| lesson | GPU | checks | headline | date |", "|---|---|---|---|---|"]
    for lesson in sorted(results):
        for gpu, data in results[lesson]:
            head = VIEWS.get(lesson, {}).get("headline", lambda d: "–")(data)
            out.append(f"| [{lesson}]({folder_of(lesson)}/README.md) | {gpu_label(gpu, data)} | {checks_line(data)} | "
                       f"{head} | {data['env'].get('date', '?')[:10]} |")
    return out


def replace_block(text, key, lines):
    """Replace what stands between <!-- results:key --> and <!-- /results:key -->."""
    pat = re.compile(r"(<!-- results:%s -->\n)(.*?)(<!-- /results:%s -->)" % (re.escape(key), re.escape(key)), re.S)
    if not pat.search(text):
        return text, False
    body = "\n".join(lines) + "\n"
    return pat.sub(lambda m: m.group(1) + body + m.group(3), text, count=1), True


FOLDERS = {"day50_gpt_multi": "day50_gpt"}  # results files named by their issue rather than by program


def folder_of(lesson):
    """A lesson with several programs writes <lesson>-<program>.json; its notes are in <lesson>/."""
    return FOLDERS.get(lesson, lesson.split("-")[0])


def update_readmes(root, results):
    changed = []
    for lesson, entries in results.items():
        path = os.path.join(root, folder_of(lesson), "README.md")
        if os.path.exists(path):
            text = open(path).read()
            new, found = replace_block(text, lesson, lesson_block(lesson, entries))
            if found and new != text:
                open(path, "w").write(new)
                changed.append(path)
    path = os.path.join(root, "README.md")
    if os.path.exists(path):
        text = open(path).read()
        new, found = replace_block(text, "summary", summary_block(results))
        if found and new != text:
            open(path, "w").write(new)
            changed.append(path)
    return changed


def draw(root, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    for lesson, entries in results.items():
        for gpu, data in entries:
            png = os.path.join(root, os.path.splitext(data["_path"])[0] + ".png")
            plot = VIEWS.get(lesson, {}).get("plot", generic_plot)
            if plot is not None and plot(plt, data, png) is not False:
                written.append(png)
            plt.close("all")
    return written


def read_loss_log(path):
    """day50_gpt's --log: "step loss" lines and "step val loss" lines -> (steps, losses, val_steps, vals)."""
    st, lo, vs, vl = [], [], [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            try:
                if len(parts) == 2:
                    st.append(int(parts[0]) + 1), lo.append(float(parts[1]))
                elif len(parts) == 3 and parts[1] == "val":
                    vs.append(int(parts[0]) + 1), vl.append(float(parts[2]))
                elif parts:
                    raise ValueError
            except ValueError:
                raise SystemExit(f"plot.py: {path}:{n}: not a loss-log line: {line.strip()!r}")
    return st, lo, vs, vl


def plot_loss_log(path, png):
    """A training run's loss curve (./build/gpt --log FILE) as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    st, lo, vs, vl = read_loss_log(path)
    if not st:
        raise SystemExit(f"plot.py: {path} holds no loss lines")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(st, lo, lw=0.8, color="#3a7", label="training loss")
    if vs:
        ax.plot(vs, vl, "o-", color="#c33", label="validation loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    ax.set_title(os.path.basename(path))
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return png


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=ROOT, help="repository root (default: this checkout)")
    ap.add_argument("--no-png", action="store_true", help="only regenerate the README tables")
    ap.add_argument("--loss-log", metavar="FILE", help="instead: draw the loss curve of a day50_gpt --log FILE (to FILE.png)")
    a = ap.parse_args(argv)
    if a.loss_log:
        print("wrote", plot_loss_log(a.loss_log, os.path.splitext(a.loss_log)[0] + ".png"))
        return 0
    results = load_results(a.root)
    if not results:
        print("no results files under results/: run `make bench` on a GPU machine first")
        return 0
    if not a.no_png:
        try:
            for p in draw(a.root, results):
                print("wrote", os.path.relpath(p, a.root))
        except ImportError:
            print("matplotlib is not installed (pip install matplotlib): tables only", file=sys.stderr)
    for p in update_readmes(a.root, results):
        print("updated", os.path.relpath(p, a.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
