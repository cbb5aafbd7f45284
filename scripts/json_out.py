"""scripts/json_out.py: the one way the scripts' --json options write a results file (indented, a final newline,
through a temporary file renamed into place, so that a reader never sees half a file), and say in one line, exit 2,
when they cannot."""
import json
import os
import sys
import tempfile


def write(path, data, prog):
    """Write data to path as JSON; on failure print one line for prog and return 2, else 0."""
    tmp = None
    try:  # a temporary file of its own beside path: two writers of one path never share it
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=os.path.basename(path) + ".", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 otherwise: the mode a plain open would give
        os.replace(tmp, path)
    except OSError as e:
        print(f"{prog}: cannot write {path}: {e.strerror}", file=sys.stderr)
        if tmp is not None:
            try:
                os.remove(tmp)
            except OSError:
                pass
        return 2
    return 0
