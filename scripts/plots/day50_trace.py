"""day50_gpt-trace.json (scripts/trace_kernels.py, `make trace`): the training step kernel by kernel inside its CUDA
graph, one run per variant of the Makefile's trace target (the default step, on one stream, ...)."""
from .text import cell, fmt

TOP = 12  # the largest kernels listed


def _runs(data):
    return {r.get("name"): r for r in data.get("runs", []) if isinstance(r, dict)}


def _stream(run, role):
    return sum(s.get("kernel_us_per_step", 0) for s in run.get("streams", []) if s.get("role") == role)


def _busy(run, role):
    return sum(s.get("busy_us_per_step", 0) for s in run.get("streams", []) if s.get("role") == role)


def _launches(run, role):
    return sum(s.get("kernels_per_step", 0) for s in run.get("streams", []) if s.get("role") == role)


def day50_trace_block(data, who="The bf16 training step"):
    runs = _runs(data)
    c = data.get("config", {})
    two = any(_stream(r, "side") for r in runs.values())
    out = [f"{who} as the GPU ran it: the last {c.get('window', '?')} steps of a training run, marker kernel "
           f"`{cell(c.get('marker', '?'))}` (once per step). A kernel's time is what it took beside whatever ran with it."
           + (" \"main\" is the stream the marker kernel runs on, \"side\" every other stream: the graph's executor picks "
              "which stream runs which branch, so \"side\" need not be the weight gradients'." if two else ""), "",
           "\"kernels\" adds up a stream's kernel durations; \"busy\" is the time at least one of them ran (less where a kernel "
           "starts before the one it follows has ended: a programmatic dependent launch).", "",
           "| run | step µs (median, min–max) | busy µs (any stream) | idle µs (mean step − busy) | main stream: kernels µs, "
           "busy µs, launches | side streams: kernels µs, busy µs (each stream's, added up), launches |",
           "|---|---:|---:|---:|---:|---:|"]
    for name, r in runs.items():
        side = _stream(r, "side")
        out.append(f"| {cell(name)} | {fmt(r.get('period_us'))} ({fmt(r.get('period_min_us'))}–{fmt(r.get('period_max_us'))}) | "
                   f"{fmt(r.get('busy_us'))} | {fmt(r.get('idle_us'))} | {fmt(_stream(r, 'main'))}, {fmt(_busy(r, 'main'))}, "
                   f"{_launches(r, 'main'):.0f} | "
                   + (f"{fmt(side)}, {fmt(_busy(r, 'side'))}, {_launches(r, 'side'):.0f} |" if side else "– |"))
    names = list(runs)
    cats = []
    for r in runs.values():
        for x in r.get("categories", []):
            if x.get("name") not in cats:
                cats.append(x.get("name"))
    cols = [(n, role) for n in names for role in ("main", "side")
            if any(x.get("stream") == role for x in runs[n].get("categories", []))]
    out += ["", "| what (µs per step) | " + " | ".join(f"{cell(n)}: {role}" for n, role in cols) + " |",
            "|---|" + "---:|" * len(cols)]
    for cat in cats:
        vals = []
        for n, role in cols:
            hit = [x for x in runs[n].get("categories", []) if x.get("name") == cat and x.get("stream") == role]
            vals.append(fmt(hit[0].get("us_per_step")) if hit else "")
        out.append(f"| {cell(cat)} | " + " | ".join(vals) + " |")
    if names:
        first = runs[names[0]]
        others = names[1:]
        out += ["", f"The {TOP} largest kernels of the run \"{cell(names[0])}\"" +
                (", each beside its mean duration in " + ", ".join(f"\"{cell(n)}\"" for n in others) if others else "") + ":", "",
                "| kernel | stream | µs per step | calls per step | µs per call | " +
                " | ".join(f"µs per call, {cell(n)}" for n in others) + (" |" if others else ""),
                "|---|---|---:|---:|---:|" + "---:|" * len(others)]
        for k in first.get("kernels", [])[:TOP]:
            alt = []
            for n in others:
                hit = [x for x in runs[n].get("kernels", []) if x.get("name") == k.get("name")]
                alt.append(fmt(sum(x["us_per_step"] for x in hit) / sum(x["calls_per_step"] for x in hit), 2) if hit else "–")
            out.append(f"| `{cell(k.get('name'))}` | {k.get('stream')} | {fmt(k.get('us_per_step'))} | {fmt(k.get('calls_per_step'))} | "
                       f"{fmt(k.get('us_per_call'), 2)} |" + "".join(f" {a} |" for a in alt))
        out += _unshared(runs, names)
    return out


def _unshared(runs, names):
    """The kernels (by name, over all streams) that the first run and each other run do not share: each run is a
    process of its own that times its own cuBLASLt choices, and a variant may run kernels of its own (its point),
    so a comparison across runs compares these as well."""
    if len(names) < 2 or not all("kernels_all" in runs[n] for n in names):
        return []
    base = {x.get("name") for x in runs[names[0]]["kernels_all"]}
    rows = []
    for n in names[1:]:
        there = {x.get("name") for x in runs[n]["kernels_all"]}
        gone, new = sorted(base - there), sorted(there - base)
        if gone or new:
            rows.append(f"| {cell(n)} | " + (", ".join(f"`{cell(k)}`" for k in gone) or "–") + " | "
                        + (", ".join(f"`{cell(k)}`" for k in new) or "–") + " |")
    first = cell(names[0])
    if not rows:
        return ["", f"Every run ran the same kernels as \"{first}\" (by name, over all streams)."]
    return ["", f"The kernels (by name, over all streams) that a run does not share with \"{first}\": each run is a process "
            "that times its own cuBLASLt choices, and a variant may run kernels of its own, so a comparison across runs "
            "compares these too.", "", f"| run | only in \"{first}\" | only in this run |", "|---|---|---|"] + rows


def day50_trace_headline(data):
    runs = _runs(data)
    parts = []
    for name, r in runs.items():
        side = _stream(r, "side")
        parts.append(f"{name}: step {fmt(r.get('period_us'))} µs, main-stream kernels {fmt(_stream(r, 'main'))} µs"
                     + (f", side {fmt(side)} µs" if side else ""))
    return "; ".join(parts) if parts else "–"


def day50_trace_torch_block(data):
    return day50_trace_block(data, "PyTorch's bf16 training step (`torch_peer.py`, PyTorch's variants only, one round)")


VIEWS = {
    "day50_gpt-trace": dict(block=day50_trace_block, plot=None, headline=day50_trace_headline),
    "day50_gpt-trace_torch_reduce_overhead": dict(block=day50_trace_torch_block, plot=None, headline=day50_trace_headline),
    "day50_gpt-trace_torch_max_autotune": dict(block=day50_trace_torch_block, plot=None, headline=day50_trace_headline),
}
