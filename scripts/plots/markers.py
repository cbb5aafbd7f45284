"""The README markers: result blocks, inline figures, and the check that they match the results files.

    <!-- results:KEY -->\n ... <!-- /results:KEY -->    a generated table (views.lesson_block / summary_block)
    <!-- v:EXPR|FMT -->TEXT<!-- /v -->                 one figure (expr.py), on one line
    <!-- v:EXPR\\|FMT -->TEXT<!-- /v -->                the same in a table row: GitHub splits a row into cells
                                                       at every unescaped |, even inside an HTML comment
"""
import difflib
import glob
import os
import re

from . import expr as ex
from .freshness import status
from .load import FileCache, folder_of
from .views import FRESH_COLUMN, lesson_block, summary_block

INLINE = re.compile(r"<!-- v:(?P<expr>[^|\n]*?)(?P<sep>\\?\|)(?P<fmt>[^|\n]*?)\s*-->(?P<text>.*?)<!-- /v -->")


class MarkerError(Exception):
    pass


def replace_block(text, key, lines):
    """Replace what stands between <!-- results:key --> and <!-- /results:key -->."""
    pat = re.compile(r"(<!-- results:%s -->\n)(.*?)(<!-- /results:%s -->)" % (re.escape(key), re.escape(key)), re.S)
    if not pat.search(text):
        return text, False
    body = "\n".join(lines) + "\n"
    return pat.sub(lambda m: m.group(1) + body + m.group(3), text, count=1), True


def _in_code(line, pos):
    """Inside an inline `code span`: notes may show the marker syntax itself."""
    return line.count("`", 0, pos) % 2 == 1


def _names_a_file(expr, files):
    """Whether EXPR refers to ({name:path}) a results file that exists."""
    for name in re.findall(r"\{([^{}:]+):", expr):
        try:
            files.get(name.strip())
            return True
        except KeyError:
            pass
    return False


def fill_inline(text, files, where):
    """Every inline marker's TEXT rendered from the results files; errors name where, the line and the marker.
    Markers inside ``` fences or `code spans` are examples of the syntax and are left alone."""
    out, errors, fenced = [], [], False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or "<!-- v:" not in line:
            out.append(line)
            continue

        def one(m):
            if _in_code(line, m.start()):
                # An example of the syntax names no real results file; one that does is a marker the
                # backticks keep from ever being rendered (whether or not its path resolves).
                if _names_a_file(m.group("expr"), files):
                    errors.append(f"{where}:{n}: a marker inside a `code span` is never rendered (take the "
                                  f"backticks off): <!-- v:{m.group('expr')}|")
                return m.group(0)
            if line.lstrip().startswith("|") and m.group("sep") == "|":
                errors.append(f"{where}:{n}: a marker in a table row writes its separator as \\| (GitHub splits the "
                              f"row into cells at every unescaped |): <!-- v:{m.group('expr')}|")
                return m.group(0)
            fmt = m.group("fmt").strip()
            try:
                shown = ex.render(ex.evaluate(m.group("expr"), files), fmt)
            except ex.ExprError as e:
                errors.append(f"{where}:{n}: marker <!-- v:{m.group('expr')}|{m.group('fmt')} -->: {e}")
                return m.group(0)
            return m.group(0)[:m.start("text") - m.start()] + shown + "<!-- /v -->"  # the opening kept as written
        new = INLINE.sub(one, line)
        rest = INLINE.sub("", line)
        if "<!-- v:" in rest and not _in_code(rest, rest.index("<!-- v:")):
            errors.append(f"{where}:{n}: an inline marker without its '|FMT -->' or its '<!-- /v -->' on the same line")
        out.append(new)
    return "\n".join(out), errors


def readmes(root):
    return [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "*", "README.md")))


def render_all(root, results, fresh):
    """{README path: (old text, new text)}, the unresolvable markers, results files without a block; writes nothing."""
    files, out, errors, missing = FileCache(root), {}, [], []
    by_folder = {}
    for lesson, entries in results.items():
        by_folder.setdefault(folder_of(lesson), []).append((lesson, entries))
    for path in readmes(root):
        old = open(path, encoding="utf-8").read()
        new = old
        folder = os.path.basename(os.path.dirname(path))
        if path == os.path.join(root, "README.md"):
            new, _ = replace_block(new, "summary", summary_block(results, fresh))
        for lesson, entries in by_folder.get(folder, []):
            new, found = replace_block(new, lesson, lesson_block(lesson, entries))
            if not found:  # a warning, not an error: a new results file may come before its notes
                missing.append(f"warning: {os.path.relpath(path, root)} has no <!-- results:{lesson} --> block for "
                               f"{', '.join(d['_path'] for _, d in entries)}")
        new, errs = fill_inline(new, files, os.path.relpath(path, root))
        out[path], errors = (old, new), errors + errs
    return out, errors, missing


def fresh_in(root):
    return lambda lesson, data: status(root, data, folder_of(lesson))


def update_readmes(root, results):
    """make plots: rewrite every README whose blocks or figures changed. Returns (changed paths, errors)."""
    rendered, errors, _ = render_all(root, results, fresh_in(root))
    changed = []
    for path, (old, new) in rendered.items():
        if new != old:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            changed.append(path)
    return changed, errors


def _mask_fresh(lines):
    """The summary rows without their last column (it depends on HEAD: see freshness.py)."""
    out, inside = [], False
    for line in lines:
        inside = (inside or line.startswith("<!-- results:summary -->")) and not line.startswith("<!-- /results:summary")
        cells = line.split(" | ")
        if inside and line.startswith("| [") and len(cells) >= FRESH_COLUMN:
            line = " | ".join(cells[:FRESH_COLUMN - 1]) + " | … |"
        out.append(line)
    return out


def _figure(old, new):
    """The words that differ between two lines: 'old → new'."""
    a, b = re.split(r"(\s+|\||-->|<!--)", old), re.split(r"(\s+|\||-->|<!--)", new)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    parts = [("".join(a[i1:i2]).strip() or "(nothing)") + " → " + ("".join(b[j1:j2]).strip() or "(nothing)")
             for op, i1, i2, j1, j2 in sm.get_opcodes() if op != "equal"]
    return "; ".join(parts)[:300]


def differences(root, path, old, new):
    """One line per README line whose text differs from what the results files give."""
    a, b = _mask_fresh(old.split("\n")), _mask_fresh(new.split("\n"))
    rel, out = os.path.relpath(path, root), []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            o = a[i1 + k] if i1 + k < i2 else ""
            n = b[j1 + k] if j1 + k < j2 else ""
            out.append(f"{rel}:{i1 + k + 1}: {_figure(o, n)}")
    return out


def check_notes(root, results):
    """make check-notes: (differences, unresolvable markers, stale-file warnings); writes nothing."""
    rendered, errors, missing = render_all(root, results, lambda lesson, data: "")
    diffs = []
    for path, (old, new) in rendered.items():
        diffs += differences(root, path, old, new)
    warnings = list(missing)
    for lesson, entries in sorted(results.items()):
        for gpu, data in entries:
            if "env" not in data:
                continue
            s = status(root, data, folder_of(lesson))
            if s != "current":
                warnings.append(f"warning: {data['_path']}: {s}")
    return diffs, errors, warnings
