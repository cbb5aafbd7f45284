#!/usr/bin/env python3
"""scripts/ncu_kloop.py: how long a wgmma GEMM's k-loop is, and how much of the warps' time it holds, from Nsight
Compute's source page.

Reads what `ncu -i REPORT --page source --csv --print-source sass` prints for one kernel (a report taken with
`--set full --import-source yes`, whose warp-state sampling is on) and finds the k-loop: the smallest backward
branch whose body holds wgmma instructions (HGMMA). It prints the loop's length in SASS instructions, how many of
them are HGMMA, how many are other instructions a k-step, the warp-stall samples inside the loop against the
kernel's, and the largest stall reasons inside the loop. It reads the numbers; it adds nothing of its own.
day50_gpt's notes read fc's forward GEMM this way ("Where our GEMM's time goes").

    ncu -i rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 scripts/ncu_kloop.py sass.csv

With --sass it reads a disassembly instead (`cuobjdump -sass object.o`, every kernel in it, or `-fun KERNEL`; no
GPU needed) and prints each kernel's k-loop length alone (a disassembly has no samples). --json PATH writes the
same figures as a results file ({"kloop_instructions_range": [fewest, most], "kernels": [{"kernel",
"kloop_instructions", "hgmma", "samples_in_kloop", "samples_total", "reasons_in_kloop"}]}) that the notes'
value tags read.

With --self-test it checks itself on a small listing made up here (no GPU, no Nsight Compute needed).
"""
import argparse
import csv
import io
import re
import sys

import json_out

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
BRANCH = re.compile(r"\bBRA\s+(0x[0-9a-fA-F]+)")


def number(s):
    try:
        return int(str(s).replace(",", ""))
    except ValueError:
        return 0


def listing(text):
    """(kernel name, [row dicts]) of the source page: its first line names the kernel, its second the columns."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    head = next((i for i, r in enumerate(rows) if "Address" in r and "Source" in r), None)
    if head is None:
        return None, []
    name = rows[head - 1][1] if head >= 1 and len(rows[head - 1]) > 1 else "?"
    cols = rows[head]
    return name, [dict(zip(cols, r)) for r in rows[head + 1:] if len(r) >= len(cols) - 1]


def disassemblies(text):
    """[(kernel name, [row dicts])] from cuobjdump's listing, one per 'Function :' section: lines
    '/*0a30*/  INSTR ;' (addresses relative to the function)."""
    out = []
    for ln in text.splitlines():
        if "Function :" in ln:
            out.append((ln.split("Function :", 1)[1].strip(), []))
            continue
        m = re.match(r"\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;", ln)
        if m and out:
            out[-1][1].append({"Address": "0x" + m.group(1), "Source": m.group(2)})
    return out


def kloop(rows):
    """(first, last) row indices of the smallest backward-branch loop that holds an HGMMA, or None."""
    addr = {int(r["Address"], 16): i for i, r in enumerate(rows) if r.get("Address", "").startswith("0x")}
    best = None
    for i, r in enumerate(rows):
        m = BRANCH.search(r.get("Source", ""))
        if not m:
            continue
        j = addr.get(int(m.group(1), 16))
        if j is None or j >= i:
            continue
        if any("HGMMA" in rows[k].get("Source", "") for k in range(j, i + 1)) and (best is None or i - j < best[1] - best[0]):
            best = (j, i)
    return best


def report(text, top, sass=False):
    """(figures or None, printed text, [per-kernel dicts]) for the source page or for every kernel of a disassembly."""
    if sass:
        found, lines, kernels = None, [], []
        for name, rows in disassemblies(text):
            got, out, k = one(name, rows, top, True)
            if got is not None:
                found = found or got
                lines.append(out)
                kernels += k
        return found, "\n".join(lines), kernels
    name, rows = listing(text)
    if not rows:
        return None, "", []
    return one(name, rows, top, False)


def one(name, rows, top, sass):
    loop = kloop(rows)
    if loop is None:
        return None, f"kernel: {name}\n  no loop with wgmma instructions", []
    a, b = loop
    body = rows[a:b + 1]
    hgmma = sum("HGMMA" in r.get("Source", "") for r in body)
    total = sum(number(r.get(SAMPLES, 0)) for r in rows)
    inside = sum(number(r.get(SAMPLES, 0)) for r in body)
    reasons = {}
    for r in body:
        for col, val in r.items():
            if col.startswith("stall_") and "Not Issued" not in col:
                reasons[col[len("stall_"):]] = reasons.get(col[len("stall_"):], 0) + number(val)
    lines = [f"kernel: {name}",
             f"  k-loop: {len(body)} instructions a k-step, {hgmma} of them HGMMA, {len(body) - hgmma} others"]
    fig = {"kernel": name, "kloop_instructions": len(body), "hgmma": hgmma}
    if sass:
        return (len(body), hgmma, 0, 0), "\n".join(lines), [fig]
    fig.update(samples_in_kloop=inside, samples_total=total, reasons_in_kloop=reasons)
    lines += [f"  times each k-loop instruction ran (warps of all blocks): {number(body[0].get(EXECUTED, 0))}",
              f"  warp-stall samples: {inside} of {total} in the k-loop ({100 * inside / max(total, 1):.1f}%)"]
    if inside:
        lines.append("  largest reasons inside the k-loop (share of its samples):")
        for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:top]:
            if n:
                lines.append(f"    {100 * n / inside:5.1f}%  {why}")
    return (len(body), hgmma, inside, total), "\n".join(lines), [fig]


def self_test():
    cols = ["Address", "Source", SAMPLES, EXECUTED, "stall_wait", "stall_selected", "stall_wait (Not Issued)"]
    src = [("0x100", "MOV R1, R2", 5, 10, 5, 0), ("0x110", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4]", 3, 60, 1, 2),
           ("0x120", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR12], R24", 7, 60, 2, 5),
           ("0x130", "UIADD3 UR12, UR12, 0x2, URZ", 2, 60, 2, 0), ("0x140", "@!P0 BRA 0x110", 4, 60, 4, 0),
           ("0x150", "@P0 BRA 0x100", 1, 6, 1, 0),  # a larger loop around it: not the k-loop
           ("0x160", "EXIT", 0, 1, 0, 0)]
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["Kernel Name", "gemm_kernel<3, 5>"])
    w.writerow(cols)
    for a, s, n, e, wt, sel in src:
        w.writerow([a, s, n, e, wt, sel, 0])
    got, text, figs = report(out.getvalue(), 5)
    ok = got == (4, 1, 16, 22) and "4 instructions a k-step, 1 of them HGMMA, 3 others" in text
    ok = ok and "56.2%  wait" in text and "43.8%  selected" in text and "72.7%" in text
    ok = ok and figs[0]["samples_in_kloop"] == 16 and figs[0]["reasons_in_kloop"] == {"wait": 9, "selected": 7}
    got2, _, _ = report(out.getvalue().replace("HGMMA.64x128x16.F32.BF16", "FFMA"), 5)
    ok = ok and got2 is None
    dis = "\n".join(["        Function : gemm_kernel", "        /*0100*/                   MOV R1, R2 ;",
                      "        /*0110*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR12], R24 ;",
                      "        /*0120*/              @!P0 BRA 0x110 ;", "        /*0130*/                   EXIT ;"])
    got3, text3, figs3 = report(dis + "\n" + dis.replace("gemm_kernel", "other").replace("HGMMA", "FFMA"), 5, sass=True)
    ok = ok and got3 == (2, 1, 0, 0) and "kernel: gemm_kernel" in text3 and "kernel: other" not in text3
    ok = ok and figs3 == [{"kernel": "gemm_kernel", "kloop_instructions": 2, "hgmma": 1}]
    print("ncu_kloop self-test:", "PASS" if ok else "FAIL\n" + text)
    return 0 if ok else 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--sass", action="store_true", help="the file is cuobjdump -sass output, not ncu's source page")
    ap.add_argument("--json", metavar="PATH", help="write the figures as a results file")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.csv:
        ap.error("a source-page CSV (--print-source sass), or --self-test")
    try:
        with open(a.csv, errors="replace") as fh:
            got, out, figs = report(fh.read(), a.top, a.sass)
    except OSError as e:
        print(f"ncu_kloop: cannot read {a.csv}: {e.strerror}", file=sys.stderr)
        return 2
    if got is None:
        print(out or f"ncu_kloop: no source listing in {a.csv}", file=sys.stderr)
        return 2
    print(out)
    if a.json:
        sizes = [k["kloop_instructions"] for k in figs]
        data = {"source": a.csv.split("/")[-1], "kloop_instructions_range": [min(sizes), max(sizes)], "kernels": figs}
        return json_out.write(a.json, data, "ncu_kloop")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
