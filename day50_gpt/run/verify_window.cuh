// day50_gpt/run/verify_window.cuh: gpt --verify's check of generation past the context length: the
// generator's sliding window (re-prefill + one decoding step, run/generate.cuh) against recomputing the
// whole window with the training forward at every byte (fp32, the hand-written attention: another
// code path than the re-prefill's matmul attention and the decoder's).
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../gpt_ref.h"
#include "../nn/model.cuh"
#include "generate.cuh"
#include "results.h"
#include "verify.h"

inline void verify_sliding_window(results::Results& res, uint64_t seed, const gpt::Config& c) {
  const int T = c.context, V = c.vocab;
  const std::string tag = "sliding window generation (context " + std::to_string(T) + ")";
  verify::Rng rng(seed);
  std::vector<float> p = gpt::init_params(c, rng);
  for (auto& w : p) w *= 3.f;  // spread the logits, so that the greedy choices are rarely near-ties
  const std::vector<int> prompt = {int(rng.next() % 256), int(rng.next() % 256), int(rng.next() % 256)};
  const int P = int(prompt.size()), n = 3 * T;  // two full slides of the window past the context
  Generator g(c, p, n, P);
  for (int t : prompt) g.feed(t);
  g.prepare(std::vector<double>(size_t(n), 0.5), 1.0, 1);  // top-k 1: greedy
  Model<float> ref(c, 1, Attn::kNaive);
  to_device(ref.params.as<float>(), p);
  CUDA_CHECK(cudaMemset(ref.tgt.as(), 0, ref.tgt.bytes()));
  // Near-ties (top two logits closer than this) do not judge the greedy byte: rounding may swap them.
  const verify::Tol tie{1e-4, 1e-4, "fp32"};
  std::vector<double> got, want;
  std::vector<int> text(prompt);
  int compared = 0, wrong = 0, ties = 0, expect = -1;
  bool expect_tie = true;
  for (int i = 0; i < n; ++i) {
    g.generate_one(i);
    const std::vector<float> l = g.logits_now();  // after byte i: the prediction of byte i + 1
    text.push_back(to_host(g.out + i, 1)[0]);
    if (!expect_tie) compared++, wrong += text.back() != expect;  // byte i, greedy from the previous logits
    const int at = P + i;
    expect_tie = true;
    if (at < T) continue;  // the window has not slid yet: verify_generate's checks cover these positions
    to_device(ref.tok.as<int>(), std::vector<int>(text.end() - T, text.end()));
    ref.forward(false);
    const std::vector<float> r = to_host(ref.logits.as<float>() + size_t(T - 1) * V, size_t(V));
    got.insert(got.end(), l.begin(), l.end()), want.insert(want.end(), r.begin(), r.end());
    // The greedy byte the recomputation picks; skipped where its top two are within the tolerance.
    std::vector<int> idx(static_cast<size_t>(V));
    for (int v = 0; v < V; ++v) idx[size_t(v)] = v;
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(), [&](int a, int b) {
      return r[size_t(a)] > r[size_t(b)] || (r[size_t(a)] == r[size_t(b)] && a < b);
    });
    const double top = r[size_t(idx[0])], gap = top - r[size_t(idx[1])];
    expect = idx[0], expect_tie = !(gap > 2 * (tie.atol + tie.rtol * std::fabs(top)));
    ties += expect_tie && i + 1 < n;
  }
  std::vector<double> gd(got.begin(), got.end());
  // Two fp32 computations of the same logits, in different orders (the decode kernels' GEMVs against
  // the training forward's cuBLAS GEMMs). Each keeps within 1e-5 of the double CPU model in the other
  // checks: the decode path absolutely (verify_generate), the training forward relative to the largest
  // logit (verify_tiny), so their difference stays within 1e-5 * (max|logit| + 1). (With 1e-5 alone, an
  // H200 run failed at 1.4e-5 on logits of this size.)
  double zmax = 0;
  for (double z : want) zmax = std::max(zmax, std::fabs(z));
  const verify::Tol tol{1e-5 * (zmax + 1), 1e-4, "fp32, two paths"};
  res.add(verify::compare(tag + ": logits at every position past the context vs the training forward over the window",
                          gd.data(), want.data(), gd.size(), tol));
  res.add(verify::fact(tag + ": greedy bytes == the recomputed window's argmax", wrong == 0 && compared > 0, "exact",
                       std::to_string(ties) + " near-ties skipped", size_t(compared), size_t(wrong)));
}
