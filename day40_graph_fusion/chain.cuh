// day40_graph_fusion/chain.cuh: part 1, a pointwise chain y = sigmoid(a + b*c), as one fused
// cuDNN graph, as three single-op graphs (two intermediates in memory), and as one hand-written kernel.
#pragma once

#include "fusion_ctx.cuh"
#include "fusion_ref.h"

// The hand-written fused kernel: one pass, 16-byte loads, fp32 arithmetic.
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

// The timed half of the pattern: fused vs unfused as interleaved repeats, then the hand-written kernel.
static void time_chain(Ctx& cx, ht::Dims d, cudnnDataType_t dt, const std::string& tag, const std::string& shape,
                       const cg::Graph& fused, bool have_unfused, const std::function<void()>& run_fused,
                       const std::function<void()>& run_unfused, const std::function<void()>& run_kernel,
                       const std::function<void(const std::string&)>& check_now) {
  const size_t n = d.count();
  const Rate fused_rate{4.0 * n * ht::dtype_bytes(dt), 0, cx.copy_peak, "copy bandwidth"};  // read a, b, c; write y
  // Unfused traffic: b, c -> t1; a, t1 -> t2; t2 -> y: 8 tensors' worth instead of 4.
  const Rate unfused_rate{8.0 * n * ht::dtype_bytes(dt), 0, cx.copy_peak, "copy bandwidth"};
  const std::vector<long long> shp = {d.n, d.c, d.h, d.w};
  timing::Interleaved r;
  if (have_unfused) {
    r = ratio_rows(cx, tag + " fused graph", tag + " unfused (3 graphs, 2 temporaries)", "unfused (3 graphs)", shp,
                   dt_name(dt), fused_rate, unfused_rate, run_fused, run_unfused, engine_json(fused));
  } else {
    r.ours = timing::time_gpu(run_fused, cx.topt);
    r.ref.median_ms = NAN;  // no unfused path offered: no ratio
    add_row(cx, tag + " fused graph", shp, dt_name(dt), fused_rate, r.ours, nullptr, NAN, "", engine_json(fused));
  }
  check_now("fused graph after timing");
  const double hk = timed_row(cx, tag + " hand-written fused kernel", shp, dt_name(dt), fused_rate, r.ref.median_ms,
                              "unfused (3 graphs)", run_kernel);
  check_now("hand-written kernel after timing");
  const double pct = 100.0 * fused_rate.bytes / (r.ours.median_ms * 1e-3) / 1e9 / cx.copy_peak;
  std::printf("  fused: %.0f%% of copy bandwidth (goal >= 90%%: %s); unfused moves 8 tensors' bytes instead of 4\n",
              pct, pct >= 90 ? "met" : "missed");
  summary(cx, "pointwise sigmoid(a+b*c)", dt_name(dt), shape, r, hk, "handwritten", fused,
          ">= 90% of copy bandwidth (the fused graph's median)", pct >= 90);
}

static void pointwise_chain(Ctx& cx, ht::Dims d, cudnnDataType_t dt) {
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
  auto run_kernel = [&] { run_chain_kernel(dt, a.as(), b.as(), c.as(), y.as(), n, cx.sms); };
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
  time_chain(cx, d, dt, tag, shape, *fused, g_sig != nullptr, run_fused, run_unfused, run_kernel, check_now);
}
