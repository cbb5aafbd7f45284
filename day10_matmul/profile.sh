#!/usr/bin/env bash
# day10_matmul/profile.sh: Nsight Compute reports of steps 7, 8b, 8c, 8e, 8f and 8g (each at its autotuned shape;
# 8c and 8e also at 8e's BK = 16 shape), 10,
# 12 [s4 c2], 14 [s4 c2 tail], 15 [128x128 s5 c4] and 16 [s4 c2] at n = 4096 (`make profile`).
# Writes ../results/<gpu>/day10_ncu_<step>.txt and, beside them, day10_ncu.json: the figures the
# notes quote (ncu_metrics.py), so that they can be cited through markers. Needs a GPU and ncu;
# leaves the clocks alone.
set -eu
cd "$(dirname "$0")"
NCU=${NCU:-$(command -v ncu || echo "${CUDA_HOME:-/usr/local/cuda}/bin/ncu")}
[ -x "$NCU" ] || { echo "ncu not found"; exit 77; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1 | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
out=../results/$gpu
mkdir -p "$out"
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats"
# Steps 12 and 14 against 10: what the TMA-store epilogue and the stream-K tail change. SM active
# cycles (min/avg/max over SMs, against the elapsed cycles) show the idle tail of a partial wave;
# the gmma pipe's share of the elapsed cycles is how busy the tensor cores were over the whole run.
# --launch-skip 2 (3): the 1000x1504x776 check launches each of the 2 configurations of step 12
# (the 3 of step 14) once before the timed size, whose first launch is [s4 c2] ([s4 c2 tail]).
M="sm__cycles_elapsed.max,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max"
M="$M,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed"
# --launch-skip 3: the three check shapes of the default run launch each kernel once first.
"$NCU" --clock-control none --kernel-name regex:sgemm_07 --launch-skip 3 --launch-count 1 $S --section InstructionStats \
  ./build/matmul --sizes 4096 --kernels 7 >"$out/day10_ncu_07_warptiling.txt" 2>&1
"$NCU" --clock-control none --kernel-name regex:gemm_10 --launch-skip 2 --launch-count 1 $S --metrics "$M" \
  ./build/matmul --sizes 4096 --kernels 10 >"$out/day10_ncu_10_wgmma.txt" 2>&1
"$NCU" --clock-control none --kernel-name regex:gemm_tma_store --launch-skip 2 --launch-count 1 $S --metrics "$M" \
  ./build/matmul --sizes 4096 --kernels 12 >"$out/day10_ncu_12_tma_store.txt" 2>&1
"$NCU" --clock-control none --kernel-name regex:gemm_14 --launch-skip 3 --launch-count 1 $S --metrics "$M" \
  ./build/matmul --sizes 4096 --kernels 14 >"$out/day10_ncu_14_stream_k.txt" 2>&1
# Steps 15 and 16 at the configuration the notes discuss, picked out by the demangled template arguments
# (ncu may write them as "(int)128"). Step 16: [s4 c2], the bf16 headline; step 15: [128x128 s5 c4], its
# fastest at 4096 in the last bench. --launch-skip 1: the 1000x1504x776 check launches each configuration
# once before the timed size.
I='(\(int\))?'
"$NCU" --clock-control none --kernel-name-base demangled --kernel-name "regex:gemm_pingpong<${I}128, ?${I}128, ?${I}5, ?${I}4>" \
  --launch-skip 1 --launch-count 1 $S --metrics "$M" \
  ./build/matmul --sizes 4096 --kernels 15 >"$out/day10_ncu_15_pingpong.txt" 2>&1 || echo "step 15: ncu failed (see the report)"
"$NCU" --clock-control none --kernel-name-base demangled --kernel-name "regex:gemm_deferred<${I}4, ?${I}2>" \
  --launch-skip 1 --launch-count 1 $S --metrics "$M" \
  ./build/matmul --sizes 4096 --kernels 16 >"$out/day10_ncu_16_deferred.txt" 2>&1 || echo "step 16: ncu failed (see the report)"
# Steps 8b, 8c, 8e, 8f and 8g: the shape that won each one's autotuning in the last `make bench` results file
# (else the one named below), picked out by its full demangled name (ncu writes a default MINB of 1 or
# leaves it out; steps 8e and 8f end in the SNAKE flag, "true" for a candidate named "... snake"). With
# the stall reasons per issued instruction, which the notes compare between 8c and 8e. --launch-skip 6: the three check shapes launch each candidate once, and the step's own
# entry (candidate 0 until autotuned) once more each; the 7th launch of that kernel is in the autotuning at
# 4096. Best effort: a failure here leaves the other reports as they are.
simt_regex() {  # $1: step (08b, 08c, 08e, 08f), $2: its kernel's name, $3: the fallback shape
python3 - "$out/day10_matmul.json" "$1" "$2" "$3" "${4:-}" <<'PY'
import json, re, sys
try:
    name = json.load(open(sys.argv[1]))["config"]["autotuned_config_" + sys.argv[2]]
except Exception:
    name = sys.argv[4]
if len(sys.argv) > 5 and sys.argv[5] == "fixed":
    name = sys.argv[4]
m = re.fullmatch(r"(\d+)x(\d+)x(\d+) w(\d+)x(\d+) t(\d+)x(\d+) (\d+)thr(?: (\d+)blk)? s(\d+)( snake)?( stream-k)?", name)
bm, bn, bk, wm, wn, tm, tn, nt, minb, st, snake, sk = m.groups()
kernel = sys.argv[3].split("|")[1 if sk else 0]  # step 8g: "spread kernel|stream-K kernel"
# ncu's demangled names may cast each template argument: "WarpTileConfig<(int)128, (int)256, ...>".
I = r"(?:\(int\))?"
minb = f", ?{I}{minb}" if minb else f"(, ?{I}1)?"
flag = ""
if sys.argv[2] in ("08e", "08f", "08g"):
    flag = ", ?(true|\\(bool\\)1)>" if snake else ", ?(false|\\(bool\\)0)>"
print(f"{kernel}<PipeConfig<WarpTileConfig<{I}{bm}, ?{I}{bn}, ?{I}{bk}, ?{I}{wm}, ?{I}{wn}, ?{I}[0-9]+, ?{I}{tm}, "
      f"?{I}{tn}, ?{I}{nt}{minb}>, ?{I}{st}>{flag}")
PY
}
simt_reports=""
STALLS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for spec in "08b sgemm_08b_cp_async 128x256x32_w64x64_t8x4_256thr_s3 day10_ncu_08b_cp_async" \
            "08c sgemm_08c_prefetch 128x256x32_w64x64_t4x4_256thr_s3 day10_ncu_08c_frag_prefetch" \
            "08e sgemm_08e_spread 128x256x16_w64x64_t4x4_256thr_s4_snake day10_ncu_08e_spread_lds" \
            "08f sgemm_08f_stream_k_spread 128x256x16_w64x64_t4x4_256thr_s4_snake day10_ncu_08f_stream_k_spread" \
            "08g sgemm_08g_spread|sgemm_08g_stream_k 128x256x16_w64x64_t4x4_256thr_s4_snake_stream-k day10_ncu_08g_ptxas_level" \
            "08c sgemm_08c_prefetch 128x256x16_w64x64_t4x4_256thr_s4 day10_ncu_08c_bk16 fixed" \
            "08e sgemm_08e_spread 128x256x16_w64x64_t4x4_256thr_s4 day10_ncu_08e_bk16_rows fixed"; do
  # (the last two: 8e's winning shape in step 8c's loop and in 8e's row order, so that the notes can
  # compare one shape across the three loops)
  set -- $spec
  re=$(simt_regex "$1" "$2" "${3//_/ }" "${5:-}") || re=""
  if [ -n "$re" ] && "$NCU" --clock-control none --kernel-name-base demangled --kernel-name "regex:$re" --launch-skip 6 \
    --launch-count 1 $S --section InstructionStats --metrics "$STALLS" \
    ./build/matmul --sizes 4096 --kernels 8 >"$out/$4.txt" 2>&1 &&
    grep -q '==PROF== Profiling' "$out/$4.txt"; then
    simt_reports="$simt_reports $out/$4.txt"
  else
    echo "step $1: no Nsight Compute report (pattern '$re'; see $out/$4.txt)"
  fi
done
sed -i "s#$(cd .. && pwd)/##g" "$out"/day10_ncu_*.txt
reports="$out/day10_ncu_07_warptiling.txt $out/day10_ncu_10_wgmma.txt $out/day10_ncu_12_tma_store.txt $out/day10_ncu_14_stream_k.txt"
for f in "$out/day10_ncu_15_pingpong.txt" "$out/day10_ncu_16_deferred.txt"; do
  grep -q '==PROF== Profiling' "$f" && reports="$reports $f"
done
reports="$reports$simt_reports"
echo "wrote $reports"
# shellcheck disable=SC2086  # one argument per report
python3 ncu_metrics.py "$out/day10_ncu.json" $reports
