"""day30_conv_vs_cudnn: the contest, the algorithm survey; day30_conv_vs_cudnn-toolbox: its headline."""
from .text import fmt


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


VIEWS = {
    "day30_conv_vs_cudnn": dict(block=day30_conv_block, plot=day30_conv_plot, headline=day30_conv_headline),
    "day30_conv_vs_cudnn-toolbox": dict(headline=day30_toolbox_headline),
}
