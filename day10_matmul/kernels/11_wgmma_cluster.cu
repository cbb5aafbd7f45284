// Step 11: step 10 plus thread-block clusters and TMA multicast (sm_90a).
//
// Two CTAs of a cluster compute vertically adjacent 128x256 tiles of C: the same 256 columns
// of B, different rows of A. In step 10 each of them loaded that B tile (32 KB per k-step)
// on its own; here each loads one half and the TMA unit *multicasts* it into the shared
// memory of both. Per k-step a CTA now pulls 16 KB of A + 16 KB of B from L2 instead of
// 16 + 32: a third less L2 -> SM traffic for the same math.
//
// What multicast costs in synchronization: CTA r's stage s is written by its own TMA *and*
// by its partner's, so a stage may be refilled only when the consumers of *both* CTAs are
// done with it. Each `empty[s]` therefore counts 4 arrivals (2 consumer warpgroups x 2
// CTAs), and consumers arrive on their partner's barrier through its cluster address
// (mapa + mbarrier.arrive.shared::cluster). The CTAs also meet at a cluster barrier after
// initializing their mbarriers (before anyone multicasts into them) and before exiting
// (so no CTA leaves while its partner may still write into its shared memory).
#include <algorithm>

#include "10_wgmma_tma.h"
#include "check.cuh"
#include "hopper.cuh"
#include "wgmma_mainloop.cuh"

namespace wc {
using bf16 = __nv_bfloat16;
using namespace wgm;  // step 10's block tile, stage ring and mainloop (wgmma_mainloop.cuh)
constexpr int CLUSTER = 2;

__global__ void __launch_bounds__(NT, 1)
    gemm_11_cluster(int M, int N, int K, const __grid_constant__ CUtensorMap tmA,
                    const __grid_constant__ CUtensorMap tmB, bf16* __restrict__ C, int group_m) {
#if HOPPER_ENABLED
  using namespace hopper;
  extern __shared__ uint8_t smem_raw[];
  Smem& s = smem_aligned(smem_raw);
  const int wgi = threadIdx.x / 128, t = threadIdx.x % 128;
  const uint32_t rank = cluster_ctarank();
  const int cluster = blockIdx.x / CLUSTER, nclusters = gridDim.x / CLUSTER;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int pairs_m = (tiles_m + 1) / 2, pairs = pairs_m * tiles_n;  // a "pair" = the cluster's 256x256 of C
  const int ktiles = (K + BK - 1) / BK;

  init_barriers(s, CONSUMERS * CLUSTER);  // a stage is free when both CTAs' consumers are done
  cluster_sync();                         // both CTAs' barriers exist before either multicasts into them

  // Same grouped order as step 10, over pairs of tile rows.
  if (wgi == 0) {  // ---- producer ----------------------------------------------------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (t == 0) {
      int it = 0;
      for (int q = cluster; q < pairs; q += nclusters) {
        int pm, bn;
        grouped_coords(q, pairs_m, tiles_n, group_m, pm, bn);
        const int bm = 2 * pm + int(rank);  // may be one past the last tile row: TMA reads zeros
        // The full barrier expects our A tile and *both* halves of B (ours and the partner's
        // multicast): A_BYTES + B_BYTES, as in step 10.
        produce_tile(s, &tmA, bm, ktiles, it, [&](int st, int kt) {
          tma_load_2d_multicast(&s.B[st][rank * (BN / 2) * BK], &tmB, &s.full[st], kt * BK,
                                bn * BN + int(rank) * (BN / 2), uint16_t((1 << CLUSTER) - 1));
        });
      }
    }
  } else {  // ---- consumers ------------------------------------------------------------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wgi - 1;
    float d[128];
    int it = 0;
    auto release = [&](int st) {  // tell both CTAs' producers that we are done with stage st
      if (t == 0)
        mbar_arrive(&s.empty[st]);  // ours
      else if (t == 32)
        mbar_arrive_cluster(&s.empty[st], uint32_t(rank ^ 1));  // the partner's (another warp)
    };
    for (int q = cluster; q < pairs; q += nclusters) {
      int pm, bn;
      grouped_coords(q, pairs_m, tiles_n, group_m, pm, bn);
      const int bm = 2 * pm + int(rank);
      consume_tile(s, d, c, ktiles, it, release);
      store_m64n256_bf16(d, C, M, N, bm * BM + c * 64, bn * BN, t);
    }
  }
  cluster_sync();  // no CTA exits while its partner may still multicast into it or arrive on its barriers
#endif
}
}  // namespace wc

void run_11_wgmma_cluster(int M, int N, int K, const __nv_bfloat16* A, const __nv_bfloat16* Bt, __nv_bfloat16* C,
                          int group_m, cudaStream_t s) {
  static const void *lastA = nullptr, *lastB = nullptr;
  static int lm = -1, ln = -1, lk = -1, max_clusters = 0;
  static CUtensorMap mA, mB;
  if (A != lastA || Bt != lastB || M != lm || N != ln || K != lk) {
    mA = hopper::make_map_bf16(A, M, K, wc::BM);
    mB = hopper::make_map_bf16(Bt, N, K, wc::BN / 2);  // each CTA loads half of the B tile
    lastA = A, lastB = Bt, lm = M, ln = N, lk = K;
  }
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = wc::CLUSTER;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(wc::NT);
  cfg.dynamicSmemBytes = wc::kSmemBytes;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (!max_clusters) {
    CUDA_CHECK(
        cudaFuncSetAttribute(wc::gemm_11_cluster, cudaFuncAttributeMaxDynamicSharedMemorySize, int(wc::kSmemBytes)));
    cfg.gridDim = dim3(2 * 66);
    // How many 2-CTA clusters fit on the GPU at once (GPCs decide, not only the SM count).
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_clusters, wc::gemm_11_cluster, &cfg));
    if (max_clusters < 1) {
      std::fprintf(stderr, "error: no 2-CTA cluster of step 11 fits on this GPU\n");
      std::exit(1);
    }
    std::printf("  (step 11: %d two-CTA clusters fit on the GPU at once)\n", max_clusters);
  }
  const int pairs = ceil_div(ceil_div(M, wc::BM), 2) * ceil_div(N, wc::BN);
  cfg.gridDim = dim3(wc::CLUSTER * std::min(pairs, max_clusters));
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, wc::gemm_11_cluster, M, N, K, mA, mB, C, group_m));
}
