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


VIEWS = {"day20_conv_slow_fast": dict(table=day20_table, plot=day20_plot, headline=day20_headline)}
