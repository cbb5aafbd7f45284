// Step 4: 1D register blocking. Each thread now computes TM = 8 outputs of one column.
//
// In step 3 every FMA needed two shared-memory loads (As[ty][k], Bs[k][tx]): the kernel
// is bound by shared-memory bandwidth, not arithmetic. Here a thread loads one value of
// B into a register and reuses it for TM rows: per k, TM FMAs cost TM + 1 shared loads
// instead of 2 TM. Block tile 64x64, K step 8, 512 threads.
#pragma once
#include "check.cuh"

template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__((BM * BN) / TM)
    sgemm_04_1d(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  const int tcol = threadIdx.x % BN, trow = threadIdx.x / BN;  // this thread's TM outputs: rows trow*TM.., col tcol
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  // Loader coordinates: BM*BK == BK*BN == blockDim.x, one element of each tile per thread.
  const int a_r = threadIdx.x / BK, a_c = threadIdx.x % BK;
  const int b_r = threadIdx.x / BN, b_c = threadIdx.x % BN;
  float acc[TM] = {0.f};
  for (int k0 = 0; k0 < K; k0 += BK) {
    As[a_r * BK + a_c] = (row0 + a_r < M && k0 + a_c < K) ? A[size_t(row0 + a_r) * K + k0 + a_c] : 0.f;
    Bs[b_r * BN + b_c] = (k0 + b_r < K && col0 + b_c < N) ? B[size_t(k0 + b_r) * N + col0 + b_c] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float b = Bs[k * BN + tcol];  // one load, reused TM times
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] += As[(trow * TM + i) * BK + k] * b;
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + trow * TM + i, c = col0 + tcol;
    if (r < M && c < N) C[size_t(r) * N + c] = acc[i];
  }
}

inline void run_04_1d_blocktiling(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  constexpr int BM = 64, BN = 64, BK = 8, TM = 8;
  dim3 grid(ceil_div(N, BN), ceil_div(M, BM));
  sgemm_04_1d<BM, BN, BK, TM><<<grid, (BM * BN) / TM, 0, s>>>(M, N, K, A, B, C);
  LAUNCH_CHECK();
}
