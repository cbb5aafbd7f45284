// common/tests/test_conv_ref.cpp: host unit tests for the conv shape logic and the CPU references
// CPU reference (no GPU).
#include <algorithm>
#include <cmath>
#include <vector>

#include "conv_shape.h"
#include "minitest.h"
#include "verify.h"

TEST(output_sizes) {
  ConvShape a{1, 1, 1024, 2048, 1, 3, 3, 1, 1, 1};
  EXPECT(a.P() == 1024 && a.Q() == 2048);
  ConvShape b{32, 3, 224, 224, 64, 7, 7, 3, 2, 1};  // ResNet's first layer
  EXPECT(b.P() == 112 && b.Q() == 112);
  ConvShape c{1, 1, 10, 10, 1, 3, 3, 0, 1, 2};  // dilation 2: a 5x5 footprint
  EXPECT(c.P() == 6 && c.Q() == 6);
  EXPECT(a.invalid().empty() && b.invalid().empty());
  ConvShape bad{1, 1, 2, 2, 1, 5, 5, 0, 1, 1};
  EXPECT(!bad.invalid().empty());  // filter larger than the padded input
  ConvShape neg{1, 1, 8, 8, 1, 3, 3, -1, 1, 1};
  EXPECT(!neg.invalid().empty());
}

// Shapes whose sizes overflow an int are refused, not wrapped (run under -fsanitize=undefined by
// `make test-asan`, this also proves invalid() itself does no signed overflow).
TEST(overflowing_shapes_are_refused) {
  const int kMax = 2147483647;
  const ConvShape cases[] = {
      {1, 1, 8, 8, 1, 65536, 1, 0, 1, 65536},  // dil*(R-1) = 2^32 - 2^16: wrapped to a small number in int
      {1, 1, 8, 8, 1, 1, 65536, 0, 1, 65536},  // the same in S
      {1, 1, 8, 8, 1, 3, 3, kMax, 1, 1},       // H + 2*pad overflows
      {1, 1, kMax, kMax, 1, 1, 1, 0, 1, 1},    // a field beyond 2^24
      {1, 1, 8, 8, 1, 3, 3, 0, kMax, kMax},
      {1 << 20, 1 << 20, 4, 4, 1, 1, 1, 0, 1, 1},              // x has 2^44 elements
      {1, 1 << 20, 1, 1, 1 << 20, 1, 1, 0, 1, 1},              // w has 2^40 elements
      {1 << 12, 1, 1 << 12, 1 << 12, 1 << 12, 1, 1, 0, 1, 1},  // y (not x) beyond 2^31
  };
  for (const ConvShape& c : cases) EXPECT(!c.invalid().empty());
  // The largest shapes still accepted: 2^31 - 1 elements is allowed, one more is not.
  EXPECT((ConvShape{1, 1, 1, kMax, 1, 1, 1, 0, 1, 1}).invalid().empty() == false);                // W beyond 2^24
  EXPECT((ConvShape{1 << 7, 1, 1 << 12, 1 << 12, 1, 1, 1, 0, 1, 1}).invalid().empty() == false);  // exactly 2^31
  EXPECT((ConvShape{(1 << 7) - 1, 1, 1 << 12, 1 << 12, 1, 1, 1, 0, 1, 1}).invalid().empty());
  EXPECT((ConvShape{1, 1, 1 << 24, 1, 1, 1 << 23, 1, 0, 2, 1}).invalid().empty());
}

TEST(known_values) {
  // 1x1x3x3 input 1..9, 2x2 filter of ones, no padding: each output sums a 2x2 window.
  ConvShape s{1, 1, 3, 3, 1, 2, 2, 0, 1, 1};
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 1, 1, 1};
  std::vector<double> y(4);
  ref::conv_full(s, x.data(), w.data(), y.data());
  EXPECT(y[0] == 12 && y[1] == 16 && y[2] == 24 && y[3] == 28);
  // Cross-correlation, not convolution: a filter [1 0; 0 0] picks the top-left of each window.
  std::vector<float> w2 = {1, 0, 0, 0};
  ref::conv_full(s, x.data(), w2.data(), y.data());
  EXPECT(y[0] == 1 && y[1] == 2 && y[2] == 4 && y[3] == 5);
}

TEST(padding_stride_dilation) {
  // Padding 1 around a 2x2 image of ones with a 3x3 filter of ones: corner outputs see 4 ones.
  ConvShape s{1, 1, 2, 2, 1, 3, 3, 1, 1, 1};
  std::vector<float> x(4, 1.f), w(9, 1.f);
  std::vector<double> y(4);
  ref::conv_full(s, x.data(), w.data(), y.data());
  EXPECT(y[0] == 4 && y[3] == 4);
  // Stride 2 and dilation 2 against a direct evaluation of the formula.
  ConvShape t{2, 3, 11, 13, 4, 3, 3, 2, 2, 2};
  verify::Rng rng(3);
  std::vector<float> xs(t.x_elems()), ws(t.w_elems());
  verify::fill_uniform(xs, rng);
  verify::fill_uniform(ws, rng);
  std::vector<double> ys(t.y_elems());
  ref::conv_full(t, xs.data(), ws.data(), ys.data());
  const int P = t.P(), Q = t.Q();
  bool ok = true;
  for (int n = 0; n < t.N; ++n)
    for (int k = 0; k < t.K; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          double a = 0;
          for (int c = 0; c < t.C; ++c)
            for (int r = 0; r < 3; ++r)
              for (int u = 0; u < 3; ++u) {
                int h = p * 2 - 2 + r * 2, v = q * 2 - 2 + u * 2;
                if (h >= 0 && h < t.H && v >= 0 && v < t.W)
                  a += double(xs[((n * t.C + c) * t.H + h) * t.W + v]) * ws[((k * t.C + c) * 3 + r) * 3 + u];
              }
          ok = ok && std::fabs(a - ys[((n * t.K + k) * P + p) * Q + q]) < 1e-12;
        }
  EXPECT(ok);
}

TEST(sampled_matches_full) {
  ConvShape t{2, 5, 9, 7, 3, 3, 3, 1, 1, 1};
  verify::Rng rng(9);
  std::vector<float> xs(t.x_elems()), ws(t.w_elems());
  verify::fill_uniform(xs, rng);
  verify::fill_uniform(ws, rng);
  std::vector<double> full(t.y_elems());
  ref::conv_full(t, xs.data(), ws.data(), full.data());
  std::vector<size_t> idx;
  std::vector<double> val;
  ref::conv_sampled(t, xs.data(), ws.data(), 50, 1, idx, val);
  bool ok = idx.size() == 50 && idx[0] == 0 && idx[1] == t.y_elems() - 1;
  for (size_t i = 0; i < idx.size(); ++i) ok = ok && val[i] == full[idx[i]];
  EXPECT(ok);
}

// The backward references are the adjoints of the forward: for any dy,
//   <dy, conv(x, w)> = <bwd_data(dy, w), x> = <bwd_filter(x, dy), w>.
// Checked on shapes with padding, stride and dilation, where an off-by-one in the index
// algebra breaks the identity by O(1).
TEST(backward_is_the_adjoint) {
  const ConvShape shapes[] = {{2, 3, 11, 9, 4, 3, 3, 1, 1, 1},
                              {1, 2, 13, 10, 3, 5, 3, 2, 2, 1},
                              {2, 2, 12, 12, 2, 3, 3, 2, 1, 2},
                              {1, 4, 7, 8, 5, 1, 1, 0, 2, 1}};
  verify::Rng rng(7);
  for (const ConvShape& s : shapes) {
    std::vector<float> x(s.x_elems()), w(s.w_elems()), dy(s.y_elems());
    verify::fill_uniform(x, rng);
    verify::fill_uniform(w, rng);
    verify::fill_uniform(dy, rng);
    std::vector<double> y(s.y_elems());
    ref::conv_full(s, x.data(), w.data(), y.data());
    double lhs = 0, rd = 0, rf = 0;
    for (size_t i = 0; i < y.size(); ++i) lhs += double(dy[i]) * y[i];
    const std::vector<double> dx =
        ref::bwd_data_sampled(s, dy.data(), w.data(), ref::sample_indices(s.x_elems(), s.x_elems(), 0));
    const std::vector<double> dw =
        ref::bwd_filter_sampled(s, x.data(), dy.data(), ref::sample_indices(s.w_elems(), s.w_elems(), 0));
    for (size_t i = 0; i < dx.size(); ++i) rd += dx[i] * x[i];
    for (size_t i = 0; i < dw.size(); ++i) rf += dw[i] * w[i];
    EXPECT(std::fabs(lhs - rd) <= 1e-9 * (1 + std::fabs(lhs)));
    EXPECT(std::fabs(lhs - rf) <= 1e-9 * (1 + std::fabs(lhs)));
  }
}

// A known backward value: 1x1x3x3 input, 2x2 filter of ones, no padding, dy all ones.
// dx counts how many windows cover each input; dw sums the 2x2 windows' inputs.
TEST(backward_known_values) {
  ConvShape s{1, 1, 3, 3, 1, 2, 2, 0, 1, 1};
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 1, 1, 1}, dy = {1, 1, 1, 1};
  const std::vector<double> dx = ref::bwd_data_sampled(s, dy.data(), w.data(), ref::sample_indices(9, 9, 0));
  const double want_dx[9] = {1, 2, 1, 2, 4, 2, 1, 2, 1};
  for (int i = 0; i < 9; ++i) EXPECT(dx[i] == want_dx[i]);
  const std::vector<double> dw = ref::bwd_filter_sampled(s, x.data(), dy.data(), ref::sample_indices(4, 4, 0));
  EXPECT(dw[0] == 1 + 2 + 4 + 5 && dw[1] == 2 + 3 + 5 + 6 && dw[2] == 4 + 5 + 7 + 8 && dw[3] == 5 + 6 + 8 + 9);
}

TEST(layout_round_trip) {
  std::vector<int> a(2 * 3 * 4 * 5);
  for (size_t i = 0; i < a.size(); ++i) a[i] = int(i);
  const std::vector<int> b = ref::nchw_to_nhwc(a, 2, 3, 4, 5);
  EXPECT(b[1] == a[20]);  // NHWC: channel is the fastest index; (n0,h0,w0,c1) = NCHW offset 1*4*5
  EXPECT(ref::nhwc_to_nchw(b, 2, 3, 4, 5) == a);
}

int main() { return minitest::run_all(); }
