// Variant 3: the textbook single-channel tiled convolution (C = K = 1, stride 1, dilation 1).
//
// - The filter lives in __constant__ memory: every thread of a warp reads the same weight at
//   the same time, which the constant cache serves as a broadcast in one cycle.
// - A block stages its input tile *with its halo* in shared memory: an output tile of
//   TW x (TH*PY) needs (TH*PY + R - 1) x (TW + S - 1) inputs. Each input is loaded from global
//   memory once per block and read R*S times from shared memory.
// - The tile size is the trade-off: bigger tiles waste less on the halo (for 3x3 and a 32x8
//   tile, 34*10/(32*8) = 1.33 loads per output; for 32x32, 34*34/1024 = 1.13), but use more
//   shared memory and leave fewer blocks to spread over the SMs. PY > 1 lets each thread
//   compute several outputs in a column, reusing the rows it already loaded.
// The image is memory-bound: 9 FMAs per 8 bytes moved, far below the GPU's ~14 FLOP/byte
// balance, so the goal is to move each byte once, at full bandwidth.
#pragma once
#include "conv_shape.h"
#include "check.cuh"

constexpr int kMaxConstFilter = 15 * 15;
__constant__ float c_filter[kMaxConstFilter];

// RS > 0: a compile-time RS x RS filter (loops unrolled); RS == 0: any size up to 15 x 15.
template <int TW, int TH, int PY, int RS>
__global__ void __launch_bounds__(TW* TH)
    conv_03_tiled(int N, int H, int W, int Rr, int Sr, int pad, const float* __restrict__ x, float* __restrict__ y) {
  const int R = RS ? RS : Rr, S = RS ? RS : Sr;
  const int P = H + 2 * pad - R + 1, Q = W + 2 * pad - S + 1;
  constexpr int OH = TH * PY;
  const int IW = TW + S - 1, IH = OH + R - 1;
  extern __shared__ float tile[];
  const int n = blockIdx.z, p0 = blockIdx.y * OH, q0 = blockIdx.x * TW;
  const float* xn = x + size_t(n) * H * W;
  // Load the tile and its halo: rows p0-pad .. p0-pad+IH-1, columns q0-pad .. q0-pad+IW-1.
  if constexpr (RS > 0) {
    // Compile-time tile: every thread issues all its loads first, then stores them. A loop
    // with a run-time trip count stores each value before loading the next, which leaves one
    // DRAM round trip in flight per thread: this memory-bound kernel then waits on latency,
    // not bandwidth (the README has the numbers for both versions).
    constexpr int CIW = TW + RS - 1, CIH = OH + RS - 1, NT = TW * TH, TOTAL = CIW * CIH, PER = (TOTAL + NT - 1) / NT;
    const int tid = threadIdx.y * TW + threadIdx.x;
    float v[PER];
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int e = tid + i * NT, r = e / CIW, c = e % CIW, h = p0 - pad + r, u = q0 - pad + c;
      v[i] = (e < TOTAL && h >= 0 && h < H && u >= 0 && u < W) ? xn[size_t(h) * W + u] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < PER; ++i)
      if (tid + i * NT < TOTAL) tile[tid + i * NT] = v[i];
  } else {
    for (int r = threadIdx.y; r < IH; r += TH) {
      const int h = p0 - pad + r;
      for (int c = threadIdx.x; c < IW; c += TW) {
        const int v = q0 - pad + c;
        tile[r * IW + c] = (h >= 0 && h < H && v >= 0 && v < W) ? xn[size_t(h) * W + v] : 0.f;
      }
    }
  }
  __syncthreads();
  const int q = threadIdx.x;
#pragma unroll
  for (int py = 0; py < PY; ++py) {
    const int p = threadIdx.y + py * TH;
    float acc = 0.f;
    if constexpr (RS > 0) {
#pragma unroll
      for (int r = 0; r < RS; ++r)
#pragma unroll
        for (int t = 0; t < RS; ++t) acc += tile[(p + r) * IW + q + t] * c_filter[r * RS + t];
    } else {
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < S; ++t) acc += tile[(p + r) * IW + q + t] * c_filter[r * S + t];
    }
    if (p0 + p < P && q0 + q < Q) y[(size_t(n) * P + p0 + p) * Q + q0 + q] = acc;
  }
}

inline bool supports_03(const ConvShape& s, std::string* why) {
  if (s.C != 1 || s.K != 1 || s.stride != 1 || s.dil != 1 || s.R * s.S > kMaxConstFilter) {
    *why = "single-channel kernel: needs C = K = 1, stride 1, dilation 1, filter <= 15x15";
    return false;
  }
  return true;
}

// Copy the filter to constant memory (once per filter, outside any timed region).
inline void set_03_filter(const ConvShape& s, const float* w_dev) {
  CUDA_CHECK(cudaMemcpyToSymbol(c_filter, w_dev, sizeof(float) * s.R * s.S, 0, cudaMemcpyDeviceToDevice));
}

template <int TW, int TH, int PY>
inline void run_03_tiled(const ConvShape& s, const float* x, float* y, cudaStream_t st) {
  const int P = s.P(), Q = s.Q();
  dim3 block(TW, TH), grid(ceil_div(Q, TW), ceil_div(P, TH * PY), s.N);
  const size_t smem = sizeof(float) * (TH * PY + s.R - 1) * (TW + s.S - 1);
  if (s.R == 3 && s.S == 3)
    conv_03_tiled<TW, TH, PY, 3><<<grid, block, smem, st>>>(s.N, s.H, s.W, 3, 3, s.pad, x, y);
  else
    conv_03_tiled<TW, TH, PY, 0><<<grid, block, smem, st>>>(s.N, s.H, s.W, s.R, s.S, s.pad, x, y);
  LAUNCH_CHECK();
}
