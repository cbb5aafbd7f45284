// day50_gpt/nn/kernels/decode.cuh: generation with a KV cache (fp32, batch 1): one position through the model,
// matrix-vector products, and top-k sampling on the GPU.
#pragma once
#include "common.cuh"
#include "bias_gelu_residual.cuh"

namespace k {

// ---- Generation with a KV cache (fp32) ---------------------------------------------------------
// The token and its position live in device memory (tok[0], pos[0]) so that one decoding step can be
// captured once as a CUDA graph and replayed: the host launches one graph per token and waits once.
__global__ void embed_token(const int* tok, const int* pos, const float* wte, const float* wpe, float* x, int C) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
    x[c] = wte[size_t(tok[0]) * C + c] + wpe[size_t(pos[0]) * C + c];
}
__global__ void advance_position(int* pos) { ++pos[0]; }
__global__ void set_position(int* pos, int value) { pos[0] = value; }
// One new position t = pos[0] attends to cached keys/values 0..t. One block per head: thread s
// computes the score of cached position s (its key row read whole), the block finds max and sum,
// and the output sum_s p_s v_s is split over the threads by (dimension, slice of positions) so that
// v's rows are read coalesced. qkv: this position's [q | k | v] (3C); kcache/vcache: [T][C], row t
// is written here first. Dynamic shared memory: T + 256 floats.
__global__ void attention_decode(const float* qkv, float* kcache, float* vcache, float* out, const int* pos, int C,
                                 int H) {
  extern __shared__ float sh[];
  const int hs = C / H, h = blockIdx.x, t = pos[0];
  float* p = sh;               // [t + 1] scores, then probabilities
  float* part = sh + (t + 1);  // [blockDim] partial sums
  __shared__ float red[256 / kWarp];
  for (int i = threadIdx.x; i < hs; i += blockDim.x) {
    kcache[size_t(t) * C + h * hs + i] = qkv[C + h * hs + i];
    vcache[size_t(t) * C + h * hs + i] = qkv[2 * C + h * hs + i];
  }
  __syncthreads();
  const float scale = rsqrtf(float(hs));
  const float* q = qkv + h * hs;
  float mx = -INFINITY;
  for (int s = threadIdx.x; s <= t; s += blockDim.x) {
    const float* kr = kcache + size_t(s) * C + h * hs;
    float d = 0;
    for (int i = 0; i < hs; ++i) d += q[i] * kr[i];
    p[s] = d * scale;
    mx = fmaxf(mx, p[s]);
  }
  mx = warp_max(mx);
  if (threadIdx.x % kWarp == 0) red[threadIdx.x / kWarp] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < int(blockDim.x / kWarp); ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();
  float sum = 0;
  for (int s = threadIdx.x; s <= t; s += blockDim.x) sum += (p[s] = __expf(p[s] - mx));
  sum = warp_sum(sum);
  if (threadIdx.x % kWarp == 0) red[threadIdx.x / kWarp] = sum;
  __syncthreads();
  sum = 0;
  for (int w = 0; w < int(blockDim.x / kWarp); ++w) sum += red[w];
  if (hs >= int(blockDim.x)) {  // wide heads: each thread owns dimensions, all positions
    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
      float o = 0;
      for (int s = 0; s <= t; ++s) o += p[s] * vcache[size_t(s) * C + h * hs + d];
      out[h * hs + d] = o / sum;
    }
    return;
  }
  // Output: thread (i, g) adds positions s = g, g + G, ... for dimension i; G = blockDim / hs groups.
  const int G = int(blockDim.x) / hs, i = threadIdx.x % hs, g = threadIdx.x / hs;
  float acc = 0;
  if (g < G)
    for (int s = g; s <= t; s += G) acc += p[s] * vcache[size_t(s) * C + h * hs + i];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int d = threadIdx.x; d < hs; d += blockDim.x) {
    float o = 0;
    for (int gg = 0; gg < G; ++gg) o += part[gg * hs + d];
    out[h * hs + d] = o / sum;
  }
}

// y[o] (=, +=, or gelu of) sum_i W[o][i] x[i] + b[o]: a matrix times one vector, the shape every
// matmul takes at batch 1. One warp per output row, reading the row with 16-byte loads where the
// row is aligned (cuBLAS's GEMM machinery is built for big tiles, not for one column). The epilogue
// saves a pass: kAdd folds the residual connection in, kGelu the MLP's activation.
enum GemvEpilogue { kStore = 0, kAdd = 1, kGelu = 2 };
template <bool kVec4>
__global__ void gemv_bias(const float* __restrict__ W, const float* __restrict__ x, const float* __restrict__ b,
                          float* y, int I, int O, int epilogue) {
  const int o = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (o >= O) return;
  const float* row = W + size_t(o) * I;
  float s = 0;
  if (kVec4) {
    const float4* r4 = reinterpret_cast<const float4*>(row);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (int i = lane; i < I / 4; i += kWarp) {
      const float4 w = r4[i], v = x4[i];
      s += w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
    }
  } else {
    for (int i = lane; i < I; i += kWarp) s += row[i] * x[i];
  }
  s = warp_sum(s);
  if (lane == 0) {
    s += b ? b[o] : 0.f;
    y[o] = epilogue == kAdd ? y[o] + s : epilogue == kGelu ? gelu(s) : s;
  }
}

// Temperature + top-k sampling on the GPU, the twin of gpt::sample_top_k (same ranking, same double
// arithmetic, same walk): one block. Reads the draw u[i] for i = count[0], writes the token to tok[0]
// (the next step's input) and out[i], and advances count.
__global__ void sample_top_k(const float* logits, int V, double temperature, int top_k, const double* u, int* count,
                             int* tok, int* out) {
  __shared__ double w[1024];
  __shared__ int who[1024];
  const int k = max(1, min(top_k, V));
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    const float li = logits[i];
    int rank = 0;
    for (int j = 0; j < V; ++j) rank += logits[j] > li || (logits[j] == li && j < i);
    if (rank < k) who[rank] = i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const double top = logits[who[0]];
    double sum = 0;
    for (int r = 0; r < k; ++r) sum += (w[r] = exp((double(logits[who[r]]) - top) / temperature));
    const int n = count[0];
    double left = u[n] * sum;
    int pick = who[k - 1];
    for (int r = 0; r < k; ++r)
      if ((left -= w[r]) < 0) {
        pick = who[r];
        break;
      }
    tok[0] = pick, out[n] = pick, count[0] = n + 1;
  }
}

}  // namespace k
