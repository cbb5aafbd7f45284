// The warp-specialized wgmma mainloop that steps 10 and 11 share (sm_90a): the block tile, the
// shared-memory stage ring and its mbarriers, the grouped tile order, the producer's k-steps and
// the consumers' k-steps. Each step keeps its own idea: step 10 the kernel around this loop
// (persistent blocks, one TMA per operand), step 11 the cluster (B multicast, two-CTA release).
#pragma once
#include <cstdint>

#include "hopper.cuh"

namespace wgm {
using bf16 = __nv_bfloat16;
// A 128x256 block tile, 64 deep in K, 4 stages: 4 x (16 KB + 32 KB) = 192 KB of the 227 KB an
// H100 block may use. One producer warpgroup, two consumers of 64 rows each.
constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4, CONSUMERS = 2;
constexpr int NT = 128 * (1 + CONSUMERS);
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;

struct Smem {
  alignas(1024) bf16 A[STAGES][BM * BK];  // 128B-swizzled tiles need 1024-byte alignment
  alignas(1024) bf16 B[STAGES][BN * BK];
  alignas(8) uint64_t full[STAGES];   // TMA wrote the stage
  alignas(8) uint64_t empty[STAGES];  // every consumer is done reading it
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + slack to align the dynamic base

#if HOPPER_ENABLED
__device__ __forceinline__ Smem& smem_aligned(uint8_t* raw) {
  return *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
}

// Thread 0: `full` waits for one producer arrival (+ the bytes), `empty` for `empty_arrivals`.
__device__ __forceinline__ void init_barriers(Smem& s, uint32_t empty_arrivals) {
  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) {
      hopper::mbar_init(&s.full[i], 1);
      hopper::mbar_init(&s.empty[i], empty_arrivals);
    }
    // Make the initialized barriers visible to the async proxy (the TMA unit).
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
}

// Tile order (groups of `group_m` rows of tiles, column by column inside a group): common/hopper.cuh.
using hopper::grouped_coords;

// The producer's k-steps of one tile (one thread). The stage ring runs on across tiles (`it`
// counts k-steps of all tiles), so the producer loads the next tile during this one's epilogue.
// load_b(stage, kt) issues the B tile's TMA: the one place steps 10 and 11 differ.
template <class LoadB>
__device__ __forceinline__ void produce_tile(Smem& s, const CUtensorMap* tmA, int bm, int ktiles, int& it,
                                             LoadB&& load_b) {
  for (int kt = 0; kt < ktiles; ++kt, ++it) {
    const int st = it % STAGES;
    if (it >= STAGES) hopper::mbar_wait(&s.empty[st], ((it / STAGES) - 1) & 1);  // consumers freed it
    hopper::mbar_expect_tx(&s.full[st], A_BYTES + B_BYTES);
    hopper::tma_load_2d(s.A[st], tmA, &s.full[st], kt * BK, bm * BM);
    load_b(st, kt);
  }
}

// A consumer warpgroup's k-steps of one tile into the 64x256 fp32 accumulator d (128 registers
// per thread). Each k-step's wgmma group stays in flight; the consumer waits only for the
// previous one, then hands its stage back (release(stage)), so the tensor cores never wait for
// the barrier round trip.
template <class Release>
__device__ __forceinline__ void consume_tile(Smem& s, float (&d)[128], int c, int ktiles, int& it, Release&& release) {
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int kt = 0; kt < ktiles; ++kt, ++it) {
    const int st = it % STAGES;
    hopper::mbar_wait(&s.full[st], (it / STAGES) & 1);
    hopper::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)  // 16 elements = 32 bytes along K inside the swizzled rows
      hopper::wgmma_m64n256k16(d, hopper::smem_desc(&s.A[st][c * 64 * BK + kk * 16]),
                               hopper::smem_desc(&s.B[st][kk * 16]), 1);
    hopper::wgmma_commit();
    hopper::wgmma_wait1();
    if (kt > 0) release((it - 1) % STAGES);
  }
  hopper::wgmma_wait0();
  if (ktiles > 0) release((it - 1) % STAGES);
}
#endif

}  // namespace wgm
