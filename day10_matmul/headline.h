// day10_matmul/headline.h: the ratios the notes and the goals stand on, re-timed honestly. A single
// pass times every kernel once against cuBLAS timed once; the ratio drifts with the clock by a few
// percent, and at 8192 the bf16 kernels draw enough power for cuBLAS's own speed to move between
// passes. So at the headline sizes the candidates are re-timed as 3 interleaved rounds (cuBLAS, then
// the kernel, three times), each row keeps its single-pass time in extra.single_pass_ms, and the goals
// are judged on the interleaved medians.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "results.h"
#include "timing.cuh"

namespace headline {

// The kernel a row timed, as a launch (empty where the row names no kernel of this run).
using Launcher = std::function<std::function<void()>(const std::string& name)>;

// Re-times row b against ref_run in 3 interleaved rounds: the row then holds the median round's time and
// the median, lowest and highest ratio; its single-pass time moves to extra.single_pass_ms.
inline void interleave(results::Bench& b, const std::function<void()>& ours, const std::function<void()>& ref_run,
                       double flops, const timing::Options& topt) {
  const timing::Interleaved il = timing::interleaved(ours, ref_run, topt, 3);
  if (b.extra.kind() != json::Value::Object) b.extra = json::Value::object();
  b.extra["single_pass_ms"] = b.ms;
  b.ms = il.ours.median_ms, b.min_ms = il.ours.min_ms, b.max_ms = il.ours.max_ms, b.reps = il.ours.reps;
  b.tflops = flops / il.ours.median_ms / 1e9;
  b.ref_ms = il.ref.median_ms;
  b.ref_repeats = il.repeats;
  b.pct_of_ref_median = il.pct_median, b.pct_of_ref_min = il.pct_min, b.pct_of_ref_max = il.pct_max;
  std::printf("  interleaved %-44s %.1f%% of %s (median of %d rounds, %.1f..%.1f%%)\n", b.name.c_str(), il.pct_median,
              b.ref.c_str(), il.repeats, il.pct_min, il.pct_max);
}

// The headline of one dtype: the fastest single-pass rows of its `candidates` different steps (the
// step is the name's first two characters; a step's configurations compete in the single pass), each
// re-timed in interleaved rounds; the headline is the best interleaved median. Two candidates for bf16:
// at 8192 the single pass cannot rank steps 12 and 14 (one pass apart by less than cuBLAS's drift).
// Returns the headline row, or null.
inline results::Bench* pick(std::vector<results::Bench>& rows, const char* dtype, int candidates,
                            const Launcher& launch, const std::function<void()>& ref_run, double flops,
                            const timing::Options& topt) {
  std::vector<results::Bench*> mine;
  for (auto& b : rows)
    if (b.dtype == dtype && !b.ref.empty() && b.name.rfind("cublas", 0) != 0) mine.push_back(&b);
  std::sort(mine.begin(), mine.end(), [](const results::Bench* x, const results::Bench* y) { return x->ms < y->ms; });
  std::set<std::string> steps;
  results::Bench* best = nullptr;
  for (results::Bench* b : mine) {
    if (int(steps.size()) == candidates) break;
    if (!steps.insert(b->name.substr(0, 2)).second || b->ref_repeats > 0) continue;
    const std::function<void()> ours = launch(b->name);
    if (!ours) continue;
    interleave(*b, ours, ref_run, flops, topt);
    if (!best || b->pct_of_ref_median > best->pct_of_ref_median) best = b;
  }
  if (best)
    std::printf("  headline %s: %s at %.1f%% of %s (median of %d interleaved rounds, %.1f..%.1f%%)\n", dtype,
                best->name.c_str(), best->pct_of_ref_median, best->ref.c_str(), best->ref_repeats, best->pct_of_ref_min,
                best->pct_of_ref_max);
  return best;
}

}  // namespace headline
