// day50_gpt/nn/kernels/flash_parts.cuh: what the two flash backwards share (nn/kernels/flash_bwd.cuh on
// mma.sync, nn/flash_sm90.cu on wgmma): the tile geometry and its 128-byte swizzle, the copy engine's tile
// loads and their mbarriers, the exponential, the accumulator's layout as the next product's A operand,
// the staged stores, Dsum and the bias gradient's column sums. Both kernels walk the same blocks with the
// same shared-memory layout; only the block products differ. Inline device functions only: the sm_90a
// unit (nn/flash_sm90.cu) includes it beside the model's.
//
// A warp's 16 x 64 block of a product is float c[8][4]: register e of n-tile nt of lane l (g = l / 4,
// t = l % 4) is row g + 8 (e / 2), column 8 nt + 2 t + e % 2. That is mma.sync m16n8k16's accumulator
// layout, and also, warp by warp, wgmma m64nNk16's (warp w holds rows 16 w .. 16 w + 15 of the 64).
#pragma once
#include <cuda_bf16.h>

#include <cmath>  // INFINITY
#include <cstdint>

#include <cuda.h>  // CUtensorMap

#include "async.cuh"  // smem_addr, the mbarriers
#include "check.cuh"

namespace k {
namespace flash {

constexpr int kD = 64;     // head size (the only one these kernels take)
constexpr int kBlk = 64;   // rows per block of queries or keys
constexpr int kWarps = 4;  // 16 rows of the block each
constexpr int kThreads = 32 * kWarps;
constexpr int kTile = kBlk * kD;  // elements of one shared tile: 64 rows of 128 bytes, no padding
constexpr unsigned kTileBytes = kTile * 2;
// A tile as the copy engine writes it with the 128-byte swizzle: the 16-byte chunk c of row r sits at chunk
// c ^ (r % 8) of that row, so the 8 rows an ldmatrix reads (the same chunk of 8 consecutive rows) fall in 8
// different groups of 4 banks, as the padded rows of the first version did. at(r, col): the element at row r,
// column col (col % 8 == 0 for a 16-byte access). Row offsets that are multiples of 8 keep the pattern, so a
// warp's 16 rows can be addressed from their own first row.
__device__ __forceinline__ int at(int r, int col) { return r * kD + ((((col >> 3) ^ (r & 7)) << 3) | (col & 7)); }
// dynamic shared memory of the one launch, the larger pass's (dkv_block<true>): two fixed tiles, three
// double-buffered ones (Q, dO, O), two double-buffered rows of floats (Stats, Dsum) and the buffers' two
// mbarriers, plus up to 1 KB to align the tiles to the 1,024 bytes the swizzle's pattern repeats in; dq_block
// needs six tiles, 64 floats and the barriers.
constexpr int kSmemBytes = 1024 + (2 + 3 * 2) * kTile * 2 + 2 * 2 * kBlk * 4 + 2 * 8;
constexpr float kLog2e = 1.4426950408889634f;

inline bool fits(int head_size, int T) { return head_size == kD && T % kBlk == 0; }
// The tiles come by TMA with mbarrier transaction counts, sm_90's: below it the kernels' bodies compile to
// nothing (a build for an older GPU still links) and the model takes cuDNN's backward instead.
inline bool runs_here() {
  int dev = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  return major >= 9;
}

// 2^x on the special-function unit (one instruction; 2^-inf = 0, which the causal mask relies on).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// The tensor maps of the three inputs the tiles come from (row-major bf16, boxes of 64 x 64 with the 128-byte
// swizzle: nn/attention.cuh builds them with common/hopper.cuh's make_map_bf16): qkv [B*T][3C] (Q, K and V
// of head h at columns h*64, C + h*64, 2C + h*64), O and dO [B*T][C].
struct Maps {
  CUtensorMap qkv, o, dout;
};
// The box at (column c0, row c1) of `map` into a shared tile by the copy engine (one request of 8 KB),
// counted off `bar` (cp.async.bulk.tensor, sm_90).
__device__ __forceinline__ void tma_tile(__nv_bfloat16* dst, const CUtensorMap* map, unsigned long long* bar, int c0,
                                         int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}
// The buffers' two mbarriers: set up by one thread, then the whole block may wait on them.
__device__ __forceinline__ void init_bars(unsigned long long* bar) {
  if (threadIdx.x == 0) {
    mbar_init(bar), mbar_init(bar + 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
}
// A block of queries' tiles into buffer `buf` of the dK/dV pass's double-buffered Q, dO and (with_o) O tiles,
// rows row.. of head column hc, issued by thread 0 and counted off bar[buf]; expect: announce the bytes on the
// barrier (one arrive a phase: the first fill's is announced with K's and V's).
__device__ __forceinline__ void load_query_tiles(const Maps& m, __nv_bfloat16* sQ, __nv_bfloat16* sdO, __nv_bfloat16* sO,
                                                 unsigned long long* bar, int buf, int row, int hc, bool with_o,
                                                 bool expect) {
  if (threadIdx.x != 0) return;
  unsigned long long* bb = bar + buf;
  if (expect) mbar_expect(bb, (with_o ? 3 : 2) * kTileBytes);
  tma_tile(sQ + buf * kTile, &m.qkv, bb, hc, row);
  tma_tile(sdO + buf * kTile, &m.dout, bb, hc, row);
  if (with_o) tma_tile(sO + buf * kTile, &m.o, bb, hc, row);
}
// The dynamic shared memory from its first 1,024-byte boundary (the swizzled tiles' alignment).
__device__ __forceinline__ unsigned char* aligned_smem(unsigned char* raw) {
  return raw + ((1024u - (smem_addr(raw) & 1023u)) & 1023u);
}

// The accumulator layout of a 16 x 64 product as the A operand of the next (k-step ks covers
// columns 16ks .. 16ks+15: n-tiles 2ks and 2ks+1), rounded to bf16.
__device__ __forceinline__ void to_a(const float c[8][4], uint32_t af[4][4]) {
  for (int ks = 0; ks < 4; ++ks) {
    af[ks][0] = pack(c[2 * ks][0], c[2 * ks][1]);
    af[ks][1] = pack(c[2 * ks][2], c[2 * ks][3]);
    af[ks][2] = pack(c[2 * ks + 1][0], c[2 * ks + 1][1]);
    af[ks][3] = pack(c[2 * ks + 1][2], c[2 * ks + 1][3]);
  }
}
__device__ __forceinline__ void zero(float c[8][4]) {
  for (int i = 0; i < 8; ++i) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.f;
}
// The diagonal block's causal mask on a warp's 16 x 64 block: an element becomes -inf (2^-inf = 0) where its
// column comes after its row (kColsAfter: the dQ pass, whose columns are keys) or before it (the dK/dV pass,
// whose rows are keys and columns queries).
template <bool kColsAfter>
__device__ __forceinline__ void mask_diagonal(float s[8][4], int warp, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = nt * 8 + 2 * t + (e & 1), row = warp * 16 + g + (e >> 1) * 8;
      if (kColsAfter ? col > row : col < row) s[nt][e] = -INFINITY;
    }
}
// The softmax's backward on a warp's 16 x 64 block, in place, as both passes do it between their products.
// The dQ pass's block (rows: queries g, g + 8 of the warp; columns: keys): S becomes dS = P * (dP - Dsum), with
// P = 2^(S * scale * log2(e) - Stats * log2(e)) (lse0/lse1: the rows' Stats * log2(e), ds0/ds1: their Dsum).
// diagonal: the block where keys after a query are masked (2^-inf = 0); the others skip the comparison.
__device__ __forceinline__ void softmax_bwd_rows(float s[8][4], const float dp[8][4], bool diagonal, float sl2, float lse0,
                                                 float lse1, float ds0, float ds1, int warp, int lane) {
  if (diagonal) mask_diagonal<true>(s, warp, lane);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = ex2(fmaf(s[nt][e], sl2, -(e >> 1 ? lse1 : lse0)));
      s[nt][e] = p * (dp[nt][e] - (e >> 1 ? ds1 : ds0));  // dS
    }
}
// The dK/dV pass's block, transposed (rows: keys; columns: queries, whose Stats * log2(e) and Dsum are l_s[64]
// and d_s[64] in shared memory): st becomes P^T and dpt dS^T. diagonal: queries before a key are masked.
__device__ __forceinline__ void softmax_bwd_cols(float st[8][4], float dpt[8][4], bool diagonal, float sl2,
                                                 const float* l_s, const float* d_s, int warp, int lane) {
  const int t = lane % 4;
  if (diagonal) mask_diagonal<false>(st, warp, lane);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const float2 l2 = *reinterpret_cast<const float2*>(l_s + nt * 8 + 2 * t),
                 d2 = *reinterpret_cast<const float2*>(d_s + nt * 8 + 2 * t);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = ex2(fmaf(st[nt][e], sl2, -(e & 1 ? l2.y : l2.x)));
      st[nt][e] = p;
      dpt[nt][e] = p * (dpt[nt][e] - (e & 1 ? d2.y : d2.x));  // dS^T
    }
  }
}

// A warp's 16 x 64 accumulator (times `scale`, as bf16) to rows row0.. of a [rows][ld] matrix, through
// shared memory: the warp writes its block into `stage` (its own 16 rows of a free tile, in the tiles'
// swizzled layout), then copies it out 16 bytes a lane, 8 lanes a 128-byte row. Stored straight from the
// accumulator layout, each instruction would write 16 bytes of 8 rows: half of every 32-byte sector,
// so each sector takes two writes. The swizzle puts the 8 rows' chunk nt in 8 different chunks, so the 32
// lanes' 4-byte writes hit 32 different banks.
__device__ __forceinline__ void store_rows_staged(__nv_bfloat16* dst, size_t ld, const float c[8][4], float scale,
                                                  __nv_bfloat16* stage, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int col = nt * 8 + 2 * t;
    *reinterpret_cast<uint32_t*>(stage + at(g, col)) = pack(scale * c[nt][0], scale * c[nt][1]);
    *reinterpret_cast<uint32_t*>(stage + at(g + 8, col)) = pack(scale * c[nt][2], scale * c[nt][3]);
  }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * (kD / 8); i += 32) {
    const int r = i / (kD / 8), ch = (i % (kD / 8)) * 8;
    *reinterpret_cast<uint4*>(dst + size_t(r) * ld + ch) = *reinterpret_cast<const uint4*>(stage + at(r, ch));
  }
}

// Dsum = rowsum(dO * O) of 64 rows into out[64]. From global memory (o, d_o: the block's first row, row
// stride ld): 8 lanes a row, 16 bytes each, so a warp's load reads 4 whole 128-byte rows (two threads a
// row, as the first version read them, left half of every 32-byte sector to the next load).
__device__ __forceinline__ void dsum_rows_global(const __nv_bfloat16* o, const __nv_bfloat16* d_o, size_t ld,
                                                 float* out) {
  const int lane8 = threadIdx.x % 8;
#pragma unroll
  for (int r = threadIdx.x / 8; r < kBlk; r += kThreads / 8) {
    const uint4 o4 = *reinterpret_cast<const uint4*>(o + size_t(r) * ld + lane8 * 8),
                d4 = *reinterpret_cast<const uint4*>(d_o + size_t(r) * ld + lane8 * 8);
    const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(&o4);
    const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(&d4);
    float s = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 of = __bfloat1622float2(o2[e]), df = __bfloat1622float2(d2[e]);
      s += of.x * df.x + of.y * df.y;
    }
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    s += __shfl_xor_sync(0xffffffffu, s, 4);
    if (lane8 == 0) out[r] = s;
  }
}
// The same from two shared tiles (swizzled): two threads a row, 32 columns each. A quarter warp's 16-byte
// reads cover 4 consecutive rows x 2 halves, chunks 0 and 4 of each XORed with the row (mod 8): 8 different
// chunks, no bank conflicts.
__device__ __forceinline__ void dsum_rows_shared(const __nv_bfloat16* o, const __nv_bfloat16* d_o, float* out) {
  const int r = threadIdx.x / 2, half = threadIdx.x % 2;
  float s = 0;
#pragma unroll
  for (int c = 0; c < 32; c += 8) {
    const uint4 o4 = *reinterpret_cast<const uint4*>(o + at(r, half * 32 + c)),
                d4 = *reinterpret_cast<const uint4*>(d_o + at(r, half * 32 + c));
    const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(&o4);
    const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(&d4);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 of = __bfloat1622float2(o2[e]), df = __bfloat1622float2(d2[e]);
      s += of.x * df.x + of.y * df.y;
    }
  }
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  if (half == 0) out[r] = s;
}

// The column sums of a warp's 16 x 64 accumulator (times `scale`, rounded to bf16 as store_rows_staged stores
// it) into red[0..63] (shared): each lane adds its two rows, then the 8 lanes of one column group add
// theirs (lanes 0..3 end up holding the warp's 64 sums).
__device__ __forceinline__ void warp_col_sums(const float c[8][4], float scale, float* red, int lane) {
  float s[8][2];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      s[nt][j] = __bfloat162float(__float2bfloat16_rn(scale * c[nt][j])) +
                 __bfloat162float(__float2bfloat16_rn(scale * c[nt][2 + j]));
#pragma unroll
  for (int off = 4; off < 32; off *= 2)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) s[nt][j] += __shfl_xor_sync(0xffffffffu, s[nt][j], off);
  if (lane < 4)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) red[nt * 8 + 2 * lane] = s[nt][0], red[nt * 8 + 2 * lane + 1] = s[nt][1];
}
// The same sums read back from the warp's staged rows (store_rows_staged's `stage`, intact after it: the values
// as stored, bf16): lane l adds columns 2l and 2l+1 down the 16 rows, one 4-byte read a row (a row's 32 lanes
// read its 128 bytes: no bank conflicts), into red[2l], red[2l+1]. 16 reads and 32 adds a lane where
// warp_col_sums rounds 32 values and shuffles 48 times; the rows are added in order, not as a tree.
__device__ __forceinline__ void staged_col_sums(const __nv_bfloat16* stage, float* red, int lane) {
  float s0 = 0.f, s1 = 0.f;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(stage + at(r, 2 * lane)));
    s0 += v.x, s1 += v.y;
  }
  red[2 * lane] = s0, red[2 * lane + 1] = s1;
}
// The CTA's 64 column sums: its 4 warps' (red[warp][64]) added in warp order by threads first..first+63.
__device__ __forceinline__ void block_col_sums(const float* red, float* part, int first) {
  const int c = int(threadIdx.x) - first;
  if (c >= 0 && c < kBlk) part[c] = red[c] + red[kBlk + c] + red[2 * kBlk + c] + red[3 * kBlk + c];
}

}  // namespace flash
}  // namespace k
