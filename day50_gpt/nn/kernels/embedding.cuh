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
// The same for C % 4 == 0: one thread per 4 columns (16-byte loads and stores, one Philox call for the
// 4 factors: they are one of nn/dropout.h's groups, as C and the batch's first element are multiples of 4),
// and the row and column from 32-bit divisions where the index fits (I = int; the host passes long long
// when N * C / 4 does not): embed_fwd's grid-stride loop divides a 64-bit index twice per element, and
// moves 4 bytes per load. R: the residual stream's type (fp32, or bf16 with --residual bf16).
template <class I, class R = float>
__global__ void embed_fwd_vec(const int* tok, const float* wte, const float* wpe, R* x, int N, int T, int C,
                              dropout::Params d, const StepVars* sv = nullptr) {
  const dropout::Params dd = at_step(d, sv);
  const I C4 = C / 4, count = I(N) * C4;
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += I(gridDim.x) * blockDim.x) {
    const int n = int(i / C4), c = int(4 * (i % C4));
    const float4 e = *reinterpret_cast<const float4*>(wte + size_t(tok[n]) * C + c);
    const float4 p = *reinterpret_cast<const float4*>(wpe + size_t(n % T) * C + c);
    const size_t at = size_t(n) * C + size_t(c);
    float f[4] = {1.f, 1.f, 1.f, 1.f};
    if (dd.on) dropout::factors4(dd, dropout::site_embed(), (dd.first + at) >> 2, f);
    const float v[4] = {(e.x + p.x) * f[0], (e.y + p.y) * f[1], (e.z + p.z) * f[2], (e.w + p.w) * f[3]};
    store4(x + at, v);
  }
}

// The embedding's backward reads dx = d(loss)/d(embedding after dropout): the gradient of the sum before
// dropout is dx times the embedding's dropout factors. With C % 4 == 0 both kernels below apply them as
// they load (W = 4 columns a thread, one Philox call per 4 factors, the same products as a separate
// pass); otherwise (W = 1) dropout_scale multiplies dx in place first and they get d with dropout off.
template <int W>
struct Cols {
  float v[W];
};
template <int W>
__device__ __forceinline__ Cols<W> load_dropped(const float* dx, size_t at, const dropout::Params& d) {
  Cols<W> r;
  if constexpr (W == 4) {
    const float4 q = *reinterpret_cast<const float4*>(dx + at);
    r.v[0] = q.x, r.v[1] = q.y, r.v[2] = q.z, r.v[3] = q.w;
    if (d.on) {
      float f[4];
      dropout::factors4(d, dropout::site_embed(), (d.first + at) >> 2, f);
#pragma unroll
      for (int q4 = 0; q4 < 4; ++q4) r.v[q4] *= f[q4];
    }
  } else {
    r.v[0] = dx[at];
  }
  return r;
}
template <int W>
__device__ __forceinline__ void add_cols(Cols<W>& a, const Cols<W>& b) {
#pragma unroll
  for (int q = 0; q < W; ++q) a.v[q] += b.v[q];
}

// dwpe[t][c] += sum_b dx[b*T + t][c]: one thread per (t, W columns); the batch summed in order, 8 rows'
// loads in flight at a time.
template <int W>
__global__ void embed_bwd_pos(const float* dx, float* dwpe, int B, int T, int C, dropout::Params d,
                              const StepVars* sv = nullptr) {
  const dropout::Params dd = at_step(d, sv);
  const int CW = C / W;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < T * CW; i += gridDim.x * blockDim.x) {
    const int t = i / CW, c = W * (i % CW);
    Cols<W> s = {};
    int b = 0;
    for (; b + 8 <= B; b += 8) {
      Cols<W> v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = load_dropped<W>(dx, (size_t(b + u) * T + t) * C + c, dd);
#pragma unroll
      for (int u = 0; u < 8; ++u) add_cols(s, v[u]);
    }
    for (; b < B; ++b) add_cols(s, load_dropped<W>(dx, (size_t(b) * T + t) * C + c, dd));
    float* out = dwpe + size_t(t) * C + c;
#pragma unroll
    for (int q = 0; q < W; ++q) out[q] += s.v[q];
  }
}
// dwte[v][c] += sum over positions n with tok[n] == v of dx[n][c], in two deterministic stages.
// Block (v, slice) walks its slice of the batch 256 tokens at a time, finds token v's positions
// with a ballot (in order), adds those rows, and writes one partial row; colsum_finish then adds
// the slices' partials in order. No atomics: a frequent byte (the space) is not summed by thousands
// of colliding atomicAdds, and the slices keep its block from summing a tenth of the batch alone.
// The found rows are added 8 at a time, their loads issued together (W = 4: 16 bytes a load): one at a
// time, a frequent byte's block (the space: about 15% of the plays' bytes) walked a chain of dependent trips
// to memory as long as its count in the slice. The sums keep their order. (The bf16 step takes the
// embedding's gradient as one matmul instead: Model::embed_by_matmul.)
constexpr int kEmbedSlice = 512;  // positions per slice
inline int embed_slices(int N) { return (N + kEmbedSlice - 1) / kEmbedSlice; }
template <int W>
__global__ void embed_bwd_tok(const int* tok, const float* dx, float* partial, int N, int C, int V,
                              dropout::Params d, const StepVars* sv = nullptr) {
  const dropout::Params dd = at_step(d, sv);
  const int v = blockIdx.x, n_begin = blockIdx.y * kEmbedSlice, n_end = min(N, n_begin + kEmbedSlice);
  __shared__ int found[256];
  __shared__ int warp_count[256 / kWarp];
  constexpr int kGroups = 32 / W;  // column groups per thread: C <= 32 * blockDim.x (checked by the program)
  Cols<W> acc[kGroups] = {};
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp, CW = C / W;
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
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
      const int cw = int(threadIdx.x) + j * int(blockDim.x), c = W * cw;
      if (cw >= CW) break;
      int f = 0;
      for (; f + 8 <= total; f += 8) {
        Cols<W> r[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) r[u] = load_dropped<W>(dx, size_t(found[f + u]) * C + c, dd);
#pragma unroll
        for (int u = 0; u < 8; ++u) add_cols(acc[j], r[u]);
      }
      for (; f < total; ++f) add_cols(acc[j], load_dropped<W>(dx, size_t(found[f]) * C + c, dd));
    }
    __syncthreads();
  }
  float* out = partial + (size_t(blockIdx.y) * V + v) * C;
#pragma unroll
  for (int j = 0; j < kGroups; ++j) {
    const int cw = int(threadIdx.x) + j * int(blockDim.x), c = W * cw;
    if (cw >= CW) break;
#pragma unroll
    for (int q = 0; q < W; ++q) out[c + q] = acc[j].v[q];
  }
}

// The embedding's one-hot rows for its gradient as a matmul (bf16 on the custom backend): row n is
// [V: 1 at tok[n] | T: 1 at n % T], 0 elsewhere; P elements a thread (P = 8: one 16-byte store of bf16).
// The index in I: int where N * (V + T) / P fits, else long long (the host picks).
template <class T, int P, class I>
__global__ void embed_onehot(const int* tok, T* oh, int N, int T_, int V) {
  static_assert(P == 1 || P * sizeof(T) == 16, "P elements make one 16-byte store");
  const int VT = V + T_, per_row = VT / P;
  const I count = I(N) * per_row;
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += I(gridDim.x) * blockDim.x) {
    const int n = int(i / per_row), c0 = int(P * (i % per_row)), hot_t = tok[n], hot_p = V + n % T_;
    alignas(16) T v[P];
#pragma unroll
    for (int q = 0; q < P; ++q) v[q] = st<T>(c0 + q == hot_t || c0 + q == hot_p ? 1.f : 0.f);
    T* out = oh + size_t(n) * VT + c0;
    if constexpr (P == 8)
      *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(v);
    else
      out[0] = v[0];
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
