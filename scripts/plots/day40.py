"""day40_graph_fusion: fused graphs against the same math unfused."""
from .text import bench_table, fmt


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


VIEWS = {"day40_graph_fusion": dict(block=day40_block, plot=day40_plot, headline=day40_headline)}
