// Step 15: step 12 with ping-pong consumers (sm_90a).
//
// In step 12 both consumer warpgroups work on the same 128x256 tile, so they reach its end
// together and both run the epilogue (accumulator -> bf16 -> swizzled shared memory -> TMA
// store) while nothing feeds the tensor cores: the next tile's wgmmas need the registers the
// epilogue is still reading. At n = 4096 a tile has only 64 k-steps, so that pause is a larger
// slice of each tile than at 8192.
//
// Step 15 gives each consumer whole tiles of its own, 64x256 or 128x128 (either is the 128
// accumulator registers a consumer already has): consumer 0 takes the block's tiles 0, 2, 4, ..., consumer 1 tiles
// 1, 3, 5, .... They take turns on the tensor cores: a consumer starts a tile's wgmmas only
// after the other has issued all of its previous tile's, then runs its epilogue while the other
// computes. With two tiles in flight per block, the epilogue is hidden behind the other
// consumer's mainloop instead of stopping the block. The turn is a pair of named barriers
// (bar.arrive by the consumer that finished, bar.sync by the one that starts).
//
// The turn-taking is also what keeps the mbarrier parity waits sound: a consumer waits on a
// stage's `full` barrier for a phase that the producer will fill next, never for one two fills
// ahead (which a parity wait cannot tell apart from a finished one). Tile n's k-steps are the
// block's k-steps n*K/64 ..; when consumer c starts tile n, every k-step before it has already
// been waited on (by the other consumer in tile n-1, or by itself before), so each stage's
// `full` barrier is at most one phase behind what it waits for.
//
// The cost: a consumer's tile is half of step 12's block tile, so every FLOP needs more bytes
// from L2: per k-step, a 64x256 tile loads A 8 KB + B 32 KB and a 128x128 one 16 + 16 KB, for
// half the FLOPs of step 12's 16 + 32 KB. Which shape loses less is measured, not assumed: the
// configurations carry both (a 128x128 tile issues two wgmma m64n128 per 16 of K, one per
// 64-row half, wgmma_m64n128k16.inc). Stages are 40 or 32 KB: 4-6 fit beside the C staging.
// Everything else is step 12's (persistent blocks, grouped tile order, one producer thread,
// setmaxnreg, the TMA-store epilogue of 12_tma_store_epilogue.cuh).
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "15_pingpong.h"
#include "check.cuh"
#include "hopper.cuh"
#include "12_tma_store_epilogue.cuh"
#include "wgmma_mainloop.cuh"

namespace pp {
using bf16 = __nv_bfloat16;
using ts::BOX;
using ts::BOX_ELEMS;
using wgm::BK;
using wgm::NT;  // a producer warpgroup and two consumers, as in step 12

// A consumer's tile is TM x TN: 64 x 256 or 128 x 128.
template <int TM, int TN, int STAGES, int CBOXES>
struct Smem {
  alignas(1024) bf16 A[STAGES][TM * BK];  // 8 or 16 KB per stage: multiples of the swizzle's 1024 bytes
  alignas(1024) bf16 B[STAGES][TN * BK];
  alignas(1024) bf16 C[2][CBOXES][BOX_ELEMS];  // each consumer's staging slots
  alignas(8) uint64_t full[STAGES];
  alignas(8) uint64_t empty[STAGES];  // one consumer reads a stage: one arrival frees it
};
template <int TM, int TN, int STAGES, int CBOXES>
constexpr size_t smem_bytes() {
  return sizeof(Smem<TM, TN, STAGES, CBOXES>) + 1024;  // + slack to align the dynamic base
}

#if HOPPER_ENABLED
constexpr int ORDER_BAR = 3;  // named barriers 3 and 4: the turn of consumer 0 and 1 (1 and 2: the epilogue's)
// The 256 threads of both consumers meet at barrier `id`: the one that arrives goes on at once.
__device__ __forceinline__ void turn_wait(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void turn_pass(int id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }
#include "wgmma_m64n128k16.inc"

// One k-step's wgmmas of a TM x TN tile (four 16-deep slices of the stage).
template <int TM, int TN>
__device__ __forceinline__ void tile_kstep(float (&d)[128], const bf16* As, const bf16* Bs) {
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    const uint64_t db = hopper::smem_desc(&Bs[kk * 16]);
    if constexpr (TN == 256) {
      hopper::wgmma_m64n256k16(d, hopper::smem_desc(&As[kk * 16]), db, 1);
    } else {  // 128 x 128: rows 0-63 into d[0..63], rows 64-127 (8 KB further into the stage) into d[64..127]
      wgmma_m64n128k16<0>(d, hopper::smem_desc(&As[kk * 16]), db, 1);
      wgmma_m64n128k16<64>(d, hopper::smem_desc(&As[64 * BK + kk * 16]), db, 1);
    }
  }
}
#endif

template <int TM, int TN, int STAGES, int CBOXES>
__global__ void __launch_bounds__(NT, 1)
    gemm_pingpong(int M, int N, int K, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                  const __grid_constant__ CUtensorMap tmC, int group_m) {
#if HOPPER_ENABLED
  using namespace hopper;
  static_assert((TM == 64 && TN == 256) || (TM == 128 && TN == 128), "128 accumulator registers per consumer");
  constexpr int A_BYTES = TM * BK * 2, B_BYTES = TN * BK * 2;
  using S = Smem<TM, TN, STAGES, CBOXES>;
  extern __shared__ uint8_t smem_raw[];
  S& s = *reinterpret_cast<S*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int wgi = threadIdx.x / 128, t = threadIdx.x % 128;
  const int tiles_m = (M + TM - 1) / TM, tiles_n = (N + TN - 1) / TN, tiles = tiles_m * tiles_n;
  const int ktiles = (K + BK - 1) / BK;

  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(&s.full[i], 1);
      mbar_init(&s.empty[i], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wgi == 0) {  // ---- producer: one thread loads the block's tiles in order, k-step by k-step ----
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
          tma_load_2d(s.A[st], &tmA, &s.full[st], kt * BK, bm * TM);
          tma_load_2d(s.B[st], &tmB, &s.full[st], kt * BK, bn * TN);
        }
      }
    }
  } else {  // ---- consumers: every other tile of the block each, taking turns on the tensor cores ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wgi - 1;
    float d[128];
    int n = c;  // the tile's place in the block's sequence (the producer's order)
    for (int u = blockIdx.x + c * int(gridDim.x); u < tiles; u += 2 * int(gridDim.x), n += 2) {
      int bm, bn;
      wgm::grouped_coords(u, tiles_m, tiles_n, group_m, bm, bn);
      if (n > 0) turn_wait(ORDER_BAR + c);  // the other consumer has issued tile n-1's last wgmmas
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.f;
      int it = n * ktiles;  // the block's k-step where tile n starts
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int st = it % STAGES;
        mbar_wait(&s.full[st], (it / STAGES) & 1);
        wgmma_fence();
        tile_kstep<TM, TN>(d, s.A[st], s.B[st]);
        wgmma_commit();
        wgmma_wait1();  // the previous k-step's wgmmas are done: its stage can be refilled
        if (kt > 0 && t == 0) mbar_arrive(&s.empty[(it - 1) % STAGES]);
      }
      // Every wgmma of this tile is issued: the other consumer may start tile n+1 (if the block
      // has one) while ours finish and our epilogue runs.
      if (u + int(gridDim.x) < tiles) turn_pass(ORDER_BAR + (1 - c));
      wgmma_wait0();
      if (t == 0) mbar_arrive(&s.empty[(it - 1) % STAGES]);  // ktiles >= 1 (K >= 8)
      ts::store_tile<CBOXES, TN / BOX>(d, s.C[c], &tmC, bm * TM, bn * TN, M, N, t, 1 + c);
    }
    if (t == 0) ts::bulk_wait_all();  // the staging slots must outlive the last TMA store's reads
  }
#endif
}

// ---- host ----------------------------------------------------------------------------------
struct Maps {
  const void *a = nullptr, *b = nullptr, *c = nullptr;
  int m = -1, n = -1, k = -1;
  CUtensorMap A, B, C;
  void update(int M, int N, int K, const bf16* pa, const bf16* pb, bf16* pc, int tm, int tn) {
    if (pa == a && pb == b && pc == c && M == m && N == n && K == k) return;
    A = hopper::make_map_bf16(pa, M, K, tm);  // boxes of a consumer's tile
    B = hopper::make_map_bf16(pb, N, K, tn);
    C = hopper::make_map_bf16(pc, M, N, BOX);
    a = pa, b = pb, c = pc, m = M, n = N, k = K;
  }
};

template <int TM, int TN, int STAGES, int CBOXES>
void run(int M, int N, int K, const bf16* A, const bf16* Bt, bf16* C, int group_m, cudaStream_t s) {
  constexpr size_t kSmem = smem_bytes<TM, TN, STAGES, CBOXES>();
  static_assert(kSmem <= size_t(ts::kMaxSmem), "stage ring + C staging exceed a block's shared memory");
  auto kernel = gemm_pingpong<TM, TN, STAGES, CBOXES>;
  static Maps maps;  // one per configuration
  static int max_blocks = 0;
  maps.update(M, N, K, A, Bt, C, TM, TN);
  if (!max_blocks) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    int dev = 0, sms = 0, per_sm = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, NT, kSmem));
    max_blocks = per_sm * sms;
    if (max_blocks < 1) {
      std::fprintf(stderr, "error: no block of this step-15 configuration fits on this GPU\n");
      std::exit(1);
    }
  }
  const int tiles = ((M + TM - 1) / TM) * ((N + TN - 1) / TN);
  kernel<<<std::min(tiles, max_blocks), NT, kSmem, s>>>(M, N, K, maps.A, maps.B, maps.C, group_m);
  CUDA_CHECK(cudaGetLastError());
}
}  // namespace pp

const std::vector<TmaStoreConfig>& pingpong_configs() {
  // "TMxTN sS cC": a consumer's tile, S stages (40 KB for 64x256, 32 KB for 128x128), C boxes
  // (of 4) staged at a time per consumer. With the epilogue hidden behind the other consumer's
  // mainloop, fewer C boxes (more waits inside an epilogue) may cost little and buy a stage.
  static const std::vector<TmaStoreConfig> v = {
      {15, "64x256 s4 c2", pp::run<64, 256, 4, 2>},   {15, "64x256 s5 c1", pp::run<64, 256, 5, 1>},
      {15, "64x256 s4 c4", pp::run<64, 256, 4, 4>},   {15, "128x128 s6 c2", pp::run<128, 128, 6, 2>},
      {15, "128x128 s5 c4", pp::run<128, 128, 5, 4>},
  };
  return v;
}
