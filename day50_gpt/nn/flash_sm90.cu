// day50_gpt/nn/flash_sm90.cu: our flash backward (nn/kernels/flash_bwd.cuh says what it computes and why
// in two passes) with its 64 x 64 x 64 block products on wgmma, Hopper's warpgroup tensor-core instruction,
// in place of mma.sync. Built for sm_90a (Makefile: SM90A_UNITS); elsewhere the kernel is empty and
// flash90::available() says no.
//
// Why: Nsight Compute on the mma.sync kernel (H200) showed the tensor pipe active 30% of the time, the
// warps mostly waiting to issue: per 16 of k each warp issues 5 ldmatrix and 8 mma.sync for one 16 x 64
// slice of a product, and 168 registers a thread leave 3 blocks (12 warps) an SM to hide that. A block
// of 64 rows is exactly one warpgroup's wgmma m64n64k16: the four warps' 64 rows at once, B read by the
// tensor cores straight from the swizzled tile the copy engine wrote (no ldmatrix, no B registers), A from
// shared memory too for the first two products of each pass, or from registers for the products whose A is
// P or dS (the accumulator of the product before, rounded to bf16: flash_parts.cuh's to_a, unchanged).
//   dq pass:   S = Q.K^T, dP = dO.V^T   (A = Q, dO; B = K, V: both K-major, [row][d])
//              dQ += dS.K               (A = dS in registers; B = K read as [key][d]: N-major, "transposed")
//   dkv pass:  S^T = K.Q^T, dP^T = V.dO^T            (A = K, V; B = Q, dO, K-major)
//              dV += P^T.dO, dK += dS^T.Q            (A in registers; B = dO, Q as [query][d]: N-major)
// Everything else (the walk, the copy engine's double buffers, the mask, the exponentials, Dsum, the
// staged stores) is the mma.sync kernel's code, shared through flash_parts.cuh, and the accumulator layout
// is the same warp by warp, so dQ, dK and dV are the same up to the order of the tensor cores' additions.
// Two differences: the dQ pass takes O by the copy engine and Dsum from the shared tiles (dq_block says
// why), and the bias partials' column sums are read back from the staged rows (staged_col_sums: 16 reads
// and 32 adds a lane) where the mma.sync kernel shuffles the accumulators (warp_col_sums), so they add the
// same bf16 values in another order.
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>

#include "check.cuh"
#include "flash_sm90.h"
#include "gemm_sm90.h"  // sm90::available: the same build flags
#include "hopper.cuh"
#include "pdl.cuh"

namespace flash90 {
namespace {
using namespace k;  // the mbarriers and PDL's wait (nn/kernels/async.cuh)
using namespace k::flash;
using bf16 = __nv_bfloat16;

#if HOPPER_ENABLED
// Shared-memory descriptors of a 64 x 64 tile in the copy engine's 128-byte swizzle (rows of 128 bytes, 8-row
// groups 1,024 bytes apart), 16 of k at a time:
//   K-major (the tile's rows are the product's M or N, its columns k): k-step kk starts 32 bytes into each
//   row (hopper::smem_desc, as day10's GEMM steps it);
//   N-major (the tile's rows are k, its columns N: B = the tile as stored, not transposed): k-step kk is rows
//   16 kk.., 2,048 bytes on; the 64 columns are one 128-byte swizzle atom, so the leading offset (atom to
//   atom along N) is never used; the stride offset is the 8-row group's 1,024 bytes.
// Each is computed once a tile, at k-step 0; a k-step adds its offset in the descriptor's 16-byte units (2 or
// 128: the tiles are 1,024-byte aligned and end below 256 KB, so nothing carries out of the address field).
// (Computed for every k-step, the address conversions and bit operations were among the most executed
// lines in Nsight Compute: results/nvidia-h200/day50_flash_wgmma_dev/ncu_wgmma_lines.txt.)
__device__ __forceinline__ uint64_t desc_k(const bf16* tile) { return hopper::smem_desc(tile); }
__device__ __forceinline__ uint64_t desc_n(const bf16* tile) {
  const uint64_t addr = hopper::smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t(kTileBytes >> 4) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}
constexpr uint64_t kStepK = 32 >> 4, kStepN = (16 * kD * 2) >> 4;  // one k-step of 16: 32 bytes, or 16 rows

#define FLASH90_ACC(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define FLASH90_D                                                                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31}"
// d (64 x 64 fp32, the warp's 16 rows as c[8][4]) (+)= A (64 x 16 from shared memory, K-major) . B (16 x 64 from
// shared memory, K-major). accumulate 0: d = A.B (the first k-step, so the accumulator needs no zeroing).
__device__ __forceinline__ void wg_ss(float (&d)[8][4], uint64_t da, uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FLASH90_D ", %32, %33, p, 1, 1, 0, 0;\n}\n"
      : FLASH90_ACC(0), FLASH90_ACC(1), FLASH90_ACC(2), FLASH90_ACC(3), FLASH90_ACC(4), FLASH90_ACC(5),
        FLASH90_ACC(6), FLASH90_ACC(7)
      : "l"(da), "l"(db), "r"(accumulate));
}
// d += A (64 x 16 in registers: this warp's 16 rows, mma.sync's A fragment) . B (16 x 64, shared, N-major).
__device__ __forceinline__ void wg_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FLASH90_D ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : FLASH90_ACC(0), FLASH90_ACC(1), FLASH90_ACC(2), FLASH90_ACC(3), FLASH90_ACC(4), FLASH90_ACC(5),
        FLASH90_ACC(6), FLASH90_ACC(7)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
#undef FLASH90_ACC
#undef FLASH90_D
// The compiler sees a wgmma's asm write its accumulator at once; the tensor cores write it later, by the
// wait. Tying each register to a point after the wait keeps the compiler from reading one before it.
__device__ __forceinline__ void settle(float (&d)[8][4]) {
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}
// d (=) the 64 x 64 x 64 product of two K-major tiles (4 k-steps), issued, not waited for.
__device__ __forceinline__ void prod_ss(float (&d)[8][4], const bf16* a, const bf16* b) {
  const uint64_t da = desc_k(a), db = desc_k(b);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wg_ss(d, da + kk * kStepK, db + kk * kStepK, kk > 0);
}
// d += A (registers, 4 k-steps) . B (an N-major tile), issued, not waited for.
__device__ __forceinline__ void prod_rs(float (&d)[8][4], const uint32_t (&a)[4][4], const bf16* b) {
  const uint64_t db = desc_n(b);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wg_rs(d, a[kk], db + kk * kStepN);
}

// 1. dQ of one block of 64 queries (qb) of head bh: flash_bwd.cuh's dq_block, its products on wgmma. One
// difference: O's tile comes by the copy engine with the first fill, and Dsum is taken from the shared tiles
// (as the dK/dV pass does), where dq_block reads O and dO from global memory while the tiles are in flight:
// in Nsight Compute those loads were the kernel's most sampled stall (ncu_wgmma_lines.txt). Both buffers'
// first fills are issued at the start, and each buffer is refilled as soon as the products have read it.
__device__ __forceinline__ void dq_block(unsigned char* smem_raw, const Maps& m, int qb, int bh, const float* stats,
                                         bf16* dqkv, float* bias_part, int T, int C, int H, float scale) {
  bf16* sQ = reinterpret_cast<bf16*>(smem_raw);
  bf16* sdO = sQ + kTile;
  bf16* sK = sdO + kTile;  // [2][tile]
  bf16* sV = sK + 2 * kTile;
  bf16* sO = sV + 2 * kTile;
  float* sDs = reinterpret_cast<float*>(sO + kTile);
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(sDs + kBlk);
  const int nb = T / kBlk, b = bh / H, h = bh % H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const size_t l3 = size_t(3) * C, row0 = size_t(b) * T;
  const int r0 = int(row0), hc = h * kD;
  auto load_kv = [&](int kb, int buf, bool expect) {  // block of keys kb into buffer buf (thread 0)
    if (expect) mbar_expect(bar + buf, 2 * kTileBytes);  // (one arrive a phase: the first fill's is below)
    tma_tile(sK + buf * kTile, &m.qkv, bar + buf, C + hc, r0 + kb * kBlk);
    tma_tile(sV + buf * kTile, &m.qkv, bar + buf, 2 * C + hc, r0 + kb * kBlk);
  };
  init_bars(bar);
  if (threadIdx.x == 0) {
    mbar_expect(bar, 5 * kTileBytes);  // Q, dO, O and the first K, V
    tma_tile(sQ, &m.qkv, bar, hc, r0 + qb * kBlk);
    tma_tile(sdO, &m.dout, bar, hc, r0 + qb * kBlk);
    tma_tile(sO, &m.o, bar, hc, r0 + qb * kBlk);
    load_kv(0, 0, false);
    if (qb >= 1) load_kv(1, 1, true);
  }
  const int qrow = qb * kBlk + warp * 16 + g;
  const float sl2 = scale * kLog2e;
  const float lse0 = stats[size_t(bh) * T + qrow] * kLog2e, lse1 = stats[size_t(bh) * T + qrow + 8] * kLog2e;
  mbar_wait(bar, 0);  // the first fill: Q, dO, O and the first K, V
  dsum_rows_shared(sO, sdO, sDs);
  __syncthreads();
  const float ds0 = sDs[warp * 16 + g], ds1 = sDs[warp * 16 + g + 8];
  float dq[8][4];
  zero(dq);
  for (int kb = 0; kb <= qb; ++kb) {
    const int buf = kb & 1;
    mbar_wait(bar + buf, unsigned(kb >> 1) & 1u);
    const bf16 *k_s = sK + buf * kTile, *v_s = sV + buf * kTile;
    float sc[8][4], dp[8][4];
    hopper::wgmma_fence();
    prod_ss(sc, sQ, k_s);   // S = Q . K^T
    prod_ss(dp, sdO, v_s);  // dP = dO . V^T
    hopper::wgmma_commit();
    hopper::wgmma_wait0();
    settle(sc), settle(dp);
    softmax_bwd_rows(sc, dp, kb == qb, sl2, lse0, lse1, ds0, ds1, warp, lane);  // S -> dS
    uint32_t dsa[4][4];
    to_a(sc, dsa);
    hopper::wgmma_fence();  // dsa and dq, written by this thread, before the tensor cores read them
    prod_rs(dq, dsa, k_s);  // dQ += dS . K
    hopper::wgmma_commit();
    hopper::wgmma_wait0();
    settle(dq);
    __syncthreads();  // every warp is done with this buffer: it takes the block of keys two on
    if (kb + 2 <= qb && threadIdx.x == 0) load_kv(kb + 2, buf, true);
  }
  bf16* dq_at = dqkv + (row0 + size_t(qrow) - g) * l3 + size_t(h) * kD;
  store_rows_staged(dq_at, l3, dq, scale, sK + warp * 16 * kD, lane);
  if (bias_part) {
    float* red = reinterpret_cast<float*>(smem_raw);
    staged_col_sums(sK + warp * 16 * kD, red + warp * kBlk, lane);  // dQ as staged above
    __syncthreads();
    block_col_sums(red, bias_part + (size_t(b) * nb + qb) * l3 + size_t(h) * kD, 0);
  }
}

// 2. dK and dV of one block of 64 keys (kb) of head bh, each block of queries' Dsum from its O and dO tiles:
// flash_bwd.cuh's dkv_block<true>, its products on wgmma.
__device__ __forceinline__ void dkv_block(unsigned char* smem_raw, const Maps& m, int kb, int bh, const float* stats,
                                          bf16* dqkv, float* bias_part, int T, int C, int H, float scale) {
  bf16* sK = reinterpret_cast<bf16*>(smem_raw);
  bf16* sV = sK + kTile;
  bf16* sQ = sV + kTile;  // [2][tile]
  bf16* sdO = sQ + 2 * kTile;
  bf16* sO = sdO + 2 * kTile;
  float* sL = reinterpret_cast<float*>(sO + 2 * kTile);  // [2][64] Stats * log2(e)
  float* sD = sL + 2 * kBlk;                             // [2][64] Dsum
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(sD + 2 * kBlk);
  const int nb = T / kBlk, b = bh / H, h = bh % H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const size_t l3 = size_t(3) * C, row0 = size_t(b) * T;
  const int r0 = int(row0), hc = h * kD;
  constexpr unsigned kQBytes = 3 * kTileBytes;
  auto load_q = [&](int qb, int buf, bool expect) {
    load_query_tiles(m, sQ, sdO, sO, bar, buf, r0 + qb * kBlk, hc, true, expect);
    if (threadIdx.x < kBlk) sL[buf * kBlk + threadIdx.x] = stats[size_t(bh) * T + size_t(qb) * kBlk + threadIdx.x] * kLog2e;
  };
  init_bars(bar);
  if (threadIdx.x == 0) {
    mbar_expect(bar, 2 * kTileBytes + kQBytes);
    tma_tile(sK, &m.qkv, bar, C + hc, r0 + kb * kBlk);
    tma_tile(sV, &m.qkv, bar, 2 * C + hc, r0 + kb * kBlk);
  }
  load_q(kb, 0, false);
  const int krow = kb * kBlk + warp * 16 + g;
  const float sl2 = scale * kLog2e;
  float dk[8][4], dv[8][4];
  zero(dk), zero(dv);
  for (int qb = kb; qb < nb; ++qb) {
    const int i = qb - kb, buf = i & 1;
    if (qb + 1 < nb) load_q(qb + 1, buf ^ 1, true);
    mbar_wait(bar + buf, unsigned(i >> 1) & 1u);
    __syncthreads();  // and its rows of Stats, which other threads stored
    const bf16 *q_s = sQ + buf * kTile, *do_s = sdO + buf * kTile;
    const float *l_s = sL + buf * kBlk, *d_s = sD + buf * kBlk;
    float st[8][4], dpt[8][4];
    hopper::wgmma_fence();
    prod_ss(st, sK, q_s);    // S^T = K . Q^T
    prod_ss(dpt, sV, do_s);  // dP^T = V . dO^T
    hopper::wgmma_commit();
    // Dsum of this block of queries while the tensor cores multiply (the products do not need it)
    dsum_rows_shared(sO + buf * kTile, do_s, sD + buf * kBlk);
    __syncthreads();
    hopper::wgmma_wait0();
    settle(st), settle(dpt);
    softmax_bwd_cols(st, dpt, qb == kb, sl2, l_s, d_s, warp, lane);  // S^T -> P^T, dP^T -> dS^T
    uint32_t pa[4][4], dsa[4][4];
    to_a(st, pa);
    to_a(dpt, dsa);
    hopper::wgmma_fence();
    prod_rs(dv, pa, do_s);  // dV += P^T . dO
    prod_rs(dk, dsa, q_s);  // dK += dS^T . Q
    hopper::wgmma_commit();
    hopper::wgmma_wait0();
    settle(dv), settle(dk);
    __syncthreads();
  }
  bf16* dk_at = dqkv + (row0 + size_t(krow) - g) * l3 + C + size_t(h) * kD;
  store_rows_staged(dk_at, l3, dk, scale, sQ + warp * 16 * kD, lane);
  store_rows_staged(dk_at + C, l3, dv, 1.f, sdO + warp * 16 * kD, lane);
  if (bias_part) {
    float* red = reinterpret_cast<float*>(smem_raw);
    staged_col_sums(sQ + warp * 16 * kD, red + warp * kBlk, lane);             // dK as staged above
    staged_col_sums(sdO + warp * 16 * kD, red + (kWarps + warp) * kBlk, lane);  // dV
    __syncthreads();
    float* part = bias_part + (size_t(b) * nb + kb) * l3 + C + size_t(h) * kD;
    block_col_sums(red, part, 0);
    block_col_sums(red + kWarps * kBlk, part + C, kBlk);
  }
}
#endif  // HOPPER_ENABLED

// 3. Both passes in one launch, as dqkv_kernel: x even a block of queries, x odd a block of keys, the longest
// walks first.
__global__ void __launch_bounds__(kThreads, 3)
    dqkv_wgmma(const __grid_constant__ Maps maps, const float* stats, bf16* dqkv, float* bias_part, int T, int C, int H,
               float scale) {
#if HOPPER_ENABLED
  grid_dependency_wait();  // --pdl on: dO is the kernel's before this one (nn/pdl.cuh)
  extern __shared__ __align__(16) unsigned char smem_dyn[];
  unsigned char* smem_raw = aligned_smem(smem_dyn);
  const int j = int(blockIdx.x) / 2, bh = int(blockIdx.y);
  if (blockIdx.x % 2 == 0)
    dq_block(smem_raw, maps, T / kBlk - 1 - j, bh, stats, dqkv, bias_part, T, C, H, scale);
  else
    dkv_block(smem_raw, maps, j, bh, stats, dqkv, bias_part, T, C, H, scale);
#else
  (void)stats, (void)dqkv, (void)bias_part, (void)T, (void)C, (void)H, (void)scale;
#endif
}
}  // namespace

bool available() { return sm90::available(); }

void dqkv(bool pdl, int B, int H, int T, int C, const Maps& maps, const float* stats, bf16* dqkv_out, float* bias_part,
          float scale, cudaStream_t s) {
  // The shared-memory attribute belongs to a device: set once for each (data parallel runs one model per GPU).
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  {
    static std::mutex mu;
    static std::map<int, bool> ready;
    std::lock_guard<std::mutex> lock(mu);
    if (!ready[dev]) {
      CUDA_CHECK(cudaFuncSetAttribute(dqkv_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
      ready[dev] = true;
    }
  }
  pdl::launch(pdl, dqkv_wgmma, dim3(unsigned(2 * (T / kBlk)), unsigned(B * H)), dim3(kThreads), size_t(kSmemBytes), s,
              maps, stats, dqkv_out, bias_part, T, C, H, scale);
}
}  // namespace flash90
