// day50_gpt/run/verify_tf32.cuh: gpt --verify's checks of --precision tf32, the fp32 model with its
// matmuls on the TF32 tensor cores (nn/matmul.cuh, nn/linear.cuh): the tiny GPT against the CPU model
// (verify_tiny with tf32's tolerances, run/verify.cuh), tf32 against fp32 on the same GPU (the same
// weights and batch), and a short training run whose loss curve must follow fp32's.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "results.h"
#include "verify.cuh"
#include "verify.h"
#include "verify_step.cuh"

// Two runs from the same seed, one tf32 and one fp32, differ by matmul rounding from the first step
// on, and the difference grows as the runs take different (equally good) paths. The tolerances are
// the bf16 data-parallel comparison's (run/multi_gpu.cuh), whose two runs differ by bf16 rounding
// (2^-8 relative): tf32's rounding is smaller (2^-11, 2^-10 truncated), so they hold with room. First
// the 10 first steps one by one, then means of 10 steps (single steps' losses scatter once the paths
// have parted), as check_curves compares data-parallel runs.
inline const verify::Tol kTf32FirstSteps{0, 5e-3, "tf32 vs fp32, first 10 steps"};
inline const verify::Tol kTf32LossMeans{0, 1e-2, "tf32 vs fp32, means of 10 steps"};

// tf32's per-step losses `tf` against fp32's `fp` (same seed, batches, dropout masks): the first 10
// steps, the means of 10 steps, and that the two differ at all (bitwise-equal losses would mean the
// TF32 tensor cores never ran). Returns the largest difference of two 10-step means.
inline double tf32_curve_checks(results::Results& res, const std::string& tag, const std::vector<double>& tf,
                                const std::vector<double>& fp) {
  const size_t n = std::min(tf.size(), fp.size()), first = std::min<size_t>(10, n);
  res.add(verify::compare(tag + ": the first " + std::to_string(first) + " steps' losses == fp32's", tf.data(),
                          fp.data(), first, kTf32FirstSteps));
  std::vector<double> a, r;
  double worst = 0;
  for (size_t i = 0; i + 10 <= n; i += 10) {
    double sa = 0, sr = 0;
    for (size_t j = i; j < i + 10; ++j) sa += tf[j], sr += fp[j];
    a.push_back(sa / 10), r.push_back(sr / 10);
    worst = std::max(worst, std::fabs(sa - sr) / 10);
  }
  res.add(verify::compare(tag + ": " + std::to_string(n) + " steps' losses follow fp32's (means of 10 steps)", a.data(),
                          r.data(), a.size(), kTf32LossMeans));
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += tf[i] != fp[i];
  res.add(verify::fact(tag + ": the losses differ from fp32's (the TF32 tensor cores ran)", differ > 0, "not bitwise",
                       std::to_string(differ) + " of " + std::to_string(n) + " steps differ"));
  return worst;
}

// One forward and backward of the fp32 model, its matmuls in TF32 or not: logits, gradients, mean loss.
struct Tf32Pass {
  std::vector<float> logits, grads;
  double loss = 0;
  std::string attn;
};
inline Tf32Pass tf32_pass(const gpt::Config& c, int B, Attn attn, bool tf32, const std::vector<float>& p,
                          const std::vector<int>& tok, const std::vector<int>& tgt) {
  Model<float> m(c, B, attn);
  m.set_tf32(tf32);
  to_device(m.params.as<float>(), p);
  m.sync_weights();
  to_device(m.tok.as<int>(), tok);
  to_device(m.tgt.as<int>(), tgt);
  m.forward();  // no dropout (the model's probability is 0)
  m.backward();
  CUDA_CHECK(cudaDeviceSynchronize());
  Tf32Pass r;
  r.logits = to_host(m.logits.as<float>(), size_t(m.N) * size_t(c.vocab));
  r.grads = to_host(m.grads.as<float>(), m.lay.total);
  const std::vector<float> l = to_host(m.loss.as<float>(), size_t(m.N));
  for (float x : l) r.loss += x;
  r.loss /= double(l.size());
  r.attn = attn_name(m.impl);
  return r;
}

// tf32 against fp32 on the same GPU, the same weights and batch: logits, loss and every gradient within
// tf32's tolerances (fp32's own error is far below them), and not bitwise equal. A larger model than
// the tiny one (N = 512 rows, K up to 512), so that cuBLAS takes its tensor-core kernels: at the tiny
// sizes it may pick others, where TF32 changes nothing.
inline void verify_tf32_vs_fp32(results::Results& res, uint64_t seed, Attn attn) {
  gpt::Config c;
  c.layers = 2, c.heads = 4, c.width = 128, c.context = 64;
  const int B = 8;
  verify::Rng rng(seed);
  const std::vector<float> p = gpt::init_params(c, rng);
  std::vector<int> tok(size_t(B) * c.context), tgt(size_t(B) * c.context);
  for (auto& t : tok) t = int(rng.next() % 256);
  for (auto& t : tgt) t = int(rng.next() % 256);
  const Tf32Pass f = tf32_pass(c, B, attn, false, p, tok, tgt), t = tf32_pass(c, B, attn, true, p, tok, tgt);
  double zmax = 0, gmax = 0;
  for (float z : f.logits) zmax = std::max(zmax, double(std::fabs(z)));
  for (float g : f.grads) gmax = std::max(gmax, double(std::fabs(g)));
  const std::string tag = "tf32 vs fp32, same GPU, weights and batch (" + f.attn + "-attn, width 128)";
  res.add(verify::compare(tag + ": logits", t.logits.data(), f.logits.data(), f.logits.size(),
                          tf32_tol(0.015 * zmax, 0.02)));
  res.add(verify::compare(tag + ": mean loss", &t.loss, &f.loss, 1, tf32_tol(0.01, 0.01)));
  res.add(verify::compare(tag + ": every gradient", t.grads.data(), f.grads.data(), f.grads.size(),
                          tf32_tol(0.01 * gmax, 0.05)));
  size_t differ = 0;
  for (size_t i = 0; i < f.grads.size(); ++i) differ += t.grads[i] != f.grads[i];
  res.add(verify::fact(tag + ": the gradients differ from fp32's (the TF32 tensor cores ran)", differ > 0,
                       "not bitwise", std::to_string(differ) + " of " + std::to_string(f.grads.size()) + " differ"));
}

// A short training run in tf32 against the same run in fp32 (same seed, batches and dropout masks).
inline void verify_tf32_training(results::Results& res, const train::Corpus& data, uint64_t seed, Attn attn,
                                 bool small) {
  gpt::Config c;
  c.layers = 2, c.heads = 4, c.width = 128, c.context = 64;
  TrainOptions o;
  o.batch = 16, o.steps = small ? 20 : 60, o.warmup = 10, o.lr = 3e-3, o.log_every = 10;
  std::vector<double> l32, p32, ltf, ptf;
  std::string a;
  train_for<float>(c, o, data, attn, seed, o.steps, l32, p32, a);
  o.tf32 = true;
  train_for<float>(c, o, data, attn, seed, o.steps, ltf, ptf, a);
  char dtag[32];
  std::snprintf(dtag, sizeof dtag, " dropout %.2g", o.dropout);
  tf32_curve_checks(res, "training tf32 " + a + "-attn" + dtag, ltf, l32);
  // The step replayed as a CUDA graph against eager steps, bit for bit (run/verify_step.cuh's check for
  // fp32 and bf16): the captured cuBLAS calls keep TF32 (the handle's math mode is read at capture).
  const int steps = 12;
  std::vector<double> l_graph, p_graph, l_eager, p_eager;
  o.log_every = 4;
  train_for<float>(c, o, data, attn, seed, steps, l_graph, p_graph, a);
  o.graph = false;
  train_for<float>(c, o, data, attn, seed, steps, l_eager, p_eager, a);
  const verify::Tol exact{0, 0, "bitwise"};
  const std::string tag = "training step tf32 " + a + "-attn";
  res.add(verify::compare(tag + ": CUDA graph replay's losses == eager steps' (" + std::to_string(steps) + " steps)",
                          l_graph.data(), l_eager.data(), l_eager.size(), exact));
  res.add(verify::compare(tag + ": CUDA graph replay's weights == eager steps'", p_graph.data(), p_eager.data(),
                          p_eager.size(), exact));
}

// Every tf32 check (--verify; --verify-only tf32 runs these alone). attn: fp32's (auto: matmul).
inline void verify_tf32(results::Results& res, const train::Corpus& data, uint64_t seed, Attn attn, bool small) {
  for (Attn a : attn == Attn::kAuto ? std::vector<Attn>{Attn::kMatmul, Attn::kNaive} : std::vector<Attn>{attn})
    verify_tiny<float>(res, seed, a, true, 0, nullptr, false, Backend::kCustom, true);
  verify_tiny<float>(res, seed, attn, false, 0, nullptr, false, Backend::kCustom, true);   // plain cuBLAS, no Lt
  verify_tiny<float>(res, seed, attn, true, 0.2, nullptr, false, Backend::kCustom, true);  // dropout
  verify_tf32_vs_fp32(res, seed + 21, attn);
  verify_tf32_training(res, data, seed + 2, attn, small);
}
