// Kernel 8: day20's register-strip kernel (3b), generalized and tuned for the contest's case (a)
// (one channel, one 3x3 filter, pad 1: a memory-bound stencil).
//
// What changes against 3b, and why each might matter for a kernel that should run at copy speed:
//  - V float4 per thread per row (4 or 8 columns): with V = 2 each warp shuffle and each
//    scalar halo load at the warp's edges serves twice as many outputs;
//  - the block size is a parameter (64..256 threads): fewer, larger blocks cost the block
//    scheduler less; smaller ones fill the SMs more evenly at the end;
//  - a register cap (__launch_bounds__' second argument) trades registers for resident threads;
//  - loads through the read-only path (__ldg) and streaming stores (__stcs, "evict first"): the
//    output is never read again by this kernel, so it should not push the input out of L2.
// The autotuner in conv_cudnn.cu times every instantiation below and keeps the fastest; the
// table in the notes shows what each change was worth on the GPU.
#pragma once
#include "kernels/3b_single_register.cuh"  // day20's kernel 3b and the constant-memory filter

// __launch_bounds__(BLOCK, MINB): at most BLOCK threads, and at least MINB blocks resident per
// SM, which caps the registers per thread (65536 / (BLOCK * MINB)) so that enough loads are in flight.
template <int V, int ROWS, int BLOCK, int MINB, bool STREAM>
__global__ void __launch_bounds__(BLOCK, MINB)
    conv_08_strip(int H, int W, const float* __restrict__ x, float* __restrict__ y) {
  constexpr int COLS = 4 * V;
  const int Wv = W / COLS, t = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
  const bool valid = t < Wv;  // no early return: the whole warp takes part in the shuffles
  const int q = COLS * t, p0 = blockIdx.y * ROWS;
  const float* xn = x + size_t(blockIdx.z) * H * W;
  float* yn = y + size_t(blockIdx.z) * H * W;
  float f[9];
#pragma unroll
  for (int i = 0; i < 9; ++i) f[i] = c_filter[i];
  // r = input row h at columns q-1 .. q+COLS (zeros outside the image: the padding).
  auto load_row = [&](int h, float(&r)[COLS + 2]) {
    const bool ok = valid && h >= 0 && h < H;
    const float* row = xn + ptrdiff_t(h) * W;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
      if (ok)
        a = STREAM ? __ldg(reinterpret_cast<const float4*>(row + q) + v) : reinterpret_cast<const float4*>(row + q)[v];
      r[1 + 4 * v] = a.x;
      r[2 + 4 * v] = a.y;
      r[3 + 4 * v] = a.z;
      r[4 + 4 * v] = a.w;
    }
    float left = __shfl_up_sync(0xffffffffu, r[COLS], 1), right = __shfl_down_sync(0xffffffffu, r[1], 1);
    if (lane == 0) left = (ok && q > 0) ? row[q - 1] : 0.f;
    if (lane == 31) right = (ok && q + COLS < W) ? row[q + COLS] : 0.f;
    r[0] = left;
    r[COLS + 1] = right;
  };
  float win[ROWS + 2][COLS + 2];
#pragma unroll
  for (int i = 0; i < ROWS + 2; ++i) load_row(p0 - 1 + i, win[i]);
#pragma unroll
  for (int i = 0; i < ROWS; ++i) {
    const int p = p0 + i;
    if (!(valid && p < H)) continue;
    float o[COLS];
#pragma unroll
    for (int j = 0; j < COLS; ++j) {
      float a = 0.f;
#pragma unroll
      for (int r = 0; r < 3; ++r)
#pragma unroll
        for (int c = 0; c < 3; ++c) a += win[i + r][j + c] * f[r * 3 + c];
      o[j] = a;
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float4* dst = reinterpret_cast<float4*>(yn + size_t(p) * W + q) + v;
      const float4 val = make_float4(o[4 * v], o[4 * v + 1], o[4 * v + 2], o[4 * v + 3]);
      if (STREAM)
        __stcs(dst, val);
      else
        *dst = val;
    }
  }
}

inline bool supports_08(const ConvShape& s, int V, std::string* why) {
  if (s.C != 1 || s.K != 1 || s.R != 3 || s.S != 3 || s.stride != 1 || s.dil != 1 || s.pad != 1 || s.W % (4 * V) != 0) {
    *why = "tuned strip kernel: needs C = K = 1, a 3x3 filter, pad 1, stride 1, dilation 1, W a multiple of " +
           std::to_string(4 * V);
    return false;
  }
  return true;
}

template <int V, int ROWS, int BLOCK, int MINB, bool STREAM>
inline void run_08_strip(const ConvShape& s, const float* x, float* y, cudaStream_t st) {
  dim3 grid(ceil_div(s.W / (4 * V), BLOCK), ceil_div(s.H, ROWS), s.N);
  conv_08_strip<V, ROWS, BLOCK, MINB, STREAM><<<grid, BLOCK, 0, st>>>(s.H, s.W, x, y);
  LAUNCH_CHECK();
}
