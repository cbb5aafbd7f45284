// day30_conv_vs_cudnn/conv_cudnn.cu: cuDNN's classic convolution API from first principles, and a
// fair contest between hand-written kernels and cuDNN's best algorithm.
//
// What it teaches, in the order the program runs:
//  1. Descriptors: a tensor, a filter and a convolution described to cuDNN, read back, with
//     the output size asked from cuDNN (NCHW and NHWC; fp32, fp16 and bf16 with fp32 accumulation).
//  2. The algorithm survey: for one problem, every forward algorithm as cuDNN's heuristic ranks
//     it (_v7: no GPU work) and as Find measures it; each one that runs is checked against the
//     CPU reference and re-timed with our harness; its workspace and status (NOT_SUPPORTED
//     included) are shown. The same for backward data and backward filter. Math types: FMA
//     (true fp32) against DEFAULT (cuDNN may use TF32 tensor cores) and what that does to accuracy.
//  3. The contest: our best kernel against cuDNN's best on (a) one channel, one 3x3 filter,
//     1024x2048 (memory-bound) and (b) multi-channel ResNet layers (compute-bound). Same inputs,
//     same cross-correlation, outputs compared before anything is timed.
//  4. What cuDNN refuses, and how a program should go on: a filter larger than the padded
//     input, algorithm/layout pairs that do not exist, workspaces larger than we may allocate.
//
// Kernels: day20's (../day20_conv_slow_fast/kernels, shared by include path, not copied) and
// kernels/8_strip_tuned.cuh (day20's register strip, generalized and autotuned for case (a)).
//
// Build and run
//   make                       # in this folder
//   make run                   # the survey, the contest and the refusals on the default shapes
//   ./build/conv_cudnn --verify            # every algorithm and kernel checked on odd shapes; no timing
//   ./build/conv_cudnn --bench --json ../results/{gpu}/day30_conv_vs_cudnn.json
//   ./build/conv_cudnn --conv 8,32,28,28,64,3,3,1,1,1   # survey one more shape: N,C,H,W,K,R,S,pad,stride,dil
//   ./build/conv_cudnn --workspace-mib 0               # what cuDNN can do with no workspace at all
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ceilings.cuh"
#include "check.cuh"
#include "cli.h"
#include "conv_shape.h"
#include "cudnn_conv.cuh"
#include "env.cuh"
#include "host_tensor.cuh"
#include "results.h"
#include "timing.cuh"
#include "verify.h"

// day20's kernels, reused through the include path (-I../day20_conv_slow_fast).
#include "kernels/4_direct_multi.cuh"
#include "kernels/5_im2col_gemm.cuh"
#include "kernels/6_implicit_gemm.cuh"
#include "kernels/7_winograd.cuh"
// This lesson's own.
#include "kernels/8_strip_tuned.cuh"

static const char* kProg = "conv_cudnn";

// Nothing at all: timed like everything else, it is the fixed cost of one launch in this harness.
__global__ void empty_kernel() {}

using dnn::Dir;

// One way of handing data to cuDNN: element type, memory layout, math type.
struct Config {
  cudnnDataType_t dt;
  cudnnTensorFormat_t fmt;
  cudnnMathType_t math;
};

static const Config kFp32Fma{CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH};
static const Config kFp32Default{CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_DEFAULT_MATH};
static const Config kFp32Nhwc{CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, CUDNN_FMA_MATH};
static const Config kFp16Nhwc{CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH};
static const Config kBf16Nhwc{CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH};

static std::string config_name(const Config& c) {
  return std::string(dnn::dtype_name(c.dt)) + " " + dnn::layout_name(c.fmt) + " " + dnn::math_name(c.math);
}

// The tolerance for a result of `len`-long dot products: by storage precision, and TF32 where
// cuDNN may use it (DEFAULT math on fp32 data).
static verify::Tol tol_for(const Config& c, double len) {
  const verify::Tol base = c.dt == CUDNN_DATA_HALF       ? verify::kFp16
                           : c.dt == CUDNN_DATA_BFLOAT16 ? verify::kBf16
                           : c.math == CUDNN_FMA_MATH    ? verify::kFp32
                                                         : verify::kTf32;
  return base.scaled(std::sqrt(len));
}

// ---- Host data in the three element types and two layouts (common/host_tensor.cuh) -----------

using ht::Dims;
using ht::round_to;
static DeviceBuffer upload(const std::vector<float>& nchw, Dims d, const Config& c) {
  return ht::upload(nchw, d, c.dt, c.fmt == CUDNN_TENSOR_NHWC);
}
static std::vector<float> download(const DeviceBuffer& buf, Dims d, const Config& c) {
  return ht::download(buf, d, c.dt, c.fmt == CUDNN_TENSOR_NHWC);
}

// ---- The program's shared state --------------------------------------------------------------------

struct Ctx {
  cudnnHandle_t dnn = nullptr;
  cublasHandle_t blas = nullptr;
  results::Results* res = nullptr;
  verify::Rng* rng = nullptr;
  bool timed = false;  // false in --verify
  timing::Options topt;
  size_t ws_limit = 0;  // the most workspace we offer cuDNN (--workspace-mib)
  dnn::Workspace ws;
  double fp32_peak = NAN, copy_peak = NAN;
  std::map<std::string, double> tensor_peak;  // "fp16", "bf16", "tf32" -> TFLOP/s (cuBLAS GEMM)
  json::Value survey = json::Value::array(), contest = json::Value::array(), refusals = json::Value::array(),
              descriptors = json::Value::array();
  struct ContestRow {
    std::string label, shape, custom, cudnn, winner;
    double custom_ms, cudnn_ms, speedup;
  };
  std::vector<ContestRow> table;
};

// "a, b, c"
static void append(std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; }

static std::vector<long long> shape_vec(const ConvShape& s) {
  return {s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.pad, s.stride, s.dil};
}

// ---- 1. Descriptors, read back -------------------------------------------------------------------

// Builds the descriptors of one problem and prints what cuDNN stored: the element type, the
// sizes and the strides (which is all "layout" means: NHWC is NCHW with other strides).
static void show_descriptors(Ctx& cx, const ConvShape& s, const Config& c) {
  dnn::ConvDesc d(s, c.dt, c.fmt, c.math);
  std::printf("  %s, %s:\n", s.str().c_str(), config_name(c).c_str());
  if (!d.ok()) {
    std::printf("    cuDNN refused it: %s\n", d.error.c_str());
    return;
  }
  json::Value j = json::Value::object();
  j["shape"] = s.str();
  j["config"] = config_name(c);
  for (auto [name, desc] : {std::pair<const char*, cudnnTensorDescriptor_t>{"x", d.x}, {"y", d.y}}) {
    cudnnDataType_t t;
    int n, ch, h, w, sn, sc, sh, sw;
    CUDNN_CHECK(cudnnGetTensor4dDescriptor(desc, &t, &n, &ch, &h, &w, &sn, &sc, &sh, &sw));
    std::printf("    %s: %s  dims N=%d C=%d H=%d W=%d  strides %d,%d,%d,%d (elements)\n", name, dnn::dtype_name(t), n,
                ch, h, w, sn, sc, sh, sw);
    json::Value dims = json::Value::array();
    for (int v : {n, ch, h, w, sn, sc, sh, sw}) dims.push(v);
    j[name] = dims;
  }
  int pad_h, pad_w, u, v, dh, dw;
  cudnnConvolutionMode_t mode;
  cudnnDataType_t ct;
  CUDNN_CHECK(cudnnGetConvolution2dDescriptor(d.conv, &pad_h, &pad_w, &u, &v, &dh, &dw, &mode, &ct));
  std::printf(
      "    conv: pad %d,%d stride %d,%d dilation %d,%d %s, compute type %s; output from "
      "cudnnGetConvolution2dForwardOutputDim: %dx%dx%dx%d\n",
      pad_h, pad_w, u, v, dh, dw, mode == CUDNN_CROSS_CORRELATION ? "CROSS_CORRELATION" : "CONVOLUTION",
      dnn::dtype_name(ct), s.N, s.K, s.P(), s.Q());
  cx.descriptors.push(j);
}

// ---- 2. The survey: every algorithm of one direction ---------------------------------------------

// The tensors of one direction: operands (a, b) and result, with their dims.
struct DirTensors {
  Dims a, b, out;
  double reduction;  // length of each output's dot product
};
static DirTensors tensors_of(const ConvShape& s, Dir dir) {
  const Dims x{s.N, s.C, s.H, s.W}, w{s.K, s.C, s.R, s.S}, y{s.N, s.K, s.P(), s.Q()};
  if (dir == Dir::Fwd) return {x, w, y, double(s.C) * s.R * s.S};
  if (dir == Dir::BwdData) return {w, y, x, double(s.K) * s.R * s.S};
  return {x, y, w, double(s.N) * s.P() * s.Q()};
}

// The CPU reference at `idx` (flat NCHW indices of the result).
static std::vector<double> reference(const ConvShape& s, Dir dir, const std::vector<float>& a,
                                     const std::vector<float>& b, const std::vector<size_t>& idx) {
  if (dir == Dir::BwdData) return ref::bwd_data_sampled(s, b.data(), a.data(), idx);
  if (dir == Dir::BwdFilter) return ref::bwd_filter_sampled(s, a.data(), b.data(), idx);
  const int P = s.P(), Q = s.Q();
  return ref::eval_at(idx, [&](size_t f) {
    const ref::Idx4 i = ref::unflatten(f, s.K, P, Q);
    return ref::conv_at(s, a.data(), b.data(), i.a, i.b, i.c, i.d);
  });
}

static double peak_for(const Ctx& cx, const Config& c, std::string* what) {
  if (c.dt == CUDNN_DATA_FLOAT && c.math == CUDNN_FMA_MATH) {
    *what = "measured FP32 FMA ceiling";
    return cx.fp32_peak;
  }
  const std::string key = c.dt == CUDNN_DATA_HALF ? "fp16" : c.dt == CUDNN_DATA_BFLOAT16 ? "bf16" : "tf32";
  *what = "measured cuBLAS " + key + " GEMM (n=8192)";
  auto it = cx.tensor_peak.find(key);
  return it == cx.tensor_peak.end() ? NAN : it->second;
}

static void survey(Ctx& cx, const ConvShape& s, const Config& c, Dir dir) {
  const std::string title = std::string(dnn::dir_name(dir)) + " " + config_name(c) + " " + s.str();
  std::printf("\n== %s\n", title.c_str());
  dnn::ConvDesc d(s, c.dt, c.fmt, c.math);
  json::Value row = json::Value::object();
  row["direction"] = dnn::dir_name(dir);
  row["config"] = config_name(c);
  row["shape"] = s.str();
  if (!d.ok()) {
    std::printf("  cuDNN refused the descriptors: %s (skipped; going on)\n", d.error.c_str());
    row["refused"] = d.error;
    cx.survey.push(row);
    return;
  }
  // Fresh random operands, rounded to the storage type; the reference at sampled indices.
  const DirTensors t = tensors_of(s, dir);
  std::vector<float> ha(t.a.count()), hb(t.b.count());
  verify::fill_uniform(ha, *cx.rng);
  verify::fill_uniform(hb, *cx.rng);
  round_to(ha, c.dt);
  round_to(hb, c.dt);
  const double cost = t.reduction;  // multiply-adds per result
  const size_t total = t.out.count();
  const size_t count =
      double(total) * cost <= 3e8 ? total : std::min<size_t>(4096, std::max<size_t>(512, size_t(3e8 / cost)));
  const std::vector<size_t> idx = ref::sample_indices(total, count, cx.rng->next());
  const std::vector<double> want = reference(s, dir, ha, hb, idx);
  const verify::Tol tol = tol_for(c, t.reduction);

  DeviceBuffer a = upload(ha, t.a, c), b = upload(hb, t.b, c), out(total * dnn::dtype_bytes(c.dt));
  const dnn::Operands ops{a.as(), b.as(), out.as()};

  // The heuristic's ranking (instant), then Find's (runs each algorithm once).
  const std::vector<dnn::AlgoPerf> heur = dnn::heuristic(cx.dnn, d, dir);
  size_t offer = 0;
  for (const auto& h : heur)
    if (h.ok() && h.workspace <= cx.ws_limit) offer = std::max(offer, h.workspace);
  void* wsp = offer ? cx.ws.get(offer) : nullptr;
  poison(out.as(), out.bytes());
  const std::vector<dnn::AlgoPerf> found = dnn::find(cx.dnn, d, dir, ops, wsp, offer);

  // Every algorithm that ran: its output checked against the CPU reference.
  struct Line {
    std::string name;
    int heur_rank = -1, find_rank = -1;
    const dnn::AlgoPerf* f = nullptr;
    std::string status;
    verify::Check check;
    bool checked = false;
    timing::Stats t;
    bool timed = false;
  };
  // One line per entry of Find's list (cuDNN may list an algorithm twice, once per math type),
  // then the algorithms only the heuristic mentioned.
  std::vector<Line> lines;
  auto heur_rank_of = [&](int algo, cudnnMathType_t math, bool match_math) {
    for (const auto& h : heur)
      if (h.algo == algo && (!match_math || h.math == math)) return h.rank;
    return -1;
  };
  for (const auto& f : found) {
    Line l;
    l.name = f.name;
    l.f = &f;
    l.find_rank = f.rank;
    l.heur_rank = heur_rank_of(f.algo, f.math, true);
    if (l.heur_rank < 0) l.heur_rank = heur_rank_of(f.algo, f.math, false);
    if (!f.ok()) {
      size_t need = 0;
      const bool sized = dnn::workspace_size(cx.dnn, d, dir, f.algo, &need) == CUDNN_STATUS_SUCCESS;
      l.status = std::string(cudnnGetErrorString(f.status)) +
                 (sized && need > offer ? " (needs " + std::to_string(need >> 20) + " MiB workspace, offered " +
                                              std::to_string(offer >> 20) + " MiB)"
                                        : "");
    } else {
      poison(out.as(), out.bytes());
      const cudnnStatus_t st = dnn::run(cx.dnn, d, dir, f.algo, f.math, ops, wsp, f.workspace);
      CUDA_CHECK(cudaDeviceSynchronize());
      if (st != CUDNN_STATUS_SUCCESS) {
        l.status = "run failed: " + dnn::status_text(st);
      } else {
        // Winograd and FFT compute in a transformed domain, where rounding grows with the tile:
        // they get the TF32-sized tolerance even in FMA math (their errors are in the table).
        const bool transform = l.name.find("WINOGRAD") != std::string::npos || l.name.find("FFT") != std::string::npos;
        verify::Tol tl = tol;
        if (transform && c.dt == CUDNN_DATA_FLOAT && c.math == CUDNN_FMA_MATH)
          tl = verify::kTf32.scaled(std::sqrt(t.reduction)), tl.precision = "fp32 transform-domain";
        l.check = verify::compare_at(title + " " + l.name + " " + dnn::math_name(f.math) + " vs CPU",
                                     download(out, t.out, c), idx, want, tl);
        l.checked = true;
        cx.res->add_quiet(l.check);
        if (!l.check.passed) verify::print(l.check);
      }
    }
    lines.push_back(l);
  }
  for (const auto& h : heur) {
    bool listed = false;
    for (const auto& f : found) listed = listed || f.algo == h.algo;
    if (listed) continue;
    Line l;
    l.name = h.name;
    l.heur_rank = h.rank;
    l.status = h.ok() ? "not run by Find" : cudnnGetErrorString(h.status);
    lines.push_back(l);
  }
  std::stable_sort(lines.begin(), lines.end(), [&](const Line& a, const Line& b) {
    const int ia = a.f ? a.f->algo : 99, ib = b.f ? b.f->algo : 99;
    return ia < ib;
  });

  // Re-time every algorithm that ran (cuDNN's Find ran each only once).
  double best_ms = NAN;
  if (cx.timed) {
    const std::vector<dnn::Timed> timed = dnn::retime(cx.dnn, d, dir, found, ops, cx.ws, offer, cx.topt);
    for (auto& l : lines)
      for (const auto& tm : timed)
        if (l.f && tm.algo.rank == l.f->rank) l.t = tm.t, l.timed = true;
    if (!timed.empty()) best_ms = timed.front().t.median_ms;
    // The fastest, run once more and checked again (the timing loop reused its buffers).
    if (!timed.empty()) {
      poison(out.as(), out.bytes());
      const dnn::AlgoPerf& f = timed.front().algo;
      CUDNN_CHECK(dnn::run(cx.dnn, d, dir, f.algo, f.math, ops, wsp, f.workspace));
      cx.res->add_quiet(
          verify::compare_at(title + " fastest " + f.name + " after timing", download(out, t.out, c), idx, want, tol));
    }
  }

  // The table.
  std::string peak_name;
  const double peak = peak_for(cx, c, &peak_name);
  const double flops = s.flops();  // the same 2*N*K*P*Q*C*R*S for all three directions
  std::printf("  %-22s %5s %5s %10s %10s %9s %8s %-10s %s\n", "algorithm", "heur#", "find#", "Find us", "ours us",
              "TFLOP/s", "ws MiB", "math", "status / check against the CPU");
  json::Value algos = json::Value::array();
  for (const auto& l : lines) {
    const bool ran = l.f && l.f->ok();
    char find_us[32] = "-", our_us[32] = "-", rate[32] = "-", ws[32] = "-";
    if (ran) std::snprintf(find_us, sizeof find_us, "%.1f", l.f->ms * 1e3);
    if (l.timed) std::snprintf(our_us, sizeof our_us, "%.1f", l.t.median_ms * 1e3);
    if (l.timed) std::snprintf(rate, sizeof rate, "%.2f", flops / (l.t.median_ms * 1e-3) / 1e12);
    if (ran) std::snprintf(ws, sizeof ws, "%.1f", l.f->workspace / 1048576.0);
    std::string verdict = l.status;
    if (l.checked) {
      char b[96];
      std::snprintf(b, sizeof b, "%s rel_l2 %.1e max_abs %.1e", l.check.passed ? "PASS" : "FAIL", l.check.rel_l2,
                    l.check.max_abs_err);
      verdict = b;
    }
    std::printf("  %-22s %5s %5s %10s %10s %9s %8s %-10s %s\n", l.name.c_str(),
                l.heur_rank < 0 ? "-" : std::to_string(l.heur_rank).c_str(),
                l.find_rank < 0 ? "-" : std::to_string(l.find_rank).c_str(), find_us, our_us, rate, ws,
                ran ? dnn::math_name(l.f->math) : "-", verdict.c_str());
    json::Value j = json::Value::object();
    j["algo"] = l.name;
    j["heuristic_rank"] = l.heur_rank;
    j["find_rank"] = l.find_rank;
    j["find_ms"] = ran ? json::Value(double(l.f->ms)) : json::Value();
    j["ms"] = l.timed ? json::Value(l.t.median_ms) : json::Value();
    j["workspace_bytes"] = ran ? json::Value((long long)l.f->workspace) : json::Value();
    j["math"] = ran ? dnn::math_name(l.f->math) : "";
    j["status"] = l.checked ? (l.check.passed ? "PASS" : "FAIL") : l.status;
    if (l.checked) j["rel_l2"] = l.check.rel_l2, j["max_abs_err"] = l.check.max_abs_err;
    algos.push(j);
    if (l.timed) {
      results::Bench r;
      r.name = std::string(dir == Dir::Fwd       ? "fwd"
                           : dir == Dir::BwdData ? "bwd_data"
                                                 : "bwd_filter") +
               " " + config_name(c) + " " + l.name + " [" + dnn::math_name(l.f->math) + "]";
      r.dtype = dnn::dtype_name(c.dt);
      r.shape = shape_vec(s);
      r.ms = l.t.median_ms, r.min_ms = l.t.min_ms, r.max_ms = l.t.max_ms, r.reps = l.t.reps;
      r.tflops = flops / (l.t.median_ms * 1e-3) / 1e12;
      r.peak = peak, r.peak_name = peak_name;
      r.ref = "fastest cuDNN algorithm, same direction and config", r.ref_ms = best_ms;
      r.extra = j;
      cx.res->add(r);
    }
  }
  if (cx.timed && std::isfinite(best_ms))
    std::printf("  fastest: %.1f us = %.1f TFLOP/s = %.0f%% of the %s (%.1f TFLOP/s)\n", best_ms * 1e3,
                flops / (best_ms * 1e-3) / 1e12, 100.0 * flops / (best_ms * 1e-3) / 1e12 / peak, peak_name.c_str(),
                peak);
  row["algorithms"] = algos;
  row["workspace_offered_bytes"] = (long long)offer;
  row["checked_elements"] = (long long)idx.size();
  cx.survey.push(row);
}

// ---- 3. The contest ------------------------------------------------------------------------------

struct Custom {
  std::string name;
  std::function<bool(const ConvShape&, std::string*)> supports;
  std::function<void(const ConvShape&, const float*)> prepare;  // once per shape and filter, not timed (as in day20)
  std::function<void(const ConvShape&, const float*, const float*, float*, cudaStream_t)> run;  // (x, w, y)
};

// The hand-written contenders. Case (a): the single-channel kernels (day20's 3b and this lesson's
// tuned 8, at every configuration the autotuner tries). Case (b): day20's multi-channel kernels.
static std::vector<Custom> contenders(Ctx& cx, DeviceBuffer& cws) {
  std::vector<Custom> v;
  auto single = [&](std::string name, int V, void (*fn)(const ConvShape&, const float*, float*, cudaStream_t)) {
    v.push_back(
        {name, [V](const ConvShape& s, std::string* why) { return supports_08(s, V, why); },
         [](const ConvShape& s, const float* w) { set_03_filter(s, w); },  // the filter into constant memory
         [fn](const ConvShape& s, const float* x, const float*, float* y, cudaStream_t st) { fn(s, x, y, st); }});
  };
  single("03b_strip 4 cols x 4 rows (day20)", 1, run_03b_strip<4>);
  // V float4 per row, R rows per thread, B threads per block, M blocks per SM at least
  // (register cap), "stream": read-only loads and evict-first stores.
  single("08_strip V1 R4 B128 M4", 1, run_08_strip<1, 4, 128, 4, false>);
  single("08_strip V1 R4 B128 M8", 1, run_08_strip<1, 4, 128, 8, false>);
  single("08_strip V1 R4 B256 M4", 1, run_08_strip<1, 4, 256, 4, false>);
  single("08_strip V1 R2 B128 M8", 1, run_08_strip<1, 2, 128, 8, false>);
  single("08_strip V1 R2 B256 M8", 1, run_08_strip<1, 2, 256, 8, false>);
  single("08_strip V1 R8 B128 M4", 1, run_08_strip<1, 8, 128, 4, false>);
  single("08_strip V2 R2 B64 M8", 2, run_08_strip<2, 2, 64, 8, false>);
  single("08_strip V2 R2 B128 M4", 2, run_08_strip<2, 2, 128, 4, false>);
  single("08_strip V2 R4 B64 M8", 2, run_08_strip<2, 4, 64, 8, false>);
  single("08_strip V1 R4 B128 M4 stream", 1, run_08_strip<1, 4, 128, 4, true>);
  single("08_strip V1 R4 B128 M8 stream", 1, run_08_strip<1, 4, 128, 8, true>);
  single("08_strip V1 R2 B128 M8 stream", 1, run_08_strip<1, 2, 128, 8, true>);
  single("08_strip V2 R2 B128 M4 stream", 2, run_08_strip<2, 2, 128, 4, true>);
  auto none = [](const ConvShape&, const float*) {};
  v.push_back({"04_direct (day20)", [](const ConvShape& s, std::string* why) { return supports_04(s, why); }, none,
               [](const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
                 run_04_direct(s, x, w, y, st);
               }});
  v.push_back({"05_im2col_cublas (day20)",
               [&cws](const ConvShape& s, std::string* why) {
                 if (im2col_bytes(s) <= cws.bytes()) return true;
                 *why =
                     "im2col needs " + std::to_string(im2col_bytes(s) >> 20) + " MiB, more than the workspace we allow";
                 return false;
               },
               none,
               [&cx, &cws](const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
                 run_05_im2col(cx.blas, s, x, w, y, cws.as<float>(), st);
               }});
  v.push_back({"06_implicit_gemm (day20)", [](const ConvShape& s, std::string* why) { return supports_06(s, why); },
               [](const ConvShape& s, const float*) { set_06_table(s); },  // the gather offsets, per shape
               [](const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
                 run_06_implicit_gemm(s, x, w, y, st);
               }});
  v.push_back({"07_winograd (day20)",
               [&cws](const ConvShape& s, std::string* why) {
                 if (!supports_07(s, why)) return false;
                 if (wino::workspace_bytes(s) <= cws.bytes()) return true;
                 *why = "Winograd needs more workspace than we allow";
                 return false;
               },
               none,
               [&cx, &cws](const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
                 run_07_winograd(cx.blas, s, x, w, y, cws.as<float>(), st);
               }});
  return v;
}

// One contest case: every contender that supports the shape is checked against the CPU and
// against cuDNN's output (same inputs) before any timing; then cuDNN's best (every algorithm
// re-timed, both layouts where they hold the same bytes) and each contender are timed.
static void contest(Ctx& cx, const std::string& label, const ConvShape& s, std::vector<Custom>& cands) {
  const bool memory_bound = s.C == 1 && s.K == 1;
  std::printf("\n== contest %s: %s (%.2f GFLOP, at least %.1f MB moved)\n", label.c_str(), s.str().c_str(),
              s.flops() / 1e9, s.min_bytes() / 1e6);
  std::vector<float> hx(s.x_elems()), hw(s.w_elems());
  verify::fill_uniform(hx, *cx.rng);
  verify::fill_uniform(hw, *cx.rng);
  const Dims dy{s.N, s.K, s.P(), s.Q()};
  DeviceBuffer x = upload(hx, {s.N, s.C, s.H, s.W}, kFp32Fma), w = upload(hw, {s.K, s.C, s.R, s.S}, kFp32Fma),
               y(dy.count() * 4), yd(dy.count() * 4);
  const double macs = double(dy.count()) * s.C * s.R * s.S;
  const std::vector<size_t> idx = ref::sample_indices(dy.count(), macs <= 3e8 ? dy.count() : 4096, cx.rng->next());
  const std::vector<double> want = reference(s, Dir::Fwd, hx, hw, idx);
  const verify::Tol tol = tol_for(kFp32Fma, double(s.C) * s.R * s.S);

  // cuDNN: fp32 with FMA math (the same arithmetic as ours). When C = K = 1, NCHW and NHWC
  // are the same bytes, so cuDNN may also use its NHWC kernels: it gets its best of both.
  std::vector<Config> cfgs = {kFp32Fma};
  if (s.C == 1 && s.K == 1) cfgs.push_back(kFp32Nhwc);
  const dnn::Operands ops{x.as(), w.as(), yd.as()};
  dnn::Timed best{};
  best.t.median_ms = INFINITY;
  Config best_cfg = kFp32Fma;
  json::Value cudnn_all = json::Value::array();
  for (const Config& c : cfgs) {
    dnn::ConvDesc d(s, c.dt, c.fmt, c.math);
    if (!d.ok()) {
      std::printf("  cuDNN %s refused: %s\n", config_name(c).c_str(), d.error.c_str());
      continue;
    }
    size_t offer = 0;
    for (const auto& h : dnn::heuristic(cx.dnn, d, Dir::Fwd))
      if (h.ok() && h.workspace <= cx.ws_limit) offer = std::max(offer, h.workspace);
    const std::vector<dnn::AlgoPerf> found =
        dnn::find(cx.dnn, d, Dir::Fwd, ops, offer ? cx.ws.get(offer) : nullptr, offer);
    // Every algorithm that ran must be right, not only the winner.
    for (const auto& f : found) {
      if (!f.ok()) continue;
      poison(yd.as(), yd.bytes());
      CUDNN_CHECK(dnn::run(cx.dnn, d, Dir::Fwd, f.algo, f.math, ops, f.workspace ? cx.ws.get(f.workspace) : nullptr,
                           f.workspace));
      cx.res->add_quiet(verify::compare_at("contest " + label + " cuDNN " + config_name(c) + " " + f.name,
                                           download(yd, dy, kFp32Fma), idx, want, tol));
    }
    if (!cx.timed) continue;
    for (const auto& tm : dnn::retime(cx.dnn, d, Dir::Fwd, found, ops, cx.ws, offer, cx.topt)) {
      json::Value j = json::Value::object();
      j["algo"] = tm.algo.name;
      j["config"] = config_name(c);
      j["ms"] = tm.t.median_ms;
      cudnn_all.push(j);
      if (tm.t.median_ms < best.t.median_ms) best = tm, best_cfg = c;
    }
  }
  // cuDNN's output (its best algorithm when timed, else Find's first) is the second reference.
  std::vector<float> ycudnn;
  {
    dnn::ConvDesc d(s, best_cfg.dt, best_cfg.fmt, best_cfg.math);
    int algo = best.algo.algo;
    cudnnMathType_t math = best.algo.math;
    size_t wsb = best.algo.workspace;
    if (!cx.timed) {
      const auto found = dnn::find(cx.dnn, d, Dir::Fwd, ops, cx.ws.get(cx.ws.bytes()), cx.ws.bytes());
      algo = found.front().algo, math = found.front().math, wsb = found.front().workspace;
    }
    poison(yd.as(), yd.bytes());
    CUDNN_CHECK(dnn::run(cx.dnn, d, Dir::Fwd, algo, math, ops, wsb ? cx.ws.get(wsb) : nullptr, wsb));
    CUDA_CHECK(cudaDeviceSynchronize());
    ycudnn = download(yd, dy, kFp32Fma);
  }

  // Each contender: supported? right (vs CPU and vs cuDNN)? then timed and re-checked.
  struct Entry {
    const Custom* c;
    timing::Stats t;
  };
  std::vector<Entry> entries;
  for (const Custom& c : cands) {
    std::string why;
    if (!c.supports(s, &why)) continue;
    c.prepare(s, w.as<float>());
    poison(y.as(), y.bytes());
    c.run(s, x.as<float>(), w.as<float>(), y.as<float>(), 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> out = to_host(y.as<float>(), dy.count());
    const verify::Check v1 = verify::compare_at("contest " + label + " " + c.name + " vs CPU", out, idx, want, tol);
    const verify::Check v2 =
        verify::compare("contest " + label + " " + c.name + " vs cuDNN", out.data(), ycudnn.data(), out.size(), tol);
    cx.res->add_quiet(v1);
    cx.res->add_quiet(v2);
    if (!v1.passed) verify::print(v1);
    if (!v2.passed) verify::print(v2);
    if (!v1.passed || !v2.passed || !cx.timed) continue;
    entries.push_back(
        {&c, timing::time_gpu([&] { c.run(s, x.as<float>(), w.as<float>(), y.as<float>(), 0); }, cx.topt)});
    const verify::Check v3 = verify::compare("contest " + label + " " + c.name + " after timing vs cuDNN",
                                             to_host(y.as<float>(), dy.count()).data(), ycudnn.data(), dy.count(), tol);
    cx.res->add_quiet(v3);
    if (!v3.passed) verify::print(v3);
  }
  std::printf(
      "  checked: %zu contenders and every cuDNN algorithm that ran, against the CPU (%zu outputs) and each other\n",
      entries.size(), idx.size());
  if (!cx.timed || entries.empty() || !std::isfinite(best.t.median_ms)) return;

  // The floors of a memory-bound case: the fewest bytes at the measured copy bandwidth, and a
  // cudaMemcpy of the same bytes (the same launch and drain costs, no arithmetic).
  double floor_ms = NAN, memcpy_ms = NAN, launch_ms = NAN;
  if (memory_bound) {
    launch_ms = timing::time_gpu(
                    [&] {
                      empty_kernel<<<1, 32>>>();
                      LAUNCH_CHECK();
                    },
                    cx.topt)
                    .median_ms;
    floor_ms = s.min_bytes() / (cx.copy_peak * 1e9) * 1e3;
    memcpy_ms =
        timing::time_gpu(
            [&] {
              CUDA_CHECK(cudaMemcpyAsync(y.as(), x.as(), std::min(x.bytes(), y.bytes()), cudaMemcpyDeviceToDevice, 0));
            },
            cx.topt)
            .median_ms;
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.t.median_ms < b.t.median_ms; });
  auto bench_row = [&](const std::string& name, const timing::Stats& t, json::Value extra) {
    results::Bench r;
    r.name = "contest " + label + " " + name;
    r.dtype = "fp32";
    r.shape = shape_vec(s);
    r.ms = t.median_ms, r.min_ms = t.min_ms, r.max_ms = t.max_ms, r.reps = t.reps;
    if (memory_bound)
      r.gbps = s.min_bytes() / (t.median_ms * 1e-3) / 1e9, r.peak = cx.copy_peak,
      r.peak_name = "measured copy bandwidth";
    else
      r.tflops = s.flops() / (t.median_ms * 1e-3) / 1e12, r.peak = cx.fp32_peak,
      r.peak_name = "measured FP32 FMA ceiling";
    r.ref = "cuDNN best (" + config_name(best_cfg) + " " + best.algo.name + ")";
    r.ref_ms = best.t.median_ms;
    r.extra = extra;
    cx.res->add(r);
    return r;
  };
  std::printf("  %-36s %10s %10s %10s %10s\n", "", "time us", memory_bound ? "GB/s" : "TFLOP/s", "vs cuDNN",
              "% of peak");
  auto print_row = [&](const results::Bench& r) {
    std::printf("  %-36s %10.1f %10.1f %9.2fx %9.1f%%\n", r.name.substr(r.name.find(label) + label.size() + 1).c_str(),
                r.ms * 1e3, r.rate(), r.ref_ms / r.ms, r.pct_of_peak());
  };
  json::Value ce = json::Value::object();
  ce["algo"] = best.algo.name;
  ce["config"] = config_name(best_cfg);
  ce["workspace_bytes"] = (long long)best.algo.workspace;
  ce["all_retimed"] = cudnn_all;
  print_row(bench_row("cudnn_best [" + best.algo.name + ", " + dnn::layout_name(best_cfg.fmt) + "]", best.t, ce));
  if (memory_bound) {
    timing::Stats tm{};
    tm.median_ms = tm.min_ms = tm.max_ms = memcpy_ms;
    json::Value e = json::Value::object();
    e["note"] = "cudaMemcpy of x into y: the same bytes, nothing computed";
    print_row(bench_row("copy_floor [cudaMemcpy same bytes]", tm, e));
    tm.median_ms = tm.min_ms = tm.max_ms = launch_ms;
    e["note"] = "an empty kernel: the fixed cost of one launch, timed the same way";
    print_row(bench_row("launch_floor [empty kernel]", tm, e));
  }
  for (const Entry& e : entries) print_row(bench_row(e.c->name, e.t, json::Value::object()));
  const Entry& win = entries.front();
  const double speedup = best.t.median_ms / win.t.median_ms;
  const char* winner = speedup > 1.0 ? "custom" : "cuDNN";
  std::printf("  => %s wins: our best (%s) %.1f us, cuDNN's best (%s) %.1f us: %.2fx\n", winner, win.c->name.c_str(),
              win.t.median_ms * 1e3, best.algo.name.c_str(), best.t.median_ms * 1e3,
              speedup > 1 ? speedup : 1 / speedup);
  json::Value j = json::Value::object();
  j["case"] = label;
  j["shape"] = s.str();
  j["custom"] = win.c->name;
  j["custom_ms"] = win.t.median_ms;
  j["cudnn"] = best.algo.name + " (" + config_name(best_cfg) + ")";
  j["cudnn_ms"] = best.t.median_ms;
  j["winner"] = winner;
  j["custom_speedup"] = speedup;
  if (memory_bound) {
    j["floor_ms"] = floor_ms;
    j["memcpy_same_bytes_ms"] = memcpy_ms;
    j["empty_kernel_ms"] = launch_ms;
    j["custom_pct_of_floor"] = 100.0 * floor_ms / win.t.median_ms;
    j["custom_pct_of_memcpy"] = 100.0 * memcpy_ms / win.t.median_ms;
    std::printf(
        "     memory floor (fewest bytes at the measured %.0f GB/s): %.1f us -> our best is at %.0f%% of it; "
        "a cudaMemcpy of the same bytes takes %.1f us (%.0f%%); an empty kernel %.1f us\n",
        cx.copy_peak, floor_ms * 1e3, 100.0 * floor_ms / win.t.median_ms, memcpy_ms * 1e3,
        100.0 * memcpy_ms / win.t.median_ms, launch_ms * 1e3);
  }
  cx.contest.push(j);
  cx.table.push_back({label, s.str(), win.c->name, best.algo.name + " (" + dnn::layout_name(best_cfg.fmt) + ")", winner,
                      win.t.median_ms, best.t.median_ms, speedup});
}

// ---- 4. What cuDNN refuses ----------------------------------------------------------------------

static void refusals(Ctx& cx) {
  std::printf("\n== what cuDNN refuses (each reported, then the program goes on)\n");
  auto note = [&](const std::string& what, const std::string& outcome) {
    std::printf("  %-58s -> %s\n", what.c_str(), outcome.c_str());
    json::Value j = json::Value::object();
    j["case"] = what;
    j["outcome"] = outcome;
    cx.refusals.push(j);
  };
  // (1) A 7x7 filter on a 4x4 input with no padding: there is no output position.
  {
    const ConvShape s{1, 1, 4, 4, 1, 7, 7, 0, 1, 1};
    dnn::ConvDesc d(s, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
    note("7x7 filter on a 4x4 input, no padding", d.ok() ? "accepted (unexpected)" : d.error);
    verify::Check c;
    c.name = "cuDNN refuses a filter larger than the padded input";
    c.passed = !d.ok();
    c.n = 1;
    c.n_bad = d.ok();
    c.note = d.ok() ? "cuDNN accepted it" : d.error;
    cx.res->add(c);
  }
  // (2) Algorithm / layout / type pairs that do not exist: ask each forward algorithm for its
  // workspace on fp16 NHWC with a 7x7 stride-2 filter. NOT_SUPPORTED is an answer, not a crash.
  {
    const ConvShape s{2, 3, 32, 32, 8, 7, 7, 3, 2, 1};
    dnn::ConvDesc d(s, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH);
    if (!d.ok()) {
      note("fp16 NHWC 7x7 stride 2", "descriptors refused: " + d.error);
    } else {
      std::string yes, no;
      for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
        size_t b = 0;
        const cudnnStatus_t st = dnn::workspace_size(cx.dnn, d, Dir::Fwd, a, &b);
        if (st == CUDNN_STATUS_SUCCESS)
          append(yes, dnn::algo_name(Dir::Fwd, a));
        else
          append(no, std::string(dnn::algo_name(Dir::Fwd, a)) + " (" + cudnnGetErrorString(st) + ")");
      }
      note("forward algorithms on fp16 NHWC, 7x7 stride 2: supported", yes.empty() ? "none" : yes);
      note("forward algorithms on fp16 NHWC, 7x7 stride 2: refused", no.empty() ? "none" : no);
      // Running one that was refused: the call returns the status; nothing is launched.
      DeviceBuffer x(size_t(s.x_elems()) * 2), w(size_t(s.w_elems()) * 2), y(size_t(s.y_elems()) * 2);
      const cudnnStatus_t st = dnn::run(cx.dnn, d, Dir::Fwd, CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_TENSOR_OP_MATH,
                                        {x.as(), w.as(), y.as()}, nullptr, 0);
      note("cudnnConvolutionForward with FFT on it anyway",
           st == CUDNN_STATUS_SUCCESS ? "ran (unexpected)" : dnn::status_text(st));
    }
  }
  // (3) Workspace beyond what we may allocate: each algorithm's request against free memory,
  // and Find offered only 1 MiB, so the algorithms that need more come back marked as such.
  {
    const ConvShape s{8, 64, 56, 56, 64, 3, 3, 1, 1, 1};
    dnn::ConvDesc d(s, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    std::string reqs;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      size_t b = 0;
      if (dnn::workspace_size(cx.dnn, d, Dir::Fwd, a, &b) != CUDNN_STATUS_SUCCESS) continue;
      char t[96];
      std::snprintf(t, sizeof t, "%s %.1f MiB%s", dnn::algo_name(Dir::Fwd, a), b / 1048576.0,
                    b > free_b / 2 ? " (more than half of free memory: would be skipped)" : "");
      append(reqs, t);
    }
    note("workspace each algorithm asks for, " + s.str(), reqs);
    DeviceBuffer x(s.x_elems() * 4), w(s.w_elems() * 4), y(s.y_elems() * 4);
    CUDA_CHECK(cudaMemset(x.as(), 0, x.bytes()));  // Find runs every algorithm on these: give it defined inputs
    CUDA_CHECK(cudaMemset(w.as(), 0, w.bytes()));
    const size_t offer = size_t(1) << 20;
    const auto found = dnn::find(cx.dnn, d, Dir::Fwd, {x.as(), w.as(), y.as()}, cx.ws.get(offer), offer);
    std::string ok, skipped;
    for (const auto& f : found)
      append(f.ok() ? ok : skipped, f.ok() ? f.name : f.name + " (" + cudnnGetErrorString(f.status) + ")");
    note("Find with a 1 MiB workspace: ran", ok.empty() ? "none" : ok);
    note("Find with a 1 MiB workspace: left out (workspace too small or unsupported)",
         skipped.empty() ? "none" : skipped);
  }
}

int main(int argc, char** argv) {
  cli::Args args(argc, argv, kProg,
                 "cuDNN's convolution algorithms surveyed, checked and raced against hand-written kernels");
  const cli::Standard st = cli::standard_flags(args, 20261130);
  const std::vector<long long> conv_arg =
      args.int_list("conv", {}, 0, 1 << 20, "survey one more shape: N,C,H,W,K,R,S,pad,stride,dil");
  const long long ws_mib =
      args.integer("workspace-mib", 4096, 0, 1 << 20,
                   "the most workspace offered to cuDNN, MiB (also capped at half of free memory)");
  const bool no_contest = args.flag("no-contest", "skip the contest (survey and refusals only)");
  args.finish();
  st.validate(kProg);
  results::require_outputs(kProg, st);
  ConvShape extra{};
  const bool has_extra = !conv_arg.empty();
  if (has_extra) {
    if (conv_arg.size() != 10) cli::usage_error(kProg, "--conv expects 10 numbers: N,C,H,W,K,R,S,pad,stride,dil");
    extra = ConvShape{int(conv_arg[0]), int(conv_arg[1]), int(conv_arg[2]), int(conv_arg[3]), int(conv_arg[4]),
                      int(conv_arg[5]), int(conv_arg[6]), int(conv_arg[7]), int(conv_arg[8]), int(conv_arg[9])};
    const std::string bad = extra.invalid();
    if (!bad.empty()) cli::usage_error(kProg, "--conv " + extra.str() + ": " + bad);
  }

  results::Results res("day30_conv_vs_cudnn", kProg);
  env::begin(res, st);
  if (has_extra)
    env::require_memory(kProg, 4 * (extra.x_elems() + extra.w_elems() + extra.y_elems()) * 2,
                        "--conv " + extra.str() + " (operands and result, fp32, twice)");
  res.config["workspace_limit_mib"] = ws_mib;
  verify::Rng rng{uint64_t(st.seed)};

  Ctx cx;
  cx.res = &res;
  cx.rng = &rng;
  cx.timed = !st.verify;
  cx.ws_limit = dnn::workspace_budget(size_t(ws_mib) << 20);
  CUDNN_CHECK(cudnnCreate(&cx.dnn));
  CUBLAS_CHECK(cublasCreate(&cx.blas));
  CUBLAS_CHECK(cublasSetMathMode(cx.blas, CUBLAS_DEFAULT_MATH));  // fp32 FMA for day20's im2col/Winograd
  cx.topt = timing::flushed(50, 400);                             // inputs come from device memory every repeat
  std::printf("workspace offered to cuDNN: up to %.0f MiB\n", cx.ws_limit / 1048576.0);

  if (cx.timed) {
    const ceilings::All ce = ceilings::measure_all();
    cx.copy_peak = ce.copy.best();
    cx.fp32_peak = ce.fma.tflops;
    for (const auto& [k, g] : ce.gemm) cx.tensor_peak[k] = g.tflops;
    ce.record(res);
  }

  // 1. Descriptors.
  std::printf("\n== descriptors, as cuDNN stored them\n");
  show_descriptors(cx, {1, 64, 56, 56, 64, 3, 3, 1, 1, 1}, kFp32Fma);
  show_descriptors(cx, {1, 64, 56, 56, 64, 3, 3, 1, 1, 1}, kFp16Nhwc);

  // 2. The survey.
  const std::vector<Config> all_cfgs = {kFp32Fma, kFp32Default, kFp32Nhwc, kFp16Nhwc, kBf16Nhwc};
  std::vector<ConvShape> fwd_shapes, bwd_shapes;
  if (st.verify) {
    // Odd sizes, stride, dilation, a 5x5 and a 1x1: not tile multiples anywhere.
    fwd_shapes = {{2, 3, 17, 19, 4, 3, 3, 1, 2, 1},
                  {1, 5, 23, 21, 7, 5, 5, 2, 1, 1},
                  {3, 8, 13, 11, 6, 3, 3, 1, 1, 2},
                  {2, 16, 9, 9, 24, 1, 1, 0, 1, 1}};
    bwd_shapes = {{2, 3, 17, 19, 4, 3, 3, 1, 2, 1}, {1, 8, 15, 13, 12, 3, 3, 1, 1, 1}};
    if (st.small)
      fwd_shapes.resize(1), bwd_shapes.resize(1);  // (compute-sanitizer runs every algorithm 10-100x slower)
  } else {
    fwd_shapes = {{32, 64, 56, 56, 64, 3, 3, 1, 1, 1}};
    bwd_shapes = {{32, 64, 56, 56, 64, 3, 3, 1, 1, 1}};
  }
  if (has_extra) fwd_shapes.push_back(extra), bwd_shapes.push_back(extra);
  const std::vector<Config> fwd_cfgs = st.small ? std::vector<Config>{kFp32Fma, kFp16Nhwc} : all_cfgs;
  const std::vector<Config> bwd_cfgs =
      st.small ? std::vector<Config>{kFp32Fma} : std::vector<Config>{kFp32Fma, kFp16Nhwc};
  for (const ConvShape& s : fwd_shapes)
    for (const Config& c : fwd_cfgs) survey(cx, s, c, Dir::Fwd);
  for (const ConvShape& s : bwd_shapes)
    for (const Config& c : bwd_cfgs)
      for (Dir d : {Dir::BwdData, Dir::BwdFilter}) survey(cx, s, c, d);

  // 3. The contest.
  if (!no_contest) {
    size_t cws_bytes = 0;
    std::vector<std::pair<std::string, ConvShape>> cases;
    if (st.verify) {
      // Odd heights, widths that are multiples of 8 but not of the block's columns, a batch.
      cases = {{"(a) odd", {2, 1, 37, 72, 1, 3, 3, 1, 1, 1}},
               {"(a) odd", {1, 1, 5, 200, 1, 3, 3, 1, 1, 1}},
               {"(b) odd", {2, 16, 13, 11, 20, 3, 3, 1, 1, 1}}};
      if (st.small) cases = {cases[0], cases[2]};
    } else {
      cases = {{"(a)", {1, 1, 1024, 2048, 1, 3, 3, 1, 1, 1}},
               {"(b1)", {1, 64, 56, 56, 64, 3, 3, 1, 1, 1}},
               {"(b2)", {32, 64, 56, 56, 64, 3, 3, 1, 1, 1}},
               {"(b3)", {32, 256, 14, 14, 256, 3, 3, 1, 1, 1}},
               {"(b4)", {32, 3, 224, 224, 64, 7, 7, 3, 2, 1}}};
    }
    for (auto& c : cases) {
      std::string why;
      cws_bytes = std::max(cws_bytes, im2col_bytes(c.second));
      if (supports_07(c.second, &why)) cws_bytes = std::max(cws_bytes, wino::workspace_bytes(c.second));
    }
    DeviceBuffer cws(std::min(cws_bytes, cx.ws_limit));
    std::vector<Custom> cands = contenders(cx, cws);
    for (auto& c : cases) contest(cx, c.first, c.second, cands);
  }

  // 4. Refusals.
  refusals(cx);

  // The contest table, last.
  if (cx.timed && !no_contest) {
    std::printf("\n== the contest, fp32, same inputs, outputs checked first\n");
    std::printf("  %-6s %-26s %-36s %9s %-30s %9s %-7s %s\n", "case", "shape", "our best", "us", "cuDNN's best", "us",
                "winner", "by");
    for (const auto& r : cx.table)
      std::printf("  %-6s %-26s %-36s %9.1f %-30s %9.1f %-7s %.2fx\n", r.label.c_str(), r.shape.c_str(),
                  r.custom.c_str(), r.custom_ms * 1e3, r.cudnn.c_str(), r.cudnn_ms * 1e3, r.winner.c_str(),
                  r.speedup > 1 ? r.speedup : 1 / r.speedup);
  }
  res.config["descriptors"] = cx.descriptors;
  res.config["survey"] = cx.survey;
  res.config["contest"] = cx.contest;
  res.config["refusals"] = cx.refusals;
  CUBLAS_CHECK(cublasDestroy(cx.blas));
  CUDNN_CHECK(cudnnDestroy(cx.dnn));
  return res.finish(kProg, st.json);
}
