// day50_gpt/nn/kernels/decode_heads.cuh: the whole generation on H thread-block clusters of 16 blocks, one
// cluster a head (sm_90): decode_cluster.cuh's stages, split so that 6 clusters share each token's work and
// meet through L2 only twice a layer.
//
// Why. The one-cluster decoder reads every weight through the 16 SMs of one cluster, and what those SMs get
// from L2 bounds it: fp32's 43 MB at the copy engine's rate into one cluster (dev/stage_floor.cu's "copy"
// rows) take most of the time a token may take for 3x the compiled PyTorch decoder. More SMs get more of L2,
// but every stage of that decoder ends with each block needing every other block's rows: across clusters
// that exchange goes through L2 at every stage. Split by head instead, and most of a layer stays inside a
// cluster:
//   - qkv: cluster c computes head c's q, k and v (its 3 hs rows, LayerNorm 1 folded in as in
//     decode_cluster.cuh); q goes to every block of the cluster, row t of k and v to the block that keeps
//     position t (below);
//   - attention: the cluster's KV cache lives in its blocks' shared memory (position s in block s % 16),
//     written there by qkv's st.async and never read from L2 (only a new launch loads the positions
//     before it from global memory, where qkv also writes them); each block scores its positions and sends
//     its (o, m, l) to every block, which merges the 16 into the head's output y;
//   - proj: the projection is linear in y, so cluster c multiplies its head's hs columns of W_proj by y:
//     a partial sum of all C outputs, each block 1/16 of them. The H partial sums MEET through L2 (the
//     first of two meetings a layer), and every block of every cluster adds them, in the same order, to the
//     residual stream: every block holds the same x1, bit for bit;
//   - fc: cluster c computes its F = 4C / H hidden units (LayerNorm 2 folded), sent to every block of the
//     cluster; fc2 is then again a partial sum over those F columns, the second meeting;
//   - head: every cluster computes all V logits itself (same inputs, same order: the same bits) and samples
//     the same byte from the same draw, so no meeting is needed to agree on the token.
// The meeting carries a tag in every word (dev/stage_floor.cu's "flagged words"): each value is written
// with the meeting's number in the high half of one 8-byte word, and a reader reloads a word until it
// carries the number it waits for. No counter, no fence: a value and its tag arrive together. Two buffers
// by parity: a block writes meeting m + 2's words only after it read meeting m + 1's, which every block
// wrote after reading meeting m's.
// The weights stream through a ring of kHRing slots, kHRing - 1 bundles ahead of the one in use: a
// block's share of a layer is ~77 KB in fp32 (1/96 of it), so the copies run well ahead of the stages.
// Development switches (-D..., each measured against the plain build in the bench's generation part,
// results/nvidia-h200/day50_decode/step20_dev/; the plain build is what every results file times). Three of
// them put back what the first version of this kernel did (HEADS_MEET_ALL, HEADS_ISSUE_LATE, HEADS_ISSUER=0):
//   HEADS_RING=N        the ring's depth (heads_plan.h; 4 by default, 5 ran slower)
//   HEADS_MEET_ALL      the meeting as meet_sum: every block reads all H C words of a meeting and adds them
//                       itself, no send within the cluster after it (the plain build: meet_own, each block
//                       reads the H words of its own rows and sends their sums)
//   HEADS_POLL_ALL      with it, every thread polls its H words from the start (slower)
//   HEADS_POLL_SLEEP=NS with that, NS nanoseconds slept between two polls of a word
//   HEADS_ISSUE_LATE    a slot's next bundle handed over at the start of the stage after the one that read it,
//                       kHRing - 1 bundles in flight (the plain build: right behind the barrier after the GEMV
//                       that read it, kHRing in flight)
//   HEADS_PUSH_WARPS    the stages' sends by push_to_all (decode_cluster.cuh: a warp a receiving block, 32
//                       numbers a store instruction), not heads_push (a thread a number): slower here
//   HEADS_ISSUER=T      the thread that hands the copies over (480 by default: warp 15's first lane, a warp with
//                       no rows in qkv; the first version's thread 0 is in a warp that has one)
//   HEADS_CLUSTER_BARRIER every stage ends with a relaxed cluster barrier before the wait for its inputs, as steps
//                       11 and 12 did (the plain build: the barrier only where HeadsPlan::chained is false; see
//                       end_push in the kernel for why the stages' own mbarriers suffice)
//   HEADS_END_SYNC      a __syncthreads() at every stage's end before the wait for its inputs, as steps 11 and 12
//                       had (the plain build has none: a stage's staging is next written stages later, behind
//                       other __syncthreads(), and every send already follows one after the stage's reads)
#pragma once
#include <cooperative_groups.h>

#include "../heads_plan.h"
#include "decode_cluster.cuh"  // gemv_local, st_async, cluster_addr, cluster_sync_relaxed

namespace k {
namespace dec {

// What a launch needs beyond Net: the meeting buffers ([2][H][C] tagged words), the flag a wait that gives
// up sets, and the tag of the launch's first meeting (each launch's tags follow the last one's).
struct Meet {
  unsigned long long* words;
  unsigned* gave_up;
  unsigned tag0;
};
// The mbarriers that count the bytes each stage's sends bring a block (end_push in the kernel says why three).
constexpr int kHGot = 3;
// One tagged word: the tag in the high half, the float's bits in the low one.
__device__ __forceinline__ void meet_put(unsigned long long* w, unsigned tag, float v) {
  const unsigned long long word = (static_cast<unsigned long long>(tag) << 32) | __float_as_uint(v);
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(w), "l"(word) : "memory");
}
__device__ __forceinline__ unsigned long long meet_get(const unsigned long long* w) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(w) : "memory");
  return v;
}
// How many polls of tagged words a thread may make in one launch, all its waits together, before it gives up:
// far beyond any healthy launch (a wait takes a few polls: the bench's meetings are ~1.3 us each), and counted
// rather than timed so that a run slowed down by a sanitizer does not give up early. Once spent, every later
// wait of the launch gives up at its first miss, so a launch whose meetings can never complete (a cluster
// that was never placed) ends after one budget, not one per wait.
constexpr unsigned kHPolls = 1u << 25;
// Gives up a wait: the flag the host reads (the run then fails) and the budget spent.
__device__ __forceinline__ bool give_up(const Meet& m, unsigned& polls) {
  if (polls > 0 && --polls > 0) return false;
  atomicExch(m.gave_up, 1u);
  return true;
}
// s plus the K clusters' words at at[c * C] (c = 0 .. K - 1), in cluster order, each reloaded until it carries
// `tag` (up to 8 loads in flight a thread). The one sum meet_sum and meet_own both make, to the bit.
__device__ __forceinline__ float add_tagged(const HeadsPlan& p, const Meet& m, const unsigned long long* at, unsigned tag,
                                            float s, unsigned& polls) {
  for (int c0 = 0; c0 < p.K; c0 += 8) {
    unsigned long long w[8];
    const int n = min(8, p.K - c0);
#pragma unroll
    for (int c = 0; c < 8; ++c)
      if (c < n) w[c] = meet_get(at + size_t(c0 + c) * p.C);
    for (int c = 0; c < n; ++c) {
      while (unsigned(w[c] >> 32) != tag) {
#ifdef HEADS_POLL_SLEEP
        __nanosleep(HEADS_POLL_SLEEP);
#endif
        if (give_up(m, polls)) break;
        w[c] = meet_get(at + size_t(c0 + c) * p.C);
      }
      s += __uint_as_float(unsigned(w[c]));
    }
  }
  return s;
}
// Thread i < C: out[i] = base[i] + the H clusters' words for output i, added in cluster order (the same
// sum in every block). First every writer block's first word is polled, one thread a writer (K S of them),
// until it carries the tag; then each thread loads its H words at once and reloads any still without it. (The
// first version, HEADS_POLL_ALL, had every thread poll its H words from the start: 384 threads a block in each
// of 96 blocks reloading from L2 as fast as the answers came back. It generated fewer tokens a second, and
// in the bench's breakdown most of the difference was the wait for weights at each stage's start, as if the
// polls held up the blocks' weight copies: step20_dev/call2 against call4.)
// R: the rows a writer block owns (its first word is row b R of cluster c's vector).
__device__ __forceinline__ void meet_sum(const HeadsPlan& p, const Meet& m, unsigned tag, int R, const float* base,
                                         float* out, unsigned& polls) {
  const unsigned long long* words = m.words + size_t(tag & 1u) * p.K * p.C;
#ifndef HEADS_POLL_ALL
  for (int w = threadIdx.x; w < p.K * p.S; w += kCThreads) {
    const int c = w / p.S, b = w - c * p.S;
    if (b * R >= p.C) continue;  // a block with no rows writes nothing
    const unsigned long long* at = words + size_t(c) * p.C + size_t(b) * R;
    while (unsigned(meet_get(at) >> 32) != tag)
      if (give_up(m, polls)) break;
  }
  __syncthreads();
#endif
  for (int i = threadIdx.x; i < p.C; i += kCThreads) out[i] = add_tagged(p, m, words + i, tag, base[i], polls);
  __syncthreads();
}

// The meeting by rows (the plain build; HEADS_MEET_ALL: meet_sum): thread r < rows adds base[r0 + r] and the H clusters' words for
// output r0 + r, in cluster order (the sum meet_sum makes, to the bit), into stage[r]; the caller sends
// stage to every block of the cluster. Block b of every cluster wrote rows [b R, b R + R) of its cluster's
// partial sum, and block b of every cluster reads those same rows of all H: a block reads H R words (144
// on the bench's model) where meet_sum reads H C (2,304), and a reader's polls are its loads. The price: a
// send through distributed shared memory after the wait.
__device__ __forceinline__ void meet_own(const HeadsPlan& p, const Meet& m, unsigned tag, int r0, int rows,
                                         const float* base, float* stage, unsigned& polls) {
  const unsigned long long* words = m.words + size_t(tag & 1u) * p.K * p.C + r0;
  for (int r = threadIdx.x; r < rows; r += kCThreads) stage[r] = add_tagged(p, m, words + r, tag, base[r0 + r], polls);
  __syncthreads();
}

// Block `rank` of cluster `c`: bundle g of the launch (bundle g % J of a token) into ring slot g % kHRing.
#ifndef HEADS_ISSUER
#define HEADS_ISSUER 480
#endif
__device__ __forceinline__ void heads_issue(const HeadsPlan& p, unsigned g, int J, int c, int rank,
                                            unsigned char* smem, unsigned long long* bar) {
  if (threadIdx.x != HEADS_ISSUER) return;
  const int j = int(g % unsigned(J)), kind = HeadsPlan::kind_of(j, p.L), s = int(g % kHRing);
  mbar_expect(bar + s, unsigned(p.bytes(kind)));
  bulk_copy(smem + p.ring + size_t(s) * p.slot, p.pack + ((size_t(j) * p.K + c) * p.S + rank) * p.stride,
            unsigned(p.bytes(kind)), bar + s);
}
// The bundle in slot g % kHRing as this block sees it (decode_cluster.cuh's View).
template <class W>
__device__ __forceinline__ View<W> heads_view(const HeadsPlan& p, int kind, unsigned g, unsigned char* smem,
                                              int rank) {
  View<W> v;
  v.I = p.I(kind);
  v.r0 = rank * p.R(kind);
  v.rows = max(0, min(p.R(kind), p.O(kind) - v.r0));
  unsigned char* w = smem + p.ring + size_t(g % kHRing) * p.slot;
  unsigned char* at = w + p.w_bytes(kind);
  v.w = reinterpret_cast<W*>(w);
  v.g = p.ln(kind) ? reinterpret_cast<float*>(at) : nullptr;
  v.sum = p.ln(kind) ? reinterpret_cast<float*>(at + p.gain_bytes()) : nullptr;
  v.bias = reinterpret_cast<float*>(at + (p.ln(kind) ? p.gain_bytes() + p.row_bytes(kind) : 0));
  v.outs = nullptr;
  return v;
}
// src[0, n) to dst[0, n) in every block of the cluster by st.async, each counting its bytes off the
// receiver's mbarrier `got`.
__device__ __forceinline__ void heads_push(float* dst, const float* src, int n, int S, unsigned long long* got) {
  for (int e = threadIdx.x; e < n * S; e += kCThreads) {
    const int b = e / n, i = e - b * n;
    st_async(cluster_addr(dst + i, unsigned(b)), src[i], cluster_addr(got, unsigned(b)));
  }
}

// Tokens at positions start .. start + steps - 1, draws count0 .. (as decode_cluster). H clusters of S blocks.
// kTrace (the bench's breakdown, never its timed runs): two blocks, cluster 0's first and the last cluster's
// last, stamp the global timer at three points of every stage (weights there, work done, stage over) into
// n.trace: block 0's at [1 + 3 k + point] for stage k of the launch, the other's after those (3 (5L + 1) steps
// further), trace[0] the launch's start.
template <class W, bool kTrace = false>
__global__ void __launch_bounds__(kCThreads, 1)
    decode_heads(Net<W> n, HeadsPlan p, Meet m, int start, int count0, int steps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned long long bar[kHRing];  // one mbarrier a ring slot
  __shared__ unsigned long long got[kHGot];   // the pushed stages' inputs: stage a's on got[a % kHGot] (end_push)
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  const int rank = int(cl.block_rank()), c = int(blockIdx.x) / p.S, L = n.L, C = n.C, hs = p.hs, S = p.S;
  const int J = 4 * L + 1, tid = threadIdx.x, warp = tid / kWarp, lane = tid % kWarp;
  const unsigned total = unsigned(steps) * unsigned(J);
  unsigned long long* tr = nullptr;
  if constexpr (kTrace)
    if (n.trace && tid == 0 && ((c == 0 && rank == 0) || (c == p.K - 1 && rank == S - 1)))
      tr = n.trace + (c == 0 && rank == 0 ? 0 : 3 * size_t(total / unsigned(J)) * (5 * L + 1));
  unsigned stamp_k = 0;
  auto stamp = [&](int point) {
    if constexpr (kTrace)
      if (tr) tr[1 + 3 * size_t(stamp_k) + point] = global_ns();
    if (point == 2) ++stamp_k;
  };
  if constexpr (kTrace)
    if (tr == n.trace && tr) tr[0] = global_ns();
  float *x = at_<float>(smem, p.x), *x1 = at_<float>(smem, p.x1), *y = at_<float>(smem, p.y);
  float *logits = at_<float>(smem, p.logits), *sc = at_<float>(smem, p.sc);
  if (tid == 0) {
    for (int s = 0; s < kHRing; ++s) mbar_init(bar + s);
    for (int s = 0; s < kHGot; ++s) mbar_init(got + s);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // This block's cached positions before `start` (an earlier launch's), every layer, from global memory.
  for (int l = 0; l < L; ++l)
    for (int s = rank; s < start; s += S) {
      float* kv = at_<float>(smem, p.kv_at(l, s / S));
      const size_t row = (size_t(l) * n.T + s) * C + size_t(c) * hs;
      for (int i = tid; i < 2 * hs; i += kCThreads) kv[i] = i < hs ? __ldcg(n.kc + row + i) : __ldcg(n.vc + row + i - hs);
    }
  if (!n.forced)  // the first sampling of this launch reads the logits the last launch left
    for (int i = tid; i < n.V; i += kCThreads) logits[i] = __ldcg(n.logits + i);
  cl.sync();  // the barriers are set up, and every block of the cluster runs before any writes into another's memory
#ifndef HEADS_ISSUE_LATE
  constexpr unsigned kAhead = kHRing;  // bundles handed over before the first stage
#else
  constexpr unsigned kAhead = kHRing - 1;
#endif
  for (unsigned g = 0; g < min(total, kAhead); ++g) heads_issue(p, g, J, c, rank, smem, bar);
  unsigned g = 0, meet = 0;      // bundles begun; meetings
  unsigned a = 0, a_phase = 0;  // the got barrier of the stage in progress (a < kHGot) and its phase's parity
  unsigned polls = kHPolls;     // what is left of this thread's polls of tagged words (kHPolls)
#if defined(HEADS_CLUSTER_BARRIER) || defined(HEADS_MEET_ALL)
  const bool fence = true;  // (meet_sum sends nothing after proj and fc2: those stages order no one)
#else
  const bool fence = !p.chained;
#endif
  // Bundle g's weights: the copy of bundle g + kHRing - 1 handed over first (its slot was last read by
  // bundle g - 1's stage, which every thread of this block finished before the barrier behind us), unless
  // release() handed it over already.
  auto weights = [&](int kind) {
#ifdef HEADS_ISSUE_LATE
    if (g + kHRing - 1 < total) heads_issue(p, g + kHRing - 1, J, c, rank, smem, bar);
#endif
    mbar_wait(bar + g % kHRing, (g / kHRing) & 1u);
    stamp(0);
    const View<W> v = heads_view<W>(p, kind, g, smem, rank);
    ++g;
    return v;
  };
  // Unless HEADS_ISSUE_LATE: called behind a __syncthreads() that follows the GEMV of bundle g - 1 (every thread has
  // read its slot), it hands that slot bundle g - 1 + kHRing.
  auto release = [&] {
#ifndef HEADS_ISSUE_LATE
    if (g - 1 + kHRing < total) heads_issue(p, g - 1 + kHRing, J, c, rank, smem, bar);
#endif
  };
  // src[0, count) to dst[0, count) in every block of the cluster, counted off got[a].
  auto push = [&](float* dst, const float* src, int count) {
#ifdef HEADS_PUSH_WARPS
    push_to_all(cl, dst, src, count, S, got + a);
#else
    heads_push(dst, src, count, S, got + a);
#endif
  };
  auto expect = [&](int floats) {
    if (tid == 0) mbar_expect(got + a, unsigned(floats) * 4u);
  };
  // The stage's end: this block's inputs for the next stage have landed. Without the cluster barrier (fence
  // false) a block waits for nothing beyond those inputs, and the stages' own mbarriers keep the blocks close
  // enough. Write "b is past stage k" for "b's wait for stage k's inputs has completed". A block sends stage
  // k's data only once it is past k - 1, that is once every block that sends it something in k - 1 has sent,
  // each having finished its own work of stage k - 1 first. proj, fc, fc2 and the head send from every block
  // to every block (HeadsPlan::chained), and attention always does: after those, when s sends b stage k's
  // data, b has done all its work of stage k - 1 and is past k - 2. qkv sends q only from the first blocks
  // (and k and v to one block): after it (k is attention), a q block that sent s its q was past k - 2 when
  // it sent, so b had sent that block its k - 2 data (fc2's or the head's, from every block) and was past
  // k - 3. Hence three got barriers, stage k's on got[k % 3]: the bytes s sends for stage k count toward b's
  // phase for stage k, whose previous phase on that barrier (stage k - 3's) b has finished. (With two, they
  // could land in stage k - 2's phase: b may still wait for its fc2 inputs when a q block's attention part
  // arrives.) Nor is a vector rewritten while b may still read what it held: x1 is read in fc and fc2's
  // meeting and rewritten by the next layer's proj, after attention; x is read in qkv, proj's meeting and
  // the head and rewritten by fc2, after fc; q, the attention parts and the hidden units have a copy per
  // layer parity; the logits are a token apart. A reader's earlier reads and writes are ordered before those
  // later remote writes by the same chain: each st.async's complete-tx is a release at cluster scope (after a
  // __syncthreads(): every thread's), each wait below an acquire.
  // No __syncthreads() here (HEADS_END_SYNC puts one back): every stage's sends follow one that ends its reads,
  // and each staging vector is next written stages later, behind others. A thread may pass the wait while
  // another of its block still sends; the got barrier cannot move on without that thread, since its next
  // phase on the same barrier needs thread 0 three stages on, past __syncthreads() every thread must reach.
  auto end_push = [&] {  // this block's inputs for the next stage landed
#ifdef HEADS_END_SYNC
    __syncthreads();
#endif
    if (fence) cluster_sync_relaxed();
    mbar_wait<true>(got + a, a_phase);
    if (++a == kHGot) a = 0, a_phase ^= 1u;
    stamp(2);
  };
  // proj and fc2: this cluster's partial sum of all C outputs (its I columns of the matrix times `in`), the
  // meeting through L2, then base plus the H partial sums into out in every block. R: the rows a block writes
  // (meet_sum's).
  auto partial_meet = [&](const View<W>& v, const float* in, int I, const float* base, float* out, int R) {
    const unsigned tag = m.tag0 + meet++;
    unsigned long long* words = m.words + (size_t(tag & 1u) * p.K + c) * C;
#ifndef HEADS_MEET_ALL
    expect(C);
#endif
    gemv_local<kCRowGroup - 2, false>(v.w, in, nullptr, I, v.rows,
                                      [&](int r, float s, float2) { meet_put(words + v.r0 + r, tag, s + v.bias[r]); });
#ifndef HEADS_ISSUE_LATE
    __syncthreads();
    release();
#endif
    stamp(1);
#ifndef HEADS_MEET_ALL
    meet_own(p, m, tag, v.r0, v.rows, base, at_<float>(smem, p.om), polls);
    push(out + v.r0, at_<float>(smem, p.om), v.rows);
    end_push();
#else
    meet_sum(p, m, tag, R, base, out, polls);
    stamp(2);
#endif
  };
  const float scale = rsqrtf(float(hs));
  for (int i = 0; i < steps; ++i) {
    const int t = start + i, count = count0 + i, owner = t % S;
    for (int l = 0; l < L; ++l) {
      float *q = at_<float>(smem, p.q) + (l & 1) * hs, *attp = at_<float>(smem, p.attp) + (l & 1) * S * p.wst;
      float* hb = at_<float>(smem, p.hb) + (l & 1) * p.F;
      // ---- qkv: the head's q, k, v rows of LayerNorm 1's output (folded in)
      {
        const View<W> v = weights(0);
        if (l == 0) {  // the token at position t, embedded
          // the position's row asked for before the sampling, which does not need it: its trip to L2 overlaps
          const float pe = tid < C ? __ldg(n.wpe + size_t(t) * C + tid) : 0.f;
          int tok;
          if (n.forced) {
            tok = n.forced[t];
          } else {
            tok = sample_block<true>(logits, n.V, n.temperature, n.top_k, n.u[count], smem + p.samp);
            if (c == 0 && rank == 0 && tid == 0) n.out[count] = tok;
          }
          const W* e = n.head_w() + size_t(tok) * C;
          for (int k = tid; k < C; k += kCThreads) x[k] = ld(e[k]) + (k == tid ? pe : n.wpe[size_t(t) * C + k]);
          __syncthreads();
        }
        expect(hs + (rank == owner ? 2 * hs : 0));
        float* oq = at_<float>(smem, p.oq);
        const size_t row = (size_t(l) * n.T + t) * C + size_t(c) * hs;
        gemv_local<kCRowGroup - 2, true>(v.w, x, v.g, C, v.rows, [&](int r, float s, float2 st) {
          s = st.y * (s - st.x * v.sum[r]) + v.bias[r];
          oq[r] = s;
          const int o = v.r0 + r;
          if (o >= hs) (o < 2 * hs ? n.kc : n.vc)[row + (o < 2 * hs ? o - hs : o - 2 * hs)] = s;  // later launches'
        });
        __syncthreads();
        release();
        stamp(1);
        float* kvt = at_<float>(smem, p.kv_at(l, t / S));
        for (int e = tid; e < v.rows * S; e += kCThreads) {
          const int r = e / S, b = e - r * S, o = v.r0 + r;
          if (o < hs)
            st_async(cluster_addr(q + o, unsigned(b)), oq[r], cluster_addr(got + a, unsigned(b)));
          else if (b == owner)
            st_async(cluster_addr(kvt + (o - hs), unsigned(b)), oq[r], cluster_addr(got + a, unsigned(b)));
        }
        end_push();
      }
      // ---- attention: this block's positions s = rank, rank + S, ... <= t; (o, m, l) to every block
      {
        stamp(0);
        expect(S * (hs + 2));
        const int nb = rank <= t ? (t - rank) / S + 1 : 0;
        for (int w = warp; w < nb; w += kCWarps) {
          const float* kr = at_<float>(smem, p.kv_at(l, w));
          float d = 0.f;
          for (int k = lane; k < hs; k += kWarp) d = fmaf(q[k], kr[k], d);
          d = warp_sum(d);
          if (lane == 0) sc[w] = d * scale;
        }
        __syncthreads();
        float* oa = at_<float>(smem, p.oa);
        for (int d = tid; d < hs + 2; d += kCThreads) {
          float M = -INFINITY;
          for (int w = 0; w < nb; ++w) M = fmaxf(M, sc[w]);
          float Lsum = 0.f, o = 0.f;
          for (int w = 0; w < nb; ++w) {
            const float e = __expf(sc[w] - M);
            Lsum += e;
            if (d < hs) o = fmaf(e, at_<float>(smem, p.kv_at(l, w))[hs + d], o);
          }
          oa[d] = d < hs ? o : d == hs ? M : Lsum;  // no positions: o = 0, m = -inf, l = 0
        }
        __syncthreads();
        stamp(1);
        push(attp + rank * p.wst, oa, hs + 2);
        end_push();
      }
      // ---- proj: merge the S parts into y; this cluster's partial sum of proj(y); the first meeting
      {
        const View<W> v = weights(1);
        for (int d = tid; d < hs; d += kCThreads) {
          float M = -INFINITY;
          for (int b = 0; b < S; ++b) M = fmaxf(M, attp[b * p.wst + hs]);  // block 0 holds position 0: finite
          float Lsum = 0.f, o = 0.f;
          for (int b = 0; b < S; ++b) {  // an empty part's m is -inf: its weight 0
            const float e = __expf(attp[b * p.wst + hs] - M);
            Lsum += e * attp[b * p.wst + hs + 1], o += e * attp[b * p.wst + d];
          }
          y[d] = o / Lsum;
        }
        __syncthreads();
        partial_meet(v, y, hs, x, x1, p.Rp);
      }
      // ---- fc: the cluster's F hidden units of LayerNorm 2's output (folded in), to every block
      {
        const View<W> v = weights(2);
        expect(p.F);
        float* of = at_<float>(smem, p.of);
        gemv_local<kCRowGroup - 2, true>(v.w, x1, v.g, C, v.rows, [&](int r, float s, float2 st) {
          of[r] = gelu(st.y * (s - st.x * v.sum[r]) + v.bias[r]);
        });
        __syncthreads();
        release();
        stamp(1);
        push(hb + v.r0, of, v.rows);
        end_push();
      }
      // ---- fc2: this cluster's partial sum over its F columns; the second meeting
      {
        partial_meet(weights(3), hb, p.F, x1, x, p.R2);
      }
    }
    // ---- head: all V logits in every cluster (the final LayerNorm folded in), to every block of the cluster
    {
      const View<W> v = weights(4);
      expect(n.V);
      float* oh = at_<float>(smem, p.oh);
      gemv_local<kCRowGroup - 2, true>(v.w, x, v.g, C, v.rows, [&](int r, float s, float2 st) {
        s = st.y * (s - st.x * v.sum[r]) + v.bias[r];
        oh[r] = s;
        if (c == 0) {
          n.logits[v.r0 + r] = s;
          if (n.logits_all) n.logits_all[size_t(t) * n.V + v.r0 + r] = s;
        }
      });
      __syncthreads();
      release();
      stamp(1);
      push(logits + v.r0, oh, v.rows);
      end_push();
    }
  }
  cl.sync();  // no block leaves while another may still write into its shared memory
#endif
}

}  // namespace dec
}  // namespace k
