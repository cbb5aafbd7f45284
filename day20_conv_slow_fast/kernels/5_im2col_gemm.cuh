// Variant 5: im2col + cuBLAS SGEMM. Convolution *is* a matrix product once the input is
// unrolled: for image n, col_n[(c*R + r)*S + s][p*Q + q] = x[n][c][p*stride-pad+r*dil][q*stride-pad+s*dil]
// (0 in the padding), and y_n (K x PQ) = W (K x CRS) * col_n (CRS x PQ). The GEMM is then
// cuBLAS's problem, at cuBLAS speed.
//
// The price is memory: col holds every input value R*S times (divided by stride^2). For
// N = 32, C = 64, 56x56, 3x3 that is 32 * 576 * 3136 floats = 231 MB, nine times the input,
// written and then read once more. Variant 6 computes the same GEMM without storing it.
#pragma once
#include <cublas_v2.h>

#include "conv_shape.h"
#include "check.cuh"

inline size_t im2col_bytes(const ConvShape& s) { return sizeof(float) * size_t(s.N) * s.C * s.R * s.S * s.P() * s.Q(); }

__global__ void im2col_kernel(ConvShape s, const float* __restrict__ x, float* __restrict__ col) {
  const int P = s.P(), Q = s.Q();
  const size_t PQ = size_t(P) * Q, CRS = size_t(s.C) * s.R * s.S;
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;  // over N * CRS * PQ, pq fastest
  if (i >= size_t(s.N) * CRS * PQ) return;
  const size_t pq = i % PQ, crs = (i / PQ) % CRS;
  const int n = int(i / (PQ * CRS));
  const int t = int(crs % s.S), r = int((crs / s.S) % s.R), c = int(crs / (size_t(s.S) * s.R));
  const int p = int(pq / Q), q = int(pq % Q);
  const int h = p * s.stride - s.pad + r * s.dil, v = q * s.stride - s.pad + t * s.dil;
  col[i] = (h >= 0 && h < s.H && v >= 0 && v < s.W) ? x[((size_t(n) * s.C + c) * s.H + h) * s.W + v] : 0.f;
}

// y_n = W * col_n for every n in one strided-batched call. Row-major through cuBLAS's
// column-major lens: y_n^T (PQ x K) = col_n^T (PQ x CRS) * W^T (CRS x K).
inline void run_05_im2col(cublasHandle_t h, const ConvShape& s, const float* x, const float* w, float* y, float* col,
                          cudaStream_t st) {
  const size_t n_el = size_t(s.N) * s.C * s.R * s.S * s.P() * s.Q();
  im2col_kernel<<<unsigned(ceil_div<size_t>(n_el, 256)), 256, 0, st>>>(s, x, col);
  LAUNCH_CHECK();
  const int PQ = s.P() * s.Q(), CRS = s.C * s.R * s.S;
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasSetStream(h, st));
  CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, PQ, s.K, CRS, &one, col, PQ, (long long)CRS * PQ,
                                         w, CRS, 0, &zero, y, PQ, (long long)s.K * PQ, s.N));
}
