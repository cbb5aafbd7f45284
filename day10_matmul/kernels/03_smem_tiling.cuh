// Step 3: shared-memory tiling. A 32x32 block of threads computes a 32x32 tile of C.
// It walks along K in steps of 32: the block loads a 32x32 tile of A and of B into
// shared memory once (each thread one element of each), then every thread reads the
// 32 values it needs from shared memory. Each global element is now loaded by one
// thread and used by 32: global traffic drops 32x compared with step 2.
//
// Out-of-range elements (M, N, K not multiples of 32) are loaded as 0, which adds
// nothing to the dot products, and out-of-range outputs are not written.
#pragma once
#include "check.cuh"

template <int TILE>
__global__ void sgemm_03_smem(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                              float* __restrict__ C) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[size_t(row) * K + k0 + tx] : 0.f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[size_t(k0 + ty) * N + col] : 0.f;
    __syncthreads();  // the tile is complete before anyone reads it
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();  // everyone is done with the tile before it is overwritten
  }
  if (row < M && col < N) C[size_t(row) * N + col] = acc;
}

inline void run_03_smem_tiling(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  constexpr int T = 32;
  dim3 block(T, T);
  dim3 grid(ceil_div(N, T), ceil_div(M, T));
  sgemm_03_smem<T><<<grid, block, 0, s>>>(M, N, K, A, B, C);
  LAUNCH_CHECK();
}
