"""Whether a results file was written by the code now in the repository.

A results file records env.commit (the git hash of the code that built the program) and env.dirty. Its
figures are "current" when no code file of its lesson's folder changed between that commit and HEAD, nor
any file of common/ that the lesson builds with (the build rules, and every header its code includes,
directly or through other headers), and the tree was clean when it was built. A change to a common header
the lesson never includes leaves its figures current: its programs are the same. This depends on HEAD, so make plots writes it and
make check-notes only warns about it (a commit must not make the notes' check fail by itself).
"""
import os
import re
import subprocess

CODE_SUFFIXES = (".cu", ".cuh", ".h", ".cpp", ".py", ".sh", ".mk")  # .mk: common/ holds the build rules
CODE_NAMES = ("Makefile",)


def is_code(path):
    base = os.path.basename(path)
    return base in CODE_NAMES or base.endswith(CODE_SUFFIXES)


def _git(root, *args):
    try:
        r = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".cpp", ".inc")


def common_used(root, folder):
    """The common/ files folder's code builds with, as repository paths: common/'s make rules (every lesson's
    Makefile includes them) and the headers its sources include, followed through headers (common/'s own
    and the lesson's), resolved as the compiler does: beside the including file, then in common/ (-I)."""
    used = {os.path.join("common", f) for f in os.listdir(os.path.join(root, "common")) if f.endswith(".mk")} \
        if os.path.isdir(os.path.join(root, "common")) else set()
    todo = [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(root, folder)) for f in fs
            if f.endswith(SOURCE_SUFFIXES) and "/build" not in dp]
    seen = set(todo)
    while todo:
        path = todo.pop()
        try:
            text = open(path, errors="replace").read()
        except OSError:
            continue
        for name in INCLUDE.findall(text):
            for cand in (os.path.join(os.path.dirname(path), name), os.path.join(root, "common", name)):
                cand = os.path.normpath(cand)
                if os.path.isfile(cand):
                    if cand not in seen:
                        seen.add(cand)
                        todo.append(cand)
                    rel = os.path.relpath(cand, root)
                    if rel.startswith("common" + os.sep):
                        used.add(rel)
                    break
    return used


def changed_code(root, commit, folder):
    """The code files of folder/, and those of common/ it builds with, that differ between commit and HEAD;
    None if git cannot tell."""
    if _git(root, "cat-file", "-e", f"{commit}^{{commit}}") is None:
        return None
    out = _git(root, "diff", "--name-only", commit, "HEAD", "--", folder, "common")
    if out is None:
        return None
    used = common_used(root, folder)
    return [p for p in out.split() if is_code(p) and (not p.startswith("common/") or p in used)]


def status(root, data, folder):
    """"current", "older than the code (<short hash>)" or "unknown" (no commit, or git cannot tell)."""
    e = data.get("env", {})
    commit = e.get("commit")
    if not isinstance(commit, str) or not commit or commit == "unknown":
        return "unknown"
    short = commit[:7]
    changed = changed_code(root, commit, folder)
    if changed is None:
        return "unknown"
    if changed or e.get("dirty"):  # built from uncommitted code: no commit says what it was
        return f"older than the code ({short})"
    return "current"
