#!/usr/bin/env bash
# day10_matmul/sass_summary.sh: what the compiler made of each step (`make sass`).
# Counts the instructions that tell the story in each kernel's SASS (static counts in the
# code, not executed counts) with cuobjdump, adds ptxas's register count, and writes the
# table into README.md between <!-- sass --> and <!-- /sass -->. Needs cuobjdump (CUDA toolkit).
set -eu
cd "$(dirname "$0")"
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump")}
[ -x "$CUOBJDUMP" ] || { echo "cuobjdump not found (CUDA toolkit bin/)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$CUOBJDUMP" -sass build/matmul >"$tmp/main.sass"
for o in build/*.o; do [ -f "$o" ] && "$CUOBJDUMP" -sass "$o" >>"$tmp/main.sass"; done
"$CUOBJDUMP" -res-usage build/matmul >"$tmp/res.txt" 2>/dev/null || true
for o in build/*.o; do "$CUOBJDUMP" -res-usage "$o" >>"$tmp/res.txt" 2>/dev/null || true; done
python3 - "$tmp/main.sass" "$tmp/res.txt" <<'PY'
import re, subprocess, sys
sass = open(sys.argv[1]).read().split("Function : ")[1:]
res = open(sys.argv[2]).read()
regs = dict(re.findall(r"Function ([^\s:]+):\s*\n\s*REG:(\d+)", res))
def demangle(s):
    try:
        return subprocess.run(["c++filt", s], capture_output=True, text=True).stdout.strip()
    except OSError:
        return s
pats = [("FFMA", r"\bFFMA\b"), ("LDS.32", r"\bLDS(\.U)?\s"), ("LDS.128", r"\bLDS(\.U)?\.128\b"), ("LDG.128", r"\bLDG\.E\.128"),
        ("LDG other", r"\bLDG\.E(?!\.128)"), ("STS", r"\bSTS"), ("HMMA", r"\bHMMA"), ("HGMMA", r"\bHGMMA"), ("UTMALDG", r"\bUTMALDG"),
        ("BAR", r"\bBAR\.SYNC|\bBAR\b"), ("SYNCS", r"\bSYNCS")]
rows = []
for f in sass:
    name, body = f.split("\n", 1)
    name = name.strip()
    d = demangle(name)
    m = re.search(r"(sgemm_0\d_\w+|gemm_\d\d_\w+)", d)
    if not m:
        continue
    label = m.group(1)
    t = re.search(r"WarpTileConfig<([^>]*)>", d)
    if t:
        label += " <" + t.group(1).replace(" ", "") + ">"
    counts = [len(re.findall(p, body)) for _, p in pats]
    rows.append((label, regs.get(name, "?"), counts))
rows = sorted(set((l, r, tuple(c)) for l, r, c in rows))  # the binary and its .o both list steps 10-11
lines = ["| kernel | regs | " + " | ".join(p for p, _ in pats) + " |", "|---|---:|" + "---:|" * len(pats)]
for label, r, c in rows:
    lines.append(f"| {label} | {r} | " + " | ".join(str(x) if x else "·" for x in c) + " |")
table = "\n".join(lines)
readme = open("README.md").read()
new, n = re.subn(r"(<!-- sass -->\n).*?(<!-- /sass -->)", lambda m: m.group(1) + table + "\n" + m.group(2), readme, flags=re.S)
if n:
    open("README.md", "w").write(new)
    print("updated README.md (sass table)")
print(table)
PY
