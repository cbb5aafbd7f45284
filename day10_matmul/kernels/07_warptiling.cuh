// Step 7: warp tiling and double buffering.
//
// Warp tiling: the block tile is split into warp tiles (WM x WN), and each warp tile into
// WMITER x WNITER sub-tiles that the warp's 32 threads cover together, each thread a
// TM x TN patch. Compared with step 6 the threads of one warp now read a compact region
// of the shared tiles, so a warp's LDS.128 requests hit few distinct addresses
// (broadcasts, no bank conflicts), and the per-thread register tile is addressed with
// compile-time indices only, so it stays in registers.
//
// Double buffering: two shared buffers per operand. While the block computes on buffer
// `cur`, the loads for the next K step are already in flight into registers and are
// written to the other buffer afterwards: the global-memory latency hides behind the
// FMAs, and one __syncthreads per K step suffices.
//
// The tile shape is a template; step 8 tries several shapes and keeps the fastest.
#pragma once
#include "tile_io.cuh"

// MINB_: blocks per SM to plan registers for (__launch_bounds__'s second argument). 2 caps
// a 256-thread block at 128 registers per thread, so two blocks (16 warps) share an SM
// and hide each other's shared-memory latency, at the price of a smaller register tile.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int WNITER_, int TM_, int TN_, int NT_, int MINB_ = 1>
struct WarpTileConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, WNITER = WNITER_, TM = TM_, TN = TN_, NT = NT_;
  static constexpr int MINB = MINB_;
  static constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
  static constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
  static_assert((BM / WM) * (BN / WN) == NT / 32, "one warp per warp tile");
  static_assert(WMITER >= 1 && (WSUBM / TM) * (WSUBN / TN) == 32, "a sub-tile is covered by 32 threads");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "float4 shared loads");
  // The transposed A tile gets 4 floats of padding per k-row: without it the four threads
  // that store one float4 of A write to the same bank (BM*4 bytes apart), with it only two.
  static constexpr int LDA = BM + 4;
  static constexpr int kSmemBytes = 2 * (LDA + BN) * BK * 4;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    sgemm_07_warptile(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                      float* __restrict__ C) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WM, WN = Cfg::WN, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int WMITER = Cfg::WMITER, WNITER = Cfg::WNITER, WSUBM = Cfg::WSUBM, WSUBN = Cfg::WSUBN, NT = Cfg::NT;
  constexpr int LDA = Cfg::LDA;
  // Dynamic shared memory: the larger shapes need more than the 48 KB a static array may use.
  extern __shared__ __align__(16) float smem[];
  // Buffer b of A at smem + b * BK * LDA, of B at Bsm + b * BK * BN. (Computed, not a
  // pointer array: an array indexed by a run-time `cur` would live in local memory.)
  float* const Asm = smem;
  float* const Bsm = smem + 2 * BK * LDA;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wrow = warp / (BN / WN), wcol = warp % (BN / WN);
  const int trow = lane / (WSUBN / TN), tcol = lane % (WSUBN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const bool a_vec = K % 4 == 0, b_vec = N % 4 == 0;

  TileLoader<BM, BK, NT> la;
  TileLoader<BK, BN, NT> lb;
  float acc[WMITER * TM][WNITER * TN] = {{0.f}};
  float ra[WMITER * TM], rb[WNITER * TN];

  la.load(A, M, K, row0, 0, a_vec);
  lb.load(B, K, N, 0, col0, b_vec);
  la.template store_transposed<LDA>(Asm);
  lb.store(Bsm);
  __syncthreads();

  const int ktiles = ceil_div(K, BK);
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) {  // issue next tile's global loads now; they complete while we compute
      la.load(A, M, K, row0, (kt + 1) * BK, a_vec);
      lb.load(B, K, N, (kt + 1) * BK, col0, b_vec);
    }
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; i += 4)
          *reinterpret_cast<float4*>(&ra[wm * TM + i]) =
              *reinterpret_cast<const float4*>(&Asm[cur * BK * LDA + k * LDA + wrow * WM + wm * WSUBM + trow * TM + i]);
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
          *reinterpret_cast<float4*>(&rb[wn * TN + j]) =
              *reinterpret_cast<const float4*>(&Bsm[cur * BK * BN + k * BN + wcol * WN + wn * WSUBN + tcol * TN + j]);
#pragma unroll
      for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += ra[i] * rb[j];
    }
    if (more) {
      la.template store_transposed<LDA>(Asm + (cur ^ 1) * BK * LDA);
      lb.store(Bsm + (cur ^ 1) * BK * BN);
    }
    __syncthreads();
  }

  const bool c_vec = N % 4 == 0;
#pragma unroll
  for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn)
        store_row<TN>(C, M, N, row0 + wrow * WM + wm * WSUBM + trow * TM + i, col0 + wcol * WN + wn * WSUBN + tcol * TN,
                      &acc[wm * TM + i][wn * TN], c_vec);
}

template <class Cfg>
inline void launch_warptile(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  static bool attr_set = false;  // once per shape: allow more than 48 KB of dynamic shared memory
  if (!attr_set) {
    CUDA_CHECK(
        cudaFuncSetAttribute(sgemm_07_warptile<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
    attr_set = true;
  }
  dim3 grid(ceil_div(N, Cfg::BN), ceil_div(M, Cfg::BM));
  sgemm_07_warptile<Cfg><<<grid, Cfg::NT, Cfg::kSmemBytes, s>>>(M, N, K, A, B, C);
  LAUNCH_CHECK();
}

// The step-7 shape: 128x128 block, 4 warps of 64x64, each thread 8x4 in 4 sub-tiles.
using Step7Config = WarpTileConfig<128, 128, 16, 64, 64, 4, 8, 4, 128>;

#ifndef DAY10_KERNELS_ONLY  // (not in step 8g's translation unit: see 08g_ptxas_level.cu)
inline void run_07_warptiling(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  launch_warptile<Step7Config>(M, N, K, A, B, C, s);
}
#endif  // DAY10_KERNELS_ONLY
