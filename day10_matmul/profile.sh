#!/usr/bin/env bash
# day10_matmul/profile.sh: Nsight Compute reports of steps 7 and 10 at n = 4096 (`make profile`).
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
# --launch-skip 3: the three check shapes of the default run launch each kernel once first.
"$NCU" --clock-control none --kernel-name regex:sgemm_07 --launch-skip 3 --launch-count 1 $S --section InstructionStats \
  ./build/matmul --sizes 4096 --kernels 7 >"$out/day10_ncu_07_warptiling.txt" 2>&1
"$NCU" --clock-control none --kernel-name regex:gemm_10 --launch-skip 2 --launch-count 1 $S \
  ./build/matmul --sizes 4096 --kernels 10 >"$out/day10_ncu_10_wgmma.txt" 2>&1
sed -i "s#$(cd .. && pwd)/##g" "$out"/day10_ncu_*.txt
echo "wrote $out/day10_ncu_07_warptiling.txt $out/day10_ncu_10_wgmma.txt"
python3 ncu_metrics.py "$out/day10_ncu.json" "$out/day10_ncu_07_warptiling.txt" "$out/day10_ncu_10_wgmma.txt"
