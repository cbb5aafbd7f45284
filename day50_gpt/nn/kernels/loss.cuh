// day50_gpt/nn/kernels/loss.cuh: softmax + cross-entropy, forward and backward in one pass.
#pragma once
#include "common.cuh"

namespace k {

// ---- Loss --------------------------------------------------------------------------------------
// One warp per row of fp32 logits: the loss, and dlogits = (softmax - onehot) / N in T.
template <class T>
__global__ void softmax_xent(const float* logits, const int* target, float* loss, T* dlogits, int N, int V) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* z = logits + size_t(row) * V;
  float mx = -INFINITY;
  for (int v = lane; v < V; v += kWarp) mx = fmaxf(mx, z[v]);
  mx = warp_max(mx);
  float sum = 0;
  for (int v = lane; v < V; v += kWarp) sum += __expf(z[v] - mx);
  sum = warp_sum(sum);
  const int tg = target[row];
  if (lane == 0) loss[row] = -(z[tg] - mx - logf(sum));
  for (int v = lane; v < V; v += kWarp)
    dlogits[size_t(row) * V + v] = st<T>((__expf(z[v] - mx) / sum - (v == tg ? 1.f : 0.f)) / N);
}

}  // namespace k
