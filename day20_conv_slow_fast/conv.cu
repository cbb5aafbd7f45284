// day20_conv_slow_fast/conv.cu: one 2D convolution written ten ways on the GPU, each checked
// against a CPU reference and cuDNN, and timed against cuDNN's best fp32 algorithm.
//
// The operation (conv_shape.h): cross-correlation, NCHW input x[N][C][H][W], KCRS filter
// w[K][C][R][S], output y[N][K][P][Q], with padding, stride and dilation.
//
// Variants (kernels/N_*.cuh, one idea per file):
//   1 CPU reference in double (conv_shape.h), the checker for the rest
//   2 naive: one thread per output
//   3 single channel: filter in constant memory, input tile + halo in shared memory (tile sizes compared);
//     3b the same convolution from a window of rows held in registers, no shared memory
//   4 multi-channel direct: shared-memory input tiles, register blocking over output channels
//   5 im2col + cuBLAS SGEMM (and the memory it costs)
//   6 implicit GEMM: variant 5's GEMM without materializing im2col
//   7 Winograd F(2x2, 3x3): transforms + 16 batched GEMMs
//   8 Winograd F(4x4, 3x3): transforms + 36 batched GEMMs by cuBLAS
//   9 the same with our own batched SIMT GEMM (block tiles compared)
//  10 the same a slice of images at a time, so that the transformed tiles stay in L2
//  11 the same with each GEMM's channel sum split over several blocks (split-K)
// A variant that does not support a shape says why and is skipped for it.
//
// Build and run
//   make                 # in this folder
//   make run             # checks and times the default shapes (single-channel 1024x2048, ResNet layers, first layer)
//   ./build/conv --verify                      # odd shapes, strides, dilations; no timing
//   ./build/conv --bench --json ../results/{gpu}/day20_conv_slow_fast.json
//   ./build/conv --conv 8,64,28,28,128,3,3,1,1,1 --variants 6,7   # N,C,H,W,K,R,S,pad,stride,dil
//   ./build/conv --bench --resnet --variants 6,7,8,9,10,11   # only ResNet-18/34's 3x3 layers at batch 32
//   ./build/conv --help
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "ceilings.cuh"
#include "check.cuh"
#include "cli.h"
#include "conv_shape.h"
#include "cudnn_conv.cuh"
#include "env.cuh"
#include "npy.h"
#include "results.h"
#include "timing.cuh"
#include "variants.cuh"
#include "verify.h"

static const char* kProg = "conv";

// fp32 tolerance: a C*R*S-long dot product of O(1) numbers grows like sqrt(C*R*S).
static verify::Tol tol_for(const ConvShape& s) { return verify::kFp32.scaled(std::sqrt(double(s.C) * s.R * s.S)); }

// The CPU reference: the whole output for small problems, a sample of outputs for big ones.
struct Reference {
  bool full = false;
  std::vector<double> y;    // full
  std::vector<size_t> idx;  // sampled
  std::vector<double> val;
  verify::Check check(const std::string& name, const std::vector<float>& out, verify::Tol tol) const {
    if (full) return verify::compare(name + " vs CPU", out.data(), y.data(), y.size(), tol);
    std::vector<float> g(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) g[i] = out[idx[i]];
    return verify::compare(name + " vs CPU (" + std::to_string(idx.size()) + " sampled)", g.data(), val.data(),
                           g.size(), tol);
  }
};

// ---- the run: options, then per shape: cuDNN, the variants' checks, timing ---------------
struct Options {
  cli::Standard st;
  std::vector<ConvShape> shapes;
  std::vector<long long> variant_ids;
  bool flush_by_write = false;
  size_t npy_shape = 0;  // --save-npy writes this shape: the one --conv gave, else the first
  bool wanted(int id) const {
    return variant_ids.empty() || std::find(variant_ids.begin(), variant_ids.end(), id) != variant_ids.end();
  }
};

// ResNet-18/34's 3x3 convolutions (stride 1, K = C) at batch 32: one per stage.
static const std::vector<ConvShape> kResnetLayers = {{32, 64, 56, 56, 64, 3, 3, 1, 1, 1},
                                                     {32, 128, 28, 28, 128, 3, 3, 1, 1, 1},
                                                     {32, 256, 14, 14, 256, 3, 3, 1, 1, 1},
                                                     {32, 512, 7, 7, 512, 3, 3, 1, 1, 1}};

static std::vector<ConvShape> default_shapes(bool verify_mode, bool small) {
  if (!verify_mode)
    return {{1, 1, 1024, 2048, 1, 3, 3, 1, 1, 1},   // one channel, one 3x3 filter: memory-bound
            {1, 64, 56, 56, 64, 3, 3, 1, 1, 1},     // a ResNet-18 layer, batch 1
            kResnetLayers[0],                       // the same layer, batch 32
            kResnetLayers[1],                       // the next stages
            kResnetLayers[2],                       //
            kResnetLayers[3],                       //
            {32, 3, 224, 224, 64, 7, 7, 3, 2, 1}};  // ResNet's first layer: 7x7, stride 2
  std::vector<ConvShape> shapes = {
      {1, 5, 37, 53, 7, 5, 5, 2, 1, 1},  {2, 3, 17, 19, 4, 3, 3, 1, 2, 2},   {1, 1, 31, 45, 1, 3, 3, 1, 1, 1},
      {3, 8, 20, 21, 16, 3, 3, 1, 1, 1}, {1, 4, 9, 9, 3, 1, 1, 0, 1, 1},     {2, 3, 30, 30, 8, 7, 7, 3, 2, 1},
      {1, 1, 7, 7, 1, 7, 7, 0, 1, 1},    {2, 16, 13, 11, 20, 3, 3, 0, 1, 1}, {1, 1, 64, 64, 1, 5, 5, 2, 1, 1},
      {3, 1, 37, 20, 1, 3, 3, 1, 1, 1},    // the register strip at odd H, W = 20 (5 float4s)
      {1, 37, 9, 9, 130, 3, 3, 1, 1, 1}};  // F(4x4): C padded to 48, 9 tiles padded to 12, K over 128
  if (small)
    shapes.resize(6);
  else
    for (ConvShape s : {ConvShape{1, 1, 1024, 2048, 1, 3, 3, 1, 1, 1}, ConvShape{1, 64, 56, 56, 64, 3, 3, 1, 1, 1}})
      shapes.push_back(s);
  return shapes;
}

static Options parse_options(int argc, char** argv) {
  cli::Args args(argc, argv, kProg, "2D convolution ten ways, checked against a CPU reference and cuDNN");
  Options o;
  o.st = cli::standard_flags(
      args, 20261122, "write x, w, cuDNN's y and variant 6's y of the --conv shape (else the first shape) as .npy");
  const std::vector<long long> conv_arg =
      args.int_list("conv", {}, 0, 1 << 20, "one more shape: N,C,H,W,K,R,S,pad,stride,dil");
  o.variant_ids = args.int_list("variants", {}, 2, 11, "variants to run, e.g. 3,6,7 (default: all)");
  const bool resnet = args.flag("resnet", "only ResNet-18/34's 3x3 layers at batch 32 (and any --conv shape)");
  o.flush_by_write = args.flag(
      "flush-by-write", "flush L2 with a memset instead of a read (to see what dirty lines cost a short kernel)");
  args.finish();
  o.st.validate(kProg);
  results::require_outputs(kProg, o.st);
  o.shapes = resnet ? kResnetLayers : default_shapes(o.st.verify, o.st.small);
  if (!conv_arg.empty()) {
    if (conv_arg.size() != 10) cli::usage_error(kProg, "--conv expects 10 numbers: N,C,H,W,K,R,S,pad,stride,dil");
    ConvShape s{int(conv_arg[0]), int(conv_arg[1]), int(conv_arg[2]), int(conv_arg[3]), int(conv_arg[4]),
                int(conv_arg[5]), int(conv_arg[6]), int(conv_arg[7]), int(conv_arg[8]), int(conv_arg[9])};
    const std::string bad = s.invalid();
    if (!bad.empty()) cli::usage_error(kProg, "--conv " + s.str() + ": " + bad);
    o.shapes.push_back(s);
    o.npy_shape = o.shapes.size() - 1;
  }
  return o;
}

// One timed shape's outcome: our fastest variant against cuDNN's best, with what each costs.
struct LayerRow {
  ConvShape s;
  std::string ours, cudnn;
  double ours_ms, cudnn_ms, pct, pct_min, pct_max, ours_err, cudnn_err, ours_err_atol;
  size_t ours_ws, cudnn_ws;
};

// What lives for the whole run: the libraries, the buffers, the ceilings and the records.
struct Run {
  const Options& o;
  results::Results& res;
  cudnnHandle_t handle = nullptr;
  dnn::Workspace dws;  // one cuDNN workspace, grown as needed, outside timed regions
  Bufs b;
  std::vector<Variant> variants = make_variants();
  verify::Rng rng;
  double fp32_peak = NAN, copy_peak = NAN;  // ceilings for "% of peak", measured in this run
  timing::Options topt;
  json::Value refused = json::Value::array(), cudnn_choices = json::Value::array();
  std::map<std::string, double> max_err;   // this shape's variants: max |error| against the CPU
  std::map<std::string, double> err_atol;  // ... and the larger of max |error| / atol vs CPU and vs cuDNN
  std::vector<LayerRow> layers;            // per timed shape: our fastest against cuDNN's
  Run(const Options& opt, results::Results& r) : o(opt), res(r), rng{uint64_t(opt.st.seed)} {
    CUDNN_CHECK(cudnnCreate(&handle));
    CUBLAS_CHECK(cublasCreate(&b.blas));
    CUBLAS_CHECK(cublasSetMathMode(b.blas, CUBLAS_DEFAULT_MATH));  // fp32 FMA: no TF32
    topt.flush_l2 = true;  // inputs come from device memory each repeat (1024x2048 would otherwise sit in L2)
    topt.warmup = 2;
    topt.min_reps = 5;
    topt.reps = 50;
    topt.budget_ms = 500;
    topt.flush_by_write = opt.flush_by_write;
  }
  ~Run() {
    CUBLAS_CHECK(cublasDestroy(b.blas));
    CUDNN_CHECK(cudnnDestroy(handle));
  }
};

// One shape's inputs (host and device), workspace and CPU reference.
struct ShapeData {
  std::vector<float> hx, hw;
  Reference ref;
  verify::Tol tol;              // the direct method's
  double rms_x = 0, rms_w = 0;  // the inputs' sizes, for the Winograd F(4x4) error model
};

static double rms(const std::vector<float>& v) {
  double s = 0;
  for (float a : v) s += double(a) * a;
  return std::sqrt(s / double(v.size()));
}

// A variant's tolerance: the direct method's, or F(4x4)'s from its error model (8_winograd_4x4.h).
static verify::Tol tol_of(const Variant& v, const ConvShape& s, const ShapeData& sd) {
  if (!v.wino4_tol) return sd.tol;
  return verify::Tol{wino4::tolerance_atol(s.C, sd.rms_x, sd.rms_w), sd.tol.rtol, "fp32 F(4x4)"};
}

static ShapeData prepare_shape(Run& r, const ConvShape& s) {
  ShapeData d{std::vector<float>(s.x_elems()), std::vector<float>(s.w_elems()), {}, tol_for(s)};
  verify::fill_uniform(d.hx, r.rng);
  verify::fill_uniform(d.hw, r.rng);
  d.rms_x = rms(d.hx);
  d.rms_w = rms(d.hw);
  Bufs& b = r.b;
  CUDA_CHECK(cudaMalloc(&b.x, d.hx.size() * 4));
  CUDA_CHECK(cudaMalloc(&b.w, d.hw.size() * 4));
  CUDA_CHECK(cudaMalloc(&b.y, s.y_elems() * 4));
  CUDA_CHECK(cudaMalloc(&b.yref, s.y_elems() * 4));
  CUDA_CHECK(cudaMemcpy(b.x, d.hx.data(), d.hx.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b.w, d.hw.data(), d.hw.size() * 4, cudaMemcpyHostToDevice));
  // Workspace for im2col / Winograd, if it fits (otherwise those variants say so and skip).
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  b.ws_bytes = workspace_needed(s);
  if (b.ws_bytes + (size_t(1) << 30) > free_b) b.ws_bytes = 0;
  if (b.ws_bytes) CUDA_CHECK(cudaMalloc(&b.ws, b.ws_bytes));
  const double macs = double(s.y_elems()) * s.C * s.R * s.S;
  d.ref.full = macs <= 3e8;
  if (d.ref.full) {
    d.ref.y.resize(s.y_elems());
    ref::conv_full(s, d.hx.data(), d.hw.data(), d.ref.y.data());
  } else {
    ref::conv_sampled(s, d.hx.data(), d.hw.data(), 4096, r.rng.next(), d.ref.idx, d.ref.val);
  }
  return d;
}

static void free_shape(Bufs& b) {
  CUDA_CHECK(cudaFree(b.x));
  CUDA_CHECK(cudaFree(b.w));
  CUDA_CHECK(cudaFree(b.y));
  CUDA_CHECK(cudaFree(b.yref));
  if (b.ws) CUDA_CHECK(cudaFree(b.ws));
  b.ws = nullptr;
}

// cuDNN at one shape: Find measures every algorithm once; its first that ran is checked like any
// variant, and its output (ycudnn) is what the variants are compared with.
struct CudnnPick {
  std::vector<dnn::AlgoPerf> found;
  const dnn::AlgoPerf* pick = nullptr;
  std::vector<float> y;
};

static bool run_cudnn(Run& r, const ConvShape& s, dnn::ConvDesc& dd, const ShapeData& sd, CudnnPick& c) {
  const dnn::Operands ops{r.b.x, r.b.w, r.b.yref};
  const size_t offer = dnn::workspace_budget(size_t(1) << 30);
  poison(r.b.yref, s.y_elems() * 4);
  c.found = dnn::find(r.handle, dd, dnn::Dir::Fwd, ops, r.dws.get(offer), offer);
  for (const auto& a : c.found)
    if (a.ok() && !c.pick) c.pick = &a;
  if (!c.pick) {
    std::fprintf(stderr, "error: cuDNN found no working forward algorithm for %s\n", s.str().c_str());
    return false;
  }
  poison(r.b.yref, s.y_elems() * 4);
  CUDNN_CHECK(dnn::run(r.handle, dd, dnn::Dir::Fwd, c.pick->algo, c.pick->math, ops, r.dws.get(c.pick->workspace),
                       c.pick->workspace));
  CUDA_CHECK(cudaDeviceSynchronize());
  c.y = to_host(r.b.yref, s.y_elems());
  r.res.add(sd.ref.check("cudnn " + c.pick->name + " " + s.str(), c.y, sd.tol));
  std::printf("  cuDNN picked %s (workspace %.1f MiB); Find measured:", c.pick->name.c_str(),
              c.pick->workspace / 1048576.0);
  json::Value algos = json::Value::array();
  for (auto& a : c.found) {
    std::printf(" %s %s", a.name.c_str(), a.ok() ? (std::to_string(a.ms * 1000).substr(0, 6) + "us").c_str() : "(n/a)");
    json::Value j = json::Value::object();
    j["algo"] = a.name;
    j["ms"] = a.ok() ? json::Value(double(a.ms)) : json::Value();
    j["workspace_bytes"] = (long long)a.workspace;
    j["math"] = dnn::math_name(a.math);
    j["status_ok"] = a.ok();
    algos.push(j);
  }
  std::printf("\n");
  json::Value choice = json::Value::object();
  choice["shape"] = s.str();
  choice["picked"] = c.pick->name;
  choice["find"] = algos;
  r.cudnn_choices.push(choice);
  return true;
}

static void save_npy(const std::string& dir, const ConvShape& s, const ShapeData& sd, const std::vector<float>& ycudnn,
                     const std::vector<float>* y06) {
  const std::vector<size_t> yshape = {size_t(s.N), size_t(s.K), size_t(s.P()), size_t(s.Q())};
  try {
    npy::save(dir + "/x.npy", sd.hx.data(), {size_t(s.N), size_t(s.C), size_t(s.H), size_t(s.W)});
    npy::save(dir + "/w.npy", sd.hw.data(), {size_t(s.K), size_t(s.C), size_t(s.R), size_t(s.S)});
    npy::save(dir + "/y_cudnn.npy", ycudnn.data(), yshape);
    if (y06) npy::save(dir + "/y_06.npy", y06->data(), yshape);
    std::printf("  wrote x.npy, w.npy, y_cudnn.npy%s of %s to %s\n", y06 ? ", y_06.npy" : " (variant 6 did not run)",
                s.str().c_str(), dir.c_str());
  } catch (const std::exception& e) { cli::usage_error(kProg, std::string("--save-npy: ") + e.what()); }
}

// Each variant: supported? checked against the CPU and against cuDNN. Returns those that ran.
static std::vector<const Variant*> check_variants(Run& r, const ConvShape& s, const ShapeData& sd,
                                                  const std::vector<float>& ycudnn, bool save) {
  std::vector<const Variant*> ok_variants;
  std::vector<float> y06;
  r.max_err.clear();
  r.err_atol.clear();
  for (const Variant& v : r.variants) {
    if (!r.o.wanted(v.id)) continue;
    std::string why;
    if (!v.supports(s, r.b, &why)) {
      // One line per kernel family (the tile-size configurations share their reason).
      const bool family = v.id == 3 || v.id >= 9;
      auto has = [&](const char* t) { return v.name.find(t) != std::string::npos; };
      const bool first_of_family = v.id == 3    ? has("32x8") || has("2 rows/")
                                   : v.id == 9  ? has(" 128x128")
                                   : v.id == 10 ? has("16MiB 64x64")
                                   : v.id == 11 ? has("2x 64x64")
                                                : true;
      if (first_of_family)
        std::printf("  SKIP  %s: %s\n", family ? v.name.substr(0, v.name.find(' ')).c_str() : v.name.c_str(),
                    why.c_str());
      r.refused.push(v.name + " " + s.str() + ": " + why);
      continue;
    }
    v.prepare(s, r.b);
    poison(r.b.y, s.y_elems() * 4);
    v.run(s, r.b, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> out = to_host(r.b.y, s.y_elems());
    const verify::Tol tol = tol_of(v, s, sd);
    r.max_err[v.name] = r.res.add(sd.ref.check(v.name + " " + s.str(), out, tol)).max_abs_err;
    const double vs_cudnn =
        r.res.add(verify::compare(v.name + " " + s.str() + " vs cuDNN", out.data(), ycudnn.data(), out.size(), tol))
            .max_abs_err;
    r.err_atol[v.name] = std::max(r.max_err[v.name], vs_cudnn) / tol.atol;
    ok_variants.push_back(&v);
    if (v.id == 6) y06 = out;
  }
  if (save) save_npy(r.o.st.npy_dir, s, sd, ycudnn, y06.empty() ? nullptr : &y06);
  return ok_variants;
}

static results::Bench make_row(const Run& r, const ConvShape& s, const std::string& name, const timing::Stats& t,
                               const std::string& ref, double ref_ms, json::Value extra) {
  results::Bench b;
  b.name = name;
  b.dtype = "fp32";
  b.shape = {s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.pad, s.stride, s.dil};
  b.ms = t.median_ms;
  b.min_ms = t.min_ms;
  b.max_ms = t.max_ms;
  b.reps = t.reps;
  if (s.C == 1 && s.K == 1) {  // memory-bound: judged by bandwidth
    b.gbps = s.min_bytes() / (t.median_ms * 1e-3) / 1e9;
    b.peak = r.copy_peak;
    b.peak_name = "measured copy bandwidth";
  } else {
    b.tflops = s.flops() / (t.median_ms * 1e-3) / 1e12;
    b.peak = r.fp32_peak;
    b.peak_name = "measured FP32 FMA ceiling";
  }
  if (std::isfinite(ref_ms)) {
    b.ref = ref;
    b.ref_ms = ref_ms;
  }
  b.extra = extra;
  return b;
}

static void print_row(const results::Bench& b, bool memory_bound) {
  std::printf("  %-44s %10.1f us %9.2f %-7s %11s %9.1f%%\n", b.name.c_str(), b.ms * 1e3, b.rate(),
              memory_bound ? "GB/s" : "TFLOP/s",
              b.ref.empty() ? "–" : (std::to_string(b.pct_of_ref()).substr(0, 5) + "%").c_str(), b.pct_of_peak());
}

// cuDNN's best: every algorithm Find ran, re-timed with our harness (Find times each once, which
// is noisy for a problem of a few microseconds); the fastest wins, and its output is checked.
static dnn::Timed cudnn_best(Run& r, const ConvShape& s, dnn::ConvDesc& dd, const ShapeData& sd, const CudnnPick& c,
                             json::Value& ex) {
  const dnn::Operands ops{r.b.x, r.b.w, r.b.yref};
  const size_t offer = dnn::workspace_budget(size_t(1) << 30);
  // fp32 against fp32: an algorithm reported under a tensor-op math type would round to TF32.
  std::vector<dnn::AlgoPerf> fp32_only;
  for (const auto& a : c.found)
    if (a.math != CUDNN_TENSOR_OP_MATH && a.math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) fp32_only.push_back(a);
  const std::vector<dnn::Timed> all = dnn::retime(r.handle, dd, dnn::Dir::Fwd, fp32_only, ops, r.dws, offer, r.topt);
  if (all.empty()) {
    std::fprintf(stderr, "error: no cuDNN algorithm ran under FMA math for %s\n", s.str().c_str());
    std::exit(cli::kFail);
  }
  const dnn::Timed& best = all.front();
  json::Value retimed = json::Value::array();
  for (const auto& t : all) {
    json::Value a = json::Value::object();
    a["algo"] = t.algo.name;
    a["ms"] = t.t.median_ms;
    a["workspace_bytes"] = (long long)t.algo.workspace;
    a["math"] = dnn::math_name(t.algo.math);
    retimed.push(a);
  }
  std::printf("  cuDNN re-timed: fastest is %s (Find's first choice was %s)\n", best.algo.name.c_str(),
              c.pick->name.c_str());
  poison(r.b.yref, s.y_elems() * 4);
  CUDNN_CHECK(dnn::run(r.handle, dd, dnn::Dir::Fwd, best.algo.algo, best.algo.math, ops, r.dws.get(best.algo.workspace),
                       best.algo.workspace));
  CUDA_CHECK(cudaDeviceSynchronize());
  ex["max_abs_err_vs_cpu"] = r.res
                                 .add(sd.ref.check("cudnn " + best.algo.name + " (fastest re-timed) " + s.str(),
                                                   to_host(r.b.yref, s.y_elems()), sd.tol))
                                 .max_abs_err;
  ex["algo"] = best.algo.name;
  ex["math"] = dnn::math_name(best.algo.math);
  ex["find_first_choice"] = c.pick->name;
  ex["workspace_bytes"] = (long long)best.algo.workspace;
  ex["retimed"] = retimed;
  return best;
}

// The headline ratio at this shape: the fastest variant against cuDNN's best algorithm, re-timed
// as 3 interleaved rounds (cuDNN, then ours); the variant's row carries the median and min..max.
// Returns that row (empty name: no variant ran).
static results::Bench headline(Run& r, const ConvShape& s, dnn::ConvDesc& dd, const dnn::Timed& best,
                               const std::vector<const Variant*>& vs, std::vector<results::Bench>& rows) {
  results::Bench* fastest = nullptr;
  const Variant* v = nullptr;
  for (size_t i = 0; i < vs.size(); ++i) {  // rows[i + first] is vs[i]'s row
    results::Bench& b = rows[rows.size() - vs.size() + i];
    if (!fastest || b.ms < fastest->ms) fastest = &b, v = vs[i];
  }
  if (!fastest) return {};
  const dnn::Operands ops{r.b.x, r.b.w, r.b.yref};
  void* ws = r.dws.get(best.algo.workspace);
  v->prepare(s, r.b);
  const timing::Interleaved il =
      timing::interleaved([&] { v->run(s, r.b, 0); },
                          [&] {
                            CUDNN_CHECK(dnn::run(r.handle, dd, dnn::Dir::Fwd, best.algo.algo, best.algo.math, ops, ws,
                                                 best.algo.workspace));
                          },
                          r.topt, 3);
  const double rate_scale = fastest->ms / il.ours.median_ms;  // the rate follows the re-timed median
  fastest->gbps *= rate_scale;
  fastest->tflops *= rate_scale;
  fastest->ms = il.ours.median_ms;
  fastest->min_ms = il.ours.min_ms;
  fastest->max_ms = il.ours.max_ms;
  fastest->reps = il.ours.reps;
  fastest->ref_ms = il.ref.median_ms;
  fastest->ref_repeats = il.repeats;
  fastest->pct_of_ref_median = il.pct_median;
  fastest->pct_of_ref_min = il.pct_min;
  fastest->pct_of_ref_max = il.pct_max;
  std::printf("  headline: %s at %.1f%% of cuDNN's best (median of %d interleaved rounds, %.1f..%.1f%%)\n",
              fastest->name.c_str(), il.pct_median, il.repeats, il.pct_min, il.pct_max);
  return *fastest;
}

// Variants 8-11 transform the filter inside every call (as cuDNN does); this is that part alone,
// so that the notes can say what a network that transforms its weights once would save, and the
// first version's kernel beside it (uncoalesced loads, 8_winograd_4x4.cuh). {NaN, NaN}: none ran.
static std::pair<double, double> wino4_filter_ms(Run& r, const ConvShape& s, const std::vector<const Variant*>& vs) {
  const bool any = std::any_of(vs.begin(), vs.end(), [](const Variant* v) { return v->id >= 8; });
  if (!any) return {NAN, NAN};
  const Wino4Bufs b(s, r.b.ws);
  return {timing::time_gpu([&] { wino4_filter(s, r.b.w, b.U, 0); }, r.topt).median_ms,
          timing::time_gpu([&] { wino4_filter_per_thread(s, r.b.w, b.U, 0); }, r.topt).median_ms};
}

// Timing: cuDNN's best first (the denominator), then every variant, each re-checked afterwards.
static void time_shape(Run& r, const ConvShape& s, dnn::ConvDesc& dd, const ShapeData& sd, const CudnnPick& c,
                       const std::vector<const Variant*>& ok_variants) {
  const bool memory_bound = s.C == 1 && s.K == 1;
  std::vector<results::Bench> rows;
  auto add = [&](const results::Bench& b) {
    print_row(b, memory_bound);
    rows.push_back(b);
  };
  std::printf("  %-44s %13s %17s %11s %10s\n", "variant", "time", "rate", "% of cuDNN", "% of peak");
  json::Value ex = json::Value::object();
  const dnn::Timed best = cudnn_best(r, s, dd, sd, c, ex);
  const std::string ref = "cudnn " + best.algo.name;
  const double tc = best.t.median_ms;
  add(make_row(r, s, "cudnn_best [" + best.algo.name + "]", best.t, ref, NAN, ex));
  if (memory_bound) {
    // The practical floor at this size: copying x into y moves the same bytes, with the same
    // launch and drain costs, and computes nothing.
    const size_t bytes = std::min(s.x_elems(), s.y_elems()) * 4;
    timing::Stats tf = timing::time_gpu(
        [&] { CUDA_CHECK(cudaMemcpyAsync(r.b.y, r.b.x, bytes, cudaMemcpyDeviceToDevice, 0)); }, r.topt);
    std::printf("  (floor from the measured copy bandwidth: %.1f us; a cudaMemcpy of the same bytes: %.1f us)\n",
                s.min_bytes() / (r.copy_peak * 1e9) * 1e6, tf.median_ms * 1e3);
    json::Value fe = json::Value::object();
    fe["note"] = "cudaMemcpy of x into y: the same bytes moved, nothing computed";
    add(make_row(r, s, "copy_floor [cudaMemcpy same bytes]", tf, ref, tc, fe));
  }
  const std::pair<double, double> filter_ms = wino4_filter_ms(r, s, ok_variants);
  for (const Variant* v : ok_variants) {
    v->prepare(s, r.b);
    poison(r.b.y, s.y_elems() * 4);
    timing::Stats t = timing::time_gpu([&] { v->run(s, r.b, 0); }, r.topt);
    json::Value e = json::Value::object();
    if (v->id == 5) e["im2col_bytes"] = (long long)im2col_bytes(s);
    e["workspace_bytes"] = (long long)v->workspace(s);
    e["max_abs_err_vs_cpu"] = r.max_err[v->name];
    e["atol"] = tol_of(*v, s, sd).atol;
    e["max_abs_err_over_atol"] = r.err_atol[v->name];  // the larger of the checks vs CPU and vs cuDNN
    v->describe(s, e);
    if (v->id >= 8) {
      e["filter_transform_ms"] = filter_ms.first;
      e["filter_transform_per_thread_ms"] = filter_ms.second;
    }
    add(make_row(r, s, v->name, t, ref, tc, e));
    CUDA_CHECK(cudaDeviceSynchronize());
    verify::Check ck = verify::compare(v->name + " " + s.str() + " after timing vs cuDNN",
                                       to_host(r.b.y, s.y_elems()).data(), c.y.data(), s.y_elems(), tol_of(*v, s, sd));
    if (!ck.passed) verify::print(ck);
    r.res.add_quiet(ck);
  }
  const results::Bench top = headline(r, s, dd, best, ok_variants, rows);
  if (!top.name.empty()) {
    const Variant* tv =
        *std::find_if(ok_variants.begin(), ok_variants.end(), [&](const Variant* v) { return v->name == top.name; });
    r.layers.push_back({s, top.name, best.algo.name, top.ms, top.ref_ms, top.pct_of_ref_median, top.pct_of_ref_min,
                        top.pct_of_ref_max, r.max_err[top.name], ex.find("max_abs_err_vs_cpu")->number(),
                        r.err_atol[top.name], tv->workspace(s), best.algo.workspace});
  }
  for (const auto& b : rows) r.res.add(b);
  if (r.o.wanted(5) && r.b.ws_bytes)
    std::printf("  (im2col's column matrix for this shape: %.1f MB, %.1fx the input)\n", im2col_bytes(s) / 1e6,
                double(im2col_bytes(s)) / (4.0 * s.x_elems()));
}

// One shape from inputs to timing. False: cuDNN refused it or found nothing that runs.
static bool run_shape(Run& r, const ConvShape& s, bool save_npy_here) {
  std::printf("\n== %s -> %dx%dx%dx%d  (%.2f GFLOP, at least %.1f MB moved)\n", s.str().c_str(), s.N, s.K, s.P(), s.Q(),
              s.flops() / 1e9, s.min_bytes() / 1e6);
  const ShapeData sd = prepare_shape(r, s);
  // cuDNN: fp32 NCHW, cross-correlation, FMA math (no TF32: the same arithmetic as ours).
  dnn::ConvDesc dd(s, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
  if (!dd.ok()) {
    std::fprintf(stderr, "error: cuDNN refused %s: %s\n", s.str().c_str(), dd.error.c_str());
    return false;
  }
  CudnnPick c;
  if (!run_cudnn(r, s, dd, sd, c)) return false;
  const auto ok_variants = check_variants(r, s, sd, c.y, save_npy_here);
  if (!r.o.st.verify) time_shape(r, s, dd, sd, c, ok_variants);
  free_shape(r.b);
  return true;
}

// The table of every timed shape (our fastest against cuDNN's best, with workspace and error), and
// the goals issue 21 set: at least level with cuDNN at 32x64x56x56 and 32x256x14x14; the moonshot,
// 120% at both and level at every ResNet-18/34 3x3 layer at batch 32.
static void report_layers(Run& r) {
  if (r.layers.empty()) return;
  std::printf("\n%-28s %-34s %9s %-18s %9s %21s %17s %21s %9s\n", "shape", "our fastest", "us", "cuDNN best", "us",
              "% of cuDNN (min..max)", "workspace MB", "max |err| ours/cuDNN", "err/atol");
  json::Value table = json::Value::array();
  auto pct_at = [&](const ConvShape& s) {
    for (const LayerRow& l : r.layers)
      if (l.s.str() == s.str()) return l.pct;
    return double(NAN);
  };
  for (const LayerRow& l : r.layers) {
    std::printf("%-28s %-34s %9.1f %-18s %9.1f %8.1f (%5.1f..%5.1f) %8.1f /%7.1f %10.2e /%9.2e %9.3f\n",
                l.s.str().c_str(), l.ours.c_str(), l.ours_ms * 1e3, l.cudnn.c_str(), l.cudnn_ms * 1e3, l.pct, l.pct_min,
                l.pct_max, l.ours_ws / 1e6, l.cudnn_ws / 1e6, l.ours_err, l.cudnn_err, l.ours_err_atol);
    json::Value j = json::Value::object();
    j["shape"] = l.s.str(), j["ours"] = l.ours, j["ours_ms"] = l.ours_ms, j["cudnn"] = l.cudnn;
    j["cudnn_ms"] = l.cudnn_ms, j["pct_of_cudnn"] = l.pct, j["pct_min"] = l.pct_min, j["pct_max"] = l.pct_max;
    j["ours_workspace_bytes"] = (long long)l.ours_ws, j["cudnn_workspace_bytes"] = (long long)l.cudnn_ws;
    j["ours_max_abs_err"] = l.ours_err, j["cudnn_max_abs_err"] = l.cudnn_err;
    j["ours_max_abs_err_over_atol"] = l.ours_err_atol;  // the larger of its checks vs CPU and vs cuDNN
    table.push(j);
  }
  r.res.config["layers"] = table;
  const double a = pct_at(kResnetLayers[0]), b = pct_at(kResnetLayers[2]);
  if (std::isfinite(a)) r.res.add_goal(">= 100% of cuDNN's best at " + kResnetLayers[0].str(), a, a >= 100);
  if (std::isfinite(b)) r.res.add_goal(">= 100% of cuDNN's best at " + kResnetLayers[2].str(), b, b >= 100);
  if (std::isfinite(a) && std::isfinite(b))
    r.res.add_goal("moonshot: >= 120% of cuDNN's best at both", std::min(a, b), std::min(a, b) >= 120);
  double worst = INFINITY;
  for (const ConvShape& s : kResnetLayers) worst = std::min(worst, pct_at(s));  // NaN (not run) stays out
  bool all_run = true;
  for (const ConvShape& s : kResnetLayers) all_run = all_run && std::isfinite(pct_at(s));
  if (all_run)
    r.res.add_goal("moonshot: >= 100% of cuDNN's best at every ResNet-18/34 3x3 layer (batch 32)", worst, worst >= 100);
}

// Refuses (exit 2) what will not fit, before any allocation: the largest shape's buffers.
static void require_memory(const std::vector<ConvShape>& shapes) {
  size_t need = 0;
  ConvShape biggest = shapes[0];
  for (auto& s : shapes) {
    const size_t b = sizeof(float) * (s.x_elems() + s.w_elems() + 2 * s.y_elems());
    if (b > need) need = b, biggest = s;
  }
  env::require_memory(kProg, need, "shape " + biggest.str() + " (x, w and two outputs)");
}

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  results::Results res("day20_conv_slow_fast", kProg);
  env::begin(res, o.st);
  require_memory(o.shapes);
  Run r(o, res);
  if (!o.st.verify) {
    ceilings::Fma f = ceilings::fp32_fma();
    ceilings::Copy c = ceilings::copy_bandwidth(size_t(1) << 30);
    r.fp32_peak = f.tflops;
    r.copy_peak = c.best();
    std::printf("ceilings measured in this run: FP32 FMA %.1f TFLOP/s, copy %.0f GB/s\n", r.fp32_peak, r.copy_peak);
  }
  res.config["l2_flush"] = o.flush_by_write ? "memset (dirty lines)" : "read";
  for (size_t i = 0; i < o.shapes.size(); ++i)
    if (!run_shape(r, o.shapes[i], i == o.npy_shape && !o.st.npy_dir.empty())) return cli::kFail;
  report_layers(r);
  res.config["cudnn"] = r.cudnn_choices;
  res.config["cudnn_math"] = "FMA math on an fp32 NCHW descriptor: no TF32; tensor-op algorithms left out";
  res.config["cublas_math"] = "CUBLAS_DEFAULT_MATH: fp32 FMA, no TF32";
  res.config["refused"] = r.refused;
  return res.finish(kProg, o.st.json);
}
