// common/cublaslt.h: one cuBLASLt matmul with a fused epilogue, configured once and run many times.
//
// cuBLASLt is cuBLAS's configurable GEMM: besides D = alpha * op(A) * op(B) + beta * C it can apply an
// *epilogue* to the result before it is stored, which saves a separate pass over D:
//   BIAS            D = A.B + bias (the bias broadcast along D's columns: one value per row of D)
//   GELU_AUX_BIAS   D = gelu(A.B + bias), and the pre-activation A.B + bias also written to `aux`
//   DGELU           D = (A.B) * gelu'(aux)          (the backward of the above, for the input gradient)
//   BGRADB          D = A.B (+ beta C), and `bias` = the sum of op(B) over the k dimension (a bias gradient)
// Everything is column-major, as in cuBLAS. The matrix layouts and the algorithm (from cuBLASLt's
// heuristic) are chosen in the constructor; ok() says whether cuBLASLt supports the combination (a
// type/epilogue pair it refuses is an answer, not an error: the caller falls back to plain GEMMs).
// Used by day50 (the GPT's linear layers).
#pragma once
#include <cublasLt.h>

#include <string>

#include "check.cuh"

namespace lt {

struct Spec {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0;        // D is m x n; op(A) is m x k, op(B) is k x n
  int lda = 0, ldb = 0, ldd = 0;  // leading dimensions of A, B and C = D as stored
  cudaDataType_t ab = CUDA_R_32F, cd = CUDA_R_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int64_t aux_ld = 0;  // for the GELU epilogues: the leading dimension of aux
};

class Matmul {
 public:
  Matmul(cublasLtHandle_t h, const Spec& s, size_t workspace_bytes) : h_(h), s_(s), ws_bytes_(workspace_bytes) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F,
                                          CUDA_R_32F));  // fp32 accumulation (and no TF32 for fp32 inputs)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &s.ta, sizeof s.ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &s.tb, sizeof s.tb));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof s.epilogue));
    if (s.aux_ld)
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &s.aux_ld, sizeof s.aux_ld));
    const bool a_t = s.ta != CUBLAS_OP_N, b_t = s.tb != CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, s.ab, a_t ? s.k : s.m, a_t ? s.m : s.k, s.lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, s.ab, b_t ? s.n : s.k, b_t ? s.k : s.n, s.ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_, s.cd, s.m, s.n, s.ldd));
    // The heuristic must see the epilogue's pointers' alignment; our buffers come from cudaMalloc
    // (256-byte aligned) and their offsets are multiples of 16 bytes, which is what is promised here.
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes_,
                                                      sizeof ws_bytes_));
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h_, op_, a_, b_, d_, d_, pref, 1, &r, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      why_ = std::string("cuBLASLt has no algorithm for this epilogue and type combination (") +
             cublasGetStatusString(st) + ")";
    } else {
      algo_ = r.algo;
      ok_ = true;
    }
  }
  ~Matmul() {
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(d_);
    cublasLtMatmulDescDestroy(op_);
  }
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }

  // D = epilogue(op(A).op(B) + beta * D); bias and aux as the epilogue needs them (else null).
  void run(const void* A, const void* B, void* D, float beta, const void* bias, void* aux, void* workspace,
           cudaStream_t stream = 0) {
    if (bias) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (aux)
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    const float one = 1.f;
    CUBLAS_CHECK(
        cublasLtMatmul(h_, op_, &one, A, a_, B, b_, &beta, D, d_, D, d_, &algo_, workspace, ws_bytes_, stream));
  }

 private:
  cublasLtHandle_t h_;
  Spec s_;
  size_t ws_bytes_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool ok_ = false;
  std::string why_;
};

}  // namespace lt
