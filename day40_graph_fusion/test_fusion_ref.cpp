// day40_graph_fusion/test_fusion_ref.cpp: host tests of the fused patterns' CPU references.
#include <cmath>
#include <vector>

#include "fusion_ref.h"
#include "minitest.h"
#include "verify.h"

TEST(gelu_known_values) {
  EXPECT(fref::gelu_tanh(0) == 0);
  EXPECT(std::fabs(fref::gelu_tanh(1.0) - 0.8411919906082768) < 1e-12);  // 0.5(1 + tanh(0.7978845608(1.044715)))
  EXPECT(std::fabs(fref::gelu_tanh(-3.0) - (-0.0036373920817177)) < 1e-12);
  // The approximation stays within 1e-3 of the exact GELU over [-6, 6].
  double worst = 0;
  for (double x = -6; x <= 6; x += 0.01) worst = std::fmax(worst, std::fabs(fref::gelu_tanh(x) - fref::gelu_erf(x)));
  EXPECT(worst < 1e-3 && worst > 1e-5);  // close, and not accidentally the same function
}

TEST(chain_known_values) {
  EXPECT(std::fabs(fref::chain(0, 0, 5) - 0.5) < 1e-15);
  EXPECT(std::fabs(fref::chain(1, 2, 3) - 1 / (1 + std::exp(-7.0))) < 1e-15);
}

TEST(conv_bias_relu_clamps_and_adds_bias) {
  // 1x1x3x3 input of ones, one 3x3 filter of ones, pad 1: corner sees 4, edge 6, centre 9.
  ConvShape s{1, 1, 3, 3, 1, 3, 3, 1, 1, 1};
  std::vector<float> x(9, 1.f), w(9, 1.f), b1 = {-5.f}, b2 = {0.5f};
  EXPECT(fref::conv_bias_relu_at(s, x.data(), w.data(), b1.data(), 0) == 0);    // 4 - 5 < 0 -> 0
  EXPECT(fref::conv_bias_relu_at(s, x.data(), w.data(), b1.data(), 4) == 4);    // 9 - 5
  EXPECT(fref::conv_bias_relu_at(s, x.data(), w.data(), b2.data(), 1) == 6.5);  // edge: 6 + 0.5
}

TEST(matmul_bias_gelu_index_order) {
  // A = [[1, 2]], B = [[1, 0, 2], [0, 1, 3]] (K = 2, N = 3): A B = [1, 2, 8].
  std::vector<float> A = {1, 2}, B = {1, 0, 2, 0, 1, 3}, bias = {0, 0, -8};
  EXPECT(std::fabs(fref::matmul_bias_gelu_at(A.data(), B.data(), bias.data(), 2, 3, 1) - fref::gelu_tanh(2)) < 1e-15);
  EXPECT(fref::matmul_bias_gelu_at(A.data(), B.data(), bias.data(), 2, 3, 2) == 0);  // 8 - 8
}

int main() { return minitest::run_all(); }
