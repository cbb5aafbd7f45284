"""The results files: results/<gpu>/<name>.json, written by the programs with --json."""
import glob
import json
import os


def is_program_results(data):
    """A program's results file has env and bench; sanitize.json and day10_sass.json are other kinds."""
    return isinstance(data, dict) and "env" in data and "bench" in data


class InputError(Exception):
    """Bad input from the command line or a file: plot.py prints it as one line and exits 2."""


SPECIAL = {"day10_sass"}  # files that are not program results but still feed a block of the notes


def load_results(root):
    """{lesson: [(gpu_slug, data), ...]} for every results/<gpu>/<lesson>.json (one line on a broken file)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "results", "*", "*.json"))):
        lesson = os.path.splitext(os.path.basename(path))[0]
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise InputError(f"{os.path.relpath(path, root)}: not a readable JSON file ({e})")
        if not is_program_results(data) and lesson not in SPECIAL:
            continue  # e.g. sanitize.json, written by scripts/sanitize.sh
        gpu = os.path.basename(os.path.dirname(path))
        data["_path"] = os.path.relpath(path, root)
        out.setdefault(lesson, []).append((gpu, data))
    return out


class FileCache:
    """Results files by their marker name (nvidia-h200/day10_matmul), each read once."""

    def __init__(self, root):
        self.root, self.files = root, {}

    def get(self, name):
        if name not in self.files:
            path = os.path.join(self.root, "results", name + ".json")
            if not os.path.isfile(path):
                raise KeyError(f"no results file results/{name}.json")
            try:
                with open(path) as f:
                    self.files[name] = json.load(f)
            except ValueError as e:
                raise KeyError(f"results/{name}.json is not valid JSON ({e})")
        return self.files[name]


FOLDERS = {"day50_gpt_multi": "day50_gpt", "day10_sass": "day10_matmul"}  # named by their issue, not by program


def folder_of(lesson):
    """A lesson with several programs writes <lesson>-<program>.json; its notes are in <lesson>/."""
    return FOLDERS.get(lesson, lesson.split("-")[0])


def gpu_label(gpu, data):
    """The GPU name, with the count for a run over several."""
    n = data.get("config", {}).get("gpus", 1)
    name = data.get("env", {}).get("gpu", gpu)
    return f"{n} × {name}" if isinstance(n, int) and n > 1 else name
