// day50_gpt/nn/kernels/flash_bwd.cuh: causal attention's backward as a flash kernel of ours (bf16,
// head size 64), from cuDNN's forward output O and its softmax statistics.
//
// The backward of O = softmax(mask(Q.K^T * scale)).V, with P recomputed from Q, K and the forward's
// statistics (Stats = rowmax + log(rowsum), so P = exp(S * scale - Stats)):
//   dV = P^T.dO      dP = dO.V^T      dS = P * (dP - Dsum)      dQ = scale * dS.K      dK = scale * dS^T.Q
// with Dsum = rowsum(dO * O). The T x T matrices never reach memory: each CTA walks 64 x 64 blocks
// of them on the tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate), one 16-row slice per warp.
// (nn/flash_sm90.cu is the same kernel with its products on Hopper's wgmma, --flash-mma wgmma, the default
// on sm_90; what the two share, from the tiles and their loads to the staged stores, is flash_parts.cuh's.)
//
// Why two passes and not cuDNN's one: a single pass that owns a block of keys (dK, dV stay in its
// registers) has to add its share of dQ into every query block's rows, which other blocks of keys add
// into too: cuDNN's backward does that with fp32 atomics into a zeroed accumulator, then converts it
// (the "dQacc" of nn/sdpa_cudnn.h). Here each output has exactly one owner instead:
//   1. dq_block: one block of 64 queries per CTA, walking the blocks of keys at or before it
//      (S, P, dP, dS again, then dQ += dS.K in registers).
//   2. dkv_block: one block of 64 keys per CTA, walking the blocks of queries at or after it
//      (S^T, P^T, dP^T, dS^T, then dV += P^T.dO and dK += dS^T.Q in registers).
// That recomputes S and dP once more (7 block products instead of 5), but at head size 64 and T = 256
// these products are small next to moving Q, K, V, dO through memory, and no output is written twice.
// Both passes run in one launch (dqkv_kernel), side by side: each computes the Dsum it needs itself
// (dkv_block from an O tile loaded beside dO), so neither waits for the other. The first version ran
// them as two kernels, dQ first because it wrote Dsum for the second: one more launch, two tails, and
// a head's Q, K, V, dO read from memory twice, once by each kernel.
//
// Both passes also hand back the qkv bias gradient's share of their rows (bias_part not null): the
// bias gradient is the column sums of dqkv, and each CTA holds one 64 x 64 block of dQ (or dK and dV) in
// registers as it stores it, so it writes that block's 64 column sums (of the values as stored, bf16)
// into bias_part[row block][3C], one owner each; ln_partials_finish adds the B * T / 64 partials of a
// column in order (no atomics: the same bits every run). The qkv weight gradient is then a plain
// matmul, without cuBLASLt's bias-gradient epilogue (Model::attention_bwd).
//
// The next block's tiles are copied into shared memory (two buffers) while the current one is multiplied,
// each 64 x 64 tile by one request to the copy engine (a 2-D TMA load from a tensor map, counted off the
// buffer's mbarrier), in the 128-byte swizzle, so the 8 rows an ldmatrix reads fall in 8 different bank
// groups (flash_parts.cuh's `at`). The first version had every thread issue 16-byte cp.async into rows padded to 72 elements:
// in Nsight Compute those copies and their address arithmetic were the kernel's most executed lines (notes:
// "Where its instructions go"). Layout: Q, K, V read in place from qkv ([B*T][3C], head h at
// columns h*64 of each third), O and dO from [B*T][C], dQ, dK, dV written into dqkv like qkv.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include <cuda.h>  // CUtensorMap

#include "flash_parts.cuh"  // the tiles, their loads, the shared steps

namespace k {
namespace flash {
// Four 8x8 bf16 matrices from shared memory; lane i gives the address of row i % 8 of matrix i / 8.
__device__ __forceinline__ void ldsm4(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm4_t(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// c += a (16x16, row) . b (16x8, col)
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// acc[n-tile][4] (16 rows x 64 columns) += A(16 x 64, the warp's rows of `a`, row-major in shared
// memory) . B where B's 64 columns are the rows of `b` (B = b^T: b is [n][k] row-major, "col" layout).
__device__ __forceinline__ void mm_abt(float acc[8][4], const __nv_bfloat16* a, const __nv_bfloat16* b, int lane) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    uint32_t af[4];
    ldsm4(af, a + at(lane % 16, ks * 16 + (lane / 16) * 8));
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t bf[4];
      ldsm4(bf, b + at(np * 16 + (lane % 8) + (lane / 16) * 8, ks * 16 + ((lane / 8) % 2) * 8));
      mma(acc[2 * np], af, bf[0], bf[1]);
      mma(acc[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}
// acc[n-tile][4] (16 x 64) += A . B with A from registers (af[k-step][4], 16 x 64) and B = b (64 x 64,
// [k][n] row-major in shared memory: read transposed).
__device__ __forceinline__ void mm_ab(float acc[8][4], const uint32_t af[4][4], const __nv_bfloat16* b, int lane) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t bf[4];
      ldsm4_t(bf, b + at(ks * 16 + (lane % 8) + ((lane / 8) % 2) * 8, np * 16 + (lane / 16) * 8));
      mma(acc[2 * np], af[ks], bf[0], bf[1]);
      mma(acc[2 * np + 1], af[ks], bf[2], bf[3]);
    }
}
// 1. dQ of one block of 64 queries (qb) of head bh, with the Dsum of its rows (also written to dsum_out
// when not null, for a dK/dV pass in a later launch that reads it).
__device__ __forceinline__ void dq_block(unsigned char* smem_raw, const Maps& m, int qb, int bh, const __nv_bfloat16* qkv,
                                         const __nv_bfloat16* out, const __nv_bfloat16* dout, const float* stats,
                                         float* dsum_out, __nv_bfloat16* dqkv, float* bias_part, int T, int C, int H,
                                         float scale) {
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* sdO = sQ + kTile;
  __nv_bfloat16* sK = sdO + kTile;  // [2][tile]
  __nv_bfloat16* sV = sK + 2 * kTile;
  float* sDs = reinterpret_cast<float*>(sV + 2 * kTile);  // [64] this block's Dsum
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(sDs + kBlk);  // the buffers' mbarriers
  const int nb = T / kBlk, b = bh / H, h = bh % H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const size_t l3 = size_t(3) * C, row0 = size_t(b) * T;
  // The tiles by the copy engine, one request each: buffer 0's first fill holds Q, dO and the first K, V.
  const int r0 = int(row0), hc = h * kD;  // the head's first row and column
  init_bars(bar);
  if (threadIdx.x == 0) {
    mbar_expect(bar, 4 * kTileBytes);
    tma_tile(sQ, &m.qkv, bar, hc, r0 + qb * kBlk);
    tma_tile(sdO, &m.dout, bar, hc, r0 + qb * kBlk);
    tma_tile(sK, &m.qkv, bar, C + hc, r0);
    tma_tile(sV, &m.qkv, bar, 2 * C + hc, r0);
  }
  // Dsum for this block's queries, straight from global memory while the tiles are in flight.
  const size_t o_at = (row0 + size_t(qb) * kBlk) * C + size_t(h) * kD;
  dsum_rows_global(out + o_at, dout + o_at, size_t(C), sDs);
  __syncthreads();  // (sDs: written and read by different threads)
  if (dsum_out && threadIdx.x < kBlk) dsum_out[size_t(bh) * T + size_t(qb) * kBlk + threadIdx.x] = sDs[threadIdx.x];
  // This thread's two query rows: qb*64 + 16*warp + g (+8).
  const int qrow = qb * kBlk + warp * 16 + g;
  const float sl2 = scale * kLog2e;
  const float lse0 = stats[size_t(bh) * T + qrow] * kLog2e, lse1 = stats[size_t(bh) * T + qrow + 8] * kLog2e;
  const float ds0 = sDs[warp * 16 + g], ds1 = sDs[warp * 16 + g + 8];
  float dq[8][4];
  zero(dq);
  for (int kb = 0; kb <= qb; ++kb) {
    const int buf = kb & 1;
    if (kb < qb && threadIdx.x == 0) {  // the next block of keys into the other buffer (free: the last
      unsigned long long* nb_bar = bar + (buf ^ 1);  // iteration ended on a barrier)
      mbar_expect(nb_bar, 2 * kTileBytes);
      tma_tile(sK + (buf ^ 1) * kTile, &m.qkv, nb_bar, C + hc, r0 + (kb + 1) * kBlk);
      tma_tile(sV + (buf ^ 1) * kTile, &m.qkv, nb_bar, 2 * C + hc, r0 + (kb + 1) * kBlk);
    }
    mbar_wait(bar + buf, unsigned(kb >> 1) & 1u);  // this buffer's (kb / 2)-th fill has landed
    const __nv_bfloat16 *k_s = sK + buf * kTile, *v_s = sV + buf * kTile;
    float sc[8][4], dp[8][4];
    zero(sc), zero(dp);
    mm_abt(sc, sQ + warp * 16 * kD, k_s, lane);   // S = Q . K^T
    mm_abt(dp, sdO + warp * 16 * kD, v_s, lane);  // dP = dO . V^T
    // P = 2^(S * scale * log2(e) - Stats * log2(e)), then dS = P * (dP - Dsum). Only the diagonal block
    // has keys after a query (masked: 2^-inf = 0); the others skip the comparison.
    softmax_bwd_rows(sc, dp, kb == qb, sl2, lse0, lse1, ds0, ds1, warp, lane);  // S -> dS
    uint32_t dsa[4][4];
    to_a(sc, dsa);
    mm_ab(dq, dsa, k_s, lane);  // dQ += dS . K
    __syncthreads();            // this buffer is refilled two blocks on
  }
  __nv_bfloat16* dq_at = dqkv + (row0 + size_t(qrow) - g) * l3 + size_t(h) * kD;
  // the tiles are free (the loop's last barrier): each warp stages its rows in its rows of sK
  store_rows_staged(dq_at, l3, dq, scale, sK + warp * 16 * kD, lane);
  if (bias_part) {  // 4 x 64 floats of sums in sQ's tile, clear of the staging rows
    float* red = reinterpret_cast<float*>(smem_raw);
    warp_col_sums(dq, scale, red + warp * kBlk, lane);
    __syncthreads();
    block_col_sums(red, bias_part + (size_t(b) * nb + qb) * l3 + size_t(h) * kD, 0);
  }
}

// 2. dK and dV of one block of 64 keys (kb) of head bh. kOwnDsum: the Dsum of each block of queries is
// computed here from its O and dO tiles (O loaded beside dO): 64 x 64 products, nothing next to the
// block's four 64 x 64 x 64 ones, and this pass then needs nothing from dq_block. Else it is read from
// dsum, which dq_block wrote in an earlier launch.
template <bool kOwnDsum>
__device__ __forceinline__ void dkv_block(unsigned char* smem_raw, const Maps& m, int kb, int bh, const __nv_bfloat16* qkv,
                                          const __nv_bfloat16* out, const __nv_bfloat16* dout, const float* stats,
                                          const float* dsum, __nv_bfloat16* dqkv, float* bias_part, int T, int C,
                                          int H, float scale) {
  __nv_bfloat16* sK = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* sV = sK + kTile;
  __nv_bfloat16* sQ = sV + kTile;  // [2][tile]
  __nv_bfloat16* sdO = sQ + 2 * kTile;
  __nv_bfloat16* sO = sdO + 2 * kTile;                                     // [2][tile] (kOwnDsum)
  float* sL = reinterpret_cast<float*>(sdO + (kOwnDsum ? 4 : 2) * kTile);  // [2][64] Stats * log2(e)
  float* sD = sL + 2 * kBlk;                                               // [2][64] Dsum
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(sD + 2 * kBlk);  // the buffers' mbarriers
  const int nb = T / kBlk, b = bh / H, h = bh % H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const size_t l3 = size_t(3) * C, row0 = size_t(b) * T;
  (void)out;  // (O's tiles come through the map; the pointer stays for the two-launch kernel's signature)
  const int r0 = int(row0), hc = h * kD;  // the head's first row and column
  // A block of queries' tiles (Q, dO, and O for kOwnDsum) into buffer `buf` by the copy engine (thread 0
  // issues them), and its rows of Stats (and of Dsum without kOwnDsum) by the first 64 threads: the tiles wait
  // on the buffer's mbarrier, the rows on the block barrier after it.
  constexpr unsigned kQBytes = (kOwnDsum ? 3 : 2) * kTileBytes;
  auto load_q = [&](int qb, int buf, bool expect) {
    load_query_tiles(m, sQ, sdO, sO, bar, buf, r0 + qb * kBlk, hc, kOwnDsum, expect);
    if (threadIdx.x < kBlk) {
      sL[buf * kBlk + threadIdx.x] = stats[size_t(bh) * T + size_t(qb) * kBlk + threadIdx.x] * kLog2e;
      if constexpr (!kOwnDsum) sD[buf * kBlk + threadIdx.x] = dsum[size_t(bh) * T + size_t(qb) * kBlk + threadIdx.x];
    }
  };
  init_bars(bar);
  if (threadIdx.x == 0) {  // buffer 0's first fill: K and V, then the first block of queries (announced here)
    mbar_expect(bar, 2 * kTileBytes + kQBytes);
    tma_tile(sK, &m.qkv, bar, C + hc, r0 + kb * kBlk);
    tma_tile(sV, &m.qkv, bar, 2 * C + hc, r0 + kb * kBlk);
  }
  load_q(kb, 0, false);
  const int krow = kb * kBlk + warp * 16 + g;  // this thread's two key rows: krow, krow + 8
  const float sl2 = scale * kLog2e;
  float dk[8][4], dv[8][4];
  zero(dk), zero(dv);
  for (int qb = kb; qb < nb; ++qb) {
    const int i = qb - kb, buf = i & 1;
    if (qb + 1 < nb) load_q(qb + 1, buf ^ 1, true);  // the other buffer is free: the last iteration ended on a barrier
    mbar_wait(bar + buf, unsigned(i >> 1) & 1u);  // this buffer's (i / 2)-th fill has landed
    __syncthreads();  // and its rows of Stats (Dsum), which other threads stored
    const __nv_bfloat16 *q_s = sQ + buf * kTile, *do_s = sdO + buf * kTile;
    const float *l_s = sL + buf * kBlk, *d_s = sD + buf * kBlk;
    if constexpr (kOwnDsum) dsum_rows_shared(sO + buf * kTile, do_s, sD + buf * kBlk);  // read after the barrier below
    float st[8][4], dpt[8][4];
    zero(st), zero(dpt);
    mm_abt(st, sK + warp * 16 * kD, q_s, lane);    // S^T = K . Q^T
    mm_abt(dpt, sV + warp * 16 * kD, do_s, lane);  // dP^T = V . dO^T
    if constexpr (kOwnDsum) __syncthreads();  // this block's Dsum, written by other threads above (the products did not need it)
    softmax_bwd_cols(st, dpt, qb == kb, sl2, l_s, d_s, warp, lane);  // S^T -> P^T, dP^T -> dS^T
    uint32_t pa[4][4], dsa[4][4];
    to_a(st, pa);
    to_a(dpt, dsa);
    mm_ab(dv, pa, do_s, lane);  // dV += P^T . dO
    mm_ab(dk, dsa, q_s, lane);  // dK += dS^T . Q
    __syncthreads();
  }
  __nv_bfloat16* dk_at = dqkv + (row0 + size_t(krow) - g) * l3 + C + size_t(h) * kD;
  // the tiles are free (the loop's last barrier): dK staged in the warp's rows of sQ, dV in sdO's
  store_rows_staged(dk_at, l3, dk, scale, sQ + warp * 16 * kD, lane);
  store_rows_staged(dk_at + C, l3, dv, 1.f, sdO + warp * 16 * kD, lane);
  if (bias_part) {  // dK's sums by threads 0..63, dV's by 64..127 (8 x 64 floats in sK's tile)
    float* red = reinterpret_cast<float*>(smem_raw);
    warp_col_sums(dk, scale, red + warp * kBlk, lane);
    warp_col_sums(dv, 1.f, red + (kWarps + warp) * kBlk, lane);
    __syncthreads();
    float* part = bias_part + (size_t(b) * nb + kb) * l3 + C + size_t(h) * kD;
    block_col_sums(red, part, 0);
    block_col_sums(red + kWarps * kBlk, part + C, kBlk);
  }
}

// 3. Both passes in one launch (the default). Grid: (2 * T / 64, B * H); x even: a block of queries, x odd:
// a block of keys, each kind the longest walk first, so the dQ and dK/dV blocks of a head run side by side
// and share its Q, K, V, dO in L2. 168 registers a thread (the dK/dV pass's two accumulators and its P
// and dS) and 66 KB of shared memory (kSmemBytes): 3 CTAs an SM, 12 warps.
__global__ void __launch_bounds__(kThreads, 3) dqkv_kernel(const __grid_constant__ Maps maps, const __nv_bfloat16* qkv, const __nv_bfloat16* out,
                                                        const __nv_bfloat16* dout, const float* stats,
                                                        __nv_bfloat16* dqkv, float* bias_part, int T, int C, int H,
                                                        float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // (runs_here)
  grid_dependency_wait();  // --pdl on: dO is the kernel's before this one (nn/pdl.cuh); what follows is not
                           // a programmatic launch (the finish, cuBLAS's dX), so no launch_dependents
  extern __shared__ __align__(16) unsigned char smem_dyn[];
  unsigned char* smem_raw = aligned_smem(smem_dyn);
  const int j = int(blockIdx.x) / 2, bh = int(blockIdx.y);
  if (blockIdx.x % 2 == 0)
    dq_block(smem_raw, maps, T / kBlk - 1 - j, bh, qkv, out, dout, stats, nullptr, dqkv, bias_part, T, C, H, scale);
  else
    dkv_block<true>(smem_raw, maps, j, bh, qkv, out, dout, stats, nullptr, dqkv, bias_part, T, C, H, scale);
#endif
}

// 4. The first version's two launches, kept to measure the one launch against (Model::flash_two_launches,
// dev/attention.cu's row "... two launches"): dq_kernel first, since it writes Dsum for dkv_kernel. Grid:
// (T / 64, B * H), x = 0 the longest walk. Each has its own registers (128 and 168: 4 and 3 CTAs an SM).
__global__ void __launch_bounds__(kThreads, 4) dq_kernel(const __grid_constant__ Maps maps, const __nv_bfloat16* qkv, const __nv_bfloat16* out,
                                                      const __nv_bfloat16* dout, const float* stats, float* dsum,
                                                      __nv_bfloat16* dqkv, float* bias_part, int T, int C, int H,
                                                      float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // (runs_here)
  extern __shared__ __align__(16) unsigned char smem_dyn[];
  unsigned char* smem_raw = aligned_smem(smem_dyn);
  dq_block(smem_raw, maps, T / kBlk - 1 - int(blockIdx.x), int(blockIdx.y), qkv, out, dout, stats, dsum, dqkv, bias_part,
           T, C, H, scale);
#endif
}
__global__ void __launch_bounds__(kThreads, 3) dkv_kernel(const __grid_constant__ Maps maps, const __nv_bfloat16* qkv, const __nv_bfloat16* dout,
                                                       const float* stats, const float* dsum, __nv_bfloat16* dqkv,
                                                       float* bias_part, int T, int C, int H, float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // (runs_here)
  extern __shared__ __align__(16) unsigned char smem_dyn[];
  unsigned char* smem_raw = aligned_smem(smem_dyn);
  dkv_block<false>(smem_raw, maps, int(blockIdx.x), int(blockIdx.y), qkv, nullptr, dout, stats, dsum, dqkv, bias_part, T,
                   C, H, scale);
#endif
}
// their dynamic shared memory: dq_block's six tiles and 64 floats; dkv_block's without the O tiles
constexpr int kSmemTwoLaunches = 1024 + (2 + 2 * 2) * kTile * 2 + 2 * 2 * kBlk * 4 + 2 * 8;

}  // namespace flash
}  // namespace k
