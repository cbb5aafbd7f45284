// Variant 3, continued: the single-channel 3x3 "same" convolution as a register window.
//
// The textbook kernel (3_tiled_single.cuh) moves each input byte from DRAM once, yet stays
// far from copy bandwidth: per output it spends 9 shared-memory loads, 9 FMAs, and the
// index arithmetic and bounds tests of the halo load, so instruction issue, not DRAM, is
// its limit. This version drops shared memory:
//  - a thread owns 4 adjacent columns: one float4 load per input row, and the two
//    neighbouring columns taken from the adjacent lanes' registers with warp shuffles;
//  - it computes ROWS output rows from ROWS + 2 input rows held in registers, so each input
//    row is loaded once per thread and used up to three times;
//  - per 4 outputs: 36 FMAs, 3 loads and one float4 store.
#pragma once
#include "3_tiled_single.cuh"

template <int ROWS>
__global__ void __launch_bounds__(128)
    conv_03b_strip(int H, int W, const float* __restrict__ x, float* __restrict__ y) {
  const int W4 = W / 4, q4 = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
  // No early return: the whole warp takes part in the shuffles below. A lane past the
  // right edge loads zeros, which is exactly the padding its left neighbour needs.
  const bool valid = q4 < W4;
  const int q = 4 * q4, p0 = blockIdx.y * ROWS;
  const float* xn = x + size_t(blockIdx.z) * H * W;
  float* yn = y + size_t(blockIdx.z) * H * W;
  float f[9];
#pragma unroll
  for (int i = 0; i < 9; ++i) f[i] = c_filter[i];
  // r = input row h, columns q-1 .. q+4 (zero outside the image: the padding). The two
  // neighbouring columns come from the adjacent lanes' float4 (warp shuffles); only lanes
  // 0 and 31 load theirs from memory.
  auto load_row = [&](int h, float(&r)[6]) {
    const bool ok = valid && h >= 0 && h < H;
    const float* row = xn + ptrdiff_t(h) * W;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (ok) v = *reinterpret_cast<const float4*>(row + q);
    float left = __shfl_up_sync(0xffffffffu, v.w, 1), right = __shfl_down_sync(0xffffffffu, v.x, 1);
    if (lane == 0) left = (ok && q > 0) ? row[q - 1] : 0.f;
    if (lane == 31) right = (ok && q + 4 < W) ? row[q + 4] : 0.f;
    r[0] = left;
    r[1] = v.x;
    r[2] = v.y;
    r[3] = v.z;
    r[4] = v.w;
    r[5] = right;
  };
  // All ROWS + 2 input rows are loaded first, then used: every load is independent and in
  // flight at once. (Loading each row just before its use left one row's latency exposed
  // per output row: 16 or 32 rows per thread ran slower than 8.)
  float win[ROWS + 2][6];
#pragma unroll
  for (int i = 0; i < ROWS + 2; ++i) load_row(p0 - 1 + i, win[i]);
#pragma unroll
  for (int i = 0; i < ROWS; ++i) {
    const int p = p0 + i;
    if (valid && p < H) {
      float o[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float a = 0.f;
#pragma unroll
        for (int r = 0; r < 3; ++r)
#pragma unroll
          for (int t = 0; t < 3; ++t) a += win[i + r][j + t] * f[r * 3 + t];
        o[j] = a;
      }
      *reinterpret_cast<float4*>(yn + size_t(p) * W + q) = make_float4(o[0], o[1], o[2], o[3]);
    }
  }
}

inline bool supports_03b(const ConvShape& s, std::string* why) {
  if (s.C != 1 || s.K != 1 || s.R != 3 || s.S != 3 || s.stride != 1 || s.dil != 1 || s.pad != 1 || s.W % 4 != 0) {
    *why = "register strip kernel: needs C = K = 1, a 3x3 filter, pad 1, stride 1, dilation 1, W a multiple of 4";
    return false;
  }
  return true;
}

template <int ROWS>
inline void run_03b_strip(const ConvShape& s, const float* x, float* y, cudaStream_t st) {
  dim3 block(128), grid(ceil_div(s.W / 4, 128), ceil_div(s.H, ROWS), s.N);
  conv_03b_strip<ROWS><<<grid, block, 0, st>>>(s.H, s.W, x, y);
  LAUNCH_CHECK();
}
