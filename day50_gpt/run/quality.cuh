// day50_gpt/run/quality.cuh: gpt --bench's quality runs: the default training run (bf16) with its
// validation loss every --val-every steps (lowest and final), its loss curve, and a sample of the
// trained model that runs 1,000 bytes past the context length through the sliding window.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "generate.cuh"
#include "json.h"
#include "results.h"
#include "trainer.cuh"

// nanoGPT's shakespeare_char corpus is this many bytes: the size of quality_cut's text.
constexpr size_t kCutBytes = 1115394;

// The first kCutBytes of the text (fewer where --data-limit or the file is smaller), split as usual.
inline train::Corpus quality_cut(const std::string& path, long long limit, int context) {
  std::string text = train::read_file(path);
  size_t keep = kCutBytes;
  if (limit > 0) keep = std::min(keep, size_t(limit));
  if (text.size() > keep) text.resize(keep);
  return train::split_bytes(text, context);
}

struct Quality {
  json::Value summary = json::Value::object();  // what the results file records
  double val_min = NAN, val_final = NAN;
  std::vector<float> params;  // the trained weights
  Sampled sample;
};

template <class T>
json::Value loss_curve(const Trainer<T>& tr, const json::Value& vs, const json::Value& vl, double secs) {
  json::Value st = json::Value::array(), tl = json::Value::array(), curve = json::Value::object();
  for (size_t i = 0; i < tr.losses.size(); ++i) st.push((long long)i + 1), tl.push(double(tr.losses[i]));
  curve["precision"] = Types<T>::name();
  curve["step"] = st, curve["train_loss"] = tl, curve["val_step"] = vs, curve["val_loss"] = vl;
  curve["seconds"] = secs;
  return curve;
}

// Trains `steps` steps on `data` (named `name` in the results), then samples T + 1000 bytes from the
// trained model, continuing the validation text's first 32 bytes.
template <class T>
Quality quality_run(results::Results& res, const gpt::Config& cfg, TrainOptions o, const train::Corpus& data,
                    const std::string& name, Attn attn, uint64_t seed, int steps) {
  std::printf("\nquality run on %s: %s, %d steps, dropout %.2g, %zu training bytes, %zu validation bytes\n",
              name.c_str(), Types<T>::name(), steps, o.dropout, data.train.size(), data.val.size());
  o.steps = steps, o.log_every = 10;
  Trainer<T> tr(cfg, o, data, attn, seed);
  json::Value vs = json::Value::array(), vl = json::Value::array();
  Quality q;
  int64_t min_step = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (tr.step < o.steps) {
    tr.step_once();
    if (tr.step % o.val_every == 0 || tr.step == o.steps) {
      const double v = tr.val_loss(o.val_batches);
      vs.push((long long)tr.step), vl.push(v);
      q.val_final = v;
      if (!(v >= q.val_min)) q.val_min = v, min_step = tr.step;
      std::printf("  step %5lld  train %.4f  val %.4f\n", (long long)tr.step,
                  tr.losses.empty() ? NAN : double(tr.losses.back()), v);
      std::fflush(stdout);
    }
  }
  tr.read_back();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  %.1f s; validation loss final %.4f, lowest %.4f (step %lld)\n", secs, q.val_final, q.val_min,
              (long long)min_step);
  verify::Check ch = verify::fact("quality run on " + name + " (" + Types<T>::name() +
                                      "): validation loss finite and below the initial ln(256) = 5.545",
                                  std::isfinite(q.val_final) && q.val_final < std::log(256.0), Types<T>::name());
  ch.max_abs_err = q.val_final;
  res.add(ch);
  q.params = tr.checkpoint().params;
  const size_t plen = std::min<size_t>({32, data.val.size(), size_t(cfg.context - 1)});
  const std::string prompt(data.val.begin(), data.val.begin() + std::ptrdiff_t(plen));
  q.sample = generate(cfg, q.params, prompt, cfg.context + 1000, 0.8, 40, seed);
  std::printf("\nsample (%d bytes, %d past the context through the sliding window, %.3f ms each):\n%s\n", q.sample.made,
              q.sample.slid, 1e3 * q.sample.seconds_sliding / std::max(1, q.sample.slid), q.sample.text.c_str());
  json::Value& s = q.summary;
  s["data"] = name, s["train_bytes"] = (long long)data.train.size(), s["val_bytes"] = (long long)data.val.size();
  s["steps"] = steps, s["seconds"] = secs, s["precision"] = Types<T>::name(), s["dropout"] = o.dropout;
  s["lr"] = o.lr, s["batch"] = o.batch, s["residual"] = o.residual_bf16 ? "bf16" : "fp32";
  s["val_loss_min"] = q.val_min, s["val_loss_min_step"] = (long long)min_step, s["val_loss_final"] = q.val_final;
  s["sample_prompt"] = prompt, s["sample"] = q.sample.text, s["sample_bytes_past_context"] = q.sample.slid;
  s["loss_curve"] = loss_curve(tr, vs, vl, secs);
  return q;
}
