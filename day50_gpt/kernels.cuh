// day50_gpt/kernels.cuh: the hand-written kernels of the GPT (fp32 path), each the GPU twin of a
// function in gpt_ref.h / train_ref.h. Rows are processed one warp each where a reduction over the
// row is needed (LayerNorm, softmax); elementwise kernels use a grid-stride loop.
//
// WORK IN PROGRESS (branch day50-wip): compiled on the build machine, not yet run on a GPU.
#pragma once
#include <cuda_runtime.h>

#include "check.cuh"

namespace k {

constexpr int kWarp = 32;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// x[n][c] = wte[tok[n]][c] + wpe[n % T][c]
__global__ void embed_fwd(const int* tok, const float* wte, const float* wpe, float* x, int N, int T, int C) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < size_t(N) * C; i += size_t(gridDim.x) * blockDim.x) {
    const int n = int(i / C), c = int(i % C);
    x[i] = wte[size_t(tok[n]) * C + c] + wpe[size_t(n % T) * C + c];
  }
}
// One position for generation: x[c] = wte[tok][c] + wpe[pos][c]
__global__ void embed_one(int tok, int pos, const float* wte, const float* wpe, float* x, int C) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) x[c] = wte[size_t(tok) * C + c] + wpe[size_t(pos) * C + c];
}
// dwte[tok[n]] += dx[n], dwpe[n % T] += dx[n] (atomics: several positions share a token)
__global__ void embed_bwd(const int* tok, const float* dx, float* dwte, float* dwpe, int N, int T, int C) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < size_t(N) * C; i += size_t(gridDim.x) * blockDim.x) {
    const int n = int(i / C), c = int(i % C);
    atomicAdd(&dwte[size_t(tok[n]) * C + c], dx[i]);
    atomicAdd(&dwpe[size_t(n % T) * C + c], dx[i]);
  }
}

// One warp per row: mean, 1/std, y = (x - mean) * rstd * g + b.
__global__ void layernorm_fwd(const float* x, const float* g, const float* b, float* y, float* mean, float* rstd, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* xr = x + size_t(row) * C;
  float s = 0;
  for (int i = lane; i < C; i += kWarp) s += xr[i];
  const float m = warp_sum(s) / C;
  float v = 0;
  for (int i = lane; i < C; i += kWarp) v += (xr[i] - m) * (xr[i] - m);
  const float r = rsqrtf(warp_sum(v) / C + 1e-5f);
  for (int i = lane; i < C; i += kWarp) y[size_t(row) * C + i] = (xr[i] - m) * r * g[i] + b[i];
  if (lane == 0) mean[row] = m, rstd[row] = r;
}
// dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)); dg, db accumulated with atomics.
__global__ void layernorm_bwd(const float* x, const float* g, const float* mean, const float* rstd, const float* dy, float* dx, float* dg,
                              float* db, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* xr = x + size_t(row) * C;
  const float* dyr = dy + size_t(row) * C;
  const float m = mean[row], r = rstd[row];
  float s1 = 0, s2 = 0;
  for (int i = lane; i < C; i += kWarp) {
    const float xh = (xr[i] - m) * r, dxh = dyr[i] * g[i];
    s1 += dxh, s2 += dxh * xh;
    atomicAdd(&dg[i], dyr[i] * xh);
    atomicAdd(&db[i], dyr[i]);
  }
  s1 = warp_sum(s1) / C, s2 = warp_sum(s2) / C;
  for (int i = lane; i < C; i += kWarp) {
    const float xh = (xr[i] - m) * r;
    dx[size_t(row) * C + i] += r * (dyr[i] * g[i] - s1 - xh * s2);
  }
}

// y[n][o] += b[o]
__global__ void add_bias(float* y, const float* b, int N, int O) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < size_t(N) * O; i += size_t(gridDim.x) * blockDim.x) y[i] += b[i % O];
}
// db[o] += sum_n dy[n][o]: one thread per column (columns are contiguous across a warp: coalesced).
__global__ void bias_grad(const float* dy, float* db, int N, int O) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= O) return;
  float s = 0;
  for (int n = 0; n < N; ++n) s += dy[size_t(n) * O + o];
  db[o] += s;
}

__device__ __forceinline__ float gelu(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + tanhf(u));
}
__device__ __forceinline__ float gelu_grad(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x), t = tanhf(u);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * 0.7978845608f * (1.f + 3.f * 0.044715f * x * x);
}
__global__ void gelu_fwd(const float* x, float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) y[i] = gelu(x[i]);
}
__global__ void gelu_bwd(const float* x, const float* dy, float* dx, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) dx[i] = dy[i] * gelu_grad(x[i]);
}
__global__ void add_inplace(float* x, const float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) x[i] += y[i];
}

// Causal attention, the teaching version: one warp per (b, h, t) query row; scores over s <= t,
// softmax, output. P is kept ([B][H][T][T]) for the backward. qkv rows: [q | k | v], each C wide.
__global__ void attention_fwd(const float* qkv, float* P, float* out, int B, int T, int C, int H) {
  const int hs = C / H;
  const int w = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (w >= B * H * T) return;
  const int t = w % T, h = (w / T) % H, b = w / (T * H);
  const float scale = rsqrtf(float(hs));
  const float* q = qkv + (size_t(b) * T + t) * 3 * C + h * hs;
  float* p = P + (size_t(b * H + h) * T + t) * T;
  float mx = -INFINITY;
  for (int s = lane; s <= t; s += kWarp) {
    const float* kk = qkv + (size_t(b) * T + s) * 3 * C + C + h * hs;
    float d = 0;
    for (int i = 0; i < hs; ++i) d += q[i] * kk[i];
    p[s] = d * scale;
    mx = fmaxf(mx, p[s]);
  }
  mx = warp_max(mx);
  float sum = 0;
  for (int s = lane; s <= t; s += kWarp) sum += (p[s] = __expf(p[s] - mx));
  sum = warp_sum(sum);
  __syncwarp();
  for (int s = lane; s <= t; s += kWarp) p[s] /= sum;
  for (int s = t + 1 + lane; s < T; s += kWarp) p[s] = 0.f;  // defined, never read
  __syncwarp();
  float* o = out + (size_t(b) * T + t) * C + h * hs;
  for (int i = lane; i < hs; i += kWarp) {
    float a = 0;
    for (int s = 0; s <= t; ++s) a += p[s] * qkv[(size_t(b) * T + s) * 3 * C + 2 * C + h * hs + i];
    o[i] = a;
  }
}
// The backward of attention_fwd: dqkv must be zeroed first (dk, dv accumulate over t with atomics).
__global__ void attention_bwd(const float* qkv, const float* P, const float* dout, float* dqkv, int B, int T, int C, int H) {
  const int hs = C / H;
  const int w = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (w >= B * H * T) return;
  const int t = w % T, h = (w / T) % H, b = w / (T * H);
  const float scale = rsqrtf(float(hs));
  const float* p = P + (size_t(b * H + h) * T + t) * T;
  const float* dO = dout + (size_t(b) * T + t) * C + h * hs;
  const float* q = qkv + (size_t(b) * T + t) * 3 * C + h * hs;
  float* dq = dqkv + (size_t(b) * T + t) * 3 * C + h * hs;
  // dot = sum_s P[s] dP[s], dP[s] = dO . v_s
  float dot = 0;
  for (int s = lane; s <= t; s += kWarp) {
    const float* v = qkv + (size_t(b) * T + s) * 3 * C + 2 * C + h * hs;
    float d = 0;
    for (int i = 0; i < hs; ++i) d += dO[i] * v[i];
    dot += p[s] * d;
  }
  dot = warp_sum(dot);
  for (int s = lane; s <= t; s += kWarp) {
    const float* v = qkv + (size_t(b) * T + s) * 3 * C + 2 * C + h * hs;
    const float* kk = qkv + (size_t(b) * T + s) * 3 * C + C + h * hs;
    float* dk = dqkv + (size_t(b) * T + s) * 3 * C + C + h * hs;
    float* dv = dqkv + (size_t(b) * T + s) * 3 * C + 2 * C + h * hs;
    float dP = 0;
    for (int i = 0; i < hs; ++i) dP += dO[i] * v[i];
    const float ds = p[s] * (dP - dot) * scale;
    for (int i = 0; i < hs; ++i) {
      atomicAdd(&dv[i], p[s] * dO[i]);
      atomicAdd(&dk[i], ds * q[i]);
      atomicAdd(&dq[i], ds * kk[i]);
    }
  }
}

// One warp per row: probabilities (kept in place of the logits' gradient), the loss, and
// dlogits = (p - onehot) / N, written over the logits.
__global__ void softmax_xent(float* logits, const int* target, float* loss, int N, int V) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;
  float* z = logits + size_t(row) * V;
  float mx = -INFINITY;
  for (int v = lane; v < V; v += kWarp) mx = fmaxf(mx, z[v]);
  mx = warp_max(mx);
  float sum = 0;
  for (int v = lane; v < V; v += kWarp) sum += __expf(z[v] - mx);
  sum = warp_sum(sum);
  const int tg = target[row];
  if (lane == 0) loss[row] = -(z[tg] - mx - logf(sum));
  __syncwarp();
  for (int v = lane; v < V; v += kWarp) z[v] = (__expf(z[v] - mx) / sum - (v == tg ? 1.f : 0.f)) / N;
}

// Sum of squares into *out (zeroed by the caller), for the gradient norm.
__global__ void sum_squares(const float* g, size_t n, float* out) {
  float s = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) s += g[i] * g[i];
  s = warp_sum(s);
  if (threadIdx.x % kWarp == 0) atomicAdd(out, s);
}

// Generation with a KV cache: one new position `t` attends to cached keys/values 0..t. One warp per
// head. qkv: this position's [q | k | v] (3C); kcache/vcache: [T][C], row t is written here first.
__global__ void attention_decode(const float* qkv, float* kcache, float* vcache, float* out, int t, int C, int H) {
  const int hs = C / H, h = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (h >= H) return;
  for (int i = lane; i < hs; i += kWarp) {
    kcache[size_t(t) * C + h * hs + i] = qkv[C + h * hs + i];
    vcache[size_t(t) * C + h * hs + i] = qkv[2 * C + h * hs + i];
  }
  __syncwarp();
  const float scale = rsqrtf(float(hs));
  const float* q = qkv + h * hs;
  // Two passes over the cache (max, then sum and output) keep it to registers: no score buffer.
  float mx = -INFINITY;
  for (int s = lane; s <= t; s += kWarp) {
    float d = 0;
    for (int i = 0; i < hs; ++i) d += q[i] * kcache[size_t(s) * C + h * hs + i];
    mx = fmaxf(mx, d * scale);
  }
  mx = warp_max(mx);
  float sum = 0;
  for (int s = lane; s <= t; s += kWarp) {
    float d = 0;
    for (int i = 0; i < hs; ++i) d += q[i] * kcache[size_t(s) * C + h * hs + i];
    sum += __expf(d * scale - mx);
  }
  sum = warp_sum(sum);
  for (int i = lane; i < hs; i += kWarp) out[h * hs + i] = 0.f;
  __syncwarp();
  for (int s = 0; s <= t; ++s) {
    float d = 0;
    for (int i = lane; i < hs; i += kWarp) d += q[i] * kcache[size_t(s) * C + h * hs + i];
    const float w = __expf(warp_sum(d) * scale - mx) / sum;
    for (int i = lane; i < hs; i += kWarp) out[h * hs + i] += w * vcache[size_t(s) * C + h * hs + i];
  }
}

// ---- Keeping the training step free of host synchronization -------------------------------------
// The batch is gathered on the GPU from the corpus uploaded once (train::batch's twin), the loss
// is averaged into a slot of a per-interval array, and the clipping scale is computed from the
// squared norm on the GPU: the host only enqueues work and reads results at logging time.
__global__ void gather_batch(const int* data, size_t n, unsigned long long pos, int B, int T, int* tok, int* tgt) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < B * T; i += gridDim.x * blockDim.x) {
    const size_t at = size_t((pos + (unsigned long long)i) % n);  // sequences are consecutive: b*T + t == i
    tok[i] = data[at];
    tgt[i] = data[(at + 1) % n];
  }
}
// out[0] = mean of x[0..n): one block of 256 threads.
__global__ void mean_of(const float* x, int n, float* out) {
  __shared__ float part[256 / kWarp];
  float s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  s = warp_sum(s);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = s;
  __syncthreads();
  if (threadIdx.x < kWarp) {
    float v = threadIdx.x < blockDim.x / kWarp ? part[threadIdx.x] : 0.f;
    v = warp_sum(v);
    if (threadIdx.x == 0) out[0] = v / n;
  }
}
// norm = sqrt(sumsq), kept for the log; AdamW with the clipping scale min(1, clip / norm) computed here.
__global__ void adamw_clipped(float* p, const float* g, float* m, float* v, const unsigned char* decay, size_t n, float lr, float b1,
                              float b2, float eps, float wd, float bc1, float bc2, const float* sumsq, float clip, float* norm_out) {
  const float norm = sqrtf(*sumsq), gscale = norm > clip ? clip / norm : 1.f;
  if (blockIdx.x == 0 && threadIdx.x == 0) *norm_out = norm;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float gi = g[i] * gscale;
    const float mi = b1 * m[i] + (1 - b1) * gi, vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = mi, v[i] = vi;
    p[i] -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + (decay[i] ? wd * p[i] : 0.f));
  }
}

}  // namespace k
