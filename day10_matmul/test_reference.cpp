// day10_matmul/test_reference.cpp: host unit tests for the CPU reference GEMMs (no GPU).
#include <cmath>
#include <vector>

#include "minitest.h"
#include "reference.h"
#include "verify.h"

// A textbook triple loop, the reference for the reference.
static double dot_nn(int N, int K, const std::vector<float>& A, const std::vector<float>& B, int i, int j) {
  double s = 0;
  for (int k = 0; k < K; ++k) s += double(A[size_t(i) * K + k]) * B[size_t(k) * N + j];
  return s;
}

TEST(gemm_nn_known_values) {
  // [1 2; 3 4] * [5 6; 7 8] = [19 22; 43 50]
  std::vector<float> A = {1, 2, 3, 4}, B = {5, 6, 7, 8};
  std::vector<double> C(4);
  ref::gemm_nn(2, 2, 2, A.data(), B.data(), C.data());
  EXPECT(C[0] == 19 && C[1] == 22 && C[2] == 43 && C[3] == 50);
}

TEST(gemm_nt_is_nn_with_transposed_b) {
  verify::Rng rng(7);
  const int M = 13, N = 17, K = 29;
  std::vector<float> A(M * K), B(K * N), Bt(N * K);
  verify::fill_uniform(A, rng);
  verify::fill_uniform(B, rng);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j) Bt[size_t(j) * K + k] = B[size_t(k) * N + j];
  std::vector<double> C1(M * N), C2(M * N);
  ref::gemm_nn(M, N, K, A.data(), B.data(), C1.data());
  ref::gemm_nt(M, N, K, A.data(), Bt.data(), C2.data());
  bool same = true, matches_loop = true;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      same = same && std::fabs(C1[i * N + j] - C2[i * N + j]) < 1e-12;
      matches_loop = matches_loop && std::fabs(C1[i * N + j] - dot_nn(N, K, A, B, i, j)) < 1e-12;
    }
  EXPECT(same && matches_loop);
}

TEST(edge_shapes) {
  // M = 1, N = 1, K = 1 and non-multiples of anything: every output is written.
  for (auto s : std::vector<std::vector<int>>{{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {4, 6, 1}}) {
    const int M = s[0], N = s[1], K = s[2];
    std::vector<float> A(M * K, 2.f), B(K * N, 3.f);
    std::vector<double> C(M * N, NAN);
    ref::gemm_nn(M, N, K, A.data(), B.data(), C.data());
    bool ok = true;
    for (double c : C) ok = ok && c == 6.0 * K;
    EXPECT(ok);
  }
}

int main() { return minitest::run_all(); }
