// day40_graph_fusion/fusion_ref.h: CPU references (double) for the three fused patterns.
// Host-only; unit-tested by test_fusion_ref.cpp.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "conv_shape.h"

namespace fref {

inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Pattern 1: y = sigmoid(a + b * c), elementwise.
inline double chain(double a, double b, double c) { return sigmoid(a + b * c); }

// GPT-2's GELU, the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline double gelu_tanh(double x) {
  const double k = 0.7978845608028654;  // sqrt(2 / pi)
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
// The exact GELU, x * Phi(x), for comparison.
inline double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// Pattern 2: y[n][k][p][q] = relu(conv(x, w)[n][k][p][q] + bias[k]); with relu_first, the ReLU
// is applied to x before the convolution instead (the ResNet pre-activation pair), no bias.
inline double conv_bias_relu_at(const ConvShape& s, const float* x, const float* w, const float* bias, size_t flat) {
  const ref::Idx4 i = ref::unflatten(flat, s.K, s.P(), s.Q());
  const double v = ref::conv_at(s, x, w, i.a, i.b, i.c, i.d) + bias[i.b];
  return v > 0 ? v : 0;
}

// Pattern 3: Y[m][n] = gelu(sum_k A[m][k] B[k][n] + bias[n]) (row-major A: M x K, B: K x N).
inline double matmul_bias_gelu_at(const float* A, const float* B, const float* bias, int K, int N, size_t flat) {
  const size_t m = flat / N, n = flat % N;
  double acc = 0;
  for (int k = 0; k < K; ++k) acc += double(A[m * K + k]) * double(B[size_t(k) * N + n]);
  return gelu_tanh(acc + bias[n]);
}

}  // namespace fref
