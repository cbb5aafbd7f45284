// day40_graph_fusion/fusion_ctx.cuh: what the three parts of fusion.cu share: the run's context
// (handles, plan cache, ceilings), building a graph with its engines recorded, tolerances, and
// the results rows (a plain timed row, or a headline ratio measured as interleaved repeats).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "check.cuh"
#include "cudnn_conv.cuh"
#include "cudnn_graph.h"
#include "host_tensor.cuh"
#include "results.h"
#include "timing.cuh"
#include "verify.h"

// Interleaved repeats of every headline ratio: a goal counts as met only if the slowest of them meets it.
constexpr int kRatioRepeats = 3;

struct Ctx {
  cudnnHandle_t dnn = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  results::Results* res = nullptr;
  verify::Rng* rng = nullptr;
  bool timed = false, explore = false;
  int sms = 0;
  timing::Options topt;
  double copy_peak = NAN, fp32_peak = NAN;
  std::map<std::string, double> tensor_peak;  // "fp16", "bf16", "tf32": cuBLAS GEMM, TFLOP/s
  cg::PlanCache plans;
  dnn::Workspace ws;
  int plan_requests = 0;
  std::string first_key;  // the first graph requested (for the cache demonstration)
  json::Value patterns = json::Value::array(), engines = json::Value::object();
  struct Line {
    std::string pattern, dtype, shape;
    double fused_ms, unfused_ms, pct_median, pct_min, pct_max, build_ms;
    long long engine;
    bool rtc, tensor_core;
  };
  std::vector<Line> table;
};

static const char* dt_name(cudnnDataType_t t) { return dnn::dtype_name(t); }

// The tolerance of an output stored in `dt` whose values are of size `mag`; `tf32` when the
// engine may round fp32 inputs to TF32.
static verify::Tol tol_for(cudnnDataType_t dt, double mag, bool tf32 = false) {
  const verify::Tol t = dt == CUDNN_DATA_HALF       ? verify::kFp16
                        : dt == CUDNN_DATA_BFLOAT16 ? verify::kBf16
                        : tf32                      ? verify::kTf32
                                                    : verify::kFp32;
  return t.scaled(mag);
}

// Fresh uniform values, rounded to the storage type.
static std::vector<float> random_vec(Ctx& cx, size_t n, cudnnDataType_t dt, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  verify::fill_uniform(v, *cx.rng, lo, hi);
  ht::round_to(v, dt);
  return v;
}

static void add_check(Ctx& cx, const verify::Check& c) {
  cx.res->add_quiet(c);
  if (!c.passed) verify::print(c);
}

// The engines a graph was offered, into the results file and (with --engines or on first build) the log.
static void record_engines(Ctx& cx, const cg::Graph& g) {
  json::Value arr = json::Value::array();
  for (const auto& e : g.engines()) {
    json::Value j = json::Value::object();
    j["global_index"] = (long long)e.global_index;
    j["heur_mode"] = e.heur_mode;
    j["rank"] = e.rank;
    j["runtime_compiled"] = e.runtime_compiled;
    j["tensor_core"] = e.tensor_core;  // tagged CUDNN_NUMERICAL_NOTE_TENSOR_CORE
    std::string notes;
    for (const auto& n : e.notes) notes += (notes.empty() ? "" : ",") + n;
    j["notes"] = notes;
    j["knobs"] = e.knobs;
    j["tried"] = e.tried;
    j["status"] = e.tried ? (e.status.empty() ? "finalized" : e.status) : (e.status.empty() ? "not tried" : e.status);
    if (e.tried) j["build_ms"] = e.build_ms;
    if (e.tried && e.status.empty()) j["workspace_bytes"] = (long long)e.workspace;
    j["chosen"] = e.chosen;
    arr.push(j);
  }
  cx.engines[g.name()] = arr;
  std::printf("  engines offered for \"%s\" (%d ops):\n", g.name().c_str(), g.op_count());
  g.print_engines();
}

// Builds (or fetches from the plan cache) a graph; prints its engines the first time.
static cg::Graph* plan(Ctx& cx, const std::string& key, const std::function<std::unique_ptr<cg::Graph>()>& make,
                       std::string* why, const std::function<bool(const cg::Engine&)>& accept = nullptr) {
  ++cx.plan_requests;
  if (cx.first_key.empty()) cx.first_key = key;
  const int before = cx.plans.builds();
  cx.plans.opt.explore = cx.explore;
  // Exploring, ask all three heuristics: A (quick), B (a costlier model, meant to rank better) and
  // FALLBACK (engines that almost always work); otherwise A, then FALLBACK if A offers nothing that builds.
  if (cx.explore)
    cx.plans.opt.modes = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK};
  else
    cx.plans.opt.modes = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  cx.plans.opt.accept = accept;
  cg::Graph& g = cx.plans.get(key, make, why);
  if (cx.plans.builds() != before) record_engines(cx, g);
  return why->empty() ? &g : nullptr;
}

// A fused graph on true-fp32 engines where the data is fp32: an fp32 lesson wants fp32 arithmetic, so
// engines that round inputs to TF32 (tensor-core or down-converting) are refused first; if that leaves
// none, they are accepted and *tf32 says so (the caller then runs the unfused path in TF32 too).
static bool true_fp32(cudnnDataType_t dt, const cg::Engine& e) {
  return dt != CUDNN_DATA_FLOAT || !(e.tensor_core || e.down_convert);
}
static cg::Graph* plan_fused(Ctx& cx, const std::string& key, cudnnDataType_t dt, const char* what,
                             const std::function<std::unique_ptr<cg::Graph>(const std::string&)>& make, bool* tf32) {
  std::string why;
  *tf32 = false;
  cg::Graph* g = plan(
      cx, key, [&] { return make(""); }, &why, [dt](const cg::Engine& e) { return true_fp32(dt, e); });
  if (!g && dt == CUDNN_DATA_FLOAT) {
    std::printf("  no true-fp32 engine for the fused graph (%s); trying TF32 engines\n", why.c_str());
    g = plan(
        cx, key + " tf32", [&] { return make(" (TF32 engines allowed)"); }, &why);
    *tf32 = g != nullptr;
  }
  if (!g) std::printf("  fused %s not supported here: %s (skipped)\n", what, why.c_str());
  return g;
}

static void* workspace(Ctx& cx, const cg::Graph& g) {
  return g.workspace() ? cx.ws.get(size_t(g.workspace())) : nullptr;
}

// The engine a graph runs on, for its bench row and its pattern summary.
static json::Value engine_json(const cg::Graph& g) {
  json::Value j = json::Value::object();
  j["engine"] = (long long)g.chosen().global_index;
  j["engine_tensor_core"] = g.chosen().tensor_core;
  j["engine_runtime_compiled"] = g.chosen().runtime_compiled;
  j["plan_build_ms"] = g.chosen().build_ms;
  return j;
}

// How a row's rate is computed: `bytes` (memory-bound) or `flops` (compute-bound), against `peak`.
struct Rate {
  double bytes = 0, flops = 0, peak = NAN;
  std::string peak_name;
};

// One results row from measured times. `vs` (optional) is the interleaved ratio against `ref_name`;
// without it, `ref_ms` (optional) is a plain baseline time.
static results::Bench add_row(Ctx& cx, const std::string& name, const std::vector<long long>& shape, const char* dtype,
                              const Rate& rate, const timing::Stats& t, const timing::Interleaved* vs, double ref_ms,
                              const std::string& ref_name, json::Value extra = json::Value::object()) {
  results::Bench b;
  b.name = name;
  b.dtype = dtype;
  b.shape = shape;
  b.ms = t.median_ms, b.min_ms = t.min_ms, b.max_ms = t.max_ms, b.reps = t.reps;
  if (rate.bytes > 0)
    b.gbps = rate.bytes / (t.median_ms * 1e-3) / 1e9;
  else
    b.tflops = rate.flops / (t.median_ms * 1e-3) / 1e12;
  b.peak = rate.peak, b.peak_name = rate.peak_name;
  if (vs) {
    b.ref = ref_name, b.ref_ms = vs->ref.median_ms;
    b.ref_repeats = vs->repeats;
    b.pct_of_ref_median = vs->pct_median, b.pct_of_ref_min = vs->pct_min, b.pct_of_ref_max = vs->pct_max;
  } else if (std::isfinite(ref_ms)) {
    b.ref = ref_name, b.ref_ms = ref_ms;
  }
  b.extra = extra;
  cx.res->add(b);
  std::printf("  %-52s %9.1f us %9.1f %-7s %6.1f%% of %s", name.c_str(), b.ms * 1e3, b.rate(),
              rate.bytes > 0 ? "GB/s" : "TFLOP/s", b.pct_of_peak(), rate.peak_name.c_str());
  if (vs)
    std::printf("  %.2fx vs %s (%.2f-%.2f, %d interleaved)", vs->pct_median / 100, ref_name.c_str(), vs->pct_min / 100,
                vs->pct_max / 100, vs->repeats);
  else if (std::isfinite(ref_ms))
    std::printf("  %.2fx vs %s", ref_ms / b.ms, ref_name.c_str());
  std::printf("\n");
  return b;
}

// Time one variant alone and add its row.
static double timed_row(Ctx& cx, const std::string& name, const std::vector<long long>& shape, const char* dtype,
                        const Rate& rate, double ref_ms, const std::string& ref_name, const std::function<void()>& run,
                        json::Value extra = json::Value::object()) {
  const timing::Stats t = timing::time_gpu(run, cx.topt);
  add_row(cx, name, shape, dtype, rate, t, nullptr, ref_ms, ref_name, extra);
  return t.median_ms;
}

// A headline ratio: `ours` against `ref`, interleaved kRatioRepeats times (timing::interleaved), so
// that a drift in clocks during the run touches both. Adds ours' row (with the ratio's median and
// min-max) and, when `ref_row` is not empty, the baseline's own row from the same rounds.
static timing::Interleaved ratio_rows(Ctx& cx, const std::string& name, const std::string& ref_row,
                                      const std::string& ref_name, const std::vector<long long>& shape,
                                      const char* dtype, const Rate& rate, const Rate& ref_rate,
                                      const std::function<void()>& ours, const std::function<void()>& ref,
                                      json::Value extra = json::Value::object(),
                                      json::Value ref_extra = json::Value::object()) {
  const timing::Interleaved r = timing::interleaved(ours, ref, cx.topt, kRatioRepeats);
  if (!ref_row.empty()) add_row(cx, ref_row, shape, dtype, ref_rate, r.ref, nullptr, NAN, "", ref_extra);
  add_row(cx, name, shape, dtype, rate, r.ours, &r, NAN, ref_name, extra);
  return r;
}

// A speedup goal met by every interleaved repeat, not only by the median.
static bool speedup_met(const timing::Interleaved& r, double goal) { return r.pct_min >= 100.0 * goal; }

static void summary(Ctx& cx, const std::string& pattern, const char* dtype, const std::string& shape,
                    const timing::Interleaved& r, double other_ms, const std::string& other_name, const cg::Graph& g,
                    const std::string& goal, bool met, bool tf32 = false) {
  json::Value j = json::Value::object();
  j["pattern"] = pattern;
  j["dtype"] = dtype;
  j["shape"] = shape;
  j["fused_ms"] = r.ours.median_ms;
  j["unfused_ms"] = r.ref.median_ms;
  j["speedup"] = r.pct_median / 100;  // median of the interleaved repeats
  j["speedup_min"] = r.pct_min / 100;
  j["speedup_max"] = r.pct_max / 100;
  j["ratio_repeats"] = r.repeats;
  if (std::isfinite(other_ms)) j[other_name + "_ms"] = other_ms;
  j["engine_global_index"] = (long long)g.chosen().global_index;
  j["engine_runtime_compiled"] = g.chosen().runtime_compiled;
  j["engine_tensor_core"] = g.chosen().tensor_core;
  j["plan_build_ms"] = g.chosen().build_ms;
  j["goal"] = goal;
  j["goal_met"] = met;
  j["tf32"] = tf32;  // fp32 data run on TF32 engines (both fused and unfused), because no true-fp32 engine was offered
  cx.patterns.push(j);
  cx.table.push_back({pattern, dtype, shape, r.ours.median_ms, r.ref.median_ms, r.pct_median, r.pct_min, r.pct_max,
                      g.chosen().build_ms, (long long)g.chosen().global_index, g.chosen().runtime_compiled,
                      g.chosen().tensor_core});
}

// ---- bf16/fp16/fp32 in registers, for the hand-written kernels --------------------------------
template <class T>
__device__ __forceinline__ float to_f(T v) {
  return float(v);
}
template <>
__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
template <class T>
__device__ __forceinline__ T from_f(float v) {
  return T(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __forceinline__ __half from_f(float v) {
  return __float2half(v);
}
