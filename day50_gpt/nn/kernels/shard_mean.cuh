// day50_gpt/nn/kernels/shard_mean.cuh: the one kernel of the copy-engine all-reduce (run/copy_allreduce.cuh):
// a GPU's shard of a bucket, averaged over the GPUs' copies of it.
#pragma once
#include <type_traits>

#include "common.cuh"

namespace k {

// out = the mean over ranks q = 0..n-1 of x_q, where x_rank is `own` and the other ranks' values are the
// copies in `peers` (n - 1 slots of `stride` elements, in rank order with `rank` left out). Each term is
// scaled by 1/n before the sum, in rank order, as NCCL's ncclAvg does for floating types: with two GPUs
// the result is x/2 + y/2 bit for bit, and whichever GPU owns a shard, every GPU gets the same bits.
// T = float: out_f is the gradient itself (== own: each element is read before it is written).
// T = bf16 (--allreduce bf16): the mean rounded to bf16 goes to out_t (the staging the other GPUs pull
// from), and those same bits, widened, to out_f (the fp32 gradient AdamW reads).
// N: the ranks when known at compile time (2: both loads issued before either is used, no loop), 0: `n`.
template <class T, int N = 0>
__global__ void shard_mean(const T* own, const T* peers, size_t stride, int n, int rank, size_t count, T* out_t,
                           float* out_f) {
  if constexpr (N) n = N;
  const float inv = 1.f / float(n);
  GRID_STRIDE(i, count) {
    float s = 0.f;
    if constexpr (N == 2) {
      const float a = ld(own[i]) * inv, b = ld(peers[i]) * inv;
      s = rank == 0 ? a + b : b + a;  // rank order (the same bits either way: addition commutes)
    } else {
      for (int q = 0, slot = 0; q < n; ++q) s += (q == rank ? ld(own[i]) : ld(peers[size_t(slot++) * stride + i])) * inv;
    }
    if constexpr (std::is_same<T, float>::value) {
      out_f[i] = s;
    } else {
      const T r = st<T>(s);
      out_t[i] = r, out_f[i] = ld(r);
    }
  }
}

}  // namespace k
