"""day20_conv_slow_fast: one table per convolution shape, the headline and plot."""
from .text import fmt, rate_of, ref_pct


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


def shape_key(sh):
    """The program's own name of a shape (ConvShape::str), as config.layers and config.cudnn write it."""
    n, c, h, w, k, r, s_, pad, stride, dil = sh
    out = f"{n}x{c}x{h}x{w} K{k} {r}x{s_}"
    return out + (f" pad{pad}" if pad else "") + (f" stride{stride}" if stride != 1 else "") + (
        f" dil{dil}" if dil != 1 else "")


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
            ref = ref_pct(b) if b.get("ref") else "–"
            out.append(f"| {b['name']} | {b['ms'] * 1e3:.1f} | {fmt(r)} {unit} | {ref} | {fmt(b.get('pct_of_peak'))}% |")
        out.append("")
    return out


def layers_table(data):
    """Our fastest against cuDNN's best at every timed shape (config.layers): the headline ratio is
    the median of interleaved rounds with their min..max, beside each side's workspace and error."""
    rows = data.get("config", {}).get("layers", [])
    if not rows:
        return []
    out = ["**Our fastest against cuDNN's best, per shape** (median of 3 interleaved rounds, min–max in brackets; "
           "workspace beyond x, w and y; max |error| against the CPU reference; error/atol: the larger of the checks "
           "against the CPU and against cuDNN, over the check's atol)", "",
           "| shape | our fastest | µs | cuDNN's best | µs | % of cuDNN | workspace MB, ours / cuDNN | "
           "max \\|err\\|, ours / cuDNN | error/atol |",
           "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for l in rows:
        out.append(f"| {l['shape']} | {l['ours']} | {l['ours_ms'] * 1e3:.1f} | {l['cudnn']} | {l['cudnn_ms'] * 1e3:.1f} | "
                   f"{l['pct_of_cudnn']:.1f}% ({l['pct_min']:.1f}–{l['pct_max']:.1f}%) | "
                   f"{l['ours_workspace_bytes'] / 1e6:.1f} / {l['cudnn_workspace_bytes'] / 1e6:.1f} | "
                   f"{l['ours_max_abs_err']:.1e} / {l['cudnn_max_abs_err']:.1e} | {l['ours_max_abs_err_over_atol']:.2f} |")
    return out + [""]


def cudnn_table(data):
    """Where cuDNN's best comes from: Find's single timed run of each algorithm (its order) against the
    same algorithms re-timed with our harness (config.cudnn and the cudnn_best rows' extra.retimed)."""
    finds = data.get("config", {}).get("cudnn", [])
    best = {shape_key(b["shape"]): b for b in data.get("bench", []) if b["name"].startswith("cudnn_best")}
    if not finds:
        return []
    out = ["**cuDNN's algorithms per shape** (fp32 FMA math only: an algorithm reported under tensor-op math, "
           "which would round to TF32, is left out; µs)", "",
           "| shape | Find's order (one run each) | re-timed, fastest first (median) |", "|---|---|---|"]
    for f in finds:
        b = best.get(f["shape"], {})
        ran = ", ".join(f"{a['algo']} {a['ms'] * 1e3:.1f}" for a in f["find"] if a.get("status_ok") and a.get("ms"))
        failed = [a["algo"] for a in f["find"] if not (a.get("status_ok") and a.get("ms"))]
        if failed:
            ran += f" (did not run: {', '.join(failed)})"
        re_t = ", ".join(f"{a['algo']} {a['ms'] * 1e3:.1f}" for a in b.get("extra", {}).get("retimed", []))
        out.append(f"| {f['shape']} | {ran} | {re_t} |")
    return out + [""]


def day20_block(data):
    return day20_table(data.get("bench", [])) + layers_table(data) + cudnn_table(data)


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
    resnet = [l for l in data.get("config", {}).get("layers", [])  # batch 32, 3x3 ("32x64x56x56 K64 3x3 pad1")
              if l["shape"].startswith("32x") and " 3x3 " in l["shape"] + " "]
    if len(resnet) > 1:
        parts.append(f"ResNet 3×3 layers at batch 32: {fmt(min(l['pct_of_cudnn'] for l in resnet))}–"
                     f"{fmt(max(l['pct_of_cudnn'] for l in resnet))}% of cuDNN")
    return "; ".join(parts) or "–"


def day20_plot(plt, data, png):
    shapes = list(by_shape(data.get("bench", [])).items())
    heights = [len(rs) + 2 for _, rs in shapes]  # one bar per row, so that shapes with many variants stay legible
    fig, axes = plt.subplots(len(shapes), 1, figsize=(10, 0.22 * sum(heights) + 1.5),
                             gridspec_kw={"height_ratios": heights})
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
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))  # half an inch for the title
    fig.savefig(png, dpi=100)


VIEWS = {"day20_conv_slow_fast": dict(table=day20_table, block=day20_block, plot=day20_plot, headline=day20_headline)}
