// Step 9: tensor cores through WMMA, bf16 inputs, fp32 accumulation, bf16 output.
//
// From here on the problem is C = A * B^T with B stored N x K (the layout of a linear
// layer's weight, y = x W^T, and the one tensor cores read most directly: both operands
// K-contiguous). Each warp issues wmma::mma_sync on 16x16x16 fragments; the compiler
// turns each into HMMA instructions, where one instruction does the work of 512 FFMAs
// (16 x 8 x 16 multiply-adds per warp).
//
// Block tile 128x128, K step 32, 8 warps of 64x32 (4x2 fragments each). Tiles are staged
// in shared memory with rows padded by 8 bf16 (16 bytes) so that the 8 rows a fragment
// load touches fall in different banks; loads are 16-byte vectors, double-buffered through
// registers as in step 7. The epilogue goes through shared memory to convert fp32
// fragments to bf16 and to write only the in-range part of edge tiles.
#pragma once
#include <cuda_bf16.h>
#include <mma.h>

#include "check.cuh"

namespace wmma_gemm {
using bf16 = __nv_bfloat16;
constexpr int BM = 128, BN = 128, BK = 32, WM = 64, WN = 32, NT = 256;
constexpr int LDS = BK + 8;  // padded row length in shared memory, in elements

// One ROWS x BK tile of a K-contiguous matrix: 8 bf16 (16 bytes) per vector.
struct Loader {
  static constexpr int kVecs = BM * BK / 8 / NT;  // 2 per thread (BM == BN)
  uint4 v[kVecs];
  __device__ __forceinline__ void load(const bf16* __restrict__ src, int rows, int K, int r0, int k0, bool vec_ok) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      const int g = threadIdx.x + j * NT;
      const int r = r0 + g / (BK / 8), c = k0 + 8 * (g % (BK / 8));
      if (vec_ok && r < rows && c + 7 < K) {
        v[j] = *reinterpret_cast<const uint4*>(src + size_t(r) * K + c);
      } else {
        bf16 t[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) t[e] = (r < rows && c + e < K) ? src[size_t(r) * K + c + e] : __float2bfloat16(0.f);
        v[j] = *reinterpret_cast<const uint4*>(t);
      }
    }
  }
  __device__ __forceinline__ void store(bf16* dst) const {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      const int g = threadIdx.x + j * NT;
      *reinterpret_cast<uint4*>(dst + (g / (BK / 8)) * LDS + 8 * (g % (BK / 8))) = v[j];
    }
  }
};

__global__ void __launch_bounds__(NT)
    gemm_09_wmma(int M, int N, int K, const bf16* __restrict__ A, const bf16* __restrict__ Bt, bf16* __restrict__ C) {
  using namespace nvcuda;
  __shared__ __align__(128) bf16 smem[2 * (BM + BN) * LDS];
  bf16* const Asm = smem;                 // buffer b: Asm + b * BM * LDS
  bf16* const Bsm = smem + 2 * BM * LDS;  // buffer b: Bsm + b * BN * LDS
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wrow = warp / (BN / WN), wcol = warp % (BN / WN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const bool vec_ok = K % 8 == 0;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[WM / 16][WN / 16];
#pragma unroll
  for (int i = 0; i < WM / 16; ++i)
#pragma unroll
    for (int j = 0; j < WN / 16; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  Loader la, lb;
  la.load(A, M, K, row0, 0, vec_ok);
  lb.load(Bt, N, K, col0, 0, vec_ok);
  la.store(Asm);
  lb.store(Bsm);
  __syncthreads();
  const int ktiles = ceil_div(K, BK);
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) {
      la.load(A, M, K, row0, (kt + 1) * BK, vec_ok);
      lb.load(Bt, N, K, col0, (kt + 1) * BK, vec_ok);
    }
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa[WM / 16];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb[WN / 16];
#pragma unroll
      for (int i = 0; i < WM / 16; ++i)
        wmma::load_matrix_sync(fa[i], Asm + cur * BM * LDS + (wrow * WM + i * 16) * LDS + kk, LDS);
        // B^T stored N x K row-major is B stored K x N column-major: a col_major fragment.
#pragma unroll
      for (int j = 0; j < WN / 16; ++j)
        wmma::load_matrix_sync(fb[j], Bsm + cur * BN * LDS + (wcol * WN + j * 16) * LDS + kk, LDS);
#pragma unroll
      for (int i = 0; i < WM / 16; ++i)
#pragma unroll
        for (int j = 0; j < WN / 16; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    if (more) {
      la.store(Asm + (cur ^ 1) * BM * LDS);
      lb.store(Bsm + (cur ^ 1) * BN * LDS);
    }
    __syncthreads();
  }
  // Epilogue: each warp stages one 16x16 fp32 fragment at a time in its own 1 KiB of the
  // (now free) shared tiles, then writes the in-range elements as bf16.
  float* scratch = reinterpret_cast<float*>(smem) + warp * 256;
#pragma unroll
  for (int i = 0; i < WM / 16; ++i)
#pragma unroll
    for (int j = 0; j < WN / 16; ++j) {
      wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int r = row0 + wrow * WM + i * 16 + e / 16, c = col0 + wcol * WN + j * 16 + e % 16;
        if (r < M && c < N) C[size_t(r) * N + c] = __float2bfloat16(scratch[e]);
      }
      __syncwarp();
    }
}
}  // namespace wmma_gemm

inline void run_09_wmma(int M, int N, int K, const __nv_bfloat16* A, const __nv_bfloat16* Bt, __nv_bfloat16* C,
                        cudaStream_t s) {
  using namespace wmma_gemm;
  dim3 grid(ceil_div(N, BN), ceil_div(M, BM));
  gemm_09_wmma<<<grid, NT, 0, s>>>(M, N, K, A, Bt, C);
  LAUNCH_CHECK();
}
