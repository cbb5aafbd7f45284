// Variant 9: variant 8 with our own batched SIMT GEMM in place of cuBLAS.
//
// The 36 GEMMs of F(4x4) are short in the reduction (C = 64 at ResNet's first stage: four k steps
// of 16) and wide in the tiles (T = 6272 at 32x64x56x56), and they all have the same shape: one
// launch covers them, blockIdx.z picking the GEMM. The GEMM is day10's recipe, re-written for
// this layout: a BM x BN block tile, k step 16, each thread an 8 x 8 patch of outputs read from
// shared memory as four LDS.128 per k (two of A, two of B: the thread's rows and columns are two
// groups of 4, half a tile apart, so neighbouring threads read neighbouring float4 of a row, with
// no bank conflicts).
//
// What is new against day10: both operands are stored k-major (variant 8's layout keeps U
// transposed), so each shared tile is a straight copy of global memory, and the copy is
// cp.async (sm_80+): global to shared without passing through registers. A first version staged
// the next tile in registers as day10's step 7 does (16-32 per thread); with the 64 accumulators
// ptxas then needed more than the 128 registers a thread may have at 2 blocks of 256 per SM, and
// spilled. With cp.async the next tile is in flight into the other shared buffer while this one
// is used, and the registers hold only accumulators and fragments.
//
// Because the layout pads the reduction dimension to a multiple of 16 (with zeros) and rows and
// tiles to a multiple of 4, the loop has no bounds tests; a float4 that lies past the padded edge
// is zero-filled by cp.async itself (source size 0). The block shape is a template: 128 x 128 for
// many output channels, 64 x 128 when K = 64 (a 128-row tile would compute half zeros), and the
// program times each shape and lets the fastest stand for the variant.
#pragma once
#include "8_winograd_4x4.cuh"

namespace bgemm {
constexpr int BK = 16;

// 16 bytes global -> shared, asynchronously; zero-filled instead when !valid (nothing is read).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most one group (the most recent) is still in flight.
__device__ __forceinline__ void cp_async_wait_all_but_one() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
}  // namespace bgemm

// C[b] (M x N, row-major) = At[b]^T * B[b], with At (K x lda, row-major: A transposed, lda >= M
// and lda % 4 == 0) and B (K x N, row-major), consecutive GEMMs sA, sB, sC floats apart. Needs
// K % 16 == 0, kchunk % 16 == 0, N % 4 == 0 and 16-byte aligned bases.
// SPLIT (variant 11): blockIdx.z = part * batch + b does GEMM b's reduction rows
// [part * kchunk, (part + 1) * kchunk) and writes its partial product to C + blockIdx.z * sC.
// Without SPLIT (variant 9) blockIdx.z = b and batch, kchunk are unused. The two are kept apart
// because ptxas gives the SPLIT kernel about 150 registers where it can (-Xptxas -v), and at the
// 128 that 8 blocks of 64 threads per SM leave, it spills; variant 9 keeps its 128 and no spills,
// variant 11 runs fewer blocks per SM instead (its MINB).
template <int BM, int BN, int MINB, bool SPLIT = false>
__global__ void __launch_bounds__(BM* BN / 64, MINB)
    sgemm_09_batched(int M, int N, int K, const float* __restrict__ At, int lda, long long sA,
                     const float* __restrict__ B, long long sB, float* __restrict__ C, long long sC, int batch,
                     int kchunk) {
  using namespace bgemm;
  constexpr int NT = BM * BN / 64;
  constexpr int A4 = BK * BM / 4 / NT, B4 = BK * BN / 4 / NT;  // 16-byte copies per thread per k step
  static_assert(A4 * NT * 4 == BM * BK && B4 * NT * 4 == BK * BN, "whole float4 copies per thread");
  __shared__ __align__(16) float As[2][BK][BM];  // As[k][m]
  __shared__ __align__(16) float Bs[2][BK][BN];  // Bs[k][n]
  const int g = SPLIT ? int(blockIdx.z) % batch : int(blockIdx.z);
  const int k_begin = SPLIT ? int(blockIdx.z) / batch * kchunk : 0;
  At += g * sA + size_t(k_begin) * lda;
  B += g * sB + size_t(k_begin) * N;
  C += blockIdx.z * sC;
  const int tid = threadIdx.x, tx = tid % (BN / 8), ty = tid / (BN / 8);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  auto load = [&](int k0, int buf) {
#pragma unroll
    for (int i = 0; i < A4; ++i) {
      const int e = tid + i * NT, k = e / (BM / 4), m = 4 * (e % (BM / 4));
      const bool ok = m0 + m < lda;
      cp_async16(&As[buf][k][m], ok ? At + size_t(k0 + k) * lda + m0 + m : At, ok);
    }
#pragma unroll
    for (int i = 0; i < B4; ++i) {
      const int e = tid + i * NT, k = e / (BN / 4), n = 4 * (e % (BN / 4));
      const bool ok = n0 + n < N;
      cp_async16(&Bs[buf][k][n], ok ? B + size_t(k0 + k) * N + n0 + n : B, ok);
    }
    cp_async_commit();
  };

  float acc[8][8] = {{0.f}};
  // A part past the end (C not a multiple of the parts) has no k steps and writes zeros.
  const int ktiles = SPLIT ? max(0, min(kchunk, K - k_begin)) / BK : K / BK;
  if (!SPLIT || ktiles > 0) load(0, 0);
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    // The next tile goes into the other buffer, which every thread finished reading before the
    // barrier that closed the previous step. (An empty group on the last step keeps the wait uniform.)
    if (kt + 1 < ktiles)
      load((kt + 1) * BK, cur ^ 1);
    else
      cp_async_commit();
    cp_async_wait_all_but_one();  // this thread's copies of tile kt have landed...
    __syncthreads();              // ...and everyone's
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[8], b[8];
      *reinterpret_cast<float4*>(&a[0]) = *reinterpret_cast<const float4*>(&As[cur][kk][4 * ty]);
      *reinterpret_cast<float4*>(&a[4]) = *reinterpret_cast<const float4*>(&As[cur][kk][BM / 2 + 4 * ty]);
      *reinterpret_cast<float4*>(&b[0]) = *reinterpret_cast<const float4*>(&Bs[cur][kk][4 * tx]);
      *reinterpret_cast<float4*>(&b[4]) = *reinterpret_cast<const float4*>(&Bs[cur][kk][BN / 2 + 4 * tx]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();  // buffer cur is refilled in the next step
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int m = m0 + (i < 4 ? 4 * ty + i : BM / 2 + 4 * ty + i - 4);
    if (m >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = n0 + h * (BN / 2) + 4 * tx;
      if (n < N)
        *reinterpret_cast<float4*>(C + size_t(m) * N + n) =
            make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]);
    }
  }
}

// Blocks of one launch of the 36 GEMMs (the results report it: a layer with few tiles has few).
template <int BM, int BN>
inline long long gemm_blocks(const ConvShape& s) {
  return 36LL * ceil_div(wino4::tiles_padded(s), BN) * ceil_div(s.K, BM);
}

// The 36 GEMMs M[ij] (K x Tp) = U[ij]^T (K x Cp) * V[ij] (Cp x Tp) in one launch.
template <int BM, int BN, int MINB>
inline void wino4_gemm_own(const ConvShape& s, const Wino4Bufs& b, cudaStream_t st) {
  const int Tp = wino4::tiles_padded(s), Cp = wino4::c_padded(s);
  const dim3 grid(unsigned(ceil_div(Tp, BN)), unsigned(ceil_div(s.K, BM)), 36);
  const int Kp = wino4::k_padded(s);
  sgemm_09_batched<BM, BN, MINB><<<grid, BM * BN / 64, 0, st>>>(s.K, Tp, Cp, b.U, Kp, (long long)Cp * Kp, b.V,
                                                                (long long)Cp * Tp, b.M, (long long)s.K * Tp, 36, Cp);
  LAUNCH_CHECK();
}

// ws: wino4::workspace_bytes(s) bytes.
template <int BM, int BN, int MINB>
inline void run_09_winograd4_own(const ConvShape& s, const float* x, const float* w, float* y, float* ws,
                                 cudaStream_t st) {
  const Wino4Bufs b(s, ws);
  wino4_filter(s, w, b.U, st);
  wino4_input(s, x, b.V, st);
  wino4_gemm_own<BM, BN, MINB>(s, b, st);
  wino4_output(s, b.M, y, st);
}
