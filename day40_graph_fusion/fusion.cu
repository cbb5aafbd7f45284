// day40_graph_fusion/fusion.cu: cuDNN's graph (backend) API from the raw calls, the engines it
// offers made visible, and what operation fusion buys, measured.
//
// Three patterns, each as one fused cuDNN graph against the same math unfused (and, where it
// teaches something, a hand-written or library-fused version):
//   1. pointwise chain  y = sigmoid(a + b*c)       unfused: three single-op graphs, two
//                                                   intermediates in memory; hand-written: one kernel
//   2. conv + bias + ReLU (64x56x56, 64 3x3 filters, N = 1 and 32), and ReLU then conv
//                                                   unfused: legacy cudnnConvolutionForward (its
//                                                   fastest algorithm) + cudnnAddTensor + cudnnActivationForward
//   3. matmul + bias + GELU (GPT MLP: 16384x384 . 384x1536)
//                                                   unfused: cuBLAS GEMM + a bias/GELU kernel;
//                                                   library-fused: cuBLASLt's GELU_BIAS epilogue
// Every result is checked against a CPU reference in double (sampled on large shapes) and the
// fused result against the unfused one on the full output.
//
// Build and run
//   make && ./build/fusion                 # all patterns, default shapes
//   ./build/fusion --verify                # odd shapes, checks only
//   ./build/fusion --only conv --engines   # one pattern, every engine the heuristics offer, tried
//   ./build/fusion --bench --json ../results/{gpu}/day40_graph_fusion.json
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "ceilings.cuh"
#include "check.cuh"
#include "cli.h"
#include "conv_shape.h"
#include "cudnn_conv.cuh"
#include "cudnn_graph.h"
#include "env.cuh"
#include "fusion_ref.h"
#include "host_tensor.cuh"
#include "results.h"
#include "timing.cuh"
#include "verify.h"

static const char* kProg = "fusion";

struct Ctx {
  cudnnHandle_t dnn = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  results::Results* res = nullptr;
  verify::Rng* rng = nullptr;
  bool timed = false, explore = false;
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
    double fused_ms, unfused_ms, build_ms;
    long long engine;
    bool rtc;
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

static void* workspace(Ctx& cx, const cg::Graph& g) {
  return g.workspace() ? cx.ws.get(size_t(g.workspace())) : nullptr;
}

// Time one variant and add its results row. `bytes` (memory-bound) or `flops` (compute-bound) set the rate.
struct Row {
  std::string name;
  timing::Stats t;
};
static Row timed_row(Ctx& cx, const std::string& name, const std::vector<long long>& shape, const char* dtype,
                     double bytes, double flops, double peak, const std::string& peak_name, double ref_ms,
                     const std::string& ref_name, const std::function<void()>& run,
                     json::Value extra = json::Value::object()) {
  Row r{name, timing::time_gpu(run, cx.topt)};
  results::Bench b;
  b.name = name;
  b.dtype = dtype;
  b.shape = shape;
  b.ms = r.t.median_ms, b.min_ms = r.t.min_ms, b.max_ms = r.t.max_ms, b.reps = r.t.reps;
  if (bytes > 0)
    b.gbps = bytes / (r.t.median_ms * 1e-3) / 1e9;
  else
    b.tflops = flops / (r.t.median_ms * 1e-3) / 1e12;
  b.peak = peak, b.peak_name = peak_name;
  if (std::isfinite(ref_ms)) b.ref = ref_name, b.ref_ms = ref_ms;
  b.extra = extra;
  cx.res->add(b);
  std::printf("  %-52s %9.1f us %9.1f %-7s %6.1f%% of %s", name.c_str(), b.ms * 1e3, b.rate(),
              bytes > 0 ? "GB/s" : "TFLOP/s", b.pct_of_peak(), peak_name.c_str());
  if (std::isfinite(ref_ms)) std::printf("  %.2fx vs unfused", ref_ms / b.ms);
  std::printf("\n");
  return r;
}

static void summary(Ctx& cx, const std::string& pattern, const char* dtype, const std::string& shape, double fused_ms,
                    double unfused_ms, double other_ms, const std::string& other_name, const cg::Graph& g,
                    const std::string& goal, bool met, bool tf32 = false) {
  json::Value j = json::Value::object();
  j["pattern"] = pattern;
  j["dtype"] = dtype;
  j["shape"] = shape;
  j["fused_ms"] = fused_ms;
  j["unfused_ms"] = unfused_ms;
  j["speedup"] = unfused_ms / fused_ms;
  if (std::isfinite(other_ms)) j[other_name + "_ms"] = other_ms;
  j["engine_global_index"] = (long long)g.chosen().global_index;
  j["engine_runtime_compiled"] = g.chosen().runtime_compiled;
  j["plan_build_ms"] = g.chosen().build_ms;
  j["goal"] = goal;
  j["goal_met"] = met;
  j["tf32"] = tf32;  // fp32 data run on TF32 engines (both fused and unfused), because no true-fp32 engine was offered
  cx.patterns.push(j);
  cx.table.push_back({pattern, dtype, shape, fused_ms, unfused_ms, g.chosen().build_ms,
                      (long long)g.chosen().global_index, g.chosen().runtime_compiled});
}

// ==== 1. Pointwise chain ===========================================================================

// The hand-written fused kernel: one pass, 16-byte loads, fp32 arithmetic.
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

template <class T>
__global__ void chain_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ c,
                             T* __restrict__ y, size_t n) {
  constexpr int V = 16 / sizeof(T);  // elements per 16-byte vector
  const size_t nv = n / V;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < nv; i += stride) {
    const uint4 va = reinterpret_cast<const uint4*>(a)[i], vb = reinterpret_cast<const uint4*>(b)[i],
                vc = reinterpret_cast<const uint4*>(c)[i];
    const T *pa = reinterpret_cast<const T*>(&va), *pb = reinterpret_cast<const T*>(&vb),
            *pc = reinterpret_cast<const T*>(&vc);
    uint4 vy;
    T* py = reinterpret_cast<T*>(&vy);
#pragma unroll
    for (int k = 0; k < V; ++k) py[k] = from_f<T>(1.f / (1.f + __expf(-(to_f(pa[k]) + to_f(pb[k]) * to_f(pc[k])))));
    reinterpret_cast<uint4*>(y)[i] = vy;
  }
  // The tail that does not fill a vector.
  for (size_t i = nv * V + blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    y[i] = from_f<T>(1.f / (1.f + __expf(-(to_f(a[i]) + to_f(b[i]) * to_f(c[i])))));
}

static void run_chain_kernel(cudnnDataType_t dt, const void* a, const void* b, const void* c, void* y, size_t n,
                             int sms) {
  const int grid = sms * 8, block = 256;
  if (dt == CUDNN_DATA_FLOAT)
    chain_kernel<float><<<grid, block>>>((const float*)a, (const float*)b, (const float*)c, (float*)y, n);
  else if (dt == CUDNN_DATA_HALF)
    chain_kernel<__half><<<grid, block>>>((const __half*)a, (const __half*)b, (const __half*)c, (__half*)y, n);
  else
    chain_kernel<__nv_bfloat16><<<grid, block>>>((const __nv_bfloat16*)a, (const __nv_bfloat16*)b,
                                                 (const __nv_bfloat16*)c, (__nv_bfloat16*)y, n);
  LAUNCH_CHECK();
}

static void pointwise_chain(Ctx& cx, ht::Dims d, cudnnDataType_t dt, int sms) {
  const size_t n = d.count();
  const std::string shape =
      std::to_string(d.n) + "x" + std::to_string(d.c) + "x" + std::to_string(d.h) + "x" + std::to_string(d.w);
  std::printf("\n== 1. pointwise chain y = sigmoid(a + b*c), %s %s (NHWC, %zu elements)\n", dt_name(dt), shape.c_str(),
              n);
  const std::vector<int64_t> dims = {d.n, d.c, d.h, d.w}, str = cg::nhwc_strides(d.n, d.c, d.h, d.w);
  // Fused: MUL and ADD into virtual fp32 tensors, then SIGMOID: one kernel, no intermediates in memory.
  std::string why;
  cg::Graph* fused = plan(
      cx, std::string("chain fused ") + dt_name(dt) + " " + shape,
      [&] {
        auto g = std::make_unique<cg::Graph>(cx.dnn, std::string("sigmoid(a + b*c) ") + dt_name(dt));
        g->tensor("a", dims, str, dt), g->tensor("b", dims, str, dt), g->tensor("c", dims, str, dt),
            g->tensor("y", dims, str, dt);
        g->virt("bc", dims, str), g->virt("s", dims, str);
        g->pointwise(CUDNN_POINTWISE_MUL, "b", "c", "bc");
        g->pointwise(CUDNN_POINTWISE_ADD, "a", "bc", "s");
        g->pointwise(CUDNN_POINTWISE_SIGMOID_FWD, "s", "", "y");
        return g;
      },
      &why);
  if (!fused) {
    std::printf("  fused graph not supported here: %s (skipped)\n", why.c_str());
    return;
  }
  // Unfused: the same three operations as three graphs, each writing its result to memory.
  auto single = [&](const std::string& tag, cudnnPointwiseMode_t mode, bool binary) {
    return plan(
        cx, "chain step " + tag + " " + dt_name(dt) + " " + shape,
        [&] {
          auto g = std::make_unique<cg::Graph>(cx.dnn, "unfused step " + tag + " " + dt_name(dt));
          g->tensor("x", dims, str, dt);
          if (binary) g->tensor("b", dims, str, dt);
          g->tensor("y", dims, str, dt);
          g->pointwise(mode, "x", binary ? "b" : "", "y");
          return g;
        },
        &why);
  };
  cg::Graph* g_mul = single("mul", CUDNN_POINTWISE_MUL, true);
  cg::Graph* g_add = g_mul ? single("add", CUDNN_POINTWISE_ADD, true) : nullptr;
  cg::Graph* g_sig = g_add ? single("sigmoid", CUDNN_POINTWISE_SIGMOID_FWD, false) : nullptr;

  const std::vector<float> ha = random_vec(cx, n, dt, -2.f, 2.f), hb = random_vec(cx, n, dt, -2.f, 2.f),
                           hc = random_vec(cx, n, dt, -2.f, 2.f);
  DeviceBuffer a = ht::upload(ha, dt), b = ht::upload(hb, dt), c = ht::upload(hc, dt), y(n * ht::dtype_bytes(dt)),
               t1(n * ht::dtype_bytes(dt)), t2(n * ht::dtype_bytes(dt));
  // Every element is checked (a few operations per element: the CPU keeps up).
  std::vector<size_t> idx(n);
  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i, want[i] = fref::chain(ha[i], hb[i], hc[i]);
  const verify::Tol tol = tol_for(dt, 1.0);
  auto run_fused = [&] {
    fused->execute({{"a", a.as()}, {"b", b.as()}, {"c", c.as()}, {"y", y.as()}}, workspace(cx, *fused));
  };
  auto run_unfused = [&] {
    g_mul->execute({{"x", b.as()}, {"b", c.as()}, {"y", t1.as()}}, workspace(cx, *g_mul));
    g_add->execute({{"x", a.as()}, {"b", t1.as()}, {"y", t2.as()}}, workspace(cx, *g_add));
    g_sig->execute({{"x", t2.as()}, {"y", y.as()}}, workspace(cx, *g_sig));
  };
  auto run_kernel = [&] { run_chain_kernel(dt, a.as(), b.as(), c.as(), y.as(), n, sms); };
  const std::string tag = std::string("chain ") + dt_name(dt) + " " + shape;
  auto check_now = [&](const std::string& what) {
    CUDA_CHECK(cudaDeviceSynchronize());
    add_check(cx, verify::compare_at(tag + " " + what + " vs CPU", ht::download(y, n, dt), idx, want, tol));
  };
  poison(y.as(), y.bytes());
  run_fused();
  check_now("fused graph");
  if (g_sig) {
    poison(y.as(), y.bytes());
    run_unfused();
    check_now("unfused (3 graphs)");
  }
  poison(y.as(), y.bytes());
  run_kernel();
  check_now("hand-written kernel");
  if (!cx.timed) return;

  const double bytes = 4.0 * n * ht::dtype_bytes(dt);  // read a, b, c; write y
  const std::vector<long long> shp = {d.n, d.c, d.h, d.w};
  double unf = NAN;
  // Unfused traffic: b, c -> t1; a, t1 -> t2; t2 -> y: 8 tensors' worth instead of 4.
  if (g_sig)
    unf = timed_row(cx, tag + " unfused (3 graphs, 2 temporaries)", shp, dt_name(dt), 8.0 * n * ht::dtype_bytes(dt), 0,
                    cx.copy_peak, "copy bandwidth", NAN, "", run_unfused)
              .t.median_ms;
  json::Value ex = json::Value::object();
  ex["engine"] = (long long)fused->chosen().global_index;
  ex["plan_build_ms"] = fused->chosen().build_ms;
  const double fz = timed_row(cx, tag + " fused graph", shp, dt_name(dt), bytes, 0, cx.copy_peak, "copy bandwidth", unf,
                              "unfused (3 graphs)", run_fused, ex)
                        .t.median_ms;
  check_now("fused graph after timing");
  const double hk = timed_row(cx, tag + " hand-written fused kernel", shp, dt_name(dt), bytes, 0, cx.copy_peak,
                              "copy bandwidth", unf, "unfused (3 graphs)", run_kernel)
                        .t.median_ms;
  check_now("hand-written kernel after timing");
  const double pct = 100.0 * bytes / (fz * 1e-3) / 1e9 / cx.copy_peak;
  std::printf("  fused: %.0f%% of copy bandwidth (goal >= 90%%: %s); unfused moves 8 tensors' bytes instead of 4\n",
              pct, pct >= 90 ? "met" : "missed");
  summary(cx, "pointwise sigmoid(a+b*c)", dt_name(dt), shape, fz, unf, hk, "handwritten", *fused,
          ">= 90% of copy bandwidth", pct >= 90);
}

// ==== 2. Conv + bias + ReLU, and ReLU then conv =====================================================

static void conv_patterns(Ctx& cx, const ConvShape& s, cudnnDataType_t dt, bool nhwc) {
  const std::string layout = nhwc ? "NHWC" : "NCHW", shape = s.str();
  std::printf("\n== 2. conv + bias + ReLU, %s %s %s\n", dt_name(dt), layout.c_str(), shape.c_str());
  const ht::Dims xd{s.N, s.C, s.H, s.W}, wd{s.K, s.C, s.R, s.S}, yd{s.N, s.K, s.P(), s.Q()};
  auto strides = [&](ht::Dims d) {
    return nhwc ? cg::nhwc_strides(d.n, d.c, d.h, d.w) : cg::packed_strides({d.n, d.c, d.h, d.w});
  };
  auto dims = [](ht::Dims d) { return std::vector<int64_t>{d.n, d.c, d.h, d.w}; };
  // An fp32 lesson wants fp32 arithmetic: refuse engines that round inputs to TF32, and say so if
  // that leaves none (then accept them, and run the unfused path in TF32 too, so both do the same math).
  bool tf32 = false;
  auto fp32_only = [dt](const cg::Engine& e) { return dt != CUDNN_DATA_FLOAT || !(e.tensor_core || e.down_convert); };
  auto make_cbr = [&](const std::string& suffix) {
    auto g = std::make_unique<cg::Graph>(
        cx.dnn, "conv+bias+relu " + std::string(dt_name(dt)) + " " + layout + " " + shape + suffix);
    g->tensor("x", dims(xd), strides(xd), dt), g->tensor("w", dims(wd), strides(wd), dt);
    g->tensor("bias", {1, s.K, 1, 1}, strides({1, s.K, 1, 1}), dt), g->tensor("y", dims(yd), strides(yd), dt);
    g->virt("conv", dims(yd), strides(yd)), g->virt("biased", dims(yd), strides(yd));
    g->conv_fwd("x", "w", "conv", s.pad, s.stride, s.dil);
    g->pointwise(CUDNN_POINTWISE_ADD, "conv", "bias", "biased");
    g->pointwise(CUDNN_POINTWISE_RELU_FWD, "biased", "", "y");
    return g;
  };
  const std::string key = "cbr " + std::string(dt_name(dt)) + " " + layout + " " + shape;
  std::string why;
  cg::Graph* fused = plan(
      cx, key, [&] { return make_cbr(""); }, &why, fp32_only);
  if (!fused && dt == CUDNN_DATA_FLOAT) {
    std::printf("  no true-fp32 engine for the fused graph (%s); trying TF32 engines\n", why.c_str());
    fused = plan(
        cx, key + " tf32", [&] { return make_cbr(" (TF32 engines allowed)"); }, &why);
    tf32 = fused != nullptr;
  }
  if (!fused) {
    std::printf("  fused conv + bias + ReLU not supported here: %s (skipped)\n", why.c_str());
    return;
  }
  // The unfused path: the legacy API's three calls. Its convolution is cuDNN's fastest algorithm
  // (Find, then every algorithm re-timed), in the same math as the fused engine.
  dnn::ConvDesc cd(s, dt, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                   dt != CUDNN_DATA_FLOAT ? CUDNN_TENSOR_OP_MATH
                   : tf32                 ? CUDNN_DEFAULT_MATH
                                          : CUDNN_FMA_MATH);
  if (!cd.ok()) {
    std::printf("  legacy descriptors refused: %s (skipped)\n", cd.error.c_str());
    return;
  }
  std::vector<float> hx = random_vec(cx, xd.count(), dt), hw = random_vec(cx, wd.count(), dt),
                     hb = random_vec(cx, s.K, dt);
  DeviceBuffer x = ht::upload(hx, xd, dt, nhwc), w = ht::upload(hw, wd, dt, nhwc), bias = ht::upload(hb, dt),
               y(yd.count() * ht::dtype_bytes(dt)), y2(yd.count() * ht::dtype_bytes(dt)),
               xr(xd.count() * ht::dtype_bytes(dt));
  const dnn::Operands ops{x.as(), w.as(), y.as()};
  const size_t offer = dnn::workspace_budget(size_t(1) << 30);
  std::vector<dnn::AlgoPerf> found = dnn::find(cx.dnn, cd, dnn::Dir::Fwd, ops, cx.ws.get(offer), offer);
  dnn::AlgoPerf algo;
  for (const auto& f : found)
    if (f.ok()) {
      algo = f;
      break;
    }
  if (!algo.ok()) {
    std::printf("  the legacy convolution found no algorithm (skipped)\n");
    return;
  }
  if (cx.timed) {
    const auto timed = dnn::retime(cx.dnn, cd, dnn::Dir::Fwd, found, ops, cx.ws, offer, cx.topt);
    if (!timed.empty()) algo = timed.front().algo;
  }
  cudnnTensorDescriptor_t bdesc;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&bdesc));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(bdesc, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, dt, 1, s.K, 1, 1));
  cudnnActivationDescriptor_t relu;
  CUDNN_CHECK(cudnnCreateActivationDescriptor(&relu));
  CUDNN_CHECK(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  const float one = 1.f, zero = 0.f;
  auto run_unfused = [&] {
    CUDNN_CHECK(dnn::run(cx.dnn, cd, dnn::Dir::Fwd, algo.algo, algo.math, ops,
                         algo.workspace ? cx.ws.get(algo.workspace) : nullptr, algo.workspace));
    CUDNN_CHECK(cudnnAddTensor(cx.dnn, &one, bdesc, bias.as(), &one, cd.y, y.as()));
    CUDNN_CHECK(cudnnActivationForward(cx.dnn, relu, &one, cd.y, y.as(), &zero, cd.y, y.as()));
  };
  auto run_fused = [&] {
    fused->execute({{"x", x.as()}, {"w", w.as()}, {"bias", bias.as()}, {"y", y.as()}}, workspace(cx, *fused));
  };

  // Checks: the CPU at sampled outputs, and fused against unfused everywhere.
  const double macs = double(yd.count()) * s.C * s.R * s.S;
  const std::vector<size_t> idx = ref::sample_indices(yd.count(), macs <= 3e8 ? yd.count() : 4096, cx.rng->next());
  const std::vector<double> want =
      ref::eval_at(idx, [&](size_t f) { return fref::conv_bias_relu_at(s, hx.data(), hw.data(), hb.data(), f); });
  const verify::Tol tol = tol_for(dt, std::sqrt(double(s.C) * s.R * s.S), tf32);
  const std::string tag = "conv+bias+relu " + std::string(dt_name(dt)) + " " + layout + " " + shape;
  poison(y.as(), y.bytes());
  run_fused();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> yf = ht::download(y, yd, dt, nhwc);
  add_check(cx, verify::compare_at(tag + " fused vs CPU", yf, idx, want, tol));
  poison(y.as(), y.bytes());
  run_unfused();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> yu = ht::download(y, yd, dt, nhwc);
  add_check(cx, verify::compare_at(tag + " unfused vs CPU", yu, idx, want, tol));
  add_check(cx, verify::compare(tag + " fused vs unfused (all outputs)", yf.data(), yu.data(), yf.size(), tol));

  // ReLU then conv (pre-activation ResNet): the pointwise op on the convolution's *input*.
  std::string why2;
  cg::Graph* pre = plan(
      cx, "relu-conv " + key.substr(4),
      [&] {
        auto g = std::make_unique<cg::Graph>(cx.dnn,
                                             "relu then conv " + std::string(dt_name(dt)) + " " + layout + " " + shape);
        g->tensor("x", dims(xd), strides(xd), dt), g->tensor("w", dims(wd), strides(wd), dt),
            g->tensor("y", dims(yd), strides(yd), dt);
        g->virt("xr", dims(xd), strides(xd), dt);
        g->pointwise(CUDNN_POINTWISE_RELU_FWD, "x", "", "xr");
        g->conv_fwd("xr", "w", "y", s.pad, s.stride, s.dil);
        return g;
      },
      &why2, tf32 ? nullptr : std::function<bool(const cg::Engine&)>(fp32_only));
  std::vector<float> hxr = hx;
  for (auto& v : hxr) v = v > 0 ? v : 0;
  const dnn::Operands ops_r{xr.as(), w.as(), y.as()};
  auto run_pre_unfused = [&] {
    CUDNN_CHECK(cudnnActivationForward(cx.dnn, relu, &one, cd.x, x.as(), &zero, cd.x, xr.as()));
    CUDNN_CHECK(dnn::run(cx.dnn, cd, dnn::Dir::Fwd, algo.algo, algo.math, ops_r,
                         algo.workspace ? cx.ws.get(algo.workspace) : nullptr, algo.workspace));
  };
  auto run_pre_fused = [&] { pre->execute({{"x", x.as()}, {"w", w.as()}, {"y", y.as()}}, workspace(cx, *pre)); };
  if (!pre) {
    std::printf(
        "  ReLU then conv as one graph: not supported here: %s%s (skipped; the unfused pair is still checked)\n",
        why2.c_str(),
        dt == CUDNN_DATA_FLOAT ? " (the rule: an fp32 graph may not run on tensor-core/TF32 engines)" : "");
  }
  {
    const std::vector<double> want_r = ref::eval_at(idx, [&](size_t f) {
      const ref::Idx4 i = ref::unflatten(f, s.K, s.P(), s.Q());
      return ref::conv_at(s, hxr.data(), hw.data(), i.a, i.b, i.c, i.d);
    });
    poison(y.as(), y.bytes());
    run_pre_unfused();
    CUDA_CHECK(cudaDeviceSynchronize());
    add_check(cx, verify::compare_at("relu-then-conv " + tag.substr(15) + " unfused vs CPU",
                                     ht::download(y, yd, dt, nhwc), idx, want_r, tol));
    if (pre) {
      poison(y.as(), y.bytes());
      run_pre_fused();
      CUDA_CHECK(cudaDeviceSynchronize());
      add_check(cx, verify::compare_at("relu-then-conv " + tag.substr(15) + " fused vs CPU",
                                       ht::download(y, yd, dt, nhwc), idx, want_r, tol));
    }
  }
  if (cx.timed) {
    const std::vector<long long> shp = {s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.pad, s.stride, s.dil};
    const std::string pk = dt == CUDNN_DATA_HALF ? "fp16" : dt == CUDNN_DATA_BFLOAT16 ? "bf16" : "tf32";
    const double peak = (dt == CUDNN_DATA_FLOAT && !tf32) ? cx.fp32_peak : cx.tensor_peak[pk];
    const std::string peak_name = (dt == CUDNN_DATA_FLOAT && !tf32) ? "FP32 FMA ceiling" : "cuBLAS " + pk + " GEMM";
    json::Value ue = json::Value::object();
    ue["conv_algo"] = algo.name;
    ue["conv_math"] = dnn::math_name(algo.math);
    const double unf = timed_row(cx, tag + " unfused (legacy conv " + algo.name + " + add + relu)", shp, dt_name(dt), 0,
                                 s.flops(), peak, peak_name, NAN, "", run_unfused, ue)
                           .t.median_ms;
    json::Value fe = json::Value::object();
    fe["engine"] = (long long)fused->chosen().global_index;
    fe["plan_build_ms"] = fused->chosen().build_ms;
    const double fz = timed_row(cx, tag + " fused graph", shp, dt_name(dt), 0, s.flops(), peak, peak_name, unf,
                                "unfused legacy calls", run_fused, fe)
                          .t.median_ms;
    CUDA_CHECK(cudaDeviceSynchronize());
    add_check(cx, verify::compare(tag + " fused after timing vs unfused", ht::download(y, yd, dt, nhwc).data(),
                                  yu.data(), yu.size(), tol));
    // The conv alone (legacy, same algorithm): how much of the unfused time is the bias and ReLU passes.
    const double conv_only =
        timed_row(cx, tag + " conv alone (legacy " + algo.name + ")", shp, dt_name(dt), 0, s.flops(), peak, peak_name,
                  unf, "unfused legacy calls",
                  [&] {
                    CUDNN_CHECK(dnn::run(cx.dnn, cd, dnn::Dir::Fwd, algo.algo, algo.math, ops,
                                         algo.workspace ? cx.ws.get(algo.workspace) : nullptr, algo.workspace));
                  })
            .t.median_ms;
    std::printf(
        "  fused %.2fx faster than unfused (goal >= 1.3x: %s); the bias + ReLU passes cost %.1f us of the unfused %.1f "
        "us\n",
        unf / fz, unf / fz >= 1.3 ? "met" : "missed", (unf - conv_only) * 1e3, unf * 1e3);
    summary(cx, "conv+bias+relu", dt_name(dt), layout + " " + shape, fz, unf, conv_only, "conv_alone", *fused,
            ">= 1.3x unfused", unf / fz >= 1.3, tf32);
    if (pre) {
      const double pu = timed_row(cx, "relu-then-conv " + tag.substr(15) + " unfused (relu + legacy conv)", shp,
                                  dt_name(dt), 0, s.flops(), peak, peak_name, NAN, "", run_pre_unfused)
                            .t.median_ms;
      const double pf = timed_row(cx, "relu-then-conv " + tag.substr(15) + " fused graph", shp, dt_name(dt), 0,
                                  s.flops(), peak, peak_name, pu, "unfused relu + conv", run_pre_fused)
                            .t.median_ms;
      summary(cx, "relu-then-conv", dt_name(dt), layout + " " + shape, pf, pu, NAN, "", *pre, "(no goal: instructive)",
              true);
    }
  }
  CUDNN_CHECK(cudnnDestroyActivationDescriptor(relu));
  CUDNN_CHECK(cudnnDestroyTensorDescriptor(bdesc));
}

// ==== 3. Matmul + bias + GELU ======================================================================

// The unfused baseline's second kernel, written to be a fair opponent: 16-byte loads and
// stores, the bias column computed once per vector, tanh through one __expf. It moves 2 x M x N
// elements, so it should run near copy bandwidth; the fused graph's advantage is that it does not
// exist at all.
__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  const float t = 1.f - 2.f / (__expf(2.f * u) + 1.f);  // tanh(u), saturating correctly at +-inf
  return 0.5f * x * (1.f + t);
}

template <class T>
__global__ void bias_gelu_kernel(const T* __restrict__ in, const T* __restrict__ bias, T* __restrict__ out, size_t rows,
                                 int cols) {
  constexpr int V = 16 / sizeof(T);
  const size_t n = rows * size_t(cols), stride = size_t(gridDim.x) * blockDim.x;
  if (cols % V == 0) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n / V; i += stride) {
      const uint4 v = reinterpret_cast<const uint4*>(in)[i];
      const uint4 b = reinterpret_cast<const uint4*>(bias)[(i * V % cols) / V];
      const T *pv = reinterpret_cast<const T*>(&v), *pb = reinterpret_cast<const T*>(&b);
      uint4 o;
      T* po = reinterpret_cast<T*>(&o);
#pragma unroll
      for (int k = 0; k < V; ++k) po[k] = from_f<T>(gelu_tanh(to_f(pv[k]) + to_f(pb[k])));
      reinterpret_cast<uint4*>(out)[i] = o;
    }
  } else {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
      out[i] = from_f<T>(gelu_tanh(to_f(in[i]) + to_f(bias[i % cols])));
  }
}

static void matmul_bias_gelu(Ctx& cx, int M, int N, int K, cudnnDataType_t dt, int sms) {
  const std::string shape =
      std::to_string(M) + "x" + std::to_string(K) + " . " + std::to_string(K) + "x" + std::to_string(N);
  std::printf("\n== 3. matmul + bias + GELU (tanh), %s, %s\n", dt_name(dt), shape.c_str());
  bool tf32 = false;
  auto fp32_only = [dt](const cg::Engine& e) { return dt != CUDNN_DATA_FLOAT || !(e.tensor_core || e.down_convert); };
  auto make = [&](const std::string& suffix) {
    auto g = std::make_unique<cg::Graph>(cx.dnn, "matmul+bias+gelu " + std::string(dt_name(dt)) + " " + shape + suffix);
    g->tensor("A", {1, M, K}, {int64_t(M) * K, K, 1}, dt), g->tensor("B", {1, K, N}, {int64_t(K) * N, N, 1}, dt);
    g->tensor("bias", {1, 1, N}, {N, N, 1}, dt), g->tensor("Y", {1, M, N}, {int64_t(M) * N, N, 1}, dt);
    g->virt("C", {1, M, N}, {int64_t(M) * N, N, 1}), g->virt("Cb", {1, M, N}, {int64_t(M) * N, N, 1});
    g->matmul("A", "B", "C");
    g->pointwise(CUDNN_POINTWISE_ADD, "C", "bias", "Cb");
    g->pointwise(CUDNN_POINTWISE_GELU_APPROX_TANH_FWD, "Cb", "", "Y");
    return g;
  };
  const std::string key = "mbg " + std::string(dt_name(dt)) + " " + shape;
  std::string why;
  cg::Graph* fused = plan(
      cx, key, [&] { return make(""); }, &why, fp32_only);
  if (!fused && dt == CUDNN_DATA_FLOAT) {
    std::printf("  no true-fp32 engine for the fused graph (%s); trying TF32 engines\n", why.c_str());
    fused = plan(
        cx, key + " tf32", [&] { return make(" (TF32 engines allowed)"); }, &why);
    tf32 = fused != nullptr;
  }
  if (!fused) {
    std::printf("  fused matmul + bias + GELU not supported here: %s (skipped)\n", why.c_str());
    return;
  }
  const size_t mn = size_t(M) * N;
  std::vector<float> hA = random_vec(cx, size_t(M) * K, dt), hB = random_vec(cx, size_t(K) * N, dt),
                     hb = random_vec(cx, N, dt);
  DeviceBuffer A = ht::upload(hA, dt), B = ht::upload(hB, dt), bias = ht::upload(hb, dt), C(mn * ht::dtype_bytes(dt)),
               Y(mn * ht::dtype_bytes(dt));
  const cudaDataType_t ct = dt == CUDNN_DATA_FLOAT ? CUDA_R_32F : dt == CUDNN_DATA_HALF ? CUDA_R_16F : CUDA_R_16BF;
  const cublasComputeType_t comp =
      dt == CUDNN_DATA_FLOAT ? (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F) : CUBLAS_COMPUTE_32F;
  const float one = 1.f, zero = 0.f;
  // Row-major C[M][N] = A[M][K] B[K][N] is column-major C^T = B^T A^T: cuBLAS sees (N x K) . (K x M).
  auto gemm = [&] {
    CUBLAS_CHECK(cublasGemmEx(cx.blas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B.as(), ct, N, A.as(), ct, K, &zero,
                              C.as(), ct, N, comp, CUBLAS_GEMM_DEFAULT));
  };
  auto bias_gelu = [&] {
    const int grid = sms * 8;
    if (dt == CUDNN_DATA_FLOAT)
      bias_gelu_kernel<float><<<grid, 256>>>(C.as<float>(), bias.as<float>(), Y.as<float>(), M, N);
    else if (dt == CUDNN_DATA_HALF)
      bias_gelu_kernel<__half><<<grid, 256>>>(C.as<__half>(), bias.as<__half>(), Y.as<__half>(), M, N);
    else
      bias_gelu_kernel<__nv_bfloat16>
          <<<grid, 256>>>(C.as<__nv_bfloat16>(), bias.as<__nv_bfloat16>(), Y.as<__nv_bfloat16>(), M, N);
    LAUNCH_CHECK();
  };
  auto run_unfused = [&] { gemm(), bias_gelu(); };
  auto run_fused = [&] {
    fused->execute({{"A", A.as()}, {"B", B.as()}, {"bias", bias.as()}, {"Y", Y.as()}}, workspace(cx, *fused));
  };
  // cuBLASLt with the GELU_BIAS epilogue: the fusion a GEMM library offers.
  cublasLtMatmulDesc_t op;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, comp, CUDA_R_32F));
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  const void* bias_ptr = bias.as();
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr));
  cublasLtMatrixLayout_t la, lb, lc;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, ct, N, K, N));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, ct, K, M, K));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, ct, N, M, N));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t lt_ws = size_t(32) << 20;
  CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt_ws, sizeof lt_ws));
  cublasLtMatmulHeuristicResult_t heur;
  int nheur = 0;
  const bool lt_ok =
      cublasLtMatmulAlgoGetHeuristic(cx.lt, op, la, lb, lc, lc, pref, 1, &heur, &nheur) == CUBLAS_STATUS_SUCCESS &&
      nheur > 0;
  DeviceBuffer ltw(lt_ws);
  auto run_lt = [&] {
    CUBLAS_CHECK(cublasLtMatmul(cx.lt, op, &one, B.as(), la, A.as(), lb, &zero, Y.as(), lc, Y.as(), lc, &heur.algo,
                                ltw.as(), lt_ws, 0));
  };

  const std::vector<size_t> idx = ref::sample_indices(mn, std::min<size_t>(mn, 8192), cx.rng->next());
  const std::vector<double> want =
      ref::eval_at(idx, [&](size_t f) { return fref::matmul_bias_gelu_at(hA.data(), hB.data(), hb.data(), K, N, f); });
  const verify::Tol tol = tol_for(dt, std::sqrt(double(K)) / 3, tf32);  // sums of K products of U(-1,1): std sqrt(K)/3
  const std::string tag = "matmul+bias+gelu " + std::string(dt_name(dt)) + " " + shape;
  auto out = [&] {
    CUDA_CHECK(cudaDeviceSynchronize());
    return ht::download(Y, mn, dt);
  };
  poison(Y.as(), Y.bytes());
  run_fused();
  const std::vector<float> yf = out();
  add_check(cx, verify::compare_at(tag + " fused vs CPU", yf, idx, want, tol));
  poison(C.as(), C.bytes());  // the unfused path's intermediate is an output too
  poison(Y.as(), Y.bytes());
  run_unfused();
  const std::vector<float> yu = out();
  add_check(cx, verify::compare_at(tag + " unfused vs CPU", yu, idx, want, tol));
  add_check(cx, verify::compare(tag + " fused vs unfused (all outputs)", yf.data(), yu.data(), mn, tol));
  if (lt_ok) {
    poison(Y.as(), Y.bytes());
    run_lt();
    add_check(cx, verify::compare_at(tag + " cuBLASLt epilogue vs CPU", out(), idx, want, tol));
  } else {
    std::printf("  cuBLASLt offers no GELU_BIAS algorithm for this case (skipped)\n");
  }
  if (cx.timed) {
    const std::vector<long long> shp = {M, N, K};
    const double flops = 2.0 * M * N * double(K);
    const std::string pk = dt == CUDNN_DATA_HALF ? "fp16" : dt == CUDNN_DATA_BFLOAT16 ? "bf16" : "tf32";
    const double peak = (dt == CUDNN_DATA_FLOAT && !tf32) ? cx.fp32_peak : cx.tensor_peak[pk];
    const std::string peak_name = (dt == CUDNN_DATA_FLOAT && !tf32) ? "FP32 FMA ceiling" : "cuBLAS " + pk + " GEMM";
    const double unf = timed_row(cx, tag + " unfused (cuBLAS + bias/GELU kernel)", shp, dt_name(dt), 0, flops, peak,
                                 peak_name, NAN, "", run_unfused)
                           .t.median_ms;
    json::Value fe = json::Value::object();
    fe["engine"] = (long long)fused->chosen().global_index;
    fe["plan_build_ms"] = fused->chosen().build_ms;
    const double fz = timed_row(cx, tag + " fused graph", shp, dt_name(dt), 0, flops, peak, peak_name, unf,
                                "cuBLAS + bias/GELU kernel", run_fused, fe)
                          .t.median_ms;
    add_check(cx, verify::compare(tag + " fused after timing vs unfused", out().data(), yu.data(), mn, tol));
    const double g_only = timed_row(cx, tag + " cuBLAS GEMM alone", shp, dt_name(dt), 0, flops, peak, peak_name, unf,
                                    "cuBLAS + bias/GELU kernel", gemm)
                              .t.median_ms;
    double lt_ms = NAN;
    if (lt_ok) {
      lt_ms = timed_row(cx, tag + " cuBLASLt GELU_BIAS epilogue", shp, dt_name(dt), 0, flops, peak, peak_name, unf,
                        "cuBLAS + bias/GELU kernel", run_lt)
                  .t.median_ms;
      add_check(cx, verify::compare_at(tag + " cuBLASLt epilogue after timing vs CPU", out(), idx, want, tol));
    }
    std::printf("  fused %.2fx faster than unfused (goal >= 1.3x: %s); the separate bias/GELU pass costs %.1f us\n",
                unf / fz, unf / fz >= 1.3 ? "met" : "missed", (unf - g_only) * 1e3);
    summary(cx, "matmul+bias+gelu", dt_name(dt), shape, fz, unf, lt_ms, "cublaslt_epilogue", *fused, ">= 1.3x unfused",
            unf / fz >= 1.3, tf32);
  }
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
  CUBLAS_CHECK(cublasLtMatmulDescDestroy(op));
}

int main(int argc, char** argv) {
  cli::Args args(argc, argv, kProg,
                 "cuDNN graph API: three fused patterns against the same math unfused, engines made visible");
  const cli::Standard st = cli::standard_flags(args, 20261140);
  const std::string only = args.str("only", "", "one pattern: pointwise, conv or matmul");
  const std::vector<long long> pw =
      args.int_list("pw-shape", {}, 1, 1 << 30, "the pointwise tensor N,C,H,W (default 64,64,128,128 = 2^26)");
  const bool engines = args.flag(
      "engines",
      "try every engine configuration the heuristics offer (build times, workspace), not just the first that works");
  args.finish();
  st.validate(kProg);
  if (!only.empty() && only != "pointwise" && only != "conv" && only != "matmul")
    cli::usage_error(kProg, "--only must be pointwise, conv or matmul; got '" + only + "'");
  if (!pw.empty() && pw.size() != 4) cli::usage_error(kProg, "--pw-shape expects four numbers N,C,H,W");
  ht::Dims pwd = st.verify ? ht::Dims{3, 5, 37, 41} : ht::Dims{64, 64, 128, 128};
  if (!pw.empty()) {
    const double e = double(pw[0]) * pw[1] * pw[2] * pw[3];
    if (e >= 2147483648.0) cli::usage_error(kProg, "--pw-shape has more than 2^31 elements");
    pwd = {int(pw[0]), int(pw[1]), int(pw[2]), int(pw[3])};
  }
  results::require_outputs(kProg, st);

  results::Results res("day40_graph_fusion", kProg);
  const int dev = env::begin(res, st);
  env::require_memory(kProg, 6 * pwd.count() * 4, "the pointwise tensors (fp32: a, b, c, y and two temporaries)");
  verify::Rng rng{uint64_t(st.seed)};
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));

  Ctx cx;
  cx.res = &res;
  cx.rng = &rng;
  cx.timed = !st.verify;
  cx.explore = engines || st.bench;
  CUDNN_CHECK(cudnnCreate(&cx.dnn));
  CUBLAS_CHECK(cublasCreate(&cx.blas));
  CUBLAS_CHECK(cublasLtCreate(&cx.lt));
  cx.topt = timing::flushed(50, 400, 3);
  if (cx.timed) {
    const ceilings::All ce = ceilings::measure_all();
    cx.copy_peak = ce.copy.best();
    cx.fp32_peak = ce.fma.tflops;
    for (const auto& [k, g] : ce.gemm) cx.tensor_peak[k] = g.tflops;
    ce.record(res);
  }
  auto want = [&](const char* p) { return only.empty() || only == p; };
  if (want("pointwise"))
    for (cudnnDataType_t dt : {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16})
      pointwise_chain(cx, pwd, dt, sms);
  if (want("conv")) {
    std::vector<ConvShape> shapes = {{1, 64, 56, 56, 64, 3, 3, 1, 1, 1}, {32, 64, 56, 56, 64, 3, 3, 1, 1, 1}};
    if (st.verify) shapes = {{2, 8, 13, 11, 16, 3, 3, 1, 1, 1}, {1, 16, 9, 10, 8, 3, 3, 1, 1, 1}};
    if (st.small) shapes.resize(1);
    for (const ConvShape& s : shapes) {
      conv_patterns(cx, s, CUDNN_DATA_FLOAT, false);
      conv_patterns(cx, s, CUDNN_DATA_HALF, true);
    }
  }
  if (want("matmul")) {
    const int M = st.verify ? 136 : 16384, N = st.verify ? 200 : 1536,
              K = st.verify ? 72 : 384;  // verify: not multiples of 64/128
    for (cudnnDataType_t dt : {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT}) matmul_bias_gelu(cx, M, N, K, dt, sms);
  }

  // The table, last.
  if (cx.timed && cx.patterns.size()) {
    std::printf("\n== fused vs unfused\n  %-26s %-6s %-34s %10s %10s %8s  %s\n", "pattern", "dtype", "shape",
                "fused us", "unfused us", "speedup", "engine (kind), plan build");
    for (const auto& l : cx.table)
      std::printf("  %-26s %-6s %-34s %10.1f %10.1f %7.2fx  %lld (%s), %.0f ms\n", l.pattern.c_str(), l.dtype.c_str(),
                  l.shape.c_str(), l.fused_ms * 1e3, l.unfused_ms * 1e3, l.unfused_ms / l.fused_ms, l.engine,
                  l.rtc ? "runtime-compiled" : "pre-compiled", l.build_ms);
  }
  // The plan cache at work: asking again for a graph that was built costs a map lookup, not a build.
  if (!cx.table.empty() || st.verify) {
    std::string why;
    const int builds = cx.plans.builds();
    const auto t0 = std::chrono::steady_clock::now();
    cg::Graph* again = plan(
        cx, cx.first_key,
        [&]() -> std::unique_ptr<cg::Graph> {
          std::fprintf(stderr, "error: the plan cache rebuilt a cached graph\n");
          std::exit(cli::kFail);
        },
        &why);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    verify::Check c;
    c.name = "plan cache returns the cached plan without rebuilding";
    c.passed = cx.plans.builds() == builds, c.n = 1, c.n_bad = c.passed ? 0 : 1;
    add_check(cx, c);
    if (again)
      std::printf("\nplan cache: \"%s\" requested again: %.1f us (its first build took %.0f ms)\n",
                  cx.first_key.c_str(), us, again->chosen().build_ms);
  }
  res.config["patterns"] = cx.patterns;
  res.config["engines"] = cx.engines;
  res.config["plan_cache"] = json::Value::object();
  res.config["plan_cache"]["requests"] = cx.plan_requests;
  res.config["plan_cache"]["builds"] = cx.plans.builds();
  std::printf("\nplan cache: %d graphs requested, %d built (each shape's plan is built once and reused)\n",
              cx.plan_requests, cx.plans.builds());
  CUBLAS_CHECK(cublasLtDestroy(cx.lt));
  CUBLAS_CHECK(cublasDestroy(cx.blas));
  CUDNN_CHECK(cudnnDestroy(cx.dnn));
  return res.finish(kProg, st.json);
}
