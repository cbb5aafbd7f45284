// Step 8: the best SIMT kernel for this GPU: step 7's kernel, with the tile shape chosen
// by measurement.
//
// The best shape depends on the GPU (SM count, registers, shared memory) and the problem
// size: bigger tiles reuse more data per load but give fewer blocks to fill 132 SMs and
// more registers per thread. We compile a handful of shapes that satisfy the constraints
// (see WarpTileConfig's static_asserts) and time each on this GPU at run time; the
// program prints the table and uses the winner as step 8.
#pragma once
#include <vector>

#include "07_warptiling.cuh"

struct TunedKernel {
  const char* name;
  void (*run)(int, int, int, const float*, const float*, float*, cudaStream_t);
  // What the compiler made of it (registers per thread, local-memory bytes of spills), read with
  // cudaFuncGetAttributes: the autotune table records it beside the time, since the register
  // count decides how many warps share an SM.
  cudaFuncAttributes (*attributes)() = nullptr;
};

template <class Cfg>
inline cudaFuncAttributes warptile_attributes() {
  cudaFuncAttributes a;
  CUDA_CHECK(cudaFuncGetAttributes(&a, sgemm_07_warptile<Cfg>));
  return a;
}

//                         BM   BN  BK  WM  WN WNITER TM TN  NT
using TuneA = WarpTileConfig<128, 128, 16, 64, 64, 4, 8, 4, 128>;
using TuneB = WarpTileConfig<128, 128, 8, 64, 32, 2, 8, 4, 256>;
using TuneC = WarpTileConfig<128, 256, 16, 64, 64, 4, 8, 4, 256>;
using TuneD = WarpTileConfig<256, 128, 16, 64, 64, 4, 8, 4, 256>;
using TuneE = WarpTileConfig<128, 128, 16, 32, 64, 2, 8, 4, 256>;
using TuneF = WarpTileConfig<64, 128, 16, 32, 64, 2, 8, 4, 128>;
using TuneG = WarpTileConfig<128, 128, 16, 64, 64, 2, 8, 8, 128>;
using TuneH = WarpTileConfig<128, 64, 16, 64, 32, 2, 8, 4, 128>;
using TuneI = WarpTileConfig<128, 256, 8, 64, 64, 4, 8, 4, 256>;
using TuneJ = WarpTileConfig<256, 128, 8, 64, 64, 4, 8, 4, 256>;
using TuneK = WarpTileConfig<128, 256, 16, 64, 64, 2, 8, 8, 256>;
using TuneL = WarpTileConfig<128, 128, 8, 64, 32, 2, 8, 4, 256, 2>;  // two blocks per SM
using TuneM = WarpTileConfig<128, 128, 16, 32, 64, 2, 8, 4, 256, 2>;
using TuneN = WarpTileConfig<64, 128, 16, 32, 64, 2, 8, 4, 128, 4>;

#ifndef DAY10_KERNELS_ONLY  // (not in step 8g's translation unit: see 08g_ptxas_level.cu)
inline const std::vector<TunedKernel>& tune_candidates() {
  static const std::vector<TunedKernel> k = {
      {"128x128x16 w64x64 t8x4 128thr", launch_warptile<TuneA>, warptile_attributes<TuneA>},
      {"128x128x8 w64x32 t8x4 256thr", launch_warptile<TuneB>, warptile_attributes<TuneB>},
      {"128x256x16 w64x64 t8x4 256thr", launch_warptile<TuneC>, warptile_attributes<TuneC>},
      {"256x128x16 w64x64 t8x4 256thr", launch_warptile<TuneD>, warptile_attributes<TuneD>},
      {"128x128x16 w32x64 t8x4 256thr", launch_warptile<TuneE>, warptile_attributes<TuneE>},
      {"64x128x16 w32x64 t8x4 128thr", launch_warptile<TuneF>, warptile_attributes<TuneF>},
      {"128x128x16 w64x64 t8x8 128thr", launch_warptile<TuneG>, warptile_attributes<TuneG>},
      {"128x64x16 w64x32 t8x4 128thr", launch_warptile<TuneH>, warptile_attributes<TuneH>},
      {"128x256x8 w64x64 t8x4 256thr", launch_warptile<TuneI>, warptile_attributes<TuneI>},
      {"256x128x8 w64x64 t8x4 256thr", launch_warptile<TuneJ>, warptile_attributes<TuneJ>},
      {"128x256x16 w64x64 t8x8 256thr", launch_warptile<TuneK>, warptile_attributes<TuneK>},
      {"128x128x8 w64x32 t8x4 256thr 2blk", launch_warptile<TuneL>, warptile_attributes<TuneL>},
      {"128x128x16 w32x64 t8x4 256thr 2blk", launch_warptile<TuneM>, warptile_attributes<TuneM>},
      {"64x128x16 w32x64 t8x4 128thr 4blk", launch_warptile<TuneN>, warptile_attributes<TuneN>},
  };
  return k;
}
#endif  // DAY10_KERNELS_ONLY
