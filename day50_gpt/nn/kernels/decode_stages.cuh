// day50_gpt/nn/kernels/decode_stages.cuh: one generated token as 5 fused stages per layer plus the head,
// weights in fp32 or bf16 (activations, KV cache and every sum in fp32). The same stage functions run
// as one kernel each (a CUDA graph of 5L + 1 nodes per token: decode_stage below) or all inside one
// persistent kernel with grid-wide barriers between them (decode_persistent.cuh).
//
// What is fused, against nn/kernels/decode.cuh's ~8 kernels per layer:
//   stage 0  [sample the token,] [embed,] LayerNorm 1, qkv GEMV; k and v go straight into the cache
//   stage 1  attention partials: (head, 32 cached positions) per warp, flash-decoding style
//   stage 2  combine the partials, proj GEMV, residual add
//   stage 3  LayerNorm 2, fc GEMV, GELU
//   stage 4  fc2 GEMV, residual add
//   head     final LayerNorm, logits GEMV (the tied embedding)
// A LayerNorm of one position is C numbers: every block recomputes it into shared memory from the
// residual stream instead of a kernel of its own writing it out and the GEMV reading it back. The
// residual add and the GELU ride in the GEMV's epilogue. Sampling (the twin of k::sample_top_k, same
// ranking, same double arithmetic, same draws) is done by every block at the start of stage 0 from the
// logits: each block gets the same byte, and no stage or grid barrier is spent handing it around.
#pragma once
#include <cuda_bf16.h>

#include <algorithm>

#include "bias_gelu_residual.cuh"
#include "common.cuh"

namespace k {
namespace dec {

constexpr int kThreads = 256, kWarps = kThreads / kWarp;
constexpr int kChunk = 32;     // cached positions per attention work item: one per lane
constexpr int kMinChunk = 8;   // the shortest chunk stage_attention_split takes (4 lanes a position)
constexpr int kMaxHead = 256;  // head size limit of the attention stage (8 accumulators a lane)
constexpr int kStagesPerLayer = 5;

// How many of rows [0, O) are this block's (row o is block o % grid's): the resident copy's row count.
__device__ __forceinline__ int rows_here(int O) {
  return O > int(blockIdx.x) ? (O - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x) : 0;
}
// Elements r rows of I weights take in the resident copy: rounded up to whole 16-byte pieces.
template <class W>
__host__ __device__ __forceinline__ size_t resident_elems(size_t r, size_t I) {
  return (r * I * sizeof(W) + 15) / 16 * 16 / sizeof(W);
}
// 16 bytes of weights: from global memory through the read-only path, or from the resident copy.
template <bool kLocal>
__device__ __forceinline__ uint4 ld16(const void* p) {
  if constexpr (kLocal)
    return *reinterpret_cast<const uint4*>(p);
  else
    return __ldg(reinterpret_cast<const uint4*>(p));
}
// The model packed for decoding: per layer [qkv 3C x C | proj C x C | fc 4C x C | fc2 C x 4C] in the
// weight type W (row o of a matrix: output o's weights), then the head (the token embedding, V x C);
// per layer the vectors [ln1 g | ln1 b | qkv b (3C) | proj b | ln2 g | ln2 b | fc b (4C) | fc2 b] (13C)
// in fp32, then the final LayerNorm's g and b. A fixed stride per layer keeps the kernel's argument
// small for any depth.
template <class W>
struct Net {
  const W* mat;
  const float* vec;
  const float* wpe;  // [T][C], fp32: one row is read per token
  float *kc, *vc;    // [L][T][C]
  int L, C, H, T, V;
  // Scratch between stages: residual stream x (C), q (C), MLP hidden h (4C), attention partials
  // [H][ceil(T/32)][hs + 2], logits (V); logits_all [T][V] (optional, for the checks).
  float *x, *q, *h, *part, *logits, *logits_all;
  // The token at position t: forced[t] when forced is set (the prompt, a teacher-forced sequence), else
  // sampled from `logits` with draw u[count] (written to out[count]).
  const int* forced;
  const double* u;
  int* out;
  double temperature;
  int top_k;
  // The CUDA-graph path keeps the position and the draw count on the device ({pos, count}) and the
  // head's last block advances them; the persistent kernel passes both as arguments (state unused).
  int* state;
  unsigned* done;
  // Persistent kernel only: before each grid barrier, ask L1 for the weight rows this block's warps
  // read in the next stage, so that the wait at the barrier and the weights' trip from L2 overlap.
  bool prefetch;
  // Persistent kernel, when set: block 0 stamps the GPU's global timer (ns) at the launch (trace[0]) and
  // after every barrier (trace[1 + token * (5L + 1) + stage]): where a token's time goes, stage by stage.
  unsigned long long* trace;
  // Development only (built with -DDECODE_SUBSTAMPS, dev/stage_floor.cu's companion): every block's thread 0
  // writes clock64() at kSub points of every stage (decode_cluster.cuh, SubPoint) to
  // sub[((token * (5L + 1) + stage) * S + rank) * kSub + point]. Null: nothing.
  unsigned long long* sub;
  // Persistent kernel, when set: no barrier between stage 0 and stage 1. The qkv GEMV's warps count the
  // rows they finish per head (ready[h], a count that only grows within a launch; ready[H]: set if a
  // wait ever gave up), and an attention warp waits only for its own head's 3 hs rows.
  unsigned* ready;
  // Persistent kernel, when set: the hand-written grid barrier (decode_persistent.cuh) on these two
  // words (zeroed before each launch) instead of grid.sync().
  unsigned* bar;
  bool bar_count;  // with bar: its counting kind (spin on the arrival count; no publishing hop)
  // Persistent kernel, when not 0: the weights live in shared memory. At the start of the launch every block
  // copies the rows it will use (every layer's, the head's: row o of a matrix is block o % grid's, see
  // gemv_rows) to this byte offset of its dynamic shared memory, and the GEMVs read them from there: no
  // trip to L2 for weights in any stage after that. 132 SMs x 227 KB hold 30 MB, the bf16 model 21 MB.
  unsigned resident_at;

  __device__ size_t mat_stride() const { return size_t(12) * C * C; }
  __device__ const W* qkv_w(int l) const { return mat + l * mat_stride(); }
  __device__ const W* proj_w(int l) const { return qkv_w(l) + size_t(3) * C * C; }
  __device__ const W* fc_w(int l) const { return qkv_w(l) + size_t(4) * C * C; }
  __device__ const W* fc2_w(int l) const { return qkv_w(l) + size_t(8) * C * C; }
  __device__ const W* head_w() const { return mat + L * mat_stride(); }
  __device__ const float* lv(int l) const { return vec + size_t(l) * 13 * C; }
  // The resident copy (resident_at set): this block's rows of matrix m (0 qkv, 1 proj, 2 fc, 3 fc2) of layer
  // l, or of the head (l = L), packed row after row in the order gemv_rows visits them, each matrix's rows
  // padded to a whole number of 16-byte pieces (resident_elems) so that every one starts 16-byte aligned.
  // Null when off.
  __device__ const W* local(const unsigned char* smem, int l, int m) const {
    if (!resident_at) return nullptr;
    const size_t q = resident_elems<W>(rows_here(3 * C), C), p = resident_elems<W>(rows_here(C), C),
                 f = resident_elems<W>(rows_here(4 * C), C);
    const size_t layer = q + p + f + resident_elems<W>(rows_here(C), 4 * C);
    const size_t within[4] = {0, q, q + p, q + p + f};
    return reinterpret_cast<const W*>(smem + resident_at) + size_t(l) * layer + (l == L ? 0 : within[m]);
  }
  // When set: each GEMV row's epilogue operands (residual, bias) are loaded after its sum, not before its
  // products (gemv_rows_from): the bench's measure of what loading them early gains. Same results.
  bool late_epilogue;
  // Cached positions per attention work item: kChunk (stage_attention), or 16 or 8 (stage_attention_split).
  // Stages 1 and 2 of one token read it alike, so any value computes the same function. n.part: [H][chunks()].
  int chunk;
  __device__ int chunks() const { return (T + chunk - 1) / chunk; }
};

// Shared memory a block needs (bytes): the GEMV input (up to 4C floats), the attention's q per warp,
// the combine's chunk maxima and sums (for the shortest chunk), or the sampler's logits, ranks and weights.
inline size_t smem_bytes(int C, int H, int V, int T) {
  const size_t gemv = size_t(4) * C * 4, att = (C + size_t(kWarps) * (C / H)) * 4, samp = size_t(V) * (8 + 4 + 4);
  const size_t comb = (C + size_t(2) * H * size_t((T + kMinChunk - 1) / kMinChunk)) * 4;
  return std::max(std::max(gemv, comb), std::max(att, samp));
}

// ---- Small helpers -----------------------------------------------------------------------------
// What one block wrote and another reads within a launch (x, q, h, the cache, the partials, the logits)
// is loaded with __ldcg: from L2, past this SM's L1, which is not kept coherent with the other SMs'
// writes. Those values are read once per stage, so L1 would not have helped them anyway.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  __syncthreads();  // red may still be read by the previous call
  if (threadIdx.x % kWarp == 0) red[threadIdx.x / kWarp] = v;
  __syncthreads();
  float s = 0;
  for (int w = 0; w < kWarps; ++w) s += red[w];
  return s;
}
// 8 weights (one 16-byte load of bf16, two of fp32) times 8 inputs from shared memory.
template <bool kLocal>
__device__ __forceinline__ float dot8(const __nv_bfloat16* w, const float* x) {
  const uint4 raw = ld16<kLocal>(w);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  float s = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(h[j]);
    s += f.x * x[2 * j] + f.y * x[2 * j + 1];
  }
  return s;
}
template <bool kLocal>
__device__ __forceinline__ float dot8(const float* w, const float* x) {
  const uint4 ra = ld16<kLocal>(w), rb = ld16<kLocal>(w + 4);
  const float4 a = *reinterpret_cast<const float4*>(&ra), b = *reinterpret_cast<const float4*>(&rb);
  return a.x * x[0] + a.y * x[1] + a.z * x[2] + a.w * x[3] + b.x * x[4] + b.y * x[5] + b.z * x[6] + b.w * x[7];
}

// Rows [0, O) of W x, x (I floats) in shared memory, one warp per row; epi(o, sum, pre(o)) gets each row's
// sum on lane 0. pre(o) (two floats: the residual x[o] and the bias b[o], say) is loaded by lane 0 *before*
// the products, so that its trip to L2 overlaps theirs instead of following the warp's sum: the epilogue
// then only adds. (Loaded after the sum, it put one more dependent L2 round trip at the end of every
// stage; Net::late_epilogue keeps that order, for the bench to measure.) The epilogues add in the same
// order either way, so the results should not change by a bit: argued from the code, not checked (--verify
// compares both orders with the first generator within fp32's tolerance).
// Row o goes to block o % grid, so that a small O (384 rows against ~1,000 warps) still spreads
// over every SM and all of them pull weights at once. 16-byte loads where rows allow (I % 8 == 0: the
// packing makes every row start 16-byte aligned then). With `local` (the resident copy, Net::local) the
// rows come from shared memory: this block's j-th row, o = block + j * grid, is local + j * I.
template <bool kLocal, class W, class Pre, class Epi>
__device__ __forceinline__ void gemv_rows_from(const W* Wm, const float* xs, int I, int O, Pre pre, Epi epi,
                                               bool late) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  for (int j = warp, o = blockIdx.x + gridDim.x * warp; o < O; j += kWarps, o += gridDim.x * kWarps) {
    float2 pv = make_float2(0.f, 0.f);
    if (lane == 0 && !late) pv = pre(o);
    const W* row = Wm + size_t(kLocal ? j : o) * I;
    float s = 0;
    if (I % 8 == 0) {
#pragma unroll 4
      for (int i = lane * 8; i < I; i += kWarp * 8) s += dot8<kLocal>(row + i, xs + i);
    } else {
      for (int i = lane; i < I; i += kWarp) s += ld(row[i]) * xs[i];
    }
    s = warp_sum(s);
    if (lane == 0) {
      if (late) pv = pre(o);
      epi(o, s, pv);
    }
  }
}
template <class W, class Pre, class Epi>
__device__ __forceinline__ void gemv_rows(const W* Wm, const float* xs, int I, int O, Pre pre, Epi epi,
                                          const W* local, bool late) {
  if (local)
    gemv_rows_from<true>(local, xs, I, O, pre, epi, late);
  else
    gemv_rows_from<false>(Wm, xs, I, O, pre, epi, late);
}
// pre(o) for an epilogue that adds the bias b[o] only, and for one that adds nothing.
struct BiasOf {
  const float* b;
  __device__ float2 operator()(int o) const { return make_float2(b[o], 0.f); }
};
struct Nothing {
  __device__ float2 operator()(int) const { return make_float2(0.f, 0.f); }
};
// For the residual adds: (x[o], b[o]). x was written by another block in an earlier stage: __ldcg.
struct ResidualAndBias {
  const float* x;
  const float* b;
  __device__ float2 operator()(int o) const { return make_float2(__ldcg(x + o), b[o]); }
};

// The resident copy (Net::resident_at): this block's rows of every matrix, in Net::local's order, copied
// from global memory once at the start of a launch. 16 bytes a thread at a time where a row is a whole
// number of 16-byte pieces (every row then starts aligned on both sides: the packing's matrices and the
// copy's padded blocks start on 16 bytes), else element by element.
template <class W>
__device__ void load_resident(const Net<W>& n, unsigned char* smem) {
  W* dst = reinterpret_cast<W*>(smem + n.resident_at);
  auto copy = [&](const W* src, int I, int O) {
    const int r = rows_here(O);
    if ((size_t(I) * sizeof(W)) % 16 == 0) {
      const int u = int(size_t(I) * sizeof(W) / 16);  // 16-byte pieces a row
      uint4* d = reinterpret_cast<uint4*>(dst);
      for (int i = threadIdx.x; i < r * u; i += kThreads) {
        const int j = i / u;
        d[i] = __ldg(reinterpret_cast<const uint4*>(src + size_t(blockIdx.x + j * gridDim.x) * I) + i % u);
      }
    } else {
      for (int i = threadIdx.x; i < r * I; i += kThreads) {
        const int j = i / I;
        dst[i] = src[size_t(blockIdx.x + j * gridDim.x) * I + i % I];
      }
    }
    dst += resident_elems<W>(size_t(r), size_t(I));
  };
  for (int l = 0; l < n.L; ++l)
    copy(n.qkv_w(l), n.C, 3 * n.C), copy(n.proj_w(l), n.C, n.C), copy(n.fc_w(l), n.C, 4 * n.C),
        copy(n.fc2_w(l), 4 * n.C, n.C);
  copy(n.head_w(), n.C, n.V);
  __syncthreads();
}

// xs = LayerNorm(v) with gain g and bias b, where v is already in xs (C floats); one block, every block
// its own copy. The statistics as k::layernorm_fwd: biased variance, eps 1e-5.
__device__ __forceinline__ void layernorm_shared(float* xs, const float* g, const float* b, int C, float* red) {
  float s = 0;
  for (int i = threadIdx.x; i < C; i += kThreads) s += xs[i];
  const float m = block_sum(s, red) / C;
  float v = 0;
  for (int i = threadIdx.x; i < C; i += kThreads) v += (xs[i] - m) * (xs[i] - m);
  const float r = rsqrtf(block_sum(v, red) / C + 1e-5f);
  for (int i = threadIdx.x; i < C; i += kThreads) xs[i] = (xs[i] - m) * r * g[i] + b[i];
  __syncthreads();
}

// The sub-stamps' marks in sample_block when nothing is stamped (DECODE_SUBSTAMPS, decode_cluster.cuh).
struct NoMark {
  __device__ void operator()(int) const {}
};
// The logits sorted, larger first and equal ones by the smaller index (the ranking below): a bitonic network
// over one (value, index) pair a thread, threads [0, V). Its steps between elements less than 32 apart are
// shuffles within a warp, with no barrier; the six (for V = 256) between elements 32 or more apart go through
// shared memory, one __syncthreads() each (two buffers, alternating: a thread's read of one step and the
// next step's writes into the other are ordered by that step's barrier). Both ends of a pair decide from the
// same two operands in the same order, so they agree on every swap whatever the values (with a NaN, the
// order is as meaningless as the ranking's, but no pair is lost or doubled). buf: 16 V bytes of shared
// memory. Every thread of the block calls it (the barriers). kV (a power of two, a multiple of 32, at most
// blockDim.x) is known when compiling: the network's 36 steps (kV = 256) unrolled, no loop counters or stride
// arithmetic held in registers (a version with V at run time made ptxas spill several times more of the
// cluster decoder's registers).
struct Pair {
  float v;
  int i;
};
template <int kV>
__device__ __forceinline__ Pair bitonic_sort_block(Pair me, unsigned char* buf) {
  static_assert(kV % kWarp == 0 && (kV & (kV - 1)) == 0, "whole warps, a power of two");
  const int e = threadIdx.x;
  const bool mine = e < kV;
  float* const v0 = reinterpret_cast<float*>(buf);  // buffer b: kV values at v0 + 2 kV b, their indices after them
#pragma unroll
  for (int size = 2; size <= kV; size <<= 1) {
#pragma unroll
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      Pair other{0.f, 0};
      if (stride < kWarp) {
        if (mine) {  // whole warps: kV is a multiple of 32
          other.v = __shfl_xor_sync(0xffffffffu, me.v, stride);
          other.i = __shfl_xor_sync(0xffffffffu, me.i, stride);
        }
      } else {
        // the step's buffer: the number of shared-memory steps before this one, mod 2 (known when compiling)
        int before = 0;
        for (int s2 = 2 * kWarp; s2 < size; s2 <<= 1)
          for (int st = s2 >> 1; st >= kWarp; st >>= 1) ++before;
        for (int st = size >> 1; st > stride; st >>= 1) ++before;
        float* bv = v0 + 2 * kV * (before & 1);
        int* bi = reinterpret_cast<int*>(bv + kV);
        if (mine) bv[e] = me.v, bi[e] = me.i;
        __syncthreads();
        if (mine) other.v = bv[e ^ stride], other.i = bi[e ^ stride];
      }
      if (mine) {
        const bool lo = (e & stride) == 0, desc = (e & size) == 0;
        const Pair a = lo ? me : other, c = lo ? other : me;  // the pair's lower and upper element
        const bool a_first = a.v > c.v || (a.v == c.v && a.i < c.i);
        const bool swap = a_first != desc;  // desc: the larger goes to the lower index
        me = lo == swap ? c : a;
      }
    }
  }
  return me;
}

// Temperature + top-k sampling, the twin of k::sample_top_k (decode.cuh) and gpt::sample_top_k, done by
// every thread of one block (the cluster decoder's, and the persistent and stage kernels'): the logits put in
// order in parallel (by the sort where V = 256 and the block has 256 threads or more, by the ranks
// otherwise or with kSort false), the k weights' exps in parallel, the walk on thread 0 (its sums in the same
// order as the one-thread original, so the same byte comes out). kShared: the logits are in this block's
// shared memory (the cluster decoder's copy), else in global memory. mark(0), (1), (2): the order, the exps
// and the pick done (the sub-stamps).
template <bool kShared = false, class Mark = NoMark, bool kSort = true>
__device__ __forceinline__ int sample_block(const float* logits, int V, double temperature, int top_k, double u,
                                            unsigned char* smem, Mark mark = Mark()) {
  __shared__ int picked;
  double* w = reinterpret_cast<double*>(smem);  // [k]
  float* ls = reinterpret_cast<float*>(w + V);  // [V]
  int* who = reinterpret_cast<int*>(ls + V);    // [k]
  const int k = max(1, min(top_k, V));
  // The sort where V allows (the model's 256 bytes): then ls[r], who[r] are the r-th logit and its index, and
  // ls[who[r]] below reads ls[r] instead. The ranks otherwise (and with kSort false: dev/stage_floor.cu times
  // both).
  constexpr int kSortV = 256;  // the byte vocabulary
  const bool sorted = kSort && V == kSortV && int(blockDim.x) >= kSortV;
  if (sorted) {
    Pair me{0.f, 0};
    if (int(threadIdx.x) < V) me = Pair{kShared ? logits[threadIdx.x] : __ldcg(logits + threadIdx.x), int(threadIdx.x)};
    me = bitonic_sort_block<kSortV>(me, smem);  // (w, ls and who are its two buffers)
    __syncthreads();                            // every read of the buffers done
    if (int(threadIdx.x) < V) ls[threadIdx.x] = me.v, who[threadIdx.x] = me.i;
    __syncthreads();
    mark(0);
    const double top = ls[0];
    for (int r = threadIdx.x; r < k; r += blockDim.x) w[r] = exp((double(ls[r]) - top) / temperature);
    __syncthreads();
    mark(1);
  } else {
    for (int i = threadIdx.x; i < V; i += blockDim.x)
      ls[i] = kShared ? logits[i] : __ldcg(logits + i), who[i] = 0;  // who: in range even for NaNs
    __syncthreads();
    // Rank of logit i: the j with l_j > l_i, or l_j = l_i and j < i (ties to the lower index, as the original).
    // Counts ls[j0, j1) against (li, i); 16-byte shared loads where the range allows (ls starts 8V bytes in,
    // so j0 % 4 == 0 keeps them aligned): a quarter of the load instructions.
    auto count_above = [&](float li, int i, int j0, int j1) {
      int rank = 0;
      if (j0 % 4 == 0 && j1 % 4 == 0) {
        const float4* l4 = reinterpret_cast<const float4*>(ls);
#pragma unroll 2
        for (int j = j0; j < j1; j += 4) {
          const float4 q = l4[j / 4];
          rank += (q.x > li || (q.x == li && j < i)) + (q.y > li || (q.y == li && j + 1 < i)) +
                  (q.z > li || (q.z == li && j + 2 < i)) + (q.w > li || (q.w == li && j + 3 < i));
        }
      } else {
        for (int j = j0; j < j1; ++j) rank += ls[j] > li || (ls[j] == li && j < i);
      }
      return rank;
    };
    if (int(blockDim.x) >= 2 * V && V % 2 == 0) {
      // Two threads an element (the cluster decoder: 512 threads, V = 256), neighbouring lanes, each counting
      // one half of the j's, their counts added with one shuffle. With one thread an element only V / 32
      // warps worked, each through all V logits, and the loop's dependent steps had too few warps to hide
      // behind: in the cluster decoder's profile (results/nvidia-h200/day50_decode/, the version before) the
      // loop's lines and the idle warps' wait at the barrier after it were ~3.5% of the warp-stall samples.
      const int i = threadIdx.x >> 1, half = threadIdx.x & 1;
      const float li = i < V ? ls[i] : 0.f;
      int rank = i < V ? count_above(li, i, half * (V / 2), (half + 1) * (V / 2)) : 0;
      rank += __shfl_xor_sync(0xffffffffu, rank, 1);  // every lane takes part (blockDim is a multiple of 32)
      if (i < V && half == 0 && rank < k) who[rank] = i;
    } else {
      for (int i = threadIdx.x; i < V; i += blockDim.x) {
        const int rank = count_above(ls[i], i, 0, V);
        if (rank < k) who[rank] = i;
      }
    }
    __syncthreads();
    mark(0);
    const double top = ls[who[0]];
    for (int r = threadIdx.x; r < k; r += blockDim.x) w[r] = exp((double(ls[who[r]]) - top) / temperature);
    __syncthreads();
    mark(1);
  }
  if (threadIdx.x == 0) {
    double sum = 0;  // in the original's order; unrolled so that the loads run ahead of the chain of sums
#pragma unroll 8
    for (int r = 0; r < k; ++r) sum += w[r];
    double left = u * sum;
    int pick = who[k - 1];
    for (int r = 0; r < k; ++r)
      if ((left -= w[r]) < 0) {
        pick = who[r];
        break;
      }
    picked = pick;
  }
  __syncthreads();
  mark(2);
  return picked;
}

// ---- The stages --------------------------------------------------------------------------------
// Stage 0 of layer l at position t: LayerNorm 1 of x (for l = 0: of the embedding of the token, which
// is picked here first and written to x by block 0), then qkv = W x + b: q to n.q, k and v into row t
// of the layer's cache.
template <class W>
__device__ void stage_qkv(const Net<W>& n, int l, int t, int count, unsigned char* smem, float* red) {
  const int hs = n.C / n.H;
  const int C = n.C;
  float* xs = reinterpret_cast<float*>(smem);
  if (l == 0) {
    int tok;
    if (n.forced) {
      tok = n.forced[t];
    } else {
      tok = sample_block(n.logits, n.V, n.temperature, n.top_k, n.u[count], smem);
      if (blockIdx.x == 0 && threadIdx.x == 0) n.out[count] = tok;
    }
    const W* e = n.head_w() + size_t(tok) * C;
    for (int i = threadIdx.x; i < C; i += kThreads) {
      xs[i] = ld(e[i]) + n.wpe[size_t(t) * C + i];
      if (blockIdx.x == 0) n.x[i] = xs[i];
    }
  } else {
    for (int i = threadIdx.x; i < C; i += kThreads) xs[i] = __ldcg(n.x + i);
  }
  const float* v = n.lv(l);
  layernorm_shared(xs, v, v + C, C, red);
  const float* b = v + 2 * C;
  float* krow = n.kc + (size_t(l) * n.T + t) * C;
  float* vrow = n.vc + (size_t(l) * n.T + t) * C;
  gemv_rows(n.qkv_w(l), xs, C, 3 * C, BiasOf{b}, [&](int o, float s, float2 pre) {
    s += pre.x;
    if (o < C)
      n.q[o] = s;
    else if (o < 2 * C)
      krow[o - C] = s;
    else
      vrow[o - 2 * C] = s;
    if (n.ready) {  // merged with stage 1: publish the row, then count it for its head
      __threadfence();
      atomicAdd(n.ready + (o % C) / hs, 1u);
    }
  }, n.local(smem, l, 0), n.late_epilogue);
}

// Stage 1: attention of position t over cached positions 0..t, split like flash-decoding. Work item
// (h, c) is head h over positions 32c .. 32c + 31: lane j scores position 32c + j, the warp finds the
// chunk's max m and sum l of exp(score - m), and writes o = sum_j exp(score_j - m) v_j with m and l.
// Stage 2 combines the chunks. At t = 255 there are 6 heads x 8 chunks = 48 items: one pass of warps.
//
// Merged with stage 0 (n.ready set): before an item, lane 0 waits until head h's count reaches
// epoch * 3 hs (epoch: the qkv stages run so far in this launch, this one included), then acquires.
// Every block is resident (a cooperative launch), so the rows it waits for are being computed; the wait
// still gives up after 2^20 polls (well under a second) and flags it, so that a bug fails the checks instead of
// hanging.
__device__ __forceinline__ void wait_head(unsigned* ready, int H, int h, unsigned target) {
  if (threadIdx.x % kWarp == 0) {
    volatile unsigned* r = ready + h;
    long long polls = 0;
    while (*r < target)
      if (++polls > (1ll << 20)) {
        ready[H] = 1;
        break;
      }
    __threadfence();
  }
  __syncwarp();
}
// One work item's partials for stage 2: o (hs floats, lane-strided), then m and l, at chunk c of head h.
template <class W>
__device__ __forceinline__ void store_partial(const Net<W>& n, int h, int c, int hs, int lane,
                                              const float (&acc)[kMaxHead / kWarp], float m, float lsum) {
  float* out = n.part + (size_t(h) * n.chunks() + c) * (hs + 2);
#pragma unroll
  for (int r = 0; r < kMaxHead / kWarp; ++r)
    if (lane + kWarp * r < hs) out[lane + kWarp * r] = acc[r];
  if (lane == 0) out[hs] = m, out[hs + 1] = lsum;
}
template <class W>
__device__ void stage_attention(const Net<W>& n, int l, int t, int token, unsigned char* smem) {
  const int C = n.C, H = n.H, hs = C / H, nck = t / n.chunk + 1, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float* qs = reinterpret_cast<float*>(smem) + C + warp * hs;  // after stage 0's input: merged, both live
  const float* kc = n.kc + size_t(l) * n.T * C;
  const float* vc = n.vc + size_t(l) * n.T * C;
  const float scale = rsqrtf(float(hs));
  for (int item = blockIdx.x + gridDim.x * warp; item < H * nck; item += gridDim.x * kWarps) {
    const int h = item / nck, c = item % nck, s = c * kChunk + lane;  // (n.chunk == kChunk here)
    if (n.ready) wait_head(n.ready, H, h, unsigned(token * n.L + l + 1) * unsigned(3 * hs));
    for (int i = lane; i < hs; i += kWarp) qs[i] = __ldcg(n.q + h * hs + i);
    __syncwarp();
    float sc = -INFINITY;
    if (s <= t) {
      const float* kr = kc + size_t(s) * C + h * hs;
      float d = 0;
      if (hs % 4 == 0 && C % 4 == 0) {
#pragma unroll 8
        for (int i = 0; i < hs; i += 4) {
          const float4 kv = __ldcg(reinterpret_cast<const float4*>(kr + i));
          d += qs[i] * kv.x + qs[i + 1] * kv.y + qs[i + 2] * kv.z + qs[i + 3] * kv.w;
        }
      } else {
        for (int i = 0; i < hs; ++i) d += qs[i] * __ldcg(kr + i);
      }
      sc = d * scale;
    }
    const float m = warp_max(sc);  // lane 0's position is always <= t: m is finite
    const float p = s <= t ? __expf(sc - m) : 0.f;
    const float lsum = warp_sum(p);
    float acc[kMaxHead / kWarp] = {};
    const int nj = min(kChunk, t - c * kChunk + 1);
    // Unrolled so that several positions' v loads are in flight at once: one at a time, the 32 L2
    // round trips of a chunk would follow each other.
#pragma unroll 8
    for (int j = 0; j < nj; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const float* vr = vc + size_t(c * kChunk + j) * C + h * hs;
#pragma unroll
      for (int r = 0; r < kMaxHead / kWarp; ++r)
        if (lane + kWarp * r < hs) acc[r] += pj * __ldcg(vr + lane + kWarp * r);
    }
    store_partial(n, h, c, hs, lane, acc, m, lsum);
    __syncwarp();  // qs is rewritten by the next item
  }
}

// Stage 1 with shorter chunks (P = 16 or 8 cached positions per work item): P x more items than
// stage_attention's, so that more warps share the cache's reads, and each warp's chain of dependent L2
// trips is shorter (a warp walks P positions' v rows, not 32). G = 32 / P lanes score one position, each
// over every G-th group of 4 dimensions, and add up with G-lane shuffles; the v loop is unrolled whole.
// Same partials (per chunk: o, m, l) as stage_attention; stage 2 combines P-long chunks the same way.
template <int P, class W>
__device__ void stage_attention_split(const Net<W>& n, int l, int t, int token, unsigned char* smem) {
  constexpr int G = kWarp / P;
  const int C = n.C, H = n.H, hs = C / H, nck = t / P + 1, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int j = lane / G, g = lane % G;  // this lane's position in the chunk, its share of the dimensions
  float* qs = reinterpret_cast<float*>(smem) + C + warp * hs;
  const float* kc = n.kc + size_t(l) * n.T * C;
  const float* vc = n.vc + size_t(l) * n.T * C;
  const float scale = rsqrtf(float(hs));
  for (int item = blockIdx.x + gridDim.x * warp; item < H * nck; item += gridDim.x * kWarps) {
    const int h = item / nck, c = item % nck, s = c * P + j;
    if (n.ready) wait_head(n.ready, H, h, unsigned(token * n.L + l + 1) * unsigned(3 * hs));
    for (int i = lane; i < hs; i += kWarp) qs[i] = __ldcg(n.q + h * hs + i);
    __syncwarp();
    float d = 0;
    if (s <= t) {
      const float* kr = kc + size_t(s) * C + h * hs;
      if (hs % 4 == 0 && C % 4 == 0) {
#pragma unroll 4
        for (int i = 4 * g; i < hs; i += 4 * G) {
          const float4 kv = __ldcg(reinterpret_cast<const float4*>(kr + i));
          d += qs[i] * kv.x + qs[i + 1] * kv.y + qs[i + 2] * kv.z + qs[i + 3] * kv.w;
        }
      } else {
        for (int i = g; i < hs; i += G) d += qs[i] * __ldcg(kr + i);
      }
    }
#pragma unroll
    for (int off = G / 2; off > 0; off /= 2) d += __shfl_xor_sync(0xffffffffu, d, off);  // the G lanes' parts
    const float sc = s <= t ? d * scale : -INFINITY;
    const float m = warp_max(sc);  // position c * P <= t: m is finite
    const float p = s <= t ? __expf(sc - m) : 0.f;
    const float lsum = warp_sum(g == 0 ? p : 0.f);  // each position once
    float acc[kMaxHead / kWarp] = {};
    const int nj = min(P, t - c * P + 1);
#pragma unroll
    for (int jj = 0; jj < P; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj * G);
      if (jj < nj) {
        const float* vr = vc + size_t(c * P + jj) * C + h * hs;
#pragma unroll
        for (int r = 0; r < kMaxHead / kWarp; ++r)
          if (lane + kWarp * r < hs) acc[r] += pj * __ldcg(vr + lane + kWarp * r);
      }
    }
    store_partial(n, h, c, hs, lane, acc, m, lsum);
    __syncwarp();  // qs is rewritten by the next item
  }
}

// Stage 2: every block combines the chunks into the attention output (C floats in shared memory:
// o = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c), then x += proj(att) + b for its rows. Every
// chunk's m and l are first read into shared memory by as many threads at once (one trip to L2 for all of
// them, instead of each output walking them again), then each output reads its nck partial sums (the
// loads independent of each other, unrolled so that several are in flight).
template <class W>
__device__ void stage_proj(const Net<W>& n, int l, int t, unsigned char* smem) {
  const int C = n.C, H = n.H, hs = C / H, nck = t / n.chunk + 1, stride = n.chunks();
  float* xs = reinterpret_cast<float*>(smem);
  float* ms = xs + C;        // [H][nck] chunk maxima
  float* ls = ms + H * nck;  // [H][nck] chunk sums
  for (int i = threadIdx.x; i < H * nck; i += kThreads) {
    const float* pc = n.part + (size_t(i / nck) * stride + i % nck) * (hs + 2);
    ms[i] = __ldcg(pc + hs), ls[i] = __ldcg(pc + hs + 1);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < C; i += kThreads) {
    const int h = i / hs, d = i % hs;
    const float* ph = n.part + size_t(h) * stride * (hs + 2);
    const float* mh = ms + h * nck;
    const float* lh = ls + h * nck;
    float M = -INFINITY;
    for (int c = 0; c < nck; ++c) M = fmaxf(M, mh[c]);
    float L = 0, o = 0;
#pragma unroll 8
    for (int c = 0; c < nck; ++c) {
      const float e = __expf(mh[c] - M);
      L += e * lh[c], o += e * __ldcg(ph + size_t(c) * (hs + 2) + d);
    }
    xs[i] = o / L;
  }
  __syncthreads();
  const float* b = n.lv(l) + 5 * C;
  gemv_rows(n.proj_w(l), xs, C, C, ResidualAndBias{n.x, b},
            [&](int o, float s, float2 pre) { n.x[o] = pre.x + s + pre.y; }, n.local(smem, l, 1),
            n.late_epilogue);
}

// Stage 3: h = gelu(fc(LayerNorm 2 of x)).
template <class W>
__device__ void stage_fc(const Net<W>& n, int l, unsigned char* smem, float* red) {
  const int C = n.C;
  float* xs = reinterpret_cast<float*>(smem);
  for (int i = threadIdx.x; i < C; i += kThreads) xs[i] = __ldcg(n.x + i);
  const float* v = n.lv(l);
  layernorm_shared(xs, v + 6 * C, v + 7 * C, C, red);
  const float* b = v + 8 * C;
  gemv_rows(n.fc_w(l), xs, C, 4 * C, BiasOf{b}, [&](int o, float s, float2 pre) { n.h[o] = gelu(s + pre.x); },
            n.local(smem, l, 2), n.late_epilogue);
}

// Stage 4: x += fc2(h) + b.
template <class W>
__device__ void stage_fc2(const Net<W>& n, int l, unsigned char* smem) {
  const int C = n.C;
  float* xs = reinterpret_cast<float*>(smem);
  for (int i = threadIdx.x; i < 4 * C; i += kThreads) xs[i] = __ldcg(n.h + i);
  __syncthreads();
  const float* b = n.lv(l) + 12 * C;
  gemv_rows(n.fc2_w(l), xs, 4 * C, C, ResidualAndBias{n.x, b},
            [&](int o, float s, float2 pre) { n.x[o] = pre.x + s + pre.y; }, n.local(smem, l, 3),
            n.late_epilogue);
}

// The head: logits = wte . LayerNorm_f(x) (no bias), kept for the next token's sampling (and in row t
// of logits_all when the checks ask).
template <class W>
__device__ void stage_head(const Net<W>& n, int t, unsigned char* smem, float* red) {
  const int C = n.C;
  float* xs = reinterpret_cast<float*>(smem);
  for (int i = threadIdx.x; i < C; i += kThreads) xs[i] = __ldcg(n.x + i);
  const float* v = n.vec + size_t(n.L) * 13 * C;
  layernorm_shared(xs, v, v + C, C, red);
  gemv_rows(n.head_w(), xs, C, n.V, Nothing{}, [&](int o, float s, float2) {
    n.logits[o] = s;
    if (n.logits_all) n.logits_all[size_t(t) * n.V + o] = s;
  }, n.local(smem, n.L, 0), n.late_epilogue);
}

// Stage `s` of one token (s = 5l + j for layer l's stage j; s = 5L: the head) at position t, draw `count`.
// `token`: the token's index within this launch (the merged stages' epochs count from it).
template <class W>
__device__ void run_stage(const Net<W>& n, int s, int t, int count, int token, unsigned char* smem, float* red) {
  if (s == n.L * kStagesPerLayer) return stage_head(n, t, smem, red);
  const int l = s / kStagesPerLayer;
  switch (s % kStagesPerLayer) {
    case 0:
      return stage_qkv(n, l, t, count, smem, red);
    case 1:
      if (n.chunk == 16) return stage_attention_split<16>(n, l, t, token, smem);
      if (n.chunk == 8) return stage_attention_split<8>(n, l, t, token, smem);
      return stage_attention(n, l, t, token, smem);
    case 2:
      return stage_proj(n, l, t, smem);
    case 3:
      return stage_fc(n, l, smem, red);
    default:
      return stage_fc2(n, l, smem);
  }
}

// ---- Prefetch: the next stage's weights while the grid waits at the barrier ----------------------
// The rows gemv_rows will give this block's warps (the same o -> warp mapping), one 128-byte line per
// lane and instruction. A prefetch is a hint: it waits for nothing and changes no result.
template <class W>
__device__ __forceinline__ void prefetch_rows(const W* Wm, int I, int O) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const size_t bytes = size_t(I) * sizeof(W);
  for (int o = blockIdx.x + gridDim.x * warp; o < O; o += gridDim.x * kWarps) {
    const char* row = reinterpret_cast<const char*>(Wm + size_t(o) * I);
    for (size_t b = size_t(lane) * 128; b < bytes; b += kWarp * 128)
      asm volatile("prefetch.global.L1 [%0];" ::"l"(row + b));
  }
}
template <class W>
__device__ void prefetch_stage(const Net<W>& n, int s) {
  const int C = n.C;
  if (s == n.L * kStagesPerLayer) return prefetch_rows(n.head_w(), C, n.V);
  const int l = s / kStagesPerLayer;
  switch (s % kStagesPerLayer) {
    case 0:
      return prefetch_rows(n.qkv_w(l), C, 3 * C);
    case 2:
      return prefetch_rows(n.proj_w(l), C, C);
    case 3:
      return prefetch_rows(n.fc_w(l), C, 4 * C);
    case 4:
      return prefetch_rows(n.fc2_w(l), 4 * C, C);
    default:
      return;  // attention reads the cache, written by the stage before
  }
}

// ---- Step: one kernel per stage (replayed as a CUDA graph) ---------------------------------------
// The position and the draw count are read from device memory, so the same graph serves every token.
// After the head, the last block to finish advances them: it counts the blocks that are done with an
// atomic, and every other block read the position before it added itself, so none reads a moved one.
template <class W>
__global__ void __launch_bounds__(kThreads) decode_stage(Net<W> n, int s) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float red[kWarps];
  const int t = n.state[0], count = n.state[1];
  run_stage(n, s, t, count, 0, smem, red);
  if (s != n.L * kStagesPerLayer) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(n.done, 1u) == gridDim.x - 1) {
      n.state[0] = t + 1;
      if (!n.forced) n.state[1] = count + 1;
      *n.done = 0;
    }
  }
}

}  // namespace dec
}  // namespace k
