#!/usr/bin/env python3
"""scripts/ncu_lines.py: Nsight Compute's per-source-line counts of one kernel, as a short table.

Reads what `ncu -i REPORT --page source --print-source cuda,sass --csv` prints (a report taken with the
SourceCounters section and a build with -lineinfo, as every lesson builds) and prints, for the source lines
with the most executed instructions and the most warp-stall samples, each line's share of the kernel's
totals. day50_gpt's notes ("Generation at batch 1") read the cluster decoder's profiles this way.

    ncu -i rep.ncu-rep --page source --print-source cuda,sass --csv > lines.csv
    python3 scripts/ncu_lines.py lines.csv [--top 20]
"""
import argparse
import csv
import sys


def load(path):
    """(file, line, source, samples, instructions) for every source line that has counts."""
    rows, f = [], None
    with open(path, errors="replace") as fh:
        for r in csv.reader(fh):
            if not r:
                continue
            if r[0] in ("File Path", "File Name"):
                f = r[1].split("/")[-1]
            elif r[0].isdigit() and len(r) > 8:
                try:
                    rows.append((f, int(r[0]), r[1].strip(), float(r[4]), float(r[7])))
                except ValueError:  # a line without counts ("-")
                    pass
    return rows


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args(argv)
    rows = load(a.csv)
    if not rows:
        print(f"ncu_lines: no source lines with counts in {a.csv}", file=sys.stderr)
        return 2
    S, I = sum(r[3] for r in rows), sum(r[4] for r in rows)
    print(f"source lines with counts: {len(rows)}; warp-stall samples {S:.0f}; executed warp instructions {I:.0f}")
    for title, key in (("by executed instructions", 4), ("by warp-stall samples", 3)):
        print(f"\n{title} (share of the kernel's instructions, of its samples):")
        for f, n, src, s, i in sorted(rows, key=lambda r: -r[key])[:a.top]:
            print(f"  {100 * i / I:5.1f}% instr {100 * s / S:5.1f}% samples  {f}:{n}  {src[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
