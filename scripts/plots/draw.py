"""The PNGs: each view's plot function, the generic bar chart, a training run's loss curve."""
import os

from .load import InputError
from .text import rate_of


def generic_plot(plt, data, png):
    rows = [b for b in data.get("bench", []) if rate_of(b)[0] is not None]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.5))
    labels = [f"{b['name']} {'×'.join(map(str, b.get('shape', [])))}" for b in rows]
    vals = [rate_of(b)[0] for b in rows]
    ax.barh(labels, vals, color="#3a7")
    for i, b in enumerate(rows):
        pct = f" ({b['pct_of_peak']:.0f}% of peak)" if b.get("pct_of_peak") is not None else ""
        ax.text(vals[i], i, f" {vals[i]:.1f} {rate_of(b)[1]}{pct}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(vals) * 1.45)
    ax.set_title(f"{data.get('lesson')} on {data['env'].get('gpu', '?')}")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return True


def draw(root, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .views import VIEWS
    written, warnings = [], []
    for lesson, entries in results.items():
        for gpu, data in entries:
            png = os.path.join(root, os.path.splitext(data["_path"])[0] + ".png")
            plot = VIEWS.get(lesson, {}).get("plot", generic_plot)
            try:
                if plot is not None and plot(plt, data, png) is not False:
                    written.append(png)
            except (KeyError, TypeError, ValueError, IndexError) as e:  # a file older or newer than its view
                warnings.append(f"warning: {data['_path']}: not drawn ({type(e).__name__}: {e})")
            plt.close("all")
    return written, warnings


def read_loss_log(path):
    """day50_gpt's --log: "step loss" lines and "step val loss" lines -> (steps, losses, val_steps, vals)."""
    st, lo, vs, vl = [], [], [], []
    try:
        f = open(path)
    except OSError as e:
        raise InputError(f"--loss-log {path}: {e.strerror}")
    with f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            try:
                if len(parts) == 2:
                    st.append(int(parts[0]) + 1), lo.append(float(parts[1]))
                elif len(parts) == 3 and parts[1] == "val":
                    vs.append(int(parts[0]) + 1), vl.append(float(parts[2]))
                elif parts:
                    raise ValueError
            except ValueError:
                raise InputError(f"{path}:{n}: not a loss-log line: {line.strip()!r}")
    return st, lo, vs, vl


def plot_loss_log(path, png):
    """A training run's loss curve (./build/gpt --log FILE) as a PNG."""
    st, lo, vs, vl = read_loss_log(path)  # judged before matplotlib is imported: bad input costs one line
    if not st:
        raise InputError(f"{path} holds no loss lines")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(st, lo, lw=0.8, color="#3a7", label="training loss")
    if vs:
        ax.plot(vs, vl, "o-", color="#c33", label="validation loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    ax.set_title(os.path.basename(path))
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return png
