// day50_gpt/run/bench.cuh: gpt --bench on one GPU, in parts (--bench-part): the training step's time
// and where it goes (fp32 and bf16, each without and with the matmul epilogues), the quality runs
// (run/quality.cuh: the default run on the plays, then on a 1.1 MB cut of them), generation from the
// trained weights, and generation alone on fresh weights. The attentions alone are dev/attention.cu's.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_step.cuh"
#include "generate.cuh"
#include "json.h"
#include "quality.cuh"
#include "results.h"
#include "timing.cuh"
#include "trainer.cuh"

// The training step's speed-ups, switched on one after another: none (" unfused"), the matmul epilogues,
// the fused LayerNorm, the CUDA graph, and in bf16 the cuBLASLt algorithm search (the default step, whose
// name has no suffix). fp32 has no search (nn/lt_tuned.cuh): its last variant is its default step.
inline std::vector<TrainOptions> step_variants(const TrainOptions& base, bool bf) {
  std::vector<TrainOptions> v(bf ? 5 : 4, base);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i].fusion = i >= 1, v[i].fused_ln = i >= 2, v[i].graph = i >= 3;
    v[i].lt_search = !bf || i >= 4;
  }
  return v;
}
inline bool default_step(const TrainOptions& o) { return o.fusion && o.fused_ln && o.graph && o.lt_search; }
inline std::string variant_name(const TrainOptions& o) {
  if (!o.fusion) return " unfused";
  std::string s;
  if (!o.fused_ln) s += ", no fused LN";
  if (!o.graph) s += ", no graph";
  if (!o.lt_search) s += ", no Lt search";
  return s.empty() ? s : " " + s.substr(2);
}

// The times of `reps` training steps, from events on the compute stream between them. With
// data parallelism every step ends with the all-reduce, so rank 0's step is every GPU's step.
template <class T>
std::vector<double> step_times(Trainer<T>& tr, int reps) {
  std::vector<cudaEvent_t> ev(size_t(reps) + 1);
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  CUDA_CHECK(cudaEventRecord(ev[0], tr.stream));
  for (int i = 0; i < reps; ++i) {
    tr.step_once();
    CUDA_CHECK(cudaEventRecord(ev[size_t(i) + 1], tr.stream));
  }
  CUDA_CHECK(cudaEventSynchronize(ev[size_t(reps)]));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, ev[size_t(i)], ev[size_t(i) + 1]));
    ms.push_back(t);
  }
  for (auto& e : ev) CUDA_CHECK(cudaEventDestroy(e));
  return ms;
}

// The timed steps are checked, not only timed: every loss finite, and their first two losses (the
// graph's where the variant has one) equal to an eager re-run of the same two steps from a checkpoint
// taken before them. The first loss is a forward only, from the same weights and batch: the same
// launches, so it must match to the last bits (a tight tolerance, for a library that might pick another kernel inside a
// capture); the second follows a backward and an AdamW step, where cuDNN's backward adds with atomics: to rounding.
// Leaves the trainer eager at a step it has already run: call after the timing.
template <class T>
void check_timed_steps(results::Results& res, Trainer<T>& tr, const ckpt::Checkpoint& before, size_t first,
                       const std::string& name) {
  tr.read_back();
  const std::vector<float> timed(tr.losses.begin() + std::ptrdiff_t(first), tr.losses.end());
  size_t bad = 0;
  for (float l : timed) bad += !std::isfinite(l);
  res.add(verify::fact(name + ": the timed steps' losses are finite", bad == 0 && !timed.empty(), Types<T>::name(), "",
                       timed.size(), bad));
  const size_t n = std::min<size_t>(2, timed.size());
  tr.restore(before);
  tr.o.graph = false;
  for (size_t i = 0; i < n; ++i) tr.step_once();
  tr.read_back();
  const std::vector<double> again(tr.losses.end() - std::ptrdiff_t(n), tr.losses.end()),
      got(timed.begin(), timed.begin() + std::ptrdiff_t(n));
  res.add(verify::compare(name + ": the first timed step's loss == an eager re-run's (forward only: same weights)",
                          got.data(), again.data(), std::min<size_t>(1, n), verify::Tol{1e-5, 1e-5, "same launches"}));
  if (n > 1)
    res.add(verify::compare(name + ": the second timed step's loss == an eager re-run's (after a backward and AdamW)",
                            got.data() + 1, again.data() + 1, 1, verify::Tol{2e-3, 2e-3, "rounding (atomics)"}));
}

template <class T>
void bench_train(results::Results& res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
                 Attn attn, uint64_t seed) {
  const size_t base = used_bytes();
  Trainer<T> tr(cfg, o, data, attn, seed);
  const std::string name = std::string("train step ") + Types<T>::name() + variant_name(o);
  std::printf("\n%s: attention = %s\n", name.c_str(), tr.m.attn_note.c_str());
  for (int i = 0; i < 3; ++i) tr.step_once();  // warm-up (cuBLAS heuristics, first launches, the graph's capture)
  CUDA_CHECK(cudaDeviceSynchronize());
  const size_t peak = used_bytes() - base;
  // Where the time goes: one step with events between phases.
  Phases ph;
  tr.m.ph = &ph;
  ph.start(tr.stream);
  tr.step_once();  // eager (a step split into phases is never replayed as a graph)
  const std::vector<double> phase_ms = ph.finish();
  tr.m.ph = nullptr;
  // Step time: events around each step (the training data differs every step: nothing is cached).
  const int reps = 20;
  const ckpt::Checkpoint before = tr.checkpoint();  // for check_timed_steps
  const size_t first_timed = tr.losses.size();
  const std::vector<double> ms = step_times(tr, reps);
  check_timed_steps(res, tr, before, first_timed, name);
  results::Bench b;
  b.name = name;
  b.dtype = Types<T>::name();
  b.shape = {cfg.layers, cfg.heads, cfg.width, cfg.context, o.batch};
  const timing::Stats s = timing::summarize(ms);
  b.ms = s.median_ms, b.min_ms = s.min_ms, b.max_ms = s.max_ms, b.reps = s.reps;
  b.tokens_per_s = double(o.batch) * cfg.context / (b.ms * 1e-3);
  const bool bf = std::is_same<T, bf16>::value;
  const double flops = model_flops_per_step(cfg, o.batch), tflops = flops / (b.ms * 1e9),
               peak_tf = bf ? kPeakBf16Tflops : kPeakFp32Tflops;
  json::Value ex = json::Value::object();
  ex["attention"] = tr.m.attn_note;
  ex["fusion"] = o.fusion;
  ex["fused_ln"] = o.fused_ln;
  ex["graph"] = o.graph;
  ex["lt_search"] = o.lt_search;
  ex["model_flops_per_step"] = flops;
  ex["model_tflops"] = tflops;
  ex["mfu_pct"] = 100 * tflops / peak_tf;
  ex["mfu_peak_tflops"] = peak_tf;
  ex["mfu_formula"] =
      "tokens * (6 * (12 L C^2 + C V) + 12 L T C) / step time / dense peak (H100/H200 SXM data sheet: "
      "989.4 TFLOP/s bf16, 66.9 fp32)";
  ex["peak_gpu_mib"] = double(peak) / (1 << 20);
  json::Value pj = json::Value::object();
  double total = 0;
  for (int p = 0; p < kPhases; ++p) pj[kPhaseName[p]] = phase_ms[size_t(p)], total += phase_ms[size_t(p)];
  ex["phase_ms"] = pj;
  ex["phase_total_ms"] = total;
  // The default step's LayerNorm alone (last: it leaves the trainer's buffers as garbage).
  if (default_step(o)) ex["layernorm_alone"] = bench_layernorm(res, tr, name);
  b.extra = ex;
  res.add(b);
  std::printf("%s: median %.2f ms/step (min %.2f, max %.2f) = %.0f tokens/s; GPU memory %.0f MiB\n", name.c_str(), b.ms,
              b.min_ms, b.max_ms, b.tokens_per_s, double(peak) / (1 << 20));
  std::printf("  model FLOPs %.3g per step: %.0f TFLOP/s = MFU %.1f%% of %.0f TFLOP/s\n", flops, tflops,
              100 * tflops / peak_tf, peak_tf);
  std::printf("  where one step's time goes (events between phases, one eager step; %.2f ms in all):\n", total);
  for (int p = 0; p < kPhases; ++p)
    std::printf("    %-18s %8.3f ms  %5.1f%%\n", kPhaseName[p], phase_ms[size_t(p)],
                100.0 * phase_ms[size_t(p)] / total);
  if (default_step(o) && bf)
    res.add_goal(name + ": MFU >= 35% (model FLOPs / dense bf16 peak)", 100 * tflops / peak_tf,
                 tflops >= 0.35 * peak_tf);
}

// Generation from `params`: timed with CUDA graphs and without (kernels launched one by one, the host
// waiting per token); both must write the same bytes.
inline void bench_generation(results::Results& res, const gpt::Config& cfg, const std::vector<float>& params,
                             uint64_t seed, const std::string& title) {
  const Sampled s = generate(cfg, params, "The GPU ", 200, 0.8, 40, seed);
  std::printf("\n%s:\n%s\n(%d tokens in %.3f s: %.0f tokens/s)\n", title.c_str(), s.text.c_str(), s.made, s.seconds,
              s.made / s.seconds);
  res.config["sample"] = s.text;
  const Sampled plain = generate(cfg, params, "The GPU ", 200, 0.8, 40, seed, false);
  res.add(verify::fact("generation with and without CUDA graphs writes the same bytes", plain.text == s.text));
  for (const Sampled* r : {&plain, &s}) {
    results::Bench g;
    g.name = r == &s ? "generate, batch 1, KV cache" : "generate, batch 1, KV cache, no CUDA graph";
    g.dtype = "fp32";
    g.shape = {cfg.layers, cfg.heads, cfg.width, cfg.context, 1};
    g.ms = 1e3 * r->seconds / r->made;
    g.min_ms = g.max_ms = g.ms, g.reps = r->made;
    g.tokens_per_s = r->made / r->seconds;
    res.add(g);
  }
  std::printf("generation without CUDA graphs: %.0f tokens/s\n", plain.made / plain.seconds);
}

// --bench on one GPU: the parts --bench-part names, in this order.
inline void run_bench(results::Results& res, const gpt::Options& op, const train::Corpus& data) {
  const gpt::Config& cfg = op.cfg;
  const uint64_t seed = uint64_t(op.st.seed);
  res.config["layers"] = cfg.layers, res.config["heads"] = cfg.heads, res.config["width"] = cfg.width,
  res.config["context"] = cfg.context;
  res.config["batch"] = op.train.batch;
  // Each precision with the step's speed-ups switched on one after another (step_variants): each one's
  // gain, measured in one run.
  for (const TrainOptions& of : step_variants(op.train, false)) {
    if (op.bench_part("train-fp32"))
      bench_train<float>(res, cfg, of, data, op.attn == Attn::kCudnn ? Attn::kAuto : op.attn, seed);
  }
  for (const TrainOptions& of : step_variants(op.train, true))
    if (op.bench_part("train-bf16")) bench_train<bf16>(res, cfg, of, data, op.attn, seed);
  // What the step chose by timing at start-up (nn/linear.cuh): each matmul epilogue or the plain matmul
  // and a pass of ours, with the times that decided it.
  json::Value chosen = json::Value::object();
  {
    std::lock_guard<std::mutex> lock(lt::chosen_mutex());
    for (const auto& kv : lt::choice_notes()) chosen[kv.first] = kv.second;
  }
  res.config["timed_choices"] = chosen;
  if (op.bench_part("quality")) {
    const Quality q = quality_run<bf16>(res, cfg, op.train, data, op.files.data_name, op.attn, seed, op.bench_steps);
    res.top.push_back({"quality", q.summary});  // (the curve as before, for the notes' plot)
    res.config["loss_curve"] = *q.summary.find("loss_curve");
    res.config["val_loss_after_steps"] = q.val_final, res.config["quality_steps"] = op.bench_steps;
    res.add_goal("quality: final validation loss <= 1.30 on the plays", q.val_final, q.val_final <= 1.30);
    res.add_goal("quality: final validation loss <= lowest + 0.05 (no overfitting at the end)", q.val_final - q.val_min,
                 q.val_final <= q.val_min + 0.05);
    bench_generation(res, cfg, q.params, seed, "sample after " + std::to_string(op.bench_steps) + " steps");
    results::Bench g;  // the quality sample's bytes past the context: one re-prefill each
    g.name = "generate past the context, batch 1, sliding window (re-prefill per byte)";
    g.dtype = "fp32", g.shape = {cfg.layers, cfg.heads, cfg.width, cfg.context, 1};
    g.ms = 1e3 * q.sample.seconds_sliding / std::max(1, q.sample.slid);
    g.min_ms = g.max_ms = g.ms, g.reps = q.sample.slid;
    g.tokens_per_s = 1e3 / g.ms;
    res.add(g);
  }
  if (op.bench_part("quality-cut")) {
    // nanoGPT's character-level Shakespeare is 1,115,394 bytes; its 6L/384/6H model with dropout 0.2
    // reaches 1.47 there in 5,000 iterations. The same cut of this text, with the cut's own dropout and
    // schedule (options.h: a quarter of the data overfits sooner).
    const train::Corpus cut = quality_cut(op.data_path, op.data_limit, cfg.context);
    TrainOptions oc = op.train;
    oc.dropout = op.cut_dropout;
    const Quality q = quality_run<bf16>(res, cfg, oc, cut, op.files.data_name + " (first 1,115,394 bytes)", op.attn,
                                        seed, op.cut_steps);
    res.top.push_back({"quality_cut", q.summary});
    res.add_goal("quality_cut: final validation loss <= 1.50 on the first 1,115,394 bytes", q.val_final,
                 q.val_final <= 1.50);
    res.add_goal("quality_cut: final validation loss <= lowest + 0.05 (no overfitting at the end)",
                 q.val_final - q.val_min, q.val_final <= q.val_min + 0.05);
  }
  if (op.bench_part("generate")) {
    // Fresh weights (the seed's initialization): generation's speed does not depend on what was learned.
    verify::Rng rng(seed);
    bench_generation(res, cfg, gpt::init_params(cfg, rng), seed, "generation from freshly initialised weights");
  }
}
