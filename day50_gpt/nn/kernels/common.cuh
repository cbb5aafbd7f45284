// day50_gpt/nn/kernels/common.cuh: what every kernel file of the GPT shares: loads and stores in the
// activation type, warp reductions, the grid-stride loop and the atomics-free column sums; and, through
// async.cuh, programmatic launch's two calls and the asynchronous copies into shared memory.
//
// Each kernel is the GPU twin of a function in gpt_ref.h / train_ref.h. Every kernel that touches activations is a
// template on the activation type `T`: float in fp32 mode, __nv_bfloat16 in bf16 mode. Whatever T is, arithmetic is
// done in fp32 (ld() widens, st() rounds), and three things always stay fp32: the residual stream x and its gradient dx
// (many small updates are added into them), the parameters' master copy with their gradients and AdamW state, and every
// reduction (LayerNorm statistics, softmax sums, parameter gradients).
//
// Reductions that produce parameter gradients never use atomics: each block writes a partial sum and
// a second kernel adds the partials in a fixed order. The same inputs then give the same bits on
// every run, which is what lets a resumed training run reproduce an uninterrupted one exactly
// (the fp32 path with the hand-written attention; cuDNN's attention backward accumulates dQ with
// atomics, so the bf16 path is reproducible only to rounding).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "../dropout.h"
#include "async.cuh"
#include "check.cuh"

namespace k {

constexpr int kWarp = 32;

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T>
__device__ __forceinline__ T st(float x);
template <>
__device__ __forceinline__ float st<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 st<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}

// Four consecutive elements as floats, one vector load or store: 16 bytes in fp32, 8 in bf16 (rounded to
// nearest). The fused LayerNorm's and the embedding's rows (C % 4 == 0).
__device__ __forceinline__ void load4(const float* p, float v[4]) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ __forceinline__ void load4(const __nv_bfloat16* p, float v[4]) {
  const uint2 q = *reinterpret_cast<const uint2*>(p);  // 4 bf16 = 8 bytes
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q.x)),
               hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q.y));
  v[0] = lo.x, v[1] = lo.y, v[2] = hi.x, v[3] = hi.y;
}
__device__ __forceinline__ void store4(float* p, const float v[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(__nv_bfloat16* p, const float v[4]) {
  uint2 q;
  *reinterpret_cast<__nv_bfloat162*>(&q.x) = __floats2bfloat162_rn(v[0], v[1]);
  *reinterpret_cast<__nv_bfloat162*>(&q.y) = __floats2bfloat162_rn(v[2], v[3]);
  *reinterpret_cast<uint2*>(p) = q;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

#define GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); i += size_t(gridDim.x) * blockDim.x)

// ---- The values that change from one training step to the next ------------------------------------
// The step, the sequential data position, the learning rate, AdamW's bias corrections and the slot of
// the step's loss and norm in the logging buffers. The trainer copies them into device memory before
// each step and the kernels read them there (sv non-null), so the launches of every step are the same:
// what lets one captured CUDA graph replay every step (run/trainer.cuh, --graph). sv null: the values
// passed by argument (the checks, validation, data parallelism).
// lr, bc1 and bc2 each start 16 bytes apart: --backend cudnn's AdamW graph reads them in place as
// [1][1][1] tensors, which cuDNN takes 16-byte aligned (nn/cudnn_layers.h's adamw).
// With --adamw-overlap on (run/trainer.cuh) a step's AdamW update runs in the next step, beside its forward:
// UpdateVars are that update's learning rate and bias corrections (those of the step whose gradient it
// applies) and whether there is one to apply (0: the step before applied its own, or there was none).
struct UpdateVars {
  float lr, bc1, bc2;
  int on;
};
struct StepVars {
  long long step;
  unsigned long long pos;
  alignas(16) float lr;
  alignas(16) float bc1;
  alignas(16) float bc2;
  int slot;
  UpdateVars upd;
};
// Dropout's parameters at this step: the step from device memory where there is one.
__device__ __forceinline__ dropout::Params at_step(dropout::Params d, const StepVars* sv) {
  if (sv) d.step = uint32_t(sv->step);
  return d;
}

// ---- Dropout (nn/dropout.h) ------------------------------------------------------------------------
// Calls f(i, factor) for the n elements of one dropout site, factor 0 or 1/(1-p). A thread takes four
// consecutive elements and draws their four factors with one Philox call (a call per element would
// cost four times the integer work: ten rounds of 32-bit multiplies). Without dropout: f(i, 1), the
// plain grid-stride loop.
template <class F>
__device__ __forceinline__ void for_each_dropout(size_t n, const dropout::Params& d, uint32_t site, F&& f) {
  if (!d.on) {
    GRID_STRIDE(i, n) f(i, 1.f);
    return;
  }
  const uint64_t g0 = d.first >> 2, g1 = (d.first + n + 3) >> 2;  // the groups of 4 that hold the n elements
  GRID_STRIDE(t, size_t(g1 - g0)) {
    const uint64_t g = g0 + t;
    float fac[4];
    dropout::factors4(d, site, g, fac);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t e = (g << 2) + uint64_t(j);
      if (e >= d.first && e < d.first + n) f(size_t(e - d.first), fac[j]);
    }
  }
}

// ---- Column sums without atomics (bias and LayerNorm parameter gradients) ----------------------
// Stage 1: block (32 x 8) owns 32 columns and a chunk of rows; it writes one partial per column.
// Stage 2 (colsum_finish) adds the partials of every chunk in chunk order.
constexpr int kColChunk = 256;  // rows per partial
inline int col_chunks(int N) { return (N + kColChunk - 1) / kColChunk; }

// out[k][c] += sum over chunks of partial[chunk][k][c], for k < K (K = 1: bias, 2: LayerNorm's g and
// b, whose outputs out0 and out1 need not be adjacent).
__global__ void colsum_finish(const float* partial, int chunks, int K, int C, float* out0, float* out1) {
  GRID_STRIDE(i, size_t(K) * C) {
    const int kk = int(i / C), c = int(i % C);
    float s = 0;
    for (int ch = 0; ch < chunks; ++ch) s += partial[(size_t(ch) * K + kk) * C + c];
    (kk == 0 ? out0 : out1)[c] += s;
  }
}

}  // namespace k
