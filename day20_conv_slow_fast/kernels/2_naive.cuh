// Variant 2: naive. One thread per output y[n][k][p][q]; every input and weight comes from
// global memory (through the caches). Supports any stride, padding and dilation.
//
// Consecutive threads take consecutive q, so the writes and most input reads coalesce;
// the weights are the same for the whole warp (a broadcast). What is missing is reuse:
// each input value is fetched again for every k and every (r, s) that touches it.
#pragma once
#include "conv_shape.h"
#include "check.cuh"

__global__ void conv_02_naive(ConvShape s, const float* __restrict__ x, const float* __restrict__ w,
                              float* __restrict__ y) {
  const int P = s.P(), Q = s.Q();
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= size_t(s.N) * s.K * P * Q) return;
  const int q = int(i % Q), p = int((i / Q) % P), k = int((i / (size_t(Q) * P)) % s.K),
            n = int(i / (size_t(Q) * P * s.K));
  float acc = 0.f;
  for (int c = 0; c < s.C; ++c) {
    const float* xc = x + (size_t(n) * s.C + c) * s.H * s.W;
    const float* wc = w + (size_t(k) * s.C + c) * s.R * s.S;
    for (int r = 0; r < s.R; ++r) {
      const int h = p * s.stride - s.pad + r * s.dil;
      if (h < 0 || h >= s.H) continue;
      for (int t = 0; t < s.S; ++t) {
        const int v = q * s.stride - s.pad + t * s.dil;
        if (v >= 0 && v < s.W) acc += xc[size_t(h) * s.W + v] * wc[r * s.S + t];
      }
    }
  }
  y[i] = acc;
}

inline void run_02_naive(const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
  const size_t n = s.y_elems();
  conv_02_naive<<<unsigned(ceil_div<size_t>(n, 256)), 256, 0, st>>>(s, x, w, y);
  LAUNCH_CHECK();
}
