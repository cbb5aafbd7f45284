"""scripts/json_out.py: the one way the scripts' --json options write a results file (indented, a final newline),
and say in one line, exit 2, when they cannot."""
import json
import sys


def write(path, data, prog):
    """Write data to path as JSON; on failure print one line for prog and return 2, else 0."""
    try:
        with open(path, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")
    except OSError as e:
        print(f"{prog}: cannot write {path}: {e.strerror}", file=sys.stderr)
        return 2
    return 0
