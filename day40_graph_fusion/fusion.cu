// day40_graph_fusion/fusion.cu: cuDNN's graph (backend) API from the raw calls, the engines it
// offers made visible, and what operation fusion buys, measured.
//
//
// Three patterns, one file each, each as one fused cuDNN graph against the same math unfused (and,
// where it teaches something, a hand-written or library-fused version):
//   1. chain.cuh        pointwise chain  y = sigmoid(a + b*c)   unfused: three single-op graphs, two
//                       intermediates in memory; hand-written: one kernel
//   2. conv_fusion.cuh  conv + bias + ReLU (64x56x56, 64 3x3 filters, N = 1 and 32), and ReLU then conv
//                       unfused: legacy cudnnConvolutionForward (its fastest algorithm) + cudnnAddTensor
//                       + cudnnActivationForward
//   3. mlp_fusion.cuh   matmul + bias + GELU (GPT MLP: 16384x384 . 384x1536)
//                       unfused: cuBLAS GEMM + a bias/GELU kernel that runs near copy bandwidth;
//                       library-fused: cuBLASLt's GELU_BIAS epilogue
// fusion_ctx.cuh holds what they share (plan cache, engines, results rows). Every result is checked
// against a CPU reference in double (sampled on large shapes) and the fused result against the
// unfused one on the full output. Every fused-vs-unfused ratio is the median of interleaved repeats
// (timing::interleaved), with their min-max; a speedup goal is met only if the min meets it.
//
// Build and run
//   make && ./build/fusion                 # all patterns, default shapes
//   ./build/fusion --verify                # odd shapes, checks only
//   ./build/fusion --only conv --engines   # one pattern, every engine the heuristics offer, tried
//   ./build/fusion --bench --json ../results/{gpu}/day40_graph_fusion.json
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ceilings.cuh"
#include "chain.cuh"
#include "cli.h"
#include "conv_fusion.cuh"
#include "env.cuh"
#include "fusion_ctx.cuh"
#include "mlp_fusion.cuh"
#include "results.h"
#include "timing.cuh"

static const char* kProg = "fusion";

struct Opts {
  cli::Standard st;
  std::string only;
  ht::Dims pw;
  bool engines = false;
};

static Opts parse(int argc, char** argv) {
  cli::Args args(argc, argv, kProg,
                 "cuDNN graph API: three fused patterns against the same math unfused, engines made visible");
  Opts o;
  o.st = cli::standard_flags(args, 20261140);
  // An empty value ("--only=") is refused by cli::Args::str: "all" is the flag left out.
  o.only = args.str("only", "", "one pattern: pointwise, conv or matmul");
  const std::vector<long long> pw =
      args.int_list("pw-shape", {}, 1, 1 << 30, "the pointwise tensor N,C,H,W (default 64,64,128,128 = 2^26)");
  o.engines = args.flag(
      "engines",
      "try every engine configuration the heuristics offer (build times, workspace), not just the first that works");
  args.finish();
  o.st.validate(kProg);
  if (!o.only.empty() && o.only != "pointwise" && o.only != "conv" && o.only != "matmul")
    cli::usage_error(kProg, "--only must be pointwise, conv or matmul; got '" + o.only + "'");
  if (!pw.empty() && pw.size() != 4) cli::usage_error(kProg, "--pw-shape expects four numbers N,C,H,W");
  o.pw = o.st.verify ? ht::Dims{3, 5, 37, 41} : ht::Dims{64, 64, 128, 128};
  if (!pw.empty()) {
    const double e = double(pw[0]) * pw[1] * pw[2] * pw[3];
    if (e >= 2147483648.0) cli::usage_error(kProg, "--pw-shape has more than 2^31 elements");
    o.pw = {int(pw[0]), int(pw[1]), int(pw[2]), int(pw[3])};
  }
  results::require_outputs(kProg, o.st);
  return o;
}

static void run_parts(Ctx& cx, const Opts& o) {
  auto want = [&](const char* p) { return o.only.empty() || o.only == p; };
  if (want("pointwise"))
    for (cudnnDataType_t dt : {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16}) pointwise_chain(cx, o.pw, dt);
  if (want("conv")) {
    std::vector<ConvShape> shapes = {{1, 64, 56, 56, 64, 3, 3, 1, 1, 1}, {32, 64, 56, 56, 64, 3, 3, 1, 1, 1}};
    if (o.st.verify) shapes = {{2, 8, 13, 11, 16, 3, 3, 1, 1, 1}, {1, 16, 9, 10, 8, 3, 3, 1, 1, 1}};
    if (o.st.small) shapes.resize(1);
    for (const ConvShape& s : shapes) {
      conv_patterns(cx, s, CUDNN_DATA_FLOAT, false);
      conv_patterns(cx, s, CUDNN_DATA_HALF, true);
    }
  }
  if (want("matmul")) {
    const int M = o.st.verify ? 136 : 16384, N = o.st.verify ? 200 : 1536,
              K = o.st.verify ? 72 : 384;  // verify: not multiples of 64/128
    for (cudnnDataType_t dt : {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT}) matmul_bias_gelu(cx, M, N, K, dt);
  }
}

static void print_table(const Ctx& cx) {
  std::printf("\n== fused vs unfused (speedup: median of %d interleaved repeats, min-max)\n", kRatioRepeats);
  std::printf("  %-26s %-6s %-34s %10s %10s %18s  %s\n", "pattern", "dtype", "shape", "fused us", "unfused us",
              "speedup", "engine (kind, tensor-core tag), plan build");
  for (const auto& l : cx.table)
    std::printf("  %-26s %-6s %-34s %10.1f %10.1f %6.2fx (%.2f-%.2f)  %lld (%s, %s), %.0f ms\n", l.pattern.c_str(),
                l.dtype.c_str(), l.shape.c_str(), l.fused_ms * 1e3, l.unfused_ms * 1e3, l.pct_median / 100,
                l.pct_min / 100, l.pct_max / 100, l.engine, l.rtc ? "runtime-compiled" : "pre-compiled",
                l.tensor_core ? "tensor core" : "no tensor-core tag", l.build_ms);
}

// The plan cache at work: asking again for a graph that was built costs a map lookup, not a build.
// The lookup is timed on the host (kLookups of them, median) and recorded.
static void plan_cache_demo(Ctx& cx) {
  constexpr int kLookups = 101;
  std::string why;
  const int builds = cx.plans.builds();
  std::vector<double> ms;
  cg::Graph* again = nullptr;
  for (int i = 0; i < kLookups; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    again = plan(
        cx, cx.first_key,
        [&]() -> std::unique_ptr<cg::Graph> {
          std::fprintf(stderr, "error: the plan cache rebuilt a cached graph\n");
          std::exit(cli::kFail);
        },
        &why);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const timing::Stats t = timing::summarize(ms);
  add_check(cx, verify::fact("plan cache returns the cached plan without rebuilding", cx.plans.builds() == builds,
                             "exact", std::to_string(kLookups) + " lookups"));
  cx.res->config["plan_cache"]["lookup_us_median"] = t.median_ms * 1e3;
  cx.res->config["plan_cache"]["lookup_us_min"] = t.min_ms * 1e3;
  cx.res->config["plan_cache"]["lookup_us_max"] = t.max_ms * 1e3;
  cx.res->config["plan_cache"]["lookups"] = kLookups;
  if (again)
    std::printf("\nplan cache: \"%s\" requested again: %.1f us median of %d lookups (its first build took %.0f ms)\n",
                cx.first_key.c_str(), t.median_ms * 1e3, kLookups, again->chosen().build_ms);
}

int main(int argc, char** argv) {
  const Opts o = parse(argc, argv);
  results::Results res("day40_graph_fusion", kProg);
  const int dev = env::begin(res, o.st);
  env::require_memory(kProg, 6 * o.pw.count() * 4, "the pointwise tensors (fp32: a, b, c, y and two temporaries)");
  verify::Rng rng{uint64_t(o.st.seed)};
  Ctx cx;
  cx.res = &res;
  cx.rng = &rng;
  cx.timed = !o.st.verify;
  cx.explore = o.engines || o.st.bench;
  CUDA_CHECK(cudaDeviceGetAttribute(&cx.sms, cudaDevAttrMultiProcessorCount, dev));
  CUDNN_CHECK(cudnnCreate(&cx.dnn));
  CUBLAS_CHECK(cublasCreate(&cx.blas));
  CUBLAS_CHECK(cublasLtCreate(&cx.lt));
  cx.topt = timing::flushed(50, 400, 3);
  if (cx.timed) {
    const ceilings::Peaks p = ceilings::measure_and_record(res);
    cx.copy_peak = p.copy_gbps, cx.fp32_peak = p.fp32_tflops, cx.tensor_peak = p.tensor_tflops;
  }
  run_parts(cx, o);
  if (cx.timed && cx.patterns.size()) print_table(cx);
  res.config["plan_cache"] = json::Value::object();
  if (!cx.table.empty() || o.st.verify) plan_cache_demo(cx);
  res.config["patterns"] = cx.patterns;
  res.config["engines"] = cx.engines;
  res.config["plan_cache"]["requests"] = cx.plan_requests;
  res.config["plan_cache"]["builds"] = cx.plans.builds();
  std::printf("\nplan cache: %d graphs requested, %d built (each shape's plan is built once and reused)\n",
              cx.plan_requests, cx.plans.builds());
  CUBLAS_CHECK(cublasLtDestroy(cx.lt));
  CUBLAS_CHECK(cublasDestroy(cx.blas));
  CUDNN_CHECK(cudnnDestroy(cx.dnn));
  return res.finish(kProg, o.st.json);
}
