// day20_conv_slow_fast/conv.cu: one 2D convolution written six ways on the GPU, each checked
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
// A variant that does not support a shape says why and is skipped for it.
//
// Build and run
//   make                 # in this folder
//   make run             # checks and times the default shapes (single-channel 1024x2048, ResNet layers, first layer)
//   ./build/conv --verify                      # odd shapes, strides, dilations; no timing
//   ./build/conv --bench --json ../results/{gpu}/day20_conv_slow_fast.json
//   ./build/conv --conv 8,64,28,28,128,3,3,1,1,1 --variants 6,7   # N,C,H,W,K,R,S,pad,stride,dil
//   ./build/conv --help
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
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
#include "verify.h"

#include "kernels/2_naive.cuh"
#include "kernels/3_tiled_single.cuh"
#include "kernels/3b_single_register.cuh"
#include "kernels/4_direct_multi.cuh"
#include "kernels/5_im2col_gemm.cuh"
#include "kernels/6_implicit_gemm.cuh"
#include "kernels/7_winograd.cuh"

static const char* kProg = "conv";

// Device buffers of one shape.
struct Bufs {
  float *x = nullptr, *w = nullptr, *y = nullptr, *yref = nullptr, *ws = nullptr;
  size_t ws_bytes = 0;
  cublasHandle_t blas = nullptr;
};

struct Variant {
  int id;
  std::string name;
  std::function<bool(const ConvShape&, const Bufs&, std::string*)> supports;
  std::function<void(const ConvShape&, const Bufs&)> prepare;  // once per shape and filter, untimed
  std::function<void(const ConvShape&, const Bufs&, cudaStream_t)> run;
};

static size_t workspace_needed(const ConvShape& s) {
  size_t b = im2col_bytes(s);
  std::string why;
  if (supports_07(s, &why)) b = std::max(b, wino::workspace_bytes(s));
  return b;
}

static std::vector<Variant> make_variants() {
  auto always = [](const ConvShape&, const Bufs&, std::string*) { return true; };
  auto none = [](const ConvShape&, const Bufs&) {};
  auto ws_ok = [](size_t need, const Bufs& b, std::string* why) {
    if (need <= b.ws_bytes) return true;
    *why = "needs a " + std::to_string(need >> 20) + " MiB workspace, more than this GPU has free";
    return false;
  };
  std::vector<Variant> v;
  v.push_back({2, "02_naive", always, none,
               [](const ConvShape& s, const Bufs& b, cudaStream_t st) { run_02_naive(s, b.x, b.w, b.y, st); }});
  // Variant 3 at several tile shapes (output tile = TW x TH*PY): the tile-size trade-off.
  auto tiled = [&](std::string cfg, void (*fn)(const ConvShape&, const float*, float*, cudaStream_t)) {
    v.push_back({3, "03_tiled_single " + cfg,
                 [](const ConvShape& s, const Bufs&, std::string* why) { return supports_03(s, why); },
                 [](const ConvShape& s, const Bufs& b) { set_03_filter(s, b.w); },
                 [fn](const ConvShape& s, const Bufs& b, cudaStream_t st) { fn(s, b.x, b.y, st); }});
  };
  tiled("16x16", run_03_tiled<16, 16, 1>);
  tiled("32x8", run_03_tiled<32, 8, 1>);
  tiled("32x32 (32x8 thr, 4 rows each)", run_03_tiled<32, 8, 4>);
  tiled("64x32 (64x4 thr, 8 rows each)", run_03_tiled<64, 4, 8>);
  tiled("128x16 (128x2 thr, 8 rows each)", run_03_tiled<128, 2, 8>);
  // The step past the textbook: no shared memory, a sliding window of rows in registers.
  auto strip = [&](std::string cfg, void (*fn)(const ConvShape&, const float*, float*, cudaStream_t)) {
    v.push_back({3, "03b_register_strip " + cfg,
                 [](const ConvShape& s, const Bufs&, std::string* why) { return supports_03b(s, why); },
                 [](const ConvShape& s, const Bufs& b) { set_03_filter(s, b.w); },
                 [fn](const ConvShape& s, const Bufs& b, cudaStream_t st) { fn(s, b.x, b.y, st); }});
  };
  strip("4 cols x 2 rows/thread", run_03b_strip<2>);
  strip("4 cols x 4 rows/thread", run_03b_strip<4>);
  strip("4 cols x 8 rows/thread", run_03b_strip<8>);
  strip("4 cols x 16 rows/thread", run_03b_strip<16>);
  v.push_back({4, "04_direct_multichannel",
               [](const ConvShape& s, const Bufs&, std::string* why) { return supports_04(s, why); }, none,
               [](const ConvShape& s, const Bufs& b, cudaStream_t st) { run_04_direct(s, b.x, b.w, b.y, st); }});
  v.push_back(
      {5, "05_im2col_cublas",
       [ws_ok](const ConvShape& s, const Bufs& b, std::string* why) { return ws_ok(im2col_bytes(s), b, why); }, none,
       [](const ConvShape& s, const Bufs& b, cudaStream_t st) { run_05_im2col(b.blas, s, b.x, b.w, b.y, b.ws, st); }});
  v.push_back({6, "06_implicit_gemm",
               [](const ConvShape& s, const Bufs&, std::string* why) { return supports_06(s, why); },
               [](const ConvShape& s, const Bufs&) { set_06_table(s); },
               [](const ConvShape& s, const Bufs& b, cudaStream_t st) { run_06_implicit_gemm(s, b.x, b.w, b.y, st); }});
  v.push_back({7, "07_winograd_2x2_3x3",
               [ws_ok](const ConvShape& s, const Bufs& b, std::string* why) {
                 return supports_07(s, why) && ws_ok(wino::workspace_bytes(s), b, why);
               },
               none,
               [](const ConvShape& s, const Bufs& b, cudaStream_t st) {
                 run_07_winograd(b.blas, s, b.x, b.w, b.y, b.ws, st);
               }});
  return v;
}

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

int main(int argc, char** argv) {
  cli::Args args(argc, argv, kProg, "2D convolution six ways, checked against a CPU reference and cuDNN");
  const cli::Standard st =
      cli::standard_flags(args, 20261122, "write x, w, the reference y and variant 6's y of the first shape as .npy");
  const bool verify_mode = st.verify, small = st.small;
  const long long seed = st.seed;
  const std::string &json_path = st.json, &npy_dir = st.npy_dir;
  const std::vector<long long> conv_arg =
      args.int_list("conv", {}, 0, 1 << 20, "one more shape: N,C,H,W,K,R,S,pad,stride,dil");
  const std::vector<long long> variant_ids =
      args.int_list("variants", {}, 2, 7, "variants to run, e.g. 3,6,7 (default: all)");
  const bool flush_by_write = args.flag(
      "flush-by-write", "flush L2 with a memset instead of a read (to see what dirty lines cost a short kernel)");
  args.finish();
  st.validate(kProg);
  results::require_outputs(kProg, st);

  std::vector<ConvShape> shapes;
  if (verify_mode) {
    shapes = {{1, 5, 37, 53, 7, 5, 5, 2, 1, 1},  {2, 3, 17, 19, 4, 3, 3, 1, 2, 2},   {1, 1, 31, 45, 1, 3, 3, 1, 1, 1},
              {3, 8, 20, 21, 16, 3, 3, 1, 1, 1}, {1, 4, 9, 9, 3, 1, 1, 0, 1, 1},     {2, 3, 30, 30, 8, 7, 7, 3, 2, 1},
              {1, 1, 7, 7, 1, 7, 7, 0, 1, 1},    {2, 16, 13, 11, 20, 3, 3, 0, 1, 1}, {1, 1, 64, 64, 1, 5, 5, 2, 1, 1},
              {3, 1, 37, 20, 1, 3, 3, 1, 1, 1}};  // last: the register strip at odd H, W = 20 (5 float4s)
    if (small)
      shapes.resize(6);
    else
      for (ConvShape s : {ConvShape{1, 1, 1024, 2048, 1, 3, 3, 1, 1, 1}, ConvShape{1, 64, 56, 56, 64, 3, 3, 1, 1, 1}})
        shapes.push_back(s);
  } else {
    shapes = {{1, 1, 1024, 2048, 1, 3, 3, 1, 1, 1},   // one channel, one 3x3 filter: memory-bound
              {1, 64, 56, 56, 64, 3, 3, 1, 1, 1},     // a ResNet-18 layer, batch 1
              {32, 64, 56, 56, 64, 3, 3, 1, 1, 1},    // the same layer, batch 32
              {32, 256, 14, 14, 256, 3, 3, 1, 1, 1},  // a deeper ResNet layer
              {32, 3, 224, 224, 64, 7, 7, 3, 2, 1}};  // ResNet's first layer: 7x7, stride 2
  }
  if (!conv_arg.empty()) {
    if (conv_arg.size() != 10) cli::usage_error(kProg, "--conv expects 10 numbers: N,C,H,W,K,R,S,pad,stride,dil");
    ConvShape s{int(conv_arg[0]), int(conv_arg[1]), int(conv_arg[2]), int(conv_arg[3]), int(conv_arg[4]),
                int(conv_arg[5]), int(conv_arg[6]), int(conv_arg[7]), int(conv_arg[8]), int(conv_arg[9])};
    const std::string bad = s.invalid();
    if (!bad.empty()) cli::usage_error(kProg, "--conv " + s.str() + ": " + bad);
    shapes.push_back(s);
  }
  auto wanted = [&](int id) {
    return variant_ids.empty() || std::find(variant_ids.begin(), variant_ids.end(), id) != variant_ids.end();
  };

  const int dev = env::require_gpu(kProg);
  size_t need = 0;
  ConvShape biggest = shapes[0];
  for (auto& s : shapes) {
    const size_t b = sizeof(float) * (s.x_elems() + s.w_elems() + 2 * s.y_elems());
    if (b > need) need = b, biggest = s;
  }
  env::require_memory(kProg, need, "shape " + biggest.str() + " (x, w and two outputs)");
  results::Results res("day20_conv_slow_fast", kProg);
  res.mode = st.mode();
  res.env = env::collect(dev);
  res.config["seed"] = seed;
  env::print(res.env);

  cudnnHandle_t handle;
  CUDNN_CHECK(cudnnCreate(&handle));
  dnn::Workspace dws;  // one cuDNN workspace, grown as needed, outside timed regions
  Bufs b;
  CUBLAS_CHECK(cublasCreate(&b.blas));
  CUBLAS_CHECK(cublasSetMathMode(b.blas, CUBLAS_DEFAULT_MATH));  // fp32 FMA: no TF32
  std::vector<Variant> variants = make_variants();
  verify::Rng rng{uint64_t(seed)};

  // Ceilings for "% of peak", measured in this run.
  double fp32_peak = NAN, copy_peak = NAN;
  if (!verify_mode) {
    ceilings::Fma f = ceilings::fp32_fma();
    ceilings::Copy c = ceilings::copy_bandwidth(size_t(1) << 30);
    fp32_peak = f.tflops;
    copy_peak = c.best();
    std::printf("ceilings measured in this run: FP32 FMA %.1f TFLOP/s, copy %.0f GB/s\n", fp32_peak, copy_peak);
  }
  timing::Options topt;
  topt.flush_l2 = true;  // inputs come from device memory each repeat (1024x2048 would otherwise sit in L2)
  topt.warmup = 2;
  topt.min_reps = 5;
  topt.reps = 50;
  topt.budget_ms = 500;
  topt.flush_by_write = flush_by_write;
  res.config["l2_flush"] = flush_by_write ? "memset (dirty lines)" : "read";

  json::Value refused = json::Value::array(), cudnn_choices = json::Value::array();
  bool first_shape = true;
  for (const ConvShape& s : shapes) {
    const bool memory_bound = s.C == 1 && s.K == 1;
    std::printf("\n== %s -> %dx%dx%dx%d  (%.2f GFLOP, at least %.1f MB moved)\n", s.str().c_str(), s.N, s.K, s.P(),
                s.Q(), s.flops() / 1e9, s.min_bytes() / 1e6);
    // Fresh inputs for every shape.
    std::vector<float> hx(s.x_elems()), hw(s.w_elems());
    verify::fill_uniform(hx, rng);
    verify::fill_uniform(hw, rng);
    CUDA_CHECK(cudaMalloc(&b.x, hx.size() * 4));
    CUDA_CHECK(cudaMalloc(&b.w, hw.size() * 4));
    CUDA_CHECK(cudaMalloc(&b.y, s.y_elems() * 4));
    CUDA_CHECK(cudaMalloc(&b.yref, s.y_elems() * 4));
    CUDA_CHECK(cudaMemcpy(b.x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b.w, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
    // Workspace for im2col / Winograd, if it fits (otherwise those variants say so and skip).
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    b.ws_bytes = workspace_needed(s);
    if (b.ws_bytes + (size_t(1) << 30) > free_b) b.ws_bytes = 0;
    if (b.ws_bytes) CUDA_CHECK(cudaMalloc(&b.ws, b.ws_bytes));

    Reference ref;
    const double macs = double(s.y_elems()) * s.C * s.R * s.S;
    ref.full = macs <= 3e8;
    if (ref.full) {
      ref.y.resize(s.y_elems());
      ref::conv_full(s, hx.data(), hw.data(), ref.y.data());
    } else {
      ref::conv_sampled(s, hx.data(), hw.data(), 4096, rng.next(), ref.idx, ref.val);
    }
    const verify::Tol tol = tol_for(s);

    // cuDNN: fp32 NCHW, cross-correlation, FMA math (no TF32: the same arithmetic as ours).
    // Find measures every algorithm once; its first that ran is checked like any variant.
    dnn::ConvDesc dd(s, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
    if (!dd.ok()) {
      std::fprintf(stderr, "error: cuDNN refused %s: %s\n", s.str().c_str(), dd.error.c_str());
      return cli::kFail;
    }
    const dnn::Operands ops{b.x, b.w, b.yref};
    const size_t offer = dnn::workspace_budget(size_t(1) << 30);
    poison(b.yref, s.y_elems() * 4);
    const std::vector<dnn::AlgoPerf> found = dnn::find(handle, dd, dnn::Dir::Fwd, ops, dws.get(offer), offer);
    const dnn::AlgoPerf* pick = nullptr;
    for (const auto& a : found)
      if (a.ok() && !pick) pick = &a;
    if (!pick) {
      std::fprintf(stderr, "error: cuDNN found no working forward algorithm for %s\n", s.str().c_str());
      return cli::kFail;
    }
    poison(b.yref, s.y_elems() * 4);
    CUDNN_CHECK(
        dnn::run(handle, dd, dnn::Dir::Fwd, pick->algo, pick->math, ops, dws.get(pick->workspace), pick->workspace));
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> ycudnn = to_host(b.yref, s.y_elems());
    res.add(ref.check("cudnn " + pick->name + " " + s.str(), ycudnn, tol));
    std::printf("  cuDNN picked %s (workspace %.1f MiB); Find measured:", pick->name.c_str(),
                pick->workspace / 1048576.0);
    json::Value algos = json::Value::array();
    for (auto& a : found) {
      std::printf(" %s %s", a.name.c_str(),
                  a.ok() ? (std::to_string(a.ms * 1000).substr(0, 6) + "us").c_str() : "(n/a)");
      json::Value j = json::Value::object();
      j["algo"] = a.name;
      j["ms"] = a.ok() ? json::Value(double(a.ms)) : json::Value();
      j["workspace_bytes"] = (long long)a.workspace;
      j["status_ok"] = a.ok();
      algos.push(j);
    }
    std::printf("\n");
    json::Value choice = json::Value::object();
    choice["shape"] = s.str();
    choice["picked"] = pick->name;
    choice["find"] = algos;
    cudnn_choices.push(choice);

    // Each variant: supported? check against the CPU and against cuDNN.
    std::vector<const Variant*> ok_variants;
    for (const Variant& v : variants) {
      if (!wanted(v.id)) continue;
      std::string why;
      if (!v.supports(s, b, &why)) {
        // One line per kernel family (the tile-size configurations share their reason).
        const bool first_of_family =
            v.id != 3 || v.name.find("32x8") != std::string::npos || v.name.find("2 rows/") != std::string::npos;
        if (first_of_family)
          std::printf("  SKIP  %s: %s\n", v.id == 3 ? v.name.substr(0, v.name.find(' ')).c_str() : v.name.c_str(),
                      why.c_str());
        refused.push(v.name + " " + s.str() + ": " + why);
        continue;
      }
      v.prepare(s, b);
      poison(b.y, s.y_elems() * 4);
      v.run(s, b, 0);
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<float> out = to_host(b.y, s.y_elems());
      res.add(ref.check(v.name + " " + s.str(), out, tol));
      res.add(verify::compare(v.name + " " + s.str() + " vs cuDNN", out.data(), ycudnn.data(), out.size(), tol));
      ok_variants.push_back(&v);
      if (first_shape && v.id == 6 && !npy_dir.empty()) {
        try {
          npy::save(npy_dir + "/x.npy", hx.data(), {size_t(s.N), size_t(s.C), size_t(s.H), size_t(s.W)});
          npy::save(npy_dir + "/w.npy", hw.data(), {size_t(s.K), size_t(s.C), size_t(s.R), size_t(s.S)});
          npy::save(npy_dir + "/y_cudnn.npy", ycudnn.data(), {size_t(s.N), size_t(s.K), size_t(s.P()), size_t(s.Q())});
          npy::save(npy_dir + "/y_06.npy", out.data(), {size_t(s.N), size_t(s.K), size_t(s.P()), size_t(s.Q())});
          std::printf("  wrote x.npy, w.npy, y_cudnn.npy, y_06.npy to %s\n", npy_dir.c_str());
        } catch (const std::exception& e) { cli::usage_error(kProg, std::string("--save-npy: ") + e.what()); }
      }
    }

    // Timing: cuDNN's pick first (the denominator), then every variant, re-checked afterwards.
    if (!verify_mode) {
      std::vector<long long> shp = {s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.pad, s.stride, s.dil};
      std::string best_name;  // cuDNN's fastest algorithm, named in every row's "% of cuDNN"
      auto row = [&](const std::string& name, const timing::Stats& t, double ref_ms, json::Value extra) {
        results::Bench r;
        r.name = name;
        r.dtype = "fp32";
        r.shape = shp;
        r.ms = t.median_ms;
        r.min_ms = t.min_ms;
        r.max_ms = t.max_ms;
        r.reps = t.reps;
        if (memory_bound) {
          r.gbps = s.min_bytes() / (t.median_ms * 1e-3) / 1e9;
          r.peak = copy_peak;
          r.peak_name = "measured copy bandwidth";
        } else {
          r.tflops = s.flops() / (t.median_ms * 1e-3) / 1e12;
          r.peak = fp32_peak;
          r.peak_name = "measured FP32 FMA ceiling";
        }
        if (std::isfinite(ref_ms)) {
          r.ref = "cudnn " + best_name;
          r.ref_ms = ref_ms;
        }
        r.extra = extra;
        res.add(r);
        std::printf("  %-44s %10.1f us %9.2f %-7s %11s %9.1f%%\n", name.c_str(), r.ms * 1e3, r.rate(),
                    memory_bound ? "GB/s" : "TFLOP/s",
                    std::isfinite(ref_ms) ? (std::to_string(r.pct_of_ref()).substr(0, 5) + "%").c_str() : "–",
                    r.pct_of_peak());
      };
      std::printf("  %-44s %13s %17s %11s %10s\n", "variant", "time", "rate", "% of cuDNN", "% of peak");
      // cuDNN's best: every algorithm Find ran, re-timed with our harness (Find times each once,
      // which is noisy for a problem of a few microseconds); the fastest wins.
      const std::vector<dnn::Timed> retimed_all = dnn::retime(handle, dd, dnn::Dir::Fwd, found, ops, dws, offer, topt);
      const dnn::Timed& best = retimed_all.front();
      const timing::Stats tc = best.t;
      best_name = best.algo.name;
      json::Value retimed = json::Value::array();
      for (const auto& r : retimed_all) {
        json::Value a = json::Value::object();
        a["algo"] = r.algo.name;
        a["ms"] = r.t.median_ms;
        retimed.push(a);
      }
      std::printf("  cuDNN re-timed: fastest is %s (Find's first choice was %s)\n", best.algo.name.c_str(),
                  pick->name.c_str());
      poison(b.yref, s.y_elems() * 4);
      CUDNN_CHECK(dnn::run(handle, dd, dnn::Dir::Fwd, best.algo.algo, best.algo.math, ops, dws.get(best.algo.workspace),
                           best.algo.workspace));
      CUDA_CHECK(cudaDeviceSynchronize());
      res.add(
          ref.check("cudnn " + best.algo.name + " (fastest re-timed) " + s.str(), to_host(b.yref, s.y_elems()), tol));
      json::Value ex = json::Value::object();
      ex["algo"] = best.algo.name;
      ex["find_first_choice"] = pick->name;
      ex["workspace_bytes"] = (long long)best.algo.workspace;
      ex["retimed"] = retimed;
      row("cudnn_best [" + best.algo.name + "]", tc, NAN, ex);
      if (memory_bound) {
        // The practical floor at this size: copying x into y moves the same bytes, with the
        // same launch and drain costs, and computes nothing.
        timing::Stats tf = timing::time_gpu(
            [&] {
              CUDA_CHECK(
                  cudaMemcpyAsync(b.y, b.x, std::min(s.x_elems(), s.y_elems()) * 4, cudaMemcpyDeviceToDevice, 0));
            },
            topt);
        std::printf("  (floor from the measured copy bandwidth: %.1f us; a cudaMemcpy of the same bytes: %.1f us)\n",
                    s.min_bytes() / (copy_peak * 1e9) * 1e6, tf.median_ms * 1e3);
        json::Value fe = json::Value::object();
        fe["note"] = "cudaMemcpy of x into y: the same bytes moved, nothing computed";
        row("copy_floor [cudaMemcpy same bytes]", tf, tc.median_ms, fe);
      }
      for (const Variant* v : ok_variants) {
        v->prepare(s, b);
        poison(b.y, s.y_elems() * 4);
        timing::Stats t = timing::time_gpu([&] { v->run(s, b, 0); }, topt);
        json::Value e = json::Value::object();
        if (v->id == 5) e["im2col_bytes"] = (long long)im2col_bytes(s);
        if (v->id == 7) e["workspace_bytes"] = (long long)wino::workspace_bytes(s);
        row(v->name, t, tc.median_ms, e);
        CUDA_CHECK(cudaDeviceSynchronize());
        verify::Check c = verify::compare(v->name + " " + s.str() + " after timing vs cuDNN",
                                          to_host(b.y, s.y_elems()).data(), ycudnn.data(), s.y_elems(), tol);
        if (!c.passed) verify::print(c);
        res.add_quiet(c);
      }
      if (wanted(5) && b.ws_bytes)
        std::printf("  (im2col's column matrix for this shape: %.1f MB, %.1fx the input)\n", im2col_bytes(s) / 1e6,
                    double(im2col_bytes(s)) / (4.0 * s.x_elems()));
    }
    CUDA_CHECK(cudaFree(b.x));
    CUDA_CHECK(cudaFree(b.w));
    CUDA_CHECK(cudaFree(b.y));
    CUDA_CHECK(cudaFree(b.yref));
    if (b.ws) CUDA_CHECK(cudaFree(b.ws));
    b.ws = nullptr;
    first_shape = false;
  }
  res.config["cudnn"] = cudnn_choices;
  res.config["refused"] = refused;
  CUBLAS_CHECK(cublasDestroy(b.blas));
  CUDNN_CHECK(cudnnDestroy(handle));

  return res.finish(kProg, json_path);
}
