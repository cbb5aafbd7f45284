// Step 6: 128-bit loads, and the A tile stored transposed in shared memory.
//
// Same tiling as step 5 (128x128 block, 8x8 per thread). Two changes:
//  - global loads are float4 (LDG.128): one instruction moves 16 bytes, a quarter of the
//    load instructions and address computations of step 5;
//  - the A tile is written transposed, As[k][m], so the TM = 8 values a thread needs for
//    one k are contiguous and come in as two LDS.128 instead of eight LDS.32 (B already
//    was contiguous along n).
#pragma once
#include "tile_io.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM * BN) / (TM * TN))
    sgemm_06_vec(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
  constexpr int NT = (BM * BN) / (TM * TN);
  __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
  __shared__ __align__(16) float Bs[BK * BN];  // Bs[k * BN + n]
  const int tcol = threadIdx.x % (BN / TN), trow = threadIdx.x / (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const bool a_vec = K % 4 == 0, b_vec = N % 4 == 0;
  TileLoader<BM, BK, NT> la;
  TileLoader<BK, BN, NT> lb;
  float acc[TM][TN] = {{0.f}};
  float ra[TM], rb[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    la.load(A, M, K, row0, k0, a_vec);
    lb.load(B, K, N, k0, col0, b_vec);
    la.template store_transposed<BM>(As);
    lb.store(Bs);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; i += 4)
        *reinterpret_cast<float4*>(&ra[i]) = *reinterpret_cast<const float4*>(&As[k * BM + trow * TM + i]);
#pragma unroll
      for (int j = 0; j < TN; j += 4)
        *reinterpret_cast<float4*>(&rb[j]) = *reinterpret_cast<const float4*>(&Bs[k * BN + tcol * TN + j]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) store_row<TN>(C, M, N, row0 + trow * TM + i, col0 + tcol * TN, acc[i], N % 4 == 0);
}

inline void run_06_vectorized(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  dim3 grid(ceil_div(N, BN), ceil_div(M, BM));
  sgemm_06_vec<BM, BN, BK, TM, TN><<<grid, (BM * BN) / (TM * TN), 0, s>>>(M, N, K, A, B, C);
  LAUNCH_CHECK();
}
