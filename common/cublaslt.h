// common/cublaslt.h: one cuBLASLt matmul with a fused epilogue, configured once and run many times.
//
// cuBLASLt is cuBLAS's configurable GEMM: besides D = alpha * op(A) * op(B) + beta * C it can apply an
// *epilogue* to the result before it is stored, which saves a separate pass over D:
//   BIAS            D = A.B + bias (the bias broadcast along D's columns: one value per row of D)
//   GELU_AUX_BIAS   D = gelu(A.B + bias), and the pre-activation A.B + bias also written to `aux`
//   DGELU           D = (A.B) * gelu'(aux)          (the backward of the above, for the input gradient)
//   BGRADB          D = A.B (+ beta C), and `bias` = the sum of op(B) over the k dimension (a bias gradient)
// Everything is column-major, as in cuBLAS. Descs holds one matmul's descriptors and asks cuBLASLt's
// heuristic for algorithms; day50's lt::Tuned (nn/lt_tuned.cuh) times those and keeps the fastest.
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
  // fp32 accumulation. CUBLAS_COMPUTE_32F keeps fp32 inputs in fp32 (no TF32); a caller that wants
  // fp32 inputs on the TF32 tensor cores says so with CUBLAS_COMPUTE_32F_FAST_TF32.
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  // The split-K reductions the heuristic may offer (cublasLtReductionScheme_t bits; all by default). Where
  // K is long (a weight gradient's K is every token of the batch) cuBLASLt may split it over CTAs and add
  // the parts in a kernel of its own afterwards (COMPUTE_TYPE / OUTPUT_TYPE: a trace shows it as
  // splitKreduce_kernel); INPLACE alone keeps the adding inside the GEMM (or no split at all).
  uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_MASK;
  // The SMs the heuristic sizes its algorithms for (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET; 0: the GPU's
  // own count): fewer where a concurrent stream is meant to keep the others busy.
  int sm_target = 0;
};

// The descriptors of one matmul: the operation with its compute type, transposes and epilogue, and
// the layouts of op(A), op(B) and C = D. Made once, freed with it.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_MASK;  // Spec::reductions, for the heuristic's preference

  explicit Descs(const Spec& s) : reductions(s.reductions) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, s.compute, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &s.ta, sizeof s.ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &s.tb, sizeof s.tb));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof s.epilogue));
    if (s.sm_target > 0) {
      const int32_t sms = s.sm_target;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
    }
    if (s.aux_ld)
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &s.aux_ld, sizeof s.aux_ld));
    const bool a_t = s.ta != CUBLAS_OP_N, b_t = s.tb != CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, s.ab, a_t ? s.k : s.m, a_t ? s.m : s.k, s.lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, s.ab, b_t ? s.n : s.k, b_t ? s.k : s.n, s.ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d, s.cd, s.m, s.n, s.ldd));
  }
  ~Descs() {
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(d);
    cublasLtMatmulDescDestroy(op);
  }
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;

  // cuBLASLt's heuristic: up to n algorithms that fit in ws_bytes of workspace, best first, into r.
  // Returns how many; 0 with *why set when it has none (a type/epilogue pair it refuses is an answer,
  // not an error: the caller falls back to plain GEMMs). Our buffers come from cudaMalloc (256-byte
  // aligned) at offsets that are multiples of 16 bytes, the alignment the heuristic assumes.
  int heuristic(cublasLtHandle_t h, size_t ws_bytes, int n, cublasLtMatmulHeuristicResult_t* r,
                std::string* why) const {
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                      sizeof ws_bytes));
    if (reductions != CUBLASLT_REDUCTION_SCHEME_MASK)
      CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                                                        sizeof reductions));
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, a, b, d, d, pref, n, r, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      *why = std::string("cuBLASLt has no algorithm for this epilogue and type combination") +
             (reductions != CUBLASLT_REDUCTION_SCHEME_MASK
                  ? " with split-K reductions limited to mask " + std::to_string(reductions)
                  : std::string()) +
             " (" + cublasGetStatusString(st) + ")";
      return 0;
    }
    return found;
  }

  // The epilogue's pointers for the next call (null: not used by this epilogue).
  void set_pointers(const void* bias, void* aux) {
    if (bias) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (aux)
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
  }
};

}  // namespace lt
