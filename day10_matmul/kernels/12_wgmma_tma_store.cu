// Steps 12 and 13: the epilogue through shared memory and TMA stores (sm_90a).
//
// Step 10 writes each consumer's 64x256 fp32 accumulator straight from registers to C: 64
// 4-byte stores per thread, each warp instruction touching 8 rows of C with 16 bytes per row.
// The next tile's wgmmas overwrite those registers, so they start only once every store has
// taken its data: the tensor cores wait at each tile's end. The smaller K, the larger that
// slice of a tile (64 k-steps per tile at K = 4096, 128 at 8192): the hypothesis this step
// tests for why step 10 trails cuBLAS more at 4096 than at 8192.
//
// Step 12 hands the stores to the copy engine instead:
//  1. each consumer converts its accumulator to bf16 and writes it into shared memory, one
//     64x64 box (8 KB) at a time, in the 128-byte swizzled layout (16-byte chunk index XOR
//     row % 8) -- the accumulator layout then hits all 32 banks once per warp store;
//  2. fence.proxy.async makes those ordinary stores visible to the copy engine, a named
//     barrier (the consumer's 128 threads only) says the box is complete, and one thread
//     issues a TMA store of the box (cp.async.bulk.tensor ... global.shared::cta), which also
//     clips rows and columns past M and N;
//  3. the consumer goes straight on to the next tile's wgmmas. It waits for a TMA store only
//     when it needs that staging slot again (cp.async.bulk.wait_group.read).
// The staging buffer costs shared memory that the stage ring wants too; the configurations
// trade the two: 4 stages with C staged two boxes at a time (the first half of the tile must
// be read out before the second half is written), or 3 stages with the whole 128x256 tile
// staged (no wait inside an epilogue).
//
// Step 13 is step 12 plus step 11's idea: 2-CTA clusters that share the B tile by multicast.
// Everything else is step 10's design (persistent blocks, grouped tile order, raw mbarrier parity
// waits, a producer warpgroup and two consumers with setmaxnreg, 128x256 block tiles).
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "12_wgmma_tma_store.h"
#include "check.cuh"
#include "hopper.cuh"
#include "12_tma_store_epilogue.cuh"
#include "wgmma_mainloop.cuh"

namespace ts {
// CLUSTER 1: step 10's kernel with the TMA-store epilogue (step 12). CLUSTER 2: two CTAs
// compute vertically adjacent tiles and each multicasts half of the shared B tile (step 13,
// as step 11: every `empty` barrier counts both CTAs' consumers).
template <int STAGES, int CBOXES, int CLUSTER>
__global__ void __launch_bounds__(NT, 1)
    gemm_tma_store(int M, int N, int K, const __grid_constant__ CUtensorMap tmA,
                   const __grid_constant__ CUtensorMap tmB, const __grid_constant__ CUtensorMap tmC, int group_m) {
#if HOPPER_ENABLED
  using namespace hopper;
  using S = Smem<STAGES, CBOXES>;
  extern __shared__ uint8_t smem_raw[];
  S& s = *reinterpret_cast<S*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int wgi = threadIdx.x / 128, t = threadIdx.x % 128;
  const uint32_t rank = CLUSTER > 1 ? cluster_ctarank() : 0;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  // A "unit" is what one cluster computes: CLUSTER vertically adjacent tiles of one column.
  const int units_m = (tiles_m + CLUSTER - 1) / CLUSTER, units = units_m * tiles_n;
  const int first = blockIdx.x / CLUSTER, stride = gridDim.x / CLUSTER;
  const int ktiles = (K + BK - 1) / BK;

  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(&s.full[i], 1);
      mbar_init(&s.empty[i], CONSUMERS * CLUSTER);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (CLUSTER > 1)
    cluster_sync();  // every CTA's barriers exist before anyone multicasts into them
  else
    __syncthreads();

  if (wgi == 0) {  // ---- producer: one thread issues the TMA loads ------------------------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (t == 0) {
      int it = 0;
      for (int u = first; u < units; u += stride) {
        int um, bn;
        wgm::grouped_coords(u, units_m, tiles_n, group_m, um, bn);
        const int bm = um * CLUSTER + int(rank);  // may be one past the last tile row: TMA reads zeros
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const int st = it % STAGES;
          if (it >= STAGES) mbar_wait(&s.empty[st], ((it / STAGES) - 1) & 1);
          mbar_expect_tx(&s.full[st], A_BYTES + B_BYTES);
          tma_load_2d(s.A[st], &tmA, &s.full[st], kt * BK, bm * BM);
          if constexpr (CLUSTER == 1)
            tma_load_2d(s.B[st], &tmB, &s.full[st], kt * BK, bn * BN);
          else
            tma_load_2d_multicast(&s.B[st][rank * (BN / 2) * BK], &tmB, &s.full[st], kt * BK,
                                  bn * BN + int(rank) * (BN / 2), uint16_t((1 << CLUSTER) - 1));
        }
      }
    }
  } else {  // ---- consumers: 64 rows of the block tile each, then the TMA-store epilogue -------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wgi - 1;
    float d[128];
    int it = 0;
    auto release = [&](int st) {
      if (t == 0) mbar_arrive(&s.empty[st]);
      if constexpr (CLUSTER > 1)
        if (t == 32) mbar_arrive_cluster(&s.empty[st], rank ^ 1u);  // the partner's barrier (another warp)
    };
    for (int u = first; u < units; u += stride) {
      int um, bn;
      wgm::grouped_coords(u, units_m, tiles_n, group_m, um, bn);
      const int bm = um * CLUSTER + int(rank);
      consume_tile<STAGES>(s.A, s.B, s.full, d, c, ktiles, it, release);
      const int row0 = bm * BM + c * 64;
      if (row0 < M)  // the same for the whole warpgroup; rows past M (a cluster's spare tile) have nothing to store
        store_tile<CBOXES>(d, s.C[c], &tmC, row0, bn * BN, M, N, t, 1 + c);
    }
    if (t == 0) bulk_wait_all();  // the staging buffer must outlive the last TMA store's reads
  }
  if constexpr (CLUSTER > 1) cluster_sync();  // no CTA exits while its partner may still write into it
#endif
}

// ---- host ----------------------------------------------------------------------------------
template <int STAGES, int CBOXES, int CLUSTER>
void run(int M, int N, int K, const bf16* A, const bf16* Bt, bf16* C, int group_m, cudaStream_t s) {
  constexpr size_t kSmem = smem_bytes<STAGES, CBOXES>();
  static_assert(kSmem <= size_t(kMaxSmem), "stage ring + C staging exceed a block's shared memory");
  auto kernel = gemm_tma_store<STAGES, CBOXES, CLUSTER>;
  static Maps maps;  // one per configuration: each keeps its own tensor maps
  static int max_units = 0;
  maps.update(M, N, K, A, Bt, C, BN / CLUSTER);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CLUSTER;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(NT);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = CLUSTER > 1 ? 1 : 0;  // step 12 is an ordinary launch
  if (!max_units) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    int dev = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if constexpr (CLUSTER == 1) {  // one block per SM (its shared memory allows no more)
      int per_sm = 0;
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, NT, kSmem));
      max_units = per_sm * sms;
    } else {  // how many clusters fit at once: GPCs decide, not only the SM count
      cfg.gridDim = dim3(CLUSTER * (sms / CLUSTER));
      CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_units, kernel, &cfg));
    }
    if (max_units < 1) {
      std::fprintf(stderr, "error: no block of this step-12/13 configuration fits on this GPU\n");
      std::exit(1);
    }
  }
  const int units = ceil_div(ceil_div(M, BM), CLUSTER) * ceil_div(N, BN);
  cfg.gridDim = dim3(CLUSTER * std::min(units, max_units));
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, M, N, K, maps.A, maps.B, maps.C, group_m));
}
}  // namespace ts

const std::vector<TmaStoreConfig>& tma_store_configs() {
  // "sS cC": S pipeline stages, C staged C boxes (of 4) at a time per consumer.
  static const std::vector<TmaStoreConfig> v = {
      {12, "s4 c2", ts::run<4, 2, 1>},
      {12, "s3 c4", ts::run<3, 4, 1>},
      {13, "s4 c2", ts::run<4, 2, 2>},
      {13, "s3 c4", ts::run<3, 4, 2>},
  };
  return v;
}
