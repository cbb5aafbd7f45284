// day50_gpt/run/verify_cudnn.cuh: gpt --verify's checks of `--backend cudnn` (nn/backend_cudnn.cuh):
// the tiny GPT against the CPU (verify_tiny, with and without dropout), the same batch's losses, logits
// and gradients against the custom backend on a larger configuration, and a short training run's loss
// curve against the custom backend's. Every check's name contains "cudnn backend".
#pragma once
#include <string>
#include <vector>

#include "results.h"
#include "verify.cuh"
#include "verify_step.cuh"

// Whether the layers ran as cuDNN graphs: at least one plan built and ran (a fact: otherwise the
// comparisons above it only compared the custom path with itself), and the layers that took the
// custom path because cuDNN refused every graph offered for them (a goal: a limit of this cuDNN, not
// a bug; a refused first form with a second form built is not counted).
template <class T>
void cudnn_coverage(results::Results& res, const Model<T>& m, const std::string& tag) {
  const int built = m.graphs ? m.graphs->built() : 0, total = m.graphs ? int(m.graphs->entries().size()) : 0;
  // Built is not enough: a plan can be built and then skipped (a layer whose other graph was refused).
  res.add(verify::fact(tag + ": the layers ran as cuDNN graphs (at least one plan built)", built > 0 && m.dnn_runs > 0,
                       "count",
                       std::to_string(built) + " of " + std::to_string(total) + " graphs built, " +
                           std::to_string(m.dnn_runs) + " executions"));
  res.add_goal(tag + ": every layer cuDNN can express ran as a cuDNN graph (layers on the custom path)",
               double(m.fell_back.size()), m.fell_back.empty());
  for (const std::string& l : m.fell_back) std::printf("%s: on the custom path: %s\n", tag.c_str(), l.c_str());
  std::printf("%s: %d of %d cuDNN graphs built; hand-written kernels launched (%d):", tag.c_str(), built, total,
              int(m.hand_written.size()));
  for (const std::string& k : m.hand_written) std::printf(" %s", k.c_str());
  std::printf("\n");
  if (m.graphs) m.graphs->print();
}

// One forward and backward of the same weights and batch through each backend.
struct BackendRun {
  std::vector<float> logits, losses, grads;
};
inline BackendRun run_backend(const gpt::Config& c, int B, const std::vector<float>& p, const std::vector<int>& tok,
                              const std::vector<int>& tgt, Backend be) {
  Model<bf16> m(c, B, Attn::kAuto, true, 0, be);
  to_device(m.params.template as<float>(), p);
  m.sync_weights();
  to_device(m.tok.template as<int>(), tok);
  to_device(m.tgt.template as<int>(), tgt);
  m.forward();
  poison(m.grads.as(), m.grads.bytes());  // backward must zero it itself
  m.backward();
  CUDA_CHECK(cudaDeviceSynchronize());
  BackendRun r;
  r.logits = to_host(m.logits.template as<float>(), size_t(m.N) * c.vocab);
  r.losses = to_host(m.loss.template as<float>(), size_t(m.N));
  r.grads = to_host(m.grads.template as<float>(), m.lay.total);
  return r;
}

// cudnn against custom on the training checks' configuration (C = 128, T = 64): both are bf16, each
// within bf16 rounding of the CPU, so they may differ by twice verify_tiny's tolerances.
inline void verify_cudnn_vs_custom(results::Results& res, uint64_t seed) {
  gpt::Config c;
  c.layers = 2, c.heads = 4, c.width = 128, c.context = 64;
  const int B = 4;
  verify::Rng rng(seed);
  const std::vector<float> p = gpt::init_params(c, rng);
  std::vector<int> tok(size_t(B) * c.context), tgt(tok.size());
  for (auto& t : tok) t = int(rng.next() % 256);
  for (auto& t : tgt) t = int(rng.next() % 256);
  const BackendRun a = run_backend(c, B, p, tok, tgt, Backend::kCustom),
                   d = run_backend(c, B, p, tok, tgt, Backend::kCudnn);
  double zmax = 0, gmax = 0, la = 0, ld = 0;
  for (float z : a.logits) zmax = std::max(zmax, double(std::fabs(z)));
  for (float g : a.grads) gmax = std::max(gmax, double(std::fabs(g)));
  for (size_t i = 0; i < a.losses.size(); ++i) la += a.losses[i], ld += d.losses[i];
  la /= double(a.losses.size()), ld /= double(a.losses.size());
  const std::string tag = "cudnn backend vs custom (bf16, C 128, T 64, batch 4)";
  res.add(verify::compare(tag + ": logits", d.logits.data(), a.logits.data(), a.logits.size(),
                          verify::Tol{0.03 * zmax, 0.04, "2x bf16"}));
  res.add(verify::compare(tag + ": mean loss", &ld, &la, 1, verify::Tol{0.02, 0.02, "2x bf16"}));
  res.add(verify::compare(tag + ": every gradient", d.grads.data(), a.grads.data(), a.grads.size(),
                          verify::Tol{0.02 * gmax, 0.1, "2x bf16"}));
}

// The cudnn backend's checks, called by --verify's bf16 part.
inline void verify_cudnn_backend(results::Results& res, const train::Corpus& data, uint64_t seed, bool small) {
  verify_tiny<bf16>(res, seed, Attn::kAuto, true, 0, nullptr, false, Backend::kCudnn);
  verify_tiny<bf16>(res, seed, Attn::kAuto, true, 0.2, nullptr, false, Backend::kCudnn);  // dropout: our mask kernel, cuDNN's graphs
  // --recompute on: the GELU recomputed by cuDNN's pointwise graph (dnn_gelu) before fc2's weight gradient
  verify_tiny<bf16>(res, seed, Attn::kAuto, true, 0.2, nullptr, false, Backend::kCudnn, false, false, true);
  verify_cudnn_vs_custom(res, seed + 1);
  if (small) return;
  // A short training run (the step captured as a CUDA graph, dropout at its default) through each backend.
  gpt::Config c;
  c.layers = 2, c.heads = 4, c.width = 128, c.context = 64;
  TrainOptions o;
  o.batch = 16, o.steps = 200, o.warmup = 10, o.lr = 3e-3, o.log_every = 4;
  const int steps = 12;
  std::vector<double> l_custom, p_custom, l_dnn, p_dnn;
  std::string a;
  train_for<bf16>(c, o, data, Attn::kAuto, seed, steps, l_custom, p_custom, a);
  o.backend = Backend::kCudnn;
  train_for<bf16>(c, o, data, Attn::kAuto, seed, steps, l_dnn, p_dnn, a);
  res.add(verify::compare(
      "training bf16 cudnn backend: losses == custom backend's, to rounding (" + std::to_string(steps) + " steps)",
      l_dnn.data(), l_custom.data(), l_custom.size(), verify::Tol{0.02, 0.02, "bf16"}));
}
