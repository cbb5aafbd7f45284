"""Which view draws which results file; the lesson blocks and the README summary table."""
import os

from . import day01, day10, day20, day30, day40, day50, day50_multi, day50_torch, day50_trace
from .load import folder_of, gpu_label
from .text import bench_table, checks_line, env_line, throttle_note

VIEWS = {}
for _m in (day01, day10, day20, day30, day40, day50, day50_torch, day50_multi, day50_trace):
    VIEWS.update(_m.VIEWS)

SUMMARY_HEADER = ["| lesson | GPU | checks | headline | date | from the current code? |", "|---|---|---|---|---|---|"]
FRESH_COLUMN = 6  # the summary's last column: it depends on HEAD, so check-notes compares everything but it


def lesson_block(lesson, entries):
    view = VIEWS.get(lesson, {})
    table = view.get("table", bench_table)
    out = []
    for gpu, data in entries:
        if view.get("bare"):  # not a program's results (no env): the table alone
            out += view["block"](data)
            continue
        note = throttle_note(data)
        out += [f"**{gpu_label(gpu, data)}** ({env_line(data)}; {checks_line(data)}; file `{data['_path']}`)", ""]
        if note:
            out += [f"**{note}** (the GPU slowed its clocks during the run: these times may be slower than it can do)", ""]
        out += view["block"](data) if "block" in view else table(data.get("bench", []))
        if view.get("plot", True) is not None:
            png = os.path.splitext(data["_path"])[0] + ".png"
            out += ["", f"![{lesson} on {gpu}](../{png})", ""]
    return out


def summary_block(results, fresh):
    """fresh(lesson, data) -> the "from the current code?" cell (freshness.status in make plots)."""
    out = list(SUMMARY_HEADER)
    for lesson in sorted(results):
        view = VIEWS.get(lesson, {})
        if view.get("headline", True) is None:
            continue  # not a lesson's program results (day10_sass)
        for gpu, data in results[lesson]:
            head = view.get("headline", lambda d: "–")(data)
            note = throttle_note(data)
            if note:
                head = f"⚠ {note}; {head}"
            out.append(f"| [{lesson}]({folder_of(lesson)}/README.md) | {gpu_label(gpu, data)} | {checks_line(data)} | "
                       f"{head} | {str(data.get('env', {}).get('date', '?'))[:10]} | {fresh(lesson, data)} |")
    return out
