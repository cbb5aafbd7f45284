// day40_graph_fusion/conv_fusion.cuh: part 2, conv + bias + ReLU as one cuDNN graph against the
// legacy API's three calls (its fastest convolution algorithm + cudnnAddTensor + cudnnActivationForward),
// and ReLU then conv (pre-activation ResNet), the pointwise op on the convolution's input.
#pragma once

#include "conv_shape.h"
#include "fusion_ctx.cuh"
#include "fusion_ref.h"

// What the fused and unfused convolutions of one shape share.
struct ConvKit {
  const ConvShape& s;
  cudnnDataType_t dt;
  bool nhwc, tf32;
  std::string layout, key, tag;
  ht::Dims xd, wd, yd;
  dnn::ConvDesc& cd;   // dnn::run takes it non-const
  dnn::AlgoPerf algo;  // the legacy convolution's algorithm: cuDNN's fastest, re-timed
  cudnnActivationDescriptor_t relu;
  DeviceBuffer &x, &w, &y, &xr;
  const std::vector<float>& hx;
  const std::vector<float>& hw;
  std::vector<size_t> idx;  // the outputs checked against the CPU
  verify::Tol tol;
  std::function<bool(const cg::Engine&)> fp32_only;
  std::vector<long long> shp() const { return {s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.pad, s.stride, s.dil}; }
  std::vector<int64_t> dims(ht::Dims d) const { return {d.n, d.c, d.h, d.w}; }
  std::vector<int64_t> strides(ht::Dims d) const {
    return nhwc ? cg::nhwc_strides(d.n, d.c, d.h, d.w) : cg::packed_strides({d.n, d.c, d.h, d.w});
  }
  // The conv's rate: FP32 FMA ceiling for true fp32, cuBLAS's GEMM on tensor cores otherwise.
  Rate rate(const Ctx& cx) const {
    const std::string pk = dt == CUDNN_DATA_HALF ? "fp16" : dt == CUDNN_DATA_BFLOAT16 ? "bf16" : "tf32";
    if (dt == CUDNN_DATA_FLOAT && !tf32) return Rate{0, s.flops(), cx.fp32_peak, "FP32 FMA ceiling"};
    const auto it = cx.tensor_peak.find(pk);
    return Rate{0, s.flops(), it == cx.tensor_peak.end() ? NAN : it->second, "cuBLAS " + pk + " GEMM"};
  }
  void legacy_conv(Ctx& cx, const dnn::Operands& ops) const {
    CUDNN_CHECK(dnn::run(cx.dnn, cd, dnn::Dir::Fwd, algo.algo, algo.math, ops,
                         algo.workspace ? cx.ws.get(algo.workspace) : nullptr, algo.workspace));
  }
};

// ReLU then conv: one graph (if an engine takes it) against cudnnActivationForward + the legacy conv.
static void relu_then_conv(Ctx& cx, const ConvKit& k) {
  const ConvShape& s = k.s;
  const std::string rtag = "relu-then-conv " + k.tag.substr(15);
  std::string why2;
  cg::Graph* pre = plan(
      cx, "relu-conv " + k.key.substr(4),
      [&] {
        auto g = std::make_unique<cg::Graph>(
            cx.dnn, "relu then conv " + std::string(dt_name(k.dt)) + " " + k.layout + " " + s.str());
        g->tensor("x", k.dims(k.xd), k.strides(k.xd), k.dt), g->tensor("w", k.dims(k.wd), k.strides(k.wd), k.dt),
            g->tensor("y", k.dims(k.yd), k.strides(k.yd), k.dt);
        g->virt("xr", k.dims(k.xd), k.strides(k.xd), k.dt);
        g->pointwise(CUDNN_POINTWISE_RELU_FWD, "x", "", "xr");
        g->conv_fwd("xr", "w", "y", s.pad, s.stride, s.dil);
        return g;
      },
      &why2, k.tf32 ? nullptr : k.fp32_only);
  std::vector<float> hxr = k.hx;
  for (auto& v : hxr) v = v > 0 ? v : 0;
  const dnn::Operands ops_r{k.xr.as(), k.w.as(), k.y.as()};
  const float one = 1.f, zero = 0.f;
  auto run_pre_unfused = [&] {
    CUDNN_CHECK(cudnnActivationForward(cx.dnn, k.relu, &one, k.cd.x, k.x.as(), &zero, k.cd.x, k.xr.as()));
    k.legacy_conv(cx, ops_r);
  };
  auto run_pre_fused = [&] { pre->execute({{"x", k.x.as()}, {"w", k.w.as()}, {"y", k.y.as()}}, workspace(cx, *pre)); };
  if (!pre) {
    std::printf(
        "  ReLU then conv as one graph: not supported here: %s%s (skipped; the unfused pair is still checked)\n",
        why2.c_str(),
        k.dt == CUDNN_DATA_FLOAT ? " (the rule: an fp32 graph may not run on tensor-core/TF32 engines)" : "");
  }
  const std::vector<double> want_r = ref::eval_at(k.idx, [&](size_t f) {
    const ref::Idx4 i = ref::unflatten(f, s.K, s.P(), s.Q());
    return ref::conv_at(s, hxr.data(), k.hw.data(), i.a, i.b, i.c, i.d);
  });
  poison(k.y.as(), k.y.bytes());
  run_pre_unfused();
  CUDA_CHECK(cudaDeviceSynchronize());
  add_check(cx,
            verify::compare_at(rtag + " unfused vs CPU", ht::download(k.y, k.yd, k.dt, k.nhwc), k.idx, want_r, k.tol));
  if (pre) {
    poison(k.y.as(), k.y.bytes());
    run_pre_fused();
    CUDA_CHECK(cudaDeviceSynchronize());
    add_check(cx,
              verify::compare_at(rtag + " fused vs CPU", ht::download(k.y, k.yd, k.dt, k.nhwc), k.idx, want_r, k.tol));
  }
  if (!cx.timed || !pre) return;
  const Rate rate = k.rate(cx);
  const timing::Interleaved r =
      ratio_rows(cx, rtag + " fused graph", rtag + " unfused (relu + legacy conv)", "unfused relu + conv", k.shp(),
                 dt_name(k.dt), rate, rate, run_pre_fused, run_pre_unfused, engine_json(*pre));
  summary(cx, "relu-then-conv", dt_name(k.dt), k.layout + " " + s.str(), r, NAN, "", *pre, "(no goal: instructive)",
          true);
}

// The timed half of conv + bias + ReLU: fused vs unfused interleaved, then the conv alone.
static void time_cbr(Ctx& cx, const ConvKit& k, const cg::Graph& fused, const std::function<void()>& run_fused,
                     const std::function<void()>& run_unfused, const std::vector<float>& yu) {
  const Rate rate = k.rate(cx);
  json::Value ue = json::Value::object();
  ue["conv_algo"] = k.algo.name;
  ue["conv_math"] = dnn::math_name(k.algo.math);
  const timing::Interleaved r = ratio_rows(
      cx, k.tag + " fused graph", k.tag + " unfused (legacy conv " + k.algo.name + " + add + relu)",
      "unfused legacy calls", k.shp(), dt_name(k.dt), rate, rate, run_fused, run_unfused, engine_json(fused), ue);
  CUDA_CHECK(cudaDeviceSynchronize());
  add_check(cx, verify::compare(k.tag + " fused after timing vs unfused", ht::download(k.y, k.yd, k.dt, k.nhwc).data(),
                                yu.data(), yu.size(), k.tol));
  // The conv alone (legacy, same algorithm): how much of the unfused time is the bias and ReLU passes.
  const dnn::Operands ops{k.x.as(), k.w.as(), k.y.as()};
  const double unf = r.ref.median_ms;
  const double conv_only = timed_row(cx, k.tag + " conv alone (legacy " + k.algo.name + ")", k.shp(), dt_name(k.dt),
                                     rate, unf, "unfused legacy calls", [&] { k.legacy_conv(cx, ops); });
  const bool met = speedup_met(r, 1.3);
  std::printf(
      "  fused %.2fx (%.2f-%.2f) faster than unfused (goal >= 1.3x in every repeat: %s); the bias + ReLU passes cost "
      "%.1f us of the unfused %.1f us\n",
      r.pct_median / 100, r.pct_min / 100, r.pct_max / 100, met ? "met" : "missed", (unf - conv_only) * 1e3, unf * 1e3);
  summary(cx, "conv+bias+relu", dt_name(k.dt), k.layout + " " + k.s.str(), r, conv_only, "conv_alone", fused,
          ">= 1.3x unfused in every interleaved repeat (the min)", met, k.tf32);
}

static void conv_patterns(Ctx& cx, const ConvShape& s, cudnnDataType_t dt, bool nhwc) {
  const std::string layout = nhwc ? "NHWC" : "NCHW", shape = s.str();
  std::printf("\n== 2. conv + bias + ReLU, %s %s %s\n", dt_name(dt), layout.c_str(), shape.c_str());
  const ht::Dims xd{s.N, s.C, s.H, s.W}, wd{s.K, s.C, s.R, s.S}, yd{s.N, s.K, s.P(), s.Q()};
  auto strides = [&](ht::Dims d) {
    return nhwc ? cg::nhwc_strides(d.n, d.c, d.h, d.w) : cg::packed_strides({d.n, d.c, d.h, d.w});
  };
  auto dims = [](ht::Dims d) { return std::vector<int64_t>{d.n, d.c, d.h, d.w}; };
  // fp32 data runs on true-fp32 engines where one is offered (plan_fused); the ReLU-then-conv graph too.
  bool tf32 = false;
  auto fp32_only = [dt](const cg::Engine& e) { return true_fp32(dt, e); };
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
  cg::Graph* fused = plan_fused(cx, key, dt, "conv + bias + ReLU", make_cbr, &tf32);
  if (!fused) return;
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
               y(yd.count() * ht::dtype_bytes(dt)), xr(xd.count() * ht::dtype_bytes(dt));
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
  const std::string tag = "conv+bias+relu " + std::string(dt_name(dt)) + " " + layout + " " + shape;
  // Checks: the CPU at sampled outputs, and fused against unfused everywhere.
  const double macs = double(yd.count()) * s.C * s.R * s.S;
  const ConvKit k{s,
                  dt,
                  nhwc,
                  tf32,
                  layout,
                  key,
                  tag,
                  xd,
                  wd,
                  yd,
                  cd,
                  algo,
                  relu,
                  x,
                  w,
                  y,
                  xr,
                  hx,
                  hw,
                  ref::sample_indices(yd.count(), macs <= 3e8 ? yd.count() : 4096, cx.rng->next()),
                  tol_for(dt, std::sqrt(double(s.C) * s.R * s.S), tf32),
                  fp32_only};
  const float one = 1.f, zero = 0.f;
  auto run_unfused = [&] {
    k.legacy_conv(cx, ops);
    CUDNN_CHECK(cudnnAddTensor(cx.dnn, &one, bdesc, bias.as(), &one, cd.y, y.as()));
    CUDNN_CHECK(cudnnActivationForward(cx.dnn, relu, &one, cd.y, y.as(), &zero, cd.y, y.as()));
  };
  auto run_fused = [&] {
    fused->execute({{"x", x.as()}, {"w", w.as()}, {"bias", bias.as()}, {"y", y.as()}}, workspace(cx, *fused));
  };
  const std::vector<double> want =
      ref::eval_at(k.idx, [&](size_t f) { return fref::conv_bias_relu_at(s, hx.data(), hw.data(), hb.data(), f); });
  poison(y.as(), y.bytes());
  run_fused();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> yf = ht::download(y, yd, dt, nhwc);
  add_check(cx, verify::compare_at(tag + " fused vs CPU", yf, k.idx, want, k.tol));
  poison(y.as(), y.bytes());
  run_unfused();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> yu = ht::download(y, yd, dt, nhwc);
  add_check(cx, verify::compare_at(tag + " unfused vs CPU", yu, k.idx, want, k.tol));
  add_check(cx, verify::compare(tag + " fused vs unfused (all outputs)", yf.data(), yu.data(), yf.size(), k.tol));
  if (cx.timed) time_cbr(cx, k, *fused, run_fused, run_unfused, yu);
  relu_then_conv(cx, k);
  CUDNN_CHECK(cudnnDestroyActivationDescriptor(relu));
  CUDNN_CHECK(cudnnDestroyTensorDescriptor(bdesc));
}
