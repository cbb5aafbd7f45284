// day50_gpt/nn/matmul.cuh: the matmuls through cuBLAS (cublasGemmEx, batched over heads) and the
// cuBLASLt workspace the fused (epilogue) matmuls share.
#pragma once
#include <cublas_v2.h>

#include <type_traits>

#include "check.cuh"
#include "types.cuh"

// ---- Matmuls through cuBLAS ------------------------------------------------------------------------
// Our tensors are row-major; cuBLAS is column-major. A row-major [R][K] matrix is the column-major
// [K][R] one, so out[N][O] = in[N][I] . W[O][I]^T is computed as out^T (O x N) = W^T . in^T with
// W read "transposed" (CUBLAS_OP_T). Inputs in T (fp32 or bf16), accumulation always in fp32, outputs
// in TO. The compute type (compute_type below): CUBLAS_COMPUTE_32F, so in fp32 mode no TF32, unless the
// model asked for TF32 (--precision tf32), then CUBLAS_COMPUTE_32F_FAST_TF32.
//
// The precision travels with the cuBLAS handle: Model::set_tf32 sets the handle's math mode to
// CUBLAS_TF32_TENSOR_OP_MATH, and every matmul of the model (the linear layers here, the tied head,
// the matmul attention's batched GEMMs) goes through a call below that reads it. So there is one flag,
// the model's, and no call site can miss it. fp32's handle keeps CUBLAS_DEFAULT_MATH (nn/model.cuh).
template <class T>
inline cublasComputeType_t compute_type(cublasHandle_t h) {
  if (!std::is_same<T, float>::value) return CUBLAS_COMPUTE_32F;  // bf16 inputs: tensor cores already
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  CUBLAS_CHECK(cublasGetMathMode(h, &mode));
  // The mode's low bits name it; CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (16) may be or-ed in.
  return (int(mode) & 0xF) == int(CUBLAS_TF32_TENSOR_OP_MATH) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}
template <class T, class TO>
inline void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* A, int lda,
                 const T* B, int ldb, TO* C, int ldc, float beta) {
  const float one = 1.f;
  CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &one, A, Types<T>::blas, lda, B, Types<T>::blas, ldb, &beta, C,
                            Types<TO>::blas, ldc, compute_type<T>(h), CUBLAS_GEMM_DEFAULT));
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
                                   Types<T>::blas, ldc, batch, compute_type<T>(h), CUBLAS_GEMM_DEFAULT));
}

constexpr size_t kLtWorkspace = size_t(32) << 20;  // cuBLASLt's workspace
