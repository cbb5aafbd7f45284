// Step 1: naive. One thread per element of C; every operand comes from global memory.
//
// threadIdx.x walks down a *column* of C (consecutive threads = consecutive rows), the
// "natural" mapping if you think of (x, y) as (row, col). Neighbouring threads then read
// A at addresses K floats apart and write C at addresses N floats apart: every warp
// access touches 32 different cache lines. Step 2 fixes only that.
#pragma once
#include "check.cuh"

__global__ void sgemm_01_naive(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                               float* __restrict__ C) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[size_t(row) * K + k] * B[size_t(k) * N + col];
    C[size_t(row) * N + col] = acc;
  }
}

inline void run_01_naive(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  dim3 block(32, 32);
  dim3 grid(ceil_div(M, 32), ceil_div(N, 32));
  sgemm_01_naive<<<grid, block, 0, s>>>(M, N, K, A, B, C);
  LAUNCH_CHECK();
}
