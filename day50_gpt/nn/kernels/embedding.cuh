// day50_gpt/nn/kernels/embedding.cuh: token + position embedding forward and backward, and the batch gathered on the
// GPU.
#pragma once
#include "../dropout.h"
#include "common.cuh"

namespace k {

// ---- Embedding ---------------------------------------------------------------------------------
// x[n][c] = drop(wte[tok[n]][c] + wpe[n % T][c])   (fp32: x is the residual stream)
__global__ void embed_fwd(const int* tok, const float* wte, const float* wpe, float* x, int N, int T, int C,
                          dropout::Params d, const StepVars* sv = nullptr) {
  for_each_dropout(size_t(N) * C, at_step(d, sv), dropout::site_embed(), [&](size_t i, float f) {
    const int n = int(i / C), c = int(i % C);
    x[i] = (wte[size_t(tok[n]) * C + c] + wpe[size_t(n % T) * C + c]) * f;
  });
}
// dwpe[t][c] += sum_b dx[b*T + t][c]: one thread per (t, c), the batch summed in order.
__global__ void embed_bwd_pos(const float* dx, float* dwpe, int B, int T, int C) {
  GRID_STRIDE(i, size_t(T) * C) {
    float s = 0;
    for (int b = 0; b < B; ++b) s += dx[size_t(b) * T * C + i];
    dwpe[i] += s;
  }
}
// dwte[v][c] += sum over positions n with tok[n] == v of dx[n][c], in two deterministic stages.
// Block (v, slice) walks its slice of the batch 256 tokens at a time, finds token v's positions
// with a ballot (in order), adds those rows, and writes one partial row; colsum_finish then adds
// the slices' partials in order. No atomics: a frequent byte (the space) is not summed by thousands
// of colliding atomicAdds, and the slices keep its block from summing a tenth of the batch alone.
constexpr int kEmbedSlice = 512;  // positions per slice
inline int embed_slices(int N) { return (N + kEmbedSlice - 1) / kEmbedSlice; }
__global__ void embed_bwd_tok(const int* tok, const float* dx, float* partial, int N, int C, int V) {
  const int v = blockIdx.x, n_begin = blockIdx.y * kEmbedSlice, n_end = min(N, n_begin + kEmbedSlice);
  __shared__ int found[256];
  __shared__ int warp_count[256 / kWarp];
  constexpr int kCols = 32;  // columns per thread: C <= 32 * blockDim.x (checked by the program)
  float acc[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) acc[j] = 0.f;
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp;
  for (int base = n_begin; base < n_end; base += blockDim.x) {
    const int n = base + int(threadIdx.x);
    const bool hit = n < n_end && tok[n] == v;
    const unsigned mask = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) warp_count[w] = __popc(mask);
    __syncthreads();
    int before = 0, total = 0;
    for (int i = 0; i < int(blockDim.x / kWarp); ++i) before += i < w ? warp_count[i] : 0, total += warp_count[i];
    if (hit) found[before + __popc(mask & ((1u << lane) - 1))] = n;
    __syncthreads();
    for (int f = 0; f < total; ++f) {
      const float* row = dx + size_t(found[f]) * C;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int c = threadIdx.x + j * blockDim.x;
        if (c < C) acc[j] += row[c];
      }
    }
    __syncthreads();
  }
  float* out = partial + (size_t(blockIdx.y) * V + v) * C;
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    if (c < C) out[c] = acc[j];
  }
}

// ---- Keeping the training step free of host synchronization -------------------------------------
// The batch is gathered on the GPU from the corpus uploaded once (train::batch's twin). With sv, the
// step's data position sv->pos is added to `pos` (which then holds only the replica's offset).
__global__ void gather_batch(const int* data, size_t n, unsigned long long pos, int B, int T, int* tok, int* tgt,
                             const StepVars* sv = nullptr) {
  if (sv) pos += sv->pos;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < B * T; i += gridDim.x * blockDim.x) {
    const size_t at = size_t((pos + (unsigned long long)i) % n);  // sequences are consecutive: b*T + t == i
    tok[i] = data[at];
    tgt[i] = data[(at + 1) % n];
  }
}

// Random batches (train::batch_random's twin): sequence b0 + b of the global batch at `step` starts at
// dropout::sequence_start, a Philox draw; one thread per token. With sv, the step is sv->step.
__global__ void gather_batch_random(const int* data, size_t n, unsigned long long key, long long step,
                                    unsigned long long b0, int B, int T, int* tok, int* tgt,
                                    const StepVars* sv = nullptr) {
  if (sv) step = sv->step;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < B * T; i += gridDim.x * blockDim.x) {
    const int b = i / T, t = i % T;
    const size_t at = size_t(dropout::sequence_start(key, step, b0 + (unsigned long long)b, n, T)) + size_t(t);
    tok[i] = data[at];
    tgt[i] = data[at + 1];
  }
}

}  // namespace k
