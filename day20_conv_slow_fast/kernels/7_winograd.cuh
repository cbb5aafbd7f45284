// Variant 7: Winograd F(2x2, 3x3) for 3x3, stride 1, dilation 1.
//
// The idea (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): a 2x2
// block of outputs of a 3x3 filter over a 4x4 input patch d can be computed as
//     Y = A^T [ (G g G^T) .* (B^T d B) ] A
// where .* is an element-wise product of two 4x4 matrices: 16 multiplications instead of the
// direct 2*2*9 = 36. Summed over input channels, the element-wise products become 16
// independent GEMMs, one per position (i, j) of the 4x4:
//     M[ij][k][tile] = sum_c U[ij][k][c] * V[ij][c][tile]
// so the multiply count falls by 36/16 = 2.25x, and the work is a batched GEMM.
//
// Four steps here, each its own kernel (cuBLAS does the GEMMs, with TF32 off):
//   filter transform  U = G g G^T      (K*C small 4x4 products; once per filter in practice)
//   input transform   V = B^T d B      (every overlapping 4x4 patch, stride 2)
//   16 GEMMs          M = U * V        (cublasSgemmStridedBatched, batch 16)
//   output transform  Y = A^T M A      (2x2 outputs per tile)
// The cost: U, V and M live in device memory (V and M are 16/4 = 4x the input and output
// they stand for), and the transforms add rounding. Their coefficients (0, +-1, +-1/2) are
// exact in binary, and F(2x2, 3x3) is the variant whose error grows least; larger tiles
// (F(4x4, 3x3): 4x saving) lose more accuracy.
#pragma once
#include <cublas_v2.h>

#include "conv_shape.h"
#include "check.cuh"

namespace wino {
CONV_HD inline int tiles_p(const ConvShape& s) { return (s.P() + 1) / 2; }
CONV_HD inline int tiles_q(const ConvShape& s) { return (s.Q() + 1) / 2; }
inline size_t tiles(const ConvShape& s) { return size_t(s.N) * tiles_p(s) * tiles_q(s); }
inline size_t workspace_bytes(const ConvShape& s) {
  return sizeof(float) * 16 * (size_t(s.K) * s.C + size_t(s.C) * tiles(s) + size_t(s.K) * tiles(s));
}
}  // namespace wino

// U[ij][k][c] = (G g G^T)[i][j], G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
__global__ void wino_filter_transform(ConvShape s, const float* __restrict__ w, float* __restrict__ U) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= s.K * s.C) return;
  const float* g = w + size_t(i) * 9;
  float t[4][3];  // G g
  for (int c = 0; c < 3; ++c) {
    t[0][c] = g[c];
    t[1][c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
    t[2][c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
    t[3][c] = g[6 + c];
  }
  const size_t KC = size_t(s.K) * s.C;
  for (int r = 0; r < 4; ++r) {  // (G g) G^T
    U[(r * 4 + 0) * KC + i] = t[r][0];
    U[(r * 4 + 1) * KC + i] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
    U[(r * 4 + 2) * KC + i] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
    U[(r * 4 + 3) * KC + i] = t[r][2];
  }
}

// V[ij][c][tile] = (B^T d B)[i][j], B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]; d is the 4x4
// input patch at (2*tp - pad, 2*tq - pad), zero outside the image. tile = (n*TP + tp)*TQ + tq.
__global__ void wino_input_transform(ConvShape s, const float* __restrict__ x, float* __restrict__ V) {
  const int TP = wino::tiles_p(s), TQ = wino::tiles_q(s);
  const size_t T = size_t(s.N) * TP * TQ;
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;  // over C * T, tile fastest
  if (i >= size_t(s.C) * T) return;
  const size_t tile = i % T;
  const int c = int(i / T);
  const int tq = int(tile % TQ), tp = int((tile / TQ) % TP), n = int(tile / (size_t(TQ) * TP));
  const float* xc = x + (size_t(n) * s.C + c) * s.H * s.W;
  float d[4][4];
  for (int r = 0; r < 4; ++r)
    for (int u = 0; u < 4; ++u) {
      const int h = 2 * tp - s.pad + r, v = 2 * tq - s.pad + u;
      d[r][u] = (h >= 0 && h < s.H && v >= 0 && v < s.W) ? xc[size_t(h) * s.W + v] : 0.f;
    }
  float t[4][4];  // B^T d
  for (int u = 0; u < 4; ++u) {
    t[0][u] = d[0][u] - d[2][u];
    t[1][u] = d[1][u] + d[2][u];
    t[2][u] = d[2][u] - d[1][u];
    t[3][u] = d[1][u] - d[3][u];
  }
  const size_t CT = size_t(s.C) * T, off = size_t(c) * T + tile;
  for (int r = 0; r < 4; ++r) {  // (B^T d) B
    V[(r * 4 + 0) * CT + off] = t[r][0] - t[r][2];
    V[(r * 4 + 1) * CT + off] = t[r][1] + t[r][2];
    V[(r * 4 + 2) * CT + off] = t[r][2] - t[r][1];
    V[(r * 4 + 3) * CT + off] = t[r][1] - t[r][3];
  }
}

// Y = A^T M A, A^T = [1 1 1 0; 0 1 -1 -1]: the 2x2 outputs of one (k, tile).
__global__ void wino_output_transform(ConvShape s, const float* __restrict__ M, float* __restrict__ y) {
  const int TP = wino::tiles_p(s), TQ = wino::tiles_q(s), P = s.P(), Q = s.Q();
  const size_t T = size_t(s.N) * TP * TQ, KT = size_t(s.K) * T;
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;  // over K * T, tile fastest
  if (i >= KT) return;
  const size_t tile = i % T;
  const int k = int(i / T);
  const int tq = int(tile % TQ), tp = int((tile / TQ) % TP), n = int(tile / (size_t(TQ) * TP));
  float m[4][4];
  for (int r = 0; r < 4; ++r)
    for (int u = 0; u < 4; ++u) m[r][u] = M[(r * 4 + u) * KT + i];
  float t[2][4];  // A^T m
  for (int u = 0; u < 4; ++u) {
    t[0][u] = m[0][u] + m[1][u] + m[2][u];
    t[1][u] = m[1][u] - m[2][u] - m[3][u];
  }
  const float o[2][2] = {{t[0][0] + t[0][1] + t[0][2], t[0][1] - t[0][2] - t[0][3]},
                         {t[1][0] + t[1][1] + t[1][2], t[1][1] - t[1][2] - t[1][3]}};
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      const int p = 2 * tp + a, q = 2 * tq + b;
      if (p < P && q < Q) y[((size_t(n) * s.K + k) * P + p) * Q + q] = o[a][b];
    }
}

inline bool supports_07(const ConvShape& s, std::string* why) {
  if (s.R != 3 || s.S != 3 || s.stride != 1 || s.dil != 1) {
    *why = "Winograd F(2x2,3x3): needs a 3x3 filter, stride 1, dilation 1";
    return false;
  }
  return true;
}

// ws: wino::workspace_bytes(s) bytes. The filter transform runs here too (timed), although a
// network would do it once per weight update.
inline void run_07_winograd(cublasHandle_t h, const ConvShape& s, const float* x, const float* w, float* y, float* ws,
                            cudaStream_t st) {
  const size_t T = wino::tiles(s), KC = size_t(s.K) * s.C;
  float* U = ws;
  float* V = U + 16 * KC;
  float* M = V + 16 * size_t(s.C) * T;
  wino_filter_transform<<<unsigned(ceil_div<size_t>(KC, 256)), 256, 0, st>>>(s, w, U);
  LAUNCH_CHECK();
  wino_input_transform<<<unsigned(ceil_div<size_t>(size_t(s.C) * T, 256)), 256, 0, st>>>(s, x, V);
  LAUNCH_CHECK();
  // For each ij: M (K x T) = U (K x C) * V (C x T), row-major; column-major: M^T = V^T * U^T.
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasSetStream(h, st));
  CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, int(T), s.K, s.C, &one, V, int(T),
                                         (long long)(s.C * T), U, s.C, (long long)KC, &zero, M, int(T),
                                         (long long)(s.K * T), 16));
  wino_output_transform<<<unsigned(ceil_div<size_t>(size_t(s.K) * T, 256)), 256, 0, st>>>(s, M, y);
  LAUNCH_CHECK();
}
