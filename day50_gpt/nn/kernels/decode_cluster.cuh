// day50_gpt/nn/kernels/decode_cluster.cuh: the whole generation on ONE thread-block cluster (sm_90): 16
// blocks, one per SM, that share their shared memory (distributed shared memory, DSMEM) and meet at a
// hardware cluster barrier. The same stages as decode_stages.cuh (5 a layer, then the head), the same
// packed weights (Net), the same sampling; what moves is where the data lives and how the blocks meet.
//
// Why fewer SMs can be faster. The persistent kernel (decode_persistent.cuh) spreads each stage over all
// 132 SMs and then pays a grid-wide barrier (an atomic in L2 and a spin: the bench's "grid barrier
// alone" rows) and, in the next stage, every block's trip to L2 for the vector the others wrote: its
// stage_us rows show ~4-6 us a stage, 31 stages a token, of which the barrier alone is about one. With
// one cluster:
//   - the barrier is barrier.cluster (hardware, within one GPC), not an atomic in L2;
//   - each block keeps its own copy of every vector a stage reads (the residual stream x, q, the MLP
//     hidden h, the logits) in its shared memory, and a stage pushes the rows it computed into all 16
//     copies with stores to distributed shared memory: after the barrier every input is already on chip;
//   - those stores are st.async (all stages but qkv): each one, as it lands, counts its bytes off the
//     receiving block's mbarrier, which waits for the stage's whole vector; the cluster barrier then only
//     has to say that every block finished the stage (relaxed: no memory release, which with plain stores
//     held every sender at a MEMBAR.GPU until its stores were acknowledged). qkv writes the cache rows to
//     global memory, which the attention blocks read next: its stage ends with the full cluster.sync();
//   - the weights stream in one stage ahead: while a stage computes (and waits at the barrier), the copy
//     engine (TMA, cp.async.bulk) moves the next stage's rows of weights (their biases and, after a
//     LayerNorm, their sums with them, packed next to them on the host) from L2 into the other end of
//     the block's weight area. 16 SMs read the 21 MB of bf16 weights each token (1.3 MB each) from L2,
//     which can hold all of them from one token to the next;
//   - a LayerNorm is folded into the GEMV after it (its bias into the rows' biases, on the host): the GEMV
//     reads the residual stream as it is and each warp finds the mean and variance itself from the inputs
//     it reads anyway (the folded LayerNorm, below).
// What it costs: the weights are read from L2 by 16 SMs instead of 132, so the copy of a stage must keep
// up with the stage (the bench's per-stage times say whether it does), and attention (12 of the 16
// blocks: 6 heads x 2 halves of the cached positions) has fewer warps to spread the cache's reads over.
//
// Work split. Row o of every matrix belongs to block o / R (R rows a block, a multiple of 4), so a block's
// weights of one stage are one contiguous run of rows; with the stage's vectors they are packed into one
// "bundle" per block and stage, one bulk copy each. Attention: block b (< H x G) takes head b / G and the g-th of G
// equal parts of the cached positions; its warps take 8 positions at a time (4 lanes a position for the
// score, each lane 2 dimensions of v), merge their steps with the online softmax, the block merges its
// warps, and the block's (o, m, l) goes to every block's shared memory; the projection stage merges the
// G parts of each head before its GEMV.
#pragma once
#include <cooperative_groups.h>

#include "../cluster_plan.h"
#include "decode_persistent.cuh"  // global_ns
#include "decode_stages.cuh"

namespace k {
namespace dec {

constexpr int kCMaxHead = 64;  // head size limit (and a multiple of 16: 4 lanes score a position, float4 each);
                                // wider heads would hold more of a step's loads in registers than 512 threads have
constexpr int kCChunk = 8;      // cached positions a warp takes at once (32 lanes / 4 a position)
constexpr int kCRowGroup = 8;   // rows a warp sums together at most (warp_sum8's eight slots)
// Development only (-DDECODE_SUBSTAMPS, the kTrace build): the points of a stage at which every block's thread 0
// writes clock64() to Net::sub. A point a stage does not reach is left 0 (the host carries the one before).
// qkv of layer 0 also stamps its sampling: ranks done, weights' exps done, the pick made (kSubRanks ..).
enum SubPoint { kSubStart, kSubIssued, kSubWeights, kSubA, kSubB, kSubPushed, kSubBarrier, kSubLanded,
                kSubRanks, kSubExps, kSubPicked, kSub };

// The weights' copy: the Tensor Memory Accelerator's bulk copy (cp.async.bulk, sm_90; mbar_init, mbar_expect,
// bulk_copy and mbar_wait in async.cuh). One thread hands the copy engine a contiguous run of bytes and an
// mbarrier; the engine moves them while every thread goes on, and the mbarrier's phase completes when all
// the bytes it was told to expect have landed. (A first version had all 512 threads issue 16-byte cp.async,
// ~4,800 requests a stage for the largest: it ran slower in development, its issuing on every thread's path.)
// Distributed shared memory by address: `p` (this block's shared memory) as the same place in block
// `rank`'s, for st.async and remote mbarriers.
__device__ __forceinline__ unsigned cluster_addr(const void* p, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_addr(p)), "r"(rank));
  return r;
}
// An asynchronous store into another block's shared memory (st.async, sm_90) that, once it has landed,
// counts its 4 bytes off that block's mbarrier `rbar` (the receiver's expect_tx says how many to wait
// for): the receiver learns that its inputs are there from its own mbarrier, and the sender needs no
// fence. A plain store plus cluster.sync() makes every sender wait at a release (MEMBAR.GPU) until its
// stores are acknowledged: under ncu the largest stall of the stage's end.
__device__ __forceinline__ void st_async(unsigned raddr, float v, unsigned rbar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(raddr),
               "r"(__float_as_uint(v)), "r"(rbar)
               : "memory");
}
// The cluster barrier without its release of memory: every block has finished the stage, no more. What
// the stage pushed is waited for on each block's own mbarrier instead. A relaxed arrive does not order the
// block's earlier reads before other blocks' later writes, so no vector is overwritten across one: between
// a block's read of a vector and the next remote write into it there is always a qkv stage's full
// cluster.sync() (the residual stream has two copies, x0 for qkv and the head, x1 for fc, and q one per
// layer parity; attp, h and the logits are each read in or before a qkv stage that ends before their next
// write). Nor does it order a block's own reads before its own later writes: the staging of a stage's rows
// has two copies too (View::outs), so that a __syncthreads() stands between its reads and its next write.
__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}

// One bundle as this block sees it in shared memory: its rows [r0, r0 + rows) of a matrix with I inputs,
// then (the stages after a LayerNorm: qkv, fc, the head) the LayerNorm's gain and each row's sum of its
// weights times the gain, then each row's bias (for those stages, carrying the LayerNorm's bias through
// the matrix; ClusterPlan has the layout).
// outs: where the stage stages its rows before sending them, one of two by the bundle's parity: the stage
// before (the other parity) read its own while sending, with only a relaxed cluster barrier since, which
// does not order those reads before these writes; the stage before that ended with a __syncthreads() after
// its last write, which does.
template <class W>
struct View {
  W* w;
  float *g, *sum, *bias, *outs;
  int r0, rows, I;
};
template <class W>
__device__ __forceinline__ View<W> view_of(const ClusterPlan& p, int kind, int parity, unsigned char* smem, int rank) {
  View<W> v;
  v.I = p.I(kind);
  v.r0 = rank * p.R(kind);
  v.rows = max(0, min(p.R(kind), p.O(kind) - v.r0));
  unsigned char* at = smem + p.at(kind, parity) + p.w_bytes(kind);
  v.w = reinterpret_cast<W*>(smem + p.at(kind, parity));
  v.g = p.ln(kind) ? reinterpret_cast<float*>(at) : nullptr;
  v.sum = p.ln(kind) ? reinterpret_cast<float*>(at + p.gain_bytes()) : nullptr;
  v.bias = reinterpret_cast<float*>(at + (p.ln(kind) ? p.gain_bytes() + p.row_bytes(kind) : 0));
  v.outs = reinterpret_cast<float*>(smem + (parity ? p.outs1 : p.outs));
  return v;
}
// Thread 0 starts the copy of bundle j (of 4L + 1 a token; its kind given) to the given end of the weight
// area, from the host-packed image: its early part (all of it where it overlaps nothing; `prev`, the kind
// of the bundle being read, -1 for none), which also tells the end's mbarrier the bundle's size, or its
// late part (ClusterPlan::part). The mbarrier's next phase completes when every byte has landed. Handing
// a copy over holds the issuing thread up, and it is on the stage's path: the bench's "issue" column.
__device__ __forceinline__ void issue_bundle(const ClusterPlan& p, int j, int kind, int prev, int parity, bool late,
                                             unsigned char* smem, int rank, unsigned long long* bar) {
  if (threadIdx.x != 0) return;
  if (!late) mbar_expect(bar, unsigned(p.bytes(kind)));
  const ClusterPlan::Part pt = prev < 0 ? ClusterPlan::Part{0u, unsigned(p.bytes(kind))} : p.part(kind, prev, parity, late);
  if (pt.len > 0)
    bulk_copy(smem + p.at(kind, parity) + pt.off, p.pack + (size_t(j) * p.S + rank) * p.stride + pt.off, pt.len, bar);
}

// The LayerNorm folded into the GEMV that follows it. LayerNorm(x) = (x - m) r g + b (mean m, r = 1 /
// sqrt(var + eps), gain g, bias b) feeds W, so row o of the product is
//     sum_i W[o,i] ((x_i - m) r g_i + b_i) = r (sum_i W[o,i] g_i (x_i - k) - (m - k) S[o]) + c[o]
// for any k, with S[o] = sum_i W[o,i] g_i and c[o] = sum_i W[o,i] b_i (plus the row's own bias), made once on
// the host (FastDecoder::pack_bundles). The GEMV multiplies g (x - k) by W as it reads x: no pass that
// normalizes x into another vector first, and no block-wide reduction for m and r (two __syncthreads and a
// chain of shared-memory loads, the last loop of which alone was 3% of the kernel's executed instructions
// in the ncu profile of the version before): every warp sums x - k and its square itself from the inputs it
// loads for its products anyway, and reduces them with its rows' sums (warp_sum8, slots 6 and 7). k = x[0]:
// then m - k is of the size of x's spread, and so is what the subtraction takes away. (With k = 0 it would
// take away m S, of the size of x's mean: where the mean is large against the spread the two sums cancel
// and the result keeps few bits, as a review's host simulation of this loop showed; the first version did
// that.) The gain could go into the weights instead, W g stored; but in bf16 W g rounds otherwise than W
// does, and the checks hold every decoder to the first generator on the same rounded weights.
// The 8 sums of a[0..7] over the warp at once: each step hands half of the values still held to the lane
// across (9 shuffles instead of 8 x 5), and lane L ends with the total of a[(L >> 2) & 7] (every lane of a
// group of 4 holds it). The inputs are consumed.
__device__ __forceinline__ float warp_sum8(float (&a)[kCRowGroup]) {
  static_assert(kCRowGroup == 8, "the steps below halve 8 values three times");
  const int lane = threadIdx.x % kWarp;
  const bool b4 = lane & 16, b3 = lane & 8, b2 = lane & 4;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float keep = b4 ? a[q + 4] : a[q], give = b4 ? a[q] : a[q + 4];
    a[q] = keep + __shfl_xor_sync(0xffffffffu, give, 16);
  }
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const float keep = b3 ? a[q + 2] : a[q], give = b3 ? a[q] : a[q + 2];
    a[q] = keep + __shfl_xor_sync(0xffffffffu, give, 8);
  }
  {
    const float keep = b2 ? a[1] : a[0], give = b2 ? a[0] : a[1];
    a[0] = keep + __shfl_xor_sync(0xffffffffu, give, 4);
  }
  a[0] += __shfl_xor_sync(0xffffffffu, a[0], 2);
  return a[0] + __shfl_xor_sync(0xffffffffu, a[0], 1);
}
// 4 weights (16 bytes of fp32, 8 of bf16, in shared memory) times 4 inputs, added to acc.
__device__ __forceinline__ float dot4(const float* w, const float4 x, float acc) {
  const float4 a = *reinterpret_cast<const float4*>(w);
  return fmaf(a.w, x.w, fmaf(a.z, x.z, fmaf(a.y, x.y, fmaf(a.x, x.x, acc))));
}
__device__ __forceinline__ float dot4(const __nv_bfloat16* w, const float4 x, float acc) {
  const uint2 raw = *reinterpret_cast<const uint2*>(w);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  return fmaf(hi.y, x.w, fmaf(hi.x, x.z, fmaf(lo.y, x.y, fmaf(lo.x, x.x, acc))));
}
// One warp's NR rows of the bundle, rows row0, row0 + 16, ... (NR known when compiling: no test on a row
// inside the loop and no instruction spent on a row the warp does not have), times xin (I floats, in
// shared memory): lane l takes inputs 4l .. 4l + 3, then 128 further on, ..., so that for I = 384 every lane
// takes 3 groups of 4 (8 at a time, as the first version did, left half the lanes idle in its second
// step). The NR sums are reduced together (warp_sum8), and lanes 0, 4, ... run epi(r, sum, st) side by
// side. kStats (a LayerNorm folded in, its gain g): the products are W (g (x - k)) with k = x[0], and the
// warp also sums x - k and its square (var = E[(x-k)^2] - E[x-k]^2) for st = (mean of x - k, 1 / sqrt(var +
// 1e-5)) (biased variance, as k::layernorm_fwd); otherwise st is not computed. In the ncu profile of the
// first version (8 rows a warp always, each tested), the loop's tests and addresses were 13% of the
// kernel's executed instructions, more than its multiply-adds.
// kI (0: I at run time, the decoder's) the number of inputs known when compiling, the loop over them then
// unrolled (by 4 steps at most): dev/stage_floor.cu times it; in the decoder the unrolled loop's registers
// made ptxas spill several times more (the notes, "What one cluster can do at best"), so it runs one step
// at a time there.
template <int NR, bool kStats, int kI = 0, class W, class Epi>
__device__ __forceinline__ void gemv_rows(const W* Wl, const float* xin, const float* g, int I_rt, int row0, Epi& epi) {
  static_assert(NR >= 1 && NR <= kCRowGroup && (!kStats || NR <= kCRowGroup - 2), "slots 6, 7: the statistics");
  static_assert(kI % (kWarp * 4) == 0, "whole steps of 4 inputs a lane");
  constexpr int kSteps = kI / (kWarp * 4), kUnroll = kSteps == 0 ? 1 : kSteps > 4 ? 4 : kSteps;
  const int I = kI ? kI : I_rt;
  const int lane = threadIdx.x % kWarp;
  float acc[kCRowGroup] = {};
  const W* wl = Wl + size_t(row0) * I;
  const size_t step = size_t(kCWarps) * I;  // from one of the warp's rows to the next
  const float k = kStats ? xin[0] : 0.f;
#pragma unroll kUnroll
  for (int i = lane * 4; i < I; i += kWarp * 4) {
    float4 x = *reinterpret_cast<const float4*>(xin + i);
    if constexpr (kStats) {
      const float a = x.x - k, b = x.y - k, c = x.z - k, d = x.w - k;
      acc[6] += (a + b) + (c + d);
      acc[7] = fmaf(a, a, fmaf(b, b, fmaf(c, c, fmaf(d, d, acc[7]))));
      const float4 gi = *reinterpret_cast<const float4*>(g + i);
      x = make_float4(a * gi.x, b * gi.y, c * gi.z, d * gi.w);
    }
#pragma unroll
    for (int j = 0; j < NR; ++j) acc[j] = dot4(wl + j * step + i, x, acc[j]);
  }
  const float s = warp_sum8(acc);
  float2 st = make_float2(0.f, 0.f);
  if constexpr (kStats) {  // lanes 24..27 hold the sum of x - k, 28..31 that of its squares
    const float sd = __shfl_sync(0xffffffffu, s, 24) / I, sq = __shfl_sync(0xffffffffu, s, 28) / I;
    st = make_float2(sd, rsqrtf(fmaxf(sq - sd * sd, 0.f) + 1e-5f));
  }
  const int j = (lane >> 2) & 7;
  if (lane % 4 == 0 && j < NR) epi(row0 + j * kCWarps, s, st);
}
// Rows [0, rows) of the bundle times xin (times g first, with kStats): warp w takes rows w, w + 16, ..., at
// most kMax of them a pass (kMax = 6 with kStats: the statistics take two of warp_sum8's eight slots), and
// epi(r, sum, st) runs for each. I % 4 == 0.
template <int kMax, bool kStats, int kI = 0, class W, class Epi>
__device__ __forceinline__ void gemv_local(const W* Wl, const float* xin, const float* g, int I, int rows, Epi epi) {
  static_assert(kMax <= kCRowGroup && (!kStats || kMax <= kCRowGroup - 2), "slots 6, 7: the statistics");
  const int warp = threadIdx.x / kWarp;
  for (int base = 0; base < rows; base += kCWarps * kMax) {
    const int r0 = base + warp, left = rows - r0;
    const int nr = left <= 0 ? 0 : min(kMax, (left + kCWarps - 1) / kCWarps);
    switch (nr) {  // warp-uniform
      case 1: gemv_rows<1, kStats, kI>(Wl, xin, g, I, r0, epi); break;
      case 2: gemv_rows<2, kStats, kI>(Wl, xin, g, I, r0, epi); break;
      case 3: gemv_rows<3, kStats, kI>(Wl, xin, g, I, r0, epi); break;
      case 4: gemv_rows<4, kStats, kI>(Wl, xin, g, I, r0, epi); break;
      case 5: gemv_rows<5, kStats, kI>(Wl, xin, g, I, r0, epi); break;
      case 6: gemv_rows<6, kStats, kI>(Wl, xin, g, I, r0, epi); break;
      default:
        if constexpr (kMax > 6) {
          if (nr == 7) gemv_rows<7, kStats, kI>(Wl, xin, g, I, r0, epi);
          if (nr == 8) gemv_rows<8, kStats, kI>(Wl, xin, g, I, r0, epi);
        }
        break;
    }
  }
}
// src[0, count) (this block's shared memory) to dst[0, count) in every block of the cluster, itself included.
// Warp w sends to block w % S (the 16 / S warps that share a block split its numbers): each store
// instruction carries 32 consecutive numbers to one block. (Sending each row from its warp as it is done,
// a lane per block, scatters every store instruction over 16 SMs: the bench measured it slower. Indexing
// thread i to block i / count, as a first version did, spent an integer division on every store.)
// got: null for plain stores (made visible by the full cluster.sync() that ends the stage); else the
// stage's mbarrier, which each st.async counts its bytes off in the receiving block.
// The warp's first block (w % S), its part (w / S) and the parts a block's numbers are split into
// (kCWarps / S, at least 1) are counted by subtraction: S is a run-time value, and the three integer
// divisions they were (~20 dependent instructions each, on every warp at the end of every stage, between
// its GEMV and its sends) drew ~4% of the kernel's warp-stall samples in the profile of step 6
// (results/nvidia-h200/day50_decode/ncu_cluster_fp32_after.txt, the lines of this function).
__device__ __forceinline__ void push_to_all(cooperative_groups::cluster_group& cl, float* dst, const float* src,
                                            int count, int S, unsigned long long* got = nullptr) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  int first = warp, part = 0, group = 0;  // S > 16: every warp part 0 of blocks w, w + 16, ...
  while (first >= S) first -= S, ++part;  // warp < 16: at most 15 / S steps
  for (int c = S; c <= kCWarps; c += S) ++group;
  group = max(group, 1);
  if (part >= group) return;
  for (int b = first; b < S; b += kCWarps) {
    if (got) {
      const unsigned d = cluster_addr(dst, unsigned(b)), rbar = cluster_addr(got, unsigned(b));
      for (int e = lane + kWarp * part; e < count; e += kWarp * group) st_async(d + 4u * unsigned(e), src[e], rbar);
    } else {
      float* d = cl.map_shared_rank(dst, unsigned(b));
      for (int e = lane + kWarp * part; e < count; e += kWarp * group) d[e] = src[e];
    }
  }
}

template <class T>
__device__ __forceinline__ T* at_(unsigned char* smem, unsigned off) {
  return reinterpret_cast<T*>(smem + off);
}

// Layer l's qkv stage at position t: [sample the token and embed it,] this block's qkv rows of LayerNorm 1's
// output (folded in);
// q rows go to every block's q, k and v rows into row t of the layer's cache (in global memory).
// Layer 0's qkv stage first picks the token at position t and embeds it into x0 (xs): cstage_embed, then the
// stage's GEMV (cstage_qkv). The two are apart so that the sub-stamps (DECODE_SUBSTAMPS) can mark the line
// between them.
template <class W, class Sub>
__device__ void cstage_embed(const Net<W>& n, const ClusterPlan& p, int t, int count, unsigned char* smem, int rank,
                             Sub sub) {
  const int C = n.C;
  float* xs = at_<float>(smem, p.xs);
  int tok;
  if (n.forced) {
    tok = n.forced[t];
  } else {
#ifdef DECODE_SUBSTAMPS
    tok = sample_block<true>(at_<float>(smem, p.logits), n.V, n.temperature, n.top_k, n.u[count], smem + p.samp,
                             [&](int q) { sub(kSubRanks + q); });
#else  // (a lambda that does nothing still moved ptxas's register allocation: more spills in the fp32 build)
    tok = sample_block<true>(at_<float>(smem, p.logits), n.V, n.temperature, n.top_k, n.u[count], smem + p.samp);
#endif
    if (rank == 0 && threadIdx.x == 0) n.out[count] = tok;
  }
  const W* e = n.head_w() + size_t(tok) * C;
  for (int i = threadIdx.x; i < C; i += kCThreads) xs[i] = ld(e[i]) + n.wpe[size_t(t) * C + i];
  __syncthreads();
}
template <class W, class Sub>
__device__ void cstage_qkv(const Net<W>& n, const ClusterPlan& p, cooperative_groups::cluster_group& cl,
                           const View<W>& v, int l, int t, unsigned char* smem, Sub sub) {
  const int C = n.C;
  float* xs = at_<float>(smem, p.xs);
  sub(kSubA);
  float* krow = n.kc + (size_t(l) * n.T + t) * C;
  float* vrow = n.vc + (size_t(l) * n.T + t) * C;
  float *q = at_<float>(smem, l & 1 ? p.q1 : p.q), *outs = v.outs;
  gemv_local<kCRowGroup - 2, true>(v.w, xs, v.g, C, v.rows, [&](int r, float s, float2 st) {
    const int o = v.r0 + r;
    s = st.y * (s - st.x * v.sum[r]) + v.bias[r];  // LayerNorm 1 folded in
    if (o < C)
      outs[r] = s;  // q: to every block below (the attention blocks read their head's part)
    else  // k, v: row t of the cache
      (o < 2 * C ? krow[o - C] : vrow[o - 2 * C]) = s;
  });
  __syncthreads();
  sub(kSubB);
  if (v.r0 < C) push_to_all(cl, q + v.r0, outs, min(v.rows, C - v.r0), p.S);
}

// Attention of position t over cached positions 0..t (see the file's head for the split).
template <class W, class Sub>
__device__ void cstage_attention(const Net<W>& n, const ClusterPlan& p, cooperative_groups::cluster_group& cl, int l,
                                 int t, unsigned char* smem, int rank, unsigned long long* got, Sub sub) {
  const int C = n.C, H = n.H, hs = C / H, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int j = lane / 4, gq = lane % 4;  // this lane's position in the 8, its quarter of the score's dimensions
  const float* q = at_<float>(smem, l & 1 ? p.q1 : p.q);
  float *wpart = at_<float>(smem, p.wpart), *attp = at_<float>(smem, p.attp);
  const float* kc = n.kc + size_t(l) * n.T * C;
  const float* vc = n.vc + size_t(l) * n.T * C;
  const float scale = rsqrtf(float(hs));
  const int len = (t + 1 + p.G - 1) / p.G;
  constexpr int KU = kCMaxHead / 16, VU = kCMaxHead / kWarp;
  for (int item = rank; item < H * p.G; item += p.S) {
    const int h = item / p.G, p0 = (item % p.G) * len, p1 = min(t + 1, p0 + len);
    const int steps = p1 > p0 ? (p1 - p0 + kCChunk - 1) / kCChunk : 0;
    float mw = -INFINITY, lw = 0.f, acc[VU] = {};
    for (int c = warp; c < steps; c += kCWarps) {
      const int q0 = p0 + c * kCChunk, s = q0 + j;
      const bool valid = s < p1;
      // Every load of the step first (k for the scores, v for the sum: v does not wait for the scores),
      // so that one trip to L2 covers them all.
      float4 kr[KU];
      float vr[kCChunk][VU];
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        const int i = 4 * gq + 16 * u;
        kr[u] = valid && i < hs ? __ldcg(reinterpret_cast<const float4*>(kc + size_t(s) * C + h * hs + i))
                                : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int jj = 0; jj < kCChunk; ++jj)
#pragma unroll
        for (int r = 0; r < VU; ++r) {
          const int d = lane + kWarp * r;
          vr[jj][r] = q0 + jj < p1 && d < hs ? __ldcg(vc + size_t(q0 + jj) * C + h * hs + d) : 0.f;
        }
      float dot = 0.f;
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        const int i = 4 * gq + 16 * u;
        if (i < hs) {
          const float4 qq = *reinterpret_cast<const float4*>(q + h * hs + i);
          dot += qq.x * kr[u].x + qq.y * kr[u].y + qq.z * kr[u].z + qq.w * kr[u].w;
        }
      }
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      const float sc = valid ? dot * scale : -INFINITY;
      const float mc = warp_max(sc);  // position q0 < p1: finite
      const float pr = valid ? __expf(sc - mc) : 0.f;
      const float lc = warp_sum(gq == 0 ? pr : 0.f);  // each position once
      const float M = fmaxf(mw, mc), a = __expf(mw - M), b = __expf(mc - M);  // the first step: mw = -inf, a = 0
      lw = a * lw + b * lc;
#pragma unroll
      for (int r = 0; r < VU; ++r) {
        float o = 0.f;
#pragma unroll
        for (int jj = 0; jj < kCChunk; ++jj) o += __shfl_sync(0xffffffffu, pr, jj * 4) * vr[jj][r];
        acc[r] = a * acc[r] + b * o;
      }
      mw = M;
    }
    float* wp = wpart + warp * p.wstride;
#pragma unroll
    for (int r = 0; r < VU; ++r)
      if (lane + kWarp * r < hs) wp[lane + kWarp * r] = acc[r];
    if (lane == 0) wp[hs] = mw, wp[hs + 1] = lw;
    __syncthreads();
    if (item == rank) sub(kSubA);
    // The block's warps merged: (o, m, l) of this part (m = -inf, l = 0 where the part is empty).
    // Thread d (< hs) merges dimension d, threads hs and hs + 1 the maximum and the sum, into this block's
    // staging slot (after the warps' partials); then push_to_all sends the hs + 2 numbers (with 16 blocks,
    // every warp to one block). (A first version had each of the hs + 2 threads send its number to the S blocks itself:
    // S stores one after another on each of 3 warps while the other 13 waited.)
    // No test inside the loops: a warp without positions wrote m = -inf (and zeros), and __expf(-inf) is 0, so its
    // weight is 0 without a branch. (A test on each warp's m, as a first version had, put a branch between every
    // warp's loads and the next's: the merge took ~0.4-0.6 us of the stage in stage_floor's phase stamps,
    // results/nvidia-h200/day50_decode/step17_dev.) Only a part with no positions at all has M = -inf, and
    // -inf - -inf would be NaN: its M is taken as 0 in the exponent, every weight then 0 as before.
    float* merged = wpart + kCWarps * p.wstride;
    for (int d = threadIdx.x; d < hs + 2; d += kCThreads) {
      float M = -INFINITY;
#pragma unroll
      for (int w = 0; w < kCWarps; ++w) M = fmaxf(M, wpart[w * p.wstride + hs]);
      const float Mx = M == -INFINITY ? 0.f : M;
      const int dd = min(d, hs - 1);
      float L = 0.f, o = 0.f;
#pragma unroll
      for (int w = 0; w < kCWarps; ++w) {
        const float e = __expf(wpart[w * p.wstride + hs] - Mx);
        L += e * wpart[w * p.wstride + hs + 1], o += e * wpart[w * p.wstride + dd];
      }
      merged[d] = d < hs ? o : d == hs ? M : L;
    }
    __syncthreads();
    if (item == rank) sub(kSubB);
    push_to_all(cl, attp + item * p.wstride, merged, hs + 2, p.S, got);
    __syncthreads();  // wpart and merged are rewritten by the next item
  }
}

// Merge each head's G parts into xn (the attention output), then x1 = x0 + proj(xn) + b for this block's rows.
template <class W>
__device__ void cstage_proj_merge(const Net<W>& n, const ClusterPlan& p, unsigned char* smem) {
  const int C = n.C, hs = C / n.H;
  float* xn = at_<float>(smem, p.xn);
  const float* attp = at_<float>(smem, p.attp);
  for (int i = threadIdx.x; i < C; i += kCThreads) {
    const int h = i / hs, d = i % hs;
    const float* ph = attp + h * p.G * p.wstride;  // the head's G parts
    float M = -INFINITY;
    for (int g = 0; g < p.G; ++g) M = fmaxf(M, ph[g * p.wstride + hs]);  // part 0 is never empty: M is finite
    float L = 0.f, o = 0.f;
    for (int g = 0; g < p.G; ++g) {  // an empty part's m is -inf: its weight 0 without a test (as the warps' merge)
      const float* pp = ph + g * p.wstride;
      const float e = __expf(pp[hs] - M);
      L += e * pp[hs + 1], o += e * pp[d];
    }
    xn[i] = o / L;
  }
  __syncthreads();
}
template <class W, class Sub>
__device__ void cstage_proj(const Net<W>& n, const ClusterPlan& p, cooperative_groups::cluster_group& cl,
                            const View<W>& v, unsigned char* smem, unsigned long long* got, Sub sub) {
  const int C = n.C;
  const float *xs = at_<float>(smem, p.xs), *xn = at_<float>(smem, p.xn);
  sub(kSubA);
  float* outs = v.outs;
  gemv_local<kCRowGroup - 2, false>(v.w, xn, nullptr, C, v.rows,
                                    [&](int r, float s, float2) { outs[r] = xs[v.r0 + r] + s + v.bias[r]; });
  __syncthreads();
  sub(kSubB);
  push_to_all(cl, at_<float>(smem, p.xs1) + v.r0, outs, v.rows, p.S, got);
}
// h = gelu(fc(LayerNorm 2 of x1)) for this block's rows, pushed to every block's h. release(): this block is done
// with the bundle (weight_stage: the next bundle's late part may land on it), called before the pushes.
template <class W, class Release, class Sub>
__device__ void cstage_fc(const Net<W>& n, const ClusterPlan& p, cooperative_groups::cluster_group& cl,
                          const View<W>& v, unsigned char* smem, unsigned long long* got, Release release, Sub sub) {
  float *h = at_<float>(smem, p.h), *outs = v.outs;
  gemv_local<kCRowGroup - 2, true>(v.w, at_<float>(smem, p.xs1), v.g, n.C, v.rows, [&](int r, float s, float2 st) {
    outs[r] = gelu(st.y * (s - st.x * v.sum[r]) + v.bias[r]);  // LayerNorm 2 folded in
  });
  __syncthreads();
  sub(kSubA);
  release();
  sub(kSubB);
  push_to_all(cl, h + v.r0, outs, v.rows, p.S, got);
}
// x0 = x1 + fc2(h) + b for this block's rows. release(): as cstage_fc's.
template <class W, class Release, class Sub>
__device__ void cstage_fc2(const Net<W>& n, const ClusterPlan& p, cooperative_groups::cluster_group& cl,
                           const View<W>& v, unsigned char* smem, unsigned long long* got, Release release, Sub sub) {
  const float* x1 = at_<float>(smem, p.xs1);
  float* outs = v.outs;
  gemv_local<kCRowGroup - 2, false>(v.w, at_<float>(smem, p.h), nullptr, 4 * n.C, v.rows,
                                    [&](int r, float s, float2) { outs[r] = x1[v.r0 + r] + s + v.bias[r]; });
  __syncthreads();
  sub(kSubA);
  release();
  sub(kSubB);
  push_to_all(cl, at_<float>(smem, p.xs) + v.r0, outs, v.rows, p.S, got);
}
// logits = wte . LayerNorm_f(x) for this block's rows: to every block's copy (the next token's sampling),
// and to global memory (the next launch's first sampling; logits_all for the checks).
template <class W, class Sub>
__device__ void cstage_head(const Net<W>& n, const ClusterPlan& p, cooperative_groups::cluster_group& cl,
                            const View<W>& v, int t, unsigned char* smem, unsigned long long* got, Sub sub) {
  float *logits = at_<float>(smem, p.logits), *outs = v.outs;
  gemv_local<kCRowGroup - 2, true>(v.w, at_<float>(smem, p.xs), v.g, n.C, v.rows, [&](int r, float s, float2 st) {
    s = st.y * (s - st.x * v.sum[r]) + v.bias[r];  // the final LayerNorm folded in
    outs[r] = s;
    n.logits[v.r0 + r] = s;
    if (n.logits_all) n.logits_all[size_t(t) * n.V + v.r0 + r] = s;
  });
  __syncthreads();
  sub(kSubA);
  push_to_all(cl, logits + v.r0, outs, v.rows, p.S, got);
}

// The cluster barrier alone, `iters` times (the bench's "cluster barrier alone" rows, beside the grid's).
__global__ void __launch_bounds__(kCThreads, 1) cluster_barrier_only(int iters) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  for (int i = 0; i < iters; ++i) cl.sync();
#endif
}

// One stage's bookkeeping, shared by every stage: stamps, the cluster barrier at its end. The trace's address
// waits in shared memory rather than in two registers of every thread for the whole launch: the kernel is
// at its 128 registers a thread (512 threads), and the registers it frees keep the GEMV from spilling.
// kTrace false (bf16's timed launches, n.trace null; fp32's launch the stamped build, launch_cluster
// says why): no stamp is compiled in at all. Asking at every stamp
// whether to stamp cost every warp a few instructions, and warp 0 a shared-memory round trip, four times a
// stage, in the launches that stamp nothing.
template <bool kTrace>
struct StageClock {
  unsigned long long* const* slot;  // shared memory: the trace where this block stamps, or null
  unsigned stamps, k;               // the launch's stages (the parts follow their stamps); this stage's number
  unsigned long long* const* subslot = nullptr;  // shared memory: Net::sub, or null (DECODE_SUBSTAMPS)
  int rank = 0, S = 0;
  __device__ __forceinline__ void sub(int point) const {
#ifdef DECODE_SUBSTAMPS
    if constexpr (kTrace)
      if (threadIdx.x == 0 && *subslot) {
        unsigned long long c;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
        (*subslot)[(size_t(k) * unsigned(S) + unsigned(rank)) * kSub + point] = c;
      }
#else
    (void)point;
#endif
  }
  __device__ __forceinline__ unsigned long long* trace() const {
    if constexpr (kTrace) return threadIdx.x == 0 ? *slot : nullptr;
    return nullptr;
  }
  __device__ __forceinline__ void mark(int part) const {  // 0 copy handed over, 1 weights there, 2 work done
    if (unsigned long long* t = trace()) t[1 + stamps + 3 * size_t(k) + part] = global_ns();
  }
  // Every block's pushes (and the cache rows) of this stage are visible to every block after it.
  __device__ __forceinline__ void end(cooperative_groups::cluster_group& cl) {
    mark(2);
    sub(kSubPushed);
    cl.sync();
    sub(kSubBarrier), sub(kSubLanded);
    if (unsigned long long* t = trace()) t[1 + k] = global_ns();
    ++k;
  }
  // The end of a stage whose pushes are st.async (none writes global memory another block reads later
  // in the launch): every block done, then this block's inputs landed (`got`, phase `parity`).
  __device__ __forceinline__ void end_async(unsigned long long* got, unsigned parity) {
    mark(2);
    sub(kSubPushed);
    cluster_sync_relaxed();
    sub(kSubBarrier);
    mbar_wait<true>(got, parity);
    sub(kSubLanded);
    if (unsigned long long* t = trace()) t[1 + k] = global_ns();
    ++k;
  }
};
// A stage that reads weights: bundle j of kind KIND (a template argument, so that its rows, sizes and
// offsets are the plan's fields and not a chain of branches on a run-time kind: a first version decided
// the kind at run time, and the decisions were a quarter of every warp's instructions, ncu in the notes).
// The next bundle (kind kn) streams in while this one is used (its end was last read by bundle g - 1,
// which every thread finished before the cluster barrier behind us), all of it when the two fit together;
// when they do not, the bytes that overlap this one follow once every thread is done reading it. `body(view)` is
// the stage; fc's and fc2's (the only stages whose next bundle can overlap theirs: test_cluster_plan) take
// `body(view, release)` and call release() right after the __syncthreads() that ends their GEMV, before they
// push their rows, so that the late part starts that much earlier (the others: after the body).
template <int KIND, class W, class Clock, class Body>
__device__ __forceinline__ void weight_stage(const ClusterPlan& p, int j, int kn, bool next, unsigned& g,
                                             unsigned char* smem, int rank, unsigned long long* bar, Clock& clk,
                                             Body body) {
  const int jn = KIND == 4 ? 0 : j + 1, pn = int(g + 1) & 1;
  clk.sub(kSubStart);
  if (next) issue_bundle(p, jn, kn, KIND, pn, false, smem, rank, bar + pn);
  clk.mark(0);
  clk.sub(kSubIssued);
  mbar_wait(bar + (g & 1), unsigned(g >> 1) & 1u);
  clk.mark(1);
  clk.sub(kSubWeights);
  if constexpr (KIND == 2 || KIND == 3) {
    body(view_of<W>(p, KIND, g & 1, smem, rank), [&] {
      if (next && p.overlap(kn, KIND) > 0) issue_bundle(p, jn, kn, KIND, pn, true, smem, rank, bar + pn);
    });
  } else {
    body(view_of<W>(p, KIND, g & 1, smem, rank));
    if (next && p.overlap(kn, KIND) > 0) {  // the overlapping bytes, once every thread is done with this bundle
      __syncthreads();
      issue_bundle(p, jn, kn, KIND, pn, true, smem, rank, bar + pn);
    }
  }
  ++g;
}

// Tokens at positions start .. start + steps - 1, draws count0 .. (as decode_persistent). One cluster of
// p.S blocks, the grid. 5L + 1 cluster barriers a token; with kTrace, block 0 stamps n.trace after each, as
// the persistent kernel does (FastDecoder launches kTrace true where n.trace is set, and always in fp32).
template <class W, bool kTrace = false>
__global__ void __launch_bounds__(kCThreads, 1) decode_cluster(Net<W> n, ClusterPlan p, int start, int count0,
                                                               int steps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned long long bar[2];  // one mbarrier per end of the weight area
  __shared__ unsigned long long got[2];  // the st.async stages' inputs: stage a of them waits on got[a & 1]
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  const int rank = int(cl.block_rank()), L = n.L, stages = 5 * L + 1;
  const bool stamp = kTrace && n.trace && rank == 0 && threadIdx.x == 0;
  // With the trace on, after the barrier stamps (as the persistent kernel's): for stage k of the launch,
  // when the next bundle's copy was handed over (trace[1 + steps * stages + 3k]), when this one's weights
  // were there (... + 3k + 1) and when the work was done, before the barrier (... + 3k + 2).
  __shared__ unsigned long long* trace_slot;
  if (threadIdx.x == 0) trace_slot = stamp ? n.trace : nullptr;  // published by the cl.sync() below
  StageClock<kTrace> clk{&trace_slot, unsigned(steps) * unsigned(stages), 0};
#ifdef DECODE_SUBSTAMPS
  __shared__ unsigned long long* sub_slot;
  if (threadIdx.x == 0) sub_slot = kTrace ? n.sub : nullptr;
  clk.subslot = &sub_slot, clk.rank = rank, clk.S = p.S;
#endif
  if (stamp) n.trace[0] = global_ns();
  if (threadIdx.x == 0) {
    mbar_init(bar), mbar_init(bar + 1), mbar_init(got), mbar_init(got + 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cl.sync();  // the barriers are set up, and every block of the cluster runs before any writes into another's memory
  if (!n.forced)  // the first sampling of this launch reads the logits the last launch left
    for (int i = threadIdx.x; i < n.V; i += kCThreads) at_<float>(smem, p.logits)[i] = __ldcg(n.logits + i);
  if (steps > 0) issue_bundle(p, 0, 0, -1, 0, false, smem, rank, bar);  // (none when nothing will wait for it)
  unsigned g = 0;  // bundles begun in this launch: bundle g lies at end g & 1, the (g >> 1)-th use of that end
  // Stages whose pushes are st.async: all but qkv, whose cache rows (global memory, read by the attention
  // blocks next) need the full barrier's release. Stage a of them (a token has 4L + 1, as bundles: a is g
  // at proj, fc, fc2 and the head, g - 1 at attention, after qkv's bundle): thread 0 tells got[a & 1] how
  // many bytes the stage brings this block (every block's rows of the stage's output: each block receives
  // all of it); pushes may land before that (the count goes below zero, and the phase cannot end before
  // the arrival).
  auto expect = [&](unsigned a, int floats) {
    if (threadIdx.x == 0) mbar_expect(got + (a & 1), unsigned(floats) * 4u);
  };
  auto end_async = [&](unsigned a) { clk.end_async(got + (a & 1), (a >> 1) & 1u); };
  auto sub = [&](int point) { clk.sub(point); };  // the stages' own points (DECODE_SUBSTAMPS; else nothing)
  for (int i = 0; i < steps; ++i) {
    const int t = start + i, count = count0 + i;
    for (int l = 0; l < L; ++l) {
      const int j = 4 * l;
      weight_stage<0, W>(p, j, 1, true, g, smem, rank, bar, clk, [&](const View<W>& v) {
        if (l == 0) cstage_embed(n, p, t, count, smem, rank, sub);
        cstage_qkv(n, p, cl, v, l, t, smem, sub);
      });
      clk.end(cl);
      clk.mark(0), clk.mark(1);  // attention reads no bundle: its copy and wait parts are empty
      clk.sub(kSubStart), clk.sub(kSubIssued), clk.sub(kSubWeights);
      expect(g - 1, n.H * p.G * 2 + n.C * p.G);  // H x G partials of hs + 2 numbers
      cstage_attention(n, p, cl, l, t, smem, rank, got + ((g - 1) & 1), sub);
      end_async(g - 1);
      expect(g, n.C);
      weight_stage<1, W>(p, j + 1, 2, true, g, smem, rank, bar, clk, [&](const View<W>& v) {
        cstage_proj_merge(n, p, smem);
        cstage_proj(n, p, cl, v, smem, got + (g & 1), sub);
      });
      end_async(g - 1);  // (weight_stage counted the bundle)
      expect(g, 4 * n.C);
      weight_stage<2, W>(p, j + 2, 3, true, g, smem, rank, bar, clk,
                         [&](const View<W>& v, auto rel) { cstage_fc(n, p, cl, v, smem, got + (g & 1), rel, sub); });
      end_async(g - 1);
      expect(g, n.C);
      weight_stage<3, W>(p, j + 3, l + 1 < L ? 0 : 4, true, g, smem, rank, bar, clk,
                         [&](const View<W>& v, auto rel) { cstage_fc2(n, p, cl, v, smem, got + (g & 1), rel, sub); });
      end_async(g - 1);
    }
    expect(g, n.V);
    weight_stage<4, W>(p, 4 * L, 0, i + 1 < steps, g, smem, rank, bar, clk,
                       [&](const View<W>& v) { cstage_head(n, p, cl, v, t, smem, got + (g & 1), sub); });
    end_async(g - 1);
  }
  cl.sync();  // no block leaves while another may still read or write its shared memory
#endif
}

}  // namespace dec
}  // namespace k
