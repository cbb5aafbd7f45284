// Variant 10: variant 9, a slice of the batch at a time, so that V and M never leave L2.
//
// Variants 8 and 9 write V and M for the whole batch: at 32x64x56x56 each is 36/16 = 2.25x the
// size of the input (58 MB), so the input transform writes V to DRAM, the GEMMs read it back and
// write M, and the output transform reads M back: about four passes over 58 MB on top of reading x
// and writing y once. But nothing forces the whole batch through each stage at once. Run the
// three stages on a few images at a time, with V and M sized for those images: the same small
// buffers are rewritten for every slice, so their lines stay in L2 (60 MiB on an H200, 50 MiB on
// an H100) from the write to the read, and what reaches DRAM is mostly x, y and the filters.
// "Transformed tiles on chip", with L2 as the chip memory instead of shared memory.
//
// The price: a slice has fewer tiles, so each GEMM launch has fewer blocks (at 8 images of 56x56,
// T = 1568 tiles, a 64 x 64 block tile gives 25 x 36 = 900 blocks, less than one wave of 8 per SM
// on 132 SMs), each launch ends with a tail where SMs idle, and there are three launches per slice
// instead of three in all. The L2 budget for V + M is a parameter; the program times two budgets
// at the 64 x 64 tile and records each layer's slices, launches and GEMM blocks beside its time.
// A layer whose V and M fit the budget whole runs as one slice, i.e. exactly variant 9. The
// workspace shrinks with the slice.
#pragma once
#include <algorithm>

#include "9_batched_sgemm.cuh"

namespace wino4 {
// Images per slice: as many as keep V + M within `budget` bytes (at least 1), then evened out
// over the slices so that the last one is not a small remainder.
inline int slice_images(const ConvShape& s, size_t budget) {
  ConvShape c = s;
  c.N = 1;
  const size_t per_image = sizeof(float) * (v_floats(c) + m_floats(c));  // padding makes it an upper bound
  int n = int(std::max<size_t>(1, std::min<size_t>(s.N, budget / per_image)));
  const int slices = (s.N + n - 1) / n;
  return (s.N + slices - 1) / slices;
}
inline size_t sliced_workspace_bytes(const ConvShape& s, size_t budget) {
  ConvShape c = s;
  c.N = slice_images(s, budget);
  return sizeof(float) * (u_floats(s) + v_floats(c) + m_floats(c));
}
}  // namespace wino4

// ws: wino4::sliced_workspace_bytes(s, budget) bytes: U for all filters, V and M for one slice.
template <int BM, int BN, int MINB>
inline void run_10_winograd4_sliced(const ConvShape& s, const float* x, const float* w, float* y, float* ws,
                                    size_t budget, cudaStream_t st) {
  const int per = wino4::slice_images(s, budget);
  ConvShape c = s;
  c.N = per;
  float* U = ws;
  float* V = U + wino4::u_floats(s);
  float* M = V + wino4::v_floats(c);  // V and M are placed for a full slice; the last may be shorter
  const Wino4Bufs b(U, V, M);
  wino4_filter(s, w, U, st);
  for (int n0 = 0; n0 < s.N; n0 += per) {
    c.N = std::min(per, s.N - n0);
    wino4_input(c, x + size_t(n0) * s.C * s.H * s.W, V, st);
    wino4_gemm_own<BM, BN, MINB>(c, b, st);
    wino4_output(c, M, y + size_t(n0) * s.K * s.P() * s.Q(), st);
  }
}
