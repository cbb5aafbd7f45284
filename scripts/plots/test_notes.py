"""Tests of the inline markers, make check-notes, freshness, throttle flags, repeated ratios, the day50 views'
tolerance of missing keys, and plot.py's bad input. Run by scripts/test_plot.py (run_all() counts failures)."""
import json
import os
import subprocess
import sys
import tempfile

from . import day10, day50, day50_torch, expr, markers, text, views
from .freshness import status

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(os.path.dirname(HERE), "plot.py")
failures = 0


def expect(cond, what):
    global failures
    print(("ok    " if cond else "FAIL  ") + what)
    failures += not cond


def raises(f, *words):
    try:
        f()
    except expr.ExprError as e:
        return all(w in str(e) for w in words)
    return False


class Files:
    def __init__(self, d):
        self.d = d

    def get(self, name):
        if name not in self.d:
            raise KeyError(f"no results file results/{name}.json")
        return self.d[name]


DATA = {"env": {"driver": "580.1", "gpu": "G"},
        "config": {"loss_curve": {"seconds": 12.5, "val_loss": [3.0, 2.5, 2.75]}},
        "checks": [{"name": "logits", "passed": True, "max_rel_err": 1e-6},
                   {"name": "generation tokens", "passed": True, "max_rel_err": 0.0}],
        "bench": [{"name": "08_autotuned", "shape": [4096, 4096, 4096], "pct_of_ref": 84.25, "ms": 2.0},
                  {"name": "08_autotuned", "shape": [1024, 1024, 1024], "pct_of_ref": 70.0, "ms": 0.5},
                  {"name": "generate, batch 1, KV cache", "shape": [1], "ms": 4.0,
                   "extra": {"algo": "FFT", "graphs": {"one-hot . wte [x]": 7}}}]}


def test_grammar():
    f = Files({"g/day10": DATA})
    ev = lambda e: expr.evaluate(e, f)  # noqa: E731
    expect(ev("{g/day10:bench[name=08_autotuned,shape=4096x4096x4096].pct_of_ref}") == 84.25,
           "grammar: filter with two conditions, a list value joined by 'x'")
    expect(ev("{g/day10:config.loss_curve.seconds}") == 12.5 and ev("{g/day10:env.driver}") == "580.1", "grammar: dotted keys")
    expect(ev("{g/day10:checks[name~=generation].max_rel_err}") == 0.0, "grammar: '~=' substring filter")
    expect(ev("{g/day10:bench[name=generate, batch 1, KV cache].extra.algo}") == "FFT", "grammar: a filter value with commas")
    expect(ev("{g/day10:config.loss_curve.val_loss[0]}") == 3.0 and ev("{g/day10:config.loss_curve.val_loss[-1]}") == 2.75,
           "grammar: integer indexes [0] and [-1]")
    expect(ev('{g/day10:bench[name=generate, batch 1, KV cache].extra.graphs."one-hot . wte [x]"}') == 7,
           "grammar: a quoted key holds dots and brackets")
    expect(raises(lambda: ev('{g/day10:env."driver}'), "unclosed"), "grammar: an unclosed quoted key is an error")
    expect(ev("len({g/day10:checks})") == 2, "grammar: len() counts a list")
    expect(ev("min({g/day10:config.loss_curve.val_loss[0]}, 2, 5)") == 2 and ev("max(1, 7)") == 7 and ev("abs(1 - 4)") == 3,
           "grammar: min, max, abs")
    expect(ev("(1 + 2) * 3 - 4 / 2") == 7 and ev("-2**2") == -4 and ev("2*4096**2") == 2 * 4096 ** 2 and ev("1.5e3") == 1500,
           "grammar: + - * / ** parentheses, unary minus, numbers with exponents")
    expect(raises(lambda: ev("{g/day10:bench[name=08_autotuned].ms}"), "selects 2"), "grammar: a filter matching two is an error")
    expect(raises(lambda: ev("{g/day10:bench[name=nope].ms}"), "selects 0"), "grammar: a filter matching none is an error")
    expect(raises(lambda: ev("{g/day10:env.nope}"), "nope"), "grammar: a missing key is an error")
    expect(raises(lambda: ev("{g/other:env.gpu}"), "results/g/other.json"), "grammar: a missing file is an error")
    expect(raises(lambda: ev("{g/day10:config.loss_curve.val_loss[3]}"), "outside"), "grammar: an index out of range is an error")
    expect(raises(lambda: ev("{g/day10:env.gpu} * 2"), "not a number"), "grammar: arithmetic on text is an error")
    notes = ("a <!-- v:{g/day10:env.driver}|-->x<!-- /v --> b\n`<!-- v:EXPR|FMT -->TEXT<!-- /v -->`\n```\n"
             "<!-- v:EXPR|FMT -->TEXT<!-- /v -->\n```\n<!-- v:{g/day10:env.driver}|.1f -->")
    new, errs = markers.fill_inline(notes, f, "R.md")
    expect(new.split("\n")[0] == "a <!-- v:{g/day10:env.driver}|-->580.1<!-- /v --> b" and new.split("\n")[1:5] == notes.split("\n")[1:5],
           "markers: filled (no space before -->, empty FMT); syntax examples in code spans and fences left alone")
    expect(len(errs) == 1 and errs[0].startswith("R.md:6: an inline marker without"), "markers: an unclosed marker is an error")
    new, errs = markers.fill_inline("(`<!-- v:{g/day10:env.driver}| -->x<!-- /v -->`)", f, "C.md")
    expect(new == "(`<!-- v:{g/day10:env.driver}| -->x<!-- /v -->`)" and len(errs) == 1
           and errs[0].startswith("C.md:1: a marker inside a `code span` is never rendered"),
           "markers: a real marker inside a code span is an error (it would never update)")
    new, errs = markers.fill_inline("`<!-- v:2*3|d -->6<!-- /v -->` and `<!-- v:{g/day10:env.nope}|d -->1<!-- /v -->`", f, "D.md")
    expect(len(errs) == 1 and "env.nope" in errs[0],
           "markers: in a code span, a file-less example is left alone; one naming a real file is refused even if its path is wrong")
    table = "| a | <!-- v:{g/day10:env.driver}\\|-->x<!-- /v --> |\n| b | <!-- v:{g/day10:env.driver}|-->x<!-- /v --> |"
    new, errs = markers.fill_inline(table, f, "T.md")
    expect(new.split("\n")[0] == "| a | <!-- v:{g/day10:env.driver}\\|-->580.1<!-- /v --> |" and len(errs) == 1
           and errs[0].startswith("T.md:2: a marker in a table row"),
           "markers: in a table row the separator is \\| (kept as written); an unescaped | there is an error")
    expect(text.throttle_note({"env": {"clocks_end": {"hw_power_brake": True}}}) == "timings unreliable: HW power brake active"
           and text.throttle_note({"env": {"clocks_end": {"hw_power_brake": False}}, "throttled": ""}) == "",
           "throttle: the clock flags count when the file has no 'throttled' string")
    expect(text.throttle_note({"env": {"clocks_end": {"sw_power_cap": True}}, "throttled": ""}) == ""
           and text.throttle_note({"env": {"clocks_end": {"sw_power_cap": True}}}) == "",
           "throttle: the SW power cap (the normal state under load) is not a slowdown, and an empty verdict is final")
    expect(raises(lambda: ev("pow(2, 3)"), "unknown function"), "grammar: only min, max, abs, len")
    expect(raises(lambda: ev("1 / 0"), "division by zero"), "grammar: division by zero is an error, not a crash")
    r = expr.render
    expect([r(84.25, ".1f"), r(12345.6, ",.0f"), r(0.000123, ".2e"), r(7.0, "d"), r(0.25, ".0%"), r("580.1", "")] ==
           ["84.2", "12,346", "1.23e-04", "7", "25%", "580.1"], "grammar: formats .1f ,.0f .2e d .0% and empty")
    spread = "{g/day10:bench[name=08_autotuned,shape=4096x4096x4096].ms}-{g/day10:bench[name=08_autotuned,shape=1024x1024x1024].ms}"
    expect(ev(spread + " > 1") is True and ev(spread + " <= 1") is False and ev("2 >= 2") is True and ev("1<0") is False,
           "grammar: one comparison gives a true/false value, below + and - in precedence")
    expect(ev("all(1 < 2, (3 > 2))") is True and ev("all(1 < 2, 3 < 2)") is False and ev("any(1 > 2, 3 > 2)") is True,
           "grammar: all() and any() join verdicts")
    expect(raises(lambda: ev("1 < 2 < 3"), "one comparison") and raises(lambda: ev("all(1, 2)"), "true/false")
           and raises(lambda: ev("(1 < 2) + 1"), "not a number") and raises(lambda: ev("min(1 < 2, 3)"), "not a number"),
           "grammar: chained comparisons, all() of numbers and arithmetic on a verdict are refused")
    expect(r(True, "either:saved more than/saved no more than") == "saved more than"
           and r(False, "either:saved more than/saved no more than") == "saved no more than",
           "FMT either:A/B: a verdict written as one of two texts")
    expect(raises(lambda: r(1.0, "either:a/b"), "true/false") and raises(lambda: r(True, "either:a"), "two texts"),
           "FMT either: a number, or one text alone, is refused")


def write(path, s):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(s)


def git(root, *args):
    subprocess.run(["git", "-C", root, *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})
    return subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def tree(root, commit="", throttled="", dirty=False):
    d = {"lesson": "day10_matmul", "env": {"gpu": "G", "date": "2026-11-22", "commit": commit, "dirty": dirty},
         "checks": [{"name": "c", "passed": True}], "throttled": throttled,
         "bench": [{"name": "k", "dtype": "fp32", "shape": [4096, 4096, 4096], "ms": 2.0, "tflops": 68.7, "ref": "cublas",
                    "pct_of_ref": 84.3, "pct_of_ref_min": 83.9, "pct_of_ref_max": 84.8, "ref_repeats": 3}]}
    write(os.path.join(root, "results", "g", "day10_matmul.json"), json.dumps(d))
    write(os.path.join(root, "day10_matmul", "README.md"),
          "# day10\nIt reached <!-- v:{g/day10_matmul:bench[name=k].tflops}|.1f -->0<!-- /v --> TFLOP/s.\n"
          "<!-- results:day10_matmul -->\n<!-- /results:day10_matmul -->\n")
    write(os.path.join(root, "README.md"), "top\n<!-- results:summary -->\n<!-- /results:summary -->\n")
    write(os.path.join(root, "day10_matmul", "matmul.cu"), '// code\n#include "check.cuh"\n')


def plot(root, *args):
    r = subprocess.run([sys.executable, PLOT, "--root", root, "--no-png", *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def test_check_notes():
    with tempfile.TemporaryDirectory() as root:
        tree(root)
        rc, out = plot(root, "--check-notes")
        expect(rc == 1 and "day10_matmul/README.md:2: 0 → 68.7" in out, "check-notes fails on a figure not yet rendered, naming README, line, old → new")
        rc, out = plot(root)
        t = open(os.path.join(root, "day10_matmul", "README.md")).read()
        expect(rc == 0 and "-->68.7<!-- /v -->" in t, "make plots fills an inline marker")
        expect("| 84.3% (83.9–84.8%, 3 repeats) (cublas) |" in t, "a repeated ratio shows median (min–max, N repeats)")
        rc, out = plot(root, "--check-notes")
        expect(rc == 0, "check-notes passes on notes just rendered")
        for old, new, what in (("-->68.7<", "-->68.9<", "an inline marker"), ("| 2 | 68.7 |", "| 2 | 70.1 |", "a generated block")):
            p = os.path.join(root, "day10_matmul", "README.md")
            good = open(p).read()
            write(p, good.replace(old, new, 1))
            rc, out = plot(root, "--check-notes")
            expect(rc == 1 and "day10_matmul/README.md:" in out and "→" in out, f"check-notes fails when {what} is edited by hand")
            write(p, good)
        write(os.path.join(root, "results", "g", "day10_matmul-extra.json"), json.dumps({"env": {}, "bench": []}))
        rc, out = plot(root, "--check-notes")
        expect(rc == 1 and "warning: day10_matmul/README.md has no <!-- results:day10_matmul-extra --> block" in out,
               "check-notes warns about a results file whose notes have no block for it")
        os.remove(os.path.join(root, "results", "g", "day10_matmul-extra.json"))
        p = os.path.join(root, "README.md")
        good = open(p).read()
        write(p, good.replace("| unknown |", "| current |"))
        rc, out = plot(root, "--check-notes")
        expect(rc == 0 and "warning: results/g/day10_matmul.json: unknown" in out,
               "check-notes ignores the freshness column (HEAD may move) but warns about the stale file")
        write(p, good.replace("| 1/1 checks passed |", "| 2/2 checks passed |"))
        rc, out = plot(root, "--check-notes")
        expect(rc == 1 and "README.md:" in out, "check-notes compares the rest of the summary table")
        write(p, good)
        write(os.path.join(root, "day10_matmul", "README.md"), "<!-- v:{g/day10_matmul:bench[name=x].ms}|.1f -->1<!-- /v -->\n")
        rc, out = plot(root, "--check-notes")
        expect(rc == 1 and "day10_matmul/README.md:1: marker" in out and "selects 0" in out, "an unresolvable marker fails, named")
        rc, _ = plot(root)
        expect(rc == 1, "make plots fails on an unresolvable marker too")


def test_freshness_and_throttle():
    with tempfile.TemporaryDirectory() as root:
        tree(root)
        git(root, "init", "-q")
        git(root, "add", ".")
        head = git(root, "commit", "-qm", "x")
        folder = "day10_matmul"
        e = lambda **k: {"env": {"commit": head, "dirty": False, **k}}  # noqa: E731
        expect(status(root, e(), folder) == "current", "freshness: results from HEAD are current")
        expect(status(root, e(dirty=True), folder) == f"older than the code ({head[:7]})", "freshness: a dirty build is not current")
        expect(status(root, {"env": {}}, folder) == "unknown", "freshness: no commit recorded: unknown")
        write(os.path.join(root, folder, "README.md"), "notes only\n")
        write(os.path.join(root, "day20", "x.cu"), "other lesson\n")
        git(root, "add", ".")
        git(root, "commit", "-qm", "notes")
        expect(status(root, e(), folder) == "current", "freshness: a change to README.md or another lesson keeps it current")
        write(os.path.join(root, "common", "unused.cuh"), "// a header day10 never includes\n")
        git(root, "add", ".")
        git(root, "commit", "-qm", "common, not included")
        expect(status(root, e(), folder) == "current", "freshness: a new common/ header the lesson does not include keeps it current")
        write(os.path.join(root, "common", "check.cuh"), '// changed\n#include "inner.h"\n')
        git(root, "add", ".")
        git(root, "commit", "-qm", "common")
        expect(status(root, e(), folder) == f"older than the code ({head[:7]})", "freshness: a change to an included common/ header makes it older")
        e2 = {"env": {"commit": git(root, "rev-parse", "HEAD").strip(), "dirty": False}}
        write(os.path.join(root, "common", "inner.h"), "// included through check.cuh\n")
        git(root, "add", ".")
        git(root, "commit", "-qm", "inner")
        expect(status(root, e2, folder).startswith("older than the code"), "freshness: a header included through another counts too")
        tree(root, commit=head, throttled="HW power brake active")
        rc, out = plot(root)
        t, top = open(os.path.join(root, folder, "README.md")).read(), open(os.path.join(root, "README.md")).read()
        expect("timings unreliable: HW power brake active" in t and "⚠ timings unreliable: HW power brake active" in top,
               "a throttled file is marked in its block and in the summary")
        expect(f"| older than the code ({head[:7]}) |" in top, "make plots writes the freshness column")


def test_day50_tolerance():
    peer = {"env": {"torch": "2.11"}, "repeats": 5,
            "torch": {"bf16 compile": {"ms": 11.7, "min": 10.5, "max": 13.2, "tokens_per_s": 1.4e6, "memory": 1638.0},
                      "broken": {"tokens_per_s": 1.0}},
            "ratios": {"bf16_vs_best_torch": {"median": 2.2, "min": 2.1, "max": 2.3},
                       "generation_vs_best_torch": {"median": 8.7, "min": 8.5, "max": 9.0}}}
    t = "\n".join(day50_torch.day50_peer_block(peer))
    expect("| PyTorch bf16 compile | 11.70 (10.50–13.20) | 1,400,000 | 1,638 MiB |" in t and "broken" not in t
           and "| our bf16 step against PyTorch's fastest | 2.20× | 2.10–2.30× |" in t, "day50 peer: the new format, a broken row left out")
    expect(day50_torch.day50_peer_headline(peer) ==
           "bf16 2.20× (2.10–2.30×) best of 1 PyTorch variant timed; generation 8.7× (8.5–9.0×) best PyTorch",
           "day50 peer headline, new ratios with the rounds' spread, the training variants timed counted")
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if head:  # a clone with its history: which order a file's run timed PyTorch's decoders in, from its commit
        older = dict(peer, env={"commit": "2b3ccd736364191295a282dee5addb1f8308d7c9"})
        newer = dict(peer, env={"commit": head})
        expect(day50_torch.day50_peer_headline(older).endswith("best PyTorch, beside its training variants")
               and day50_torch.day50_peer_headline(newer).endswith("best PyTorch, timed before the training variants")
               and "(its decoders beside the training variants)" in "\n".join(day50_torch.day50_peer_block(older))
               and day50_torch.generation_alone({"mode": "generation"}) is True,
               "day50 peer: the generation ratio labelled by the order its run timed the decoders in")
    expect(day50_torch.day50_peer_headline({}) == "–", "day50 peer headline without ratios")
    d = {"config": {}, "quality": {"data": "data/shakespeare.txt", "steps": 5000, "seconds": 300.0, "val_loss_min": 1.51,
                                   "val_loss_final": 1.52, "sample": "ROMEO:"},
         "bench": [{"name": "train step bf16"}, {"name": "generate, batch 1, KV cache"}, {"name": "attention fwd+bwd bf16 cuDNN", "dtype": "bf16", "ms": 0.2}]}
    t = "\n".join(day50.day50_block(d))
    expect(expr.render(True, "met") == "met" and expr.render(False, "met") == "missed", "FMT met: a goal's boolean")
    expect("Quality, the default run: `data/shakespeare.txt`, 5000 steps" in t and "300 s" in t and "ROMEO:" in t
           and "| cuDNN | bf16 | – | – | 0.200 |" in t,
           "day50: quality object rendered, rows missing keys left out")
    expect(day50.day50_headline(d) == "quality run: lowest val loss 1.51", "day50 headline from the quality object")
    att = {"bench": [{"name": "attention fwd+bwd bf16 cuDNN", "dtype": "bf16", "ms": 0.2, "tflops": 100.0, "extra": {"forward_ms": 0.05}},
                     {"name": "attention fwd+bwd bf16 cuDNN + our flash backward", "dtype": "bf16", "ms": 0.18, "tflops": 110.0,
                      "extra": {"forward_ms": 0.05, "backward_ms": 0.13}}]}
    blk = "\n".join(views.VIEWS["day50_gpt-attention"]["block"](att))
    expect("| cuDNN | bf16 | 0.050 | – | 0.200 | 100 |" in blk and "| cuDNN + our flash backward | bf16 | 0.050 | 0.130 | 0.180 | 110 |" in blk,
           "day50_gpt-attention.json has its own block (the whole name after the dtype, the backward where given)")
    expect(day50.attention_headline(att) == "fastest attention fwd+bwd: cuDNN + our flash backward bf16 110 TFLOP/s",
           "day50 attention headline names the whole implementation")
    s = day10.sass_block({"kernels": [{"kernel": "b", "regs": 32, "instructions": {"FFMA": 0, "HMMA": 4}},
                                      {"kernel": "a", "regs": 40, "instructions": {"FFMA": 8, "HMMA": 0}}]})
    expect(s[2:] == ["| a | 40 | 8 | · |", "| b | 32 | · | 4 |"], "day10_sass table: kernels by name, zeros as ·")
    expect(text.bench_table([{"name": "x"}]) == text.bench_table([]), "generic table: a row without ms is left out")


def test_bad_input():
    rc, out = plot("/nonexistent")
    expect(rc == 2 and len(out.strip().splitlines()) == 1, "--root /nonexistent: one line, exit 2")
    r = subprocess.run([sys.executable, PLOT, "--loss-log", "/no/such.log"], capture_output=True, text=True)
    expect(r.returncode == 2 and len((r.stdout + r.stderr).strip().splitlines()) == 1 and "Traceback" not in r.stderr,
           "--loss-log /no/such.log: one line, exit 2")
    with tempfile.TemporaryDirectory() as root:
        write(os.path.join(root, "results", "g", "x.json"), "{not json")
        rc, out = plot(root)
        expect(rc == 2 and "results/g/x.json" in out and "Traceback" not in out, "a broken results file: one line, exit 2")


def run_all():
    test_grammar()
    test_check_notes()
    test_freshness_and_throttle()
    test_day50_tolerance()
    test_bad_input()
    return failures
