// common/conv_shape.h: a 2D convolution's shape, its output size, and CPU references in double
// (host-only; unit-tested by common/tests/test_conv_ref.cpp). Used by day20, day30 and day40.
//
// The operation (cross-correlation, as in every deep-learning library and cuDNN's
// CUDNN_CROSS_CORRELATION mode; a "convolution" would flip the filter):
//
//   y[n][k][p][q] = sum_{c, r, s} x[n][c][p*stride - pad + r*dil][q*stride - pad + s*dil] * w[k][c][r][s]
//
// with x: N x C x H x W, w: K x C x R x S, y: N x K x P x Q, all NCHW/KCRS, row-major, and
// out-of-range input positions reading as zero (the padding).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

// The shape is passed to kernels by value; its size helpers run on both sides. (This header
// also builds with plain g++ for the host tests, where the qualifiers vanish.)
#ifdef __CUDACC__
#define CONV_HD __host__ __device__
#else
#define CONV_HD
#endif

struct ConvShape {
  int N, C, H, W, K, R, S, pad, stride, dil;

  CONV_HD int P() const { return (H + 2 * pad - dil * (R - 1) - 1) / stride + 1; }
  CONV_HD int Q() const { return (W + 2 * pad - dil * (S - 1) - 1) / stride + 1; }
  size_t x_elems() const { return size_t(N) * C * H * W; }
  size_t w_elems() const { return size_t(K) * C * R * S; }
  size_t y_elems() const { return size_t(N) * K * P() * Q(); }
  double flops() const { return 2.0 * double(y_elems()) * C * R * S; }
  // The fewest bytes any implementation moves: read x and w once, write y once.
  double min_bytes() const { return 4.0 * double(x_elems() + w_elems() + y_elems()); }
  std::string str() const {
    std::string s = std::to_string(N) + "x" + std::to_string(C) + "x" + std::to_string(H) + "x" + std::to_string(W) +
                    " K" + std::to_string(K) + " " + std::to_string(R) + "x" + std::to_string(S);
    if (pad) s += " pad" + std::to_string(pad);
    if (stride != 1) s += " stride" + std::to_string(stride);
    if (dil != 1) s += " dil" + std::to_string(dil);
    return s;
  }
  // Empty string if the shape makes sense; otherwise why not (for a usage error). Judged in 64-bit
  // arithmetic: `conv --conv 1,1,8,8,1,65536,1,0,1,65536` once overflowed dil*(R-1) in int. Each field
  // is capped at 2^24 so that no product of two fields below overflows int64, and every tensor at 2^31
  // elements, so that P(), Q() and the kernels' int indices are safe once a shape passes.
  std::string invalid() const {
    if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1 || R < 1 || S < 1) return "all sizes must be >= 1";
    if (stride < 1 || dil < 1) return "stride and dilation must be >= 1";
    if (pad < 0) return "padding must be >= 0";
    const int64_t kMaxField = int64_t(1) << 24, kMaxElems = 2147483647;
    for (int v : {N, C, H, W, K, R, S, pad, stride, dil})
      if (v > kMaxField) return "a size of " + std::to_string(v) + " is beyond this program's limit 2^24";
    const int64_t fh = int64_t(dil) * (R - 1) + 1, fw = int64_t(dil) * (S - 1) + 1;
    const int64_t ph = int64_t(H) + 2 * int64_t(pad), pw = int64_t(W) + 2 * int64_t(pad);
    if (fh > ph || fw > pw)
      return "the (dilated) filter " + std::to_string(fh) + "x" + std::to_string(fw) +
             " is larger than the padded input " + std::to_string(ph) + "x" + std::to_string(pw);
    const int64_t p = (ph - fh) / stride + 1, q = (pw - fw) / stride + 1;
    // Products of four factors, each <= 2^25: checked one factor at a time against the limit.
    auto fits = [&](std::initializer_list<int64_t> f) {
      int64_t acc = 1;
      for (int64_t x : f) {
        acc *= x;
        if (acc > kMaxElems) return false;
      }
      return true;
    };
    if (!fits({N, C, H, W}) || !fits({K, C, R, S}) || !fits({N, K, p, q}))
      return "a tensor has more than 2^31 elements";
    return "";
  }
};

namespace ref {

// One output in double precision.
inline double conv_at(const ConvShape& s, const float* x, const float* w, int n, int k, int p, int q) {
  double acc = 0;
  for (int c = 0; c < s.C; ++c)
    for (int r = 0; r < s.R; ++r) {
      const int h = p * s.stride - s.pad + r * s.dil;
      if (h < 0 || h >= s.H) continue;
      for (int t = 0; t < s.S; ++t) {
        const int v = q * s.stride - s.pad + t * s.dil;
        if (v < 0 || v >= s.W) continue;
        acc += double(x[((size_t(n) * s.C + c) * s.H + h) * s.W + v]) *
               double(w[((size_t(k) * s.C + c) * s.R + r) * s.S + t]);
      }
    }
  return acc;
}

// The whole output, split over the CPU's threads by (n, k) planes.
inline void conv_full(const ConvShape& s, const float* x, const float* w, double* y) {
  const int P = s.P(), Q = s.Q(), planes = s.N * s.K;
  const int nt = std::max(1, std::min<int>(int(std::thread::hardware_concurrency()), planes));
  std::vector<std::thread> pool;
  for (int t = 0; t < nt; ++t)
    pool.emplace_back([&, t] {
      for (int pl = t; pl < planes; pl += nt) {
        const int n = pl / s.K, k = pl % s.K;
        for (int p = 0; p < P; ++p)
          for (int q = 0; q < Q; ++q) y[(size_t(pl) * P + p) * Q + q] = conv_at(s, x, w, n, k, p, q);
      }
    });
  for (auto& th : pool) th.join();
}

// `count` flat indices spread over [0, total) (every n, k, p, q range gets hit), always with the
// first and the last (corners test the padding); all of them if count >= total.
inline std::vector<size_t> sample_indices(size_t total, size_t count, uint64_t seed) {
  std::vector<size_t> idx;
  if (count >= total) {
    for (size_t i = 0; i < total; ++i) idx.push_back(i);
    return idx;
  }
  uint64_t z = seed;
  for (size_t i = 0; i < count; ++i) {
    z += 0x9E3779B97F4A7C15ull;
    uint64_t m = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    m = (m ^ (m >> 27)) * 0x94D049BB133111EBull;
    m ^= m >> 31;
    idx.push_back(i == 0 ? 0 : i == 1 ? total - 1 : size_t(m % total));
  }
  return idx;
}

// f(flat index) for each index, split over the CPU's threads.
template <class F>
std::vector<double> eval_at(const std::vector<size_t>& idx, F f) {
  std::vector<double> val(idx.size());
  const int nt = std::max(1, std::min<int>(int(std::thread::hardware_concurrency()), int(idx.size() / 64 + 1)));
  std::vector<std::thread> pool;
  for (int t = 0; t < nt; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = t; i < idx.size(); i += nt) val[i] = f(idx[i]);
    });
  for (auto& th : pool) th.join();
  return val;
}

// Splits a flat NCHW-style index into its four coordinates (d1..d3 are the inner sizes).
struct Idx4 {
  int a, b, c, d;
};
inline Idx4 unflatten(size_t f, int d1, int d2, int d3) {
  Idx4 r;
  r.d = int(f % d3);
  f /= d3;
  r.c = int(f % d2);
  f /= d2;
  r.b = int(f % d1);
  r.a = int(f / d1);
  return r;
}

// For shapes too large for a full CPU reference: `count` outputs at sampled indices.
inline void conv_sampled(const ConvShape& s, const float* x, const float* w, size_t count, uint64_t seed,
                         std::vector<size_t>& idx, std::vector<double>& val) {
  idx = sample_indices(s.y_elems(), count, seed);
  const int P = s.P(), Q = s.Q();
  val = eval_at(idx, [&](size_t f) {
    const Idx4 i = unflatten(f, s.K, P, Q);
    return conv_at(s, x, w, i.a, i.b, i.c, i.d);
  });
}

// Backward data, one element: dx[n][c][h][v] = sum over (k, r, t) of dy[n][k][p][q] * w[k][c][r][t]
// for every output (p, q) whose window put input (h, v) under filter tap (r, t), i.e.
// h = p*stride - pad + r*dil. It is the adjoint of the forward in x: <dy, conv(x, w)> = <dx, x>.
inline double bwd_data_at(const ConvShape& s, const float* dy, const float* w, int n, int c, int h, int v) {
  const int P = s.P(), Q = s.Q();
  double acc = 0;
  for (int k = 0; k < s.K; ++k)
    for (int r = 0; r < s.R; ++r) {
      const int ph = h + s.pad - r * s.dil;
      if (ph < 0 || ph % s.stride) continue;
      const int p = ph / s.stride;
      if (p >= P) continue;
      for (int t = 0; t < s.S; ++t) {
        const int qv = v + s.pad - t * s.dil;
        if (qv < 0 || qv % s.stride) continue;
        const int q = qv / s.stride;
        if (q >= Q) continue;
        acc += double(dy[((size_t(n) * s.K + k) * P + p) * Q + q]) *
               double(w[((size_t(k) * s.C + c) * s.R + r) * s.S + t]);
      }
    }
  return acc;
}

// Backward filter, one element: dw[k][c][r][t] = sum over (n, p, q) of dy[n][k][p][q] times the
// input that tap (r, t) saw at output (p, q). The adjoint of the forward in w: <dy, conv(x, w)> = <dw, w>.
inline double bwd_filter_at(const ConvShape& s, const float* x, const float* dy, int k, int c, int r, int t) {
  const int P = s.P(), Q = s.Q();
  double acc = 0;
  for (int n = 0; n < s.N; ++n)
    for (int p = 0; p < P; ++p) {
      const int h = p * s.stride - s.pad + r * s.dil;
      if (h < 0 || h >= s.H) continue;
      for (int q = 0; q < Q; ++q) {
        const int v = q * s.stride - s.pad + t * s.dil;
        if (v < 0 || v >= s.W) continue;
        acc += double(dy[((size_t(n) * s.K + k) * P + p) * Q + q]) *
               double(x[((size_t(n) * s.C + c) * s.H + h) * s.W + v]);
      }
    }
  return acc;
}

inline std::vector<double> bwd_data_sampled(const ConvShape& s, const float* dy, const float* w,
                                            const std::vector<size_t>& idx) {
  return eval_at(idx, [&](size_t f) {
    const Idx4 i = unflatten(f, s.C, s.H, s.W);
    return bwd_data_at(s, dy, w, i.a, i.b, i.c, i.d);
  });
}

inline std::vector<double> bwd_filter_sampled(const ConvShape& s, const float* x, const float* dy,
                                              const std::vector<size_t>& idx) {
  return eval_at(idx, [&](size_t f) {
    const Idx4 i = unflatten(f, s.C, s.R, s.S);
    return bwd_filter_at(s, x, dy, i.a, i.b, i.c, i.d);
  });
}

// NCHW <-> NHWC (also KCRS <-> KRSC for filters): the same numbers, another memory order.
template <class T>
std::vector<T> nchw_to_nhwc(const std::vector<T>& a, int N, int C, int H, int W) {
  std::vector<T> b(a.size());
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) b[((size_t(n) * H + h) * W + w) * C + c] = a[((size_t(n) * C + c) * H + h) * W + w];
  return b;
}
template <class T>
std::vector<T> nhwc_to_nchw(const std::vector<T>& b, int N, int C, int H, int W) {
  std::vector<T> a(b.size());
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) a[((size_t(n) * C + c) * H + h) * W + w] = b[((size_t(n) * H + h) * W + w) * C + c];
  return a;
}

}  // namespace ref
