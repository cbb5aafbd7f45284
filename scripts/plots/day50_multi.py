"""day50_gpt_multi: data-parallel training over several GPUs."""
from .text import fmt, goals_table


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
    rounds = [b for b in data.get("bench", []) if b["name"].startswith("interleaved rounds ")]
    if rounds:
        out += ["", "The goals' rows again, in interleaved rounds (each round: one GPU with the whole batch, one GPU with "
                "one replica's share, then the GPUs at the command line's settings; each round's ratios are its own):", "",
                "| model | GPUs | ways | rounds: scaling | weak | median scaling (min–max) | median weak (min–max) |",
                "|---|---:|---|---|---|---:|---:|"]
        for b in rounds:
            ex = b["extra"]
            pct = lambda x: fmt(x) + ("%" if fmt(x) != "–" else "")  # noqa: E731 (null, a value not formed: "–")
            out.append(f"| {ex['model']} | {ex['gpus']} | {ex['mode']} | "
                       + ", ".join(pct(x) for x in ex["scaling_pct"]) + " | "
                       + ", ".join(pct(x) for x in ex["weak_scaling_pct"]) + " | "
                       f"{pct(ex['scaling_median_pct'])} ({fmt(ex['scaling_min_pct'])}–{fmt(ex['scaling_max_pct'])}) | "
                       f"{pct(ex['weak_median_pct'])} ({fmt(ex['weak_min_pct'])}–{fmt(ex['weak_max_pct'])}) |")
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


def rounds_median(data, name):
    """The interleaved rounds' median scaling of model `name` (what its goal reads), or None without rounds."""
    r = next((b for b in data.get("bench", []) if b["name"].startswith("interleaved rounds ")
              and b.get("extra", {}).get("model") == name), None)
    return r["extra"].get("scaling_median_pct") if r else None


def multi_headline(data):
    n = data.get("config", {}).get("gpus", "?")
    parts = []
    for name, c in multi_rows(data).items():
        d = [b for b in c["many"] if b["extra"].get("default_bucket")]
        if d:
            med = rounds_median(data, name)
            # one decimal: the goals sit at whole percents (92, 97), and 91.8 must not read as 92
            v = f"{fmt(med, 1)}% (median of the rounds)" if med is not None else f"{fmt(d[0]['extra']['scaling_efficiency_pct'], 1)}%"
            parts.append(f"{name} (batch {d[0]['shape'][4]}) {v}")
    goals = data.get("goals") or []
    met = f"; goals met: {sum(1 for g in goals if g.get('met') is True)} of {len(goals)}" if goals else ""
    return f"scaling on {n} GPUs: " + ", ".join(parts) + met


def multi_plot(plt, data, png):
    rows = multi_rows(data)
    alone = [b for b in data.get("bench", []) if b["name"] == "nccl all-reduce alone"]
    lc = data.get("config", {}).get("loss_curves")
    if not rows or not alone or not lc:
        return False
    n = data["config"]["gpus"]
    lanes = timeline_rows(rows)
    if lanes:
        fig = plt.figure(figsize=(16, 8.4))
        gs = fig.add_gridspec(2, 3, height_ratios=[1, 0.75])
        ax, ax2, ax3 = (fig.add_subplot(gs[0, i]) for i in range(3))
        draw_timelines(fig.add_subplot(gs[1, :]), lanes, n)
    else:
        fig, (ax, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.6))
    names = list(rows)
    kinds = [("1 GPU", "#999"), (f"{n} GPUs, one all-reduce", "#e92"), (f"{n} GPUs, the command line's settings", "#3a7"),
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


def timeline_rows(rows):
    """The sampled steps to draw, of the largest configuration: the headline row's (the command line's
    settings) and, where the headline is another way of running, the plain copy-engine all-reduce's beside
    it. [(label, row)]; [] where the file has no timelines."""
    if not rows:
        return []
    c = rows[list(rows)[-1]]
    head = next((b for b in c["many"] if b["extra"].get("default_bucket")), None)
    if not head or "timeline" not in head["extra"]:
        return []
    out = [(f"{head['extra']['mode']}", head)]
    plain = next((b for b in c["many"] if b["extra"].get("collectives") == "copy" and not b["extra"].get("zero")
                  and b["extra"].get("allreduce") == "fp32" and b is not head and "timeline" in b["extra"]), None)
    if plain:
        out.insert(0, (plain["extra"]["mode"], plain))
    return out


def draw_timelines(ax, lanes, n):
    """One sampled step of each row on two lanes, ms from the step's start: the compute stream's phases
    (busy and waiting) and the side stream's collectives; what runs on past the step's end (ZeRO-1's
    gather, beside the next forward) is drawn faded, right of a line at the step's end."""
    def color(label, waiting):
        if waiting:
            return "#ccc"
        if "forward" in label:
            return "#69c"
        if "backward" in label:
            return "#3a7"
        if "AdamW" in label or "optimizer" in label or "sum of squares" in label:
            return "#e92"
        return "#a6c"
    yt, yl = [], []
    for i, (label, row) in enumerate(reversed(lanes)):
        t = row["extra"]["timeline"]
        end = t.get("step_ms", 0)
        y0 = 3 * i
        for iv in t["streams"]["compute"]:
            w = iv["end_ms"] - iv["start_ms"]
            ax.barh(y0 + 1, w, left=iv["start_ms"], height=0.8, color=color(iv["label"], iv.get("waiting")),
                    edgecolor="white", linewidth=0.5, hatch="//" if iv.get("waiting") else None)
        for iv in t["streams"]["nccl"]:
            a, b = iv["start_ms"], iv["end_ms"]
            c = "#c33" if "gather" in iv["label"] else "#555"
            inside = min(b, end) - a
            if inside > 0:
                ax.barh(y0, inside, left=a, height=0.8, color=c, edgecolor="white", linewidth=0.5)
            if b > end:
                ax.barh(y0, b - max(a, end), left=max(a, end), height=0.8, color=c, alpha=0.35, edgecolor="white",
                        linewidth=0.5)
        ax.plot([end, end], [y0 - 0.5, y0 + 1.5], color="black", linewidth=1)
        ax.text(end, y0 + 1.55, f" step ends {end:.1f} ms", fontsize=7, va="bottom")
        yt += [y0, y0 + 1]
        yl += ["side stream", f"{label}\ncompute stream"]
    ax.set_yticks(yt)
    ax.set_yticklabels(yl, fontsize=7)
    ax.set_xlabel("ms from the step's start (one sampled step, rank 0)")
    gathers = any("gather" in iv["label"] for _, row in lanes for iv in row["extra"]["timeline"]["streams"]["nccl"])
    ax.set_title(f"one step of the large model on {n} GPUs: forward (blue), backward blocks (green), waiting (grey), "
                 "AdamW (orange); side stream: the collectives (dark)" +
                 (", ZeRO-1's gather (red, faded past the step's end)" if gathers else ""), fontsize=9)


VIEWS = {"day50_gpt_multi": dict(block=multi_block, plot=multi_plot, headline=multi_headline)}
