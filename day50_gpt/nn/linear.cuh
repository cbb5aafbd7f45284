// day50_gpt/nn/linear.cuh: the model's linear layers, forward and backward: a cuBLAS matmul with its
// bias (and, for the MLP's first layer, the GELU), fused into one cuBLASLt call where cuBLASLt offers
// the epilogue (common/cublaslt.h), else the plain matmul (nn/matmul.cuh) and our elementwise kernels
// (nn/kernels/bias_gelu_residual.cuh).
#pragma once
#include <string>

#include "model.cuh"

// The cuBLASLt matmul for one (shape, epilogue), built on first use; null where cuBLASLt refuses it.
template <class T>
lt::Tuned* Model<T>::lt_get(const lt::Spec& sp, cudaDataType_t out_type) {
  if (!fuse) return nullptr;
  const std::string key = std::to_string(sp.ta) + std::to_string(sp.tb) + "," + std::to_string(sp.m) + "," +
                          std::to_string(sp.n) + "," + std::to_string(sp.k) + "," + std::to_string(int(sp.epilogue)) +
                          "," + std::to_string(int(out_type));
  auto it = lt_cache.find(key);
  if (it == lt_cache.end()) {
    lt::Spec s2 = sp;
    s2.ab = Types<T>::blas, s2.cd = out_type;
    const bool search = lt_search && std::is_same<T, bf16>::value;  // fp32: the heuristic's pick (see lt_tuned.cuh)
    it = lt_cache.emplace(key, std::make_unique<lt::Tuned>(blas_lt, s2, kLtWorkspace, key, search)).first;
    if (!it->second->ok())
      std::printf("note: %s (epilogue %d, %dx%dx%d); using the unfused path there\n", it->second->why().c_str(),
                  int(sp.epilogue), sp.m, sp.n, sp.k);
  }
  return it->second->ok() ? it->second.get() : nullptr;
}

// out[N][O] = in[N][I] . W^T + b; with gelu_out: out keeps the pre-activation and gelu_out = gelu(out).
template <class T>
void Model<T>::linear(const T* in, size_t w, size_t b, T* out, int I, int O, T* gelu_out) {
  lt::Spec sp;
  sp.ta = CUBLAS_OP_T, sp.tb = CUBLAS_OP_N, sp.m = O, sp.n = N, sp.k = I, sp.lda = I, sp.ldb = I, sp.ldd = O;
  sp.epilogue = gelu_out ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS, sp.aux_ld = gelu_out ? O : 0;
  if (lt::Tuned* mm = lt_get(sp, Types<T>::blas)) {
    // The bias in the output's type: the fp32 master in fp32 mode, its bf16 copy in bf16 mode.
    mm->run(W(w), in, gelu_out ? gelu_out : out, 0.f, W(b), gelu_out ? out : nullptr, lt_ws.as(), s);
    mark(kMatmul);
    return;
  }
  matmul_fwd<T, T>(blas, in, W(w), out, N, I, O);
  mark(kMatmul);
  k::add_bias<T><<<grid_for(size_t(N) * O), 256, 0, s>>>(out, P(b), N, O);
  LAUNCH_CHECK();
  mark(kResidual);
  if (gelu_out) {
    k::gelu_fwd<T><<<grid_for(size_t(N) * O), 256, 0, s>>>(out, gelu_out, size_t(N) * O);
    LAUNCH_CHECK();
    mark(kGelu);
  }
}
// The weight gradient's matmul with the bias gradient in its epilogue (BGRADB), or cuBLAS's plain
// matmul and the column sums apart (bias_partials + colsum_finish)? The epilogue saves a pass over dout,
// but it may also keep cuBLASLt from splitting the long reduction (K = N rows) over more blocks, which
// this thin output (I x O, a few dozen tiles on 132 SMs) needs. So in the searching mode (bf16,
// --lt-search) both are timed once per shape, into scratch, and the faster is kept for the process
// (nn/lt_tuned.cuh's reasons: one choice for every model of the run). Otherwise: the epilogue.
template <class T>
bool Model<T>::bgrad_in_epilogue(lt::Tuned* mm, const T* in, const T* dout, int I, int O) {
  if (!lt_search || !std::is_same<T, bf16>::value) return true;
  const std::string key = "bgrad " + std::to_string(I) + "x" + std::to_string(O) + "x" + std::to_string(N);
  {
    std::lock_guard<std::mutex> lock(lt::chosen_mutex());
    auto it = lt::chosen_algos().find(key);
    if (it != lt::chosen_algos().end()) return it->second == 1;
  }
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(s, &cs));
  if (cs != cudaStreamCaptureStatusNone) return true;  // no timing inside a capture
  float *dw = nullptr, *db = nullptr;
  CUDA_CHECK(cudaMalloc(&dw, size_t(I) * O * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&db, size_t(O) * sizeof(float)));
  CUDA_CHECK(cudaMemsetAsync(dw, 0, size_t(I) * O * sizeof(float), s));
  CUDA_CHECK(cudaMemsetAsync(db, 0, size_t(O) * sizeof(float), s));
  const int chunks = k::col_chunks(N);
  auto epilogue = [&] { mm->run(in, dout, dw, 1.f, db, nullptr, lt_ws.as(), s); };
  auto apart = [&] {
    matmul_bwd_w<T>(blas, in, dout, dw, N, I, O);
    k::bias_partials<T><<<dim3((O + 31) / 32, chunks), dim3(32, 8), 0, s>>>(dout, partial.as<float>(), N, O);
    LAUNCH_CHECK();
    k::colsum_finish<<<grid_for(size_t(O)), 256, 0, s>>>(partial.as<float>(), chunks, 1, O, db, nullptr);
    LAUNCH_CHECK();
  };
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  float best[2] = {1e30f, 1e30f};
  for (int rep = 0; rep < 6; ++rep)
    for (int v = 0; v < 2; ++v) {
      CUDA_CHECK(cudaEventRecord(e0, s));
      if (v == 0)
        epilogue();
      else
        apart();
      CUDA_CHECK(cudaEventRecord(e1, s));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
      if (rep > 0) best[v] = std::min(best[v], t);  // rep 0: warm-up (and the epilogue's own search)
    }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  CUDA_CHECK(cudaFree(dw));
  CUDA_CHECK(cudaFree(db));
  const bool epi = best[0] <= best[1];
  {
    std::lock_guard<std::mutex> lock(lt::chosen_mutex());
    lt::chosen_algos()[key] = epi ? 1 : 0;
  }
  std::printf("bias gradient %s: in the epilogue %.1f us, apart %.1f us: %s\n", key.c_str(), 1e3 * best[0],
              1e3 * best[1], epi ? "epilogue" : "apart");
  return epi;
}

// din = dout . W (with gelu_pre: times gelu'(gelu_pre), the backward of the GELU that fed this
// layer), dW += dout^T . in, db = column sums of dout.
template <class T>
void Model<T>::linear_back(const T* in, size_t w, size_t b, const T* dout, T* din, int I, int O, const T* gelu_pre) {
  bool din_done = false, dw_done = false;
  if (gelu_pre) {
    lt::Spec sp;
    sp.ta = CUBLAS_OP_N, sp.tb = CUBLAS_OP_N, sp.m = I, sp.n = N, sp.k = O, sp.lda = I, sp.ldb = O, sp.ldd = I;
    sp.epilogue = CUBLASLT_EPILOGUE_DGELU, sp.aux_ld = I;
    if (lt::Tuned* mm = lt_get(sp, Types<T>::blas)) {
      mm->run(W(w), dout, din, 0.f, nullptr, const_cast<T*>(gelu_pre), lt_ws.as(), s);
      din_done = true;
    }
  }
  if (!din_done) matmul_bwd_in<T>(blas, dout, W(w), din, N, I, O);
  {
    lt::Spec sp;
    sp.ta = CUBLAS_OP_N, sp.tb = CUBLAS_OP_T, sp.m = I, sp.n = O, sp.k = N, sp.lda = I, sp.ldb = O, sp.ldd = I;
    sp.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    lt::Tuned* mm = lt_get(sp, CUDA_R_32F);
    if (mm && !bgrad_in_epilogue(mm, in, dout, I, O)) mm = nullptr;  // the bias gradient apart is faster
    if (mm) {
      // dW accumulates (beta 1) into the zeroed gradients; the bias gradient is written (each bias
      // belongs to exactly one layer, so nothing else adds to it).
      mm->run(in, dout, G(w), 1.f, G(b), nullptr, lt_ws.as(), s);
      dw_done = true;
    }
  }
  if (!dw_done) matmul_bwd_w<T>(blas, in, dout, G(w), N, I, O);
  mark(kMatmul);
  if (gelu_pre && !din_done) {
    k::gelu_bwd<T><<<grid_for(size_t(N) * I), 256, 0, s>>>(gelu_pre, din, din, size_t(N) * I);
    LAUNCH_CHECK();
    mark(kGelu);
  }
  if (!dw_done) {
    const int chunks = k::col_chunks(N);
    k::bias_partials<T><<<dim3((O + 31) / 32, chunks), dim3(32, 8), 0, s>>>(dout, partial.as<float>(), N, O);
    LAUNCH_CHECK();
    k::colsum_finish<<<grid_for(size_t(O)), 256, 0, s>>>(partial.as<float>(), chunks, 1, O, G(b), nullptr);
    LAUNCH_CHECK();
    mark(kResidual);
  }
}
