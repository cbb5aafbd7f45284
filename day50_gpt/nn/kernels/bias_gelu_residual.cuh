// day50_gpt/nn/kernels/bias_gelu_residual.cuh: the elementwise layers (bias, GELU, residual add) and the bias
// gradient's column sums (used where the cuBLASLt epilogues do not run: --fusion off, or a shape cuBLASLt refuses).
#pragma once
#include "common.cuh"

namespace k {

// ---- Elementwise -------------------------------------------------------------------------------
// y[n][o] += b[o]
template <class T>
__global__ void add_bias(T* y, const float* b, int N, int O) {
  GRID_STRIDE(i, size_t(N) * O) y[i] = st<T>(ld(y[i]) + b[i % O]);
}
__device__ __forceinline__ float gelu(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + tanhf(u));
}
__device__ __forceinline__ float gelu_grad(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x), t = tanhf(u);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * 0.7978845608f * (1.f + 3.f * 0.044715f * x * x);
}
template <class T>
__global__ void gelu_fwd(const T* x, T* y, size_t n) {
  GRID_STRIDE(i, n) y[i] = st<T>(gelu(ld(x[i])));
}
// dx = dy * gelu'(x) (dx may alias dy)
template <class T>
__global__ void gelu_bwd(const T* x, const T* dy, T* dx, size_t n) {
  GRID_STRIDE(i, n) dx[i] = st<T>(ld(dy[i]) * gelu_grad(ld(x[i])));
}
// The residual connection: out = a + drop(y) (out, a fp32; y is a sublayer's output in T). The dropout
// mask is drawn here, where y is read anyway (nn/dropout.h): no mask is stored, no extra pass is made.
template <class T>
__global__ void residual_add(float* out, const float* a, const T* y, size_t n, dropout::Params d, uint32_t site,
                             const StepVars* sv = nullptr) {
  for_each_dropout(n, at_step(d, sv), site, [&](size_t i, float f) { out[i] = a[i] + ld(y[i]) * f; });
}
// Dropout's backward, the mask regenerated: dy = mask * dx / (1 - p), in T for the next matmul.
template <class T>
__global__ void dropout_bwd(const float* dx, T* dy, size_t n, dropout::Params d, uint32_t site,
                            const StepVars* sv = nullptr) {
  for_each_dropout(n, at_step(d, sv), site, [&](size_t i, float f) { dy[i] = st<T>(dx[i] * f); });
}
// The same in place, in fp32 (the embedding's gradient, which nothing else reads afterwards).
__global__ void dropout_scale(float* x, size_t n, dropout::Params d, uint32_t site, const StepVars* sv = nullptr) {
  for_each_dropout(n, at_step(d, sv), site, [&](size_t i, float f) { x[i] *= f; });
}

// partial[chunk][c] = sum over the chunk's rows of dy[n][c]
template <class T>
__global__ void bias_partials(const T* dy, float* partial, int N, int C) {
  const int c = blockIdx.x * 32 + threadIdx.x, n0 = blockIdx.y * kColChunk;
  __shared__ float red[8][33];
  float s = 0;
  if (c < C)
    for (int n = n0 + threadIdx.y; n < min(N, n0 + kColChunk); n += 8) s += ld(dy[size_t(n) * C + c]);
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int j = 1; j < 8; ++j) s += red[j][threadIdx.x];
    partial[size_t(blockIdx.y) * C + c] = s;
  }
}

}  // namespace k
