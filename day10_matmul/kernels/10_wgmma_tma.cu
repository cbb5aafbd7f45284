// Step 10: Hopper tensor cores at full speed: wgmma fed by TMA through an mbarrier pipeline,
// with warp specialization. Built for sm_90a only (the "a" = arch-specific features).
//
// What changes from step 9, and why each matters on an H100/H200:
//  - TMA (cp.async.bulk.tensor): one thread asks the copy engine for a whole 2D tile; no
//    other thread spends instructions on addresses or loads. The engine also writes the
//    tile in the 128-byte swizzled layout that wgmma reads without bank conflicts, and
//    fills out-of-range elements with zeros (so edge tiles need no special code).
//  - wgmma (warpgroup MMA): 4 warps (128 threads) issue one asynchronous 64x256x16 product
//    that reads both operands straight from shared memory, instead of WMMA's per-warp
//    16x16x16 products that go through registers. In SASS this is HGMMA.
//  - mbarrier pipeline, STAGES deep: `full[s]` completes when TMA has written stage s;
//    `empty[s]` completes when both consumers have finished reading it. The producer runs
//    up to STAGES tiles ahead, so loads and math overlap.
//  - Persistent blocks: one block per SM loops over output tiles, and the pipeline runs on
//    from one tile into the next, so the producer loads tile i+1 during tile i's epilogue.
//  - Warp specialization: warpgroup 0 only produces (one thread issues TMA), warpgroups
//    1 and 2 only consume (each computes 64 rows of the 128x256 block tile). setmaxnreg
//    moves registers from the producer (40) to the consumers (232): a consumer holds a
//    64x256 fp32 accumulator = 128 registers per thread.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "10_wgmma_tma.h"
#include "check.cuh"
#include "hopper.cuh"
#include "wgmma_mainloop.cuh"

namespace wg {
using bf16 = __nv_bfloat16;
using namespace wgm;  // the block tile, the stage ring and the mainloop (wgmma_mainloop.cuh)

#if HOPPER_ENABLED
#define WG_ENABLED 1
#else
#define WG_ENABLED 0
#endif

__global__ void probe_sm90a(int* out) { *out = WG_ENABLED; }

__global__ void __launch_bounds__(NT, 1)
    gemm_10_wgmma(int M, int N, int K, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                  bf16* __restrict__ C, int group_m) {
#if WG_ENABLED
  extern __shared__ uint8_t smem_raw[];
  Smem& s = smem_aligned(smem_raw);
  const int wgi = threadIdx.x / 128, t = threadIdx.x % 128;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
  const int ktiles = (K + BK - 1) / BK;
  init_barriers(s, CONSUMERS);
  __syncthreads();

  // Persistent: one block per SM walks over tiles blockIdx.x, +gridDim.x, ..., in the grouped
  // order; the stage ring runs on from one tile into the next.
  if (wgi == 0) {  // ---- producer warpgroup: one thread issues the TMA loads -------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (t == 0) {
      int it = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int bm, bn;
        grouped_coords(tile, tiles_m, tiles_n, group_m, bm, bn);
        produce_tile(s, &tmA, bm, ktiles, it,
                     [&](int st, int kt) { hopper::tma_load_2d(s.B[st], &tmB, &s.full[st], kt * BK, bn * BN); });
      }
    }
  } else {  // ---- consumer warpgroups: 64 rows of the block tile each -------------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wgi - 1;
    float d[128];
    int it = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int bm, bn;
      grouped_coords(tile, tiles_m, tiles_n, group_m, bm, bn);
      consume_tile(s, d, c, ktiles, it, [&](int st) {
        if (t == 0) hopper::mbar_arrive(&s.empty[st]);
      });
      hopper::store_m64n256_bf16(d, C, M, N, bm * BM + c * 64, bn * BN, t);
    }
  }
#endif
}

}  // namespace wg

bool wgmma_gpu_supported(std::string* why) {
  static int state = -1;  // -1 unknown, 0 no, 1 yes
  static std::string reason;
  if (state < 0) {
    int dev = 0;
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    cudaFuncAttributes fa;
    if (!(p.major == 9 && p.minor == 0)) {
      state = 0;
      reason = std::string("needs an sm_90 GPU (H100/H200) for wgmma/TMA; this is ") + p.name;
    } else if (cudaFuncGetAttributes(&fa, wg::probe_sm90a) != cudaSuccess) {
      cudaGetLastError();
      state = 0;
      reason = "this build has no sm_90a code (rebuild with make ARCH=sm_90)";
    } else {
      int* d = nullptr;
      int h = 0;
      CUDA_CHECK(cudaMalloc(&d, sizeof(int)));
      wg::probe_sm90a<<<1, 1>>>(d);
      LAUNCH_CHECK();
      CUDA_CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaFree(d));
      state = h ? 1 : 0;
      if (!h)
        reason = "this build's kernels were compiled without sm_90a features (rebuild with make ARCH=sm_90)";
      else
        CUDA_CHECK(
            cudaFuncSetAttribute(wg::gemm_10_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, int(wg::kSmemBytes)));
    }
  }
  if (why) *why = reason;
  return state == 1;
}

bool wgmma_shape_supported(int M, int N, int K, std::string* why) {
  if (K % 8 != 0 || N % 8 != 0) {
    if (why)
      *why = "TMA needs 16-byte row strides: K and N must be multiples of 8 (got " + std::to_string(M) + "x" +
             std::to_string(N) + "x" + std::to_string(K) + ")";
    return false;
  }
  return true;
}

static int g_group_m = 16;
void set_wgmma_group_m(int g) { g_group_m = g; }

void run_10_wgmma(int M, int N, int K, const __nv_bfloat16* A, const __nv_bfloat16* Bt, __nv_bfloat16* C,
                  cudaStream_t s) {
  // Tensor maps describe (pointer, shape); rebuild them only when those change.
  static const void *lastA = nullptr, *lastB = nullptr;
  static int lm = -1, ln = -1, lk = -1;
  static CUtensorMap mA, mB;
  if (A != lastA || Bt != lastB || M != lm || N != ln || K != lk) {
    mA = hopper::make_map_bf16(A, M, K, wg::BM);
    mB = hopper::make_map_bf16(Bt, N, K, wg::BN);
    lastA = A, lastB = Bt, lm = M, ln = N, lk = K;
  }
  static int sms = 0;
  if (!sms) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  }
  const int tiles = ceil_div(M, wg::BM) * ceil_div(N, wg::BN);
  wg::gemm_10_wgmma<<<std::min(tiles, sms), wg::NT, wg::kSmemBytes, s>>>(M, N, K, mA, mB, C, g_group_m);
  LAUNCH_CHECK();
}
