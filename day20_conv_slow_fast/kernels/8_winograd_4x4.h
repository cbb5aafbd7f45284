// Winograd F(4x4, 3x3): the transforms, the transformed layout and the error model, shared by
// variants 8 to 11 and by the host test (this header builds with plain g++ too).
//
// The idea is variant 7's with a bigger tile. A 4x4 block of outputs of a 3x3 filter needs a
// 6x6 input patch d, and (Lavin & Gray 2015, interpolation points 0, +-1, +-2 and infinity)
//     Y = A^T [ (G g G^T) .* (B^T d B) ] A
// with 6x6 = 36 element-wise products for 16 outputs, where the direct method needs 16*9 = 144:
// 4x fewer multiplications (F(2x2, 3x3) saves 2.25x). Summed over input channels, the
// element-wise products become 36 independent GEMMs, one per position (i, j) of the 6x6:
//     M[ij][k][t] = sum_c U[ij][k][c] * V[ij][c][t],   U = G g G^T,  V = B^T d B
//
//   B^T = [ 4  0 -5  0  1  0 ]    G = [  1/4     0     0  ]    A^T = [ 1  1  1  1  1  0 ]
//         [ 0 -4 -4  1  1  0 ]        [ -1/6  -1/6  -1/6  ]          [ 0  1 -1  2 -2  0 ]
//         [ 0  4 -4 -1  1  0 ]        [ -1/6   1/6  -1/6  ]          [ 0  1  1  4  4  0 ]
//         [ 0 -2 -1  2  1  0 ]        [ 1/24  1/12   1/6  ]          [ 0  1 -1  8 -8  1 ]
//         [ 0  2 -1 -2  1  0 ]        [ 1/24 -1/12   1/6  ]
//         [ 0  4  0 -5  0  1 ]        [    0     0     1  ]
//
// Layout (chosen so that every GEMM operand is read along rows, coalesced and as float4, and
// lands in shared memory in the order the GEMM reads it: both tiles are straight copies):
//   U[36][Cp][Kp]  transformed filters, transposed (output channel fastest), Kp = K rounded up
//                  to 4 (one float4), Cp = C rounded up to 16 (the GEMM's k step), zero-padded
//   V[36][Cp][Tp]  transformed input tiles, Tp = T rounded up to 4, zero-padded
//   M[36][K][Tp]   the GEMMs' products
// where T = N * ceil(P/4) * ceil(Q/4) tiles, numbered t = (n * TP + tp) * TQ + tq. The padding
// means the GEMM never tests the reduction index and tests rows and columns once per float4.
#pragma once
#include <cmath>
#include <cstddef>

#include "conv_shape.h"

namespace wino4 {

constexpr int kCpad = 16;  // the reduction dimension is padded to the GEMM's k step
CONV_HD inline int tiles_p(const ConvShape& s) { return (s.P() + 3) / 4; }
CONV_HD inline int tiles_q(const ConvShape& s) { return (s.Q() + 3) / 4; }
CONV_HD inline int tiles(const ConvShape& s) { return s.N * tiles_p(s) * tiles_q(s); }
CONV_HD inline int tiles_padded(const ConvShape& s) { return (tiles(s) + 3) / 4 * 4; }
CONV_HD inline int c_padded(const ConvShape& s) { return (s.C + kCpad - 1) / kCpad * kCpad; }
CONV_HD inline int k_padded(const ConvShape& s) { return (s.K + 3) / 4 * 4; }

// Floats of each transformed array, and the workspace of variants 8 and 9 (U, V and M).
inline size_t u_floats(const ConvShape& s) { return 36 * size_t(c_padded(s)) * k_padded(s); }
inline size_t v_floats(const ConvShape& s) { return 36 * size_t(c_padded(s)) * tiles_padded(s); }
inline size_t m_floats(const ConvShape& s) { return 36 * size_t(s.K) * tiles_padded(s); }
inline size_t workspace_bytes(const ConvShape& s) { return sizeof(float) * (u_floats(s) + v_floats(s) + m_floats(s)); }

// One dimension of each transform; the 2D ones apply it to the rows, then to the columns.
// u = G g (3 -> 6)
CONV_HD inline void filter_1d(float g0, float g1, float g2, float* u) {
  const float sixth = 1.f / 6.f;
  u[0] = 0.25f * g0;
  u[1] = -sixth * (g0 + g1 + g2);
  u[2] = -sixth * (g0 - g1 + g2);
  u[3] = (1.f / 24.f) * g0 + (1.f / 12.f) * g1 + sixth * g2;
  u[4] = (1.f / 24.f) * g0 - (1.f / 12.f) * g1 + sixth * g2;
  u[5] = g2;
}
// t = B^T d (6 -> 6)
CONV_HD inline void input_1d(float d0, float d1, float d2, float d3, float d4, float d5, float* t) {
  t[0] = 4.f * d0 - 5.f * d2 + d4;
  t[1] = -4.f * (d1 + d2) + d3 + d4;
  t[2] = 4.f * (d1 - d2) - d3 + d4;
  t[3] = 2.f * (d3 - d1) - d2 + d4;
  t[4] = 2.f * (d1 - d3) - d2 + d4;
  t[5] = 4.f * d1 - 5.f * d3 + d5;
}
// o = A^T m (6 -> 4)
CONV_HD inline void output_1d(float m0, float m1, float m2, float m3, float m4, float m5, float* o) {
  const float a = m1 + m2, b = m1 - m2, c = m3 + m4, d = m3 - m4;
  o[0] = m0 + a + c;
  o[1] = b + 2.f * d;
  o[2] = a + 4.f * c;
  o[3] = b + 8.f * d + m5;
}

// U = G g G^T: g is 3x3 row-major, u is 6x6 row-major.
CONV_HD inline void filter_2d(const float* g, float* u) {
  float t[6][3];  // G g, column by column
  for (int c = 0; c < 3; ++c) {
    float col[6];
    filter_1d(g[c], g[3 + c], g[6 + c], col);
    for (int r = 0; r < 6; ++r) t[r][c] = col[r];
  }
  for (int r = 0; r < 6; ++r) filter_1d(t[r][0], t[r][1], t[r][2], u + 6 * r);
}
// V = B^T d B: d and v are 6x6 row-major.
CONV_HD inline void input_2d(const float* d, float* v) {
  float t[6][6];  // B^T d
  for (int c = 0; c < 6; ++c) {
    float col[6];
    input_1d(d[c], d[6 + c], d[12 + c], d[18 + c], d[24 + c], d[30 + c], col);
    for (int r = 0; r < 6; ++r) t[r][c] = col[r];
  }
  for (int r = 0; r < 6; ++r) input_1d(t[r][0], t[r][1], t[r][2], t[r][3], t[r][4], t[r][5], v + 6 * r);
}
// Y = A^T m A: m is 6x6 row-major, y is 4x4 row-major.
CONV_HD inline void output_2d(const float* m, float* y) {
  float t[4][6];  // A^T m
  for (int c = 0; c < 6; ++c) {
    float col[4];
    output_1d(m[c], m[6 + c], m[12 + c], m[18 + c], m[24 + c], m[30 + c], col);
    for (int r = 0; r < 4; ++r) t[r][c] = col[r];
  }
  for (int r = 0; r < 4; ++r) output_1d(t[r][0], t[r][1], t[r][2], t[r][3], t[r][4], t[r][5], y + 4 * r);
}

// The rounding error of F(4x4, 3x3), predicted, and the tolerance built from the prediction.
//
// Each GEMM M[ij] = sum_c U[ij][c] V[ij][c] runs as a chain of C fused multiply-adds, each
// rounding the running sum S by a relative error uniform in [-u, u] (u = 2^-24, variance
// u^2/3). The running sum after c terms has variance c * sigma_ij^2, sigma_ij the rms of one
// term U V, so the chain's error has variance (u^2/3) sigma_ij^2 (1 + 2 + ... + C) ~ (u^2/3)
// sigma_ij^2 C^2/2: it grows like C, not sqrt(C), because the sum being rounded grows. The
// transforms round U and V too, a few relative errors of size u per term that add like a random
// walk: 3C more in the same units. The terms' size follows the transforms' rows: for random
// filters and inputs of rms sigma_w and sigma_x, U[ij] has rms |G_i||G_j| sigma_w and V[ij]
// |B_i||B_j| sigma_x (|row| = its Euclidean length), and output (a, b) weighs M[ij] by
// A^T[a][i] A^T[b][j]. So the error of output (a, b) has rms
//     u sigma_x sigma_w sqrt(s_a s_b) sqrt((C^2/2 + 3C) / 3),   s_a = sum_i A^T[a][i]^2 |G_i|^2 |B_i|^2
// s_a is largest for the last output row (a = 3: A^T's weights 8 and -8 on the points +-2, and
// the point at infinity, whose rows of G and B^T are the largest): s_3 = 94.3, s_0 = 9.0. The host test measures this
// rms on the CPU emulation and finds the prediction (test_winograd_4x4.cpp).
//
// The tolerance is that rms at the worst output (a = b = 3) times z = 6 * sqrt(2) * 3:
//   6        the largest of 10^8 normal errors is about 6 standard deviations (sqrt(2 ln 10^8));
//   sqrt(2)  the check against cuDNN compares two results that each carry an error of this size;
//   3        a margin for what the model leaves out (cuBLAS's summation order, the output
//            transform's roundings, tails heavier than normal).
// A lost index, a wrong coefficient or a missing channel changes an output by about one
// channel's contribution (rms 3 sigma_x sigma_w, 1 for data uniform in [-1, 1)), orders of
// magnitude above the tolerance.
constexpr double kUnitRoundoff = 1.0 / 16777216.0;  // 2^-24, fp32 round-to-nearest
constexpr double kToleranceSigmas = 6.0 * 1.41421356237 * 3.0;

inline double row_weight(int a) {  // s_a above
  const double AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
  const double G2[6] = {
      1.0 / 16, 3.0 / 36, 3.0 / 36, 1.0 / 576 + 1.0 / 144 + 1.0 / 36, 1.0 / 576 + 1.0 / 144 + 1.0 / 36,
      1};  // |row of G|^2
  const double B2[6] = {16 + 25 + 1,   16 + 16 + 1 + 1, 16 + 16 + 1 + 1,
                        4 + 1 + 4 + 1, 4 + 1 + 4 + 1,   16 + 25 + 1};  // |row of B^T|^2
  double s = 0;
  for (int i = 0; i < 6; ++i) s += AT[a][i] * AT[a][i] * G2[i] * B2[i];
  return s;
}
// Predicted rms error of output (a, b) of a tile, for C channels of inputs and filters of rms
// sigma_x and sigma_w.
inline double predicted_rms_error(int C, double sigma_x, double sigma_w, int a, int b) {
  const double c = C;
  return kUnitRoundoff * sigma_x * sigma_w * std::sqrt(row_weight(a) * row_weight(b)) *
         std::sqrt((c * c / 2 + 3 * c) / 3);
}
// The check's atol (its rtol stays fp32's): the worst output's predicted rms times z.
inline double tolerance_atol(int C, double sigma_x, double sigma_w) {
  return kToleranceSigmas * predicted_rms_error(C, sigma_x, sigma_w, 3, 3);
}

}  // namespace wino4
