// day20_conv_slow_fast/test_winograd_4x4.cpp: host tests of Winograd F(4x4, 3x3)'s transforms
// (kernels/8_winograd_4x4.h, the functions the GPU kernels call) and of its error model.
//
// The GPU kernels of variants 8 to 11 are checked on the GPU against the CPU reference; here the
// same transforms run the whole algorithm on the CPU (tile by tile, channel sums in float as the
// GEMMs do them), so a wrong coefficient, a wrong tile origin or a wrong padding rule shows up
// without a GPU, and the error model behind the program's tolerance is measured.
#include <cmath>
#include <cstdio>
#include <vector>

#include "conv_shape.h"
#include "kernels/8_winograd_4x4.h"
#include "minitest.h"
#include "verify.h"

static const double kRmsUniform = 1.0 / std::sqrt(3.0);  // rms of uniform [-1, 1)

// One 6x6 patch and one 3x3 filter: A^T [(G g G^T) .* (B^T d B)] A against the 16 direct sums.
TEST(one_tile_matches_direct) {
  verify::Rng rng(7);
  double worst = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    float d[36], g[9], u[36], v[36], m[36], y[16];
    for (float& x : d) x = rng.uniform(-1.f, 1.f);
    for (float& x : g) x = rng.uniform(-1.f, 1.f);
    wino4::filter_2d(g, u);
    wino4::input_2d(d, v);
    for (int e = 0; e < 36; ++e) m[e] = u[e] * v[e];
    wino4::output_2d(m, y);
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) {
        double ref = 0;
        for (int r = 0; r < 3; ++r)
          for (int c = 0; c < 3; ++c) ref += double(d[(a + r) * 6 + b + c]) * g[r * 3 + c];
        worst = std::fmax(worst, std::fabs(y[a * 4 + b] - ref));
      }
  }
  std::printf("  one tile: max |error| %.2e over 1000 random tiles\n", worst);
  // One channel: the program's tolerance at C = 1 for data uniform in [-1, 1) (rms 1/sqrt(3)).
  EXPECT(worst <= wino4::tolerance_atol(1, kRmsUniform, kRmsUniform));
}

// The whole convolution the way variants 8 to 11 compute it: every tile at (4*tp - pad, 4*tq - pad),
// zeros outside the image, the 36 channel sums in float, outputs past P x Q dropped.
static std::vector<float> winograd4_cpu(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w) {
  const int P = s.P(), Q = s.Q(), TP = wino4::tiles_p(s), TQ = wino4::tiles_q(s);
  std::vector<float> U(size_t(s.K) * s.C * 36), y(s.y_elems(), NAN);
  for (int k = 0; k < s.K; ++k)
    for (int c = 0; c < s.C; ++c) wino4::filter_2d(&w[(size_t(k) * s.C + c) * 9], &U[(size_t(k) * s.C + c) * 36]);
  std::vector<float> V(size_t(s.C) * 36);
  for (int n = 0; n < s.N; ++n)
    for (int tp = 0; tp < TP; ++tp)
      for (int tq = 0; tq < TQ; ++tq) {
        for (int c = 0; c < s.C; ++c) {
          float d[36];
          for (int r = 0; r < 6; ++r)
            for (int u = 0; u < 6; ++u) {
              const int h = 4 * tp - s.pad + r, v = 4 * tq - s.pad + u;
              d[r * 6 + u] =
                  h >= 0 && h < s.H && v >= 0 && v < s.W ? x[((size_t(n) * s.C + c) * s.H + h) * s.W + v] : 0.f;
            }
          wino4::input_2d(d, &V[size_t(c) * 36]);
        }
        for (int k = 0; k < s.K; ++k) {
          float m[36] = {0.f}, o[16];
          for (int c = 0; c < s.C; ++c)
            for (int e = 0; e < 36; ++e) m[e] += U[(size_t(k) * s.C + c) * 36 + e] * V[size_t(c) * 36 + e];
          wino4::output_2d(m, o);
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) {
              const int p = 4 * tp + a, q = 4 * tq + b;
              if (p < P && q < Q) y[((size_t(n) * s.K + k) * P + p) * Q + q] = o[a * 4 + b];
            }
        }
      }
  return y;
}

// Odd sizes (partial tiles, no padding, C and K off every multiple the GPU layout pads to) and
// ResNet-like channel counts, under the program's tolerance (8_winograd_4x4.h). Two more things
// are measured, so that the tolerance is seen to be neither loose nor tight by accident:
//  - the rms error of the outputs at tile position (3, 3), the worst, against the model's
//    prediction: it must agree within a factor of 2 either way where there are enough of them;
//  - the largest error must sit well inside the tolerance (below a quarter).
TEST(whole_convolution_matches_the_error_model_and_the_tolerance) {
  const ConvShape shapes[] = {{1, 37, 9, 9, 13, 3, 3, 1, 1, 1},    {3, 8, 20, 21, 16, 3, 3, 1, 1, 1},
                              {2, 16, 13, 11, 20, 3, 3, 0, 1, 1},  {2, 64, 16, 16, 16, 3, 3, 1, 1, 1},
                              {1, 256, 14, 14, 32, 3, 3, 1, 1, 1}, {1, 512, 8, 8, 64, 3, 3, 1, 1, 1}};
  verify::Rng rng(11);
  for (const ConvShape& s : shapes) {
    std::vector<float> x(s.x_elems()), w(s.w_elems());
    verify::fill_uniform(x, rng);
    verify::fill_uniform(w, rng);
    std::vector<double> ref(s.y_elems());
    ref::conv_full(s, x.data(), w.data(), ref.data());
    const std::vector<float> y = winograd4_cpu(s, x, w);
    const verify::Tol tol{wino4::tolerance_atol(s.C, kRmsUniform, kRmsUniform), verify::kFp32.rtol, "fp32 F(4x4)"};
    const verify::Check c = verify::compare("F(4x4) on the CPU " + s.str(), y.data(), ref.data(), y.size(), tol);
    verify::print(c);
    EXPECT(c.passed);
    EXPECT(c.max_abs_err <= 0.25 * tol.atol);
    // Outputs at (p, q) = (3, 3) mod 4: the worst position of every tile.
    double sq = 0;
    size_t n = 0;
    for (int i = 0; i < s.N * s.K; ++i)
      for (int p = 3; p < s.P(); p += 4)
        for (int q = 3; q < s.Q(); q += 4) {
          const size_t e = (size_t(i) * s.P() + p) * s.Q() + q;
          sq += (y[e] - ref[e]) * (y[e] - ref[e]);
          ++n;
        }
    const double rms = std::sqrt(sq / double(n)),
                 pred = wino4::predicted_rms_error(s.C, kRmsUniform, kRmsUniform, 3, 3);
    std::printf(
        "  worst tile position: rms error %.2e over %zu outputs, predicted %.2e (ratio %.2f); max |error| / atol "
        "%.3f\n",
        rms, n, pred, rms / pred, c.max_abs_err / tol.atol);
    if (n >= 200) {
      EXPECT(rms <= 2 * pred);
      EXPECT(rms >= 0.5 * pred);
    }
  }
}

// The weights of 8_winograd_4x4.h's comment: s_3 = 94.3 for the last output row, s_0 = 9.0.
TEST(row_weights_are_the_derived_ones) {
  EXPECT(std::fabs(wino4::row_weight(3) - 94.3) < 0.1);
  EXPECT(std::fabs(wino4::row_weight(0) - 9.0) < 0.1);
  for (int a = 0; a < 4; ++a) EXPECT(wino4::row_weight(a) <= wino4::row_weight(3));
}

int main() { return minitest::run_all(); }
