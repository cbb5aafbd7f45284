// day30_conv_vs_cudnn/toolbox_ref.h: CPU references (in double) for the rest of cuDNN's classic
// toolbox: activations, pooling, softmax, batch normalization, layout transforms.
//
// Host-only C++17, unit-tested by test_toolbox_ref.cpp, where every backward is checked against
// a finite difference of its forward (a backward that does not match its forward's slope is
// wrong, whatever cuDNN says). Tensors are NCHW float arrays; results are double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace tbx {

struct T4 {
  int n, c, h, w;
  size_t count() const { return size_t(n) * c * h * w; }
  size_t at(int i, int j, int k, int l) const { return ((size_t(i) * c + j) * h + k) * w + l; }
};

// ---- Activations --------------------------------------------------------------------------------
// coef: the ELU's alpha, or the clipped ReLU's ceiling.
enum class Act { Relu, Sigmoid, Tanh, Elu, Clipped };

inline double act_f(Act a, double x, double coef) {
  switch (a) {
    case Act::Relu:
      return x > 0 ? x : 0;
    case Act::Sigmoid:
      return 1 / (1 + std::exp(-x));
    case Act::Tanh:
      return std::tanh(x);
    case Act::Elu:
      return x > 0 ? x : coef * (std::exp(x) - 1);
    case Act::Clipped:
      return std::min(std::max(x, 0.0), coef);
  }
  return 0;
}
// The slope f'(x) (the kinks of ReLU and clipped ReLU get 0, as in cuDNN: inputs never hit them
// exactly in the tests, which use random non-integer values).
inline double act_df(Act a, double x, double coef) {
  switch (a) {
    case Act::Relu:
      return x > 0 ? 1 : 0;
    case Act::Sigmoid: {
      const double s = 1 / (1 + std::exp(-x));
      return s * (1 - s);
    }
    case Act::Tanh: {
      const double t = std::tanh(x);
      return 1 - t * t;
    }
    case Act::Elu:
      return x > 0 ? 1 : coef * std::exp(x);
    case Act::Clipped:
      return (x > 0 && x < coef) ? 1 : 0;
  }
  return 0;
}
inline std::vector<double> act_fwd(Act a, const std::vector<float>& x, double coef) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = act_f(a, x[i], coef);
  return y;
}
inline std::vector<double> act_bwd(Act a, const std::vector<float>& x, const std::vector<float>& dy, double coef) {
  std::vector<double> dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) dx[i] = double(dy[i]) * act_df(a, x[i], coef);
  return dx;
}

// ---- Pooling ------------------------------------------------------------------------------------
// Max: padding never wins (it is not a candidate). Average: divides by the window positions
// that lie inside the image (cuDNN's AVERAGE_COUNT_EXCLUDE_PADDING).
struct Pool {
  int R, S, pad, stride;
  bool max;
  int P(int H) const { return (H + 2 * pad - R) / stride + 1; }
  int Q(int W) const { return (W + 2 * pad - S) / stride + 1; }
  T4 out(T4 d) const { return {d.n, d.c, P(d.h), Q(d.w)}; }
};

// Calls f(input index) for every in-image position of output (n, c, p, q)'s window.
template <class F>
void pool_window(const Pool& pl, T4 d, int n, int c, int p, int q, F f) {
  for (int r = 0; r < pl.R; ++r) {
    const int h = p * pl.stride - pl.pad + r;
    if (h < 0 || h >= d.h) continue;
    for (int s = 0; s < pl.S; ++s) {
      const int w = q * pl.stride - pl.pad + s;
      if (w >= 0 && w < d.w) f(d.at(n, c, h, w));
    }
  }
}

inline std::vector<double> pool_fwd(const Pool& pl, T4 d, const std::vector<float>& x) {
  const T4 o = pl.out(d);
  std::vector<double> y(o.count());
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int p = 0; p < o.h; ++p)
        for (int q = 0; q < o.w; ++q) {
          double m = -std::numeric_limits<double>::infinity(), sum = 0;
          int cnt = 0;
          pool_window(pl, d, n, c, p, q, [&](size_t i) {
            m = std::max(m, double(x[i]));
            sum += x[i];
            ++cnt;
          });
          y[o.at(n, c, p, q)] = pl.max ? m : sum / cnt;
        }
  return y;
}

// dx: each output's gradient goes to its window's maximum (max) or is shared equally by the
// window's in-image positions (average); overlapping windows add up.
inline std::vector<double> pool_bwd(const Pool& pl, T4 d, const std::vector<float>& x, const std::vector<float>& dy) {
  const T4 o = pl.out(d);
  std::vector<double> dx(d.count(), 0.0);
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int p = 0; p < o.h; ++p)
        for (int q = 0; q < o.w; ++q) {
          const double g = dy[o.at(n, c, p, q)];
          if (pl.max) {
            size_t arg = 0;
            double m = -std::numeric_limits<double>::infinity();
            pool_window(pl, d, n, c, p, q, [&](size_t i) {
              if (x[i] > m) m = x[i], arg = i;
            });
            dx[arg] += g;
          } else {
            int cnt = 0;
            pool_window(pl, d, n, c, p, q, [&](size_t) { ++cnt; });
            pool_window(pl, d, n, c, p, q, [&](size_t i) { dx[i] += g / cnt; });
          }
        }
  return dx;
}

// ---- Softmax ------------------------------------------------------------------------------------
// Instance mode: one distribution per image over all C*H*W values. Channel mode: one per
// (n, h, w) position over the C channels. `log`: log-softmax.

// Calls f(list of flat indices) for each group that one softmax normalizes over.
template <class F>
void softmax_groups(T4 d, bool channel, F f) {
  std::vector<size_t> g;
  if (channel) {
    g.resize(d.c);
    for (int n = 0; n < d.n; ++n)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w) {
          for (int c = 0; c < d.c; ++c) g[c] = d.at(n, c, h, w);
          f(g);
        }
  } else {
    const size_t per = size_t(d.c) * d.h * d.w;
    g.resize(per);
    for (int n = 0; n < d.n; ++n) {
      for (size_t i = 0; i < per; ++i) g[i] = n * per + i;
      f(g);
    }
  }
}

inline std::vector<double> softmax_fwd(T4 d, const std::vector<float>& x, bool log, bool channel) {
  std::vector<double> y(x.size());
  softmax_groups(d, channel, [&](const std::vector<size_t>& g) {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (size_t i : g) m = std::max(m, double(x[i]));
    for (size_t i : g) sum += std::exp(x[i] - m);
    for (size_t i : g) y[i] = log ? (x[i] - m) - std::log(sum) : std::exp(x[i] - m) / sum;
  });
  return y;
}

// Given the forward's output y: softmax dx = y * (dy - sum(dy * y)); log-softmax dx = dy - exp(y) * sum(dy).
inline std::vector<double> softmax_bwd(T4 d, const std::vector<float>& y, const std::vector<float>& dy, bool log,
                                       bool channel) {
  std::vector<double> dx(y.size());
  softmax_groups(d, channel, [&](const std::vector<size_t>& g) {
    double s = 0;
    for (size_t i : g) s += log ? double(dy[i]) : double(dy[i]) * y[i];
    for (size_t i : g) dx[i] = log ? dy[i] - std::exp(double(y[i])) * s : y[i] * (dy[i] - s);
  });
  return dx;
}

// ---- Batch normalization (spatial: one mean and variance per channel over N, H, W) -------------
struct BnStats {
  std::vector<double> mean, var;  // var: biased (divided by M = N*H*W), what normalizes
  std::vector<double> invstd;     // 1 / sqrt(var + eps), what cuDNN saves for the backward
};

inline BnStats bn_stats(T4 d, const std::vector<float>& x, double eps) {
  BnStats s;
  s.mean.assign(d.c, 0);
  s.var.assign(d.c, 0);
  s.invstd.assign(d.c, 0);
  const double M = double(d.n) * d.h * d.w;
  for (int c = 0; c < d.c; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < d.n; ++n)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w) sum += x[d.at(n, c, h, w)];
    const double mean = sum / M;
    for (int n = 0; n < d.n; ++n)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w) {
          const double v = x[d.at(n, c, h, w)] - mean;
          sq += v * v;
        }
    s.mean[c] = mean;
    s.var[c] = sq / M;
    s.invstd[c] = 1 / std::sqrt(s.var[c] + eps);
  }
  return s;
}

// y = scale * (x - mean) * invstd + bias, per channel.
inline std::vector<double> bn_apply(T4 d, const std::vector<float>& x, const std::vector<float>& scale,
                                    const std::vector<float>& bias, const std::vector<double>& mean,
                                    const std::vector<double>& invstd) {
  std::vector<double> y(x.size());
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w) {
          const size_t i = d.at(n, c, h, w);
          y[i] = scale[c] * (x[i] - mean[c]) * invstd[c] + bias[c];
        }
  return y;
}

// The training-mode backward (the batch statistics depend on x, so dx has three terms):
//   dbias = sum dy,  dscale = sum dy * xhat,  dx = scale * invstd / M * (M dy - dbias - xhat dscale).
inline void bn_bwd(T4 d, const std::vector<float>& x, const std::vector<float>& dy, const std::vector<float>& scale,
                   const std::vector<double>& mean, const std::vector<double>& invstd, std::vector<double>& dx,
                   std::vector<double>& dscale, std::vector<double>& dbias) {
  const double M = double(d.n) * d.h * d.w;
  dx.assign(x.size(), 0);
  dscale.assign(d.c, 0);
  dbias.assign(d.c, 0);
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w) {
          const size_t i = d.at(n, c, h, w);
          dbias[c] += dy[i];
          dscale[c] += dy[i] * (x[i] - mean[c]) * invstd[c];
        }
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w) {
          const size_t i = d.at(n, c, h, w);
          const double xhat = (x[i] - mean[c]) * invstd[c];
          dx[i] = scale[c] * invstd[c] / M * (M * dy[i] - dbias[c] - xhat * dscale[c]);
        }
}

}  // namespace tbx
