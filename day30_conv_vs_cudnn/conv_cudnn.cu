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
// One file per part: survey.cuh (1 and 2), contest.cuh (3), refusals.cuh (4); conv_ctx.cuh holds what
// they share. Kernels: day20's (../day20_conv_slow_fast/kernels, shared by include path, not copied) and
// kernels/8_strip_tuned.cuh (day20's register strip, generalized and autotuned for case (a)).
// Each contest's headline (our best against cuDNN's best) is the median of interleaved repeats
// (timing::interleaved), with their min-max.
//
// Build and run
//   make                       # in this folder
//   make run                   # the survey, the contest and the refusals on the default shapes
//   ./build/conv_cudnn --verify            # every algorithm and kernel checked on odd shapes; no timing
//   ./build/conv_cudnn --bench --json ../results/{gpu}/day30_conv_vs_cudnn.json
//   ./build/conv_cudnn --conv 8,32,28,28,64,3,3,1,1,1   # survey one more shape: N,C,H,W,K,R,S,pad,stride,dil
//   ./build/conv_cudnn --workspace-mib 0               # what cuDNN can do with no workspace at all
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "ceilings.cuh"
#include "cli.h"
#include "contest.cuh"
#include "conv_ctx.cuh"
#include "env.cuh"
#include "refusals.cuh"
#include "results.h"
#include "survey.cuh"

static const char* kProg = "conv_cudnn";

struct Opts {
  cli::Standard st;
  ConvShape extra{};
  bool has_extra = false, no_contest = false;
  long long ws_mib = 0;
};

static Opts parse(int argc, char** argv) {
  cli::Args args(argc, argv, kProg,
                 "cuDNN's convolution algorithms surveyed, checked and raced against hand-written kernels");
  Opts o;
  o.st = cli::standard_flags(args, 20261130);
  const std::vector<long long> conv_arg =
      args.int_list("conv", {}, 0, 1 << 20, "survey one more shape: N,C,H,W,K,R,S,pad,stride,dil");
  o.ws_mib = args.integer("workspace-mib", 4096, 0, 1 << 20,
                          "the most workspace offered to cuDNN, MiB (also capped at half of free memory)");
  o.no_contest = args.flag("no-contest", "skip the contest (survey and refusals only)");
  args.finish();
  o.st.validate(kProg);
  results::require_outputs(kProg, o.st);
  o.has_extra = !conv_arg.empty();
  if (o.has_extra) {
    if (conv_arg.size() != 10) cli::usage_error(kProg, "--conv expects 10 numbers: N,C,H,W,K,R,S,pad,stride,dil");
    const auto& c = conv_arg;
    o.extra = ConvShape{int(c[0]), int(c[1]), int(c[2]), int(c[3]), int(c[4]),
                        int(c[5]), int(c[6]), int(c[7]), int(c[8]), int(c[9])};
    const std::string bad = o.extra.invalid();
    if (!bad.empty()) cli::usage_error(kProg, "--conv " + o.extra.str() + ": " + bad);
  }
  return o;
}

// Parts 1 and 2: descriptors, then every algorithm of each direction on each configuration.
static void run_survey(Ctx& cx, const Opts& o) {
  std::printf("\n== descriptors, as cuDNN stored them\n");
  show_descriptors(cx, {1, 64, 56, 56, 64, 3, 3, 1, 1, 1}, kFp32Fma);
  show_descriptors(cx, {1, 64, 56, 56, 64, 3, 3, 1, 1, 1}, kFp16Nhwc);
  const bool verify = o.st.verify, small = o.st.small;
  const std::vector<Config> all_cfgs = {kFp32Fma, kFp32Default, kFp32Nhwc, kFp16Nhwc, kBf16Nhwc};
  std::vector<ConvShape> fwd_shapes, bwd_shapes;
  if (verify) {
    // Odd sizes, stride, dilation, a 5x5 and a 1x1: not tile multiples anywhere.
    fwd_shapes = {{2, 3, 17, 19, 4, 3, 3, 1, 2, 1},
                  {1, 5, 23, 21, 7, 5, 5, 2, 1, 1},
                  {3, 8, 13, 11, 6, 3, 3, 1, 1, 2},
                  {2, 16, 9, 9, 24, 1, 1, 0, 1, 1}};
    bwd_shapes = {{2, 3, 17, 19, 4, 3, 3, 1, 2, 1}, {1, 8, 15, 13, 12, 3, 3, 1, 1, 1}};
    if (small) fwd_shapes.resize(1), bwd_shapes.resize(1);  // (compute-sanitizer runs every algorithm 10-100x slower)
  } else {
    fwd_shapes = {{32, 64, 56, 56, 64, 3, 3, 1, 1, 1}};
    bwd_shapes = {{32, 64, 56, 56, 64, 3, 3, 1, 1, 1}};
  }
  if (o.has_extra) fwd_shapes.push_back(o.extra), bwd_shapes.push_back(o.extra);
  const std::vector<Config> fwd_cfgs = small ? std::vector<Config>{kFp32Fma, kFp16Nhwc} : all_cfgs;
  const std::vector<Config> bwd_cfgs = small ? std::vector<Config>{kFp32Fma} : std::vector<Config>{kFp32Fma, kFp16Nhwc};
  for (const ConvShape& s : fwd_shapes)
    for (const Config& c : fwd_cfgs) survey(cx, s, c, Dir::Fwd);
  for (const ConvShape& s : bwd_shapes)
    for (const Config& c : bwd_cfgs)
      for (Dir d : {Dir::BwdData, Dir::BwdFilter}) survey(cx, s, c, d);
}

// Part 3: the contest cases, one workspace for day20's im2col and Winograd sized for all of them.
static void run_contest(Ctx& cx, const Opts& o) {
  std::vector<std::pair<std::string, ConvShape>> cases;
  if (o.st.verify) {
    // Odd heights, widths that are multiples of 8 but not of the block's columns, a batch.
    cases = {{"(a) odd", {2, 1, 37, 72, 1, 3, 3, 1, 1, 1}},
             {"(a) odd", {1, 1, 5, 200, 1, 3, 3, 1, 1, 1}},
             {"(b) odd", {2, 16, 13, 11, 20, 3, 3, 1, 1, 1}}};
    if (o.st.small) cases = {cases[0], cases[2]};
  } else {
    cases = {{"(a)", {1, 1, 1024, 2048, 1, 3, 3, 1, 1, 1}},
             {"(b1)", {1, 64, 56, 56, 64, 3, 3, 1, 1, 1}},
             {"(b2)", {32, 64, 56, 56, 64, 3, 3, 1, 1, 1}},
             {"(b3)", {32, 256, 14, 14, 256, 3, 3, 1, 1, 1}},
             {"(b4)", {32, 3, 224, 224, 64, 7, 7, 3, 2, 1}}};
  }
  size_t cws_bytes = 0;
  for (auto& c : cases) {
    std::string why;
    cws_bytes = std::max(cws_bytes, im2col_bytes(c.second));
    if (supports_07(c.second, &why)) cws_bytes = std::max(cws_bytes, wino::workspace_bytes(c.second));
  }
  DeviceBuffer cws(std::min(cws_bytes, cx.ws_limit));
  std::vector<Custom> cands = contenders(cx, cws);
  for (auto& c : cases) contest(cx, c.first, c.second, cands);
}

static void print_contest_table(const Ctx& cx) {
  std::printf("\n== the contest, fp32, same inputs, outputs checked first (by: median of %d interleaved, min-max)\n",
              kRatioRepeats);
  std::printf("  %-6s %-26s %-36s %9s %-30s %9s %-7s %s\n", "case", "shape", "our best", "us", "cuDNN's best", "us",
              "winner", "by");
  for (const auto& r : cx.table) {
    const bool custom = r.speedup > 1;
    std::printf("  %-6s %-26s %-36s %9.1f %-30s %9.1f %-7s %.2fx (%.2f-%.2f)\n", r.label.c_str(), r.shape.c_str(),
                r.custom.c_str(), r.custom_ms * 1e3, r.cudnn.c_str(), r.cudnn_ms * 1e3, r.winner.c_str(),
                custom ? r.speedup : 1 / r.speedup, custom ? r.speedup_min : 1 / r.speedup_max,
                custom ? r.speedup_max : 1 / r.speedup_min);
  }
}

int main(int argc, char** argv) {
  const Opts o = parse(argc, argv);
  results::Results res("day30_conv_vs_cudnn", kProg);
  env::begin(res, o.st);
  if (o.has_extra)
    env::require_memory(kProg, 4 * (o.extra.x_elems() + o.extra.w_elems() + o.extra.y_elems()) * 2,
                        "--conv " + o.extra.str() + " (operands and result, fp32, twice)");
  res.config["workspace_limit_mib"] = o.ws_mib;
  // How many algorithms each direction has: the constants of the cuDNN this was built against.
  res.config["algo_count"] = json::Value::object();
  res.config["algo_count"]["forward"] = int(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  res.config["algo_count"]["backward_data"] = int(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  res.config["algo_count"]["backward_filter"] = int(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  verify::Rng rng{uint64_t(o.st.seed)};
  Ctx cx;
  cx.res = &res;
  cx.rng = &rng;
  cx.timed = !o.st.verify;
  cx.ws_limit = dnn::workspace_budget(size_t(o.ws_mib) << 20);
  CUDNN_CHECK(cudnnCreate(&cx.dnn));
  CUBLAS_CHECK(cublasCreate(&cx.blas));
  CUBLAS_CHECK(cublasSetMathMode(cx.blas, CUBLAS_DEFAULT_MATH));  // fp32 FMA for day20's im2col/Winograd
  cx.topt = timing::flushed(50, 400);                             // inputs come from device memory every repeat
  std::printf("workspace offered to cuDNN: up to %.0f MiB\n", cx.ws_limit / 1048576.0);
  if (cx.timed) {
    const ceilings::Peaks p = ceilings::measure_and_record(res);
    cx.copy_peak = p.copy_gbps, cx.fp32_peak = p.fp32_tflops, cx.tensor_peak = p.tensor_tflops;
  }
  run_survey(cx, o);
  if (!o.no_contest) run_contest(cx, o);
  refusals(cx);
  if (cx.timed && !o.no_contest) print_contest_table(cx);
  res.config["descriptors"] = cx.descriptors;
  res.config["survey"] = cx.survey;
  res.config["contest"] = cx.contest;
  res.config["refusals"] = cx.refusals;
  CUBLAS_CHECK(cublasDestroy(cx.blas));
  CUDNN_CHECK(cudnnDestroy(cx.dnn));
  return res.finish(kProg, o.st.json);
}
