// day40_graph_fusion/mlp_fusion.cuh: part 3, matmul + bias + GELU (a GPT MLP's first layer) as one
// cuDNN graph, against cuBLAS's GEMM followed by a bias/GELU kernel (unfused), and against
// cuBLASLt's own GELU_BIAS epilogue (the fusion a GEMM library offers).
#pragma once

#include <algorithm>

#include "fusion_ctx.cuh"
#include "fusion_ref.h"

// tanh-approximated GELU. fp32 outputs take tanh through one __expf and an IEEE division (its
// error stays well inside the fp32 tolerance); 16-bit outputs take the hardware's tanh.approx, one
// SFU instruction instead of two, whose ~2^-11 relative error is far below a bf16/fp16 ulp.
template <bool kApproxTanh>
__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  float t;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  if (kApproxTanh) {
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
    return 0.5f * x * (1.f + t);
  }
#endif
  t = 1.f - 2.f / (__expf(2.f * u) + 1.f);  // tanh(u), saturating correctly at +-inf
  return 0.5f * x * (1.f + t);
}

// The unfused baseline's second kernel, written to be a fair opponent (it moves 2 x M x N
// elements, so it should run near copy bandwidth). Each thread owns one 16-byte column vector of
// the row: it reads its bias vector once, then walks a tile of kRows rows at a time, so kRows
// independent 16-byte loads are in flight per thread. No index division per element: the first
// version computed (i * V % cols) per vector, a 64-bit modulo, and ran at a third of copy bandwidth.
constexpr int kRows = 4;
template <class T>
__global__ void bias_gelu_rows(const T* __restrict__ in, const T* __restrict__ bias, T* __restrict__ out, int rows,
                               int cols) {
  constexpr int V = 16 / sizeof(T);
  const int ncv = cols / V, cv = blockIdx.x * blockDim.x + threadIdx.x;
  if (cv >= ncv) return;
  const uint4 bv = __ldg(reinterpret_cast<const uint4*>(bias) + cv);
  const T* pb = reinterpret_cast<const T*>(&bv);
  float b[V];
#pragma unroll
  for (int k = 0; k < V; ++k) b[k] = to_f(pb[k]);
  const uint4* src = reinterpret_cast<const uint4*>(in);
  uint4* dst = reinterpret_cast<uint4*>(out);
  for (int r0 = blockIdx.y * kRows; r0 < rows; r0 += gridDim.y * kRows) {
    uint4 v[kRows];
#pragma unroll
    for (int j = 0; j < kRows; ++j)
      if (r0 + j < rows) v[j] = src[size_t(r0 + j) * ncv + cv];
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      if (r0 + j >= rows) break;
      const T* pv = reinterpret_cast<const T*>(&v[j]);
      uint4 o;
      T* po = reinterpret_cast<T*>(&o);
#pragma unroll
      for (int k = 0; k < V; ++k) po[k] = from_f<T>(gelu_tanh<(sizeof(T) == 2)>(to_f(pv[k]) + b[k]));
      dst[size_t(r0 + j) * ncv + cv] = o;
    }
  }
}

// Rows whose length is not a whole number of 16-byte vectors (odd --verify shapes only).
template <class T>
__global__ void bias_gelu_scalar(const T* __restrict__ in, const T* __restrict__ bias, T* __restrict__ out, size_t rows,
                                 int cols) {
  const size_t n = rows * size_t(cols), stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = from_f<T>(gelu_tanh<(sizeof(T) == 2)>(to_f(in[i]) + to_f(bias[i % cols])));
}

template <class T>
static void launch_bias_gelu(const T* in, const T* bias, T* out, int rows, int cols, int sms) {
  constexpr int V = 16 / sizeof(T);
  if (cols % V != 0) {
    bias_gelu_scalar<T><<<sms * 8, 256>>>(in, bias, out, rows, cols);
    LAUNCH_CHECK();
    return;
  }
  const int ncv = cols / V;
  const int bx = std::min(256, (ncv + 31) / 32 * 32), gx = (ncv + bx - 1) / bx;
  // One wave of as many blocks as fit at once (48 registers a thread on sm_90: about 1,350 threads
  // per SM, not 2,048); each block then walks its share of the rows, so there is no partial last wave.
  // Asked once per block size (this runs inside the timed loop; one GPU in this program).
  static std::map<int, int> per_sm_of;
  if (!per_sm_of.count(bx))
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_of[bx], bias_gelu_rows<T>, bx, 0));
  const int per_sm = per_sm_of[bx];
  const int want_y = std::max(1, sms * std::max(1, per_sm) / gx), tiles = (rows + kRows - 1) / kRows;
  bias_gelu_rows<T><<<dim3(gx, std::min(want_y, tiles)), bx>>>(in, bias, out, rows, cols);
  LAUNCH_CHECK();
}

static void bias_gelu(cudnnDataType_t dt, const DeviceBuffer& C, const DeviceBuffer& bias, DeviceBuffer& Y, int M,
                      int N, int sms) {
  if (dt == CUDNN_DATA_FLOAT)
    launch_bias_gelu(C.as<float>(), bias.as<float>(), Y.as<float>(), M, N, sms);
  else if (dt == CUDNN_DATA_HALF)
    launch_bias_gelu(C.as<__half>(), bias.as<__half>(), Y.as<__half>(), M, N, sms);
  else
    launch_bias_gelu(C.as<__nv_bfloat16>(), bias.as<__nv_bfloat16>(), Y.as<__nv_bfloat16>(), M, N, sms);
}

// cuBLASLt with the GELU_BIAS epilogue on row-major Y[M][N] = gelu(A[M][K] B[K][N] + bias), i.e.
// column-major Y^T = B^T A^T: (N x K) . (K x M).
struct LtEpilogue {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t heur{};
  size_t ws_bytes = size_t(32) << 20;
  bool ok = false;
  DeviceBuffer ws;
  LtEpilogue(cublasLtHandle_t lt, cublasComputeType_t comp, cudaDataType_t ct, int M, int N, int K, const void* bias)
      : ws(size_t(32) << 20) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, comp, CUDA_R_32F));
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, ct, N, K, N));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, ct, K, M, K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, ct, N, M, N));
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                      sizeof ws_bytes));
    int nheur = 0;
    ok = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &nheur) == CUBLAS_STATUS_SUCCESS &&
         nheur > 0;
  }
  void run(cublasLtHandle_t lt, const void* A, const void* B, void* Y) {
    const float one = 1.f, zero = 0.f;
    CUBLAS_CHECK(cublasLtMatmul(lt, op, &one, B, la, A, lb, &zero, Y, lc, Y, lc, &heur.algo, ws.as(), ws_bytes, 0));
  }
  ~LtEpilogue() {
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(op));
  }
};

// The functions and data one timed run of the pattern needs.
struct MlpRun {
  int M, N, K;
  cudnnDataType_t dt;
  bool tf32;
  std::string tag, shape;
  const cg::Graph& fused;
  std::function<void()> fused_fn, unfused_fn, gemm_fn, bias_gelu_fn, lt_fn;  // lt_fn empty: no cuBLASLt algorithm
  std::function<void(const std::string&)> check_after;                       // checks Y after a timed variant
};

static void time_mlp(Ctx& cx, const MlpRun& m) {
  const std::vector<long long> shp = {m.M, m.N, m.K};
  const char* dt = dt_name(m.dt);
  const std::string pk = m.dt == CUDNN_DATA_HALF ? "fp16" : m.dt == CUDNN_DATA_BFLOAT16 ? "bf16" : "tf32";
  const bool fp32 = m.dt == CUDNN_DATA_FLOAT && !m.tf32;
  const Rate rate{0, 2.0 * m.M * m.N * double(m.K), fp32 ? cx.fp32_peak : cx.tensor_peak[pk],
                  fp32 ? "FP32 FMA ceiling" : "cuBLAS " + pk + " GEMM"};
  const std::string unf_name = "cuBLAS + bias/GELU kernel";
  const timing::Interleaved r =
      ratio_rows(cx, m.tag + " fused graph", m.tag + " unfused (cuBLAS + bias/GELU kernel)", unf_name, shp, dt, rate,
                 rate, m.fused_fn, m.unfused_fn, engine_json(m.fused));
  m.check_after("fused");
  const double unf = r.ref.median_ms;
  const double g_only = timed_row(cx, m.tag + " cuBLAS GEMM alone", shp, dt, rate, unf, unf_name, m.gemm_fn);
  // The unfused pass alone: it reads C and writes Y (M x N each) and reads the bias once.
  const double eb = ht::dtype_bytes(m.dt);
  const Rate bg_rate{eb * (2.0 * m.M * m.N + m.N), 0, cx.copy_peak, "copy bandwidth"};
  const timing::Stats bg = timing::time_gpu(m.bias_gelu_fn, cx.topt);
  const double bg_pct = 100.0 * bg_rate.bytes / (bg.median_ms * 1e-3) / 1e9 / cx.copy_peak;
  json::Value bge = json::Value::object();
  bge["goal"] = ">= 85% of copy bandwidth (median)";
  bge["goal_met"] = bg_pct >= 85;
  add_row(cx, m.tag + " bias/GELU kernel alone (unfused pass)", shp, dt, bg_rate, bg, nullptr, NAN, "", bge);
  m.check_after("bias/GELU kernel");
  double lt_ms = NAN;
  if (m.lt_fn) {
    const timing::Interleaved lt = ratio_rows(cx, m.tag + " cuBLASLt GELU_BIAS epilogue", "", unf_name, shp, dt, rate,
                                              rate, m.lt_fn, m.unfused_fn);
    lt_ms = lt.ours.median_ms;
    m.check_after("cuBLASLt epilogue");
  }
  const bool met = speedup_met(r, 1.3);
  std::printf(
      "  fused %.2fx (%.2f-%.2f) faster than unfused (goal >= 1.3x in every repeat: %s); the separate bias/GELU pass "
      "costs %.1f us in the unfused run, %.1f us alone (%.0f%% of copy bandwidth, goal >= 85%%: %s)\n",
      r.pct_median / 100, r.pct_min / 100, r.pct_max / 100, met ? "met" : "missed", (unf - g_only) * 1e3,
      bg.median_ms * 1e3, bg_pct, bg_pct >= 85 ? "met" : "missed");
  summary(cx, "matmul+bias+gelu", dt, m.shape, r, lt_ms, "cublaslt_epilogue", m.fused,
          ">= 1.3x unfused in every interleaved repeat (the min)", met, m.tf32);
}

static void matmul_bias_gelu(Ctx& cx, int M, int N, int K, cudnnDataType_t dt) {
  const std::string shape =
      std::to_string(M) + "x" + std::to_string(K) + " . " + std::to_string(K) + "x" + std::to_string(N);
  std::printf("\n== 3. matmul + bias + GELU (tanh), %s, %s\n", dt_name(dt), shape.c_str());
  bool tf32 = false;
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
  cg::Graph* fused = plan_fused(cx, key, dt, "matmul + bias + GELU", make, &tf32);
  if (!fused) return;
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
  auto run_bias_gelu = [&] { bias_gelu(dt, C, bias, Y, M, N, cx.sms); };
  auto run_unfused = [&] { gemm(), run_bias_gelu(); };
  auto run_fused = [&] {
    fused->execute({{"A", A.as()}, {"B", B.as()}, {"bias", bias.as()}, {"Y", Y.as()}}, workspace(cx, *fused));
  };
  LtEpilogue lt(cx.lt, comp, ct, M, N, K, bias.as());
  auto run_lt = [&] { lt.run(cx.lt, A.as(), B.as(), Y.as()); };

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
  if (lt.ok) {
    poison(Y.as(), Y.bytes());
    run_lt();
    add_check(cx, verify::compare_at(tag + " cuBLASLt epilogue vs CPU", out(), idx, want, tol));
  } else {
    std::printf("  cuBLASLt offers no GELU_BIAS algorithm for this case (skipped)\n");
  }
  if (!cx.timed) return;
  // Every variant writes Y: each is checked again after its timing (the last run's output).
  auto check_after = [&](const std::string& what) {
    const std::vector<float> y = out();
    if (what == "cuBLASLt epilogue")
      add_check(cx, verify::compare_at(tag + " cuBLASLt epilogue after timing vs CPU", y, idx, want, tol));
    else
      add_check(cx, verify::compare(tag + " " + what + " after timing vs unfused", y.data(), yu.data(), mn, tol));
  };
  const MlpRun m{M,
                 N,
                 K,
                 dt,
                 tf32,
                 tag,
                 shape,
                 *fused,
                 run_fused,
                 run_unfused,
                 gemm,
                 run_bias_gelu,
                 lt.ok ? std::function<void()>(run_lt) : std::function<void()>(),
                 check_after};
  time_mlp(cx, m);
}
