// Step 14: stream-K for the last wave (sm_90a).
//
// Steps 10-13 give every persistent block whole 128x256 tiles. At 4096 that is 512 tiles on
// 132 SMs: 116 blocks compute 4 tiles and 16 compute 3, so for the last quarter of the run 16
// SMs idle (3.88 waves rounded up to 4). At 2048 it is 128 tiles: one wave with 4 SMs idle,
// and every SM fills and drains its pipeline for a single tile. Whatever the kernel does per
// k-step, the run lasts as long as the busiest SM's k-steps.
//
// Step 14 keeps step 12's kernel (stage ring, TMA-store epilogue, [s4 c2]) and changes only
// who computes what ("data-parallel + stream-K", as CUTLASS's stream-K scheduler):
//  1. The first tiles, in whole waves, are computed as before: block b takes tiles b, b + G, ...
//  2. The k-steps of the remaining tiles (the partial wave, optionally plus one whole wave)
//     are laid end to end, tile after tile, and cut into G equal ranges, one per block. A
//     block's range covers the end of one tile, maybe some whole tiles, and the start of
//     another: every SM now does the same number of k-steps, give or take one.
//  3. A tile split between blocks is summed in fp32 through global memory. The block that
//     computed the tile's first k-step (k0 = 0) owns it: it computes that piece as the LAST
//     piece of its range, while every other block that shares the tile computes its piece as
//     its FIRST one, writes the fp32 accumulator to its own slot of a workspace and raises a
//     flag. By the time the owner gets there the flags are (almost always) up: it adds the
//     partial sums to its registers and stores the tile through step 12's epilogue.
//     Only first pieces are partials, so a block writes at most one: one slot per block.
//     A waiting owner waits only for first pieces, which wait for nothing: no cycle. All G
//     blocks are resident at once (G = blocks that fit on the GPU), so no flag waits for a
//     block that has not started.
//  4. A block walks its whole tiles first and its stream-K range last, or the other way round
//     ("sk-first": the owner's wait and partial sums then overlap the producer's loads of the
//     next whole tile instead of ending the run). Both orders are configurations, timed as rows.
// The flags hold a launch number (epoch) instead of being reset: a flag is up when it equals
// this launch's number. The workspace costs G x 128 KB of fp32 (written and read once per
// split tile, in L2); the gain can only be the idle tail, a few percent at 4096.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "12_tma_store_epilogue.cuh"
#include "14_stream_k.h"
#include "14_stream_k_plan.h"
#include "check.cuh"
#include "hopper.cuh"
#include "wgmma_mainloop.cuh"

namespace sk {
using namespace ts;                    // step 12's staging buffer, epilogue and consumer loop
using namespace skplan;                // who computes what (14_stream_k_plan.h)
constexpr int STAGES = 4, CBOXES = 2;  // step 12's fastest configuration at 4096 (its results file)
constexpr int PART = 64 * BN;          // floats in one consumer's 64x256 partial accumulator
static_assert(PART == 128 * 128, "a slot holds one float per accumulator register per thread");

#if HOPPER_ENABLED
__device__ __forceinline__ void st_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// One consumer's partial accumulator -> its workspace slot, then the flag. The slot is laid
// out by register, not by matrix position (float4 j of thread t at j * 128 + t): each warp
// store writes 512 contiguous bytes, and the owner reads it back with the same mapping.
// .cg: through L2 only, so no SM's L1 can hold a stale copy from an earlier launch.
__device__ __forceinline__ void save_partial(const float (&d)[128], float* slot, uint32_t* flag, uint32_t epoch, int t,
                                             int bar_id) {
  float4* p = reinterpret_cast<float4*>(slot);
#pragma unroll
  for (int j = 0; j < 32; ++j) __stcg(&p[j * 128 + t], make_float4(d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]));
  // The barrier orders every thread's stores before thread 0's release, and a release is
  // cumulative: whoever acquires the flag sees all 128 threads' stores (the PTX memory model;
  // CUTLASS's stream-K barriers signal the same way). No thread waits for its own stores to land.
  warpgroup_sync(bar_id);
  if (t == 0) st_release_gpu(flag, epoch);
}

// The owner: wait for a sharer's flag, then add its partial accumulator to ours.
__device__ __forceinline__ void add_partial(float (&d)[128], const float* slot, const uint32_t* flag, uint32_t epoch,
                                            int t, int bar_id) {
  if (t == 0)
    while (ld_acquire_gpu(flag) != epoch) {}
  warpgroup_sync(bar_id);  // every thread reads only after thread 0 saw the flag
  const float4* p = reinterpret_cast<const float4*>(slot);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const float4 v = __ldcg(&p[j * 128 + t]);
    d[4 * j] += v.x, d[4 * j + 1] += v.y, d[4 * j + 2] += v.z, d[4 * j + 3] += v.w;
  }
}
#endif

// ws: G x CONSUMERS slots of PART floats; flags: G x CONSUMERS launch numbers; epoch: this
// launch's number (never 0, the flags' initial value).
__global__ void __launch_bounds__(NT, 1)
    gemm_14_stream_k(int M, int N, int K, const __grid_constant__ CUtensorMap tmA,
                     const __grid_constant__ CUtensorMap tmB, const __grid_constant__ CUtensorMap tmC, int group_m,
                     int extra_waves, int sk_first, float* __restrict__ ws, uint32_t* __restrict__ flags,
                     uint32_t epoch) {
#if HOPPER_ENABLED
  using namespace hopper;
  using S = Smem<STAGES, CBOXES>;
  extern __shared__ uint8_t smem_raw[];
  S& s = *reinterpret_cast<S*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int wgi = threadIdx.x / 128, t = threadIdx.x % 128;
  const Plan p = make_plan(ceil_div(M, BM), ceil_div(N, BN), ceil_div(K, BK), gridDim.x, extra_waves, sk_first != 0);
  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(&s.full[i], 1);
      mbar_init(&s.empty[i], CONSUMERS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  Piece pc;

  if (wgi == 0) {  // ---- producer: step 12's, over pieces [k0, k1) instead of whole tiles --------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (t == 0) {
      int it = 0;
      for (Cursor cur = first_piece(p, blockIdx.x); next_piece(p, cur, pc);) {
        int bm, bn;
        wgm::grouped_coords(pc.tile, p.tiles_m, p.tiles_n, group_m, bm, bn);
        for (int kt = pc.k0; kt < pc.k1; ++kt, ++it) {
          const int st = it % STAGES;
          if (it >= STAGES) mbar_wait(&s.empty[st], ((it / STAGES) - 1) & 1);
          mbar_expect_tx(&s.full[st], A_BYTES + B_BYTES);
          tma_load_2d(s.A[st], &tmA, &s.full[st], kt * BK, bm * BM);
          tma_load_2d(s.B[st], &tmB, &s.full[st], kt * BK, bn * BN);
        }
      }
    }
  } else {  // ---- consumers: a piece's k-steps, then store, hand over, or gather and store ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wgi - 1, bar_id = 1 + c;
    const int me = blockIdx.x;
    float d[128];
    int it = 0;
    auto release = [&](int st) {
      if (t == 0) mbar_arrive(&s.empty[st]);
    };
    for (Cursor cur = first_piece(p, me); next_piece(p, cur, pc);) {
      int bm, bn;
      wgm::grouped_coords(pc.tile, p.tiles_m, p.tiles_n, group_m, bm, bn);
      consume_tile<STAGES>(s.A, s.B, s.full, d, c, pc.k1 - pc.k0, it, release);
      if (pc.k0 > 0) {  // a sharer (this is our first piece): hand the sum to the tile's owner
        save_partial(d, ws + size_t(me * CONSUMERS + c) * PART, &flags[me * CONSUMERS + c], epoch, t, bar_id);
        continue;
      }
      if (pc.k1 < p.ktiles)  // the owner of a split tile: add every sharer's partial sum
        for (int b = next_sharer(p, pc.tile, me); b >= 0; b = next_sharer(p, pc.tile, b))
          add_partial(d, ws + size_t(b * CONSUMERS + c) * PART, &flags[b * CONSUMERS + c], epoch, t, bar_id);
      const int row0 = bm * BM + c * 64;
      if (row0 < M) store_tile<CBOXES>(d, s.C[c], &tmC, row0, bn * BN, M, N, t, bar_id);
    }
    if (t == 0) bulk_wait_all();  // the staging buffer must outlive the last TMA store's reads
  }
#endif
}

// ---- host ----------------------------------------------------------------------------------
// Shared by all configurations: the launch size, the workspace and the launch counter.
// Launches must not overlap (one stream): they share the workspace and the flags.
struct State {
  int blocks = 0;  // how many blocks fit on the GPU at once (all of them must be resident)
  float* ws = nullptr;
  uint32_t* flags = nullptr;
  uint32_t epoch = 0;
  Maps maps;
};

static State st;  // the workspace, made by the first launch, freed by stream_k_release()

static State& state() {
  if (st.blocks) return st;
  constexpr size_t kSmem = smem_bytes<STAGES, CBOXES>();
  static_assert(kSmem <= size_t(kMaxSmem), "stage ring + C staging exceed a block's shared memory");
  CUDA_CHECK(cudaFuncSetAttribute(gemm_14_stream_k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  int dev = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemm_14_stream_k, NT, kSmem));
  if (per_sm < 1) {
    std::fprintf(stderr, "error: no block of step 14 fits on this GPU\n");
    std::exit(1);
  }
  st.blocks = per_sm * sms;
  CUDA_CHECK(cudaMalloc(&st.ws, size_t(st.blocks) * CONSUMERS * PART * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&st.flags, size_t(st.blocks) * CONSUMERS * sizeof(uint32_t)));
  CUDA_CHECK(cudaMemset(st.flags, 0, size_t(st.blocks) * CONSUMERS * sizeof(uint32_t)));
  return st;
}

template <int EXTRA_WAVES, bool SK_FIRST>
void run(int M, int N, int K, const bf16* A, const bf16* Bt, bf16* C, int group_m, cudaStream_t s) {
  State& st = state();
  st.maps.update(M, N, K, A, Bt, C, BN);
  // Never more blocks than k-steps in all (tiny shapes): each block gets at least one.
  const long long work = (long long)ceil_div(M, BM) * ceil_div(N, BN) * ceil_div(K, BK);
  const int G = int(std::min<long long>(st.blocks, work));
  if (++st.epoch == 0) st.epoch = 1;  // 0 is the flags' initial value (after 2^32 launches)
  gemm_14_stream_k<<<G, NT, smem_bytes<STAGES, CBOXES>(), s>>>(M, N, K, st.maps.A, st.maps.B, st.maps.C, group_m,
                                                               EXTRA_WAVES, int(SK_FIRST), st.ws, st.flags, st.epoch);
  LAUNCH_CHECK();
}
}  // namespace sk

// compute-sanitizer's leak check counts what is still allocated when the program ends: free it first.
void stream_k_release() {
  if (sk::st.ws) CUDA_CHECK(cudaFree(sk::st.ws));
  if (sk::st.flags) CUDA_CHECK(cudaFree(sk::st.flags));
  sk::st = sk::State();
}

const std::vector<TmaStoreConfig>& stream_k_configs() {
  // "tail": only the partial wave is shared out; "+1": one whole wave more (longer ranges, so a
  // block's fixed costs weigh less against its k-steps); "sk-first": a block walks its stream-K
  // range before its whole tiles, so the owner's wait and partial sums come while the producer
  // already loads the next whole tile, instead of at the very end of the run.
  static const std::vector<TmaStoreConfig> v = {
      {14, "s4 c2 tail", sk::run<0, false>},
      {14, "s4 c2 tail sk-first", sk::run<0, true>},
      {14, "s4 c2 tail+1 sk-first", sk::run<1, true>},
  };
  return v;
}
