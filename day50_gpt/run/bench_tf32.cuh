// day50_gpt/run/bench_tf32.cuh: gpt --bench's part train-tf32 beyond its row's own timing
// (run/bench.cuh's bench_train): the tf32 step against the fp32 step, the same model, options and
// batches, timed in interleaved rounds; and the two trained side by side from the same seed, their
// loss curves compared (the accuracy tf32 gives up, in the units that matter: the loss).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "json.h"
#include "results.h"
#include "timing.cuh"
#include "trainer.cuh"
#include "verify_tf32.cuh"

// run/bench.cuh: the times of `reps` steps, events between them (how every step row is timed).
template <class T>
std::vector<double> step_times(Trainer<T>& tr, int reps);

// Steps both runs train for the accuracy comparison (from the same seed: the same initial weights,
// batches and dropout masks): past the warm-up, far enough for the paths to part.
constexpr int kTf32CurveSteps = 300;
// Validation batches each run is scored on at the end (the same ones for both).
constexpr int kTf32ValBatches = 8;

// Into the tf32 row b: its time against fp32's as a headline ratio (3 interleaved rounds, each
// timing 20 fp32 steps and then 20 tf32 steps with step_times: a drift in clocks touches both
// alike; the median round's ratio, min..max kept), then the accuracy: both trainers go on to
// kTf32CurveSteps steps (fewer if --steps is shorter), their per-step losses compared
// (run/verify_tf32.cuh), and the validation loss of each.
inline void tf32_against_fp32(results::Results& res, results::Bench& b, const gpt::Config& cfg, const TrainOptions& o,
                              const train::Corpus& data, Attn attn, uint64_t seed) {
  TrainOptions o32 = o;
  o32.tf32 = false;
  Trainer<float> ref(cfg, o32, data, attn, seed), ours(cfg, o, data, attn, seed);
  ours.m.set_tf32(true);
  for (int i = 0; i < 3; ++i) ref.step_once(), ours.step_once();  // warm-up: heuristics, the graphs' capture
  ref.settle_priority(), ours.settle_priority();  // and --chain-priority auto's timed steps (run/trainer.cuh)
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::pair<double, std::pair<double, double>>> rounds;  // 100 * fp32 / tf32, (tf32, fp32) median ms
  for (int r = 0; r < 3; ++r) {
    const timing::Stats sr = timing::summarize(step_times(ref, 20));
    const timing::Stats so = timing::summarize(step_times(ours, 20));
    rounds.push_back({100.0 * sr.median_ms / so.median_ms, {so.median_ms, sr.median_ms}});
  }
  std::sort(rounds.begin(), rounds.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  const auto& mid = rounds[rounds.size() / 2];
  b.ref = "train step fp32";
  b.ref_ms = mid.second.second;
  b.ref_repeats = int(rounds.size());
  b.pct_of_ref_median = mid.first, b.pct_of_ref_min = rounds.front().first, b.pct_of_ref_max = rounds.back().first;
  json::Value v = json::Value::object();
  v["fp32_ms"] = mid.second.second, v["tf32_ms"] = mid.second.first;
  v["speedup"] = mid.first / 100, v["speedup_min"] = rounds.front().first / 100;
  v["speedup_max"] = rounds.back().first / 100;
  v["how"] = "3 interleaved rounds of 20 fp32 steps then 20 tf32 steps (events between steps); the median round";
  res.add_goal(b.name + ": faster than the fp32 step (interleaved, median of 3 rounds)", mid.first / 100,
               mid.first > 100);
  // The accuracy: the same two runs, on to kTf32CurveSteps steps (within the schedule: --steps).
  const int64_t steps = std::max<int64_t>(ref.step, std::min<int64_t>(kTf32CurveSteps, o.steps));
  while (ref.step < steps) ref.step_once();
  while (ours.step < steps) ours.step_once();
  ref.read_back(), ours.read_back();
  const std::vector<double> l32(ref.losses.begin(), ref.losses.end()), ltf(ours.losses.begin(), ours.losses.end());
  const double worst = tf32_curve_checks(res, b.name, ltf, l32);
  const double val32 = ref.val_loss(kTf32ValBatches), valtf = ours.val_loss(kTf32ValBatches);
  res.add(verify::compare(b.name + ": validation loss after " + std::to_string(steps) + " steps == fp32's", &valtf,
                          &val32, 1, kTf32LossMeans));
  auto last10 = [](const std::vector<double>& l) {
    double s = 0;
    for (size_t i = l.size() - 10; i < l.size(); ++i) s += l[i];
    return s / 10;
  };
  json::Value acc = json::Value::object();
  acc["steps"] = (long long)steps, acc["val_batches"] = kTf32ValBatches;
  acc["fp32_loss_last10"] = last10(l32), acc["tf32_loss_last10"] = last10(ltf);
  acc["fp32_val_loss"] = val32, acc["tf32_val_loss"] = valtf, acc["val_loss_diff"] = valtf - val32;
  acc["max_abs_diff_means_of_10"] = worst;
  acc["first_step_loss_diff"] = ltf.front() - l32.front();
  v["accuracy"] = acc;
  b.extra["vs_fp32"] = v;
  std::printf("%s against fp32 (interleaved): %.2f ms vs %.2f ms = %.2fx (rounds %.2fx..%.2fx)\n", b.name.c_str(),
              mid.second.first, mid.second.second, mid.first / 100, rounds.front().first / 100,
              rounds.back().first / 100);
  std::printf(
      "  after %d steps from the same seed: loss (last 10 steps) tf32 %.4f, fp32 %.4f; validation tf32 %.4f, "
      "fp32 %.4f; means of 10 steps at most %.4f apart\n",
      int(steps), last10(ltf), last10(l32), valtf, val32, worst);
}
