#!/usr/bin/env bash
# day10_matmul/sass_summary.sh OUT.json: what the compiler made of each step (`make sass`).
# Reads each kernel's SASS and resource usage with cuobjdump (no GPU needed) and writes OUT.json:
#   { "lesson": "day10_matmul", "arch": "sm_90 + sm_90a" (as built), "source": "cuobjdump -sass / -res-usage",
#     "counts_are": "static (instructions in the code, not executed)",
#     "kernels": [ { "kernel", "regs", "shared_bytes" (static), "local_bytes", "stack_bytes",
#                    "spill_instructions" (STL + LDL), "instructions": { "FFMA": n, ... },
#                    "lds128_runs": { run length: runs } (LDS.128 with no FFMA between them),
#                    "ffma_reuse": FFMAs with a .reuse flag on an operand } ] }
# `make plots` renders it as the notes' table. Needs cuobjdump and nvdisasm (CUDA toolkit bin/).
set -eu
cd "$(dirname "$0")"
out=${1:?usage: sass_summary.sh OUT.json}
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump")}
[ -x "$CUOBJDUMP" ] || { echo "cuobjdump not found (CUDA toolkit bin/)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The binary holds steps 1-9; the sm_90a objects hold steps 10-14 (the binary lists them again).
objs="build/matmul build/10_wgmma_tma.o build/11_wgmma_cluster.o build/12_wgmma_tma_store.o build/14_stream_k.o"
for o in $objs; do "$CUOBJDUMP" -sass "$o" >>"$tmp/main.sass"; done
for o in $objs; do "$CUOBJDUMP" -res-usage "$o" >>"$tmp/res.txt"; done
mkdir -p "$(dirname "$out")"
python3 - "$tmp/main.sass" "$tmp/res.txt" "$out" <<'PY'
import json, re, subprocess, sys
sass = open(sys.argv[1]).read().split("Function : ")[1:]
res = {name: dict(re.findall(r"(\w+):(\d+)", line))
       for name, line in re.findall(r"Function ([^\s:]+):\s*\n\s*(REG:[^\n]*)", open(sys.argv[2]).read())}
def demangle(s):
    try:
        return subprocess.run(["c++filt", s], capture_output=True, text=True).stdout.strip()
    except OSError:
        return s
pats = [("FFMA", r"\bFFMA\b"), ("LDS.32", r"\bLDS(\.U)?\s"), ("LDS.128", r"\bLDS(\.U)?\.128\b"), ("LDG.128", r"\bLDG\.E\.128"),
        ("LDG other", r"\bLDG\.E(?!\.128)"), ("STS", r"\bSTS"), ("HMMA", r"\bHMMA"), ("HGMMA", r"\bHGMMA"), ("UTMALDG", r"\bUTMALDG"), ("UTMASTG", r"\bUTMASTG"),
        ("BAR", r"\bBAR\.SYNC|\bBAR\b"), ("SYNCS", r"\bSYNCS")]
def lds_runs(body):
    """Where the compiler put the shared-memory reads of the FFMA steps: the LDS.128 in the order of the
    code, cut into runs at every FFMA (a run: reads with no FFMA between them). {run length: runs}, as
    strings; empty for a kernel with no FFMA or no LDS.128. Step 8e asks for one read before each row of
    FFMAs (runs of 1); this shows how many of them the schedule kept apart."""
    if not re.search(r"\bFFMA\b", body):
        return {}
    runs, n = {}, 0
    for op in re.findall(r"\b(FFMA|LDS(?:\.U)?\.128)\b", body):
        if op == "FFMA":
            if n:
                runs[str(n)] = runs.get(str(n), 0) + 1
            n = 0
        else:
            n += 1
    if n:
        runs[str(n)] = runs.get(str(n), 0) + 1
    return dict(sorted(runs.items(), key=lambda kv: int(kv[0])))
rows = {}
for f in sass:
    name, body = f.split("\n", 1)
    name = name.strip()
    d = demangle(name)
    # sgemm_08b_cp_async, sgemm_08c_prefetch: a letter after the step number. Steps 12-13 are one
    # template (stages, C staging boxes, cluster size), as are step 15's gemm_pingpong (tile, stages,
    # boxes) and step 16's gemm_deferred (stages, boxes): the arguments name the row.
    m = re.search(r"(sgemm_0\d[a-z]?_\w+|gemm_\d\d_\w+|gemm_(?:tma_store|pingpong|deferred)<[^>]*>)", d)
    if not m:
        continue
    label = m.group(1).replace(" ", "")
    t = re.search(r"WarpTileConfig<([^>]*)>", d)
    if t:
        label += " <" + t.group(1).replace(" ", "") + ">"
    s = re.search(r"PipeConfig<WarpTileConfig<[^>]*>\s*,\s*(\d+)\s*>", d)
    if s:  # steps 8b/8c: the same tile with another number of shared-memory stages is another kernel
        label += " s" + s.group(1)
    if re.search(r"PipeConfig<WarpTileConfig<[^>]*>\s*,\s*\d+\s*>\s*,\s*true\s*>", d):
        label += " snake"  # steps 8e/8f: the same shape in snake order (SNAKE = true) is another kernel
    r = res.get(name, {})
    num = lambda k: int(r[k]) if k in r else None
    rows[label] = {"kernel": label, "regs": num("REG"), "shared_bytes": num("SHARED"), "local_bytes": num("LOCAL"),
                   "stack_bytes": num("STACK"), "spill_instructions": len(re.findall(r"\b(STL|LDL)\b", body)),
                   "instructions": {p: len(re.findall(rx, body)) for p, rx in pats},
                   "lds128_runs": lds_runs(body),
                   "ffma_reuse": len(re.findall(r"\bFFMA\b[^;]*\.reuse", body))}
arch = sorted(set(re.findall(r"arch = (sm_\w+)", open(sys.argv[2]).read())))
doc = {"lesson": "day10_matmul", "arch": " + ".join(arch), "source": "cuobjdump -sass / -res-usage",
       "counts_are": "static (instructions in the code, not executed)",
       "kernels": [rows[k] for k in sorted(rows)]}
with open(sys.argv[3], "w") as fh:
    json.dump(doc, fh, indent=1)
    fh.write("\n")
for k in doc["kernels"]:
    print(f"  {k['kernel']:<44} regs {k['regs']}  smem {k['shared_bytes']}  spills {k['spill_instructions']}")
print("wrote", sys.argv[3])
PY
