#!/usr/bin/env python3
"""scripts/ab_builds.py: two builds of day50 against each other, from runs of the bf16 bench interleaved in one call.

`./build/gpt --bench --bench-part train-bf16` of a base build and of a variant, run in turn on one GPU (base, var,
var, base, ...: scripts/rerun_day50.sh's AB_BASE), give each build a few results files. For the default step
("train step bf16": its median ms and MFU) and for our fused GEMM at each of the step's shapes (each process's own
timing of it, `config.timed_choice_us.<shape>.fused`), this prints every run of each build, the median of each, the
difference of the medians (variant minus base: negative, the variant is faster) and a verdict:
  var faster   every run of the variant below every run of the base
  var slower   the reverse
  overlap      the runs of the two builds overlap

    python3 scripts/ab_builds.py --base B1.json B2.json ... --var V1.json V2.json ... [--json OUT.json]

It reads the numbers; it adds nothing of its own. With --self-test it checks itself on files it makes up (no GPU).
Exit: 0 done, 1 self-test failed, 2 usage or unreadable input.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import json_out

DEFAULT = "train step bf16"


def figures(data):
    """{figure name: value} of one results file: the default step's ms and MFU, our fused GEMM's us per shape."""
    out = {}
    for b in data.get("bench", []):
        if isinstance(b, dict) and b.get("name") == DEFAULT:
            if isinstance(b.get("ms"), (int, float)):
                out["step ms"] = float(b["ms"])
            mfu = (b.get("extra") or {}).get("mfu_pct")
            if isinstance(mfu, (int, float)):
                out["step MFU %"] = float(mfu)
    for shape, t in ((data.get("config") or {}).get("timed_choice_us") or {}).items():
        if isinstance(t, dict) and isinstance(t.get("fused"), (int, float)):
            out[f"our fused GEMM us: {shape}"] = float(t["fused"])
    return out


def compare(base, var):
    """[{figure, base, var, base_median, var_median, diff, verdict}] for the figures every file has."""
    names = set.intersection(*(set(f) for f in base + var)) if base and var else set()
    rows = []
    for name in sorted(names):
        b = [f[name] for f in base]
        v = [f[name] for f in var]
        lower_better = not name.startswith("step MFU")
        if max(v) < min(b):
            verdict = "var faster" if lower_better else "var slower"
        elif min(v) > max(b):
            verdict = "var slower" if lower_better else "var faster"
        else:
            verdict = "overlap"
        rows.append({"figure": name, "base": b, "var": v, "base_median": statistics.median(b),
                     "var_median": statistics.median(v), "diff": statistics.median(v) - statistics.median(b),
                     "verdict": verdict})
    return rows


def load(paths):
    out = []
    for p in paths:
        with open(p) as fh:
            out.append(figures(json.load(fh)))
    return out


def table(rows):
    lines = [f"{'figure':<62} {'base median':>12} {'var median':>11} {'var - base':>11}   verdict"]
    for r in rows:
        lines.append(f"{r['figure'][:62]:<62} {r['base_median']:>12.3f} {r['var_median']:>11.3f} {r['diff']:>+11.3f}   "
                     f"{r['verdict']}")
    return "\n".join(lines)


def self_test():
    def make(ms, mfu, fc):
        return {"bench": [{"name": DEFAULT, "ms": ms, "extra": {"mfu_pct": mfu}}, {"name": DEFAULT + " x", "ms": 9}],
                "config": {"timed_choice_us": {"fc": {"fused": fc, "apart": 80}, "qkv": {"apart": 40}}}}
    tmp = tempfile.mkdtemp()
    paths = {}
    for tag, args in {"b1": (3.40, 34.7, 54.0), "b2": (3.38, 34.9, 53.5), "v1": (3.35, 35.2, 51.0),
                      "v2": (3.39, 34.8, 50.5)}.items():
        paths[tag] = os.path.join(tmp, tag + ".json")
        with open(paths[tag], "w") as fh:
            json.dump(make(*args), fh)
    rows = {r["figure"]: r for r in compare(load([paths["b1"], paths["b2"]]), load([paths["v1"], paths["v2"]]))}
    ok = set(rows) == {"step ms", "step MFU %", "our fused GEMM us: fc"}
    ok = ok and rows["our fused GEMM us: fc"]["verdict"] == "var faster" and abs(rows["our fused GEMM us: fc"]["diff"] + 3.0) < 1e-9
    ok = ok and rows["step ms"]["verdict"] == "overlap" and rows["step MFU %"]["verdict"] == "overlap"
    out = os.path.join(tmp, "out.json")
    rc = main(["--base", paths["b1"], paths["b2"], "--var", paths["v1"], paths["v2"], "--json", out])
    with open(out) as fh:
        ok = ok and rc == 0 and len(json.load(fh)["rows"]) == 3
    ok = ok and main(["--base", paths["b1"], "--var", os.path.join(tmp, "missing.json")]) == 2
    print("ab_builds self-test:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", nargs="+", default=[])
    ap.add_argument("--var", nargs="+", default=[])
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.base or not a.var:
        ap.error("--base and --var, each with one results file or more")
    try:
        rows = compare(load(a.base), load(a.var))
    except (OSError, ValueError) as e:
        print(f"ab_builds: cannot read the results files: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("ab_builds: no figure common to every file", file=sys.stderr)
        return 2
    print(table(rows))
    if a.json:
        data = {"base": [os.path.relpath(p) for p in a.base], "var": [os.path.relpath(p) for p in a.var], "rows": rows}
        return json_out.write(a.json, data, "ab_builds")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
