#!/usr/bin/env python3
"""scripts/ab_rows.py: one flag's effect on day50's training step, read across several runs of the same bench.

`./build/gpt --bench --bench-part train-bf16` times every bf16 row one after another in one process: the
default step ("train step bf16") and one row for each flag switched away from its default. Inside a file a
row's difference from the default is one process's pair, and a row's own spread (its fastest and slowest of 20
timed steps) understates how far two rows of one process can sit apart: the same pair has swapped sides by more
than either row's spread from one run to the next (the day50 notes: "The chain first", "The weight gradients
beside the chain"). So a flag's effect is read from several runs: for each run, the row's median minus the
default's (positive: the flag's row is slower, i.e. the default saves that much), then over the runs their median,
smallest and largest, and a verdict:
  default faster   the default row was faster in every run, and in at least one beyond the default row's spread
  default slower   the reverse
  unsettled        the runs disagree in sign, or no difference exceeds its run's spread

    python3 scripts/ab_rows.py ROUND.json [ROUND.json ...] [--row SUBSTR] [--json OUT.json]

Compare only runs of one build (the files' env.commit). It reads the numbers; it adds nothing of its own. With --self-test it checks itself on files it makes up (no GPU).
Exit: 0 done, 1 self-test failed, 2 usage or unreadable input.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import os

import json_out

DEFAULT = "train step bf16"


def rows_of(data):
    """{row name: (median ms, min ms, max ms)} of one results file's bf16 training rows."""
    out = {}
    for b in data.get("bench", []):
        name = b.get("name") if isinstance(b, dict) else None
        if not isinstance(name, str):
            continue
        if name == DEFAULT or name.startswith(DEFAULT + " "):
            if all(isinstance(b.get(k), (int, float)) for k in ("ms", "min_ms", "max_ms")):
                out[name] = (float(b["ms"]), float(b["min_ms"]), float(b["max_ms"]))
    return out


def verdict(diffs, spreads):
    """diffs: row minus default, ms, one per run; spreads: the default row's max - min in the same runs."""
    beyond = any(abs(d) > s for d, s in zip(diffs, spreads))
    if all(d > 0 for d in diffs) and beyond:
        return "default faster"
    if all(d < 0 for d in diffs) and beyond:
        return "default slower"
    return "unsettled"


def summarize(files_rows, only=""):
    """files_rows: [(label, rows_of(...))]. One entry per non-default row present in every file."""
    have = [r for _, r in files_rows if DEFAULT in r]
    if len(have) != len(files_rows):
        raise ValueError(f"every file needs the row '{DEFAULT}'")
    names = sorted(set.intersection(*(set(r) for _, r in files_rows)) - {DEFAULT})
    out = []
    for n in names:
        if only and only not in n:
            continue
        diffs = [r[n][0] - r[DEFAULT][0] for _, r in files_rows]
        spreads = [r[DEFAULT][2] - r[DEFAULT][1] for _, r in files_rows]
        out.append(dict(row=n, diff_ms=diffs, median_ms=statistics.median(diffs), min_ms=min(diffs), max_ms=max(diffs),
                        default_spread_ms=spreads, verdict=verdict(diffs, spreads)))
    return out


def table(summary, labels):
    lines = [f"{i + 1}: {l}" for i, l in enumerate(labels)]
    lines.append(f"{'row (difference from the default step, ms; + = the default is faster)':72s} "
                 + " ".join(f"{i + 1:>9d}" for i in range(len(labels))) + "    median   verdict")
    for s in summary:
        lines.append(f"{s['row'][len(DEFAULT) + 1:][:72]:72s} " + " ".join(f"{d:+9.3f}" for d in s["diff_ms"])
                     + f"  {s['median_ms']:+8.3f}   {s['verdict']}")
    return "\n".join(lines)


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"ab_rows: {path}: {e}", file=sys.stderr)
        sys.exit(2)
    if not isinstance(data, dict) or not isinstance(data.get("bench"), list) or not isinstance(data.get("env", {}), dict):
        print(f"ab_rows: {path}: not a results file (an object with a list 'bench')", file=sys.stderr)
        sys.exit(2)
    return data


def self_test():
    fails = []

    def expect(name, got, want):
        if got != want:
            fails.append(f"{name}: got {got!r}, want {want!r}")

    def bench(rows):
        return {"bench": [dict(name=n, ms=m, min_ms=m - 0.02, max_ms=m + 0.02) for n, m in rows.items()]}

    runs = [bench({DEFAULT: 3.40, DEFAULT + " flag a": 3.50, DEFAULT + " flag b": 3.39, DEFAULT + " flag c": 3.30}),
            bench({DEFAULT: 3.45, DEFAULT + " flag a": 3.52, DEFAULT + " flag b": 3.47, DEFAULT + " flag c": 3.40}),
            bench({DEFAULT: 3.42, DEFAULT + " flag a": 3.43, DEFAULT + " flag b": 3.41, DEFAULT + " flag c": 3.35,
                   "train step fp32": 30.0})]
    s = {x["row"]: x for x in summarize([(str(i), rows_of(r)) for i, r in enumerate(runs)])}
    expect("rows common to every file", sorted(s), [DEFAULT + " flag a", DEFAULT + " flag b", DEFAULT + " flag c"])
    expect("flag a: default faster", s[DEFAULT + " flag a"]["verdict"], "default faster")
    expect("flag a: median", round(s[DEFAULT + " flag a"]["median_ms"], 6), 0.07)
    expect("flag b: signs disagree", s[DEFAULT + " flag b"]["verdict"], "unsettled")
    expect("flag c: default slower", s[DEFAULT + " flag c"]["verdict"], "default slower")
    expect("within the spread", verdict([0.01, 0.02], [0.04, 0.04]), "unsettled")
    expect("filter", [x["row"] for x in summarize([(str(i), rows_of(r)) for i, r in enumerate(runs)], "flag c")],
           [DEFAULT + " flag c"])
    try:
        summarize([("x", rows_of(bench({DEFAULT + " flag a": 1.0})))])
        expect("a file without the default row", "accepted", "ValueError")
    except ValueError:
        pass
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "bad.json")
        open(bad, "w").write("{")
        good = os.path.join(d, "good.json")
        json.dump(runs[0], open(good, "w"))
        shape = os.path.join(d, "shape.json")
        open(shape, "w").write("[1]")
        # unreadable input, wrong shape, bad flag, no input, bad output, output over an input, one file twice,
        # a --row that matches nothing
        for argv in ([bad], [shape], ["--bogus"], [], ["--json", d, good], [good, "--json", good], [good, good],
                     [good, "--row", "nosuch"]):
            r = subprocess.run([sys.executable, os.path.abspath(__file__)] + argv, capture_output=True, text=True)
            expect(f"refuses {argv}: one line, exit 2", (r.returncode, len(r.stderr.strip().splitlines())), (2, 1))
        expect("an input named as the output survives", json.load(open(good)), runs[0])
    for f in fails:
        print(f"FAIL  {f}")
    print(f"ab_rows self-test: {'PASS' if not fails else 'FAIL'} ({len(fails)} failed)")
    return 1 if fails else 0


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every program of the repository
        print(f"ab_rows: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv):
    ap = Parser(description="a flag's effect on day50's step across runs of the bf16 bench")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--row", default="", help="only the rows whose name contains this")
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.files:
        print("ab_rows: no results files given", file=sys.stderr)
        return 2
    real = [os.path.realpath(p) for p in a.files]
    if len(set(real)) != len(real):
        print("ab_rows: a file is given twice: each run counts once", file=sys.stderr)
        return 2
    if a.json:  # checked before anything is read; written only once the summary exists, never over an input
        where = os.path.dirname(os.path.abspath(a.json))
        if os.path.realpath(a.json) in real or os.path.isdir(a.json) or not os.access(where, os.W_OK):
            print(f"ab_rows: --json {a.json}: not a writable file apart from the inputs", file=sys.stderr)
            return 2
    datas = [load(p) for p in a.files]
    # a column's label: the file's folder and name (rounds of different folders are often all round_1.json)
    runs = [("/".join(os.path.splitext(os.path.normpath(p))[0].split(os.sep)[-2:]), rows_of(d)) for p, d in zip(a.files, datas)]
    builds = sorted({str(d.get("env", {}).get("commit", "?"))[:7] for d in datas})
    if len(builds) > 1:
        print(f"note: these files are of {len(builds)} builds ({', '.join(builds)}): read a flag's effect within one build",
              file=sys.stderr)
    try:
        summary = summarize(runs, a.row)
    except ValueError as e:
        print(f"ab_rows: {e}", file=sys.stderr)
        return 2
    if not summary:
        print("ab_rows: no row other than the default is in every file" + (f" and matches --row {a.row!r}" if a.row else ""),
              file=sys.stderr)
        return 2
    if len(runs) < 2:
        print("note: one file is one process's pair: the verdict wants several runs", file=sys.stderr)
    print(table(summary, [l for l, _ in runs]))
    if a.json:
        return json_out.write(a.json, dict(files=a.files, default=DEFAULT, rows=summary), "ab_rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
