// day50_gpt/run/verify_dropout.cuh: gpt --verify's checks of the dropout mask on the GPU: the same mask
// as the CPU's (nn/dropout.h, one function on both sides), a keep rate of 1 - p within sampling error,
// and a new mask at every step. (The model's logits and gradients with dropout, GPU against CPU, are
// verify_tiny's "dropout" checks.)
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "../nn/dropout.h"
#include "../nn/kernels/embedding.cuh"
#include "../train_ref.h"
#include "check.cuh"
#include "../nn/kernels/bias_gelu_residual.cuh"
#include "../nn/types.cuh"
#include "results.h"
#include "verify.h"

// The mask the GPU draws for `site` at `step` over n elements (1 kept, 0 dropped), through the kernel
// the backward uses.
inline std::vector<float> gpu_mask(const dropout::Params& d, uint32_t site, size_t n) {
  DeviceBuffer x(n * 4);
  to_device(x.as<float>(), std::vector<float>(n, 1.f));
  k::dropout_scale<<<grid_for(n), 256>>>(x.as<float>(), n, d, site);
  LAUNCH_CHECK();
  std::vector<float> h = to_host(x.as<float>(), n);
  for (float& v : h) v = v != 0.f ? 1.f : 0.f;
  return h;
}

inline void verify_dropout_mask(results::Results& res, uint64_t seed, double p) {
  const size_t n = size_t(1) << 22;  // 4 M elements: the keep rate's standard deviation is 1.5e-4 at p = 0.1
  const dropout::Params d1 = dropout::make(p, seed, 17), d2 = dropout::make(p, seed, 18);
  const uint32_t site = dropout::site_mlp(1);
  const std::vector<float> m1 = gpu_mask(d1, site, n), m2 = gpu_mask(d2, site, n);
  size_t kept = 0, differ = 0, cpu_differ = 0;
  for (size_t i = 0; i < n; ++i) {
    kept += m1[i] != 0.f, differ += m1[i] != m2[i];
    cpu_differ += (m1[i] != 0.f) != dropout::keep(d1, site, i);
  }
  char what[160];
  std::snprintf(what, sizeof what, "p %.2g, %zu elements", p, n);
  res.add(verify::fact("dropout mask: GPU == CPU, element by element (the same Philox4x32-10 draw)", cpu_differ == 0,
                       "exact", what, n, cpu_differ));
  // Binomial sampling error: within 5 standard deviations (a false alarm once in ~3.5 million runs).
  const double rate = double(kept) / double(n), sd = std::sqrt(p * (1 - p) / double(n));
  verify::Check ch = verify::fact("dropout mask: keep rate is 1 - p within 5 standard deviations",
                                  std::fabs(rate - (1 - p)) <= 5 * sd, "binomial", what);
  ch.max_abs_err = std::fabs(rate - (1 - p)), ch.tol.atol = 5 * sd;
  res.add(ch);
  // Two independent masks disagree on a fraction 2p(1-p) of the elements; the same mask would on none.
  const double q = 2 * p * (1 - p), f = double(differ) / double(n), sdq = std::sqrt(q * (1 - q) / double(n));
  verify::Check ch2 = verify::fact("dropout mask: two steps draw different, independent masks (differ in 2p(1-p))",
                                   std::fabs(f - q) <= 5 * sdq, "binomial", what);
  ch2.max_abs_err = std::fabs(f - q), ch2.tol.atol = 5 * sdq;
  res.add(ch2);
}

// Random batches: the GPU's gather (k::gather_batch_random) against the CPU's cut
// (train::batch_random) at two steps and an offset into the global batch, token for token; and the
// draws spread over the whole text (every tenth of it holds some sequence start over 40 steps).
inline void verify_random_batches(results::Results& res, const train::Corpus& data, uint64_t seed) {
  const int B = 7, T = 33;
  const uint64_t b0 = 5, n = data.train.size();
  DeviceBuffer corpus(n * sizeof(int)), tok(size_t(B) * T * sizeof(int)), tgt(size_t(B) * T * sizeof(int));
  to_device(corpus.as<int>(), data.train);
  size_t bad = 0, compared = 0;
  for (int64_t step : {int64_t(0), int64_t(4321)}) {
    poison(tok.as(), tok.bytes()), poison(tgt.as(), tgt.bytes());
    k::gather_batch_random<<<4, 64>>>(corpus.as<int>(), n, seed, step, b0, B, T, tok.as<int>(), tgt.as<int>());
    LAUNCH_CHECK();
    std::vector<int> want_tok, want_tgt;
    train::batch_random(data.train, seed, step, b0, B, T, want_tok, want_tgt);
    const std::vector<int> got_tok = to_host(tok.as<int>(), want_tok.size()),
                           got_tgt = to_host(tgt.as<int>(), want_tgt.size());
    for (size_t i = 0; i < want_tok.size(); ++i) bad += (got_tok[i] != want_tok[i]) + (got_tgt[i] != want_tgt[i]);
    compared += 2 * want_tok.size();
  }
  res.add(verify::fact("random batches: the GPU's gathered tokens and targets == the CPU's cut (2 steps)", bad == 0,
                       "exact", "", compared, bad));
  bool seen[10] = {};
  for (int64_t step = 0; step < 40; ++step)
    for (uint64_t b = 0; b < 16; ++b) seen[dropout::sequence_start(seed, step, b, n, T) * 10 / n] = true;
  int tenths = 0;
  for (bool x : seen) tenths += x;
  res.add(verify::fact("random batches: 640 draws start in every tenth of the text", tenths == 10, "exact",
                       std::to_string(tenths) + " of 10 tenths", 10, size_t(10 - tenths)));
}
