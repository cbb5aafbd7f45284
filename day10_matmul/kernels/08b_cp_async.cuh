// Step 8b: step 8's warp tiling, with the tiles copied by cp.async into a ring of STAGES
// shared-memory buffers.
//
// Step 7 stages the next tile in registers: (BM + BN) * BK / NT floats per thread (24 for a
// 128x256x16 tile with 256 threads) are held from the global loads (LDG) until the
// compute loop is done, then stored to shared memory (STS; for A one STS.32 per float, since
// the tile is transposed on the way). With cp.async the copy engine writes shared memory
// itself:
//  - those staging registers are free (step 8's 8x16 register tile keeps the compiler close
//    to its 255-register limit), and no STS instructions compete with the FFMAs for issue
//    slots;
//  - the copies of tiles kt+1 .. kt+STAGES-1 are in flight while tile kt is computed, so
//    with 3-4 stages a slow load has several tiles' worth of time to arrive.
// The compute loop is step 7's, unchanged. The tile shape and the number of stages are
// chosen by measurement, as in step 8.
#pragma once
#include <vector>

#include "07_warptiling.cuh"
#include "08_autotuned.cuh"
#include "cp_async.cuh"

// A step-7 tile shape plus the number of shared-memory stages. Stage s holds A's tile at
// smem + s * kStageFloats (transposed, row stride LDA) and B's tile right after it.
template <class Tile, int STAGES_>
struct PipeConfig : Tile {
  static constexpr int STAGES = STAGES_;
  static constexpr int kStageFloats = Tile::BK * Tile::LDA + Tile::BK * Tile::BN;
  static constexpr int kSmemBytes = STAGES * kStageFloats * 4;
  static_assert(STAGES >= 2, "at least one tile in flight while another is computed");
  static_assert(kSmemBytes * Tile::MINB <= 227 * 1024, "shared memory per SM");
};

// Issues the copies of K-tile `kt` into the stage at `stage` (no wait): the unguarded
// version for full tiles, the guarded one for a last tile that K % BK leaves short.
template <class Cfg>
struct TileCopier {
  ACopier<Cfg::BM, Cfg::BK, Cfg::LDA, Cfg::NT> a;
  BCopier<Cfg::BK, Cfg::BN, Cfg::NT> b;
  int N, K, col0;
  __device__ __forceinline__ TileCopier(const float* A, const float* B, int M, int N_, int K_, int row0, int col0_)
      : a(A, M, K_, row0), b(B, N_, col0_, N_ % 4 == 0), N(N_), K(K_), col0(col0_) {}
  __device__ __forceinline__ void issue(float* stage, int kt) const {
    const int k0 = kt * Cfg::BK;
    float* Bs = stage + Cfg::BK * Cfg::LDA;
    if (k0 + Cfg::BK <= K) {
      a.template issue<false>(stage, k0, K);
      b.template issue<false>(Bs, k0, K, N, col0);
    } else {
      a.template issue<true>(stage, k0, K);
      b.template issue<true>(Bs, k0, K, N, col0);
    }
  }
};

// One thread's fragments for one k: TM rows of A per warp sub-tile (float4 reads of the
// transposed tile) and TN columns of B per sub-tile. a_off/b_off: the thread's first row
// and column inside the block tile.
template <class Cfg>
__device__ __forceinline__ void load_fragments(float (&ra)[Cfg::WMITER * Cfg::TM], float (&rb)[Cfg::WNITER * Cfg::TN],
                                               const float* As, const float* Bs, int k, int a_off, int b_off) {
#pragma unroll
  for (int wm = 0; wm < Cfg::WMITER; ++wm)
#pragma unroll
    for (int i = 0; i < Cfg::TM; i += 4)
      *reinterpret_cast<float4*>(&ra[wm * Cfg::TM + i]) =
          *reinterpret_cast<const float4*>(&As[k * Cfg::LDA + a_off + wm * Cfg::WSUBM + i]);
#pragma unroll
  for (int wn = 0; wn < Cfg::WNITER; ++wn)
#pragma unroll
    for (int j = 0; j < Cfg::TN; j += 4)
      *reinterpret_cast<float4*>(&rb[wn * Cfg::TN + j]) =
          *reinterpret_cast<const float4*>(&Bs[k * Cfg::BN + b_off + wn * Cfg::WSUBN + j]);
}

template <class Cfg>
__device__ __forceinline__ void outer_product(float (&acc)[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN],
                                              const float (&ra)[Cfg::WMITER * Cfg::TM],
                                              const float (&rb)[Cfg::WNITER * Cfg::TN]) {
#pragma unroll
  for (int i = 0; i < Cfg::WMITER * Cfg::TM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::WNITER * Cfg::TN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
}

// The thread's outputs to C: row a_off + wm * WSUBM + i, columns b_off + wn * WSUBN + 0..TN-1.
template <class Cfg>
__device__ __forceinline__ void store_tile(float* __restrict__ C, int M, int N, int row0, int col0, int a_off,
                                           int b_off,
                                           const float (&acc)[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN]) {
  const bool c_vec = N % 4 == 0;
#pragma unroll
  for (int wm = 0; wm < Cfg::WMITER; ++wm)
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
      for (int wn = 0; wn < Cfg::WNITER; ++wn)
        store_row<Cfg::TN>(C, M, N, row0 + a_off + wm * Cfg::WSUBM + i, col0 + b_off + wn * Cfg::WSUBN,
                           &acc[wm * Cfg::TM + i][wn * Cfg::TN], c_vec);
}

// The thread's place in the block tile, as in step 7.
template <class Cfg>
struct ThreadPlace {
  int a_off, b_off;
  __device__ __forceinline__ ThreadPlace() {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wrow = warp / (Cfg::BN / Cfg::WN), wcol = warp % (Cfg::BN / Cfg::WN);
    const int trow = lane / (Cfg::WSUBN / Cfg::TN), tcol = lane % (Cfg::WSUBN / Cfg::TN);
    a_off = wrow * Cfg::WM + trow * Cfg::TM;
    b_off = wcol * Cfg::WN + tcol * Cfg::TN;
  }
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    sgemm_08b_cp_async(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C) {
  constexpr int BK = Cfg::BK, STAGES = Cfg::STAGES;
  extern __shared__ __align__(16) float smem[];
  const ThreadPlace<Cfg> p;
  const int row0 = blockIdx.y * Cfg::BM, col0 = blockIdx.x * Cfg::BN;
  const TileCopier<Cfg> copier(A, B, M, N, K, row0, col0);
  const int ktiles = ceil_div(K, BK);
  float acc[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN] = {{0.f}};
  float ra[Cfg::WMITER * Cfg::TM], rb[Cfg::WNITER * Cfg::TN];

  // Prologue: tiles 0 .. STAGES-2 in flight, one commit group per tile (empty past the end,
  // so that group g is always tile g and the wait count below is the same everywhere).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) copier.issue(smem + s * Cfg::kStageFloats, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    // Groups committed so far: tiles 0 .. kt+STAGES-2. Tile kt is complete once at most
    // STAGES-2 groups are pending; the barrier makes all threads' copies visible, and it also
    // means every thread has finished computing tile kt-1, whose stage is refilled next.
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < ktiles) copier.issue(smem + (next % STAGES) * Cfg::kStageFloats, next);
    cp_async_commit();
    const float* As = smem + (kt % STAGES) * Cfg::kStageFloats;
    const float* Bs = As + BK * Cfg::LDA;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      load_fragments<Cfg>(ra, rb, As, Bs, k, p.a_off, p.b_off);
      outer_product<Cfg>(acc, ra, rb);
    }
  }
  store_tile<Cfg>(C, M, N, row0, col0, p.a_off, p.b_off, acc);
}

// Sets the dynamic shared-memory limit of `kernel` once (per instantiation), then launches it
// on the grid of Cfg's block tiles.
template <class Cfg, class Kern>
inline void launch_pipelined(Kern kernel, bool& attr_set, int M, int N, int K, const float* A, const float* B, float* C,
                             cudaStream_t s) {
  if (!attr_set) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
    attr_set = true;
  }
  dim3 grid(ceil_div(N, Cfg::BN), ceil_div(M, Cfg::BM));
  kernel<<<grid, Cfg::NT, Cfg::kSmemBytes, s>>>(M, N, K, A, B, C);
  LAUNCH_CHECK();
}

struct CpAsyncLaunch {
  template <class Cfg>
  static void run(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
    static bool attr_set = false;
    launch_pipelined<Cfg>(sgemm_08b_cp_async<Cfg>, attr_set, M, N, K, A, B, C, s);
  }
  template <class Cfg>
  static cudaFuncAttributes attributes() {
    cudaFuncAttributes a;
    CUDA_CHECK(cudaFuncGetAttributes(&a, sgemm_08b_cp_async<Cfg>));
    return a;
  }
};

// Shapes for steps 8b and 8c: step 8's best shapes (8x16 outputs per thread, one block of 8
// warps per SM), a 2-blocks-per-SM shape (8x8 per thread, 128 registers), BK = 32 (half the
// barriers per FMA) and BK = 8 (half the shared memory and copies per stage, twice the barriers).
// Then the other side of the design space: 16 warps per SM (4 per scheduler, so that while some
// wait on shared memory or a barrier others issue FFMAs) at 128 registers per thread and 8x8
// outputs each, as two 128x128 blocks per SM (the classic SGEMM layout) or one 256x128 block of
// 512 threads; and the BK = 32 winner shape with a deeper ring, transposed, and with step 8's
// 8x8 sub-tiles.
// Last, the BK = 32 winners (and step 8c's BK = 16 one) with each thread's 8 rows as two
// patches of 4 rows, 32 rows apart (TM = 4, WMITER = 2), instead of 8 consecutive rows. With
// TM = 8 the 8 thread rows of a warp read A at float4 addresses 32 bytes apart: they span 256
// bytes, so thread rows 0 and 4 hit the same banks and an A read needs two shared-memory
// wavefronts. With TM = 4 they read 8 consecutive float4 (128 bytes, each bank once): one
// wavefront. Per k that is 6 wavefronts instead of 8 (B's reads already take one each).
// s = shared-memory stages.
//                                        BM   BN  BK  WM  WN WNITER TM TN  NT MINB  STAGES
using PipeA = PipeConfig<WarpTileConfig<128, 256, 16, 64, 64, 4, 8, 4, 256>, 3>;
using PipeB = PipeConfig<WarpTileConfig<128, 256, 16, 64, 64, 4, 8, 4, 256>, 4>;
using PipeC = PipeConfig<WarpTileConfig<128, 256, 16, 64, 64, 2, 8, 8, 256>, 3>;
using PipeD = PipeConfig<WarpTileConfig<256, 128, 16, 64, 64, 4, 8, 4, 256>, 3>;
using PipeE = PipeConfig<WarpTileConfig<128, 128, 16, 64, 64, 4, 8, 4, 128>, 4>;
using PipeF = PipeConfig<WarpTileConfig<128, 128, 16, 32, 64, 2, 8, 4, 256, 2>, 3>;
using PipeG = PipeConfig<WarpTileConfig<128, 256, 32, 64, 64, 4, 8, 4, 256>, 2>;
using PipeH = PipeConfig<WarpTileConfig<128, 256, 32, 64, 64, 4, 8, 4, 256>, 3>;
using PipeI = PipeConfig<WarpTileConfig<128, 256, 8, 64, 64, 4, 8, 4, 256>, 3>;
using PipeJ = PipeConfig<WarpTileConfig<128, 256, 8, 64, 64, 4, 8, 4, 256>, 4>;
using PipeK = PipeConfig<WarpTileConfig<128, 256, 32, 64, 64, 4, 8, 4, 256>, 4>;
using PipeL = PipeConfig<WarpTileConfig<256, 128, 32, 64, 64, 4, 8, 4, 256>, 3>;
using PipeM = PipeConfig<WarpTileConfig<128, 128, 8, 64, 32, 2, 8, 4, 256, 2>, 4>;
using PipeN = PipeConfig<WarpTileConfig<128, 128, 16, 64, 32, 1, 8, 8, 256, 2>, 3>;
using PipeO = PipeConfig<WarpTileConfig<256, 128, 16, 64, 32, 1, 8, 8, 512>, 3>;
using PipeP = PipeConfig<WarpTileConfig<128, 256, 32, 64, 64, 2, 8, 8, 256>, 3>;
using PipeQ = PipeConfig<WarpTileConfig<128, 256, 32, 64, 64, 2, 4, 8, 256>, 3>;
using PipeR = PipeConfig<WarpTileConfig<128, 256, 32, 64, 64, 4, 4, 4, 256>, 3>;
using PipeS = PipeConfig<WarpTileConfig<128, 256, 16, 64, 64, 4, 4, 4, 256>, 4>;

// The candidates of a pipelined step, named like step 8's plus the stage count. Launch::run<Cfg>
// launches that step's kernel with shape Cfg; Launch::attributes<Cfg> reads its resources.
template <class Launch>
inline std::vector<TunedKernel> pipe_candidates() {
  return {
      {"128x256x16 w64x64 t8x4 256thr s3", Launch::template run<PipeA>, Launch::template attributes<PipeA>},
      {"128x256x16 w64x64 t8x4 256thr s4", Launch::template run<PipeB>, Launch::template attributes<PipeB>},
      {"128x256x16 w64x64 t8x8 256thr s3", Launch::template run<PipeC>, Launch::template attributes<PipeC>},
      {"256x128x16 w64x64 t8x4 256thr s3", Launch::template run<PipeD>, Launch::template attributes<PipeD>},
      {"128x128x16 w64x64 t8x4 128thr s4", Launch::template run<PipeE>, Launch::template attributes<PipeE>},
      {"128x128x16 w32x64 t8x4 256thr 2blk s3", Launch::template run<PipeF>, Launch::template attributes<PipeF>},
      {"128x256x32 w64x64 t8x4 256thr s2", Launch::template run<PipeG>, Launch::template attributes<PipeG>},
      {"128x256x32 w64x64 t8x4 256thr s3", Launch::template run<PipeH>, Launch::template attributes<PipeH>},
      {"128x256x8 w64x64 t8x4 256thr s3", Launch::template run<PipeI>, Launch::template attributes<PipeI>},
      {"128x256x8 w64x64 t8x4 256thr s4", Launch::template run<PipeJ>, Launch::template attributes<PipeJ>},
      {"128x256x32 w64x64 t8x4 256thr s4", Launch::template run<PipeK>, Launch::template attributes<PipeK>},
      {"256x128x32 w64x64 t8x4 256thr s3", Launch::template run<PipeL>, Launch::template attributes<PipeL>},
      {"128x128x8 w64x32 t8x4 256thr 2blk s4", Launch::template run<PipeM>, Launch::template attributes<PipeM>},
      {"128x128x16 w64x32 t8x8 256thr 2blk s3", Launch::template run<PipeN>, Launch::template attributes<PipeN>},
      {"256x128x16 w64x32 t8x8 512thr s3", Launch::template run<PipeO>, Launch::template attributes<PipeO>},
      {"128x256x32 w64x64 t8x8 256thr s3", Launch::template run<PipeP>, Launch::template attributes<PipeP>},
      {"128x256x32 w64x64 t4x8 256thr s3", Launch::template run<PipeQ>, Launch::template attributes<PipeQ>},
      {"128x256x32 w64x64 t4x4 256thr s3", Launch::template run<PipeR>, Launch::template attributes<PipeR>},
      {"128x256x16 w64x64 t4x4 256thr s4", Launch::template run<PipeS>, Launch::template attributes<PipeS>},
  };
}

#ifndef DAY10_KERNELS_ONLY  // (not in step 8g's translation unit: see 08g_ptxas_level.cu)
inline const std::vector<TunedKernel>& cp_async_candidates() {
  static const std::vector<TunedKernel> k = pipe_candidates<CpAsyncLaunch>();
  return k;
}
#endif  // DAY10_KERNELS_ONLY
