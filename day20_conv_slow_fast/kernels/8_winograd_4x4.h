// Winograd F(4x4, 3x3): the transforms, the transformed layout and the error bound, shared by
// variants 8, 9 and 10 and by the host test (this header builds with plain g++ too).
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

// How much larger the rounding error of F(4x4, 3x3) is than the direct method's, for the same
// inputs. One output is sum_i A^T[a][i] (G g)_i (B^T d)_i per dimension: every product carries a
// relative rounding error of order eps, and the error of the output is those errors weighted by
// |A^T[a][i]| and the sizes of the transformed values, which grow like the rows of G and B^T.
// Rounding errors of random data add like a random walk, so the weights add in quadrature: for one
// dimension, the error grows by
//     gamma = max_a sqrt( sum_i A^T[a][i]^2 * |G_i|^2 * |B^T_i|^2 / 3 )
// against a direct 3-tap dot product of the same O(1) values (|x|^2 = sum of squares over the
// row). gamma = 5.6 here (variant 7's F(2x2) has 1.3), and the 2D algorithm squares it: about 31x
// the direct method's error (F(2x2): about 1.7x). The worst case, with the absolute values
// summed instead, would be 16 per dimension (256 in 2D); a lost index or a wrong coefficient
// makes errors of the size of the outputs themselves, far above either. The tolerance scales
// the direct method's atol by gamma^2; the host test checks the bound against the CPU emulation.
inline double error_growth_2d() {
  const double AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
  const double G2[6] = {
      1.0 / 16, 3.0 / 36, 3.0 / 36, 1.0 / 576 + 1.0 / 144 + 1.0 / 36, 1.0 / 576 + 1.0 / 144 + 1.0 / 36,
      1};  // |row of G|^2
  const double B2[6] = {16 + 25 + 1,   16 + 16 + 1 + 1, 16 + 16 + 1 + 1,
                        4 + 1 + 4 + 1, 4 + 1 + 4 + 1,   16 + 25 + 1};  // |row of B^T|^2
  double worst = 0;
  for (int a = 0; a < 4; ++a) {
    double s = 0;
    for (int i = 0; i < 6; ++i) s += AT[a][i] * AT[a][i] * G2[i] * B2[i];
    worst = std::fmax(worst, s / 3);
  }
  return worst;  // gamma^2: sqrt per dimension, squared for two dimensions
}

}  // namespace wino4
