// day50_gpt/nn/gemm_sm90.cu: our Hopper GEMM with the linear layers' epilogues (the API and the five
// epilogues: nn/gemm_sm90.h). Built for sm_90a (Makefile: SM90A_UNITS); elsewhere the kernel is empty and
// sm90::available() says no.
//
// The main loop is day10's step 15 (day10_matmul/kernels/15_pingpong.cu says why each piece is there):
// a persistent grid, one producer thread issuing TMA loads of 128x64 tiles of A and Bt into a ring of
// stages (for the GELU's backward a second thread of the producer warpgroup loads the aux tiles, below),
// two consumer warpgroups each owning every other 128x128 tile of C, taking turns on the tensor
// cores (wgmma m64n128k16, two per 16 of K) so that one's epilogue runs while the other multiplies.
// What is new is the epilogue. Each consumer turns its 128 accumulator registers into four 64x64 boxes
// (bf16, in the 128-byte swizzled layout a TMA store reads) and stores them with the copy engine; before
// that it does the layer's elementwise work on the fp32 values:
//   bias: one bf16 pair per 8 columns from global memory, the tile's 16 pairs a thread loaded before its first box;
//   GELU with the pre-activation kept: each box is staged and stored twice, aux first, then gelu(aux);
//   GELU with its derivative kept (kBiasGeluDeriv): the same two stores, gelu'(z) where aux held z, both from
//   one tanh of the fp32 sum, so that the backward only multiplies (kMulAux, below);
//   the GELU's backward: gelu'(aux) needs aux at every element, 50 MB at fc2's shape. Read with plain
//   loads in the epilogue it cost more than cuBLASLt's DGELU (day50's notes have the measurements), so a
//   thread of the producer warpgroup TMA-loads the consumer's 128x128 tile of aux into shared memory while the
//   tile's k-steps run, in the same swizzled layout as the staging boxes: each thread then reads its values at
//   the offsets it writes its results to. kMulAux reads its aux the same way and multiplies by it.
// The GELU's backward can also hand back the column sums of its output (colsum not null): they are the
// bias gradient of the layer before the GELU (fc), which cuBLASLt would otherwise add up in its weight
// gradient's epilogue (BGRADB), a slower kernel than its plain one. Each tile writes the sums of its 128
// rows (of the values as stored, bf16) into colsum[tile row][N], one owner each, in a fixed order: a warp
// adds its rows with shuffles, the two row boxes add in registers, and the four warps through the
// consumer's aux tile, which the epilogue has finished reading by then. ln_partials_finish adds the
// tile rows up (nn/linear.cuh): no atomics, the same bits every run.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "check.cuh"
#include "gemm_sm90.h"
#include "hopper.cuh"
#include "kernels/async.cuh"  // PDL's two calls (k::grid_dependency_wait, k::launch_dependents)
#include "pdl.cuh"

namespace sm90 {
namespace {
using bf16 = __nv_bfloat16;
constexpr int BK = 64;                // k per stage: 64 bf16 = one 128-byte swizzle row
constexpr int TM = 128, TN = 128;     // a consumer's tile
constexpr int BOX = 64;               // the epilogue's boxes: 64 x 64 bf16, 8 KB
constexpr int BOX_ELEMS = BOX * BOX;
constexpr int CBOXES = 2;             // staging boxes per consumer (the two-output epilogues: 4 with --store-slots 4)
constexpr int NT = 128 * 3;           // a producer warpgroup and two consumers
constexpr int kStagesPlain = 6;       // 6 x 32 KB of stages beside 32 KB of staging (day10: 128x128 s6 c2)
constexpr int kStagesAux = 4;         // 4 stages: the two consumers' aux tiles (2 x 32 KB) need the room
constexpr int kStagesSlots4 = 5;      // 5 stages beside 4 staging slots a consumer (--store-slots 4: 64 KB of staging)
constexpr int kMaxSmem = 227 * 1024;  // the most shared memory one block may have on sm_90
// Keeping A (kKeepA): the row block's whole A panel, K <= kKeepAMaxK (six 16 KB boxes, 96 KB), stays in
// shared memory while the block's row of C tiles is computed; only B's stages go round the ring. Beside it,
// 6 B stages and the staging boxes (224 KB); the dGELU GEMM writes its results in place over the aux tile it
// read (no staging boxes), which leaves room for 4 B stages.
constexpr int kAPanelBoxes = kKeepAMaxK / BK;
constexpr int kStagesKeepA = 6, kStagesKeepAAux = 4;

// The epilogue's 64x64 boxes: each consumer's CBOXES staging slots (STAGING) and, for kDGelu and kMulAux (AUX_IN), each
// consumer's 128x128 tile of aux as four boxes. One array, so that a part a kernel lacks takes no room: as
// two member structs, an empty one before the 1024-aligned other padded the block by a whole 1 KB.
template <bool STAGING, bool AUX_IN, int SLOTS = CBOXES>
struct EpiBoxes {
  static constexpr int kStaging = STAGING ? 2 * SLOTS : 0, kAux = AUX_IN ? 2 * 4 : 0;
  static_assert(kStaging + kAux > 0, "every kernel stores through staging slots or its aux tiles");
  alignas(1024) bf16 t[kStaging + kAux][BOX_ELEMS];
  __device__ bf16 (*staging(int c))[BOX_ELEMS] { return t + c * SLOTS; }
  __device__ bf16 (*aux(int c))[BOX_ELEMS] { return t + kStaging + c * 4; }
};

// KEEP_A: A holds the row block's panel (kAPanelBoxes boxes of 128 x 64), not a ring of stages; and the
// dGELU GEMM has no staging boxes (it stores from its aux tile).
template <int STAGES, bool AUX_IN, bool KEEP_A, int SLOTS = CBOXES>
struct Smem {
  alignas(1024) bf16 A[KEEP_A ? kAPanelBoxes : STAGES][TM * BK];  // 128-byte swizzled tiles: 1024-byte aligned
  alignas(1024) bf16 B[STAGES][TN * BK];
  EpiBoxes<!(KEEP_A && AUX_IN), AUX_IN, SLOTS> epi;  // staging slots [consumer][slot]; kDGelu, kMulAux: aux tiles [consumer][box]
  alignas(8) uint64_t full[STAGES];
  alignas(8) uint64_t empty[STAGES];
  alignas(8) uint64_t aux_full[2];
  alignas(8) uint64_t aux_empty[2];
  alignas(8) uint64_t a_full;   // KEEP_A: the row block's A panel has landed
  alignas(8) uint64_t a_empty;  // KEEP_A: every consumer with a tile in the row block is done reading it
};
template <int STAGES, bool AUX_IN, bool KEEP_A, int SLOTS = CBOXES>
constexpr size_t smem_bytes() {
  return sizeof(Smem<STAGES, AUX_IN, KEEP_A, SLOTS>) + 1024;  // + slack to align the dynamic base
}
static_assert(smem_bytes<kStagesPlain, false, false>() <= size_t(kMaxSmem), "stages + staging");
static_assert(smem_bytes<kStagesAux, true, false>() <= size_t(kMaxSmem), "stages + staging + aux tiles");
static_assert(smem_bytes<kStagesKeepA, false, true>() <= size_t(kMaxSmem), "A panel + B stages + staging");
static_assert(smem_bytes<kStagesKeepAAux, true, true>() <= size_t(kMaxSmem), "A panel + B stages + aux tiles");
static_assert(smem_bytes<kStagesSlots4, false, false, 4>() <= size_t(kMaxSmem), "5 stages + 4 staging slots a consumer");
// tile_kstep adds its offsets to a descriptor's 14-bit address field (16-byte units) without masking: every shared
// address a block can have must stay below 256 KB, as every sm_90 block's does (227 KB at most).
static_assert(kMaxSmem + 1024 <= (1 << 18), "the descriptors' address field holds shared addresses below 256 KB");

#if HOPPER_ENABLED
constexpr int ORDER_BAR = 3;  // named barriers 3 and 4: the consumers' turns (1 and 2: their epilogues)
__device__ __forceinline__ void turn_wait(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void turn_pass(int id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }
#include "wgmma_m64n128k16.inc"

// One stage's wgmmas: rows 0-63 of the tile into d[0..63], rows 64-127 into d[64..127]. As and Bs are the stage's
// shared-memory addresses. A descriptor (hopper::smem_desc: 128-byte swizzle, 1024-byte 8-row groups) holds the address
// in 16-byte units in its low 14 bits, and its high word is the same for every tile here, so the descriptors of a
// k-step's eight wgmmas (twelve distinct: eight for A, four for B) are one base each for A and B plus a constant: 32
// bytes (2 units) a 16-wide k slice, 8 KB (512 units) for A's second 64 rows. Built from the generic pointers per wgmma
// (smem_desc), they were most of the k-loop's instructions: 137 a k-step for its 8 wgmmas in fc's forward GEMM (Nsight
// Compute's source view, H200), with the address space's window looked up anew each time; with the other consumer's
// epilogue warp issuing on the same schedulers, the profile points at that chain as what kept the tensor pipe at 43.7%
// of the active cycles.
constexpr uint32_t kDescHi = uint32_t(1024 >> 4) | (1u << 30);  // bits 32-45: 8-row stride 1024 B; bits 62-63: 128B swizzle
__device__ __forceinline__ uint64_t desc_lo(uint32_t lo) { return (uint64_t(kDescHi) << 32) | lo; }
__device__ __forceinline__ void tile_kstep(float (&d)[128], uint32_t As, uint32_t Bs) {
  const uint32_t a = ((As & 0x3FFFF) >> 4) | (1u << 16), b = ((Bs & 0x3FFFF) >> 4) | (1u << 16);
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    const uint64_t db = desc_lo(b + 2 * kk);
    wgmma_m64n128k16<0>(d, desc_lo(a + 2 * kk), db, 1);
    wgmma_m64n128k16<64>(d, desc_lo(a + (64 * BK * 2 >> 4) + 2 * kk), db, 1);
  }
}
// mbarriers by shared-memory address (hopper.cuh's take a generic pointer and convert it each time).
__device__ __forceinline__ void mbar_wait_at(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void mbar_arrive_at(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// The tanh GELU and its derivative, with tanh on the special-function unit (tanh.approx: relative error
// about 2^-11, below bf16's 2^-8).
__device__ __forceinline__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Written as fused multiply-adds (before this form, Nsight Compute on fc's GEMM, H200, counted 5.5 M unfused fp32
// instructions against 0.8 M fused, with one warp per scheduler in the epilogue). The epilogue is still most of
// what a consumer issues in fc's forward (about three fifths, against a quarter for the k-loop, in the profile of
// results/nvidia-h200/day50_kloop_dev/), but it is not all of the kernel's pace: with the GELU moved to warpgroups
// of helpers, off the consumers, fc's GEMM was no shorter (day50's notes, "Where our GEMM's time goes").
//   u = x (k0 + k0 k1 x^2), gelu = x (0.5 + 0.5 tanh u), gelu' = (0.5 + 0.5 tanh u) + 0.5 x (1 - tanh^2 u) u'
constexpr float kK0 = 0.7978845608028654f, kK1 = 0.044715f;  // sqrt(2/pi), the cubic's weight
constexpr float kK01 = kK0 * kK1, kK01x3 = 3.f * kK0 * kK1;
__device__ __forceinline__ float gelu(float x) {
  const float th = tanh_fast(x * fmaf(kK01, x * x, kK0));
  return x * fmaf(0.5f, th, 0.5f);
}
__device__ __forceinline__ float gelu_grad(float x) {
  const float x2 = x * x, th = tanh_fast(x * fmaf(kK01, x2, kK0));
  const float du = fmaf(kK01x3, x2, kK0);  // u'
  return fmaf(0.5f * x * fmaf(-th, th, 1.f), du, fmaf(0.5f, th, 0.5f));
}
// Both at once (kBiasGeluDeriv): x becomes gelu(x), the derivative is returned. One tanh; the derivative
// costs four more instructions than the GELU alone, where the backward's gelu_grad costs ten and the tanh.
__device__ __forceinline__ float gelu_and_grad(float& x) {
  const float x2 = x * x, th = tanh_fast(x * fmaf(kK01, x2, kK0));
  const float h = fmaf(0.5f, th, 0.5f);
  const float g = fmaf(x * fmaf(-th, th, 1.f), fmaf(0.5f * kK01x3, x2, 0.5f * kK0), h);  // h + x (1 - th^2) u' / 2
  x *= h;
  return g;
}

// One round of a reduce-scatter among the lanes that differ in bit BIT of g (lane bit BIT * 4): the lane
// with that bit set keeps the upper HALF of v (index bit HALF), its partner the lower, and each adds
// the half the other sends.
template <int HALF, int BIT>
__device__ __forceinline__ void reduce_scatter_round(float (&v)[16], int g) {
  const bool upper = (g & BIT) != 0;
#pragma unroll
  for (int i = 0; i < HALF; ++i) {
    const float send = upper ? v[i] : v[i + HALF], keep = upper ? v[i + HALF] : v[i];
    v[i] = keep + __shfl_xor_sync(~0u, send, BIT * 4);
  }
}

// This thread's 16 bias pairs for the tile at column col0 (its 32 columns: 8 pairs in each column box), loaded
// before the tile's k-steps so that their trip to L2 overlaps them: loaded at the epilogue's start, the first
// box's adds waited for them, with one warp a scheduler to hide the wait.
__device__ __forceinline__ void load_bias2(__nv_bfloat162 (&bias2)[2][BOX / 8], const bf16* bias, int col0, int N, int l) {
#pragma unroll
  for (int cb = 0; cb < 2; ++cb)
#pragma unroll
    for (int jj = 0; jj < BOX / 8; ++jj) {
      const int col = col0 + cb * BOX + jj * 8 + (l % 4) * 2;  // N % 8 == 0: a pair is wholly in or out
      bias2[cb][jj] = col < N ? *reinterpret_cast<const __nv_bfloat162*>(bias + col) : __floats2bfloat162_rn(0.f, 0.f);
    }
}

// One consumer's epilogue of a 128x128 tile at (row0, col0). Accumulator layout (wgmma m64nN): box b
// (rows 64 (b / 2).., columns 64 (b % 2)..) is d[32b .. 32b + 31]; in it, register 4j + q of lane l of
// warp w is row 16w + l/4 + 8 (q / 2), column 8 (j % 8) + 2 (l % 4) + q % 2. The staging offset of
// (row r, 8-column chunk jj) is day10's 128-byte swizzle: r * 128 + ((jj ^ (r % 8)) << 4).
// A box's OUTS outputs are written together into one *set* of OUTS slots, and the sets alternate box by box
// (SLOTS / OUTS of them: two, but for the two-output epilogues with --store-slots 2). With two sets a box
// costs one barrier of the warpgroup: before it, thread 0 waits until the copy engine has read every box it
// was handed (those of the box before, in the other set), so that past the barrier the next box may write
// that set while this box's stores read theirs. With one set, or once a box was skipped (past M or N: the
// sets no longer alternate), the slots are waited for before they are written, a second barrier.
// IN_PLACE (kDGelu or kMulAux with A kept): each box is stored from the aux tile itself, every thread writing its
// results over the aux values it has just read (the same offsets), so no slot is waited for; the tile is
// handed back to the producer only once the stores have read it.
template <int EPI, bool IN_PLACE = false, int SLOTS = CBOXES>
__device__ __forceinline__ void epilogue(float (&d)[128], bf16 (*slots)[BOX_ELEMS], bf16 (*aux_s)[BOX_ELEMS],
                                         const CUtensorMap* tmC, const CUtensorMap* tmAux,
                                         const __nv_bfloat162 (&bias2)[2][BOX / 8], float* colsum, int row0,
                                         int col0, int M, int N, int t, int bar_id) {
  constexpr bool AUX_IN = reads_aux(Epi(EPI)), DERIV = EPI == int(Epi::kBiasGeluDeriv);
  constexpr int OUTS = writes_aux(Epi(EPI)) ? 2 : 1;
  constexpr int SETS = SLOTS / OUTS;
  static_assert(!IN_PLACE || AUX_IN, "only an epilogue that reads aux has a tile it can write over");
  static_assert(SETS == 1 || SETS == 2, "one set of slots, or two that alternate box by box (4 boxes: even)");
  const int w = t / 32, l = t % 32;
  const int r = 16 * w + l / 4;  // this thread's rows in a box: r and r + 8 (both have r % 8 == l / 4)
  bool cut = false;
  float cs[2][2] = {{0.f, 0.f}, {0.f, 0.f}};  // colsum: this lane's two columns (8 (l / 4) + 2 (l % 4) ..) per column box
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const int br = row0 + (b / 2) * BOX, bc = col0 + (b % 2) * BOX;
    if (br >= M || bc >= N) {  // past the matrix (the same for the whole warpgroup)
      cut = true;
      continue;
    }
#pragma unroll
    for (int jj = 0; jj < BOX / 8; ++jj) {
      const int j = b * (BOX / 8) + jj;
      if constexpr (AUX_IN) {
        const uint32_t a = hopper::smem_u32(aux_s[b]) + r * 128 + ((jj ^ (l / 4)) << 4) + (l % 4) * 4;
        uint32_t u0, u1;
        asm volatile("ld.shared.b32 %0, [%1];" : "=r"(u0) : "r"(a));
        asm volatile("ld.shared.b32 %0, [%1];" : "=r"(u1) : "r"(a + 8 * 128));
        const float2 p0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u0));
        const float2 p1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u1));
        if constexpr (EPI == int(Epi::kDGelu)) {
          d[4 * j] *= gelu_grad(p0.x), d[4 * j + 1] *= gelu_grad(p0.y);
          d[4 * j + 2] *= gelu_grad(p1.x), d[4 * j + 3] *= gelu_grad(p1.y);
        } else {  // kMulAux: aux holds gelu' already
          d[4 * j] *= p0.x, d[4 * j + 1] *= p0.y, d[4 * j + 2] *= p1.x, d[4 * j + 3] *= p1.y;
        }
      } else {
        const float2 bb = __bfloat1622float2(bias2[b % 2][jj]);
        d[4 * j] += bb.x, d[4 * j + 1] += bb.y, d[4 * j + 2] += bb.x, d[4 * j + 3] += bb.y;
      }
    }
    if constexpr (AUX_IN) {
      if (colsum) {  // the warp's 16 rows of this box: v[2 jj + e] is column 8 jj + 2 (l % 4) + e, rows r and r + 8
        float v[16];
#pragma unroll
        for (int jj = 0; jj < BOX / 8; ++jj) {
          const int j = b * (BOX / 8) + jj;
          const float2 a0 = __bfloat1622float2(__floats2bfloat162_rn(d[4 * j], d[4 * j + 1]));  // as stored
          const float2 a1 = __bfloat1622float2(__floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]));
          v[2 * jj] = a0.x + a1.x, v[2 * jj + 1] = a0.y + a1.y;
        }
        // ... then over the 8 lanes that share l % 4: three rounds that halve what a lane keeps (14
        // shuffles, not 48 for every lane to have every sum), leaving lane l with jj = l / 4.
        reduce_scatter_round<8, 4>(v, l / 4);
        reduce_scatter_round<4, 2>(v, l / 4);
        reduce_scatter_round<2, 1>(v, l / 4);
        cs[b % 2][0] += v[0], cs[b % 2][1] += v[1];
      }
    }
    // The box's set of slots (or, in place, its aux box), free once every store handed over before is read.
    bf16* box[OUTS];
#pragma unroll
    for (int o = 0; o < OUTS; ++o) box[o] = IN_PLACE ? aux_s[b] : slots[(SETS == 2 ? b % 2 : 0) * OUTS + o];
    if constexpr (!IN_PLACE) {
      if (SETS == 1 || cut) {
        if (t == 0) hopper::bulk_wait_read<0>();
        hopper::warpgroup_sync(bar_id);  // the set is free for every thread of the warpgroup
      }
    }
    // Both outputs of an element pair written together. kBiasGeluAux: z into aux, gelu(z) into C;
    // kBiasGeluDeriv: gelu'(z) into aux, gelu(z) into C, from one tanh of the fp32 sum.
    const uint32_t box0 = hopper::smem_u32(box[0]), box1 = hopper::smem_u32(box[OUTS - 1]);
#pragma unroll
    for (int jj = 0; jj < BOX / 8; ++jj) {
      const int j = b * (BOX / 8) + jj;
      const uint32_t off = r * 128 + ((jj ^ (l / 4)) << 4) + (l % 4) * 4;
      if constexpr (DERIV) {
        const float g0 = gelu_and_grad(d[4 * j]), g1 = gelu_and_grad(d[4 * j + 1]);
        const float g2 = gelu_and_grad(d[4 * j + 2]), g3 = gelu_and_grad(d[4 * j + 3]);
        hopper::st_shared_bf16x2(box0 + off, g0, g1);
        hopper::st_shared_bf16x2(box0 + off + 8 * 128, g2, g3);
        hopper::st_shared_bf16x2(box1 + off, d[4 * j], d[4 * j + 1]);
        hopper::st_shared_bf16x2(box1 + off + 8 * 128, d[4 * j + 2], d[4 * j + 3]);
      } else if constexpr (EPI == int(Epi::kBiasGeluAux)) {
        hopper::st_shared_bf16x2(box0 + off, d[4 * j], d[4 * j + 1]);
        hopper::st_shared_bf16x2(box0 + off + 8 * 128, d[4 * j + 2], d[4 * j + 3]);
        hopper::st_shared_bf16x2(box1 + off, gelu(d[4 * j]), gelu(d[4 * j + 1]));
        hopper::st_shared_bf16x2(box1 + off + 8 * 128, gelu(d[4 * j + 2]), gelu(d[4 * j + 3]));
      } else {
        hopper::st_shared_bf16x2(box0 + off, d[4 * j], d[4 * j + 1]);
        hopper::st_shared_bf16x2(box0 + off + 8 * 128, d[4 * j + 2], d[4 * j + 3]);
      }
    }
    hopper::fence_async_shared();
    // Two sets: every box handed over so far (the other set's) is read before the barrier, so that past it
    // the next box may write there. (Usually long done: those stores left a box's math and writes ago.)
    if (!IN_PLACE && SETS == 2 && !cut && t == 0) hopper::bulk_wait_read<0>();
    hopper::warpgroup_sync(bar_id);  // the whole box is written
    if (t == 0) {
#pragma unroll
      for (int o = 0; o < OUTS; ++o) {
        hopper::tma_store_2d(OUTS == 2 && o == 0 ? tmAux : tmC, box[o], bc, br);
        hopper::bulk_commit();
      }
    }
  }
  // After a skipped box the sets no longer alternate: the last box written may have used set 0, which the next
  // tile's first box writes without waiting (its wait comes after its writes, before its barrier: meant for the other
  // set); so wait here.
  // In place: the aux tile is read out before it becomes the column sums' scratch or goes back to the producer.
  if ((cut || IN_PLACE) && t == 0) hopper::bulk_wait_read<0>();
  if constexpr (AUX_IN) {
    if (colsum) {  // the four warps' sums, through the aux tile (every thread has read its aux values)
      float* red = reinterpret_cast<float*>(aux_s[0]);  // [4 warps][128 columns]
      hopper::warpgroup_sync(bar_id);
#pragma unroll
      for (int cb = 0; cb < 2; ++cb) {
        const int col = cb * BOX + 8 * (l / 4) + 2 * (l % 4);
        red[w * TN + col] = cs[cb][0], red[w * TN + col + 1] = cs[cb][1];
      }
      hopper::warpgroup_sync(bar_id);
      if (col0 + t < N) colsum[size_t(row0 / TM) * N + col0 + t] = red[t] + red[TN + t] + red[2 * TN + t] + red[3 * TN + t];
      hopper::fence_async_shared();  // these generic writes, before the producer's TMA refills the tile
      hopper::warpgroup_sync(bar_id);
    }
    // In place without the sums, the last generic writes into the tile were the last box's results, and
    // the fence before its store already ordered them before the copy engine's later writes.
  }
}
#endif

// KEEP_A = false: day10's loop. Tile u of the grid's sequence is block u % grid's; every k-step loads a
// 128 x 64 box of A and one of B (32 KB) into the ring, so a tile moves 192 KB from L2 at K = 384.
// KEEP_A = true (K <= kKeepAMaxK): block b takes whole row blocks, b, b + grid, ..., and in each the tiles
// bn = 0, 1, ... of C's row, the two consumers alternating as before. The row block's A panel is loaded
// once (a_full) and kept until every consumer with a tile in the row block has finished its k-steps
// (a_empty); only B's boxes go through the ring, 96 KB a tile at K = 384.
template <int EPI, int STAGES, bool KEEP_A, int SLOTS = CBOXES>
__global__ void __launch_bounds__(NT, 1)
    gemm_kernel(int M, int N, int K, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, const __grid_constant__ CUtensorMap tmAux, const bf16* bias,
                float* colsum, int group_m) {
#if HOPPER_ENABLED
  using namespace hopper;
  constexpr bool AUX_IN = reads_aux(Epi(EPI));
  constexpr bool IN_PLACE = KEEP_A && AUX_IN;
  constexpr int A_BYTES = TM * BK * 2, B_BYTES = TN * BK * 2;
  using S = Smem<STAGES, AUX_IN, KEEP_A, SLOTS>;
  extern __shared__ uint8_t smem_raw[];
  S& s = *reinterpret_cast<S*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // The warpgroup's number broadcast from lane 0: the compiler then knows it is the same across the warp, and
  // keeps what follows from it (a consumer's tiles, its ring position, the k-loop's descriptors) in uniform
  // registers, where a wgmma reads its descriptors, instead of moving each one there (R2UR) from a per-thread one.
  const int wgi = __shfl_sync(~0u, int(threadIdx.x / 128), 0), t = threadIdx.x % 128;
  const int tiles_m = (M + TM - 1) / TM, tiles_n = (N + TN - 1) / TN, tiles = tiles_m * tiles_n;
  const int ktiles = (K + BK - 1) / BK;
  // KEEP_A: this block's row blocks and tiles; tile n of its sequence is row block n / tiles_n, column n % tiles_n
  const int my_blocks = int(blockIdx.x) < tiles_m ? (tiles_m - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0;
  const int my_tiles = my_blocks * tiles_n;
  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) mbar_init(&s.full[i], 1), mbar_init(&s.empty[i], 1);
    for (int i = 0; i < 2; ++i) mbar_init(&s.aux_full[i], 1), mbar_init(&s.aux_empty[i], 1);
    // a row of one tile has one consumer; of two or more, both (the consumers alternate along it)
    mbar_init(&s.a_full, 1), mbar_init(&s.a_empty, tiles_n >= 2 ? 2 : 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // --pdl on (nn/pdl.cuh): the barriers are set up while the kernel before this one may still run; A (and aux)
  // are its outputs, so nothing is loaded before it has finished. The next kernel may launch once every block
  // is at its last tile (the producer says so, below): not at our start, where its blocks would wait on every
  // SM slot our blocks leave free, slots the weight gradients' stream could use all along.
  k::grid_dependency_wait();
  __syncthreads();

  if (wgi == 0) {  // ---- producer: one thread loads the block's tiles in order (and, reading aux, another their aux) ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (t == 0) {
      // (the consumers' k-loop aligns the block's base in the shared window; s was aligned in the generic space)
      if (((uint32_t(__cvta_generic_to_shared(smem_raw)) + 1023) & ~1023u) != smem_u32(&s)) __trap();
      int it = 0, n = 0;
      const int count = KEEP_A ? my_tiles : (tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
      for (; n < count; ++n) {
        if (n == count - 1) k::launch_dependents();  // (a block's first call counts)
        int bm, bn;
        if constexpr (KEEP_A) {
          const int r = n / tiles_n;
          bm = int(blockIdx.x) + r * int(gridDim.x), bn = n - r * tiles_n;
          if (bn == 0) {  // a new row block: its A panel, once the last one's readers are done with theirs
            if (r >= 1) mbar_wait(&s.a_empty, (r - 1) & 1);
            mbar_expect_tx(&s.a_full, ktiles * A_BYTES);
            for (int kt = 0; kt < ktiles; ++kt) tma_load_2d(s.A[kt], &tmA, &s.a_full, kt * BK, bm * TM);
          }
        } else {
          grouped_coords(int(blockIdx.x) + n * int(gridDim.x), tiles_m, tiles_n, group_m, bm, bn);
        }
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const int st = it % STAGES;
          if (it >= STAGES) mbar_wait(&s.empty[st], ((it / STAGES) - 1) & 1);
          mbar_expect_tx(&s.full[st], KEEP_A ? B_BYTES : A_BYTES + B_BYTES);
          if constexpr (!KEEP_A) tma_load_2d(s.A[st], &tmA, &s.full[st], kt * BK, bm * TM);
          tma_load_2d(s.B[st], &tmB, &s.full[st], kt * BK, bn * TN);
        }
      }
    } else if (t == 32) {
      if constexpr (AUX_IN) {
      // kDGelu, kMulAux: tile n's aux, into its consumer's buffer as soon as that consumer's last epilogue has read it,
      // by a thread of its own (another warp): behind the B loads, which wait for free stages, it was issued
      // two k-steps into the tile's main loop, and the consumer waited for it at the end.
      const int count = KEEP_A ? my_tiles : (tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
      for (int n = 0; n < count; ++n) {
        int bm, bn;
        if constexpr (KEEP_A) {
          const int r = n / tiles_n;
          bm = int(blockIdx.x) + r * int(gridDim.x), bn = n - r * tiles_n;
        } else {
          grouped_coords(int(blockIdx.x) + n * int(gridDim.x), tiles_m, tiles_n, group_m, bm, bn);
        }
        const int c = n & 1, k = n >> 1;
        if (k >= 1) mbar_wait(&s.aux_empty[c], (k - 1) & 1);
        mbar_expect_tx(&s.aux_full[c], TM * TN * 2);  // out-of-range parts of a box arrive as zeros, counted
#pragma unroll
        for (int b = 0; b < 4; ++b)
          tma_load_2d(s.epi.aux(c)[b], &tmAux, &s.aux_full[c], bn * TN + (b % 2) * BOX, bm * TM + (b / 2) * BOX);
      }
      }
    }
  } else {  // ---- consumers: every other tile each, taking turns on the tensor cores ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wgi - 1;
    float d[128];
    // The stages' and their barriers' shared-memory addresses, once (the k-loop adds offsets to them; derived from
    // the generic pointers each time, the window's lookup was redone every k-step).
    // The base aligned in the shared window, as s is in the generic space: the same address wherever the window
    // starts on a multiple of 1024 (on sm_90 it is 4 GB-aligned; the producer checks it once, below). Taken as
    // smem_u32(&s) instead, the compiler redid the window's lookup in every k-step again (68 to 72 instructions a
    // k-step, not 62 to 66; a check here, in the consumer, cost more still).
    static_assert(std::is_standard_layout<S>::value, "offsetof needs a standard-layout Smem");
    const uint32_t base = (uint32_t(__cvta_generic_to_shared(smem_raw)) + 1023) & ~1023u;
    const uint32_t sA = base + uint32_t(offsetof(S, A)), sB = base + uint32_t(offsetof(S, B));
    const uint32_t sFull = base + uint32_t(offsetof(S, full)), sEmpty = base + uint32_t(offsetof(S, empty));
    // n: the tile's place in the block's sequence (the producer's order)
    const int count = KEEP_A ? my_tiles : (tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
    for (int n = c; n < count; n += 2) {
      int bm, bn, r = 0;
      if constexpr (KEEP_A) {
        r = n / tiles_n;
        bm = int(blockIdx.x) + r * int(gridDim.x), bn = n - r * tiles_n;
      } else {
        grouped_coords(int(blockIdx.x) + n * int(gridDim.x), tiles_m, tiles_n, group_m, bm, bn);
      }
      __nv_bfloat162 bias2[2][BOX / 8];  // (the epilogues that read aux add no bias)
      if constexpr (!AUX_IN) load_bias2(bias2, bias, bn * TN, N, t % 32);
      if (n > 0) turn_wait(ORDER_BAR + c);  // the other consumer has issued tile n-1's last wgmmas
      // KEEP_A: this consumer's first tile of the row block waits for its panel (its later ones have it)
      if (KEEP_A && n < r * tiles_n + 2) mbar_wait(&s.a_full, r & 1);
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.f;
      // The ring's place: k-step it = n * ktiles of the block's sequence is stage it % STAGES, in its
      // (it / STAGES)th round; from there the stage and the round's parity are counted, not divided.
      const int it0 = n * ktiles;
      int st = it0 % STAGES, prev = st;
      uint32_t parity = uint32_t(it0 / STAGES) & 1;
      for (int kt = 0; kt < ktiles; ++kt) {
        mbar_wait_at(sFull + 8 * st, parity);
        wgmma_fence();
        tile_kstep(d, sA + (KEEP_A ? kt : st) * (TM * BK * 2), sB + st * (TN * BK * 2));
        wgmma_commit();
        wgmma_wait1();  // the previous k-step's wgmmas are done: its stage can be refilled
        if (kt > 0 && t == 0) mbar_arrive_at(sEmpty + 8 * prev);
        prev = st;
        if (++st == STAGES) st = 0, parity ^= 1;
      }
      if (n + 1 < count) turn_pass(ORDER_BAR + (1 - c));
      wgmma_wait0();
      if (t == 0) {
        mbar_arrive_at(sEmpty + 8 * prev);  // ktiles >= 1 (K >= 8)
        // KEEP_A: this consumer's last tile of the row block has read the panel for the last time
        if (KEEP_A && n + 2 >= (r + 1) * tiles_n) mbar_arrive(&s.a_empty);
      }
      if constexpr (AUX_IN) {
        mbar_wait(&s.aux_full[c], ((n - c) >> 1) & 1);
        bf16(*slots)[BOX_ELEMS] = nullptr;
        if constexpr (!IN_PLACE) slots = s.epi.staging(c);
        epilogue<EPI, IN_PLACE, SLOTS>(d, slots, s.epi.aux(c), &tmC, &tmAux, bias2, colsum, bm * TM, bn * TN, M, N, t, 1 + c);
        if (t == 0) mbar_arrive(&s.aux_empty[c]);  // all 128 threads read it: the epilogue ends with their barrier
      } else {
        epilogue<EPI, false, SLOTS>(d, s.epi.staging(c), nullptr, &tmC, &tmAux, bias2, nullptr, bm * TM, bn * TN, M, N, t, 1 + c);
      }
    }
    if (t == 0) hopper::bulk_wait_all();  // the staging slots must outlive the last TMA store's reads
  }
#else
  (void)M, (void)N, (void)K, (void)bias, (void)colsum, (void)group_m;
#endif
}

__global__ void probe_kernel(int* out) { *out = HOPPER_ENABLED; }

template <int EPI, int STAGES, bool KEEP_A, int SLOTS = CBOXES>
void launch(int M, int N, int K, const bf16* A, const bf16* Bt, bf16* C, const bf16* bias, bf16* aux, float* colsum,
            cudaStream_t s, int max_blocks, bool pdl) {
  constexpr size_t kSmem = smem_bytes<STAGES, reads_aux(Epi(EPI)), KEEP_A, SLOTS>();
  auto kernel = gemm_kernel<EPI, STAGES, KEEP_A, SLOTS>;
  // Once per device and kernel, not per call: the shared-memory attribute belongs to a device (data-parallel
  // training runs one model per GPU from one thread each), and an eager step, or the timed choice whose
  // events bracket this host code, should not pay these calls on every launch.
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  static std::mutex mu;
  static std::map<int, int> sms_of;  // per device, for this kernel: set up, with its SM count
  int sms = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = sms_of.find(dev);
    if (it == sms_of.end()) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
      CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
      it = sms_of.emplace(dev, sms).first;
    }
    sms = it->second;
  }
  // Tensor maps describe (pointer, shape, box): encoded here, passed by value (__grid_constant__).
  const CUtensorMap mA = hopper::make_map_bf16(A, M, K, TM), mB = hopper::make_map_bf16(Bt, N, K, TN),
                    mC = hopper::make_map_bf16(C, M, N, BOX);
  const CUtensorMap mAux = aux ? hopper::make_map_bf16(aux, M, N, BOX) : mC;
  // KEEP_A spreads row blocks, not tiles: at M = 16384 that is 128 blocks, a row of C each
  const int units = KEEP_A ? (M + TM - 1) / TM : ((M + TM - 1) / TM) * ((N + TN - 1) / TN);
  int grid = std::min(units, sms);
  if (max_blocks > 0) grid = std::min(grid, max_blocks);
  pdl::launch(pdl, kernel, dim3(unsigned(grid)), dim3(NT), kSmem, s, M, N, K, mA, mB, mC, mAux, bias, colsum, 16);
}
}  // namespace

bool available() {
  static std::mutex mu;
  static std::map<int, bool> known;  // per device
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(dev);
  if (it != known.end()) return it->second;
  cudaDeviceProp p;
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  bool ok = false;
  if (p.major == 9 && p.minor == 0) {
    int* flag = nullptr;
    int got = 0;
    CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
    probe_kernel<<<1, 1>>>(flag);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(&got, flag, sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(flag));
    ok = got == 1;
  }
  known[dev] = ok;
  return ok;
}

bool fits(int M, int N, int K, const void* A, const void* Bt, const void* C, const void* aux) {
  auto a16 = [](const void* p) { return p == nullptr || (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return M > 0 && N > 0 && K > 0 && N % 8 == 0 && K % 8 == 0 && a16(A) && a16(Bt) && a16(C) && a16(aux);
}

namespace {
// The five epilogues with one loop's stage counts (A kept: its panel beside the B ring; else both in it).
template <bool KEEP_A>
void dispatch(Epi e, int M, int N, int K, const bf16* A, const bf16* Bt, bf16* C, const bf16* bias, bf16* aux,
              cudaStream_t s, float* colsum, int max_blocks, bool pdl, int store_slots) {
  constexpr int kPlain = KEEP_A ? kStagesKeepA : kStagesPlain, kAux = KEEP_A ? kStagesKeepAAux : kStagesAux;
  // store_slots 4 (--store-slots 4, the default): the two-output epilogues (fc's forward) get four staging slots a
  // consumer, so a box's store waits for the one four stores back, not two; 5 k-stages make the room.
  if constexpr (!KEEP_A) {
    if (store_slots == 4 && e == Epi::kBiasGeluDeriv)
      return launch<int(Epi::kBiasGeluDeriv), kStagesSlots4, false, 4>(M, N, K, A, Bt, C, bias, aux, nullptr, s, max_blocks, pdl);
    if (store_slots == 4 && e == Epi::kBiasGeluAux)
      return launch<int(Epi::kBiasGeluAux), kStagesSlots4, false, 4>(M, N, K, A, Bt, C, bias, aux, nullptr, s, max_blocks, pdl);
  }
  switch (e) {
    case Epi::kBias:
      return launch<int(Epi::kBias), kPlain, KEEP_A>(M, N, K, A, Bt, C, bias, nullptr, nullptr, s, max_blocks, pdl);
    case Epi::kBiasGeluAux:
      return launch<int(Epi::kBiasGeluAux), kPlain, KEEP_A>(M, N, K, A, Bt, C, bias, aux, nullptr, s, max_blocks, pdl);
    case Epi::kDGelu:
      return launch<int(Epi::kDGelu), kAux, KEEP_A>(M, N, K, A, Bt, C, nullptr, aux, colsum, s, max_blocks, pdl);
    case Epi::kBiasGeluDeriv:
      return launch<int(Epi::kBiasGeluDeriv), kPlain, KEEP_A>(M, N, K, A, Bt, C, bias, aux, nullptr, s, max_blocks, pdl);
    case Epi::kMulAux:
      return launch<int(Epi::kMulAux), kAux, KEEP_A>(M, N, K, A, Bt, C, nullptr, aux, colsum, s, max_blocks, pdl);
  }
}
}  // namespace

void gemm(Epi e, int M, int N, int K, const bf16* A, const bf16* Bt, bf16* C, const bf16* bias, bf16* aux,
          cudaStream_t s, float* colsum, bool keep_a, int max_blocks, bool pdl, int store_slots) {
  if ((reads_aux(e) || writes_aux(e)) && aux == nullptr)  // (launch would point aux's map at C)
    throw std::invalid_argument("sm90::gemm: this epilogue reads or writes aux, and aux is null");
  if (store_slots != 2 && store_slots != 4) throw std::invalid_argument("sm90::gemm: store_slots is 2 or 4");
  if (keep_a && K <= kKeepAMaxK)
    return dispatch<true>(e, M, N, K, A, Bt, C, bias, aux, s, colsum, max_blocks, pdl, store_slots);
  dispatch<false>(e, M, N, K, A, Bt, C, bias, aux, s, colsum, max_blocks, pdl, store_slots);
}
}  // namespace sm90
