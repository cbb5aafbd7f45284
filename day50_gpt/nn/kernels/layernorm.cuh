// day50_gpt/nn/kernels/layernorm.cuh: LayerNorm forward and backward (rows), and its gains' and biases' gradients
// (column sums).
#pragma once
#include "common.cuh"

namespace k {

// ---- LayerNorm ---------------------------------------------------------------------------------
// One warp per row: mean, 1/std, y = (x - mean) * rstd * g + b. x is fp32 (the residual stream).
template <class T>
__global__ void layernorm_fwd(const float* x, const float* g, const float* b, T* y, float* mean, float* rstd, int N,
                              int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* xr = x + size_t(row) * C;
  float s = 0;
  for (int i = lane; i < C; i += kWarp) s += xr[i];
  const float m = warp_sum(s) / C;
  float v = 0;
  for (int i = lane; i < C; i += kWarp) v += (xr[i] - m) * (xr[i] - m);
  const float r = rsqrtf(warp_sum(v) / C + 1e-5f);
  for (int i = lane; i < C; i += kWarp) y[size_t(row) * C + i] = st<T>((xr[i] - m) * r * g[i] + b[i]);
  if (lane == 0) mean[row] = m, rstd[row] = r;
}
// dx (+)= rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * g; also writes dx in
// T (dx_t) for the next matmul's input. `accumulate` false: dx = ..., true: dx += ...
// The parameter gradients are a column sum over rows: see ln_param_partials.
template <class T>
__global__ void layernorm_bwd(const float* x, const float* g, const float* mean, const float* rstd, const T* dy,
                              float* dx, T* dx_t, int N, int C, bool accumulate) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* xr = x + size_t(row) * C;
  const T* dyr = dy + size_t(row) * C;
  const float m = mean[row], r = rstd[row];
  float s1 = 0, s2 = 0;
  for (int i = lane; i < C; i += kWarp) {
    const float xh = (xr[i] - m) * r, dxh = ld(dyr[i]) * g[i];
    s1 += dxh, s2 += dxh * xh;
  }
  s1 = warp_sum(s1) / C, s2 = warp_sum(s2) / C;
  for (int i = lane; i < C; i += kWarp) {
    const float xh = (xr[i] - m) * r;
    const size_t at = size_t(row) * C + i;
    const float d = (accumulate ? dx[at] : 0.f) + r * (ld(dyr[i]) * g[i] - s1 - xh * s2);
    dx[at] = d;
    dx_t[at] = st<T>(d);  // for T = float, dx_t == dx: the same value written twice
  }
}

// Two column sums at once for LayerNorm: dg = sum dy * xhat, db = sum dy. partial: [chunks][2][C].
template <class T>
__global__ void ln_param_partials(const float* x, const float* mean, const float* rstd, const T* dy, float* partial,
                                  int N, int C) {
  const int c = blockIdx.x * 32 + threadIdx.x, n0 = blockIdx.y * kColChunk;
  __shared__ float red[2][8][33];
  float sg = 0, sb = 0;
  if (c < C)
    for (int n = n0 + threadIdx.y; n < min(N, n0 + kColChunk); n += 8) {
      const float d = ld(dy[size_t(n) * C + c]);
      sg += d * (x[size_t(n) * C + c] - mean[n]) * rstd[n];
      sb += d;
    }
  red[0][threadIdx.y][threadIdx.x] = sg, red[1][threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int j = 1; j < 8; ++j) sg += red[0][j][threadIdx.x], sb += red[1][j][threadIdx.x];
    partial[(size_t(blockIdx.y) * 2 + 0) * C + c] = sg;
    partial[(size_t(blockIdx.y) * 2 + 1) * C + c] = sb;
  }
}

}  // namespace k
