// Step 2: global-memory coalescing. The same arithmetic as step 1; only the mapping of
// threads to elements changes: threadIdx.x now walks along a *row* of C.
//
// A warp's 32 threads then read one element of A (the same address: a broadcast), 32
// consecutive floats of B (one 128-byte line) and write 32 consecutive floats of C.
// The memory system serves a warp's request in as few 32-byte sectors as the addresses
// allow, so this alone moves far fewer bytes per useful FLOP.
#pragma once
#include "check.cuh"

__global__ void sgemm_02_coalesced(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                                   float* __restrict__ C) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[size_t(row) * K + k] * B[size_t(k) * N + col];
    C[size_t(row) * N + col] = acc;
  }
}

inline void run_02_coalesced(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  dim3 block(32, 32);
  dim3 grid(ceil_div(N, 32), ceil_div(M, 32));
  sgemm_02_coalesced<<<grid, block, 0, s>>>(M, N, K, A, B, C);
  LAUNCH_CHECK();
}
