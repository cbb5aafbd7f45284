// day50_gpt/kernels.cuh: the hand-written kernels of the GPT, each the GPU twin of a function in
// gpt_ref.h / train_ref.h.
//
// Every kernel that touches activations is a template on the activation type `T`: float in fp32
// mode, __nv_bfloat16 in bf16 mode. Whatever T is, arithmetic is done in fp32 (ld() widens, st()
// rounds), and three things always stay fp32: the residual stream x and its gradient dx (many small
// updates are added into them), the parameters' master copy with their gradients and AdamW state,
// and every reduction (LayerNorm statistics, softmax sums, parameter gradients).
//
// Reductions that produce parameter gradients never use atomics: each block writes a partial sum and
// a second kernel adds the partials in a fixed order. The same inputs then give the same bits on
// every run, which is what lets a resumed training run reproduce an uninterrupted one exactly
// (the fp32 path with the hand-written attention; cuDNN's attention backward accumulates dQ with
// atomics, so the bf16 path is reproducible only to rounding).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "check.cuh"

namespace k {

constexpr int kWarp = 32;

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T>
__device__ __forceinline__ T st(float x);
template <>
__device__ __forceinline__ float st<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 st<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
#define GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); i += size_t(gridDim.x) * blockDim.x)

// ---- Embedding ---------------------------------------------------------------------------------
// x[n][c] = wte[tok[n]][c] + wpe[n % T][c]   (fp32: x is the residual stream)
__global__ void embed_fwd(const int* tok, const float* wte, const float* wpe, float* x, int N, int T, int C) {
  GRID_STRIDE(i, size_t(N) * C) {
    const int n = int(i / C), c = int(i % C);
    x[i] = wte[size_t(tok[n]) * C + c] + wpe[size_t(n % T) * C + c];
  }
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

// ---- LayerNorm ---------------------------------------------------------------------------------
// One warp per row: mean, 1/std, y = (x - mean) * rstd * g + b. x is fp32 (the residual stream).
template <class T>
__global__ void layernorm_fwd(const float* x, const float* g, const float* b, T* y, float* mean, float* rstd, int N,
                              int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* xr = x + size_t(row) * C;
  float s = 0;
  for (int i = lane; i < C; i += kWarp) s += xr[i];
  const float m = warp_sum(s) / C;
  float v = 0;
  for (int i = lane; i < C; i += kWarp) v += (xr[i] - m) * (xr[i] - m);
  const float r = rsqrtf(warp_sum(v) / C + 1e-5f);
  for (int i = lane; i < C; i += kWarp) y[size_t(row) * C + i] = st<T>((xr[i] - m) * r * g[i] + b[i]);
  if (lane == 0) mean[row] = m, rstd[row] = r;
}
// dx (+)= rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * g; also writes dx in
// T (dx_t) for the next matmul's input. `accumulate` false: dx = ..., true: dx += ...
// The parameter gradients are a column sum over rows: see ln_param_partials.
template <class T>
__global__ void layernorm_bwd(const float* x, const float* g, const float* mean, const float* rstd, const T* dy,
                              float* dx, T* dx_t, int N, int C, bool accumulate) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* xr = x + size_t(row) * C;
  const T* dyr = dy + size_t(row) * C;
  const float m = mean[row], r = rstd[row];
  float s1 = 0, s2 = 0;
  for (int i = lane; i < C; i += kWarp) {
    const float xh = (xr[i] - m) * r, dxh = ld(dyr[i]) * g[i];
    s1 += dxh, s2 += dxh * xh;
  }
  s1 = warp_sum(s1) / C, s2 = warp_sum(s2) / C;
  for (int i = lane; i < C; i += kWarp) {
    const float xh = (xr[i] - m) * r;
    const size_t at = size_t(row) * C + i;
    const float d = (accumulate ? dx[at] : 0.f) + r * (ld(dyr[i]) * g[i] - s1 - xh * s2);
    dx[at] = d;
    dx_t[at] = st<T>(d);  // for T = float, dx_t == dx: the same value written twice
  }
}

// ---- Column sums without atomics (bias and LayerNorm parameter gradients) ----------------------
// Stage 1: block (32 x 8) owns 32 columns and a chunk of rows; it writes one partial per column.
// Stage 2 (colsum_finish) adds the partials of every chunk in chunk order.
constexpr int kColChunk = 256;  // rows per partial
inline int col_chunks(int N) { return (N + kColChunk - 1) / kColChunk; }

// partial[chunk][c] = sum over the chunk's rows of dy[n][c]
template <class T>
__global__ void bias_partials(const T* dy, float* partial, int N, int C) {
  const int c = blockIdx.x * 32 + threadIdx.x, n0 = blockIdx.y * kColChunk;
  __shared__ float red[8][33];
  float s = 0;
  if (c < C)
    for (int n = n0 + threadIdx.y; n < min(N, n0 + kColChunk); n += 8) s += ld(dy[size_t(n) * C + c]);
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int j = 1; j < 8; ++j) s += red[j][threadIdx.x];
    partial[size_t(blockIdx.y) * C + c] = s;
  }
}
// Two column sums at once for LayerNorm: dg = sum dy * xhat, db = sum dy. partial: [chunks][2][C].
template <class T>
__global__ void ln_param_partials(const float* x, const float* mean, const float* rstd, const T* dy, float* partial,
                                  int N, int C) {
  const int c = blockIdx.x * 32 + threadIdx.x, n0 = blockIdx.y * kColChunk;
  __shared__ float red[2][8][33];
  float sg = 0, sb = 0;
  if (c < C)
    for (int n = n0 + threadIdx.y; n < min(N, n0 + kColChunk); n += 8) {
      const float d = ld(dy[size_t(n) * C + c]);
      sg += d * (x[size_t(n) * C + c] - mean[n]) * rstd[n];
      sb += d;
    }
  red[0][threadIdx.y][threadIdx.x] = sg, red[1][threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int j = 1; j < 8; ++j) sg += red[0][j][threadIdx.x], sb += red[1][j][threadIdx.x];
    partial[(size_t(blockIdx.y) * 2 + 0) * C + c] = sg;
    partial[(size_t(blockIdx.y) * 2 + 1) * C + c] = sb;
  }
}
// out[k][c] += sum over chunks of partial[chunk][k][c], for k < K (K = 1: bias, 2: LayerNorm's g and
// b, whose outputs out0 and out1 need not be adjacent).
__global__ void colsum_finish(const float* partial, int chunks, int K, int C, float* out0, float* out1) {
  GRID_STRIDE(i, size_t(K) * C) {
    const int kk = int(i / C), c = int(i % C);
    float s = 0;
    for (int ch = 0; ch < chunks; ++ch) s += partial[(size_t(ch) * K + kk) * C + c];
    (kk == 0 ? out0 : out1)[c] += s;
  }
}

// ---- Elementwise -------------------------------------------------------------------------------
// y[n][o] += b[o]
template <class T>
__global__ void add_bias(T* y, const float* b, int N, int O) {
  GRID_STRIDE(i, size_t(N) * O) y[i] = st<T>(ld(y[i]) + b[i % O]);
}
__device__ __forceinline__ float gelu(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + tanhf(u));
}
__device__ __forceinline__ float gelu_grad(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x), t = tanhf(u);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * 0.7978845608f * (1.f + 3.f * 0.044715f * x * x);
}
template <class T>
__global__ void gelu_fwd(const T* x, T* y, size_t n) {
  GRID_STRIDE(i, n) y[i] = st<T>(gelu(ld(x[i])));
}
// dx = dy * gelu'(x) (dx may alias dy)
template <class T>
__global__ void gelu_bwd(const T* x, const T* dy, T* dx, size_t n) {
  GRID_STRIDE(i, n) dx[i] = st<T>(ld(dy[i]) * gelu_grad(ld(x[i])));
}
// The residual connection: out = a + y (out, a fp32; y is a sublayer's output in T).
template <class T>
__global__ void residual_add(float* out, const float* a, const T* y, size_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] + ld(y[i]);
}

// ---- Attention, the hand-written version -------------------------------------------------------
// The teaching version and the fallback where cuDNN's fused attention is unavailable (fp32 mode,
// head sizes it refuses, other GPUs). One warp per (b, h, t) query row: scores over s <= t, softmax,
// output. P (fp32, [B][H][T][T]) is kept for the backward. qkv rows: [q | k | v], each C wide.
template <class T>
__global__ void attention_fwd(const T* qkv, float* P, T* out, int B, int T_, int C, int H) {
  const int hs = C / H;
  const int w = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (w >= B * H * T_) return;
  const int t = w % T_, h = (w / T_) % H, b = w / (T_ * H);
  const float scale = rsqrtf(float(hs));
  const T* q = qkv + (size_t(b) * T_ + t) * 3 * C + h * hs;
  float* p = P + (size_t(b * H + h) * T_ + t) * T_;
  float mx = -INFINITY;
  for (int s = lane; s <= t; s += kWarp) {
    const T* kk = qkv + (size_t(b) * T_ + s) * 3 * C + C + h * hs;
    float d = 0;
    for (int i = 0; i < hs; ++i) d += ld(q[i]) * ld(kk[i]);
    p[s] = d * scale;
    mx = fmaxf(mx, p[s]);
  }
  mx = warp_max(mx);
  float sum = 0;
  for (int s = lane; s <= t; s += kWarp) sum += (p[s] = __expf(p[s] - mx));
  sum = warp_sum(sum);
  for (int s = lane; s <= t; s += kWarp) p[s] /= sum;
  for (int s = t + 1 + lane; s < T_; s += kWarp) p[s] = 0.f;  // defined, so the backward can read whole columns
  __syncwarp();
  T* o = out + (size_t(b) * T_ + t) * C + h * hs;
  for (int i = lane; i < hs; i += kWarp) {
    float a = 0;
    for (int s = 0; s <= t; ++s) a += p[s] * ld(qkv[(size_t(b) * T_ + s) * 3 * C + 2 * C + h * hs + i]);
    o[i] = st<T>(a);
  }
}
// Backward, pass 1 (one warp per query row t): dP[s] = dO_t . v_s, dS[s] = P[s] (dP[s] - sum_u P[u] dP[u]) * scale
// (kept in dS, [B][H][T][T]), and dq_t = sum_s dS[s] k_s.
template <class T>
__global__ void attention_bwd_q(const T* qkv, const float* P, const T* dout, float* dS, T* dqkv, int B, int T_, int C,
                                int H) {
  const int hs = C / H;
  const int w = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (w >= B * H * T_) return;
  const int t = w % T_, h = (w / T_) % H, b = w / (T_ * H);
  const float scale = rsqrtf(float(hs));
  const float* p = P + (size_t(b * H + h) * T_ + t) * T_;
  float* ds = dS + (size_t(b * H + h) * T_ + t) * T_;
  const T* dO = dout + (size_t(b) * T_ + t) * C + h * hs;
  float dot = 0;
  for (int s = lane; s <= t; s += kWarp) {
    const T* v = qkv + (size_t(b) * T_ + s) * 3 * C + 2 * C + h * hs;
    float d = 0;
    for (int i = 0; i < hs; ++i) d += ld(dO[i]) * ld(v[i]);
    ds[s] = d;  // dP for now
    dot += p[s] * d;
  }
  dot = warp_sum(dot);
  for (int s = lane; s <= t; s += kWarp) ds[s] = p[s] * (ds[s] - dot) * scale;
  for (int s = t + 1 + lane; s < T_; s += kWarp) ds[s] = 0.f;
  __syncwarp();
  for (int i = lane; i < hs; i += kWarp) {
    float a = 0;
    for (int s = 0; s <= t; ++s) a += ds[s] * ld(qkv[(size_t(b) * T_ + s) * 3 * C + C + h * hs + i]);
    dqkv[(size_t(b) * T_ + t) * 3 * C + h * hs + i] = st<T>(a);
  }
}
// Backward, pass 2 (one warp per key row s): dk_s = sum_{t >= s} dS[t][s] q_t, dv_s = sum_{t >= s} P[t][s] dO_t.
// Each output element is owned by one lane: no atomics, so the result is the same on every run.
template <class T>
__global__ void attention_bwd_kv(const T* qkv, const float* P, const T* dout, const float* dS, T* dqkv, int B, int T_,
                                 int C, int H) {
  const int hs = C / H;
  const int w = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (w >= B * H * T_) return;
  const int s = w % T_, h = (w / T_) % H, b = w / (T_ * H);
  const float* pc = P + size_t(b * H + h) * T_ * T_ + s;  // column s: element t at pc[t * T]
  const float* dc = dS + size_t(b * H + h) * T_ * T_ + s;
  for (int i = lane; i < hs; i += kWarp) {
    float dk = 0, dv = 0;
    for (int t = s; t < T_; ++t) {
      const size_t row = (size_t(b) * T_ + t);
      dk += dc[size_t(t) * T_] * ld(qkv[row * 3 * C + h * hs + i]);
      dv += pc[size_t(t) * T_] * ld(dout[row * C + h * hs + i]);
    }
    dqkv[(size_t(b) * T_ + s) * 3 * C + C + h * hs + i] = st<T>(dk);
    dqkv[(size_t(b) * T_ + s) * 3 * C + 2 * C + h * hs + i] = st<T>(dv);
  }
}

// ---- Attention as batched matmuls (cuBLAS) + a hand-written causal softmax ------------------------
// The scores S = Q.K^T and the output O = P.V (and the four products of the backward) are cuBLAS
// batched GEMMs over the B*H heads; what is ours is the causal, scaled softmax between them and its
// backward. The T x T scores are materialized (this is what cuDNN's fused attention avoids).
// One warp per row (b, h, t): P[t][s] = softmax_s<=t(scale * S[t][s]), 0 beyond t. In place.
template <class T>
__global__ void causal_softmax_fwd(T* S, int rows, int T_, float scale) {
  const int r = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const int t = r % T_;
  T* row = S + size_t(r) * T_;
  float mx = -INFINITY;
  for (int s = lane; s <= t; s += kWarp) mx = fmaxf(mx, ld(row[s]) * scale);
  mx = warp_max(mx);
  float sum = 0;
  for (int s = lane; s <= t; s += kWarp) sum += __expf(ld(row[s]) * scale - mx);
  sum = warp_sum(sum);
  const float inv = 1.f / sum;
  for (int s = lane; s < T_; s += kWarp) row[s] = st<T>(s <= t ? __expf(ld(row[s]) * scale - mx) * inv : 0.f);
}
// dS[t][s] = P[t][s] (dP[t][s] - sum_u P[t][u] dP[t][u]) * scale, in place over dP.
template <class T>
__global__ void causal_softmax_bwd(const T* P, T* dP, int rows, int T_, float scale) {
  const int r = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const int t = r % T_;
  const T* p = P + size_t(r) * T_;
  T* d = dP + size_t(r) * T_;
  float dot = 0;
  for (int s = lane; s <= t; s += kWarp) dot += ld(p[s]) * ld(d[s]);
  dot = warp_sum(dot);
  for (int s = lane; s < T_; s += kWarp) d[s] = st<T>(s <= t ? ld(p[s]) * (ld(d[s]) - dot) * scale : 0.f);
}

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

// ---- Optimizer ---------------------------------------------------------------------------------
// Sum of squares in two deterministic stages: per-block partials, then one block adds them in order.
constexpr int kNormBlocks = 1024;
__global__ void sum_squares_partial(const float* g, size_t n, float* partial) {
  __shared__ float part[256 / kWarp];
  float s = 0;
  GRID_STRIDE(i, n) s += g[i] * g[i];
  s = warp_sum(s);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0;
    for (int i = 0; i < int(blockDim.x / kWarp); ++i) t += part[i];
    partial[blockIdx.x] = t;
  }
}
// out[0] = sum of x[0..n) (or the mean, when divide): one block of 256 threads, fixed order.
__global__ void block_sum(const float* x, int n, float* out, bool divide) {
  __shared__ float part[256 / kWarp];
  float s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  s = warp_sum(s);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0;
    for (int i = 0; i < int(blockDim.x / kWarp); ++i) t += part[i];
    out[0] = divide ? t / n : t;
  }
}
// AdamW with the clipping scale min(1, clip / norm) computed here from the squared norm (no host
// round trip); the norm is kept for the log. In bf16 mode it also refreshes the bf16 copy of the
// weights that the matmuls read (p_t; null in fp32 mode).
template <class T>
__global__ void adamw_clipped(float* p, T* p_t, const float* g, float* m, float* v, const unsigned char* decay,
                              size_t n, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                              const float* sumsq, float clip, float* norm_out) {
  const float norm = sqrtf(*sumsq), gscale = norm > clip ? clip / norm : 1.f;
  if (blockIdx.x == 0 && threadIdx.x == 0) *norm_out = norm;
  GRID_STRIDE(i, n) {
    const float gi = g[i] * gscale;
    const float mi = b1 * m[i] + (1 - b1) * gi, vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = mi, v[i] = vi;
    const float pi = p[i] - lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + (decay[i] ? wd * p[i] : 0.f));
    p[i] = pi;
    if (p_t) p_t[i] = st<T>(pi);
  }
}
template <class T>
__global__ void convert(const float* x, T* y, size_t n) {
  GRID_STRIDE(i, n) y[i] = st<T>(x[i]);
}

// ---- Generation with a KV cache (fp32) ---------------------------------------------------------
// The token and its position live in device memory (tok[0], pos[0]) so that one decoding step can be
// captured once as a CUDA graph and replayed: the host launches one graph per token and waits once.
__global__ void embed_token(const int* tok, const int* pos, const float* wte, const float* wpe, float* x, int C) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
    x[c] = wte[size_t(tok[0]) * C + c] + wpe[size_t(pos[0]) * C + c];
}
__global__ void advance_position(int* pos) { ++pos[0]; }
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

// ---- Keeping the training step free of host synchronization -------------------------------------
// The batch is gathered on the GPU from the corpus uploaded once (train::batch's twin).
__global__ void gather_batch(const int* data, size_t n, unsigned long long pos, int B, int T, int* tok, int* tgt) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < B * T; i += gridDim.x * blockDim.x) {
    const size_t at = size_t((pos + (unsigned long long)i) % n);  // sequences are consecutive: b*T + t == i
    tok[i] = data[at];
    tgt[i] = data[(at + 1) % n];
  }
}

#undef GRID_STRIDE
}  // namespace k
