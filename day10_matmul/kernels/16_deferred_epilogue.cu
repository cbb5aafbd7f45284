// Step 16: step 12 with the epilogue's stores deferred into the next tile's mainloop (sm_90a).
//
// Step 12's consumers keep the tensor cores waiting at every tile's end: the next tile's wgmmas
// overwrite the accumulator, so they start only after the epilogue has written all of it to
// shared memory (32 KB per consumer, four boxes, each behind two warpgroup barriers). Step 15
// hides that time behind the other consumer's tile, at the price of smaller tiles (more bytes
// per FLOP). Step 16 keeps step 12's 128x256 tile and splits the epilogue instead:
//  1. at the tile's end, each thread converts its 128 fp32 accumulators to 64 bf16 pairs, kept
//     in 64 spare registers (a consumer may hold 232 after setmaxnreg; the accumulator is 128);
//  2. the accumulator is free at once: the next tile's first wgmmas are issued right away;
//  3. while they run (wgmma is asynchronous: the warps are idle until wgmma.wait_group), the
//     consumer writes one 64x64 box of the previous tile into shared memory and hands it to
//     the TMA unit -- one box per k-step, during the next tile's first four k-steps.
// Only the conversion (64 cvt instructions per thread) is left between two tiles' wgmmas.
// The four box-storing k-steps are unrolled (the box number must be a compile-time constant, or
// the bf16 registers would be indexed at run time and land in local memory). The last tile's
// boxes are stored after the loop. Everything else is step 12's.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "16_deferred_epilogue.h"
#include "check.cuh"
#include "hopper.cuh"
#include "12_tma_store_epilogue.cuh"
#include "wgmma_mainloop.cuh"

namespace de {
using namespace ts;

#if HOPPER_ENABLED
// One k-step of a consumer (as ts::consume_tile's body): wait for the stage, issue its four
// wgmmas, wait for the previous k-step's, hand that stage back.
template <int STAGES>
__device__ __forceinline__ void kstep(bf16 (*As)[BM * BK], bf16 (*Bs)[BN * BK], uint64_t* full, uint64_t* empty,
                                      float (&d)[128], int c, int kt, int& it, int t) {
  const int st = it % STAGES;
  hopper::mbar_wait(&full[st], (it / STAGES) & 1);
  hopper::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk)
    hopper::wgmma_m64n256k16(d, hopper::smem_desc(&As[st][c * 64 * BK + kk * 16]), hopper::smem_desc(&Bs[st][kk * 16]),
                             1);
  hopper::wgmma_commit();
  hopper::wgmma_wait1();
  if (kt > 0 && t == 0) hopper::mbar_arrive(&empty[(it - 1) % STAGES]);
  ++it;
}

// The tile's end: wait for the last wgmmas, hand their stage back, pack the accumulator into
// bf16 pairs. p[2j] holds d[4j], d[4j+1] (row r), p[2j+1] holds d[4j+2], d[4j+3] (row r + 8).
__device__ __forceinline__ void finish_tile(const float (&d)[128], uint32_t (&p)[64], uint64_t* empty, int it,
                                            int stages, int t) {
  hopper::wgmma_wait0();
  if (t == 0) hopper::mbar_arrive(&empty[(it - 1) % stages]);
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(d[2 * i], d[2 * i + 1]);
    p[i] = *reinterpret_cast<const uint32_t*>(&v);
  }
}

// Box B (0-3: columns 64B..64B+63 of the consumer's 64x256 part) of a packed tile -> its staging
// slot -> TMA store, as ts::store_tile's loop body; `cut`: a box of this tile was skipped (past
// N or M), after which every box waits for all earlier stores (ts::store_tile says why).
template <int B, int CBOXES>
__device__ __forceinline__ void store_box(const uint32_t (&p)[64], bf16 (*slots)[BOX_ELEMS], const CUtensorMap* tmC,
                                          int row0, int col0, int M, int N, int t, int bar_id, bool& cut) {
  const int bc = col0 + B * BOX;
  if (row0 < M && bc < N) {  // the same for the whole warpgroup
    const int w = t / 32, l = t % 32;
    const int r = 16 * w + l / 4;
    const uint32_t box_s = hopper::smem_u32(slots[B % CBOXES]);
    if (t == 0) {
      if (cut)
        bulk_wait_read<0>();
      else
        bulk_wait_read<CBOXES - 1>();
    }
    warpgroup_sync(bar_id);  // the slot is free
#pragma unroll
    for (int jj = 0; jj < BOX / 8; ++jj) {
      const int j = B * (BOX / 8) + jj;
      const uint32_t off = box_s + r * 128 + ((jj ^ (l / 4)) << 4) + (l % 4) * 4;
      asm volatile("st.shared.b32 [%0], %1;" ::"r"(off), "r"(p[2 * j]) : "memory");
      asm volatile("st.shared.b32 [%0], %1;" ::"r"(off + 8 * 128), "r"(p[2 * j + 1]) : "memory");
    }
    fence_async_shared();
    warpgroup_sync(bar_id);  // the whole box is written
    if (t == 0) {
      tma_store_2d(tmC, slots[B % CBOXES], bc, row0);
      bulk_commit();
    }
  } else {
    cut = true;
  }
  if (B == 3 && cut && t == 0) bulk_wait_read<0>();  // the next tile's count starts clean (ts::store_tile)
}
#endif

template <int STAGES, int CBOXES>
__global__ void __launch_bounds__(NT, 1)
    gemm_deferred(int M, int N, int K, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                  const __grid_constant__ CUtensorMap tmC, int group_m) {
#if HOPPER_ENABLED
  using namespace hopper;
  static_assert(BN / BOX == 4, "four boxes per consumer, stored in the next tile's first four k-steps");
  using S = Smem<STAGES, CBOXES>;
  extern __shared__ uint8_t smem_raw[];
  S& s = *reinterpret_cast<S*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int wgi = threadIdx.x / 128, t = threadIdx.x % 128;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
  const int ktiles = (K + BK - 1) / BK;

  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(&s.full[i], 1);
      mbar_init(&s.empty[i], CONSUMERS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wgi == 0) {  // ---- producer: step 12's, unchanged ----------------------------------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (t == 0) {
      int it = 0;
      for (int u = blockIdx.x; u < tiles; u += gridDim.x) {
        int bm, bn;
        wgm::grouped_coords(u, tiles_m, tiles_n, group_m, bm, bn);
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const int st = it % STAGES;
          if (it >= STAGES) mbar_wait(&s.empty[st], ((it / STAGES) - 1) & 1);
          mbar_expect_tx(&s.full[st], A_BYTES + B_BYTES);
          tma_load_2d(s.A[st], &tmA, &s.full[st], kt * BK, bm * BM);
          tma_load_2d(s.B[st], &tmB, &s.full[st], kt * BK, bn * BN);
        }
      }
    }
  } else {  // ---- consumers: this tile's k-steps, the previous tile's stores in their shadow -------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wgi - 1, bar_id = 1 + c;
    float d[128];
    uint32_t p[64];           // the previous tile, packed to bf16 pairs
    int prow = -1, pcol = 0;  // where it goes (prow < 0: nothing pending)
    int it = 0;
    for (int u = blockIdx.x; u < tiles; u += gridDim.x) {
      int bm, bn;
      wgm::grouped_coords(u, tiles_m, tiles_n, group_m, bm, bn);
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.f;
      bool cut = false;
      // k-steps 0-3, each followed (while its wgmmas run) by one box of the previous tile
#pragma unroll
      for (int kt = 0; kt < 4; ++kt) {
        if (kt < ktiles) kstep<STAGES>(s.A, s.B, s.full, s.empty, d, c, kt, it, t);
        if (prow >= 0) {
          if (kt == 0) store_box<0, CBOXES>(p, s.C[c], &tmC, prow, pcol, M, N, t, bar_id, cut);
          if (kt == 1) store_box<1, CBOXES>(p, s.C[c], &tmC, prow, pcol, M, N, t, bar_id, cut);
          if (kt == 2) store_box<2, CBOXES>(p, s.C[c], &tmC, prow, pcol, M, N, t, bar_id, cut);
          if (kt == 3) store_box<3, CBOXES>(p, s.C[c], &tmC, prow, pcol, M, N, t, bar_id, cut);
        }
      }
      for (int kt = 4; kt < ktiles; ++kt) kstep<STAGES>(s.A, s.B, s.full, s.empty, d, c, kt, it, t);
      finish_tile(d, p, s.empty, it, STAGES, t);
      prow = bm * BM + c * 64, pcol = bn * BN;
    }
    if (prow >= 0) {  // the block's last tile: nothing left to hide its stores under
      bool cut = false;
      store_box<0, CBOXES>(p, s.C[c], &tmC, prow, pcol, M, N, t, bar_id, cut);
      store_box<1, CBOXES>(p, s.C[c], &tmC, prow, pcol, M, N, t, bar_id, cut);
      store_box<2, CBOXES>(p, s.C[c], &tmC, prow, pcol, M, N, t, bar_id, cut);
      store_box<3, CBOXES>(p, s.C[c], &tmC, prow, pcol, M, N, t, bar_id, cut);
    }
    if (t == 0) bulk_wait_all();  // the staging slots must outlive the last TMA store's reads
  }
#endif
}

// ---- host ----------------------------------------------------------------------------------
template <int STAGES, int CBOXES>
void run(int M, int N, int K, const bf16* A, const bf16* Bt, bf16* C, int group_m, cudaStream_t s) {
  constexpr size_t kSmem = smem_bytes<STAGES, CBOXES>();
  static_assert(kSmem <= size_t(kMaxSmem), "stage ring + C staging exceed a block's shared memory");
  auto kernel = gemm_deferred<STAGES, CBOXES>;
  static Maps maps;  // one per configuration
  static int max_blocks = 0;
  maps.update(M, N, K, A, Bt, C, BN);
  if (!max_blocks) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    int dev = 0, sms = 0, per_sm = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, NT, kSmem));
    max_blocks = per_sm * sms;
    if (max_blocks < 1) {
      std::fprintf(stderr, "error: no block of this step-16 configuration fits on this GPU\n");
      std::exit(1);
    }
  }
  const int tiles = ceil_div(M, BM) * ceil_div(N, BN);
  kernel<<<std::min(tiles, max_blocks), NT, kSmem, s>>>(M, N, K, maps.A, maps.B, maps.C, group_m);
  CUDA_CHECK(cudaGetLastError());
}
}  // namespace de

const std::vector<TmaStoreConfig>& deferred_epilogue_configs() {
  // "sS cC" as step 12's. One box is stored per k-step, so two slots leave a whole k-step for a
  // TMA store to read its slot; with one, each box first waits for the previous box's store.
  static const std::vector<TmaStoreConfig> v = {
      {16, "s4 c2", de::run<4, 2>},
      {16, "s4 c1", de::run<4, 1>},
  };
  return v;
}
