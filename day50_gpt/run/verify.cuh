// day50_gpt/run/verify.cuh: gpt --verify: the GPU model against the CPU model (gpt_ref.h) on a tiny
// configuration, generation against the CPU's decoding, and training (the loss falls; a resumed run
// equals an uninterrupted one). The attention checks are run/verify_attention.cuh.
#pragma once
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "../checkpoint.h"
#include "../gpt_ref.h"
#include "generate.cuh"
#include "results.h"
#include "trainer.cuh"
#include "verify.h"
#include "verify_attention.cuh"
#include "verify_decode.cuh"
#include "verify_step.cuh"

// ---- Verification ----------------------------------------------------------------------------------
// tf32's tolerances, from bf16's (atol, rtol as verify_tiny sets them for bf16). TF32 keeps 10 of
// fp32's 23 mantissa bits: an input rounded to it errs by u = 2^-11 relative (round to nearest), 2^-10
// if the conversion truncates (the worse case, taken here). A K-long dot product of rounded inputs
// then errs by at most 2u * sum |a_k b_k|, and with random signs by about 2u * sqrt(K) * rms(a_k b_k):
// relative to the output's own size (itself ~ sqrt(K) * rms(a_k b_k)) about 2u, whatever K. bf16
// rounds the same matmul inputs to 8 significant bits (u = 2^-8, common/verify.h), and stores the
// activations between them in bf16 too; every error is linear in u, so tf32's are at most bf16's times
// 2^-10 / 2^-8 = 1/4. The tolerances are bf16's halved: that factor, with 2x of room. Everything else
// in tf32 (LayerNorm, softmax, the loss, the optimizer) is fp32.
inline verify::Tol tf32_tol(double bf16_atol, double bf16_rtol) {
  return verify::Tol{bf16_atol / 2, bf16_rtol / 2, "tf32"};
}
inline gpt::Config tiny_config() {
  gpt::Config c;
  c.vocab = 256, c.context = 13, c.layers = 2, c.heads = 4,
  c.width = 64;  // T = 13: not a multiple of any tile; head size 16
  return c;
}

// Whether the cudnn backend's layers ran as cuDNN graphs (run/verify_cudnn.cuh).
template <class T>
void cudnn_coverage(results::Results& res, const Model<T>& m, const std::string& tag);

// GPU vs CPU on a tiny configuration: logits, loss and every parameter's gradient; with dropout p > 0,
// both draw the same masks (nn/dropout.h) at a training step picked from the seed. fusion false: the
// unfused matmuls and the unfused LayerNorm. cfg: another configuration than tiny_config(). tf32 (fp32
// only): the matmuls on the TF32 tensor cores (--precision tf32), against the same CPU model. recompute:
// --recompute on (the GELU outputs recomputed in the backward; the default keeps them). gelu_deriv false:
// --gelu-deriv off (fc keeps its pre-activation, the backward computes gelu'; the default keeps gelu').
template <class T>
void verify_tiny(results::Results& res, uint64_t seed, Attn attn, bool fusion = true, double dropout_p = 0,
                 const gpt::Config* cfg = nullptr, bool force_ours = false, Backend be = Backend::kCustom,
                 bool tf32 = false, bool force_fused = false, bool recompute = false, bool gelu_deriv = true) {
  const gpt::Config c = cfg ? *cfg : tiny_config();
  const int B = 3, Tq = c.context;
  verify::Rng rng(seed);
  std::vector<float> p = gpt::init_params(c, rng);
  // Weights 5x GPT-2's initialization, so that every gradient is well above rounding, but the
  // LayerNorm gains left at 1: scaling them too makes the attention softmax saturate, and then
  // fp32-sized changes of the weights move some gradients by 1e-3 (measured with the CPU model).
  const gpt::Layout lay(c);
  std::vector<uint8_t> is_gain(lay.total, 0);
  for (const auto& L : lay.layer)
    for (int i = 0; i < c.width; ++i) is_gain[L.ln1_w + size_t(i)] = is_gain[L.ln2_w + size_t(i)] = 1;
  for (int i = 0; i < c.width; ++i) is_gain[lay.lnf_w + size_t(i)] = 1;
  for (size_t i = 0; i < p.size(); ++i)
    if (!is_gain[i]) p[i] = p[i] * 5.f + (p[i] == 0.f ? 0.02f * rng.uniform() : 0.f);  // biases non-zero too
  std::vector<int> tok(size_t(B) * Tq), tgt(size_t(B) * Tq);
  for (auto& t : tok) t = int(rng.next() % 256);
  for (auto& t : tgt) t = int(rng.next() % 256);
  const uint64_t key = rng.next();
  const int64_t step = int64_t(rng.next() % 100000);
  gpt::Activations a;
  const double loss_ref = gpt::forward(c, p, tok, tgt, B, Tq, a, dropout::make(dropout_p, key, step));
  const std::vector<double> g_ref = gpt::backward(c, p, tok, tgt, B, Tq, a);
  Model<T> m(c, B, attn, fusion, dropout_p, be, recompute);
  m.set_tf32(tf32);
  m.fused_ln = fusion;
  m.force_ours = force_ours;
  m.force_fused = force_fused;
  m.gelu_deriv = gelu_deriv;
  m.drop_key = key, m.drop_step = step;
  char dtag[32] = "";
  if (dropout_p > 0) std::snprintf(dtag, sizeof dtag, " dropout %.2g", dropout_p);
  const std::string tag =
      std::string("tiny GPT ") + (tf32 ? "tf32" : Types<T>::name()) + " " + attn_name(m.impl) + "-attn" +
      (m.ours_attn_bwd() ? " + our flash backward" : "") +
      (fusion ? "" : " unfused") + dtag + (cfg ? " width " + std::to_string(c.width) : "") +
      (force_ours ? " plain matmuls + our bias/GELU passes" : "") + (force_fused ? " our fused-epilogue GEMMs" : "") +
      (be == Backend::kCudnn ? " cudnn backend" : "") + (recompute ? " recompute" : "") +
      (m.gelu_deriv_applies() ? " GELU derivative kept" : !gelu_deriv ? " GELU input kept" : "");
  std::printf("%s: attention = %s\n", tag.c_str(), m.attn_note.c_str());
  to_device(m.params.template as<float>(), p);
  m.sync_weights();
  to_device(m.tok.template as<int>(), tok);
  to_device(m.tgt.template as<int>(), tgt);
  poison(m.logits.as(), m.logits.bytes());
  poison(m.loss.as(), m.loss.bytes());
  m.forward();
  poison(m.grads.as(), m.grads.bytes());  // backward must zero it itself
  m.backward();
  CUDA_CHECK(cudaDeviceSynchronize());
  const bool bf = std::is_same<T, bf16>::value;
  double zmax = 0, gmax = 0;
  for (double z : a.logits) zmax = std::max(zmax, std::fabs(z));
  for (double x : g_ref) gmax = std::max(gmax, std::fabs(x));
  // Tolerances by precision. fp32: rounding only. bf16: activations and matmul weights carry 8
  // significant bits (relative 2^-9 per rounding), through two blocks and the head.
  verify::Tol tl = bf ? verify::Tol{0.015 * zmax, 0.02, "bf16"} : verify::Tol{1e-5 * zmax, 1e-4, "fp32"};
  verify::Tol tloss = bf ? verify::Tol{0.01, 0.01, "bf16"} : verify::kFp32;
  verify::Tol tg = bf ? verify::Tol{0.01 * gmax, 0.05, "bf16"} : verify::Tol{1e-4 * gmax, 1e-3, "fp32"};
  if (tf32) tl = tf32_tol(0.015 * zmax, 0.02), tloss = tf32_tol(0.01, 0.01), tg = tf32_tol(0.01 * gmax, 0.05);
  const std::vector<float> logits = to_host(m.logits.template as<float>(), a.logits.size());
  res.add(verify::compare(tag + " logits vs CPU", logits.data(), a.logits.data(), logits.size(), tl));
  const std::vector<float> losses = to_host(m.loss.template as<float>(), size_t(B) * Tq);
  double loss = 0;
  for (float l : losses) loss += l;
  loss /= double(losses.size());
  res.add(verify::compare(tag + " mean loss vs CPU", &loss, &loss_ref, 1, tloss));
  const std::vector<float> g = to_host(m.grads.template as<float>(), g_ref.size());
  res.add(verify::compare(tag + " every gradient vs CPU", g.data(), g_ref.data(), g.size(), tg));
  if (be == Backend::kCudnn) cudnn_coverage(res, m, tag);  // run/verify_cudnn.cuh
  if (force_ours)
    res.add(verify::fact(tag + ": our passes ran in place of the epilogues", m.ours_launches > 0, "count",
                         std::to_string(m.ours_launches) + " launches"));
  if (force_fused)
    res.add(verify::fact(tag + ": our fused GEMMs ran in place of cuBLASLt's epilogues", m.fused_launches > 0,
                         "count", std::to_string(m.fused_launches) + " launches"));
}

// Generation on the GPU (KV cache, CUDA graphs, sampling kernel) against the CPU's decode_step and
// sample_top_k: the logits after each prompt byte, every sampled byte (same draws), and the logits
// after the last one.
inline void verify_generate(results::Results& res, uint64_t seed, gpt::Config c) {
  const std::string tag = "generation (head size " + std::to_string(c.width / c.heads) + ")";
  verify::Rng rng(seed);
  std::vector<float> p = gpt::init_params(c, rng);
  for (auto& w : p) w *= 3.f;  // spread the probabilities, so that sampling has real choices
  const std::vector<int> prompt = {int(rng.next() % 256), int(rng.next() % 256), int(rng.next() % 256)};
  const int n = c.context - int(prompt.size());
  const double temperature = 0.9;
  const int top_k = 5;
  std::vector<double> u(static_cast<size_t>(n));
  for (auto& x : u) x = double(rng.next() >> 11) / 9007199254740992.0;
  gpt::KVCache cache(c);
  Generator g(c, p, n, int(prompt.size()));
  std::vector<double> got, want;
  int pos = 0;
  std::vector<double> cpu;
  for (int t : prompt) {
    g.feed(t);
    const std::vector<float> l = g.logits_now();
    cpu = gpt::decode_step(c, p, cache, t, pos++);
    got.insert(got.end(), l.begin(), l.end()), want.insert(want.end(), cpu.begin(), cpu.end());
  }
  res.add(verify::compare(tag + ": logits after each prompt byte vs CPU", got.data(), want.data(), got.size(),
                          verify::Tol{1e-5, 1e-4, "fp32"}));
  g.prepare(u, temperature, top_k);
  const std::vector<int> toks = g.generate();
  int same = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<float> lf(cpu.begin(), cpu.end());
    same += gpt::sample_top_k(lf, temperature, top_k, u[size_t(i)]) == toks[size_t(i)];
    cpu = gpt::decode_step(c, p, cache, toks[size_t(i)], pos++);  // follow the GPU's bytes
  }
  res.add(verify::fact(tag + ": GPU-sampled bytes == CPU sampling (same draws, top-k 5)", same == n, "exact", "",
                       size_t(n), size_t(n - same)));
  const std::vector<float> last = g.logits_now();
  res.add(verify::compare(tag + ": logits after the last sampled byte vs CPU", last.data(), cpu.data(), last.size(),
                          verify::Tol{1e-5, 1e-4, "fp32"}));
  verify_decode(res, seed, c);  // the faster generators against this one (run/verify_decode.cuh)
}

// Training: the loss falls, and a run interrupted at the half and resumed from its checkpoint repeats
// the uninterrupted run's losses (bitwise on the deterministic fp32 path; to rounding where cuDNN's
// attention backward accumulates with atomics). Dropout is on at its default: its masks depend on the
// checkpoint's rng_state and step only, so the resumed run draws the same ones.
template <class T>
void verify_training(results::Results& res, const train::Corpus& data, uint64_t seed, Attn attn, bool small) {
  gpt::Config c;
  c.layers = 2, c.heads = 4, c.width = 128, c.context = 64;
  TrainOptions o;
  o.batch = 16, o.steps = small ? 20 : 200, o.warmup = 10, o.lr = 3e-3, o.log_every = 10;
  std::vector<float> full;
  std::string tag;
  bool deterministic = false;
  {
    Trainer<T> a(c, o, data, attn, seed);
    char dtag[32] = "";
    if (o.dropout > 0) std::snprintf(dtag, sizeof dtag, " dropout %.2g", o.dropout);
    tag = std::string("training ") + Types<T>::name() + " " + attn_name(a.m.impl) + "-attn" + dtag;
    deterministic = a.m.impl != Attn::kCudnn;
    while (a.step < o.steps) a.step_once();
    a.read_back();
    full = a.losses;
  }
  const size_t n = full.size(), k = n / 10;
  double tail = 0;
  for (size_t i = n - k; i < n; ++i) tail += full[i];
  tail /= double(k);
  // ln(256) = 5.55 at the start; a model that only learned the byte frequencies sits near 3.4 on
  // this text. Below 65% of the start (3.6) in 200 steps, it has begun to use the context.
  verify::Check fell =
      verify::fact(tag + ": loss falls (last-10% mean < 65% of the first, " + std::to_string(o.steps) + " steps)",
                   std::isfinite(tail) && tail < 0.65 * full[0], Types<T>::name(),
                   "first " + std::to_string(full[0]) + ", last-10% mean " + std::to_string(tail));
  fell.max_abs_err = full[0] - tail;
  fell.tol.rtol = 0.65;
  if (!small) res.add(fell);  // --small (for compute-sanitizer) runs too few steps to judge
  // Interrupted at the half, resumed from the checkpoint file: one file a process (the pid), since the sanitizers'
  // runs and a plain --verify may run at once on one machine (scripts/rerun_day50.sh checks, one GPU).
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("gpt_verify_" + std::to_string(getpid()) + "_" + std::to_string(seed) + ".ckpt")).string();
  std::vector<float> resumed;
  {
    Trainer<T> b(c, o, data, attn, seed);
    while (b.step < o.steps / 2) b.step_once();
    ckpt::save(path, b.checkpoint());
    resumed = b.losses;  // the first half: also a second uninterrupted run (determinism)
  }
  {
    Trainer<T> r(c, o, data, attn, seed + 99);  // other init: everything must come from the file
    r.restore(ckpt::load(path, &c));
    while (r.step < o.steps) r.step_once();
    r.read_back();
    resumed.insert(resumed.end(), r.losses.begin(), r.losses.end());
  }
  std::remove(path.c_str());
  const verify::Tol exact{0, 0, "bitwise"}, close{0, 1e-3, "bf16 atomics"};
  std::vector<double> a(full.begin(), full.end()), b(resumed.begin(), resumed.end());
  res.add(verify::compare(tag + ": resumed run's losses == uninterrupted run's", b.data(), a.data(),
                          std::min(a.size(), b.size()), deterministic ? exact : close));
  verify_step_paths<T>(res, data, seed, attn);  // run/verify_step.cuh: graph vs eager, fused vs unfused LayerNorm
  // bf16's timed choices may keep every cuBLASLt epilogue; here our bias / GELU passes after the plain
  // matmuls (nn/linear.cuh) replace each one they can, against the CPU (non-zero biases).
  if (std::is_same<T, bf16>::value) verify_tiny<T>(res, seed + 13, attn, true, 0.2, nullptr, true);
  if (std::is_same<T, float>::value) {
    // The fused LayerNorm where a row is not a whole number of warps' chunks: width 136 = 34 chunks of 4
    // (lanes 0-1 take two, the others one), against the CPU, with and without the fusions.
    gpt::Config w = tiny_config();
    w.width = 136;
    verify_tiny<T>(res, seed + 11, attn, true, 0.2, &w);
    verify_tiny<T>(res, seed + 11, attn, false, 0.2, &w);
  }
}
