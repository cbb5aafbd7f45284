#!/usr/bin/env python3
"""scripts/plot.py: draw the results files and regenerate the numbers in the notes (the code: scripts/plots/).

    python3 scripts/plot.py                  # (= make plots) PNGs, README tables and inline figures
    python3 scripts/plot.py --no-png         # tables and figures only (no matplotlib needed)
    python3 scripts/plot.py --check-notes    # (= make check-notes) fail if a README differs from the results
    python3 scripts/plot.py --loss-log train.log   # a day50_gpt training run's curve -> train.png

Reads results/<gpu>/<lesson>.json (written by the programs with --json), writes results/<gpu>/<lesson>.png,
and rewrites the text between the markers

    <!-- results:LESSON -->  ...  <!-- /results:LESSON -->   (in LESSON/README.md)
    <!-- results:summary -->  ...  <!-- /results:summary -->  (in README.md)
    <!-- v:EXPR|FMT -->TEXT<!-- /v -->                         (one figure, anywhere in a README)

so that every number in the notes comes from a results file, never from a hand; and so does a verdict about
numbers ("saved more than the spread"): a comparison in EXPR with FMT `either:TRUE-TEXT/FALSE-TEXT` (plots/expr.py).
Exit codes: 0 done, 1 check-notes found a difference or a marker it cannot resolve, 2 bad input.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plots.draw import draw, plot_loss_log  # noqa: E402
from plots.load import InputError, load_results  # noqa: E402
from plots.markers import check_notes, update_readmes  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def run_plots(root, no_png):
    results = load_results(root)
    if not results:
        print("no results files under results/: run `make bench` on a GPU machine first")
        return 0
    if not no_png:
        try:
            written, warnings = draw(root, results)
            for p in written:
                print("wrote", os.path.relpath(p, root))
            for w in warnings:
                print(w, file=sys.stderr)
        except ImportError:
            print("matplotlib is not installed (pip install matplotlib): tables only", file=sys.stderr)
    changed, errors = update_readmes(root, results)
    for p in changed:
        print("updated", os.path.relpath(p, root))
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


def run_check(root):
    diffs, errors, warnings = check_notes(root, load_results(root))
    for w in warnings:
        print(w)
    for d in diffs:
        print("differs:", d)
    for e in errors:
        print("cannot resolve:", e)
    if diffs or errors:
        print(f"check-notes: FAIL: {len(diffs)} lines differ from the results files, {len(errors)} markers cannot be "
              "resolved (make plots rewrites the notes from the results files)")
        return 1
    print(f"check-notes: every README matches the results files ({len(warnings)} stale-file warnings)")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=ROOT, help="repository root (default: this checkout)")
    ap.add_argument("--no-png", action="store_true", help="only regenerate the README tables and figures")
    ap.add_argument("--check-notes", action="store_true", help="write nothing; fail if a README differs from the results")
    ap.add_argument("--loss-log", metavar="FILE", help="instead: draw the loss curve of a day50_gpt --log FILE (to FILE.png)")
    a = ap.parse_args(argv)
    try:
        if a.loss_log is not None:
            print("wrote", plot_loss_log(a.loss_log, os.path.splitext(a.loss_log)[0] + ".png"))
            return 0
        if not os.path.isdir(os.path.join(a.root, "results")):
            raise InputError(f"--root {a.root}: no results/ folder there (not this repository's root)")
        return run_check(a.root) if a.check_notes else run_plots(a.root, a.no_png)
    except InputError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
