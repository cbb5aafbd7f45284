// Step 8g: steps 8e and 8f again, compiled with `-Xptxas --register-usage-level=10` (day10's Makefile
// gives the flag to this object only; ptxas's default level is 5).
//
// Steps 8e and 8f showed that the order written in the source is not what runs: ptxas schedules the
// SASS and allocates the registers, and the two together decide how long a warp waits on a shared-
// memory read (short_scoreboard) or on its register operands (dispatch_stall). ptxas has a knob for
// how freely it may use registers to do that ("the aggressiveness of optimizations that affect register
// usage", 0 to 10). These kernels are step 8e's and step 8f's bodies, unchanged; only the compilation
// differs, so the bench measures the flag alone, each candidate beside its default-level twin in steps
// 8e and 8f of the same run.
//
// New kernel names (sgemm_08g_*), not the 8e/8f templates instantiated again: the same template
// compiled twice with different code would be two definitions of one kernel, and the program could
// launch either. For the same reason DAY10_KERNELS_ONLY hides the other steps' candidate lists, whose
// bodies would instantiate their kernels in this translation unit too.
#define DAY10_KERNELS_ONLY
#include "08g_ptxas_level.h"

#include "08f_stream_k_spread.cuh"

template <class Cfg, bool SNAKE>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    sgemm_08g_spread(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C) {
  extern __shared__ __align__(16) float smem[];
  const ThreadPlace<Cfg> p;
  const int row0 = blockIdx.y * Cfg::BM, col0 = blockIdx.x * Cfg::BN;
  const TileCopier<Cfg> copier(A, B, M, N, K, row0, col0);
  float acc[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN] = {{0.f}};
  spread_range<Cfg, SNAKE>(smem, copier, 0, ceil_div(K, Cfg::BK), p, acc);
  store_tile<Cfg>(C, M, N, row0, col0, p.a_off, p.b_off, acc);
}

template <class Cfg, bool SNAKE>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    sgemm_08g_stream_k(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C) {
  stream_k_body<Cfg, Loop8e<SNAKE>>(M, N, K, A, B, C);
}

template <bool SNAKE>
struct Level8e {  // step 8e's launch, this kernel
  template <class Cfg>
  static void run(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
    static bool attr_set = false;
    launch_pipelined<Cfg>(sgemm_08g_spread<Cfg, SNAKE>, attr_set, M, N, K, A, B, C, s);
  }
  template <class Cfg>
  static cudaFuncAttributes attributes() {
    cudaFuncAttributes a;
    CUDA_CHECK(cudaFuncGetAttributes(&a, sgemm_08g_spread<Cfg, SNAKE>));
    return a;
  }
};

template <bool SNAKE>
struct Kernels8g {  // step 8f's launch (StreamKLaunch), this kernel
  template <class Cfg>
  static constexpr auto kernel() {
    return sgemm_08g_stream_k<Cfg, SNAKE>;
  }
};

// Step 8e's and step 8f's BK = 16 shape, in row and in snake order ("stream-k": 8f's kernel).
const std::vector<TunedKernel>& ptxas_level_candidates() {
  using E = Level8e<false>;
  using ES = Level8e<true>;
  using F = StreamKLaunch<Kernels8g<false>>;
  using FS = StreamKLaunch<Kernels8g<true>>;
  static const std::vector<TunedKernel> k = {
      {"128x256x16 w64x64 t4x4 256thr s4", E::run<PipeS>, E::attributes<PipeS>},
      {"128x256x16 w64x64 t4x4 256thr s4 snake", ES::run<PipeS>, ES::attributes<PipeS>},
      {"128x256x16 w64x64 t4x4 256thr s4 stream-k", F::run<PipeS>, F::attributes<PipeS>},
      {"128x256x16 w64x64 t4x4 256thr s4 snake stream-k", FS::run<PipeS>, FS::attributes<PipeS>},
  };
  return k;
}
