// Step 8f: step 8e's main loop in step 8d's persistent stream-K kernel.
//
// Step 8d removed the partial last wave (512 tiles of 128x256 on 132 SMs: 3 full waves and 116
// tiles) but ran step 8c's main loop, and the extra state of the persistent loop pushed the BK = 32
// shapes past 255 registers (a few bytes spilled, slower than plain step 8c). With step 8e's loop
// the BK = 16 shape fits without spilling and is about as fast as 8e's BK = 32 one, so the stream-K
// tail can now pay off. Nothing here is new code: the body is 8d's, the loop is 8e's.
#pragma once
#include <vector>

#include "08d_stream_k.cuh"
#include "08e_spread_lds.cuh"

template <bool SNAKE = false>
struct Loop8e {
  template <class Cfg>
  __device__ __forceinline__ static void run(float* smem, const TileCopier<Cfg>& c, int kt0, int kt1,
                                             const ThreadPlace<Cfg>& p,
                                             float (&acc)[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN]) {
    spread_range<Cfg, SNAKE>(smem, c, kt0, kt1, p, acc);
  }
};

template <class Cfg, bool SNAKE = false>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    sgemm_08f_stream_k_spread(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                              float* __restrict__ C) {
  stream_k_body<Cfg, Loop8e<SNAKE>>(M, N, K, A, B, C);
}

template <bool SNAKE = false>
struct Kernels8f {
  template <class Cfg>
  static constexpr auto kernel() {
    return sgemm_08f_stream_k_spread<Cfg, SNAKE>;
  }
};

#ifndef DAY10_KERNELS_ONLY  // (not in step 8g's translation unit: see 08g_ptxas_level.cu)
// Step 8e's candidates (without its t4x8 snake one).
inline const std::vector<TunedKernel>& stream_k_spread_candidates() {
  using L = StreamKLaunch<Kernels8f<false>>;
  using LS = StreamKLaunch<Kernels8f<true>>;
  static const std::vector<TunedKernel> k = {
      {"128x256x32 w64x64 t4x4 256thr s3", L::run<PipeR>, L::attributes<PipeR>},
      {"128x256x32 w64x64 t4x8 256thr s3", L::run<PipeQ>, L::attributes<PipeQ>},
      {"128x256x16 w64x64 t4x4 256thr s4", L::run<PipeS>, L::attributes<PipeS>},
      {"128x256x32 w64x64 t4x4 256thr s3 snake", LS::run<PipeR>, LS::attributes<PipeR>},
      {"128x256x16 w64x64 t4x4 256thr s4 snake", LS::run<PipeS>, LS::attributes<PipeS>},
  };
  return k;
}
#endif  // DAY10_KERNELS_ONLY
