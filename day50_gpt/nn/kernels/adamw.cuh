// day50_gpt/nn/kernels/adamw.cuh: the gradient norm (two-stage, no atomics), AdamW with clipping, and the fp32 -> T
// weight copy (and bf16 -> fp32 for the bf16 gradient collectives).
#pragma once
#include "common.cuh"

namespace k {

// ---- Optimizer ---------------------------------------------------------------------------------
// Sum of squares in two deterministic stages: per-block partials, then one block adds them in order.
constexpr int kNormBlocks = 1024;
__global__ void sum_squares_partial(const float* g, size_t n, float* partial) {
  __shared__ float part[256 / kWarp];
  float s = 0;
  GRID_STRIDE(i, n) s += g[i] * g[i];
  s = warp_sum(s);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0;
    for (int i = 0; i < int(blockDim.x / kWarp); ++i) t += part[i];
    partial[blockIdx.x] = t;
  }
}
// The sum of x[0..n) by one block of 256 threads, in a fixed order; every thread gets it. The same code
// in any block gives the same bits.
__device__ __forceinline__ float sum_256(const float* x, int n) {
  __shared__ float part[256 / kWarp + 1];
  float s = 0;
  for (int i = threadIdx.x; i < n; i += 256) s += x[i];
  s = warp_sum(s);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0;
    for (int i = 0; i < 256 / kWarp; ++i) t += part[i];
    part[256 / kWarp] = t;
  }
  __syncthreads();
  return part[256 / kWarp];
}
// out[0] = sum of x[0..n) (or the mean, when divide): one block of 256 threads, fixed order. With sv:
// out[sv->slot] (the step's place in the logging buffer).
__global__ void block_sum(const float* x, int n, float* out, bool divide, const StepVars* sv = nullptr) {
  if (sv) out += sv->slot;
  const float t = sum_256(x, n);
  if (threadIdx.x == 0) out[0] = divide ? t / n : t;
}
// AdamW with the clipping scale min(1, clip / norm) computed here from the squared norm (no host
// round trip): every block adds up the nsq partial sums of squares itself (sum_256, 256 threads a block:
// the same bits in every block, and those of block_sum, which was a launch of its own on the step's
// chain; nsq = 1: the sum is given). The norm is kept for the log. In bf16 mode it also refreshes the
// bf16 copy of the weights that the matmuls read (p_t; null in fp32 mode). With sv, the learning rate and
// the bias corrections come from device memory and the norm goes to norm_out[sv->slot].
// With uv (--adamw-overlap on: the update a step left to the next, run on a part of the parameters at a
// time) the learning rate and the bias corrections come from there instead, nothing runs where uv->on is 0,
// and norm_out is null (the step before wrote its norm: k::norm_of).
template <class T>
__global__ void adamw_clipped(float* p, T* p_t, const float* g, float* m, float* v, const unsigned char* decay,
                              size_t n, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                              const float* sumsq, int nsq, float clip, float* norm_out,
                              const StepVars* sv = nullptr, const UpdateVars* uv = nullptr) {
  if (uv) {
    if (!uv->on) return;
    lr = uv->lr, bc1 = uv->bc1, bc2 = uv->bc2;
  }
  if (sv) lr = sv->lr, bc1 = sv->bc1, bc2 = sv->bc2, norm_out = norm_out ? norm_out + sv->slot : nullptr;
  const float norm = sqrtf(sum_256(sumsq, nsq)), gscale = norm > clip ? clip / norm : 1.f;
  if (norm_out && blockIdx.x == 0 && threadIdx.x == 0) *norm_out = norm;
  GRID_STRIDE(i, n) {
    const float gi = g[i] * gscale;
    const float mi = b1 * m[i] + (1 - b1) * gi, vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = mi, v[i] = vi;
    const float pi = p[i] - lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + (decay[i] ? wd * p[i] : 0.f));
    p[i] = pi;
    if (p_t) p_t[i] = st<T>(pi);
  }
}
// The norm alone, from the nsq partial sums of squares, into norm_out (+ sv->slot): the same bits as AdamW's
// (sum_256), for --adamw-overlap on, whose step ends before its update.
__global__ void norm_of(const float* sumsq, int nsq, float* norm_out, const StepVars* sv = nullptr) {
  if (sv) norm_out += sv->slot;
  const float norm = sqrtf(sum_256(sumsq, nsq));
  if (threadIdx.x == 0) *norm_out = norm;
}
template <class T>
__global__ void convert(const float* x, T* y, size_t n) {
  GRID_STRIDE(i, n) y[i] = st<T>(x[i]);
}
// bf16 -> fp32 (data parallelism's bf16 collectives: the reduced gradient back to fp32 for AdamW).
__global__ void widen(const __nv_bfloat16* x, float* y, size_t n) { GRID_STRIDE(i, n) y[i] = __bfloat162float(x[i]); }

}  // namespace k
