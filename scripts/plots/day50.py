"""day50_gpt: training step, phases, attention, quality run, generation."""
from .text import fmt


def _steps(rows):
    """Training-step rows that carry what the tables need (a row missing a key is left out, not a crash)."""
    return [b for b in rows if str(b.get("name", "")).startswith("train step") and b.get("ms") is not None]


def _short(b):
    return b["name"][len("train step "):]


def _on(v):
    return "–" if v is None else ("on" if v else "off")


def step_lines(rows):
    out = ["| training step | ms/step (median of 20) | tokens/s | GPU memory | attention |", "|---|---:|---:|---:|---|"]
    for b in _steps(rows):
        ex = b.get("extra", {})
        note = str(ex.get("attention", ""))
        who = note.split(" (")[0] + (" + our flash backward" if "backward: ours" in note else "")
        out.append(f"| {_short(b)} | {b['ms']:.2f} | {fmt(b.get('tokens_per_s'))} | {fmt(ex.get('peak_gpu_mib'))} MiB | "
                   f"{who} |")
    out += variant_lines(rows)
    for dtype in ("fp32", "bf16"):
        out += phase_lines([b for b in _steps(rows) if b.get("dtype") == dtype])
    out += layernorm_lines(rows)
    return out


def variant_lines(rows):
    """The steps switched on one after another (rows carrying the switches: the newer files); each row's
    saving is against the row above it of the same precision."""
    steps = [b for b in _steps(rows) if "graph" in b.get("extra", {})]
    if not steps:
        return []
    out = ["", "The training steps switched on one after another (each row's saving: against the row above, same precision, "
           "or for a row beside the ladder against the default step; "
           "MFU: model FLOPs per step / step time / the dense peak of the precision):", "",
           "| training step | matmul epilogues | fused residual+LayerNorm | CUDA graph | timed matmul choices | "
           "dW on a second stream | ms/step | saved | MFU |", "|---|---|---|---|---|---|---:|---:|---:|"]
    prev = {}
    default = {b.get("dtype"): b["ms"] for b in steps if _short(b) == b.get("dtype")}  # "train step bf16"
    default_recompute = {b.get("dtype"): b["extra"].get("recompute") for b in steps if _short(b) == b.get("dtype")}
    default_dw = {b.get("dtype"): b["extra"].get("dw_stream") for b in steps if _short(b) == b.get("dtype")}
    default_keep = {b.get("dtype"): b["extra"].get("keep_a") for b in steps if _short(b) == b.get("dtype")}
    # extra.gelu_deriv records whether the kept derivative applied, and it applies only with the timed choices:
    # the ladder's rows without them are rungs, not the step with --gelu-deriv off
    default_deriv = {b.get("dtype"): b["extra"].get("gelu_deriv") for b in steps if _short(b) == b.get("dtype")}
    # the switches whose other setting is a row beside the ladder (older files lack them: not beside)
    beside_flags = ("batch_finish", "chain_priority", "dw_reduce_kernel", "dw_sm_share", "residual_bf16", "adamw_overlap",
                    "pdl", "flash_wgmma")
    default_flags = {b.get("dtype"): {f: b["extra"].get(f) for f in beside_flags} for b in steps
                     if _short(b) == b.get("dtype")}
    for b in steps:
        ex, d = b["extra"], b.get("dtype")
        # fp32 keeps cuBLASLt's heuristic pick whatever the switch says (nn/lt_tuned.cuh): shown as such
        # (tf32 is the fp32 model with TF32 matmuls: no search either)
        lt = "heuristic" if d in ("fp32", "tf32") else _on(ex.get("lt_search"))
        # The ladder's rows are saved against the row above; a row beside the ladder (the step with the
        # other --recompute setting than the default's, the graph on one stream where the default uses two, our
        # fused GEMM's other loop (--keep-a), the finishes one by one (--batch-finish off), both streams at one
        # priority (--chain-priority off) or the chain at the highest (on; the default, auto, times the two and
        # keeps the faster; older files record the flag as true / false), fc keeping the GELU's input
        # (--gelu-deriv off), the weight gradients
        # asked to reduce in place (--dw-reduce-kernel off) or sized for fewer SMs (--dw-sm-share), the residual
        # stream in bf16 (--residual bf16), AdamW at the step's end (--adamw-overlap off), the programmatic
        # launches (--pdl on), the cuDNN ones)
        # against the default step of its precision.
        one_stream = ex.get("graph") and ex.get("dw_stream") is False and default_dw.get(d) is True
        other_loop = "keep_a" in ex and ex.get("keep_a") != default_keep.get(d, ex.get("keep_a"))
        # (the SM share is the graph's with --dw-stream on: a rung without them runs every SM, as it must; AdamW
        # beside the next forward is the graph's: a rung without the graph records it off, as it must)
        other_flag = any(f in ex and ex.get(f) != default_flags.get(d, {}).get(f, ex.get(f)) for f in beside_flags
                         if (f != "dw_sm_share" or (ex.get("graph") and ex.get("dw_stream")))
                         and (f != "adamw_overlap" or ex.get("graph")))
        other_deriv = ("gelu_deriv" in ex and ex.get("lt_search") is True
                       and ex.get("gelu_deriv") != default_deriv.get(d, ex.get("gelu_deriv")))
        beside = (ex.get("recompute") != default_recompute.get(d, ex.get("recompute")) or one_stream or other_loop
                  or other_flag or other_deriv or "cuDNN" in b["name"])
        base = default.get(d) if beside else prev.get(d)
        saved = "" if base is None else f"{base - b['ms']:.2f} ms" + (" (vs default)" if beside else "")
        if not beside:
            prev[d] = b["ms"]
        mfu = ex.get("mfu_pct")
        dw = "–" if "dw_stream" not in ex else _on(ex.get("dw_stream"))  # (older files: not recorded)
        out.append(f"| {_short(b)} | {_on(ex.get('fusion'))} | {_on(ex.get('fused_ln'))} | {_on(ex.get('graph'))} | {lt} | "
                   f"{dw} | {b['ms']:.2f} | {saved} | {'–' if mfu is None else f'{mfu:.1f}%'} |")
    return out


def phase_lines(steps):
    steps = [b for b in steps if b.get("extra", {}).get("phase_ms") and b["extra"].get("phase_total_ms")]
    if not steps:
        return []
    out = ["", f"Where one {steps[0].get('dtype', '')} step's time goes (CUDA events between the phases of one step, ms):", "",
           "| phase | " + " | ".join(_short(b) for b in steps) + " |", "|---|" + "---:|" * len(steps)]
    for ph in steps[0]["extra"]["phase_ms"]:
        cells = []
        for b in steps:
            ms = b["extra"]["phase_ms"].get(ph)
            cells.append("–" if ms is None else f"{ms:.3f} ({100 * ms / b['extra']['phase_total_ms']:.0f}%)")
        out.append(f"| {ph} | " + " | ".join(cells) + " |")
    return out


def layernorm_lines(rows):
    """The fused residual+LayerNorm alone (extra.layernorm_alone of the default steps and of the bf16 residual
    stream's), against the unfused kernels and the measured copy bandwidth."""
    lns = [(b, b["extra"]["layernorm_alone"]) for b in _steps(rows) if isinstance(b.get("extra", {}).get("layernorm_alone"), dict)]
    if not lns:
        return []
    out = ["", "The residual add + LayerNorm alone (one layer's, at the step's shape; µs; GB/s counts the fused kernels' "
           "minimum traffic; % of the copy bandwidth measured in the same run):", "",
           "| step | forward fused | forward unfused | backward fused | backward unfused | forward GB/s | backward GB/s | copy GB/s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    def unfused(a, key):  # a bf16 residual stream has no unfused kernels (older files recorded 0 there)
        return "–" if a.get("residual_bytes") == 2 or not a.get(key) else fmt(a.get(key))

    def copy32(a):  # the bf16 stream's run also times a copy of the fp32 stream's size (the same yardstick)
        return f" (fp32-size copy: {fmt(a['copy_fp32_stream_gbs'])})" if a.get("copy_fp32_stream_gbs") else ""
    for b, a in lns:
        out.append(f"| {_short(b)} | {fmt(a.get('fused_fwd_us'))} | {unfused(a, 'unfused_fwd_us')} | {fmt(a.get('fused_bwd_us'))} | "
                   f"{unfused(a, 'unfused_bwd_us')} | {fmt(a.get('fwd_gbs'))} ({fmt(a.get('fwd_pct_of_copy'))}%) | "
                   f"{fmt(a.get('bwd_gbs'))} ({fmt(a.get('bwd_pct_of_copy'))}%) | {fmt(a.get('copy_gbs'))}{copy32(a)} |")
    return out


def choice_lines(cfg):
    """config.timed_choices: what the start-up timing chose for each shape (bf16)."""
    tc = cfg.get("timed_choices")
    if not isinstance(tc, dict) or not tc:
        return []
    out = ["Timed at start-up (bf16; shapes: the layer's inputs × outputs × rows, for the LayerNorm columns × rows; "
           "µs; `config.timed_choices`):", "",
           "| what | shape | measured, kept |", "|---|---|---|"]
    for k, v in tc.items():
        what, _, shape = str(k).rpartition(" ")
        out.append(f"| {what} | {shape} | {v} |")
    return out


def attention_lines(rows):
    """Rows named 'attention fwd+bwd <dtype> <impl>' (in day50_gpt.json, or day50_gpt-attention.json); the backward
    column is the forward+backward time less the forward's (extra.backward_ms), where the file has it."""
    att = [b for b in rows if str(b.get("name", "")).startswith("attention") and b.get("ms") is not None]
    if not att:
        return []
    out = ["Attention alone (one layer, forward + backward, median ms; TFLOP/s counts the six full T×T products):", "",
           "| attention | dtype | forward ms | backward ms | forward+backward ms | TFLOP/s |",
           "|---|---|---:|---:|---:|---:|"]
    for b in att:
        fwd = b.get("extra", {}).get("forward_ms")
        bwd = b.get("extra", {}).get("backward_ms")
        who = b["name"].split(f" {b.get('dtype', '')} ", 1)[-1]
        out.append(f"| {who} | {b.get('dtype', '')} | {'–' if fwd is None else f'{fwd:.3f}'} | "
                   f"{'–' if bwd is None else f'{bwd:.3f}'} | {b['ms']:.3f} | {fmt(b.get('tflops'))} |")
    return out


def curve_lines(cfg):
    curve = cfg.get("loss_curve", {})
    if not curve:
        return []
    vs, vl, tl = curve.get("val_step", []), curve.get("val_loss", []), curve.get("train_loss", [])
    # the last of equal lowest losses, as the program's val_loss_min_step picks it
    best = max((i for i in range(len(vl)) if vl[i] == min(vl)), default=None)
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
STAGES = ("qkv", "attention", "proj", "fc", "fc2", "head")


def _gen_variant(b):
    """'generate bf16, batch 1, persistent kernel, counting barrier' -> 'persistent kernel, counting barrier'."""
    name = b["name"]
    return name.split("batch 1, ", 1)[1] if "batch 1, " in name else name


def generation_lines(rows):
    gens = [b for b in rows if str(b.get("name", "")).startswith("generate") and b.get("ms") is not None]
    if not gens:
        return []
    old = [b for b in gens if "blocks" not in b.get("extra", {})]
    fast = [b for b in gens if "blocks" in b.get("extra", {})]
    out = ["| generation, batch 1, the first generator (fp32) | tokens/s | ms per token |", "|---|---:|---:|"]
    for b in old:
        how = GENERATION_HOW.get(b["name"], b["name"])
        out.append(f"| {how} | {fmt(b.get('tokens_per_s'))} | {b['ms']:.3f} |")
    if fast:
        out += ["", "The fused decoders (batch 1, 200 bytes inside the context; % of the memory floor: the time to read "
                "the weights once at the measured copy bandwidth, over the time per token):", "",
                "| decoder | weights | blocks | tokens/s | µs per token | % of memory floor |", "|---|---|---:|---:|---:|---:|"]
        for b in fast:
            ex = b["extra"]
            out.append(f"| {_gen_variant(b)} | {b.get('dtype')} | {ex.get('blocks', '–')} | {fmt(b.get('tokens_per_s'))} | "
                       f"{1e3 * b['ms']:.1f} | {fmt(ex.get('pct_of_memory_floor'))}% |")
    staged = [b for b in fast if isinstance(b["extra"].get("stage_us"), dict)]
    if staged:
        out += ["", "Inside the persistent kernel (a second run with clock stamps after every stage: mean µs per stage of each "
                "kind, its barrier included; a token is 6 layers of the first five and one head):", "",
                "| decoder | weights | " + " | ".join(STAGES) + " | token |", "|---|---|" + "---:|" * (len(STAGES) + 1)]
        for b in staged:
            st = b["extra"]["stage_us"]
            out.append(f"| {_gen_variant(b)} | {b.get('dtype')} | " + " | ".join(fmt(st.get(k), 2) for k in STAGES)
                       + f" | {fmt(st.get('token'))} |")
    bars = [b for b in rows if str(b.get("name", "")).startswith("grid barrier alone") and b.get("extra", {}).get("us_per_barrier")]
    if bars:
        kinds, counts, cell = [], [], {}
        for b in bars:
            kind = b["name"][len("grid barrier alone, "):].rsplit(", ", 1)[0]
            n = b["extra"].get("blocks")
            kinds += [kind] if kind not in kinds else []
            counts += [n] if n not in counts else []
            cell[(kind, n)] = b["extra"]["us_per_barrier"]
        out += ["", "A grid barrier alone (no work between barriers; µs per barrier):", "",
                "| blocks | " + " | ".join(kinds) + " |", "|---:|" + "---:|" * len(kinds)]
        for n in counts:
            out.append(f"| {n} | " + " | ".join(fmt(cell.get((k, n)), 2) for k in kinds) + " |")
    return out


def verify_headline(data):
    return f"gpt --verify: {len(data.get('checks', []))} checks of the GPU model against the CPU model"


def _groups_table(groups, command, what):
    """checks counted per group ({name: [checks, failed]}) as a table under a one-line total."""
    out = [f"`{command}`: {sum(g[0] for g in groups.values())} checks, "
           f"{sum(g[1] for g in groups.values())} failed.", "", f"| {what} | checks | failed |", "|---|---:|---:|"]
    out += [f"| {k} | {v[0]} | {v[1]} |" for k, v in groups.items()]
    return out + [""]


def _count(groups, key, check):
    g = groups.setdefault(key, [0, 0])
    g[0] += 1
    g[1] += 0 if check.get("passed") else 1


def verify_block(data):
    """gpt --verify's results file: how many checks, grouped by what they check, and any that failed."""
    groups = {}
    for c in data.get("checks", []):
        name = str(c.get("name", ""))
        key = name.split(":")[0].split(" vs ")[0]
        for word in ("decode", "tiny GPT", "attention", "dropout", "random batches", "training step", "training", "generation", "sliding window",
                     "data parallel"):
            if word in name:
                key = word
                break
        _count(groups, key, c)
    return _groups_table(groups, "gpt --verify", "what is checked")


def verify_dp_block(data):
    """gpt --verify --verify-only dp: the data-parallel checks, grouped by the run they compare (the name
    before its first ':')."""
    groups = {}
    for c in data.get("checks", []):
        _count(groups, str(c.get("name", "")).split(":")[0], c)
    return _groups_table(groups, "gpt --verify --verify-only dp", "runs compared")


def day50_block(data):
    rows = data.get("bench", [])
    cfg = data.get("config", {})
    out = [f"Model: {cfg.get('layers')} layers, {cfg.get('heads')} heads, width {cfg.get('width')}, context {cfg.get('context')}, "
           f"batch {cfg.get('batch')} (byte vocabulary, 256).", ""] + step_lines(rows)
    for part in (choice_lines(cfg), attention_lines(rows), curve_lines(cfg), quality_lines(data), generation_lines(rows)):
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
    who = b["name"].split(f" {b.get('dtype', '')} ", 1)[-1]  # what follows the dtype: "cuDNN", "cuDNN + our flash backward"
    return f"fastest attention fwd+bwd: {who} {b.get('dtype', '')} {fmt(b['tflops'])} TFLOP/s"


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
    text = str(data.get("config", {}).get("data", "?")).split("/")[-1]
    ax.set_title(f"{curve.get('precision', '?')} training on {text}")
    ax.legend(fontsize=8)
    phases = list(steps[0]["extra"]["phase_ms"].keys())
    left = [0.0] * len(steps)
    colors = ["#888", "#69c", "#3a7", "#c33", "#e92", "#a6d", "#333", "#bb3"]
    for i, ph in enumerate(phases):
        vals = [b["extra"]["phase_ms"].get(ph, 0.0) for b in steps]
        ax2.barh([b["name"][len("train step "):] for b in steps], vals, left=left, color=colors[i % len(colors)], label=ph)
        left = [l + v for l, v in zip(left, vals)]
    for i, b in enumerate(steps):
        # the bars are one eager step's phases; the label is the timed step (a CUDA graph where it is one)
        ax2.text(left[i], i, f" timed {b['ms']:.2f} ms, {b['tokens_per_s'] / 1e3:.0f}k tok/s", va="center", fontsize=8)
    ax2.set_xlim(0, max(left) * 1.35)
    ax2.set_xlabel("ms per training step (bars: one step run eagerly, events between its phases)")
    ax2.set_title(f"where the time goes, {data['env'].get('gpu', '?')}")
    ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return True


VIEWS = {
    "day50_gpt": dict(block=day50_block, plot=day50_plot, headline=day50_headline),
    "day50_gpt-attention": dict(block=attention_block, plot=None, headline=attention_headline),
    "day50_gpt-verify": dict(block=verify_block, plot=None, headline=verify_headline),
    "day50_gpt-verify_dp": dict(block=verify_dp_block, plot=None,
                                headline=lambda d: f"gpt --verify --verify-only dp: {len(d.get('checks', []))} data-parallel checks"),
}
