"""day10_matmul: the GEMM ladder at n = 4096, its headline and plot; day10_sass: the static instruction counts."""
from .text import bench_table, fmt, ref_pct


def day10_table(rows, size=4096):
    at = [b for b in rows if b.get("shape") == [size, size, size]]
    if not at:
        return bench_table(rows)
    lines = [f"At M = N = K = {size}:", "",
             "| kernel | dtype | ms | TFLOP/s | % of cuBLAS | % of peak |", "|---|---|---:|---:|---:|---:|"]
    for b in at:
        ref = f"{ref_pct(b)} ({b['ref']})" if b.get("ref") else "–"
        lines.append(f"| {b['name']} | {b['dtype']} | {b['ms']:.4g} | {fmt(b.get('tflops'))} | {ref} | "
                     f"{fmt(b.get('pct_of_peak'))}% |")
    return lines


def day10_headline(data):
    at = [b for b in data.get("bench", []) if b.get("shape") == [4096, 4096, 4096] and b.get("ref")]
    simt = [b for b in at if b["dtype"] == "fp32" and not b["name"].startswith("cublas")]
    tc = [b for b in at if b["dtype"] == "bf16" and not b["name"].startswith("cublas")]
    def best(rows):
        """The program's headline: the best interleaved median among re-timed rows (single-pass rows are
        not comparable with them); a file without re-timed rows: the fastest row."""
        timed = [b for b in rows if b.get("ref_repeats")]
        return max(timed, key=lambda b: b["pct_of_ref"]) if timed else max(rows, key=lambda b: b["tflops"])

    parts = []
    if simt:
        b = best(simt)
        parts.append(f"best FP32 SIMT {fmt(b['tflops'])} TFLOP/s = {fmt(b['pct_of_ref'])}% of cuBLAS")
    if tc:
        b = best(tc)
        parts.append(f"best BF16 {fmt(b['tflops'])} TFLOP/s = {fmt(b['pct_of_ref'])}% of cuBLAS (n = 4096)")
    return "; ".join(parts) or "–"


def day10_plot(plt, data, png):
    rows = [b for b in data.get("bench", []) if b.get("tflops") is not None]
    square = [b for b in rows if len(set(b["shape"])) == 1]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(22, 8))
    names = list(dict.fromkeys(b["name"] for b in square))
    # The merged ladder has 23 lines (3 baselines, 08/08b/08c, 7 configurations of steps 12-14): 40
    # distinct colours, so that no two lines share one.
    colors = plt.cm.tab20.colors + plt.cm.tab20b.colors
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
    # Below the axes: with 23 lines a legend inside covers the small-size points.
    ax1.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    ax1.grid(True, which="both", alpha=0.3)
    at = [b for b in rows if b["shape"] == [4096, 4096, 4096]]
    ax2.barh([b["name"] for b in at], [b["tflops"] for b in at],
             color=["#999" if b["name"].startswith("cublas") else "#3a7" for b in at])
    for i, b in enumerate(at):
        ax2.text(b["tflops"], i, f" {b['tflops']:.1f}", va="center", fontsize=7)
    ax2.set_xscale("log")
    ax2.tick_params(axis="y", labelsize=8)  # one bar per kernel and configuration: 23 rows
    ax2.invert_yaxis()
    ax2.set_xlabel("TFLOP/s (log scale)")
    ax2.set_title("n = 4096")
    odd = [b for b in rows if len(set(b["shape"])) > 1]
    if odd:
        odd_shapes(ax3, odd)
    else:
        ax3.set_axis_off()  # a run with --sizes only: no non-square shape to show
    fig.suptitle(f"day10_matmul on {data['env'].get('gpu', '?')}")
    fig.tight_layout()
    fig.savefig(png, dpi=110, bbox_inches="tight")  # "tight": the legend below the axes is kept


def odd_shapes(ax, odd):
    """The non-square shapes (odd sizes and the GPT's thin matmuls): one group of bars per kernel, one bar per
    shape, so that where a kernel loses away from the square sizes shows beside cuBLAS."""
    shapes = list(dict.fromkeys(tuple(b["shape"]) for b in odd))
    kernels = list(dict.fromkeys(b["name"] for b in odd))
    h = 0.8 / max(1, len(shapes))
    for j, shape in enumerate(shapes):
        tf = {b["name"]: b["tflops"] for b in odd if tuple(b["shape"]) == shape}
        ax.barh([i + j * h for i in range(len(kernels))], [tf.get(n, float("nan")) for n in kernels], height=h,
                label="×".join(map(str, shape)))
    ax.set_yticks([i + h * (len(shapes) - 1) / 2 for i in range(len(kernels))], kernels, fontsize=7)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("TFLOP/s (log scale)")
    ax.legend(fontsize=7, title="M×N×K")
    ax.set_title("non-square shapes")


def sass_block(data):
    """results/sm_90/day10_sass.json (make sass): registers and static instruction counts per kernel; a zero
    is shown as '·' so the few instructions that define a step stand out."""
    kernels = sorted(data.get("kernels", []), key=lambda k: k.get("kernel", ""))
    cols = list(dict.fromkeys(c for k in kernels for c in k.get("instructions", {})))
    out = ["| kernel | regs | " + " | ".join(cols) + " |", "|---|---:|" + "---:|" * len(cols)]
    for k in kernels:
        cells = [str(k["instructions"].get(c) or "·") for c in cols]
        out.append(f"| {k.get('kernel', '?')} | {k.get('regs', '–')} | " + " | ".join(cells) + " |")
    return out


VIEWS = {
    "day10_matmul": dict(table=day10_table, plot=day10_plot, headline=day10_headline),
    "day10_sass": dict(block=sass_block, plot=None, bare=True, headline=None),  # no GPU, no env: a table only
}
