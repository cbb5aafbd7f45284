"""Whether a results file was written by the code now in the repository.

A results file records env.commit (the git hash of the code that built the program) and env.dirty. Its
figures are "current" when no code file of its lesson's folder nor of common/ changed between that commit
and HEAD and the tree was clean when it was built. This depends on HEAD, so make plots writes it and
make check-notes only warns about it (a commit must not make the notes' check fail by itself).
"""
import os
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


def changed_code(root, commit, folder):
    """The code files of folder/ and common/ that differ between commit and HEAD; None if git cannot tell."""
    if _git(root, "cat-file", "-e", f"{commit}^{{commit}}") is None:
        return None
    out = _git(root, "diff", "--name-only", commit, "HEAD", "--", folder, "common")
    if out is None:
        return None
    return [p for p in out.split() if is_code(p)]


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
