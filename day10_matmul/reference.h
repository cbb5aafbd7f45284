// day10_matmul/reference.h: CPU reference GEMMs in double precision (host-only, unit-tested
// by test_reference.cpp). Row-major everywhere:
//   gemm_nn: C[M x N] = A[M x K] * B[K x N]        (the FP32 ladder, steps 1-8)
//   gemm_nt: C[M x N] = A[M x K] * Bt[N x K]^T     (the tensor-core steps 9-10)
// Rows are split over the CPU's threads; each output is an exact-order double sum, so the
// reference's own rounding error (~1e-16 relative) is far below any tolerance used.
#pragma once

#include <algorithm>
#include <thread>
#include <vector>

namespace ref {

template <class F>
void parallel_rows(int M, F&& body) {
  const int nt = std::max(1, std::min<int>(int(std::thread::hardware_concurrency()), M));
  std::vector<std::thread> pool;
  for (int t = 0; t < nt; ++t)
    pool.emplace_back([&, t] {
      for (int i = t; i < M; i += nt) body(i);
    });
  for (auto& th : pool) th.join();
}

inline void gemm_nn(int M, int N, int K, const float* A, const float* B, double* C) {
  parallel_rows(M, [&](int i) {
    double* c = C + size_t(i) * N;
    std::fill(c, c + N, 0.0);
    for (int k = 0; k < K; ++k) {  // i-k-j order: streams rows of B, vectorizes over j
      const double a = A[size_t(i) * K + k];
      const float* b = B + size_t(k) * N;
      for (int j = 0; j < N; ++j) c[j] += a * double(b[j]);
    }
  });
}

inline void gemm_nt(int M, int N, int K, const float* A, const float* Bt, double* C) {
  parallel_rows(M, [&](int i) {
    const float* a = A + size_t(i) * K;
    for (int j = 0; j < N; ++j) {
      const float* b = Bt + size_t(j) * K;
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(a[k]) * double(b[k]);
      C[size_t(i) * N + j] = s;
    }
  });
}

}  // namespace ref
