"""scripts/json_out.py: the one way the scripts' --json options write a results file (indented, a final newline,
through a temporary file renamed into place, so that a reader never sees half a file), and say in one line, exit 2,
when they cannot."""
import json
import os
import sys


def write(path, data, prog):
    """Write data to path as JSON; on failure print one line for prog and return 2, else 0."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, path)
    except OSError as e:
        print(f"{prog}: cannot write {path}: {e.strerror}", file=sys.stderr)
        try:
            os.remove(tmp)
        except OSError:
            pass
        return 2
    return 0
