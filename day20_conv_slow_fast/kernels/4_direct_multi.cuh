// Variant 4: multi-channel direct convolution, shared-memory input tiles, register blocking
// over output channels.
//
// A block owns a TW x TH patch of output positions for KB output channels of one image. It
// walks over the input channels CB at a time: it stages those channels' input patch (with
// halo; any stride and dilation) and the matching KB x CB x R x S weights in shared memory,
// then every thread accumulates its position for all KB channels in registers. Each input
// value read from shared memory now feeds KB FMAs, and each weight (the same for the whole
// block: a broadcast) feeds TW*TH. Compare with variant 2, where every FMA needed its own
// global load.
#pragma once
#include "conv_shape.h"
#include "check.cuh"

namespace direct {
constexpr int TW = 16, TH = 16, KB = 16, CB = 4;

inline size_t smem_bytes(const ConvShape& s) {
  const int ih = (TH - 1) * s.stride + (s.R - 1) * s.dil + 1, iw = (TW - 1) * s.stride + (s.S - 1) * s.dil + 1;
  return sizeof(float) * (size_t(CB) * ih * iw + size_t(KB) * CB * s.R * s.S);
}
}  // namespace direct

__global__ void __launch_bounds__(direct::TW* direct::TH)
    conv_04_direct(ConvShape s, const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
  using namespace direct;
  const int P = s.P(), Q = s.Q();
  const int IH = (TH - 1) * s.stride + (s.R - 1) * s.dil + 1, IW = (TW - 1) * s.stride + (s.S - 1) * s.dil + 1;
  const int RS = s.R * s.S;
  extern __shared__ float smem[];
  float* xin = smem;                 // [CB][IH][IW]
  float* wsh = smem + CB * IH * IW;  // [KB][CB][R*S]
  const int kblocks = (s.K + KB - 1) / KB;
  const int n = blockIdx.z / kblocks, k0 = (blockIdx.z % kblocks) * KB;
  const int p0 = blockIdx.y * TH, q0 = blockIdx.x * TW;
  const int tid = threadIdx.y * TW + threadIdx.x;
  const int h0 = p0 * s.stride - s.pad, v0 = q0 * s.stride - s.pad;
  float acc[KB];
#pragma unroll
  for (int kb = 0; kb < KB; ++kb) acc[kb] = 0.f;

  for (int c0 = 0; c0 < s.C; c0 += CB) {
    for (int i = tid; i < CB * IH * IW; i += TW * TH) {
      const int cb = i / (IH * IW), rem = i % (IH * IW), r = rem / IW, c = rem % IW;
      const int h = h0 + r, v = v0 + c;
      xin[i] = (c0 + cb < s.C && h >= 0 && h < s.H && v >= 0 && v < s.W)
                   ? x[((size_t(n) * s.C + c0 + cb) * s.H + h) * s.W + v]
                   : 0.f;
    }
    for (int i = tid; i < KB * CB * RS; i += TW * TH) {
      const int kb = i / (CB * RS), cb = (i / RS) % CB, rs = i % RS;
      wsh[i] = (k0 + kb < s.K && c0 + cb < s.C) ? w[(size_t(k0 + kb) * s.C + c0 + cb) * RS + rs] : 0.f;
    }
    __syncthreads();
    for (int cb = 0; cb < CB; ++cb)
      for (int r = 0; r < s.R; ++r)
        for (int t = 0; t < s.S; ++t) {
          const float xv =
              xin[(cb * IH + threadIdx.y * s.stride + r * s.dil) * IW + threadIdx.x * s.stride + t * s.dil];
          const float* wp = wsh + cb * RS + r * s.S + t;
#pragma unroll
          for (int kb = 0; kb < KB; ++kb) acc[kb] += xv * wp[kb * CB * RS];
        }
    __syncthreads();
  }
  const int p = p0 + threadIdx.y, q = q0 + threadIdx.x;
  if (p < P && q < Q)
#pragma unroll
    for (int kb = 0; kb < KB; ++kb)
      if (k0 + kb < s.K) y[((size_t(n) * s.K + k0 + kb) * P + p) * Q + q] = acc[kb];
}

inline bool supports_04(const ConvShape& s, std::string* why) {
  if (direct::smem_bytes(s) > 48 * 1024) {
    *why = "direct kernel: its input tile for this stride/dilation/filter needs more than 48 KB of shared memory";
    return false;
  }
  return true;
}

inline void run_04_direct(const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
  using namespace direct;
  dim3 block(TW, TH), grid(ceil_div(s.Q(), TW), ceil_div(s.P(), TH), s.N * ceil_div(s.K, KB));
  conv_04_direct<<<grid, block, smem_bytes(s), st>>>(s, x, w, y);
  LAUNCH_CHECK();
}
