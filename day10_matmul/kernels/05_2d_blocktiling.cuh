// Step 5: 2D register blocking. Each thread computes a TM x TN = 8 x 8 patch of C.
//
// Per k, a thread loads TM values of A and TN values of B into registers and does
// TM*TN = 64 FMAs with them (an outer product): 16 shared loads for 64 FMAs, against
// 9 for 8 in step 4. Block tile 128x128, K step 8, 256 threads; each thread loads
// 4 elements of each tile per step.
#pragma once
#include "check.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM * BN) / (TM * TN))
    sgemm_05_2d(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
  constexpr int NT = (BM * BN) / (TM * TN);
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  const int tcol = threadIdx.x % (BN / TN), trow = threadIdx.x / (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {{0.f}};
  float ra[TM], rb[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = threadIdx.x; i < BM * BK; i += NT) {  // A tile: BM rows x BK cols
      const int r = i / BK, c = i % BK;
      As[i] = (row0 + r < M && k0 + c < K) ? A[size_t(row0 + r) * K + k0 + c] : 0.f;
    }
#pragma unroll
    for (int i = threadIdx.x; i < BK * BN; i += NT) {  // B tile: BK rows x BN cols
      const int r = i / BN, c = i % BN;
      Bs[i] = (k0 + r < K && col0 + c < N) ? B[size_t(k0 + r) * N + col0 + c] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; ++i) ra[i] = As[(trow * TM + i) * BK + k];
#pragma unroll
      for (int j = 0; j < TN; ++j) rb[j] = Bs[k * BN + tcol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int r = row0 + trow * TM + i, c = col0 + tcol * TN + j;
      if (r < M && c < N) C[size_t(r) * N + c] = acc[i][j];
    }
}

inline void run_05_2d_blocktiling(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  dim3 grid(ceil_div(N, BN), ceil_div(M, BM));
  sgemm_05_2d<BM, BN, BK, TM, TN><<<grid, (BM * BN) / (TM * TN), 0, s>>>(M, N, K, A, B, C);
  LAUNCH_CHECK();
}
