"""Number formatting and the tables every lesson shares."""
import math


def fmt(x, digits=1):
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
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


def ref_pct(b):
    """pct_of_ref as "median%", or "median% (min–max%, N repeats)" when the ratio was taken in interleaved
    rounds (timing::interleaved): one round can be 10% off on a busy GPU, so the spread is shown."""
    s = f"{fmt(b.get('pct_of_ref'))}%"
    lo, hi, n = b.get("pct_of_ref_min"), b.get("pct_of_ref_max"), b.get("ref_repeats")
    if lo is not None and hi is not None:
        s += f" ({fmt(lo)}–{fmt(hi)}%" + (f", {n} repeats)" if n else ")")
    return s


def version_text(v):
    """cuDNN reports its version as one integer (91900 = 9.19.0); PyTorch writes it that way."""
    v = str(v)
    if v.isdigit() and int(v) >= 10000:
        n = int(v)
        return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"
    return v


def driver_text(v):
    """nvidia-smi prints one driver line per GPU it sees (it ignores CUDA_VISIBLE_DEVICES), so a file written on a
    machine with two GPUs may hold "580.1\n580.1": one version, said once (different ones joined by " / ")."""
    return " / ".join(dict.fromkeys(str(v).split())) or "?"


def env_line(data):
    e = data.get("env", {})
    if e.get("source") and "sm_count" not in e:  # recorded from nvidia-smi only (scripts/trace_kernels.py): what it knows
        return ", ".join([str(e.get("gpu", "?")), f"driver {driver_text(e.get('driver', '?'))}", str(e.get("date", "?"))[:10],
                          f"environment from {e['source']}"])
    parts = [f"{e.get('gpu', '?')}, {e.get('sm_count', '?')} SMs, driver {driver_text(e.get('driver', '?'))}, CUDA {e.get('cuda_runtime', '?')}"]
    if "cublas" in e or "torch" not in e:  # a PyTorch-written file has no cuBLAS field: say PyTorch's version instead
        parts.append(f"cuBLAS {e.get('cublas', '?')}")
    parts.append(f"cuDNN {version_text(e.get('cudnn_loaded', '?'))}")
    if "torch" in e:
        parts.append(f"PyTorch {e['torch']}")
    parts.append(str(e.get("date", "?"))[:10])
    return ", ".join(parts)


def checks_line(data):
    cs = data.get("checks", [])
    if not cs and data.get("goals"):
        return f"timings only; {sum(1 for g in data['goals'] if g.get('met'))}/{len(data['goals'])} goals met"
    ok = sum(1 for c in cs if c.get("passed"))
    return f"{ok}/{len(cs)} checks passed"


def throttle_note(data):
    """"timings unreliable: <why>" when the GPU slowed itself during the run, else ""."""
    why = data.get("throttled")
    if isinstance(why, str):  # the program's own verdict ("" when every reading was fine)
        return f"timings unreliable: {why}" if why else ""
    # No summary string (a file written before it existed, or by hand): the clock flags themselves. Not the
    # SW power cap: the normal state of a GPU under full load (common/clocks.h), which the programs never flag.
    flags = {"hw_slowdown": "HW slowdown", "hw_power_brake": "HW power brake", "thermal": "thermal throttling"}
    seen = [text for key, text in flags.items()
            for c in (data.get("env", {}).get("clocks_begin"), data.get("env", {}).get("clocks_end"))
            if isinstance(c, dict) and c.get(key) is True]
    return f"timings unreliable: {', '.join(dict.fromkeys(seen))} active" if seen else ""


def bench_table(rows):
    """The generic table: one line per benchmark row."""
    lines = ["| benchmark | dtype | shape | ms | rate | % of baseline | % of peak |",
             "|---|---|---|---:|---:|---:|---:|"]
    for b in rows:
        if "name" not in b or b.get("ms") is None:
            continue
        r, unit = rate_of(b)
        shape = "×".join(str(s) for s in b.get("shape", []))
        ref = f"{ref_pct(b)} of {b['ref']}" if b.get("ref") else "–"
        lines.append(f"| {b['name']} | {b.get('dtype', '')} | {shape} | {b['ms']:.4g} | {fmt(r)} {unit} | {ref} | "
                     f"{fmt(b.get('pct_of_peak'))}% |")
    return lines


def cell(text):
    """Text for a markdown table cell: GitHub splits a row at every unescaped |, even inside a name."""
    return str(text).replace("|", "\\|")


def goals_table(data, digits):
    """A results file's performance goals: met, or missed in bold (nothing when it has none)."""
    if not data.get("goals"):
        return []
    out = ["", "| goal | measured | |", "|---|---:|---|"]
    for g in data.get("goals", []):
        v = g.get("value")
        val = f"{v:.{digits}f}" if isinstance(v, (int, float)) else "–"
        out.append(f"| {cell(g.get('goal', '?'))} | {val} | {'met' if g.get('met') else '**missed**'} |")
    return out + [""]
