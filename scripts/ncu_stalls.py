#!/usr/bin/env python3
"""scripts/ncu_stalls.py: where one kernel's warps waited, from Nsight Compute's raw metrics, as a short table.

Reads what `ncu -i REPORT --page raw --csv` prints (a report taken with `--set full`, whose warp-state
sampling is on) and prints, for each profiled launch: the kernel, its duration, how busy DRAM, L2 and the
tensor pipe were (percent of their peak), and the share of the warp-stall samples of each reason, largest
first. It reads the numbers; it adds nothing of its own. day50_gpt's notes read the weight-gradient and
fused-GEMM profiles this way ("The weight gradients beside the chain", "Where our GEMM's time goes").

    ncu -i rep.ncu-rep --page raw --csv > raw.csv
    python3 scripts/ncu_stalls.py raw.csv [--top 10]

With --self-test it checks itself on a two-launch table made up here (no GPU, no Nsight Compute needed).
"""
import argparse
import csv
import io
import sys

STALL = "smsp__pcsamp_warps_issue_stalled_"
SHOWN = (
    ("duration (us)", "gpu__time_duration.sum"),
    ("DRAM % of peak", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("L2 % of peak", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("tensor pipe % of active cycles", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
)
# The raw page scales each metric's unit to its size (its second row names them: a long kernel's duration comes in
# ms, a short one's in us): durations are turned into microseconds here.
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}


def number(s):
    try:
        return float(s.replace(",", ""))
    except (ValueError, AttributeError):
        return None


def launches(text):
    """[(kernel name, {metric: value})] for every launch row of the raw page (after its header and units rows),
    the duration in microseconds."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    head = next((i for i, r in enumerate(rows) if STALL + "barrier" in r or "Kernel Name" in r), None)
    if head is None:
        return []
    names = rows[head]
    units = {}
    out = []
    for r in rows[head + 1:]:
        d = dict(zip(names, r))
        dur = d.get("gpu__time_duration.sum", "")
        if number(dur) is None:  # the units row (or a row without numbers)
            if dur in TO_US:
                units = d
            continue
        scale = TO_US.get(units.get("gpu__time_duration.sum", "usecond"))
        if scale is None:
            raise ValueError(f"unknown unit of gpu__time_duration.sum: {units.get('gpu__time_duration.sum')!r}")
        d["gpu__time_duration.sum"] = str(number(dur) * scale)
        out.append((d.get("Kernel Name", "?"), d))
    return out


def report(text, top):
    got = launches(text)
    lines = []
    for n, (name, d) in enumerate(got):
        lines.append(f"launch {n + 1}: {name}")
        for label, key in SHOWN:
            v = number(d.get(key, ""))
            if v is not None:
                lines.append(f"  {label}: {v:.1f}")
        stalls = {k[len(STALL):]: number(v) for k, v in d.items()
                  if k.startswith(STALL) and not k.endswith("not_issued") and number(v) is not None}
        total = sum(stalls.values())
        if total > 0:
            lines.append(f"  warp-stall samples: {total:.0f}; largest reasons (share of the samples):")
            for k, v in sorted(stalls.items(), key=lambda kv: -kv[1])[:top]:
                lines.append(f"    {100 * v / total:5.1f}%  {k}")
    return got, "\n".join(lines)


def self_test():
    names = ["Kernel Name", "gpu__time_duration.sum", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
             STALL + "barrier", STALL + "wait", STALL + "wait_not_issued"]
    text = "\n".join([",".join(f'"{x}"' for x in names), '"","us","%","","",""',
                      '"k1","43.0","63.7","30","10","99"', '"k2","1,000.5","5","0","5","1"'])
    got, out = report(text, 5)
    ok = len(got) == 2 and "duration (us): 43.0" in out and "75.0%  barrier" in out and "duration (us): 1000.5" in out
    ok = ok and "not_issued" not in out and "100.0%  wait" in out
    # a long kernel's duration in milliseconds: 18.77 ms is 18,770 us
    got, out2 = report(text.replace('"us"', '"ms"').replace('"43.0"', '"18.77"'), 5)
    ok = ok and "duration (us): 18770.0" in out2
    out += "\n" + out2
    print("ncu_stalls self-test:", "PASS" if ok else "FAIL\n" + out)
    return 0 if ok else 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.csv:
        ap.error("a raw-page CSV, or --self-test")
    try:
        with open(a.csv, errors="replace") as fh:
            got, out = report(fh.read(), a.top)
    except OSError as e:
        print(f"ncu_stalls: cannot read {a.csv}: {e.strerror}", file=sys.stderr)
        return 2
    if not got:
        print(f"ncu_stalls: no launch with metrics in {a.csv}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
