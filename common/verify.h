// common/verify.h: NaN-safe result checks, tolerances by precision, seeded random inputs.
//
// Host-only (plain C++17), unit-tested in common/tests. An element passes when
//
//     err = |out - ref|   and   err <= atol + rtol * |ref|
//
// written as `!(err <= tol)` -> fail, so a NaN or Inf in the output (or the reference)
// fails instead of slipping through a `err > tol` test. GPU outputs are poisoned with
// NaN before each run (common/check.cuh: poison), so an element nobody wrote fails too.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace verify {

// Tolerances by precision. `atol` is in units of the result's typical magnitude:
// scale it with `Tol::scaled(m)` (e.g. m = sqrt(K) for a K-long dot product of
// O(1) random numbers, whose sum grows like sqrt(K) and whose cancellation can
// leave any single result near zero, where only atol can judge it).
struct Tol {
  double atol, rtol;
  const char* precision;
  Tol scaled(double magnitude) const { return Tol{atol * magnitude, rtol, precision}; }
};

// fp32 arithmetic against a double reference: rounding grows slowly with the
// reduction length; 1e-4 leaves room for K up to ~10^5 without hiding real bugs
// (a wrong index changes results by O(1)).
inline constexpr Tol kFp32{1e-4, 1e-4, "fp32"};
// TF32 rounds inputs to 10 explicit mantissa bits (unit roundoff 2^-11 ~ 4.9e-4).
inline constexpr Tol kTf32{5e-3, 5e-3, "tf32"};
// bf16 has 7 explicit mantissa bits (2^-8 ~ 3.9e-3); fp16 has 10 (2^-11). These are for
// outputs stored in that type, compared to a reference computed from the same rounded inputs.
inline constexpr Tol kBf16{1.6e-2, 1.6e-2, "bf16"};
inline constexpr Tol kFp16{4e-3, 4e-3, "fp16"};

struct Check {
  std::string name;
  bool passed = false;
  size_t n = 0;          // elements compared
  size_t n_bad = 0;      // elements outside tolerance (NaN included)
  size_t first_bad = 0;  // index of the first bad element (valid when n_bad > 0)
  double bad_out = 0, bad_ref = 0;
  double max_abs_err = 0;  // max |out - ref| (NaN if any output was NaN)
  double max_rel_err = 0;  // max |out - ref| / |ref| over elements with |ref| >= 1e-3 * max|ref|
  double rel_l2 = 0;       // ||out - ref|| / ||ref||
  double worst = 0;        // max err / (atol + rtol|ref|): <= 1 passes
  Tol tol{0, 0, ""};
  std::string note;  // free text: a skip reason, an exact-match check, ...
};

// A check that is one yes/no fact rather than an element-wise comparison ("the replicas'
// weights are identical", "the loss fell"): n facts looked at, n_bad of them wrong. `what` names
// the kind of judgement ("exact", "bf16", ...); `note` says what was seen.
inline Check fact(const std::string& name, bool passed, const char* what = "exact", const std::string& note = "",
                  size_t n = 1, size_t n_bad = 0) {
  Check c;
  c.name = name;
  c.n = n;
  c.n_bad = passed ? n_bad : (n_bad ? n_bad : n);
  c.passed = passed && n > 0;
  c.tol = Tol{0, 0, what};
  c.note = note;
  return c;
}

inline double to_double(double x) { return x; }
inline double to_double(float x) { return x; }
template <class T>
inline double to_double(const T& x) {
  return double(float(x));
}  // half, bf16

// Compare out[0..n) against ref[0..n). Both are read through to_double, so T may be
// float, double, or a CUDA half/bf16 type (which converts to float on the host).
template <class T, class R>
Check compare(const std::string& name, const T* out, const R* ref, size_t n, Tol tol) {
  Check c;
  c.name = name;
  c.n = n;
  c.tol = tol;
  double max_ref = 0;
  for (size_t i = 0; i < n; ++i) {
    double r = std::fabs(to_double(ref[i]));
    if (r > max_ref) max_ref = r;
  }
  const double rel_floor = 1e-3 * max_ref;
  double num = 0, den = 0;
  bool nan_seen = false;
  for (size_t i = 0; i < n; ++i) {
    const double o = to_double(out[i]), r = to_double(ref[i]);
    const double err = std::fabs(o - r);
    const double lim = tol.atol + tol.rtol * std::fabs(r);
    if (!(err <= lim)) {  // NaN-safe: a NaN err is never <= lim
      if (c.n_bad == 0) {
        c.first_bad = i;
        c.bad_out = o;
        c.bad_ref = r;
      }
      ++c.n_bad;
    }
    if (err != err) {
      nan_seen = true;
      continue;
    }
    if (err > c.max_abs_err) c.max_abs_err = err;
    if (std::fabs(r) >= rel_floor && std::fabs(r) > 0 && err / std::fabs(r) > c.max_rel_err)
      c.max_rel_err = err / std::fabs(r);
    if (lim > 0 && err / lim > c.worst) c.worst = err / lim;
    num += err * err;
    den += r * r;
  }
  c.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (nan_seen) c.max_abs_err = c.max_rel_err = c.rel_l2 = c.worst = NAN;
  c.passed = (n > 0) && (c.n_bad == 0);
  return c;
}

// compare() on a subset: out[idx[i]] against want[i]. For outputs too large for a full CPU
// reference, the reference is computed at sampled flat indices only; the check's name says so.
template <class T>
Check compare_at(const std::string& name, const std::vector<T>& out, const std::vector<size_t>& idx,
                 const std::vector<double>& want, Tol tol) {
  std::vector<T> got(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) got[i] = out[idx[i]];
  const std::string n = name + (idx.size() == out.size() ? "" : " (" + std::to_string(idx.size()) + " sampled)");
  return compare(n, got.data(), want.data(), got.size(), tol);
}

// One line per check: "  PASS  name  max_abs 1.2e-06  max_rel 3.4e-07  (fp32: atol 1e-4 rtol 1e-4)"
inline void print(const Check& c) {
  std::printf("  %s  %-44s max_abs %.2e  max_rel %.2e  rel_l2 %.1e  (%s: atol %.1e, rtol %.1e)\n",
              c.passed ? "PASS" : "FAIL", c.name.c_str(), c.max_abs_err, c.max_rel_err, c.rel_l2, c.tol.precision,
              c.tol.atol, c.tol.rtol);
  if (!c.passed) {
    if (c.n == 0)
      std::printf("        nothing was compared\n");
    else
      std::printf("        %zu of %zu elements out of tolerance; first at index %zu: out %.7g, ref %.7g\n", c.n_bad,
                  c.n, c.first_bad, c.bad_out, c.bad_ref);
  }
}

// splitmix64: a tiny, high-quality, seedable generator. Each check draws from the
// stream, so successive checks see fresh inputs; the seed is printed to reproduce a run.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi), 24 random bits (exactly representable in float).
  float uniform(float lo = -1.f, float hi = 1.f) { return lo + (hi - lo) * float(next() >> 40) * (1.0f / 16777216.0f); }
  // Small integers in [-r, r]: their products and sums are exact in fp32 (and bf16
  // for r <= 8), so a check on them must match bit for bit.
  float small_int(int r) { return float(int64_t(next() % uint64_t(2 * r + 1)) - r); }

 private:
  uint64_t s_;
};

template <class T>
void fill_uniform(std::vector<T>& v, Rng& rng, float lo = -1.f, float hi = 1.f) {
  for (auto& x : v) x = T(rng.uniform(lo, hi));
}

template <class T>
void fill_small_int(std::vector<T>& v, Rng& rng, int r) {
  for (auto& x : v) x = T(rng.small_int(r));
}

}  // namespace verify
