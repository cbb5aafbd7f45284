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
// ---- The same in one pass with 16-byte accesses, after cuBLAS's plain matmul: where a cuBLASLt
// epilogue is slower than the plain matmul and a pass of ours (nn/linear.cuh times both per shape).
// A Pack is V = 16 / sizeof(T) elements, one 128-bit load or store; the callers check that the row
// width is a multiple of V and that every pointer is 16-byte aligned.
template <class T>
struct alignas(16) Pack {
  T v[16 / sizeof(T)];
};
// pre[n][o] += b[o]; with act (not null) also act[n][o] = gelu(pre[n][o]), from the rounded
// pre-activation, the one the backward reads (as add_bias then gelu_fwd would give).
// DERIV (--gelu-deriv on, nn/linear.cuh; act not null): z = pre[n][o] + b[o] in fp32, act = gelu(z), and pre
// becomes gelu'(z), what the backward multiplies by (gelu_bwd_vec<T, true>), so that it needs no tanh of its own.
template <class T, bool DERIV = false>
__global__ void bias_gelu_vec(T* pre, const float* b, T* act, int N, int O) {
  constexpr int V = 16 / sizeof(T);
  const int OV = O / V;
  Pack<T>* p = reinterpret_cast<Pack<T>*>(pre);
  GRID_STRIDE(i, size_t(N) * OV) {
    const int o = int(i % OV) * V;
    Pack<T> x = p[i], y;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float z = ld(x.v[j]) + b[o + j];
      if constexpr (DERIV)
        y.v[j] = st<T>(gelu(z)), x.v[j] = st<T>(gelu_grad(z));
      else
        x.v[j] = st<T>(z);
    }
    p[i] = x;
    if (act) {
      if constexpr (!DERIV) {
#pragma unroll
        for (int j = 0; j < V; ++j) y.v[j] = st<T>(gelu(ld(x.v[j])));
      }
      reinterpret_cast<Pack<T>*>(act)[i] = y;
    }
  }
}
// act = gelu(pre) over `packs` Packs: the MLP's GELU output recomputed in the backward from the kept
// pre-activation (--recompute on, nn/model.cuh), one read and one write per element.
template <class T>
__global__ void gelu_fwd_vec(const T* pre, T* act, size_t packs) {
  constexpr int V = 16 / sizeof(T);
  const Pack<T>* px = reinterpret_cast<const Pack<T>*>(pre);
  Pack<T>* py = reinterpret_cast<Pack<T>*>(act);
  GRID_STRIDE(i, packs) {
    const Pack<T> x = px[i];
    Pack<T> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = st<T>(gelu(ld(x.v[j])));
    py[i] = y;
  }
}
// d = d * gelu'(x) in place, over `packs` Packs (gelu_bwd with dx == dy, 128-bit accesses); KEPT: x is the
// derivative itself, kept by fc's forward (--gelu-deriv, bias_gelu_vec<T, true>), and d = d * x.
template <class T, bool KEPT = false>
__global__ void gelu_bwd_vec(const T* x, T* d, size_t packs) {
  constexpr int V = 16 / sizeof(T);
  const Pack<T>* px = reinterpret_cast<const Pack<T>*>(x);
  Pack<T>* pd = reinterpret_cast<Pack<T>*>(d);
  GRID_STRIDE(i, packs) {
    const Pack<T> a = px[i];
    Pack<T> g = pd[i];
#pragma unroll
    for (int j = 0; j < V; ++j) g.v[j] = st<T>(ld(g.v[j]) * (KEPT ? ld(a.v[j]) : gelu_grad(ld(a.v[j]))));
    pd[i] = g;
  }
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

// One dropout site's mask as T: 1 where the element is kept, 0 where dropped; the same Philox draws as
// the kernels above. For --backend cudnn, whose graphs multiply by it and then by the scale 1/(1-p)
// (nn/cudnn_layers.h): cuDNN's own random-number operation draws another stream, whose masks would not
// be the custom path's or the CPU reference's.
template <class T>
__global__ void dropout_mask(T* mask, size_t n, dropout::Params d, uint32_t site, const StepVars* sv = nullptr) {
  for_each_dropout(n, at_step(d, sv), site, [&](size_t i, float f) { mask[i] = st<T>(f != 0.f ? 1.f : 0.f); });
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
