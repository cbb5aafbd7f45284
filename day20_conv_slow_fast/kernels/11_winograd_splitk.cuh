// Variant 11: variant 9 with each GEMM's reduction over channels split across blocks (split-K),
// for the layers whose GEMMs are too few blocks to fill the GPU.
//
// Deep layers have few tiles and many channels. At 32x512x7x7 a 7x7 image is 2x2 tiles, so
// T = 128 for the whole batch, and each of the 36 GEMMs is K x T x C = 512 x 128 x 512: a 64 x 64
// block tile gives 8 x 2 blocks per GEMM, 576 blocks of 64 threads in all, about 4 per SM on 132
// SMs. Each block then walks the full reduction (512 channels, 32 k steps) with few warps per SM
// to hide its loads' latency. The GEMMs are short and wide in the wrong direction: the work is in
// the reduction, and the reduction is what one block does alone.
//
// Split-K: `splits` blocks share one output tile, each summing a slice of the channels into its
// own copy of M; the output transform adds the copies before it transforms (it reads all 36
// values of a tile anyway, so the sum costs loads, not a launch). That multiplies the blocks by
// `splits` and divides each block's serial chain by it. The price is splits x the traffic of M
// (written by the GEMM, read by the output transform), which is small exactly where split-K is
// wanted: at 7x7 M is 36 x 512 x 128 floats, 9.4 MB, and several copies still fit in L2. On
// layers with many tiles the extra copies of M cost more than the extra blocks give; the program
// times every configuration on every layer and the results show where each wins.
#pragma once
#include "9_batched_sgemm.cuh"

namespace wino4 {
// Channels per part: a whole number of the GEMM's k steps (a last part may be shorter or empty).
inline int split_chunk(const ConvShape& s, int splits) {
  const int steps = c_padded(s) / kCpad;
  return (steps + splits - 1) / splits * kCpad;
}
// U and V as for variant 9, and one M per part.
inline size_t splitk_workspace_bytes(const ConvShape& s, int splits) {
  return sizeof(float) * (u_floats(s) + v_floats(s) + size_t(splits) * m_floats(s));
}
}  // namespace wino4

// y = A^T (sum over parts of M) A: variant 8's output transform, reading `splits` copies of M.
__global__ void wino4_output_transform_splits(ConvShape s, const float* __restrict__ M, int splits,
                                              float* __restrict__ y) {
  const int T = wino4::tiles(s), Tp = wino4::tiles_padded(s);
  const size_t KT = size_t(s.K) * Tp;
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= KT) return;
  const int t = int(i % Tp), k = int(i / Tp);
  if (t >= T) return;
  float m[36], o[16];
#pragma unroll
  for (int e = 0; e < 36; ++e) m[e] = M[e * KT + i];
  for (int p = 1; p < splits; ++p) {
    const float* Mp = M + size_t(p) * 36 * KT;
#pragma unroll
    for (int e = 0; e < 36; ++e) m[e] += Mp[e * KT + i];
  }
  wino4::output_2d(m, o);
  wino4_store_tile(s, k, t, o, y);
}

// ws: wino4::splitk_workspace_bytes(s, splits) bytes (U, V, then `splits` copies of M).
template <int BM, int BN, int MINB>
inline void run_11_winograd4_splitk(const ConvShape& s, const float* x, const float* w, float* y, float* ws, int splits,
                                    cudaStream_t st) {
  const Wino4Bufs b(s, ws);
  const int Tp = wino4::tiles_padded(s), Cp = wino4::c_padded(s), Kp = wino4::k_padded(s);
  wino4_filter(s, w, b.U, st);
  wino4_input(s, x, b.V, st);
  const dim3 grid(unsigned(ceil_div(Tp, BN)), unsigned(ceil_div(s.K, BM)), unsigned(36 * splits));
  sgemm_09_batched<BM, BN, MINB, true><<<grid, BM * BN / 64, 0, st>>>(s.K, Tp, Cp, b.U, Kp, (long long)Cp * Kp, b.V,
                                                                      (long long)Cp * Tp, b.M, (long long)s.K * Tp, 36,
                                                                      wino4::split_chunk(s, splits));
  LAUNCH_CHECK();
  const size_t n = size_t(s.K) * Tp;
  wino4_output_transform_splits<<<unsigned(ceil_div<size_t>(n, 256)), 256, 0, st>>>(s, b.M, splits, y);
  LAUNCH_CHECK();
}
