// day30_conv_vs_cudnn/toolbox.cu: the rest of cuDNN's classic toolbox, each call checked against a
// CPU reference and timed against the memory-bandwidth floor.
//
// Covered (forward and backward where training needs one):
//   activation   ReLU, sigmoid, tanh, ELU (alpha 1), clipped ReLU (ceiling 6)
//   pooling      max 3x3 stride 2 pad 1 (ResNet's stem), average 2x2 stride 2 (padding excluded)
//   softmax      accurate and log; instance mode (one distribution per image: logits) and channel
//                mode (one per pixel, over the channels)
//   batch norm   spatial: training forward (batch statistics, saved mean and inverse std, running
//                averages), inference forward, backward (dx, dscale, dbias)
//   transform    cudnnTransformTensor NCHW -> NHWC and back
// All of these are memory-bound: a handful of flops per byte. So each is timed against the
// fewest bytes it must move at the copy bandwidth measured in the same run.
//
// Most of these entry points are marked deprecated in cuDNN 9 (the graph API of day40 replaces
// them); they still ship, and they are what most existing code calls.
//
// Build and run
//   make && ./build/toolbox            # default sizes
//   ./build/toolbox --verify           # odd sizes, checks only
//   ./build/toolbox --bench --json ../results/{gpu}/day30_conv_vs_cudnn-toolbox.json
//   ./build/toolbox --only softmax     # one family: activation, pooling, softmax, batchnorm, transform
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "ceilings.cuh"
#include "check.cuh"
#include "cli.h"
#include "conv_shape.h"
#include "env.cuh"
#include "host_tensor.cuh"
#include "results.h"
#include "timing.cuh"
#include "toolbox_ref.h"
#include "verify.h"

static const char* kProg = "toolbox";
using tbx::T4;

struct Ctx {
  cudnnHandle_t h = nullptr;
  results::Results* res = nullptr;
  verify::Rng* rng = nullptr;
  bool timed = false;
  timing::Options topt;
  double copy_peak = NAN;
};

// A tensor descriptor that destroys itself.
struct Tensor {
  cudnnTensorDescriptor_t d = nullptr;
  explicit Tensor(T4 t, cudnnTensorFormat_t fmt = CUDNN_TENSOR_NCHW) {
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, fmt, CUDNN_DATA_FLOAT, t.n, t.c, t.h, t.w));
  }
  ~Tensor() { cudnnDestroyTensorDescriptor(d); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
};

// fp32 arrays to the GPU (common/host_tensor.cuh).
static DeviceBuffer upload(const std::vector<float>& v) { return ht::upload(v, CUDNN_DATA_FLOAT); }
static std::vector<float> random_vec(Ctx& cx, size_t n, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  verify::fill_uniform(v, *cx.rng, lo, hi);
  return v;
}
static std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// fp32 results of a handful of operations on O(1) values: the tolerance follows the result's
// own scale (a softmax over 10^5 values is ~1e-5 everywhere; an absolute 1e-4 would pass zeros).
static verify::Check check(const std::string& name, const DeviceBuffer& out, const std::vector<double>& ref) {
  double m = 0;
  for (double r : ref) m = std::max(m, std::fabs(r));
  return verify::compare(name, to_host(out.as<float>(), ref.size()).data(), ref.data(), ref.size(),
                         verify::kFp32.scaled(m));
}

// One operation: outputs poisoned, run once, checked; then (not in --verify) timed with L2
// flushed, and checked again. `bytes`: the fewest bytes the operation must read and write.
static void measure(Ctx& cx, const std::string& name, T4 shape, double bytes,
                    const std::function<void()>& poison_outputs, const std::function<void()>& run,
                    const std::function<std::vector<verify::Check>(bool)>& checks) {
  poison_outputs();
  run();
  CUDA_CHECK(cudaDeviceSynchronize());
  bool ok = true;
  for (const verify::Check& c : checks(false)) {
    cx.res->add_quiet(c);
    ok = ok && c.passed;
    if (!c.passed) verify::print(c);
  }
  if (!cx.timed) {
    std::printf("  %-44s %s\n", name.c_str(), ok ? "PASS" : "FAIL");
    return;
  }
  const timing::Stats t = timing::time_gpu(run, cx.topt);
  CUDA_CHECK(cudaDeviceSynchronize());
  for (const verify::Check& c : checks(true)) {
    verify::Check a = c;
    a.name += " after timing";
    cx.res->add_quiet(a);
    ok = ok && a.passed;
    if (!a.passed) verify::print(a);
  }
  results::Bench r;
  r.name = name;
  r.dtype = "fp32";
  r.shape = {shape.n, shape.c, shape.h, shape.w};
  r.ms = t.median_ms, r.min_ms = t.min_ms, r.max_ms = t.max_ms, r.reps = t.reps;
  r.gbps = bytes / (t.median_ms * 1e-3) / 1e9;
  r.peak = cx.copy_peak;
  r.peak_name = "measured copy bandwidth";
  r.ref = "memory floor (fewest bytes at the copy bandwidth)";
  r.ref_ms = bytes / (cx.copy_peak * 1e9) * 1e3;
  json::Value e = json::Value::object();
  e["min_bytes"] = bytes;
  r.extra = e;
  cx.res->add(r);
  std::printf("  %-44s %s %9.1f us %8.0f GB/s %6.1f%% of copy bandwidth (floor %.1f us)\n", name.c_str(),
              ok ? "PASS" : "FAIL", r.ms * 1e3, r.gbps, r.pct_of_peak(), r.ref_ms * 1e3);
}

// ---- Activations ----------------------------------------------------------------------------------

static void activations(Ctx& cx, T4 d) {
  std::printf("\n== activation forward and backward, %dx%dx%dx%d\n", d.n, d.c, d.h, d.w);
  struct A {
    const char* name;
    tbx::Act act;
    cudnnActivationMode_t mode;
    double coef;
  };
  const A acts[] = {{"relu", tbx::Act::Relu, CUDNN_ACTIVATION_RELU, 0.0},
                    {"sigmoid", tbx::Act::Sigmoid, CUDNN_ACTIVATION_SIGMOID, 0.0},
                    {"tanh", tbx::Act::Tanh, CUDNN_ACTIVATION_TANH, 0.0},
                    {"elu (alpha 1)", tbx::Act::Elu, CUDNN_ACTIVATION_ELU, 1.0},
                    {"clipped relu (ceiling 6)", tbx::Act::Clipped, CUDNN_ACTIVATION_CLIPPED_RELU, 6.0}};
  Tensor td(d);
  const size_t n = d.count();
  for (const A& a : acts) {
    cudnnActivationDescriptor_t ad;
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&ad));
    CUDNN_CHECK(cudnnSetActivationDescriptor(ad, a.mode, CUDNN_PROPAGATE_NAN, a.coef));
    // Inputs over [-8, 8]: past the clipped ReLU's ceiling and deep into sigmoid's tails.
    const std::vector<float> hx = random_vec(cx, n, -8.f, 8.f), hdy = random_vec(cx, n);
    const std::vector<double> yref = tbx::act_fwd(a.act, hx, a.coef), dxref = tbx::act_bwd(a.act, hx, hdy, a.coef);
    DeviceBuffer x = upload(hx), dy = upload(hdy), y(n * 4), dx(n * 4);
    const float one = 1.f, zero = 0.f;
    measure(
        cx, std::string("activation fwd ") + a.name, d, 8.0 * n, [&] { poison(y.as(), y.bytes()); },
        [&] { CUDNN_CHECK(cudnnActivationForward(cx.h, ad, &one, td.d, x.as(), &zero, td.d, y.as())); },
        [&](bool) { return std::vector<verify::Check>{check(std::string("activation fwd ") + a.name, y, yref)}; });
    // The backward takes y, dy and x; it needs dy and one of x or y: 3 tensors moved at least.
    measure(
        cx, std::string("activation bwd ") + a.name, d, 12.0 * n, [&] { poison(dx.as(), dx.bytes()); },
        [&] {
          CUDNN_CHECK(
              cudnnActivationBackward(cx.h, ad, &one, td.d, y.as(), td.d, dy.as(), td.d, x.as(), &zero, td.d, dx.as()));
        },
        [&](bool) { return std::vector<verify::Check>{check(std::string("activation bwd ") + a.name, dx, dxref)}; });
    CUDNN_CHECK(cudnnDestroyActivationDescriptor(ad));
  }
}

// ---- Pooling --------------------------------------------------------------------------------------

static void pooling(Ctx& cx, T4 d) {
  std::printf("\n== pooling forward and backward, input %dx%dx%dx%d\n", d.n, d.c, d.h, d.w);
  struct P {
    const char* name;
    tbx::Pool pl;
    cudnnPoolingMode_t mode;
  };
  const P pools[] = {
      {"max 3x3 s2 p1", {3, 3, 1, 2, true}, CUDNN_POOLING_MAX},
      {"avg 2x2 s2 (exclude padding)", {2, 2, 0, 2, false}, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING}};
  for (const P& p : pools) {
    cudnnPoolingDescriptor_t pd;
    CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pd));
    CUDNN_CHECK(cudnnSetPooling2dDescriptor(pd, p.mode, CUDNN_NOT_PROPAGATE_NAN, p.pl.R, p.pl.S, p.pl.pad, p.pl.pad,
                                            p.pl.stride, p.pl.stride));
    Tensor tx(d);
    int n, c, h, w;
    CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(pd, tx.d, &n, &c, &h, &w));
    const T4 o = p.pl.out(d);
    if (n != o.n || c != o.c || h != o.h || w != o.w) {
      std::fprintf(stderr, "error: cuDNN's pooling output %dx%dx%dx%d differs from ours %dx%dx%dx%d\n", n, c, h, w, o.n,
                   o.c, o.h, o.w);
      std::exit(cli::kFail);
    }
    Tensor ty(o);
    const std::vector<float> hx = random_vec(cx, d.count()), hdy = random_vec(cx, o.count());
    const std::vector<double> yref = tbx::pool_fwd(p.pl, d, hx), dxref = tbx::pool_bwd(p.pl, d, hx, hdy);
    // The backward gets the forward's y; hand it the reference's (exactly what cuDNN computed
    // for max, within rounding for average, which the backward does not read).
    DeviceBuffer x = upload(hx), dy = upload(hdy), y(o.count() * 4), yin = upload(to_float(yref)), dx(d.count() * 4);
    const float one = 1.f, zero = 0.f;
    const std::string fn = std::string("pool fwd ") + p.name, bn = std::string("pool bwd ") + p.name;
    measure(
        cx, fn, d, 4.0 * (d.count() + o.count()), [&] { poison(y.as(), y.bytes()); },
        [&] { CUDNN_CHECK(cudnnPoolingForward(cx.h, pd, &one, tx.d, x.as(), &zero, ty.d, y.as())); },
        [&](bool) { return std::vector<verify::Check>{check(fn, y, yref)}; });
    // Max reads dy, y and x to find each window's winner; average needs only dy.
    const double bbytes = p.pl.max ? 4.0 * (2 * o.count() + 2 * d.count()) : 4.0 * (o.count() + d.count());
    measure(
        cx, bn, d, bbytes, [&] { poison(dx.as(), dx.bytes()); },
        [&] {
          CUDNN_CHECK(
              cudnnPoolingBackward(cx.h, pd, &one, ty.d, yin.as(), ty.d, dy.as(), tx.d, x.as(), &zero, tx.d, dx.as()));
        },
        [&](bool) { return std::vector<verify::Check>{check(bn, dx, dxref)}; });
    CUDNN_CHECK(cudnnDestroyPoolingDescriptor(pd));
  }
}

// ---- Softmax --------------------------------------------------------------------------------------

static void softmax(Ctx& cx, T4 d, bool channel) {
  std::printf("\n== softmax (%s mode) forward and backward, %dx%dx%dx%d\n", channel ? "channel" : "instance", d.n, d.c,
              d.h, d.w);
  Tensor td(d);
  const size_t n = d.count();
  for (bool log : {false, true}) {
    const cudnnSoftmaxAlgorithm_t algo = log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
    const cudnnSoftmaxMode_t mode = channel ? CUDNN_SOFTMAX_MODE_CHANNEL : CUDNN_SOFTMAX_MODE_INSTANCE;
    // Logits over [-10, 10]: large enough that a softmax without the max subtraction would lose digits.
    const std::vector<float> hx = random_vec(cx, n, -10.f, 10.f), hdy = random_vec(cx, n);
    const std::vector<double> yref = tbx::softmax_fwd(d, hx, log, channel);
    const std::vector<float> yin = to_float(yref);
    const std::vector<double> dxref = tbx::softmax_bwd(d, yin, hdy, log, channel);
    DeviceBuffer x = upload(hx), dy = upload(hdy), y(n * 4), yd = upload(yin), dx(n * 4);
    const float one = 1.f, zero = 0.f;
    const std::string tag = std::string(log ? "log-softmax" : "softmax") + (channel ? " channel" : " instance");
    measure(
        cx, tag + " fwd", d, 8.0 * n, [&] { poison(y.as(), y.bytes()); },
        [&] { CUDNN_CHECK(cudnnSoftmaxForward(cx.h, algo, mode, &one, td.d, x.as(), &zero, td.d, y.as())); },
        [&](bool) { return std::vector<verify::Check>{check(tag + " fwd", y, yref)}; });
    measure(
        cx, tag + " bwd", d, 12.0 * n, [&] { poison(dx.as(), dx.bytes()); },
        [&] {
          CUDNN_CHECK(cudnnSoftmaxBackward(cx.h, algo, mode, &one, td.d, yd.as(), td.d, dy.as(), &zero, td.d, dx.as()));
        },
        [&](bool) { return std::vector<verify::Check>{check(tag + " bwd", dx, dxref)}; });
  }
}

// ---- Batch normalization -------------------------------------------------------------------------

// mode: CUDNN_BATCHNORM_SPATIAL, or SPATIAL_PERSISTENT (a faster kernel that may keep data on
// chip between the statistics pass and the normalization pass; cuDNN may refuse it for a shape).
static void batchnorm(Ctx& cx, T4 d, cudnnBatchNormMode_t mode) {
  const std::string tag = mode == CUDNN_BATCHNORM_SPATIAL ? "batchnorm" : "batchnorm persistent";
  std::printf("\n== batch normalization (%s), %dx%dx%dx%d\n",
              mode == CUDNN_BATCHNORM_SPATIAL ? "spatial" : "spatial persistent", d.n, d.c, d.h, d.w);
  const size_t n = d.count();
  Tensor tx(d);
  cudnnTensorDescriptor_t bd;  // 1 x C x 1 x 1, derived from x's descriptor
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&bd));
  CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bd, tx.d, mode));
  // Every channel with its own mean and spread, so a wrong channel index shows.
  std::vector<float> hx(n);
  std::vector<float> shift = random_vec(cx, d.c, -2.f, 2.f), spread = random_vec(cx, d.c, 0.5f, 2.f);
  for (int i = 0; i < d.n; ++i)
    for (int c = 0; c < d.c; ++c)
      for (int k = 0; k < d.h * d.w; ++k)
        hx[(size_t(i) * d.c + c) * d.h * d.w + k] = shift[c] + spread[c] * cx.rng->uniform();
  const std::vector<float> hdy = random_vec(cx, n), scale = random_vec(cx, d.c, 0.5f, 1.5f), bias = random_vec(cx, d.c),
                           rmean0 = random_vec(cx, d.c), rvar0 = random_vec(cx, d.c, 0.5f, 1.5f);
  const double eps = 1e-5, factor = 0.1;
  const tbx::BnStats st = tbx::bn_stats(d, hx, eps);
  const std::vector<double> yref = tbx::bn_apply(d, hx, scale, bias, st.mean, st.invstd);
  // Running averages: cuDNN folds in the *unbiased* variance (M / (M - 1)), as PyTorch does.
  const double M = double(d.n) * d.h * d.w;
  std::vector<double> rmean(d.c), rvar(d.c), inv_inf(d.c);
  for (int c = 0; c < d.c; ++c) {
    rmean[c] = (1 - factor) * rmean0[c] + factor * st.mean[c];
    rvar[c] = (1 - factor) * rvar0[c] + factor * st.var[c] * M / (M - 1);
    inv_inf[c] = 1 / std::sqrt(double(rvar0[c]) + eps);
  }
  std::vector<double> rmean0d(rmean0.begin(), rmean0.end());
  const std::vector<double> yinf = tbx::bn_apply(d, hx, scale, bias, rmean0d, inv_inf);
  std::vector<double> dxref, dsref, dbref;
  tbx::bn_bwd(d, hx, hdy, scale, st.mean, st.invstd, dxref, dsref, dbref);

  DeviceBuffer x = upload(hx), dy = upload(hdy), sc = upload(scale), bi = upload(bias), y(n * 4), dx(n * 4),
               rm(d.c * 4), rv(d.c * 4), sm(d.c * 4), sv(d.c * 4), ds(d.c * 4), db(d.c * 4), rm0 = upload(rmean0),
               rv0 = upload(rvar0);
  const float one = 1.f, zero = 0.f;
  // Ask once: a mode cuDNN does not support for this shape is reported and skipped. (The call
  // reads the running averages to update them: give it initialized ones.)
  CUDA_CHECK(cudaMemcpy(rm.as(), rm0.as(), rm.bytes(), cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemcpy(rv.as(), rv0.as(), rv.bytes(), cudaMemcpyDeviceToDevice));
  const cudnnStatus_t probe =
      cudnnBatchNormalizationForwardTraining(cx.h, mode, &one, &zero, tx.d, x.as(), tx.d, y.as(), bd, sc.as(), bi.as(),
                                             factor, rm.as(), rv.as(), eps, sm.as(), sv.as());
  if (probe != CUDNN_STATUS_SUCCESS) {
    std::printf("  %s: cuDNN says %s; skipped\n", tag.c_str(), cudnnGetErrorString(probe));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(bd));
    return;
  }
  measure(
      cx, tag + " fwd training", d, 8.0 * n,
      [&] {
        poison(y.as(), y.bytes()), poison(sm.as(), sm.bytes()), poison(sv.as(), sv.bytes());
        CUDA_CHECK(cudaMemcpy(rm.as(), rm0.as(), rm.bytes(), cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaMemcpy(rv.as(), rv0.as(), rv.bytes(), cudaMemcpyDeviceToDevice));
      },
      [&] {
        CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(cx.h, mode, &one, &zero, tx.d, x.as(), tx.d, y.as(), bd,
                                                           sc.as(), bi.as(), factor, rm.as(), rv.as(), eps, sm.as(),
                                                           sv.as()));
      },
      [&](bool after) {
        std::vector<verify::Check> v = {check(tag + " fwd training y", y, yref),
                                        check(tag + " saved mean", sm, st.mean),
                                        check(tag + " saved inverse std", sv, st.invstd)};
        // The running averages move on every call, so they are checked after the first only.
        if (!after)
          v.push_back(check(tag + " running mean", rm, rmean)), v.push_back(check(tag + " running variance", rv, rvar));
        return v;
      });
  measure(
      cx, tag + " fwd inference", d, 8.0 * n, [&] { poison(y.as(), y.bytes()); },
      [&] {
        CUDNN_CHECK(cudnnBatchNormalizationForwardInference(cx.h, mode, &one, &zero, tx.d, x.as(), tx.d, y.as(), bd,
                                                            sc.as(), bi.as(), rm0.as(), rv0.as(), eps));
      },
      [&](bool) { return std::vector<verify::Check>{check(tag + " fwd inference y", y, yinf)}; });
  // The backward uses the statistics the training forward saved (sm, sv hold them now).
  measure(
      cx, tag + " bwd", d, 12.0 * n,
      [&] { poison(dx.as(), dx.bytes()), poison(ds.as(), ds.bytes()), poison(db.as(), db.bytes()); },
      [&] {
        CUDNN_CHECK(cudnnBatchNormalizationBackward(cx.h, mode, &one, &zero, &one, &zero, tx.d, x.as(), tx.d, dy.as(),
                                                    tx.d, dx.as(), bd, sc.as(), ds.as(), db.as(), eps, sm.as(),
                                                    sv.as()));
      },
      [&](bool) {
        return std::vector<verify::Check>{check(tag + " bwd dx", dx, dxref), check(tag + " bwd dscale", ds, dsref),
                                          check(tag + " bwd dbias", db, dbref)};
      });
  CUDNN_CHECK(cudnnDestroyTensorDescriptor(bd));
}

// ---- Transform -----------------------------------------------------------------------------------

static void transform(Ctx& cx, T4 d) {
  std::printf("\n== cudnnTransformTensor, %dx%dx%dx%d\n", d.n, d.c, d.h, d.w);
  const size_t n = d.count();
  const std::vector<float> hx = random_vec(cx, n);
  const std::vector<float> nhwc = ref::nchw_to_nhwc(hx, d.n, d.c, d.h, d.w);
  const std::vector<double> want_nhwc(nhwc.begin(), nhwc.end()), want_nchw(hx.begin(), hx.end());
  Tensor tn(d, CUDNN_TENSOR_NCHW), th(d, CUDNN_TENSOR_NHWC);
  DeviceBuffer x = upload(hx), xh = upload(nhwc), y(n * 4);
  const float one = 1.f, zero = 0.f;
  const verify::Tol exact{0, 0, "exact"};  // a permutation: every value must come through unchanged
  auto exact_check = [&](const std::string& name, const std::vector<double>& want) {
    return std::vector<verify::Check>{verify::compare(name, to_host(y.as<float>(), n).data(), want.data(), n, exact)};
  };
  measure(
      cx, "transform NCHW -> NHWC", d, 8.0 * n, [&] { poison(y.as(), y.bytes()); },
      [&] { CUDNN_CHECK(cudnnTransformTensor(cx.h, &one, tn.d, x.as(), &zero, th.d, y.as())); },
      [&](bool) { return exact_check("transform NCHW -> NHWC", want_nhwc); });
  measure(
      cx, "transform NHWC -> NCHW", d, 8.0 * n, [&] { poison(y.as(), y.bytes()); },
      [&] { CUDNN_CHECK(cudnnTransformTensor(cx.h, &one, th.d, xh.as(), &zero, tn.d, y.as())); },
      [&](bool) { return exact_check("transform NHWC -> NCHW", want_nchw); });
}

int main(int argc, char** argv) {
  cli::Args args(argc, argv, kProg,
                 "cuDNN's activation, pooling, softmax, batch norm and transform, checked and timed");
  const cli::Standard st = cli::standard_flags(args, 20261131);
  const std::string only = args.str("only", "", "run one family: activation, pooling, softmax, batchnorm or transform");
  args.finish();
  st.validate(kProg);
  const std::vector<std::string> families = {"activation", "pooling", "softmax", "batchnorm", "transform"};
  if (!only.empty() && std::find(families.begin(), families.end(), only) == families.end())
    cli::usage_error(kProg,
                     "--only must be one of activation, pooling, softmax, batchnorm, transform; got '" + only + "'");
  results::require_outputs(kProg, st);

  // Shapes: ResNet-sized activations by default; odd, non-power-of-two ones for --verify.
  T4 act{32, 64, 56, 56}, pool{32, 64, 112, 112}, sm_inst{8192, 1000, 1, 1}, sm_chan{32, 64, 56, 56},
      bn{32, 64, 56, 56};
  if (st.verify) {
    act = {3, 5, 7, 9}, pool = {2, 3, 11, 13}, sm_inst = {5, 37, 3, 1}, sm_chan = {2, 7, 5, 3}, bn = {3, 5, 7, 9};
    if (!st.small) act = {3, 5, 37, 41}, bn = {4, 7, 33, 35}, sm_inst = {17, 1001, 1, 1};
  }
  results::Results res("day30_conv_vs_cudnn", kProg);
  env::begin(res, st);
  env::require_memory(kProg, 4 * pool.count() * 4, "the pooling tensors");
  verify::Rng rng{uint64_t(st.seed)};
  Ctx cx;
  cx.res = &res;
  cx.rng = &rng;
  cx.timed = !st.verify;
  CUDNN_CHECK(cudnnCreate(&cx.h));
  cx.topt = timing::flushed(30, 300);
  if (cx.timed) {
    cx.copy_peak = ceilings::copy_bandwidth(size_t(1) << 30).best();
    res.config["copy_gbps"] = cx.copy_peak;
    std::printf("copy bandwidth measured in this run: %.0f GB/s (bytes read + written)\n", cx.copy_peak);
  }
  auto want = [&](const char* f) { return only.empty() || only == f; };
  if (want("activation")) activations(cx, act);
  if (want("pooling")) pooling(cx, pool);
  if (want("softmax")) softmax(cx, sm_inst, false), softmax(cx, sm_chan, true);
  if (want("batchnorm"))
    batchnorm(cx, bn, CUDNN_BATCHNORM_SPATIAL), batchnorm(cx, bn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT);
  if (want("transform")) transform(cx, act);
  CUDNN_CHECK(cudnnDestroy(cx.h));
  return res.finish(kProg, st.json);
}
