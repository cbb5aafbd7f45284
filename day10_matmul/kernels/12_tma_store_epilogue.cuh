// Steps 12-15 share this: the C staging buffer beside the stage ring, the TMA-store epilogue of
// one consumer (registers -> swizzled shared memory -> cp.async.bulk.tensor store), a consumer's
// k-steps for a ring of STAGES, and the host's tensor maps. The idea is step 12's; its header
// comment (12_wgmma_tma_store.cu) says why. Step 14 (14_stream_k.cu) reuses it unchanged.
#pragma once
#include <cstdint>

#include "hopper.cuh"
#include "wgmma_mainloop.cuh"

namespace ts {
using bf16 = __nv_bfloat16;
using wgm::A_BYTES;
using wgm::B_BYTES;
using wgm::BK;
using wgm::BM;
using wgm::BN;
using wgm::CONSUMERS;
using wgm::NT;
constexpr int BOX = 64;               // a C box is 64 x 64 bf16: 128-byte rows, the widest swizzled TMA box
constexpr int BOX_ELEMS = BOX * BOX;  // 8 KB
constexpr int kMaxSmem = 227 * 1024;  // the most shared memory one block may have on sm_90

template <int STAGES, int CBOXES>
struct Smem {
  alignas(1024) bf16 A[STAGES][BM * BK];  // 128B-swizzled tiles need 1024-byte alignment
  alignas(1024) bf16 B[STAGES][BN * BK];
  alignas(1024) bf16 C[CONSUMERS][CBOXES][BOX_ELEMS];  // each consumer's staging slots
  alignas(8) uint64_t full[STAGES];
  alignas(8) uint64_t empty[STAGES];
};
template <int STAGES, int CBOXES>
constexpr size_t smem_bytes() {
  return sizeof(Smem<STAGES, CBOXES>) + 1024;  // + slack to align the dynamic base
}

#if HOPPER_ENABLED
// The copy engine's store side, the warpgroup barrier and st.shared of a bf16 pair: common/hopper.cuh.
using hopper::bulk_commit;
using hopper::bulk_wait_all;
using hopper::bulk_wait_read;
using hopper::fence_async_shared;
using hopper::st_shared_bf16x2;
using hopper::tma_store_2d;
using hopper::warpgroup_sync;

// ---- one consumer's epilogue -------------------------------------------------------------
// d: the accumulator, four 64x64 boxes of 32 registers (layout in hopper::store_m64n256_bf16:
// box b holds registers 32b .. 32b + 31); slots: CBOXES staging boxes; (row0, col0): where this
// consumer's part of C starts. Box b lies at rows row0 + 64 * (b / BOX_COLS), columns
// col0 + 64 * (b % BOX_COLS): BOX_COLS = 4 is a 64x256 accumulator (steps 12-14), 2 two 64x128
// ones stacked, a 128x128 tile (step 15). Boxes wholly past M or N are skipped.
// Box b goes to slot b % CBOXES; the TMA store that read that slot last was CBOXES commits ago,
// so waiting until at most CBOXES - 1 groups are still reading frees exactly that slot -- unless
// a box was skipped, which breaks the count: from then on (rare: edge tiles only) we wait for all.
template <int CBOXES, int BOX_COLS = BN / BOX>
__device__ __forceinline__ void store_tile(const float (&d)[128], bf16 (*slots)[BOX_ELEMS], const CUtensorMap* tmC,
                                           int row0, int col0, int M, int N, int t, int bar_id) {
  constexpr int BOXES = 4;  // 128 registers of 32 per box
  static_assert(BOXES % CBOXES == 0, "a whole tile must leave the slot count where the next tile expects it");
  const int w = t / 32, l = t % 32;
  const int r = 16 * w + l / 4;  // this thread's rows are r and r + 8; both have r % 8 == l / 4
  bool cut = false;              // a box of this tile was skipped
#pragma unroll
  for (int b = 0; b < BOXES; ++b) {
    const int br = row0 + (b / BOX_COLS) * BOX, bc = col0 + (b % BOX_COLS) * BOX;
    if (br >= M || bc >= N) {  // past the matrix (the same for the whole warpgroup)
      cut = true;
      continue;
    }
    uint8_t* box = reinterpret_cast<uint8_t*>(slots[b % CBOXES]);
    const uint32_t box_s = hopper::smem_u32(box);
    if (t == 0) {
      if (cut)
        bulk_wait_read<0>();
      else
        bulk_wait_read<CBOXES - 1>();
    }
    warpgroup_sync(bar_id);  // the slot is free for every thread of the warpgroup
#pragma unroll
    for (int jj = 0; jj < BOX / 8; ++jj) {  // 8 columns of 16 bytes: the swizzle's chunks
      const int j = b * (BOX / 8) + jj;
      const int off = r * 128 + ((jj ^ (l / 4)) << 4) + (l % 4) * 4;
      st_shared_bf16x2(box_s + off, d[4 * j], d[4 * j + 1]);
      st_shared_bf16x2(box_s + off + 8 * 128, d[4 * j + 2], d[4 * j + 3]);
    }
    fence_async_shared();
    warpgroup_sync(bar_id);  // the whole box is written
    if (t == 0) {
      tma_store_2d(tmC, box, bc, br);
      bulk_commit();
    }
  }
  // A tile cut short at M or N committed fewer than BOXES groups, which breaks the "CBOXES
  // commits ago" count above for the next tile: wait here until every store has read its slot
  // (rare: only the last row or column of tiles).
  if (cut && t == 0) bulk_wait_read<0>();
}

// A consumer's k-steps of one tile (as wgm::consume_tile, for a ring of STAGES).
template <int STAGES, class Release>
__device__ __forceinline__ void consume_tile(bf16 (*As)[BM * BK], bf16 (*Bs)[BN * BK], uint64_t* full, float (&d)[128],
                                             int c, int ktiles, int& it, Release&& release) {
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int kt = 0; kt < ktiles; ++kt, ++it) {
    const int st = it % STAGES;
    hopper::mbar_wait(&full[st], (it / STAGES) & 1);
    hopper::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
      hopper::wgmma_m64n256k16(d, hopper::smem_desc(&As[st][c * 64 * BK + kk * 16]),
                               hopper::smem_desc(&Bs[st][kk * 16]), 1);
    hopper::wgmma_commit();
    hopper::wgmma_wait1();
    if (kt > 0) release((it - 1) % STAGES);
  }
  hopper::wgmma_wait0();
  if (ktiles > 0) release((it - 1) % STAGES);
}
#endif

// ---- host ----------------------------------------------------------------------------------
struct Maps {
  const void *a = nullptr, *b = nullptr, *c = nullptr;
  int m = -1, n = -1, k = -1;
  CUtensorMap A, B, C;
  // Tensor maps describe (pointer, shape); rebuild them only when those change.
  void update(int M, int N, int K, const bf16* pa, const bf16* pb, bf16* pc, int b_box_rows) {
    if (pa == a && pb == b && pc == c && M == m && N == n && K == k) return;
    A = hopper::make_map_bf16(pa, M, K, BM);
    B = hopper::make_map_bf16(pb, N, K, b_box_rows);
    C = hopper::make_map_bf16(pc, M, N, BOX);  // 64x64 boxes, 128-byte swizzle: the staging layout
    a = pa, b = pb, c = pc, m = M, n = N, k = K;
  }
};
}  // namespace ts
