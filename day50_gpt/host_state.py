"""day50_gpt/host_state.py: what the host's CPUs were doing around a timed round, as torch_peer.py records it.

Why: PyTorch's compiled decoder makes one Python call and one CUDA-graph replay per token, so its speed is
partly the host's. Over the H200 peer runs kept in results/, its speed moved by as much as 2x between the
rounds of one run while our one-launch decoder's moved by fractions of a percent (the day50 notes' table under
"Against PyTorch"), and in 25798c8's run the host-bound training variants (eager, plain compile) were slower
than in the run before on the same kind of machine. The results files recorded the GPU's clocks but nothing of the host, so
the reason could not be read from them. This module records, after each round: the 1-minute load average
and the processes that used the most CPU over a short window (other than this one and its children).
Host-only (reads /proc); torch_peer.py --self-test tests the parsers on fixed text."""
import os
import time

BUSY_MIN_PCT = 5.0  # a process using less than this share of one CPU over the window is not listed
BUSY_TOP = 5        # at most this many processes listed


def parse_stat(text):
    """/proc/<pid>/stat -> (comm, ppid, utime + stime in clock ticks); None if the line is malformed.
    comm is inside parentheses and may itself hold spaces or ')': split at the last ')'."""
    try:
        comm = text[text.index("(") + 1:text.rindex(")")]
        rest = text[text.rindex(")") + 2:].split()
        return comm, int(rest[1]), int(rest[11]) + int(rest[12])  # fields 4 (ppid), 14 (utime), 15 (stime)
    except (ValueError, IndexError):
        return None


def parse_loadavg(text):
    """/proc/loadavg -> (1-, 5-, 15-minute averages); None if malformed."""
    try:
        w = text.split()
        return float(w[0]), float(w[1]), float(w[2])
    except (ValueError, IndexError):
        return None


def cpu_model(cpuinfo_text):
    """The first 'model name' line of /proc/cpuinfo; '' where there is none (e.g. some ARM hosts)."""
    for line in cpuinfo_text.splitlines():
        if line.startswith("model name") and ":" in line:
            return line.split(":", 1)[1].strip()
    return ""


def busiest(before, after, seconds, hz, skip=()):
    """Processes by CPU share of one core over the window: before/after map pid -> (comm, ppid, ticks).
    A pid in skip, or whose parent is in skip (this process's compile workers), is left out."""
    rows = []
    for pid, (comm, ppid, t1) in after.items():
        if pid in skip or ppid in skip or pid not in before:
            continue
        pct = 100.0 * (t1 - before[pid][2]) / hz / seconds if seconds > 0 else 0.0
        if pct >= BUSY_MIN_PCT:
            rows.append(dict(pid=pid, comm=comm, cpu_pct=round(pct, 1)))
    return sorted(rows, key=lambda r: -r["cpu_pct"])[:BUSY_TOP]


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _snapshot():
    snap = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            text = _read(f"/proc/{name}/stat")
            parsed = parse_stat(text) if text else None
            if parsed:
                snap[int(name)] = parsed
    return snap


def describe():
    """The host, once a run: CPU model and logical CPU count."""
    return dict(cpu_model=cpu_model(_read("/proc/cpuinfo") or ""), logical_cpus=os.cpu_count())


def sample(label, window_s=0.3):
    """One reading between rounds (never inside a timed region): the load average and the busiest other
    processes over window_s seconds. On a host without /proc, only the label and time."""
    out = dict(label=label, time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if not os.path.isdir("/proc"):
        return out
    la = parse_loadavg(_read("/proc/loadavg") or "")
    if la:
        out["loadavg_1m"] = la[0]
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    t0, a = time.monotonic(), _snapshot()
    time.sleep(window_s)
    b, t1 = _snapshot(), time.monotonic()
    out["busy"] = busiest(a, b, t1 - t0, hz, skip={os.getpid()})
    return out


def self_test(expect):
    """Parsers on fixed text (no /proc needed); expect(name, got, want) as torch_peer.self_test's."""
    line = "4242 (python3 (x) y) S 17 4242 17 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 8 0 1234 0 0"
    expect("stat with ')' in comm", parse_stat(line), ("python3 (x) y", 17, 300))
    expect("stat malformed", parse_stat("4242 python3 S"), None)
    expect("loadavg", parse_loadavg("3.52 2.10 1.05 4/1021 77\n"), (3.52, 2.10, 1.05))
    expect("loadavg malformed", parse_loadavg(""), None)
    expect("cpu model", cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"),
           "AMD EPYC 9654 96-Core Processor")
    expect("no cpu model", cpu_model("processor : 0\n"), "")
    before = {1: ("init", 0, 10), 50: ("worker", 40, 0), 60: ("hog", 1, 100), 70: ("idle", 1, 5), 80: ("new", 1, 0)}
    after = {1: ("init", 0, 10), 50: ("worker", 40, 90), 60: ("hog", 1, 145), 70: ("idle", 1, 6),
             80: ("new", 1, 0), 90: ("born", 1, 50)}
    # 0.5 s at 100 ticks/s: hog 45 ticks = 90% of a core; worker (child of 40, skipped); idle 2% (< 5%)
    expect("busiest", busiest(before, after, 0.5, 100, skip={40}), [dict(pid=60, comm="hog", cpu_pct=90.0)])
