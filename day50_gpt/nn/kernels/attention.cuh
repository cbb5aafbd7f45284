// day50_gpt/nn/kernels/attention.cuh: attention's own kernels: the hand-written (naive) version, and the causal softmax
// between the cuBLAS matmuls of the matmul version. cuDNN's fused version is nn/sdpa_cudnn.h.
#pragma once
#include "common.cuh"

namespace k {

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

}  // namespace k
