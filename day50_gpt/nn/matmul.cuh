// day50_gpt/nn/matmul.cuh: the matmuls through cuBLAS (cublasGemmEx, batched over heads) and the
// cuBLASLt workspace the fused (epilogue) matmuls share.
#pragma once
#include <cublas_v2.h>

#include "check.cuh"
#include "types.cuh"

// ---- Matmuls through cuBLAS ------------------------------------------------------------------------
// Our tensors are row-major; cuBLAS is column-major. A row-major [R][K] matrix is the column-major
// [K][R] one, so out[N][O] = in[N][I] . W[O][I]^T is computed as out^T (O x N) = W^T . in^T with
// W read "transposed" (CUBLAS_OP_T). Inputs in T (fp32 or bf16), accumulation always in fp32
// (CUBLAS_COMPUTE_32F: in fp32 mode no TF32), outputs in TO.
template <class T, class TO>
inline void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* A, int lda,
                 const T* B, int ldb, TO* C, int ldc, float beta) {
  const float one = 1.f;
  CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &one, A, Types<T>::blas, lda, B, Types<T>::blas, ldb, &beta, C,
                            Types<TO>::blas, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
// out[N][O] = in[N][I] . W[O][I]^T
template <class T, class TO>
inline void matmul_fwd(cublasHandle_t h, const T* in, const T* W, TO* out, int N, int I, int O) {
  gemm<T, TO>(h, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, W, I, in, I, out, O, 0.f);
}
// din[N][I] = dout[N][O] . W[O][I]
template <class T>
inline void matmul_bwd_in(cublasHandle_t h, const T* dout, const T* W, T* din, int N, int I, int O) {
  gemm<T, T>(h, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, W, I, dout, O, din, I, 0.f);
}
// dW[O][I] += dout^T . in (fp32 gradients, whatever T is)
template <class T>
inline void matmul_bwd_w(cublasHandle_t h, const T* in, const T* dout, float* dW, int N, int I, int O) {
  gemm<T, float>(h, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, in, I, dout, O, dW, I, 1.f);
}

// Batched over the B*H heads, through arrays of pointers (a head's rows are strided inside qkv).
template <class T>
inline void gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         void* const* A, int lda, void* const* B, int ldb, void* const* C, int ldc, int batch) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasGemmBatchedEx(h, ta, tb, m, n, k, &one, A, Types<T>::blas, lda, B, Types<T>::blas, ldb, &zero, C,
                                   Types<T>::blas, ldc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

constexpr size_t kLtWorkspace = size_t(32) << 20;  // cuBLASLt's workspace
