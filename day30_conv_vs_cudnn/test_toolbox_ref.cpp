// day30_conv_vs_cudnn/test_toolbox_ref.cpp: host tests of the toolbox's CPU references (no GPU).
//
// Every backward is checked against central finite differences of its forward: for a random
// dy, L(x) = sum(dy * f(x)) has gradient dL/dx = backward(dy). A sign error, a missing term
// (batch norm's mean and variance depend on x) or a wrong index makes them disagree by O(1).
#include <cmath>
#include <functional>
#include <vector>

#include "minitest.h"
#include "toolbox_ref.h"
#include "verify.h"

using namespace tbx;

// Largest |analytic - numeric| over all inputs, relative to the gradient's largest magnitude.
static double fd_error(std::vector<float> x, const std::vector<float>& dy, const std::vector<double>& analytic,
                       const std::function<std::vector<double>(const std::vector<float>&)>& f) {
  const double h = 1e-3;
  double worst = 0, scale = 1e-12;
  for (double a : analytic) scale = std::max(scale, std::fabs(a));
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + float(h);
    const double hp = double(x[i]) - keep;  // the step actually taken in float
    std::vector<double> yp = f(x);
    x[i] = keep - float(h);
    const double hm = keep - double(x[i]);
    std::vector<double> ym = f(x);
    x[i] = keep;
    double lp = 0, lm = 0;
    for (size_t j = 0; j < yp.size(); ++j) lp += dy[j] * yp[j], lm += dy[j] * ym[j];
    worst = std::max(worst, std::fabs((lp - lm) / (hp + hm) - analytic[i]) / scale);
  }
  return worst;
}

TEST(activation_backward_matches_finite_differences) {
  verify::Rng rng(1);
  for (Act a : {Act::Relu, Act::Sigmoid, Act::Tanh, Act::Elu, Act::Clipped}) {
    std::vector<float> x(200), dy(200);
    verify::fill_uniform(x, rng, -8.f, 8.f);  // wide enough to reach the clipped ReLU's ceiling
    verify::fill_uniform(dy, rng);
    // Keep clear of the kinks at 0 and 6, where the finite difference straddles two slopes.
    for (auto& v : x)
      if (std::fabs(v) < 0.01f || std::fabs(v - 6.f) < 0.01f) v += 0.05f;
    const double e =
        fd_error(x, dy, act_bwd(a, x, dy, a == Act::Clipped ? 6.0 : 1.0),
                 [&](const std::vector<float>& xx) { return act_fwd(a, xx, a == Act::Clipped ? 6.0 : 1.0); });
    EXPECT(e < 1e-4);
  }
}

TEST(activation_known_values) {
  EXPECT(act_f(Act::Relu, -2, 0) == 0 && act_f(Act::Relu, 3, 0) == 3);
  EXPECT(act_f(Act::Clipped, 9, 6) == 6 && act_f(Act::Clipped, 2, 6) == 2);
  EXPECT(std::fabs(act_f(Act::Sigmoid, 0, 0) - 0.5) < 1e-15);
  EXPECT(std::fabs(act_f(Act::Elu, -1, 1) - (std::exp(-1.0) - 1)) < 1e-15);
}

TEST(pool_forward_known_values) {
  // 1x1x4x4 input 0..15; 2x2 windows, stride 2: max picks each block's bottom-right.
  T4 d{1, 1, 4, 4};
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = float(i);
  const std::vector<double> m = pool_fwd({2, 2, 0, 2, true}, d, x);
  EXPECT(m.size() == 4 && m[0] == 5 && m[1] == 7 && m[2] == 13 && m[3] == 15);
  const std::vector<double> a = pool_fwd({2, 2, 0, 2, false}, d, x);
  EXPECT(a[0] == 2.5 && a[3] == 12.5);
  // 3x3, stride 2, pad 1: the corner window sees only 4 in-image values (padding excluded).
  const std::vector<double> c = pool_fwd({3, 3, 1, 2, false}, d, x);
  EXPECT(c[0] == (0 + 1 + 4 + 5) / 4.0);
}

TEST(pool_backward_matches_finite_differences) {
  verify::Rng rng(2);
  T4 d{2, 3, 7, 9};
  for (bool mx : {true, false}) {
    Pool pl{3, 3, 1, 2, mx};
    std::vector<float> x(d.count()), dy(pl.out(d).count());
    verify::fill_uniform(x, rng);
    verify::fill_uniform(dy, rng);
    const double e =
        fd_error(x, dy, pool_bwd(pl, d, x, dy), [&](const std::vector<float>& xx) { return pool_fwd(pl, d, xx); });
    EXPECT(e < 1e-4);
  }
}

TEST(softmax_sums_and_backward) {
  verify::Rng rng(3);
  T4 d{2, 5, 3, 4};
  for (bool channel : {false, true})
    for (bool log : {false, true}) {
      std::vector<float> x(d.count()), dy(d.count());
      verify::fill_uniform(x, rng, -3.f, 3.f);
      verify::fill_uniform(dy, rng);
      const std::vector<double> y = softmax_fwd(d, x, log, channel);
      // Each group sums to 1 (exp of log-softmax, for log).
      bool sums = true;
      softmax_groups(d, channel, [&](const std::vector<size_t>& g) {
        double s = 0;
        for (size_t i : g) s += log ? std::exp(y[i]) : y[i];
        sums = sums && std::fabs(s - 1) < 1e-12;
      });
      EXPECT(sums);
      std::vector<float> yf(y.begin(), y.end());
      const double e = fd_error(x, dy, softmax_bwd(d, yf, dy, log, channel),
                                [&](const std::vector<float>& xx) { return softmax_fwd(d, xx, log, channel); });
      EXPECT(e < 1e-3);  // y is rounded to float for the backward, as the GPU's is
    }
}

TEST(batchnorm_forward_and_backward) {
  verify::Rng rng(4);
  T4 d{3, 4, 5, 6};
  std::vector<float> x(d.count()), dy(d.count()), scale(d.c), bias(d.c);
  verify::fill_uniform(x, rng, -2.f, 3.f);
  verify::fill_uniform(dy, rng);
  verify::fill_uniform(scale, rng, 0.5f, 2.f);
  verify::fill_uniform(bias, rng);
  const double eps = 1e-5;
  const BnStats st = bn_stats(d, x, eps);
  // The normalized output has per-channel mean bias and variance scale^2 (up to eps).
  const std::vector<double> y = bn_apply(d, x, scale, bias, st.mean, st.invstd);
  for (int c = 0; c < d.c; ++c) {
    double m = 0, v = 0, M = double(d.n) * d.h * d.w;
    for (int n = 0; n < d.n; ++n)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w) m += y[d.at(n, c, h, w)];
    m /= M;
    for (int n = 0; n < d.n; ++n)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w) v += (y[d.at(n, c, h, w)] - m) * (y[d.at(n, c, h, w)] - m);
    v /= M;
    EXPECT(std::fabs(m - bias[c]) < 1e-9);
    EXPECT(std::fabs(v - double(scale[c]) * scale[c] * st.var[c] / (st.var[c] + eps)) < 1e-9);
  }
  std::vector<double> dx, dscale, dbias;
  bn_bwd(d, x, dy, scale, st.mean, st.invstd, dx, dscale, dbias);
  const double e = fd_error(x, dy, dx, [&](const std::vector<float>& xx) {
    const BnStats s2 = bn_stats(d, xx, eps);
    return bn_apply(d, xx, scale, bias, s2.mean, s2.invstd);
  });
  EXPECT(e < 1e-3);
  // dscale and dbias: y is linear in them.
  double want_db = 0;
  for (int n = 0; n < d.n; ++n)
    for (int h = 0; h < d.h; ++h)
      for (int w = 0; w < d.w; ++w) want_db += dy[d.at(n, 1, h, w)];
  EXPECT(std::fabs(dbias[1] - want_db) < 1e-9);
}

int main() { return minitest::run_all(); }
