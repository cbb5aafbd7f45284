#!/usr/bin/env python3
"""day10_matmul/ncu_metrics.py OUT.json REPORT.txt...: the Nsight Compute figures the notes quote, as JSON.

profile.sh runs it beside its text reports so that the notes can cite the figures through markers
instead of typing them. For each report: {"kernel": the profiled kernel's name, "metrics": {name:
{"value": number, "unit": text}}}, for the metrics in WANTED that the report has (a section the
profile did not collect is absent, not zero).
"""
import json
import re
import sys

WANTED = ["Duration", "Compute (SM) Throughput", "DRAM Throughput", "L2 Hit Rate", "Registers Per Thread",
          "Theoretical Occupancy", "Achieved Occupancy", "Issue Slots Busy", "One or More Eligible", "No Eligible",
          "Issued Warp Per Scheduler", "Block Limit Registers", "Dynamic Shared Memory Per Block",
          # the tail of a persistent kernel: how evenly the SMs were kept busy (steps 12 and 14)
          "gpu__time_duration.sum", "sm__cycles_active.avg", "sm__cycles_active.min", "sm__cycles_active.max",
          "sm__cycles_elapsed.max"]
# Stall reasons, cycles per issued instruction (steps 8b-8f: smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio).
WANTED_PREFIX = "smsp__average_warps_issue_stalled_"


def parse(text):
    """The first value of each wanted metric: an ncu table row is `name  [unit]  value`."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s+(.+?)\s{2,}(?:(\S+)\s+)?([-\d.,]+)\s*$", line)
        if not m or m.group(1).replace(".", "_") in out:
            continue
        if m.group(1) not in WANTED and not m.group(1).startswith(WANTED_PREFIX):
            continue
        try:
            value = float(m.group(3).replace(",", ""))
        except ValueError:
            continue
        # A dotted metric name (sm__cycles_active.min) is stored with '_' for '.', so that a notes marker's
        # dotted path can reach it.
        out[m.group(1).replace(".", "_")] = {"value": value, "unit": m.group(2) or ""}
    return out


def main(argv):
    if len(argv) < 3:
        print("usage: ncu_metrics.py OUT.json REPORT.txt...", file=sys.stderr)
        return 2
    reports = {}
    for path in argv[2:]:
        text = open(path, encoding="utf-8", errors="replace").read()
        k = re.search(r'==PROF== Profiling "([^"]+)"', text)
        name = re.sub(r"\.txt$", "", path.rsplit("/", 1)[-1])
        reports[name] = {"kernel": k.group(1) if k else "", "metrics": parse(text)}
    with open(argv[1], "w") as fh:
        json.dump({"lesson": "day10_matmul", "source": "Nsight Compute (make profile)", "reports": reports}, fh,
                  indent=1)
        fh.write("\n")
    print("wrote", argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
