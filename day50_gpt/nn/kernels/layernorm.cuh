// day50_gpt/nn/kernels/layernorm.cuh: LayerNorm forward and backward (rows), and its gains' and biases' gradients
// (column sums); then the fused form (--fused-ln on, the default): the residual add and the LayerNorm after
// it in one pass, 128-bit loads, and a backward that sums the parameter gradients as it goes.
#pragma once
#include <type_traits>

#include "../finish_plan.h"
#include "common.cuh"

namespace k {

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

// ---- Fused: residual add + LayerNorm, vector loads (--fused-ln on) -----------------------------
// Where the unfused LayerNorm's time goes: every block ends with `x = a + drop(y)` (one kernel: read a
// and y, write x) and the next LayerNorm reads x again; the backward reads x and dy twice (once for dx,
// once more, column-wise, for the gains' gradients), then a second kernel drops out dx into the next
// matmul's input. And each of those kernels loads 4 bytes per thread per instruction. The fused
// kernels below make one pass each way, and each lane moves 4 elements (16 bytes of fp32) per load.
// They need C % 4 == 0 and C <= 32 * 4 * kLnMaxChunks (the model falls back to the kernels above
// otherwise): a row of C fp32 values is C/4 chunks of 4, lane l of the row's warp holds chunks
// l, l + 32, ... in registers (K of them), so the row is read from memory once.
constexpr int kLnMaxChunks = 8;  // C <= 1024 on the fused path
// Backward: rows each warp walks (its partial gradient sums cover them), 8 warps (256 threads) a block.
// More rows, fewer partials to write and add; fewer rows, more blocks to fill the SMs' last wave. The
// model keeps kLnRowsPerWarp or, in bf16 with --lt-search, the fastest of kLnRowsChoices (timed).
constexpr int kLnRowsPerWarp = 4;
constexpr int kLnRowsChoices[] = {1, 2, 4, 8, 16};
constexpr int kLnMinRowsPerWarp = 1;  // the smallest choice: the most blocks, the partials' buffer size
inline int ln_bwd_blocks(int N, int rows_per_warp) { return (N + 8 * rows_per_warp - 1) / (8 * rows_per_warp); }

// One warp per row. With y: x = a + drop(y) is written to x_out (the residual stream, R: fp32, or bf16 with
// --residual bf16) and normalised; without (y null): x = a. With R = bf16, x is rounded before its
// statistics, so that the LayerNorm normalises the values as stored, the ones its backward reads. ln = (x - mean) * rstd * g + b; mean and rstd kept for the
// backward. The dropout factors of a chunk are one Philox call (its 4 elements are one group of
// nn/dropout.h's, since C and the batch's first element are multiples of 4).
template <class T, int K, class R = float>
__global__ void __launch_bounds__(256)
    residual_layernorm_fwd(R* x_out, const R* a, const T* y, const float* g, const float* b, T* ln, float* mean,
                           float* rstd, int N, int C, dropout::Params d, uint32_t site, const StepVars* sv) {
  grid_dependency_wait();  // --pdl on: x, a and y are the kernels' before this one (nn/pdl.cuh)
  launch_dependents();     // the next kernel's blocks may take SMs as ours finish; it waits for all of ours
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp, C4 = C / 4;
  if (row >= N) return;
  const dropout::Params dd = at_step(d, sv);
  float v[K][4];
  float s = 0;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int j = lane + kWarp * i;
    if (j >= C4) continue;
    const size_t at = size_t(row) * C + 4 * size_t(j);
    load4(a + at, v[i]);
    if (y) {
      float yv[4], f[4] = {1.f, 1.f, 1.f, 1.f};
      load4(y + at, yv);
      if (dd.on) dropout::factors4(dd, site, (dd.first + at) >> 2, f);
#pragma unroll
      for (int q = 0; q < 4; ++q) v[i][q] = v[i][q] + yv[q] * f[q];
      if constexpr (!std::is_same<R, float>::value)
#pragma unroll
        for (int q = 0; q < 4; ++q) v[i][q] = ld(st<R>(v[i][q]));  // the value as stored
      store4(x_out + at, v[i]);
    }
    s += (v[i][0] + v[i][1]) + (v[i][2] + v[i][3]);
  }
  const float m = warp_sum(s) / C;
  float var = 0;
#pragma unroll
  for (int i = 0; i < K; ++i)
    if (lane + kWarp * i < C4)
#pragma unroll
      for (int q = 0; q < 4; ++q) var += (v[i][q] - m) * (v[i][q] - m);
  const float r = rsqrtf(warp_sum(var) / C + 1e-5f);
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int j = lane + kWarp * i;
    if (j >= C4) continue;
    float gv[4], bv[4], o[4];
    load4(g + 4 * j, gv), load4(b + 4 * j, bv);
#pragma unroll
    for (int q = 0; q < 4; ++q) o[q] = (v[i][q] - m) * r * gv[q] + bv[q];
    store4(ln + size_t(row) * C + 4 * size_t(j), o);
  }
  if (lane == 0) mean[row] = m, rstd[row] = r;
}

// The backward of one LayerNorm, its parameter gradients included. Block (8 warps) owns
// 8 * rows_per_warp consecutive rows, each warp rows_per_warp of them; a lane adds dy * xhat and dy of
// its columns over its rows in registers, the block adds its 8 warps' sums through shared memory (in
// warp order) and writes one partial per column: partial[block][2 or 3][C] (ln_partials_finish adds them).
// No atomics: the same bits every run. dx (+)= rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
// as in layernorm_bwd; dout (if not null) gets dx times the dropout factors of `site` (d.on), in T:
// the next matmul's input, without the separate dropout_bwd pass.
//
// The next row is in flight while a warp finishes this one (K <= 4, kLnBwdStaged): each lane reads its
// chunks of row k (x, dy and the old dx) from its warp's slot of shared memory, copies row k + 1's into the
// slot with cp.async, then does row k's shuffles and stores. Loaded one row at a time, a warp had nothing
// in flight while it reduced and stored, and 2 blocks an SM (16 warps, ~100 registers a lane) were too
// few to cover that. Prefetching into registers instead (two rows at once) needed 128 registers and
// spilled, and was slower. A lane reads back only what it copied itself, so no barrier is needed between
// the copy and the read. The sums are the same, in the same order. (The bench's "LayerNorm alone" row
// measures the backward against a copy.)
// With dout_sums the block also adds up dout's columns (as stored, rounded to T) into a third partial:
// the bias gradient of the linear layer whose output gradient dout is (Model::ln_back_to).
// Dynamic shared memory: ln_bwd_smem_bytes (the staging, 8 warps x (2C floats + C T's), which the column
// sums' 8 x C floats reuse after the rows). At most 128 registers for K <= 4, so that 2 blocks share an
// SM; the timed rows per warp (kLnRowsChoices) pick how many rows a warp walks.
template <int K>
constexpr bool kLnBwdStaged = K <= 4;  // the staging fits the default 48 KiB at C <= 512 in fp32
template <class T, int K, class R = float>
constexpr size_t ln_bwd_smem_bytes(int C) {  // (the column sums' 8 x C floats fit in the staging: R, T >= 2 bytes)
  return kLnBwdStaged<K> ? size_t(8) * C * (2 * sizeof(R) + sizeof(T)) : size_t(8) * C * sizeof(float);
}
// The widest staged case (K = 4: C = 512, fp32) must fit the 48 KiB a launch gets without opting in.
static_assert(ln_bwd_smem_bytes<float, 4>(4 * 4 * 32) <= 48 * 1024, "the staging outgrew the default shared memory");
template <class T, int K, class R = float>
__global__ void __launch_bounds__(256, K <= 4 ? 2 : 1)
    layernorm_bwd_fused(const R* x, const float* g, const float* mean, const float* rstd, const T* dy, R* dx,
                        T* dout, float* partial, int N, int C, int rows_per_warp, bool accumulate, dropout::Params d,
                        uint32_t site, const StepVars* sv, bool dout_sums) {
  extern __shared__ __align__(16) float red[];  // the staging during the rows, then [8 warps][C]
  grid_dependency_wait();  // --pdl on: dy (and dx) are the kernels' before this one (nn/pdl.cuh)
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, C4 = C / 4;
  const dropout::Params dd = at_step(d, sv);
  // This warp's staging slots: x in [8][C] R's, the old dx in the next [8][C], dy in [8][C] T's after them
  // (every slot 16-byte aligned for C % 4 == 0 in fp32, 8-byte in bf16: what each cp.async moves).
  R* sx = reinterpret_cast<R*>(red) + size_t(warp) * C;
  R* sold = reinterpret_cast<R*>(red) + size_t(8 + warp) * C;
  T* sdy = reinterpret_cast<T*>(reinterpret_cast<R*>(red) + size_t(16) * C) + size_t(warp) * C;
  auto fetch = [&](int row) {  // row's chunks of this lane, in flight
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int j = lane + kWarp * i;
      if (j >= C4) continue;
      const size_t at = size_t(row) * C + 4 * size_t(j);
      cp_async<4 * sizeof(R)>(sx + 4 * j, x + at);
      if (accumulate) cp_async<4 * sizeof(R)>(sold + 4 * j, dx + at);
      cp_async<4 * sizeof(T)>(sdy + 4 * j, dy + at);
    }
    cp_async_commit();
  };
  float dg[K][4], db[K][4], dd_sum[K][4];  // dd_sum: dout's column sums (dout_sums)
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) dg[i][q] = db[i][q] = dd_sum[i][q] = 0.f;
  const int first = (blockIdx.x * (blockDim.x / kWarp) + warp) * rows_per_warp;
  if constexpr (kLnBwdStaged<K>)
    if (first < N && rows_per_warp > 0) fetch(first);
  for (int k = 0; k < rows_per_warp; ++k) {
    const int row = first + k;
    if (row >= N) break;
    const float m = mean[row], r = rstd[row];
    float xh[K][4], dxh[K][4], old[K][4];
    float s1 = 0, s2 = 0;
    if constexpr (kLnBwdStaged<K>) cp_async_wait<0>();  // row k's chunks (the only group in flight)
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int j = lane + kWarp * i;
#pragma unroll
      for (int q = 0; q < 4; ++q) old[i][q] = 0.f;
      if (j >= C4) continue;
      float xv[4], dyv[4], gv[4];  // g again each row: from L1, and 4K registers fewer than keeping it
      if constexpr (kLnBwdStaged<K>) {
        load4(sx + 4 * j, xv), load4(sdy + 4 * j, dyv);
        if (accumulate) load4(sold + 4 * j, old[i]);
      } else {
        // dx's old value (accumulate) is loaded here with x and dy, not after the row's sums: its load does
        // not depend on them, and issued late it was a second memory round trip per row.
        const size_t at = size_t(row) * C + 4 * size_t(j);
        load4(x + at, xv), load4(dy + at, dyv);
        if (accumulate) load4(dx + at, old[i]);
      }
      load4(g + 4 * j, gv);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        xh[i][q] = (xv[q] - m) * r, dxh[i][q] = dyv[q] * gv[q];
        s1 += dxh[i][q], s2 += dxh[i][q] * xh[i][q];
        dg[i][q] += dyv[q] * xh[i][q], db[i][q] += dyv[q];
      }
    }
    // The slot is read: the next row's copies go in flight now, over this row's sums and stores.
    if constexpr (kLnBwdStaged<K>)
      if (k + 1 < rows_per_warp && row + 1 < N) fetch(row + 1);
    s1 = warp_sum(s1) / C, s2 = warp_sum(s2) / C;
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int j = lane + kWarp * i;
      if (j >= C4) continue;
      const size_t at = size_t(row) * C + 4 * size_t(j);
      float o[4], f[4] = {1.f, 1.f, 1.f, 1.f};
#pragma unroll
      for (int q = 0; q < 4; ++q) o[q] = old[i][q] + r * (dxh[i][q] - s1 - xh[i][q] * s2);
      store4(dx + at, o);
      if (dout) {
        if (dd.on) dropout::factors4(dd, site, (dd.first + at) >> 2, f);
#pragma unroll
        for (int q = 0; q < 4; ++q) o[q] *= f[q];
        store4(dout + at, o);  // R = T without dropout: dout == dx, the same values again
        if (dout_sums)  // the values as stored, rounded to T: what the next matmul reads
#pragma unroll
          for (int q = 0; q < 4; ++q) dd_sum[i][q] += ld(st<T>(o[q]));
      }
    }
  }
  if constexpr (kLnBwdStaged<K>) cp_async_wait<0>();  // nothing may still land in the staging
  launch_dependents();  // ln_partials_finish may start launching now (it waits for this grid's partials)
  __syncthreads();  // every warp is done with its staging slot: the column sums reuse it
  // The block's column sums, gains then biases (then dout's), each through the shared buffer in warp order.
  const int sums = dout_sums ? 3 : 2;
  for (int which = 0; which < sums; ++which) {
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int j = lane + kWarp * i;
      if (j < C4)
#pragma unroll
        for (int q = 0; q < 4; ++q)
          red[warp * C + 4 * j + q] = which == 0 ? dg[i][q] : which == 1 ? db[i][q] : dd_sum[i][q];
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float t = 0;
      for (int w = 0; w < int(blockDim.x / kWarp); ++w) t += red[w * C + c];
      partial[(size_t(blockIdx.x) * sums + which) * C + c] = t;
    }
    __syncthreads();
  }
}

// out0[c] += sum over blocks of partial[block][0][c], out1[c] likewise with [1] (and out2 with [2] when
// sums = 3: the column sums of dout, the bias gradient of the linear layer whose output it is): block
// (32 x 16) owns 32 of the sums * C; its 16 rows of threads each add every 16th partial (8 loads in
// flight), then one thread adds the 16 in order. (colsum_finish gives each column one thread, which walks
// the partials one after another: a chain of dependent adds as long as the partials.) Launched as a
// programmatic dependent of layernorm_bwd_fused (Model::ln_bwd_fused): its launch overlaps the
// backward's tail, and grid_dependency_wait holds it until the backward's partials are written and visible.
constexpr int kLnFinishRows = 16;
__global__ void ln_partials_finish(const float* partial, int chunks, int C, int sums, float* out0, float* out1,
                                   float* out2) {
  __shared__ float red[kLnFinishRows][33];
  const int i = blockIdx.x * 32 + threadIdx.x;  // which * C + c
  grid_dependency_wait();
  float s = 0;
  if (i < sums * C)
#pragma unroll 8
    for (int ch = threadIdx.y; ch < chunks; ch += kLnFinishRows) s += partial[size_t(ch) * sums * C + i];
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && i < sums * C) {
    for (int j = 1; j < kLnFinishRows; ++j) s += red[j][threadIdx.x];
    (i < C ? out0[i] : i < 2 * C ? out1[i - C] : out2[i - 2 * C]) += s;
  }
}

// ---- Many finishes in one launch (nn/finish_queue.cuh) ---------------------------------------------
// A step's backward has 4 L + 1 column-sum finishes (each LayerNorm's, the flash backward's qkv bias, the
// dGELU GEMM's fc bias). As kernels of their own each was a few dozen blocks that the GPU runs in a few
// microseconds, mostly latency, one after another on the step's chain. Queued instead, their partials kept
// apart, they run as one grid: job j owns its blocks (nn/finish_plan.h: finish_job_of) and each of its blocks
// does exactly what ln_partials_finish's block does, in the same order, so every sum has the same bits.
__global__ void ln_partials_finish_many(const __grid_constant__ FinishJobs jobs) {
  __shared__ float red[kLnFinishRows][33];
  const FinishJob& f = jobs.job[finish_job_of(jobs, int(blockIdx.x))];
  const int i = (int(blockIdx.x) - f.first) * 32 + threadIdx.x, width = f.sums * f.C;
  float s = 0;
  if (i < width)
#pragma unroll 8
    for (int ch = threadIdx.y; ch < f.chunks; ch += kLnFinishRows) s += f.partial[size_t(ch) * width + i];
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && i < width) {
    for (int q = 1; q < kLnFinishRows; ++q) s += red[q][threadIdx.x];
    f.out[i / f.C][i % f.C] += s;
  }
}

}  // namespace k
