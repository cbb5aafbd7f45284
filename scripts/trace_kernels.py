#!/usr/bin/env python3
"""scripts/trace_kernels.py: where a program's repeated step spends its GPU time, kernel by kernel and stream
by stream, measured inside the CUDA graph that runs it.

    python3 scripts/trace_kernels.py [--marker REGEX] [--window N] [--json PATH] [--lesson NAME]
                                     [--variant 'NAME=EXTRA ARGS' ...] -- PROGRAM ARGS...
    python3 scripts/trace_kernels.py --self-test      (host only: what `make test` runs)
    make trace                                        (day50_gpt's training step: the Makefile's variants)

It runs PROGRAM once per variant (its ARGS, then the variant's extra ones) with scripts/ktrace.cpp loaded by
the driver (build/libktrace.so, built by `make`), which records every kernel's start and end on the GPU.
The step is found by a marker kernel that runs once per step (--marker, a regular expression; `make trace`
gives day50's gradient norm, sum_squares_partial, on the step's own stream whether AdamW runs at the step's
end or, with --adamw-overlap on, once per range of parameters beside the next forward); the last --window
steps are summarised:
  period         the time from one marker to the next (the step as the GPU runs it, median over the window;
                 period_mean_us: the mean);
  busy           the time at least one kernel ran (the union of all streams), a mean per step over the window,
                 and idle = the mean period - busy (both means, so that they add up);
  per stream     the sum of its kernels' durations: the stream the marker runs on is "main", others "side";
  per kernel     its time per step, calls per step and mean duration, on its stream;
  per category   kernels grouped by what they do (a table per lesson, below);
  all streams    the same per kernel and per category added up over every stream (kernels_all, categories_all),
                 and per role (roles: main, and every other stream together).
The stream is the one the GPU ran the kernel on: for a CUDA graph, one its executor picked, which need not
be the stream the kernel was captured on (with more than two branches it may spread one chain over several).
A kernel's duration here is what it took beside whatever ran with it: two streams share the SMs and the
memory, so the same kernel can take longer in the step than alone (the notes compare with the variant
that runs everything on one stream).

Exit: 0 pass, 1 a check failed, 2 bad input (before any GPU work), 77 the program skipped (no GPU).
Results file (--json, {gpu} replaced by the GPU's slug): env (from the program's first line), config, runs
(per variant: period, busy, streams, kernels, categories), bench (the same as flat rows), checks, passed.
"""
import argparse
import collections
import csv
import datetime
import gzip
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import zlib

PROG = "trace_kernels.py"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.path.join(ROOT, "build", "libktrace.so")

# What each lesson's kernels do, first match wins (regular expressions on the demangled name).
CATEGORIES = {
    "day50_gpt": [
        ("LayerNorm backward", r"layernorm_bwd"),
        ("column sums: bias and LayerNorm-parameter gradients", r"ln_partials_finish|ln_param_partials|bias_partials|colsum"),
        ("LayerNorm forward (with the residual add)", r"layernorm_fwd|residual_layernorm"),
        ("attention backward (ours)", r"flash::|flash90::|dqkv_"),
        ("attention forward (cuDNN)", r"sdpa|fprop|cudnn"),
        ("matmuls: our fused-epilogue GEMM", r"sm90::.*gemm_kernel"),
        ("matmuls: cuBLAS / cuBLASLt", r"nvjet|cutlass|xmma|gemm|splitKreduce|cublas"),
        ("AdamW, gradient norm", r"adamw|sum_squares|norm_of"),
        # block_sum: the log's mean loss (the gradient norm's second stage is inside AdamW, and, where AdamW
        # runs beside the next forward, in norm_of at the step's end)
        ("embedding, loss", r"embed|softmax_xent|gather_batch|onehot|block_sum"),
        ("other (transposes, memsets, copies)", r"."),
    ],
    # day50's PyTorch peer (torch_peer.py): Inductor's Triton kernels, cuBLAS, PyTorch's attention and fused AdamW
    "day50_gpt-torch": [
        ("attention backward", r"flash_bwd|bwd_kernel|bprop|attention_backward|dq_dk_dv|dot_do_o|convert_dq|cutlassB"),
        ("attention forward", r"flash_fwd|fprop|fmha|sdpa|attention"),
        # Inductor's kernels that gather dQ, dK, dV into one [B*T][3C] gradient and sum its columns (the qkv
        # bias gradient): work our flash backward does inside its own kernel
        ("attention backward's packing: dQ, dK, dV into one tensor, the qkv bias gradient (Triton)",
         r"triton_\w*_fused_cat_(sum_)?transpose"),
        ("matmuls: Triton templates (max-autotune)", r"triton_tem_"),
        ("matmuls: cuBLAS / cuBLASLt / CUTLASS", r"nvjet|xmma|gemm|cutlass|splitKreduce|cublas"),
        ("Triton fused kernels (LayerNorm, GELU, dropout, loss, casts)", r"triton_"),
        # at::native's sum reductions, 26 a step here: the LayerNorms' weight and bias gradients (13 x 2)
        ("column sums (PyTorch's reduce_kernel: parameter gradients)", r"reduce_kernel.*sum|ReduceOp<.*sum"),
        ("LayerNorm (PyTorch's own kernels)", r"layer_norm"),
        ("fused AdamW, gradient clipping", r"multi_tensor|adam|lpnorm|NormTwoOps|norm_two|foreach"),
        ("other (copies, memsets, PyTorch's own kernels)", r"."),
    ],
}


class InputError(Exception):
    pass


def fail_input(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(2)


# ---- reading a trace ---------------------------------------------------------------------------------
def read_trace(path):
    """The records of a ktrace CSV as (start_ns, duration_ns, stream, graph, name), and whether the tracer said
    it was complete (its last line)."""
    recs, complete = [], False
    with open(path, newline="", errors="replace") as f:
        lines = f.read().splitlines()
    if not lines or not lines[0].startswith("start_ns,"):
        raise InputError(f"{path}: not a ktrace file")
    for row in csv.reader(lines[1:]):
        if not row:
            continue
        if row[0].startswith("# ktrace"):
            complete = row[0].startswith("# ktrace complete")
            continue
        if len(row) < 5:
            raise InputError(f"{path}: a line with {len(row)} fields")
        try:
            recs.append((int(row[0]), int(row[1]), int(row[2]), int(row[3]), ",".join(row[4:])))
        except ValueError:
            raise InputError(f"{path}: a line whose first four fields are not integers: {','.join(row)[:80]!r}")
    recs.sort()
    return recs, complete


def demangle(names):
    """Demangled names (c++filt where it is installed; else as they are)."""
    names = list(names)
    exe = shutil.which("c++filt")
    if not exe or not names:
        return {n: n for n in names}
    try:
        out = subprocess.run([exe], input="\n".join(names), capture_output=True, text=True, timeout=60).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {n: n for n in names}
    return {n: (d if d else n) for n, d in zip(names, out)} if len(out) == len(names) else {n: n for n in names}


def short_name(name):
    """A kernel's name without its argument list, namespaces like (anonymous namespace) and void/return types."""
    n = re.sub(r"\(anonymous namespace\)::", "", name)
    depth, cut = 0, len(n)
    for i, c in enumerate(n):  # the argument list: the first '(' outside template brackets
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            cut = i
            break
    n = n[:cut]
    n = re.sub(r"^void ", "", n)
    n = n.replace("__nv_bfloat16", "bf16")
    return n[:160]


def union_ns(intervals):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def category_of(lesson, name):
    for cat, rx in CATEGORIES.get(lesson, [("all kernels", r".")]):
        if re.search(rx, name):
            return cat
    return "other"


def categorize(kernels, lesson):
    """Per stream role, each category's kernels added up (the lesson's table order)."""
    cats = []
    for cat, _ in CATEGORIES.get(lesson, [("all kernels", r".")]):
        for role in ("main", "side"):
            ks = [k for k in kernels if k["category"] == cat and k["stream"] == role]
            if ks:
                cats.append(dict(stream=role, name=cat, us_per_step=sum(k["us_per_step"] for k in ks),
                                 calls_per_step=sum(k["calls_per_step"] for k in ks)))
    return cats


def all_streams(run):
    """What a run's per-stream rows give whatever streams the executor picked: per kernel name and per category
    over every stream (kernels_all, categories_all), and per role with its streams counted (roles)."""
    per = collections.OrderedDict()
    for k in sorted(run.get("kernels", []), key=lambda k: -k["us_per_step"]):
        t = per.setdefault(k["name"], dict(name=k["name"], us_per_step=0.0, calls_per_step=0.0, streams=0,
                                           category=k["category"]))
        t["us_per_step"] += k["us_per_step"]
        t["calls_per_step"] += k["calls_per_step"]
        t["streams"] += 1
    for t in per.values():
        t["us_per_call"] = t["us_per_step"] / t["calls_per_step"] if t["calls_per_step"] else 0.0
    run["kernels_all"] = sorted(per.values(), key=lambda k: -k["us_per_step"])
    cats = []
    for c in run.get("categories", []):
        hit = next((x for x in cats if x["name"] == c["name"]), None)
        if hit is None:
            cats.append(dict(name=c["name"], us_per_step=c["us_per_step"], calls_per_step=c["calls_per_step"]))
        else:
            hit["us_per_step"] += c["us_per_step"]
            hit["calls_per_step"] += c["calls_per_step"]
    run["categories_all"] = cats
    roles = []
    for role in ("main", "side"):
        sts = [st for st in run.get("streams", []) if st["role"] == role]
        if sts:
            roles.append(dict(role=role, streams=len(sts), kernel_us_per_step=sum(st["kernel_us_per_step"] for st in sts),
                              kernels_per_step=sum(st["kernels_per_step"] for st in sts)))
    run["roles"] = roles
    return run


def recategorize(data, lesson):
    """A results file's runs with their kernels sorted again by this script's table (the measured kernel
    times are kept as they are)."""
    for r in data.get("runs", []):
        for k in r.get("kernels", []):
            k["category"] = category_of(lesson, k["name"])
        r["categories"] = categorize(r.get("kernels", []), lesson)
        all_streams(r)
    for r in data.get("runs", []):
        if "command" in r:
            r["command"] = portable(r["command"])
    cfg = data.setdefault("config", {})
    if "command" in cfg:
        cfg["command"] = portable(cfg["command"])
    data["bench"] = bench_rows(data.get("runs", []))
    cfg["recategorized_by"] = summariser()
    return data


def summarize(recs, marker, window, lesson, names=None):
    """The last `window` steps of a trace (marker kernel to marker kernel, graph launches only): a dict, or an
    InputError where the trace holds too few steps."""
    names = names or demangle(sorted({r[4] for r in recs}))
    graphed = [r for r in recs if r[3] != 0]
    marks = [r for r in graphed if re.search(marker, names.get(r[4], r[4]))]
    if len(marks) < window + 1:
        raise InputError(f"{len(marks)} marker kernels ({marker!r}) in graph launches; {window + 1} needed")
    marks = marks[-(window + 1):]
    main = marks[-1][2]
    t0, t1 = marks[0][0], marks[-1][0]
    win = [r for r in recs if t0 < r[0] <= t1]
    periods = [(b[0] - a[0]) / 1e3 for a, b in zip(marks, marks[1:])]
    busy = union_ns((r[0], r[0] + r[1]) for r in win) / 1e3 / window
    period = statistics.median(periods)
    mean_period = (t1 - t0) / 1e3 / window
    per = collections.defaultdict(lambda: [0, 0])  # (role, stream, short name) -> [ns, calls]
    for r in win:
        role = "main" if r[2] == main else "side"
        per[(role, r[2], short_name(names.get(r[4], r[4])))][0] += r[1]
        per[(role, r[2], short_name(names.get(r[4], r[4])))][1] += 1
    kernels = [dict(stream=role, stream_id=sid, name=n, us_per_step=ns / 1e3 / window, calls_per_step=c / window,
                    us_per_call=ns / 1e3 / c, category=category_of(lesson, n))
               for (role, sid, n), (ns, c) in per.items()]
    kernels.sort(key=lambda k: -k["us_per_step"])
    streams = []
    for sid in sorted({k["stream_id"] for k in kernels}, key=lambda s: (s != main, s)):
        ks = [k for k in kernels if k["stream_id"] == sid]
        streams.append(dict(role="main" if sid == main else "side", id=sid, kernel_us_per_step=sum(k["us_per_step"] for k in ks),
                            kernels_per_step=sum(k["calls_per_step"] for k in ks),
                            # its kernels' union: less than their sum where they overlap on one stream (a
                            # programmatic dependent launch starts before the kernel it follows has ended)
                            busy_us_per_step=union_ns((r[0], r[0] + r[1]) for r in win if r[2] == sid) / 1e3 / window))
    cats = categorize(kernels, lesson)
    return all_streams(dict(steps=window, period_us=period, period_mean_us=mean_period, period_min_us=min(periods),
                            period_max_us=max(periods), busy_us=busy, idle_us=mean_period - busy, main_stream=main,
                            streams=streams, categories=cats, kernels=kernels, markers_seen=len(marks),
                            marker_streams=sorted({m[2] for m in marks})))


# ---- the program's environment (its first line: common/env.cuh) --------------------------------------------
ENV_LINE = re.compile(r"^GPU (?P<gpu>.+?) \(cc (?P<cc>[\d.]+), (?P<sms>\d+) SMs, SM clock max (?P<clk>\d+) MHz\) \| "
                      r"driver (?P<driver>\S+) \| CUDA (?P<cuda>\S+) \| cuBLAS (?P<cublas>\S+) \| cuDNN (?P<cudnn>\S+) \| "
                      r"code (?P<code>\S+)(?P<dirty> \(dirty\))?")


def slug(name):
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown-gpu"


def env_from(stdout):
    for line in stdout.splitlines():
        m = ENV_LINE.match(line.strip())
        if m:
            commit = m["code"]
            try:  # the program prints a prefix: the full hash where git knows it
                r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", "--quiet", commit + "^{commit}"],
                                   capture_output=True, text=True, timeout=30)
                if r.returncode == 0 and r.stdout.strip():
                    commit = r.stdout.strip()
            except (OSError, subprocess.SubprocessError):
                pass
            return dict(gpu=m["gpu"], gpu_slug=slug(m["gpu"]), compute_capability=m["cc"], sm_count=int(m["sms"]),
                        sm_clock_max_mhz=int(m["clk"]), driver=m["driver"], cuda_runtime=m["cuda"], cublas=m["cublas"],
                        cudnn_loaded=m["cudnn"], commit=commit, dirty=bool(m["dirty"]),
                        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return None


def env_repo():
    """The environment where the program prints no line of common/env.cuh's (a Python peer): the GPU from
    nvidia-smi, the code from the repository (git, or .repo-commit on a machine the tree was copied to)."""
    env = dict(source="nvidia-smi and the repository (the program printed no environment line)",
               date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60).stdout.strip().splitlines()
        if out:
            name, driver = [x.strip() for x in out[0].split(",")[:2]]
            env.update(gpu=name, gpu_slug=slug(name), driver=driver)
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    try:  # .repo-commit first, as the build reads it (common/toolchain.mk): a copy may carry a stale .git
        commit, dirty = open(os.path.join(ROOT, ".repo-commit")).readline().split()[:2]
        if not (re.fullmatch(r"[0-9a-f]{40,}", commit) and dirty in ("0", "1")):
            raise ValueError(".repo-commit: not '<hash> <0|1>'")
        env.update(commit=commit, dirty=dirty == "1")
    except (OSError, ValueError):
        try:  # dirty as the build counts it: results files and notes do not make code dirty
            r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", "-q", "HEAD"], capture_output=True, text=True,
                               timeout=30)
            d = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD", "--", ".", ":(exclude)results",
                                ":(exclude,glob)**/*.md"], capture_output=True, timeout=30)
            if r.returncode == 0 and d.returncode in (0, 1):
                env.update(commit=r.stdout.strip(), dirty=d.returncode == 1)
        except (OSError, subprocess.SubprocessError):
            pass
    try:  # where PyTorch is installed, the versions a PyTorch program ran with
        r = subprocess.run([sys.executable, "-c", "import json, torch; p = torch.cuda.get_device_properties(0); "
                            "print(json.dumps(dict(torch=torch.__version__, cuda_runtime=torch.version.cuda, "
                            "cudnn_loaded=torch.backends.cudnn.version(), sm_count=p.multi_processor_count)))"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            env.update(json.loads(r.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        pass
    return env if "gpu_slug" in env else None


def bench_rows(runs):
    """The runs as flat rows (what the notes' markers select by name)."""
    bench = []
    for r in runs:
        bench.append(dict(name=f"{r['name']}: step", ms=r["period_us"] / 1e3, period_us=r["period_us"], busy_us=r["busy_us"],
                          idle_us=r["idle_us"], steps=r["steps"]))
        for st in r["streams"]:
            bench.append(dict(name=f"{r['name']}: {st['role']} stream", us_per_step=st["kernel_us_per_step"],
                              kernels_per_step=st["kernels_per_step"]))
        for c in r["categories"]:
            bench.append(dict(name=f"{r['name']}: {c['stream']}: {c['name']}", us_per_step=c["us_per_step"],
                              calls_per_step=c["calls_per_step"]))
        for k in r["kernels"]:
            bench.append(dict(name=f"{r['name']}: {k['stream']} kernel: {k['name']}", us_per_step=k["us_per_step"],
                              calls_per_step=k["calls_per_step"], us_per_call=k["us_per_call"]))
    return bench


def portable(cmd):
    """A command as a results file records it: paths inside the repository relative to its root, programs
    from elsewhere (an interpreter) by name, so that no file names one machine's folders."""
    out = []
    for c in cmd or []:
        c = str(c)
        if os.path.isabs(c):
            rel = os.path.relpath(c, ROOT)
            c = rel if not rel.startswith("..") else os.path.basename(c)
        out.append(c)
    return out


def summariser():
    """Where --from-trace summarised a kept trace: this script's commit (the summary's code)."""
    try:
        r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", "-q", "HEAD"], capture_output=True, text=True,
                           timeout=30)
        return dict(script="scripts/trace_kernels.py", commit=r.stdout.strip() or None)
    except (OSError, subprocess.SubprocessError):
        return dict(script="scripts/trace_kernels.py", commit=None)


def add_check(checks, name, passed, **extra):
    checks.append(dict(name=name, passed=bool(passed), **extra))


# ---- the run ------------------------------------------------------------------------------------------
class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints its usage first: one line instead, exit 2
        fail_input(message)


def parse_args(argv):
    if "--" in argv:
        i = argv.index("--")
        own, cmd = argv[:i], argv[i + 1:]
    else:
        own, cmd = argv, []
    ap = OneLineParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("--marker", default="sum_squares_partial",
                    help="a kernel that runs once per step (regular expression; default: day50's gradient norm, "
                         "once a step on the step's own stream, where AdamW runs once per range of parameters "
                         "with --adamw-overlap on)")
    ap.add_argument("--window", type=int, default=60, help="steps summarised, the last ones of the run")
    ap.add_argument("--json", default=None, help="the results file ({gpu}: the GPU's slug)")
    ap.add_argument("--lesson", default="day50_gpt", help="the lesson (its kernel categories, and the results file's)")
    ap.add_argument("--variant", action="append", default=[], help="'NAME=EXTRA ARGS': one run each (default: one run)")
    ap.add_argument("--cwd", default="", help="where the program runs (default: its lesson's folder for a program "
                    "in a lesson's build/, else here)")
    ap.add_argument("--keep-trace", default="", help="keep each run's raw trace here (NAME.csv.gz, NAME.json)")
    ap.add_argument("--from-trace", default="", help="summarise the traces --keep-trace kept here; run nothing")
    ap.add_argument("--recategorize", default="", help="a results file of this script: sort its kernels again by "
                    "this script's categories (--lesson's), its commands written repository-relative, into --json; "
                    "run nothing (the measured times are kept)")
    ap.add_argument("--self-test", action="store_true", help="test the host-only parts and exit")
    a = ap.parse_args(own)
    a.cmd = cmd
    return a


def judge_json(path):
    """--json, judged as common/results.h's require_writable_json judges it, before anything runs: a file's
    path (not empty, not a folder's), an existing file only if it is a regular, writable one (so /dev/full is
    refused), and a folder that can be made and written to (with {gpu} in the path, the folder above it: the
    GPU's own folder is made once its name is known)."""
    if path is None:
        return
    if not path or path.endswith("/") or os.path.isdir(path) or not os.path.basename(path):
        fail_input(f"--json {path!r}: give a file's path, not a folder's")
    if "{gpu}" not in path and os.path.exists(path) and not (os.path.isfile(path) and os.access(path, os.W_OK)):
        fail_input(f"--json {path}: not a writable regular file")
    d = os.path.dirname(os.path.abspath(path.split("{gpu}")[0] + "x"))
    try:
        os.makedirs(d, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d):
            pass
    except OSError as e:
        fail_input(f"--json {path}: cannot write there ({e.strerror or e})")


def check_inputs(a):
    """Every input judged before the program runs (exit 2 with one line)."""
    judge_json(a.json)
    if a.window < 2 or a.window > 100000:
        fail_input(f"--window {a.window}: give 2 to 100000 steps")
    if not a.marker:
        fail_input("--marker '': give a kernel that runs once per step")
    try:
        re.compile(a.marker)
    except re.error as e:
        fail_input(f"--marker {a.marker!r}: not a regular expression ({e})")
    if a.lesson not in CATEGORIES:
        fail_input(f"--lesson {a.lesson!r}: one of {', '.join(sorted(CATEGORIES))}")
    variants = []
    for v in a.variant or ["default="]:
        if "=" not in v or not v.split("=", 1)[0].strip():
            fail_input(f"--variant {v!r}: give NAME=EXTRA ARGS")
        name, extra = v.split("=", 1)
        try:
            variants.append((name.strip(), shlex.split(extra)))
        except ValueError as e:
            fail_input(f"--variant {v!r}: {e}")
    if len({re.sub(r"[^A-Za-z0-9]+", "_", n) for n, _ in variants}) != len(variants):
        fail_input("--variant: two variants with one name (names differing only in punctuation or spaces count as one)")
    if a.from_trace:
        if a.cmd or a.keep_trace or a.cwd:
            fail_input("--from-trace runs nothing: give no program, --keep-trace or --cwd with it")
        if not os.path.isdir(a.from_trace):
            fail_input(f"--from-trace {a.from_trace}: not a folder")
        for n, _ in variants:
            if not os.path.isfile(trace_path(a.from_trace, n, ".csv.gz")):
                fail_input(f"--from-trace: no trace of the run '{n}' ({trace_path(a.from_trace, n, '.csv.gz')})")
    else:
        if not a.cmd:
            fail_input("no program: give it after --")
        exe = a.cmd[0] if os.sep in a.cmd[0] else shutil.which(a.cmd[0]) or a.cmd[0]
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            fail_input(f"{a.cmd[0]}: not an executable file (build it first: make)")
        a.cmd[0] = os.path.abspath(exe)
        if not os.path.isfile(LIB):
            fail_input(f"{LIB}: not built (make builds it where CUDA's CUPTI is installed)")
        if a.cwd and not os.path.isdir(a.cwd):
            fail_input(f"--cwd {a.cwd}: not a folder")
        # a lesson's program runs from its lesson's folder (the parent of its build/), as `make` runs it
        build = os.path.dirname(a.cmd[0])
        a.cwd = a.cwd or (os.path.dirname(build) if os.path.basename(build) == "build" else os.getcwd())
        if a.keep_trace:
            try:
                os.makedirs(a.keep_trace, exist_ok=True)
            except OSError as e:
                fail_input(f"--keep-trace {a.keep_trace}: {e.strerror or e}")
    return variants


def trace_path(folder, name, ext):
    return os.path.join(folder, re.sub(r"[^A-Za-z0-9]+", "_", name) + ext)


def run_variant(a, name, extra, tmp):
    """Runs the program under the tracer: (exit code, its output, the trace's path, the environment)."""
    out = trace_path(tmp, name, ".csv")
    env = dict(os.environ, CUDA_INJECTION64_PATH=LIB, KTRACE_OUT=out)
    cmd = a.cmd + extra
    print(f"== {name}: {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=a.cwd)
    text = p.stdout + p.stderr
    # a lesson's program prints its own line (common/env.cuh), which the check below asks for; another
    # program (a Python peer) gets the environment from nvidia-smi, PyTorch and the repository
    lesson_program = os.path.basename(os.path.dirname(a.cmd[0])) == "build"
    e = env_from(p.stdout) or (env_repo() if p.returncode != 77 and not lesson_program else None)
    if a.keep_trace and os.path.isfile(out):
        with open(out, "rb") as f, gzip.open(trace_path(a.keep_trace, name, ".csv.gz"), "wb") as g:
            shutil.copyfileobj(f, g)
        with open(trace_path(a.keep_trace, name, ".json"), "w") as f:
            json.dump(dict(name=name, command=portable(cmd), exit=p.returncode, env=e, tail=text.strip().splitlines()[-20:]),
                      f, indent=1)
    return p.returncode, text, out, e, cmd


def kept_variant(a, name, tmp):
    """A run --keep-trace kept: the same as run_variant's answer (and the command and arguments it ran),
    read back. Unreadable files are bad input."""
    try:
        with open(trace_path(a.from_trace, name, ".json")) as f:
            meta = json.load(f)
        if not isinstance(meta, dict) or not isinstance(meta.get("env", {}), (dict, type(None))) \
                or not isinstance(meta.get("command", []), list) or not isinstance(meta.get("exit", 1), int):
            raise ValueError("its .json is not a kept run's record")
        out = trace_path(tmp, name, ".csv")
        with gzip.open(trace_path(a.from_trace, name, ".csv.gz"), "rb") as g, open(out, "wb") as f:
            shutil.copyfileobj(g, f)
    except (OSError, ValueError, EOFError, zlib.error) as err:
        fail_input(f"--from-trace: the run '{name}': {err}")
    return meta.get("exit", 1), "\n".join(str(x) for x in meta.get("tail", [])), out, meta.get("env"), meta.get("command", [])


def recategorize_file(a):
    if a.cmd or a.from_trace or a.keep_trace or a.cwd or a.variant:
        fail_input("--recategorize runs nothing: give it with --lesson and --json only")
    if a.lesson not in CATEGORIES or a.json is None:
        fail_input("--recategorize needs --lesson (one of " + ", ".join(sorted(CATEGORIES)) + ") and --json")
    if "{gpu}" in a.json:
        fail_input(f"--json {a.json}: --recategorize writes one file; give its path without {{gpu}}")
    judge_json(a.json)
    try:
        with open(a.recategorize) as f:
            data = json.load(f)
        if not isinstance(data, dict) or data.get("program") != "scripts/trace_kernels.py":
            raise ValueError("not a results file of scripts/trace_kernels.py")
    except (OSError, ValueError) as e:
        fail_input(f"--recategorize {a.recategorize}: {e}")
    data = recategorize(data, a.lesson)
    with open(a.json, "w") as f:
        json.dump(data, f, indent=1)
    print(f"wrote {a.json}")
    return 0 if data.get("passed") else 1


def main(argv):
    a = parse_args(argv)
    if a.self_test:
        return self_test()
    if a.recategorize:
        return recategorize_file(a)
    variants = check_inputs(a)
    checks, runs, env, commands = [], [], None, []
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in variants:
            code, text, out, e, ran = kept_variant(a, name, tmp) if a.from_trace else run_variant(a, name, extra, tmp)
            commands.append(ran)
            if code == 77:
                print(f"SKIP: {PROG}: the program skipped ({(text.strip().splitlines() or ['?'])[-1]})")
                return 77
            env = env or e
            add_check(checks, f"{name}: the environment was recorded (GPU, versions, code)", e is not None,
                      source=(e or {}).get("source", "the program's first line"))
            add_check(checks, f"{name}: the program passed (exit 0)", code == 0, exit=code,
                      tail=text.strip().splitlines()[-3:])
            if not os.path.isfile(out):
                add_check(checks, f"{name}: the tracer wrote its file", False)
                continue
            try:
                recs, complete = read_trace(out)
            except InputError as e:
                add_check(checks, f"{name}: the tracer's file reads", False, error=str(e))
                continue
            add_check(checks, f"{name}: the tracer recorded every kernel (no record dropped)", complete, records=len(recs))
            try:
                s = summarize(recs, a.marker, a.window, a.lesson)
            except InputError as e:
                add_check(checks, f"{name}: {a.window} steps found", False, error=str(e))
                continue
            add_check(checks, f"{name}: the marker kernel ran on one stream", len(s["marker_streams"]) == 1,
                      streams=s["marker_streams"])
            # once per step: two markers a step would show as periods alternating short and long
            add_check(checks, f"{name}: the steps' periods agree (each within 0.5x-2x of their median)",
                      s["period_min_us"] >= 0.5 * s["period_us"] and s["period_max_us"] <= 2 * s["period_us"],
                      min_us=s["period_min_us"], median_us=s["period_us"], max_us=s["period_max_us"])
            add_check(checks, f"{name}: busy time <= the step's mean period", s["busy_us"] <= s["period_mean_us"] * 1.001 + 1,
                      busy_us=s["busy_us"], period_mean_us=s["period_mean_us"])
            runs.append(dict(name=name, args=extra, command=portable(ran), **s))
    passed = bool(checks) and all(c["passed"] for c in checks)
    bench = bench_rows(runs)
    res = dict(lesson=a.lesson.split("-")[0], program="scripts/trace_kernels.py", mode="trace", env=env or {},
               config=dict(command=portable(a.cmd or (commands[0] if commands else [])), from_trace=bool(a.from_trace),
                           summarised_by=summariser() if a.from_trace else None, marker=a.marker, window=a.window, variants=[dict(name=n, args=e) for n, e in variants]),
               runs=runs, bench=bench, checks=checks, passed=passed)
    for r in runs:
        print(f"\n{r['name']}: step {r['period_us']:.1f} us (median of {r['steps']}), busy {r['busy_us']:.1f} us, idle {r['idle_us']:.1f} us")
        for st in r["streams"]:
            print(f"  {st['role']:4s} stream {st['id']}: kernels {st['kernel_us_per_step']:8.1f} us per step, {st['kernels_per_step']:.0f} launches")
        for c in r["categories"]:
            print(f"  {c['stream']:4s} {c['name']:44s} {c['us_per_step']:8.1f} us per step ({c['calls_per_step']:.0f} calls)")
    if a.json and env:
        path = a.json.replace("{gpu}", env["gpu_slug"])
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {path}")
    failed = [c["name"] for c in checks if not c["passed"]]
    for n in failed:
        print(f"  FAIL {n}")
    print(f"RESULT: {'PASS' if passed else 'FAIL'} ({len(checks)} checks, {len(failed)} failed)")
    return 0 if passed else 1


# ---- --self-test: the host-only parts (no GPU) ----------------------------------------------------------
def self_test():
    fails = []

    def expect(name, got, want):
        if got != want:
            fails.append(f"{name}: got {got!r}, want {want!r}")

    # Two streams, three steps of 100 us: main runs LN (40 us) then AdamW (10 us); the side stream a GEMM
    # (30 us) overlapping the LN by 20 us. Graph id 1; an eager kernel (graph 0) before must be ignored.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.csv")
        lines = ["start_ns,duration_ns,stream,graph,name", "0,5000,7,0,_Z6warmupv"]
        for i in range(4):
            t = 100000 + i * 100000
            lines += [f"{t + 10000},40000,7,1,_ZN1k19layernorm_bwd_fusedIfEEvPKf",
                      f"{t + 30000},30000,9,1,nvjet_sm90_tss_128x128_splitK",
                      f"{t + 80000},10000,7,1,_ZN1k13adamw_clippedIfEEvPf,x"]
        lines.append("# ktrace complete 13 records")
        open(path, "w").write("\n".join(lines) + "\n")
        recs, complete = read_trace(path)
        expect("complete", complete, True)
        expect("records", len(recs), 13)
        expect("comma in a name kept", recs[-1][4], "_ZN1k13adamw_clippedIfEEvPf,x")
        names = {r[4]: r[4].replace("_ZN1k19layernorm_bwd_fusedIfEEvPKf", "void k::layernorm_bwd_fused<float>(float const*)")
                 .replace("_ZN1k13adamw_clippedIfEEvPf,x", "void k::adamw_clipped<float>(float*)") for r in recs}
        s = summarize(recs, "adamw", 3, "day50_gpt", names)
        expect("period", s["period_us"], 100.0)
        expect("busy", s["busy_us"], 60.0)  # LN 10..50 and GEMM 30..60: 50 us together; AdamW 80..90: 10
        expect("idle", s["idle_us"], 40.0)
        expect("main stream", s["main_stream"], 7)
        expect("streams", [(x["role"], round(x["kernel_us_per_step"], 6)) for x in s["streams"]], [("main", 50.0), ("side", 30.0)])
        cats = {(c["stream"], c["name"]): c["us_per_step"] for c in s["categories"]}
        expect("LN category", cats.get(("main", "LayerNorm backward")), 40.0)
        expect("GEMM category", cats.get(("side", "matmuls: cuBLAS / cuBLASLt")), 30.0)
        expect("AdamW category", cats.get(("main", "AdamW, gradient norm")), 10.0)
        expect("kernel short name", s["kernels"][0]["name"], "k::layernorm_bwd_fused<float>")
        expect("roles", [(x["role"], x["streams"], round(x["kernel_us_per_step"], 6)) for x in s["roles"]],
               [("main", 1, 50.0), ("side", 1, 30.0)])
        expect("all streams: kernels", [(k["name"], round(k["us_per_call"], 6)) for k in s["kernels_all"]],
               [("k::layernorm_bwd_fused<float>", 40.0), ("nvjet_sm90_tss_128x128_splitK", 30.0),
                ("k::adamw_clipped<float>", 10.0)])
        # one kernel on two streams (the GEMM of the first step on stream 11): one row of kernels_all, both calls
        split = [ln.replace(",9,1,nvjet", ",11,1,nvjet") if ln.startswith(f"{200000 + 30000},") else ln for ln in lines]
        open(path, "w").write("\n".join(split) + "\n")
        s3 = summarize(read_trace(path)[0], "adamw", 3, "day50_gpt", names)
        g = [k for k in s3["kernels_all"] if k["name"].startswith("nvjet")]
        expect("all streams: one row for a kernel on two streams", [(k["streams"], k["calls_per_step"]) for k in g],
               [(2, 1.0)])
        expect("all streams: the category added over the side streams",
               [round(c["us_per_step"], 6) for c in s3["categories_all"] if c["name"].startswith("matmuls")], [30.0])
        expect("roles: two side streams", [(x["role"], x["streams"]) for x in s3["roles"]], [("main", 1), ("side", 2)])
        try:
            summarize(recs, "adamw", 4, "day50_gpt", names)
            fails.append("a window longer than the trace was accepted")
        except InputError:
            pass
        expect("main stream busy", round(s["streams"][0]["busy_us_per_step"], 6), 50.0)
        expect("marker streams", s["marker_streams"], [7])
        # two markers a step (the second 15 us after the first): the periods alternate 15 and 85 us
        twice = lines[:-1] + [f"{100000 + i * 100000 + 95000},1000,7,1,_ZN1k13adamw_clippedIfEEvPf,x" for i in range(4)]
        open(path, "w").write("\n".join(twice) + "\n# ktrace complete\n")
        r2, _ = read_trace(path)
        s2 = summarize(r2, "adamw", 4, "day50_gpt", names)
        expect("two markers a step: the spread shows", s2["period_min_us"] < 0.5 * s2["period_us"], True)
        # the marker on two streams
        other = [ln.replace(",7,1,_ZN1k13adamw", ",9,1,_ZN1k13adamw") if f"{200000 + 80000}," in ln else ln for ln in lines]
        open(path, "w").write("\n".join(other) + "\n")
        expect("marker on two streams", summarize(read_trace(path)[0], "adamw", 3, "day50_gpt", names)["marker_streams"], [7, 9])
        open(path, "w").write("\n".join(lines[:-1]) + "\n")
        expect("incomplete without the closing line", read_trace(path)[1], False)
        for what, text in (("a line with a non-integer field", "start_ns,duration_ns,stream,graph,name\nx,1,2,3,k\n"),
                           ("a file that is not a trace", "nonsense\n")):
            open(path, "w").write(text)
            try:
                read_trace(path)
                fails.append(f"{what} was read")
            except InputError:
                pass
    # --keep-trace's files read back (--from-trace): the run's summary and its results file, no program run
    with tempfile.TemporaryDirectory() as tmp:
        kept = os.path.join(tmp, "kept")
        os.makedirs(kept)
        rows = ["start_ns,duration_ns,stream,graph,name"]
        for i in range(5):
            t = i * 100000
            rows += [f"{t},40000,7,1,k_ln", f"{t + 50000},10000,7,1,k_sum_squares_partial"]  # the default marker
        with gzip.open(trace_path(kept, "default", ".csv.gz"), "wt") as f:
            f.write("\n".join(rows) + "\n# ktrace complete 10 records\n")
        e = dict(gpu="Test GPU", gpu_slug="test-gpu", commit="abc", dirty=False, date="2026-01-01T00:00:00Z")
        with open(trace_path(kept, "default", ".json"), "w") as f:
            json.dump(dict(name="default", command=["x"], exit=0, env=e, tail=["RESULT: PASS"]), f)
        out = os.path.join(tmp, "r", "{gpu}", "t.json")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--from-trace", kept, "--window", "3", "--json", out],
                           capture_output=True, text=True, timeout=60)
        expect("from-trace exit", r.returncode, 0)
        try:
            d = json.load(open(out.replace("{gpu}", "test-gpu")))
            expect("from-trace period", d["runs"][0]["period_us"], 100.0)
            expect("from-trace env", d["env"]["gpu_slug"], "test-gpu")
        except (OSError, ValueError, KeyError, IndexError) as err:
            fails.append(f"from-trace results file: {err}")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--from-trace", kept, "--variant", "other="],
                           capture_output=True, text=True, timeout=60)
        expect("from-trace without that run's trace: exit 2", r.returncode, 2)
        for bad in (["--from-trace", kept, "--", "/bin/true"], ["--from-trace", kept, "--keep-trace", tmp]):
            r = subprocess.run([sys.executable, os.path.abspath(__file__)] + bad, capture_output=True, text=True, timeout=60)
            expect(f"from-trace with {bad[2]}: exit 2", r.returncode, 2)
        with open(trace_path(kept, "default", ".csv.gz"), "r+b") as f:  # damaged: cut short
            f.truncate(20)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--from-trace", kept], capture_output=True, text=True,
                           timeout=60)
        expect("from-trace of a damaged trace: exit 2, one line", (r.returncode, len(r.stderr.strip().splitlines())), (2, 1))
        # --recategorize: the kept results file sorted again, its kernels' times untouched
        back = os.path.join(tmp, "re.json")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--recategorize", out.replace("{gpu}", "test-gpu"),
                            "--lesson", "day50_gpt-torch", "--json", back], capture_output=True, text=True, timeout=60)
        expect("recategorize exit", r.returncode, 0)
        try:
            d2 = json.load(open(back))
            expect("recategorize: times kept", d2["runs"][0]["period_us"], 100.0)
            expect("recategorize: by the new table", d2["runs"][0]["kernels"][0]["category"],
                   category_of("day50_gpt-torch", d2["runs"][0]["kernels"][0]["name"]))
        except (OSError, ValueError, KeyError, IndexError) as err:
            fails.append(f"recategorize: {err}")
    expect("short name", short_name("void sm90::(anonymous namespace)::gemm_kernel<1, 6, false>(int, int, CUtensorMap_st)"),
           "sm90::gemm_kernel<1, 6, false>")
    expect("short name, template parens", short_name("void f<(int)3>(int)"), "f<(int)3>")
    expect("union", union_ns([(0, 10), (5, 15), (20, 30)]), 25)
    expect("portable command", portable([os.path.join(ROOT, "day50_gpt", "build", "gpt"), "/opt/x/bin/python3", "--steps"]),
           [os.path.join("day50_gpt", "build", "gpt"), "python3", "--steps"])
    e = env_from("GPU NVIDIA H200 (cc 9.0, 132 SMs, SM clock max 1980 MHz) | driver 580.1 | CUDA 13.0 | cuBLAS 13.1.0 | "
                 "cuDNN 9.14.0 | code zzzz00000000 (dirty)\nmore")
    expect("env", (e["gpu_slug"], e["sm_count"], e["commit"], e["dirty"]), ("nvidia-h200", 132, "zzzz00000000", True))
    expect("env absent", env_from("no such line"), None)
    expect("category fallback", category_of("day50_gpt", "k::transpose<bf16>"), "other (transposes, memsets, copies)")
    for name, want in (("fmha_cutlassB_bf16_aligned_64x64_k64_sm80", "attention backward"),
                       ("void at::native::vectorized_layer_norm_kernel<float, float>", "LayerNorm (PyTorch's own kernels)"),
                       ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps<float> > >",
                        "fused AdamW, gradient clipping"),
                       ("triton_red_fused_cat_sum_transpose_view_13", "attention backward's packing: dQ, dK, dV into one tensor, "
                        "the qkv bias gradient (Triton)"),
                       ("at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
                        "at::native::sum_functor<float, float, float>::operator()", "column sums (PyTorch's reduce_kernel: "
                        "parameter gradients)")):
        expect(f"category of {name[:40]}", category_of("day50_gpt-torch", name), want)
    # bad input: each exits 2 before running anything
    for bad in (["--window", "1", "--", "/bin/true"], ["--marker", "(", "--", "/bin/true"], ["--lesson", "day99", "--", "/bin/true"],
                ["--variant", "noequals", "--", "/bin/true"], ["--variant", "a=", "--variant", "a=x", "--", "/bin/true"],
                [], ["--", "/no/such/program"], ["--json", "/proc/no-such-dir/x.json", "--", "/bin/true"],
                ["--marker", "", "--", "/bin/true"], ["--json", tempfile.gettempdir(), "--", "/bin/true"],
                ["--json", "results/{gpu}/", "--", "/bin/true"], ["--window", "x", "--", "/bin/true"],
                ["--bogus", "--", "/bin/true"], ["--json=", "--", "/bin/true"], ["--json", "/dev/full", "--", "/bin/true"]):
        r = subprocess.run([sys.executable, os.path.abspath(__file__)] + bad, capture_output=True, text=True, timeout=60)
        lines = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(lines) != 1:
            fails.append(f"bad input {bad}: exit {r.returncode}, {len(lines)} lines")
        elif any(x.startswith("--json") for x in bad) and "--json" not in lines[0]:
            fails.append(f"bad input {bad}: the line does not name --json ({lines[0]})")
    for f in fails:
        print("FAIL", f)
    print(f"{PROG} self-test: {'PASS' if not fails else 'FAIL'} ({len(fails)} failed)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
