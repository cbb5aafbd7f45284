// Step 8c: step 8b, with the register fragments double-buffered: the shared-memory reads for
// k+1 are issued before the FFMAs of k, across the tile boundary too.
//
// A shared-memory read (LDS) takes tens of cycles to return. In step 8b the first fragments
// of every tile are read right after the barrier, so all warps of the block wait for them at
// the same moment; with one or two blocks per SM (2-4 warps per scheduler) nobody is left to
// issue FFMAs in that gap. Here each thread holds two sets of fragments: while the FFMAs of
// step k run on set k % 2, the reads for k+1 fill the other set. At the last k of a tile the
// thread waits for the next tile's copies and meets the barrier *before* its last FFMAs, then
// reads the next tile's first fragments; those arrive while the last outer product of the
// current tile is computed. The registers that step 8b freed (no staging of tiles) pay for
// the second set.
#pragma once
#include "08b_cp_async.cuh"

template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    sgemm_08c_prefetch(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C) {
  constexpr int BK = Cfg::BK, STAGES = Cfg::STAGES;
  static_assert(BK % 2 == 0, "the next tile's first fragments go to set 0");
  extern __shared__ __align__(16) float smem[];
  const ThreadPlace<Cfg> p;
  const int row0 = blockIdx.y * Cfg::BM, col0 = blockIdx.x * Cfg::BN;
  const TileCopier<Cfg> copier(A, B, M, N, K, row0, col0);
  const int ktiles = ceil_div(K, BK);
  float acc[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN] = {{0.f}};
  float ra[2][Cfg::WMITER * Cfg::TM], rb[2][Cfg::WNITER * Cfg::TN];

  // Prologue as in step 8b (group g = tile g), then tile 0's first fragments.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) copier.issue(smem + s * Cfg::kStageFloats, s);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>();
  __syncthreads();
  load_fragments<Cfg>(ra[0], rb[0], smem, smem + BK * Cfg::LDA, 0, p.a_off, p.b_off);

  for (int kt = 0; kt < ktiles; ++kt) {
    // The stage of tile kt-1 is free: every thread read its last fragments before the barrier
    // at the end of iteration kt-1. (At kt = 0 it is the stage the prologue left empty.)
    const int next = kt + STAGES - 1;
    if (next < ktiles) copier.issue(smem + (next % STAGES) * Cfg::kStageFloats, next);
    cp_async_commit();
    const float* As = smem + (kt % STAGES) * Cfg::kStageFloats;
    const float* Bs = As + BK * Cfg::LDA;
    const bool more = kt + 1 < ktiles;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k + 1 < BK) {
        load_fragments<Cfg>(ra[(k + 1) % 2], rb[(k + 1) % 2], As, Bs, k + 1, p.a_off, p.b_off);
      } else if (more) {
        // Groups committed: tiles 0 .. kt+STAGES-1; tile kt+1 is complete when at most
        // STAGES-2 are pending. After the barrier, all its copies are visible.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const float* An = smem + ((kt + 1) % STAGES) * Cfg::kStageFloats;
        load_fragments<Cfg>(ra[0], rb[0], An, An + BK * Cfg::LDA, 0, p.a_off, p.b_off);
      }
      outer_product<Cfg>(acc, ra[k % 2], rb[k % 2]);
    }
  }
  store_tile<Cfg>(C, M, N, row0, col0, p.a_off, p.b_off, acc);
}

struct PrefetchLaunch {
  template <class Cfg>
  static void run(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
    static bool attr_set = false;
    launch_pipelined<Cfg>(sgemm_08c_prefetch<Cfg>, attr_set, M, N, K, A, B, C, s);
  }
  template <class Cfg>
  static cudaFuncAttributes attributes() {
    cudaFuncAttributes a;
    CUDA_CHECK(cudaFuncGetAttributes(&a, sgemm_08c_prefetch<Cfg>));
    return a;
  }
};

// The same shapes as step 8b, so that the two steps compare shape for shape.
inline const std::vector<TunedKernel>& prefetch_candidates() {
  static const std::vector<TunedKernel> k = pipe_candidates<PrefetchLaunch>();
  return k;
}
