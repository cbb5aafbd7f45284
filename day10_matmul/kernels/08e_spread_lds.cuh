// Step 8e: step 8c with the instructions of a k-step in a better order: the next k's shared-memory
// reads spread through the outer product (one float4 read before each row of FFMAs instead of all
// of them in a row), and, in the "snake" candidates, the rows of FFMAs walked alternately forwards
// and backwards.
//
// Step 8c's source asks, at each k, for its fragment reads (2 LDS.128 for A and 4 for B with the t4x4
// shapes) back to back, and then for the 128 FFMAs. If the SASS kept that order: Two warps share a scheduler, both reach their reads at
// about the same time, and twelve 128-bit reads queue at the shared-memory pipe at once: a warp
// whose next instruction is a read that the full queue cannot take stalls, FFMAs behind it
// included. cuBLAS's FP32 kernel for this GPU (sm80_xmma_gemm_f32f32_..._ffma, 128x256x8 tiles,
// 8 warps, 255 registers: the same plan as ours) places one LDS.128 every 8-16 FFMAs. Here the
// source asks for that order: read piece p of the next fragments just before row p of this k's
// outer product. The compiler schedules the SASS, and it does not keep that order: `make sass` cuts
// each kernel's LDS.128 into runs with no FFMA between them (`lds128_runs`), and in the BK = 16 kernels
// most of this step's reads end up in runs of six again, more of them than in step 8c's kernel of the
// same shape. So what this step changes is the compiler's schedule and allocation as a whole; the notes
// compare the stall reasons of the two kernels (`make profile`) instead of assuming the written order.
//
// Snake order: an FFMA reads three registers (a, b, the accumulator); the scheduler keeps a
// register it is told will be read again by the next instruction in the same operand slot (the
// `.reuse` flag in the SASS) and does not read it from the register file again. Row r walks
// b[0..15] with a[r] fixed, so a[r] is reused; with the rows walked alternately forwards and
// backwards, the next row starts on the b register the last one ended on, and the compiler also
// allocates the row's registers differently (fewer of them, and more FFMAs with a `.reuse` flag:
// `make sass`). Whether that helps is
// measured: the candidate list has each shape with and without it.
#pragma once
#include <vector>

#include "08b_cp_async.cuh"

// Piece `piece` of one thread's fragments for k: A's float4 pieces first (WMITER * TM / 4 of them),
// then B's (WNITER * TN / 4). Together, the same reads as load_fragments.
template <class Cfg>
__device__ __forceinline__ void load_piece(float (&ra)[Cfg::WMITER * Cfg::TM], float (&rb)[Cfg::WNITER * Cfg::TN],
                                           const float* As, const float* Bs, int k, int a_off, int b_off, int piece) {
  constexpr int kApieces = Cfg::WMITER * Cfg::TM / 4;
  if (piece < kApieces) {
    const int wm = piece / (Cfg::TM / 4), i = (piece % (Cfg::TM / 4)) * 4;
    *reinterpret_cast<float4*>(&ra[wm * Cfg::TM + i]) =
        *reinterpret_cast<const float4*>(&As[k * Cfg::LDA + a_off + wm * Cfg::WSUBM + i]);
  } else {
    const int q = piece - kApieces, wn = q / (Cfg::TN / 4), j = (q % (Cfg::TN / 4)) * 4;
    *reinterpret_cast<float4*>(&rb[wn * Cfg::TN + j]) =
        *reinterpret_cast<const float4*>(&Bs[k * Cfg::BN + b_off + wn * Cfg::WSUBN + j]);
  }
}

// K tiles [kt0, kt1) of one output tile into acc, with the reads spread. Ends with a barrier, so
// that a next call's prologue may refill any stage (step 8f calls it once per piece of work).
// SNAKE: odd rows of the outer product walk the columns backwards (see the top of the file).
template <class Cfg, bool SNAKE = false>
__device__ __forceinline__ void spread_range(float* smem, const TileCopier<Cfg>& copier, int kt0, int kt1,
                                             const ThreadPlace<Cfg>& p,
                                             float (&acc)[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN]) {
  constexpr int BK = Cfg::BK, STAGES = Cfg::STAGES;
  constexpr int RM = Cfg::WMITER * Cfg::TM, RN = Cfg::WNITER * Cfg::TN, kPieces = (RM + RN) / 4;
  static_assert(BK % 2 == 0, "the next tile's first fragments go to set 0");
  static_assert(kPieces <= RM, "one piece before each row at most");
  float ra[2][RM], rb[2][RN];
  const int n = kt1 - kt0;

  // Prologue as in step 8c.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n) copier.issue(smem + s * Cfg::kStageFloats, kt0 + s);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>();
  __syncthreads();
  load_fragments<Cfg>(ra[0], rb[0], smem, smem + BK * Cfg::LDA, 0, p.a_off, p.b_off);

  for (int i = 0; i < n; ++i) {
    const int next = i + STAGES - 1;
    if (next < n) copier.issue(smem + (next % STAGES) * Cfg::kStageFloats, kt0 + next);
    cp_async_commit();
    const float* As = smem + (i % STAGES) * Cfg::kStageFloats;
    const bool more = i + 1 < n;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      // The reads for k + 1: this tile's next row, or (at the last k) the next tile's first row,
      // after step 8c's wait and barrier.
      const float* An = As;
      int kn = k + 1;
      if (k + 1 == BK) {
        if (more) {
          cp_async_wait<STAGES - 2>();
          __syncthreads();
        }
        An = smem + ((i + 1) % STAGES) * Cfg::kStageFloats;
        kn = 0;
      }
      const bool read = k + 1 < BK || more;
#pragma unroll
      for (int r = 0; r < RM; ++r) {
        if (r < kPieces && read)
          load_piece<Cfg>(ra[(k + 1) % 2], rb[(k + 1) % 2], An, An + BK * Cfg::LDA, kn, p.a_off, p.b_off, r);
#pragma unroll
        for (int jj = 0; jj < RN; ++jj) {
          const int j = SNAKE && (r % 2) ? RN - 1 - jj : jj;
          acc[r][j] = fmaf(ra[k % 2][r], rb[k % 2][j], acc[r][j]);
        }
      }
    }
  }
  __syncthreads();
}

template <class Cfg, bool SNAKE = false>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    sgemm_08e_spread(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C) {
  extern __shared__ __align__(16) float smem[];
  const ThreadPlace<Cfg> p;
  const int row0 = blockIdx.y * Cfg::BM, col0 = blockIdx.x * Cfg::BN;
  const TileCopier<Cfg> copier(A, B, M, N, K, row0, col0);
  float acc[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN] = {{0.f}};
  spread_range<Cfg, SNAKE>(smem, copier, 0, ceil_div(K, Cfg::BK), p, acc);
  store_tile<Cfg>(C, M, N, row0, col0, p.a_off, p.b_off, acc);
}

template <bool SNAKE>
struct SpreadLaunch {
  template <class Cfg>
  static void run(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
    static bool attr_set = false;
    launch_pipelined<Cfg>(sgemm_08e_spread<Cfg, SNAKE>, attr_set, M, N, K, A, B, C, s);
  }
  template <class Cfg>
  static cudaFuncAttributes attributes() {
    cudaFuncAttributes a;
    CUDA_CHECK(cudaFuncGetAttributes(&a, sgemm_08e_spread<Cfg, SNAKE>));
    return a;
  }
};

#ifndef DAY10_KERNELS_ONLY  // (not in step 8g's translation unit: see 08g_ptxas_level.cu)
// Step 8c's best shapes (t4: two 4-row patches per thread, six reads per k) and its BK = 16 one,
// each in row order and in snake order.
inline const std::vector<TunedKernel>& spread_candidates() {
  using L = SpreadLaunch<false>;
  using LS = SpreadLaunch<true>;
  static const std::vector<TunedKernel> k = {
      {"128x256x32 w64x64 t4x4 256thr s3", L::run<PipeR>, L::attributes<PipeR>},
      {"128x256x32 w64x64 t4x8 256thr s3", L::run<PipeQ>, L::attributes<PipeQ>},
      {"128x256x16 w64x64 t4x4 256thr s4", L::run<PipeS>, L::attributes<PipeS>},
      {"128x256x32 w64x64 t4x4 256thr s3 snake", LS::run<PipeR>, LS::attributes<PipeR>},
      {"128x256x32 w64x64 t4x8 256thr s3 snake", LS::run<PipeQ>, LS::attributes<PipeQ>},
      {"128x256x16 w64x64 t4x4 256thr s4 snake", LS::run<PipeS>, LS::attributes<PipeS>},
  };
  return k;
}
#endif  // DAY10_KERNELS_ONLY
