// day50_gpt/dev/stage_floor.cu: what one stage of the cluster decoder (nn/kernels/decode_cluster.cuh) costs
// at the least, piece by piece, with nothing else around it.
//
// Why it is here. In the decoder's stamped runs a stage's "work" barely moves with its size: bf16 proj (24
// rows of 384 a block) and fc (96 rows) take about the same, and so does proj with 8 SMs (48 rows). So most
// of a stage is a fixed cost, and the question is which part of it the hardware sets (the cluster barrier,
// the pushes to 16 blocks, the GEMV's reductions) and which part the decoder adds around them. This program
// runs, on one cluster of 16 blocks of 512 threads as the decoder's, a loop of one stage at a time, using
// the decoder's own pieces (gemv_local, push_to_all, st.async, the relaxed cluster barrier, mbarriers):
//   barrier      the relaxed cluster barrier alone (barrier.cluster.arrive.relaxed + wait)
//   sync         cooperative_groups' cluster.sync() alone (arrive with release, wait with acquire)
//   push         each block sends R numbers to all 16 blocks (st.async), relaxed barrier, waits for its own
//                16 x R numbers on its mbarrier: a stage's exchange without its GEMV
//   gemv         the GEMV of a block's R rows x I inputs from shared memory, a __syncthreads() after it: no
//                exchange
//   stage        gemv, then push: a whole stage with its weights already on chip (a bare epilogue: no bias,
//                GELU or cache rows)
//   stage+copy   stage, plus thread 0 handing the copy engine (the TMA) one more bundle of the stage's own
//                size (cp.async.bulk of the block's R x I weights from global memory into the other half of a
//                two-part area) and waiting for it before the next GEMV (only where two such bundles fit)
//   gemv / stage unrolled   the same with the GEMV's loop unrolled (gemv_local's kI: I known when compiling)
// for the shapes of the model's stages (C = 384, 16 blocks): qkv 72 x 384, proj 24 x 384, fc 96 x 384,
// fc2 24 x 1536, head 16 x 384, in fp32 and bf16 weights; qkv, fc and the head with the LayerNorm's
// statistics folded in, as the decoder does (kStats). Beside them:
//   copy         the copy engine alone: each of 1 block .. one on every SM copies 147,456 bytes (fc's fp32 bundle) or
//                36,864 (proj's) from L2 into its shared memory, in 1 to 8 pieces, as one cluster or as blocks
//                the GPU places where it likes: the rate one SM's weight stream gets, and whether the SMs of
//                one cluster share it
//   sample       sample_block (decode_stages.cuh) alone on one block, by the ranks and by the sort
// and, for a decoder spread over several clusters (several GPCs, each with its own way to L2):
//   meet         K clusters of 16 blocks (K = 1, 2, 4, 6, 8, as many as fit at once), one stage's exchange through
//                L2 at a time: every block writes its share of an N-float vector (N = 384 or 1536) to global
//                memory, its cluster meets (cluster.sync()), the cluster's first thread adds 1 to a counter with a
//                release at GPU scope and spins on it (acquire at GPU scope) until all K clusters have arrived,
//                the cluster meets again, and every block reads the whole vector back from L2 into its shared
//                memory: what each stage of such a decoder would pay on top of its work, where one cluster
//                pays a push (above). "block arrivals": every block adds itself (16 K arrivals a stage, no
//                cluster barrier), as the persistent kernel's counting barrier does. "flagged words": no counter, no
//                fence, no barrier; every element goes out with the stage's tag in one 8-byte word, and readers poll
//                the words themselves (meet_flagged). K = 6: a cluster for each of the model's 6 heads.
//   gemv x/4, x/h  the GEMVs of a decoder split as today's over four clusters (a 64th of each stage's rows a
//                block), and of one with a cluster for each head (Runner::shapes_split)
//   attention    the decoder's own attention stage and the merge of its parts (attn_floor), 6 heads as today's
//                and one head over a whole cluster, with each phase's clocks from one more, stamped launch
//   copy by K clusters   every block of K clusters of 16 copies fc's fp32 bundle at once: the weight stream K
//                GPCs get together, against one cluster's
// Time: a launch of N iterations and one of 2N (copies: N/4 and N/2), each the median of 7 launches
// (common/timing.cuh); one iteration is their difference over the iterations (the launch and the set-up
// cancel). Checks, after the timed launches: every GEMV's rows against a CPU sum in double (fp32 tolerances),
// every push's received numbers, every barrier's count, every copy's words (their sum, exactly), every
// pick (the same arithmetic on the CPU, exactly), every element every block read at every meeting (its value
// encodes the stage and the index: a stale read counts; a flagged word is taken only with its stage's tag, so
// there a stale or missing word shows as a wait that timed out, its own check), the meetings' counter, and
// every block's attention output against the CPU in double, for the timed launches and the stamped one.
//
//   ./build/stage_floor [--iters N] [--json PATH]
// Exit 0 pass, 1 a check failed, 2 bad arguments, 77 no GPU (or one that cannot run a cluster of 16).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../gpt_ref.h"
#include "../nn/kernels/decode_cluster.cuh"
#include "check.cuh"
#include "cli.h"
#include "env.cuh"
#include "results.h"
#include "timing.cuh"

namespace {

constexpr int kS = 16;  // blocks in the cluster: the decoder's
enum Mode { kBarrier, kSync, kPush, kGemv, kStage, kStageCopy, kGemvUnrolled, kStageUnrolled };
const char* mode_name(int m) {
  static const char* n[] = {"barrier", "sync",       "push",          "gemv",
                            "stage",   "stage+copy", "gemv unrolled", "stage unrolled"};
  return n[m];
}

// Dynamic shared memory of one block: [weights, part A | weights, part B (kStageCopy)] x I floats | g I floats |
// outs 2 x R | dst S x R.
struct Layout {
  unsigned wa = 0, wb = 0, x = 0, g = 0, outs = 0, dst = 0, total = 0;
};
Layout layout(int R, int I, int wsize, bool two) {
  Layout l;
  unsigned at = 0;
  auto take = [&](size_t bytes) {
    const unsigned here = at;
    at += unsigned(k::dec::pad16(bytes));
    return here;
  };
  const size_t wb = size_t(R) * I * wsize;
  l.wa = take(wb);
  l.wb = two ? take(wb) : l.wa;
  l.x = take(size_t(I) * 4), l.g = take(size_t(I) * 4), l.outs = take(size_t(2) * R * 4),
  l.dst = take(size_t(kS) * R * 4);
  l.total = at;
  return l;
}

// push's numbers: iteration a's for row i of O, exact in float (< 2^21 for O <= 2048).
__host__ __device__ inline float push_code(int a, int i, int O) { return float((a & 1023) * O + i); }

// One launch: `iters` stages of mode M. w: the matrix (O = S x R rows of I), block b's rows [b R, b R + R).
// out: [S][S x R] what each block received (push, stage), or [S][R] its own rows (gemv). push sends each
// iteration's own numbers (push_code), and with `stale` set (an untimed launch) every block checks after every wait
// that all it holds is this iteration's or, pushed early by a block already past the barrier, the next one's:
// counted into *stale. (The GEMV stages send the same numbers every iteration: their check is the last one's.)
template <class W, int M, bool kStats, int kI = 0>
__global__ void __launch_bounds__(k::dec::kCThreads, 1)
    stage_floor(const W* w, const float* xg, const float* gg, int R, int I, Layout lay, int iters, float* out,
                unsigned* stale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using namespace k::dec;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned long long got[2], wbar[2];
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  const int rank = int(cl.block_rank()), tid = threadIdx.x;
  const size_t wbytes = size_t(R) * I * sizeof(W);
  W* wa = reinterpret_cast<W*>(smem + lay.wa);
  float *x = reinterpret_cast<float*>(smem + lay.x), *g = reinterpret_cast<float*>(smem + lay.g),
        *dst = reinterpret_cast<float*>(smem + lay.dst);
  const W* mine = w + size_t(rank) * R * I;
  if constexpr (M == kStageCopy) {  // both parts poisoned: the copy engine fills them (a GEMV on a part not landed: NaN)
    W* wb = reinterpret_cast<W*>(smem + lay.wb);
    for (size_t i = tid; i < size_t(R) * I; i += kCThreads) wa[i] = W(NAN), wb[i] = W(NAN);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // these generic writes before the async ones
  } else {
    for (size_t i = tid; i < size_t(R) * I; i += kCThreads) wa[i] = mine[i];
  }
  for (int i = tid; i < I; i += kCThreads) x[i] = xg[i], g[i] = gg[i];
  for (int i = tid; i < kS * R; i += kCThreads) dst[i] = NAN;  // poisoned: what is checked was received
  for (int i = tid; i < 2 * R; i += kCThreads) reinterpret_cast<float*>(smem + lay.outs)[i] = NAN;  // and written
  int passed = 0;  // barrier modes: the iterations this block went through, every one ending on a barrier
  if (tid == 0) {
    k::mbar_init(got), k::mbar_init(got + 1), k::mbar_init(wbar), k::mbar_init(wbar + 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  cl.sync();
  if (M == kStageCopy && tid == 0) {  // iteration 0's weights: part A
    k::mbar_expect(wbar, unsigned(wbytes));
    k::bulk_copy(wa, mine, unsigned(wbytes), wbar);
  }
  for (int a = 0; a < iters; ++a) {
    float* outs = reinterpret_cast<float*>(smem + lay.outs) + (a & 1) * R;  // two: a relaxed barrier orders no reads
    const bool exchange = M == kPush || M == kStage || M == kStageCopy || M == kStageUnrolled;
    if (exchange && tid == 0) k::mbar_expect(got + (a & 1), unsigned(kS * R) * 4u);
    const W* wl = wa;
    if constexpr (M == kStageCopy) {
      const int part = a & 1;
      // The next iteration's weights into the other part (read last by iteration a - 1, done before the
      // barrier behind us), then this iteration's wait.
      if (tid == 0 && a + 1 < iters) {
        W* nxt = reinterpret_cast<W*>(smem + (part ? lay.wa : lay.wb));
        k::mbar_expect(wbar + (part ^ 1), unsigned(wbytes));
        k::bulk_copy(nxt, mine, unsigned(wbytes), wbar + (part ^ 1));
      }
      k::mbar_wait(wbar + part, unsigned(a >> 1) & 1u);
      wl = reinterpret_cast<const W*>(smem + (part ? lay.wb : lay.wa));
    }
    if constexpr (M == kGemvUnrolled || M == kStageUnrolled) {
      // the decoder's gemv_local with I known when compiling, its loop unrolled (decode_cluster.cuh, gemv_rows)
      gemv_local<kCRowGroup - 2, kStats, kI>(wl, x, g, I, R,
                                             [&](int r, float s, float2 st) { outs[r] = kStats ? st.y * s : s; });
    } else if constexpr (M == kGemv || M == kStage || M == kStageCopy) {
      gemv_local<kCRowGroup - 2, kStats>(wl, x, g, I, R, [&](int r, float s, float2 st) {
        outs[r] = kStats ? st.y * s : s;  // kStats: 1/sqrt(var + eps) times sum W g (x - x[0])
      });
    } else if constexpr (M == kPush) {
      for (int r = tid; r < R; r += kCThreads) outs[r] = push_code(a, rank * R + r, kS * R);
    }
    __syncthreads();
    if constexpr (M == kGemv || M == kGemvUnrolled) continue;
    if (exchange) push_to_all(cl, dst + rank * R, outs, R, kS, got + (a & 1));
    if constexpr (M == kSync)
      cl.sync();
    else
      cluster_sync_relaxed();
    ++passed;
    if (exchange) k::mbar_wait<true>(got + (a & 1), unsigned(a >> 1) & 1u);
    if (M == kPush && stale != nullptr) {
      unsigned bad = 0;
      for (int i = tid; i < kS * R; i += kCThreads)
        bad += dst[i] != push_code(a, i, kS * R) && dst[i] != push_code(a + 1, i, kS * R);
      if (bad) atomicAdd(stale, bad);
    }
  }
  cl.sync();
  if (M == kBarrier || M == kSync) {
    if (tid == 0) out[rank] = float(passed);
  } else if (M == kGemv || M == kGemvUnrolled) {
    const float* last = reinterpret_cast<const float*>(smem + lay.outs) + ((iters - 1) & 1) * R;
    for (int r = tid; r < R; r += kCThreads) out[size_t(rank) * R + r] = last[r];
  } else {
    for (int i = tid; i < kS * R; i += kCThreads) out[size_t(rank) * kS * R + i] = dst[i];
  }
#endif
}

// The copy engine alone: every block of a cluster of `blocks` copies its own `bytes` (from global memory, in L2
// after the first launch) into its shared memory, handed over as `pieces` bulk copies on one mbarrier, and
// waits for them; `iters` times. What rate one SM's weight stream gets, and whether a copy in pieces gets
// more than one copy of the same bytes (more requests in flight). out[b]: the sum of block b's words at the end.
__global__ void __launch_bounds__(k::dec::kCThreads, 1)
    copy_floor(const unsigned* src, unsigned bytes, int pieces, int iters, unsigned* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned long long bar;
  __shared__ unsigned total;
  const int b = blockIdx.x, tid = threadIdx.x;
  const unsigned char* mine = reinterpret_cast<const unsigned char*>(src) + size_t(b) * bytes;
  for (unsigned i = tid; i < bytes / 4; i += k::dec::kCThreads) reinterpret_cast<unsigned*>(smem)[i] = 0xffffffffu;
  if (tid == 0) {
    k::mbar_init(&bar), total = 0;
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // (the poison's stores before the copy engine's writes: a generic-proxy write, then async-proxy ones)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const unsigned piece = unsigned(k::dec::pad16((bytes + pieces - 1) / pieces));
  for (int a = 0; a < iters; ++a) {
    if (tid == 0) {
      k::mbar_expect(&bar, bytes);
      for (unsigned o = 0; o < bytes; o += piece) k::bulk_copy(smem + o, mine + o, min(piece, bytes - o), &bar);
    }
    k::mbar_wait(&bar, unsigned(a) & 1u);
    __syncthreads();  // every thread past this phase before the next begins: none can wait on the wrong one
  }
  unsigned sum = 0;
  for (unsigned i = tid; i < bytes / 4; i += k::dec::kCThreads) sum += reinterpret_cast<const unsigned*>(smem)[i];
  atomicAdd(&total, sum);
  __syncthreads();
  if (tid == 0) out[b] = total;
#endif
}

// Several clusters meeting through L2, `iters` stages (see the file's head). vec: two N-float buffers (a stage
// writes the one of its parity: a cluster still reading stage a's vector is never overwritten, since nobody passes
// stage a + 1's meeting before it has arrived there); counter: the arrivals so far; abort: set by a spinner that
// waited past `spin_limit` clocks (a cluster that never arrived: the run fails instead of hanging), which ends
// every later wait. bad[b]: the elements block b read wrong over all stages.
__device__ __forceinline__ float meet_code(int a, int i) { return float((a & 1023) * 4096 + i); }  // exact: < 2^22
template <bool kClusterArrive>
__global__ void __launch_bounds__(k::dec::kCThreads, 1)
    meet_floor(float* vec, unsigned* counter, unsigned* abort, int N, int iters, long long spin_limit, unsigned* bad) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) float seen[];
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  const int blocks = int(gridDim.x), b = int(blockIdx.x), tid = threadIdx.x;
  const int share = (N + blocks - 1) / blocks, lo = min(N, b * share), hi = min(N, lo + share);
  const unsigned per_stage = kClusterArrive ? unsigned(blocks / kS) : unsigned(blocks);
  const bool leader = tid == 0 && (!kClusterArrive || cl.block_rank() == 0);
  unsigned wrong = 0;
  for (int a = 0; a < iters; ++a) {
    float* v = vec + size_t(a & 1) * N;
    for (int i = lo + tid; i < hi; i += k::dec::kCThreads) v[i] = meet_code(a, i);
    if (kClusterArrive) cl.sync(); else __syncthreads();  // the block's (cluster's) writes before its arrival
    if (leader) {
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
      const unsigned want = per_stage * unsigned(a + 1);
      const long long t0 = clock64();
      unsigned now = 0, stop = 0;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(counter) : "memory");
        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(stop) : "l"(abort) : "memory");
        if (now < want && !stop && clock64() - t0 > spin_limit) atomicExch(abort, 1u), stop = 1;
      } while (now < want && !stop);
    }
    if (kClusterArrive) cl.sync(); else __syncthreads();  // the leader's acquire before anyone reads
    for (int i = tid; i < N; i += k::dec::kCThreads) seen[i] = __ldcg(v + i);  // from L2: L1 could hold a stale line
    __syncthreads();  // every thread may read any element now (a GEMV's input): checked by another thread
    for (int i = tid; i < N; i += k::dec::kCThreads) wrong += seen[N - 1 - i] != meet_code(a, N - 1 - i);
    __syncthreads();  // the reads done before the next stage's loads overwrite `seen`
  }
  if (wrong) atomicAdd(bad + b, wrong);
#endif
}

// The same exchange with no counter, no fence and no cluster barrier: every element travels with the stage's
// tag in one 8-byte word (value in the low half, tag a + 1 in the high half; NCCL's "LL" protocol does the same
// between GPUs). A block writes its share as relaxed 8-byte stores at GPU scope, and every reader polls each
// element it needs with relaxed 8-byte loads at GPU scope until the word carries this stage's tag: an aligned
// 8-byte access is single-copy atomic, so the value read with the right tag is the value written with it, and
// no other ordering is needed. Two buffers by the stage's parity, as above (a writer is at most one stage ahead
// of any reader: to write stage a + 1 it read every block's stage-a words, written after their writers read
// stage a - 1's). A word with a newer tag than the reader's stage (impossible) would be waited for until the spin
// limit, and fail the run.
// Two words at once (16 bytes): each 8-byte element of a vector access is single-copy atomic on its own, and
// each carries its own tag, so a pair may be seen half old, half new: the reader waits on each half.
__device__ __forceinline__ void st_flagged2(unsigned long long* p, unsigned long long w0, unsigned long long w1) {
  asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(w0), "l"(w1) : "memory");
}
__device__ __forceinline__ void ld_flagged2(const unsigned long long* p, unsigned long long& w0, unsigned long long& w1) {
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(w0), "=l"(w1) : "l"(p) : "memory");
}
constexpr int kFlagPairs = 4;  // pairs of words a thread reads at most: N <= 2 x 4 x 512 = 4096
__host__ __device__ inline unsigned long long flag_word(unsigned tag, float v) {
#ifdef __CUDA_ARCH__
  return (static_cast<unsigned long long>(tag) << 32) | __float_as_uint(v);
#else
  unsigned u;
  std::memcpy(&u, &v, 4);
  return (static_cast<unsigned long long>(tag) << 32) | u;
#endif
}
// A block's share is a whole number of pairs (N even). A reader first loads every pair it needs (up to kFlagPairs
// a thread, all in flight at once: one trip to L2 for all of them), then reloads only the pairs not yet there.
__global__ void __launch_bounds__(k::dec::kCThreads, 1)
    meet_flagged(unsigned long long* vec, unsigned* abort, int N, int iters, long long spin_limit, unsigned* bad) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) float seen[];
  // Every block writes some pairs (pairs >= blocks, the host checks): the argument above that a writer is at most
  // one stage ahead of a reader holds for readers that also write. (With a share rounded up, 8 clusters of 384
  // numbers would leave the last two clusters writing nothing, free to fall two stages behind.)
  const int blocks = int(gridDim.x), b = int(blockIdx.x), tid = threadIdx.x, pairs = N / 2;
  const int lo = b * pairs / blocks, hi = (b + 1) * pairs / blocks;  // (< 2^31: blocks <= 132, pairs <= 2048)
  unsigned wrong = 0;
  for (int a = 0; a < iters; ++a) {
    unsigned long long* v = vec + size_t(a & 1) * N;
    const unsigned tag = unsigned(a) + 1u;
    for (int i = lo + tid; i < hi; i += k::dec::kCThreads)
      st_flagged2(v + 2 * i, flag_word(tag, meet_code(a, 2 * i)), flag_word(tag, meet_code(a, 2 * i + 1)));
    unsigned long long w[kFlagPairs][2];
#pragma unroll
    for (int q = 0; q < kFlagPairs; ++q) {
      const int i = tid + q * k::dec::kCThreads;
      if (i < pairs) ld_flagged2(v + 2 * i, w[q][0], w[q][1]);
    }
    // A word is missing while it does not carry this stage's tag. A newer stage's tag (impossible, by the argument
    // above) would keep its reader polling until the spin limit: the run then fails on the timed-out wait and on the
    // element, as for a word that never came. (A version that ended the wait at once on a newer tag, two tests a
    // word, made every flagged meeting slower in a development run on the H200: the reads are on the stage's path.)
    auto early = [&](unsigned long long word) { return unsigned(word >> 32) != tag; };
    auto missing = [&] {
      bool m = false;
#pragma unroll
      for (int q = 0; q < kFlagPairs; ++q)
        if (tid + q * k::dec::kCThreads < pairs) m |= early(w[q][0]) || early(w[q][1]);
      return m;
    };
    if (missing()) {  // not all there yet: poll (the clock and the abort flag only on this path)
      const long long t0 = clock64();
      unsigned stop = 0;
      do {
#pragma unroll
        for (int q = 0; q < kFlagPairs; ++q) {
          const int i = tid + q * k::dec::kCThreads;
          if (i < pairs && (early(w[q][0]) || early(w[q][1]))) ld_flagged2(v + 2 * i, w[q][0], w[q][1]);
        }
        if (!missing()) break;
        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(stop) : "l"(abort) : "memory");
        if (!stop && clock64() - t0 > spin_limit) atomicExch(abort, 1u), stop = 1;
      } while (!stop);
    }
#pragma unroll
    for (int q = 0; q < kFlagPairs; ++q) {
      const int i = tid + q * k::dec::kCThreads;
      if (i < pairs)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          wrong += unsigned(w[q][e] >> 32) != tag;  // (an aborted wait: its element counts as wrong)
          seen[2 * i + e] = __uint_as_float(unsigned(w[q][e]));
        }
    }
    __syncthreads();  // every thread may read any element now (a GEMV's input): checked by another thread
    for (int i = tid; i < N; i += k::dec::kCThreads) wrong += seen[N - 1 - i] != meet_code(a, N - 1 - i);
    __syncthreads();  // the reads done before the next stage's words overwrite `seen`
  }
  if (wrong) atomicAdd(bad + b, wrong);
#endif
}

// sample_block (decode_stages.cuh) alone, as layer 0's qkv stage runs it on every block: the top-k pick from
// V logits in this block's shared memory, `iters` times, by the ranks (kSort false) or by the sort; draw a % 64
// of u each time, its pick to out[a % 64].
template <bool kSort>
__global__ void __launch_bounds__(k::dec::kCThreads, 1)
    sample_floor(const float* lg, int V, double temperature, int top_k, const double* u, int iters, int* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* ls = reinterpret_cast<float*>(smem);
  unsigned char* scratch = smem + k::dec::pad16(size_t(V) * 4);
  for (int i = threadIdx.x; i < V; i += k::dec::kCThreads) ls[i] = lg[i];
  __syncthreads();
  for (int a = 0; a < iters; ++a) {
    const int tok = k::dec::sample_block<true, k::dec::NoMark, kSort>(ls, V, temperature, top_k, u[a % 64], scratch);
    if (threadIdx.x == 0) out[a % 64] = tok;
  }
}

struct Shape {
  const char* name;
  int R, I;
  bool stats;
};

// The decoder's attention stage (cstage_attention) and the merge of its parts that begins the projection stage
// (cstage_proj_merge), on one cluster of 16 with nothing else around: H heads of 64 over the cached positions
// 0..t of a cache in global memory ([L][T][C], as the decoder's), `iters` times; each iteration's partials pushed
// (st.async) to every block, the relaxed barrier, the wait for them, then the merge. H = 6 is today's decoder
// (2 parts of the positions a head, 12 blocks busy); H = 1 is one head's attention on its own cluster of 16 (16
// parts). The iterations alternate between two problems (layer l = a & 1 of a two-layer cache, with q or q1 as
// the decoder's layers do), and between two copies of the partials and of the merged output (p0 and p1: p1 has
// attp and xn past p0's vectors). With a relaxed barrier only, a block may push iteration a + 1's partials while
// another still merges iteration a's: into the other copy. (A first version had one copy, and the same numbers
// every iteration, so its check could not have seen such an overlap.) out: [2][16][C], every block's merged
// output of the last iteration of each parity (iters >= 2), each checked against the CPU in double.
// kStamp (an untimed launch): block b's thread 0 adds up, over the iterations, the clocks of five phases into
// phases[b * 5 + ..]: its warps' partials done (cstage_attention's point A), the block's merge (A to B), the push
// and the relaxed barrier (B to C), the wait for every block's partials (C to D), the merge of the parts (D to E).
// A block with no attention item (rank >= H x G) has no points A and B: its first two phases hold the clocks of
// the empty call, the third its wait at the barrier for the busy blocks.
template <bool kStamp>
__global__ void __launch_bounds__(k::dec::kCThreads, 1)
    attn_floor(k::dec::Net<float> n, k::dec::ClusterPlan p0, k::dec::ClusterPlan p1, const float* qg, int t,
               int iters, float* out, unsigned long long* phases) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using namespace k::dec;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned long long got[2];
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  const int rank = int(cl.block_rank());
  for (int i = threadIdx.x; i < n.C; i += kCThreads)
    at_<float>(smem, p0.q)[i] = qg[i], at_<float>(smem, p0.q1)[i] = qg[n.C + i];
  for (int i = threadIdx.x; i < n.H * p0.G * p0.wstride; i += kCThreads)
    at_<float>(smem, p0.attp)[i] = NAN, at_<float>(smem, p1.attp)[i] = NAN;
  for (int i = threadIdx.x; i < n.C; i += kCThreads) at_<float>(smem, p0.xn)[i] = NAN, at_<float>(smem, p1.xn)[i] = NAN;
  if (threadIdx.x == 0) {
    k::mbar_init(got), k::mbar_init(got + 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  cl.sync();
  long long acc[5] = {}, st[6] = {}, c_begin = 0;
  unsigned long long ns_begin = 0;
  auto stamp = [&](int k) {
    if (kStamp && threadIdx.x == 0) st[k] = clock64();
  };
  auto sub = [&](int point) {  // cstage_attention's points A (partials done) and B (the block's merge done)
    if (point == kSubA) stamp(1);
    if (point == kSubB) stamp(2);
  };
  if (kStamp && threadIdx.x == 0) c_begin = clock64(), ns_begin = k::dec::global_ns();
  for (int a = 0; a < iters; ++a) {
    const k::dec::ClusterPlan& p = a & 1 ? p1 : p0;
    stamp(0), stamp(1), stamp(2);  // (a block with no item: A and B stay at the stage's start)
    if (threadIdx.x == 0) k::mbar_expect(got + (a & 1), unsigned(n.H * p.G * 2 + n.C * p.G) * 4u);
    cstage_attention(n, p, cl, a & 1, t, smem, rank, got + (a & 1), sub);
    if (n.H * p.G <= rank) stamp(1), stamp(2);
    cluster_sync_relaxed();
    stamp(3);
    k::mbar_wait<true>(got + (a & 1), unsigned(a >> 1) & 1u);
    stamp(4);
    cstage_proj_merge(n, p, smem);  // ends with a __syncthreads()
    stamp(5);
    if (kStamp && threadIdx.x == 0)
      for (int k = 0; k < 5; ++k) acc[k] += st[k + 1] - st[k];
  }
  cl.sync();
  for (int par = 0; par < 2; ++par)
    for (int i = threadIdx.x; i < n.C; i += kCThreads)
      out[(size_t(par) * kS + rank) * n.C + i] = at_<float>(smem, (par ? p1 : p0).xn)[i];
  if (kStamp && threadIdx.x == 0) {
    for (int k = 0; k < 5; ++k) phases[rank * 5 + k] = (unsigned long long)acc[k];
    if (rank == 0) phases[kS * 5] = (unsigned long long)(clock64() - c_begin), phases[kS * 5 + 1] = k::dec::global_ns() - ns_begin;
  }
#endif
}

template <class W>
float to_float(W v) {
  if constexpr (std::is_same<W, float>::value)
    return v;
  else
    return __bfloat162float(v);
}

struct Runner {
  int iters;
  cudaStream_t stream;
  results::Results& res;
  // A launch of `blocks` blocks of the decoder's 512 threads, in clusters of `cluster` (0: no cluster), with `smem`
  // bytes of dynamic shared memory, on this stream; attr: its one attribute's storage.
  cudaLaunchConfig_t launch_cfg(int blocks, int cluster, size_t smem, cudaLaunchAttribute* attr) const {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(blocks)), cfg.blockDim = dim3(k::dec::kCThreads), cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = unsigned(std::max(cluster, 1)), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr, cfg.numAttrs = cluster > 0 ? 1 : 0;
    return cfg;
  }
  // Launches of n iterations timed by common/timing.cuh: the median of 7 after a warm-up, L2 not flushed (the
  // decoder finds its weights in L2). enqueue(n) poisons the output and launches. A caller times n and 2n and
  // takes the difference over n: one iteration, without the launch and the set-up.
  template <class Enqueue>
  timing::Stats launches(Enqueue enqueue, int n) {
    timing::Options o;
    o.warmup = 1, o.reps = 7, o.min_reps = 7, o.budget_ms = 1e9, o.stream = stream;
    return timing::time_gpu([&] { enqueue(n); }, o);
  }

  template <class W, int M, bool kStats, int kI = 0>
  void one(const Shape& sh, const char* dtype) {
    const int R = sh.R, I = sh.I, O = kS * R;
    const bool two = M == kStageCopy;
    const Layout lay = layout(R, I, int(sizeof(W)), two);
    int dev = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    auto kern = stage_floor<W, M, kStats, kI>;
    cudaFuncAttributes fa{};
    CUDA_CHECK(cudaFuncGetAttributes(&fa, kern));
    if (size_t(lay.total) + fa.sharedSizeBytes > size_t(optin)) {
      std::printf("  %-6s %-5s %-10s does not fit (%u bytes of shared memory)\n", sh.name, dtype, mode_name(M),
                  lay.total);
      return;
    }
    CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(lay.total)));
    CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    // Inputs: weights ~U(-1, 1) rounded to W, x with a mean far from 0 (as a residual stream can have), g ~ 1.
    std::vector<W> hw(size_t(O) * I);
    std::vector<float> hx(I), hg(I);
    verify::Rng rng(uint64_t(R) * 131 + uint64_t(I));
    auto rnd = [&] { return rng.uniform(); };
    for (auto& v : hw) v = W(rnd());
    for (int i = 0; i < I; ++i) hx[i] = 3.f + rnd(), hg[i] = 1.f + 0.25f * rnd();
    W* dw;
    float *dx, *dg, *dout;
    const bool barrier_only = M == kBarrier || M == kSync, own_rows = M == kGemv || M == kGemvUnrolled;
    const size_t nout = barrier_only ? size_t(kS) : own_rows ? size_t(O) : size_t(kS) * O;
    CUDA_CHECK(cudaMalloc(&dw, hw.size() * sizeof(W)));
    CUDA_CHECK(cudaMalloc(&dx, I * 4));
    CUDA_CHECK(cudaMalloc(&dg, I * 4));
    CUDA_CHECK(cudaMalloc(&dout, nout * 4));
    CUDA_CHECK(cudaMemcpy(dw, hw.data(), hw.size() * sizeof(W), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dx, hx.data(), I * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dg, hg.data(), I * 4, cudaMemcpyHostToDevice));
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = launch_cfg(kS, kS, lay.total, attr);
    int fit = 0;
    const cudaError_t oe = cudaOccupancyMaxActiveClusters(&fit, kern, &cfg);
    if (oe != cudaSuccess || fit < 1) {  // the decoder's cluster does not fit this GPU: nothing here to time
      (void)cudaGetLastError();
      cli::skip("stage_floor", "a cluster of 16 blocks of 512 threads cannot be placed on this GPU");
    }
    auto enqueue = [&](int n) {
      CUDA_CHECK(cudaMemsetAsync(dout, 0xff, nout * 4, stream));  // NaN: poisoned
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, kern, (const W*)dw, (const float*)dx, (const float*)dg, R, I, lay, n, dout,
                                    (unsigned*)nullptr));
    };
    if (M == kPush) {  // every iteration's numbers checked, in a launch of its own (untimed)
      unsigned* dstale;
      CUDA_CHECK(cudaMalloc(&dstale, 4));
      CUDA_CHECK(cudaMemsetAsync(dstale, 0, 4, stream));
      CUDA_CHECK(cudaMemsetAsync(dout, 0xff, nout * 4, stream));
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, kern, (const W*)dw, (const float*)dx, (const float*)dg, R, I, lay, iters, dout,
                                    dstale));
      unsigned stale = 0;
      CUDA_CHECK(cudaMemcpy(&stale, dstale, 4, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaFree(dstale));
      char cname[160];
      std::snprintf(cname, sizeof cname, "push fp32, %d rows x %d a block: every iteration's numbers received", R, I);
      res.add(verify::fact(cname, stale == 0, "exact", stale ? "a block read numbers of an earlier iteration" : "",
                           size_t(iters) * kS * kS * R, stale));
    }
    const timing::Stats t1 = launches(enqueue, iters), t2 = launches(enqueue, 2 * iters);
    const double us = (t2.median_ms - t1.median_ms) * 1e3 / iters;
    // The check, on the last launch's output (2 x iters iterations).
    std::vector<float> got(nout);
    CUDA_CHECK(cudaMemcpy(got.data(), dout, nout * 4, cudaMemcpyDeviceToHost));
    std::vector<double> ref(nout);
    double mean = 0, var = 0;  // the folded LayerNorm's statistics, as the kernel takes them: about x[0]
    for (int i = 0; i < I; ++i) mean += double(hx[i]) - hx[0], var += (double(hx[i]) - hx[0]) * (double(hx[i]) - hx[0]);
    mean /= I, var = var / I - mean * mean;
    for (size_t j = 0; j < nout && !barrier_only; ++j) {
      const int o = int(own_rows ? j : j % size_t(O));
      double a = 0;
      for (int i = 0; i < I; ++i)
        a += double(to_float(hw[size_t(o) * I + i])) *
             (sh.stats ? double(hg[i]) * (double(hx[i]) - hx[0]) : double(hx[i]));
      ref[j] = M == kPush ? double(push_code(2 * iters - 1, o, O)) : sh.stats ? a / std::sqrt(std::max(var, 0.0) + 1e-5) : a;
    }
    char name[160];
    std::snprintf(name, sizeof name, "%s %s %s, %d rows x %d a block", mode_name(M), sh.name, dtype, R, I);
    // fp32 sums of I products of ~unit size (x ~ 3 where no LayerNorm is folded in): atol scaled by sqrt(I) x 4
    if (barrier_only) std::fill(ref.begin(), ref.end(), double(2 * iters));  // every block, every barrier
    const bool ok =
        res.add(verify::compare(name, got.data(), ref.data(), nout, verify::kFp32.scaled(4 * std::sqrt(double(I)))))
            .passed;
    results::Bench b;
    b.name = name, b.dtype = dtype, b.shape = {kS, R, I};
    b.ms = us * 1e-3, b.min_ms = (t2.min_ms - t1.max_ms) / iters, b.max_ms = (t2.max_ms - t1.min_ms) / iters;
    b.reps = 7;
    b.extra = json::Value::object();
    b.extra["us_per_iteration"] = us;
    b.extra["mode"] = mode_name(M);
    b.extra["rows"] = R, b.extra["inputs"] = I, b.extra["stage"] = sh.name;
    b.extra["iters"] = iters;
    res.add(b);
    std::printf("  %-6s %-5s %-10s %2d x %4d  %6.3f us a stage%s\n", sh.name, dtype, mode_name(M), R, I, us,
                ok ? "" : "  (its check FAILED)");
    CUDA_CHECK(cudaFree(dw));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dg));
    CUDA_CHECK(cudaFree(dout));
  }
  // copy_floor for `blocks` blocks, `bytes` each, in `pieces`: as one cluster (its blocks on the SMs of one GPC,
  // as the decoder's), or as blocks the GPU places where it likes (spread over its GPCs).
  void copy(int blocks, unsigned bytes, int pieces, bool cluster, int cluster_size = 0) {
    if (cluster_size == 0) cluster_size = blocks;  // the whole grid one cluster (the decoder's), or K of this size
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaFuncSetAttribute(copy_floor, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    CUDA_CHECK(cudaFuncSetAttribute(copy_floor, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    const size_t words = size_t(blocks) * bytes / 4;
    std::vector<unsigned> h(words);
    verify::Rng rng(12345);
    for (auto& w : h) w = unsigned(rng.next() >> 32);
    unsigned *dsrc, *dout;
    CUDA_CHECK(cudaMalloc(&dsrc, words * 4));
    CUDA_CHECK(cudaMalloc(&dout, size_t(blocks) * 4));
    CUDA_CHECK(cudaMemcpy(dsrc, h.data(), words * 4, cudaMemcpyHostToDevice));
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = launch_cfg(blocks, cluster ? cluster_size : 0, bytes, attr);
    auto enqueue = [&](int n) {
      CUDA_CHECK(cudaMemsetAsync(dout, 0xff, size_t(blocks) * 4, stream));
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, copy_floor, (const unsigned*)dsrc, bytes, pieces, n, dout));
    };
    // (copies are long: a quarter of the stages' count)
    const double t1 = launches(enqueue, iters / 4).median_ms, t2 = launches(enqueue, iters / 2).median_ms;
    const double us = (t2 - t1) * 1e3 / (iters / 4), gbs = double(bytes) / (us * 1e3);
    std::vector<unsigned> got(blocks);
    CUDA_CHECK(cudaMemcpy(got.data(), dout, size_t(blocks) * 4, cudaMemcpyDeviceToHost));
    std::vector<unsigned> want(blocks, 0u);
    for (int b = 0; b < blocks; ++b)
      for (size_t i = 0; i < bytes / 4; ++i) want[b] += h[size_t(b) * bytes / 4 + i];
    char name[160];
    char how[48] = "";
    if (blocks > 1 && !cluster) std::snprintf(how, sizeof how, " (no cluster)");
    else if (blocks > 1 && cluster_size == blocks) std::snprintf(how, sizeof how, " (one cluster)");
    else if (blocks > 1) std::snprintf(how, sizeof how, " (%d clusters of %d)", blocks / cluster_size, cluster_size);
    std::snprintf(name, sizeof name, "copy %u bytes a block, %d block%s%s, %d piece%s", bytes, blocks,
                  blocks > 1 ? "s" : "", how, pieces, pieces > 1 ? "s" : "");
    size_t bad = 0;
    for (int b = 0; b < blocks; ++b) bad += got[b] != want[b];
    res.add(verify::fact(name, bad == 0, "exact", bad ? "a block's words do not sum as the source's" : "",
                         size_t(blocks), bad));
    results::Bench bb;
    bb.name = name, bb.dtype = "none", bb.shape = {blocks, static_cast<long long>(bytes), pieces};
    bb.ms = us * 1e-3, bb.reps = 7, bb.gbps = gbs;
    bb.extra = json::Value::object();
    bb.extra["us_per_copy"] = us, bb.extra["gb_per_s_per_sm"] = gbs, bb.extra["pieces"] = pieces;
    bb.extra["blocks"] = blocks, bb.extra["bytes"] = double(bytes), bb.extra["cluster"] = cluster;
    bb.extra["cluster_size"] = cluster ? cluster_size : 1;
    int fit = blocks;  // (blocks that ran at once, in clusters: all but where fewer clusters fit)
    if (cluster && cluster_size < blocks) {  // K clusters: how many fit at once (fewer: the rest ran after them)
      fit = 0;
      if (cudaOccupancyMaxActiveClusters(&fit, copy_floor, &cfg) != cudaSuccess) (void)cudaGetLastError(), fit = -1;
      bb.extra["clusters_resident_at_once"] = fit;
      fit = fit < 0 ? blocks : fit * cluster_size;
    }
    res.add(bb);
    std::printf("  copy   %7u bytes  %3d blocks%s  %d pieces  %6.3f us  %6.1f GB/s a block, %7.1f GB/s in all%s\n", bytes,
                blocks, cluster ? " (cluster)" : "          ", pieces, us, gbs, gbs * blocks,
                fit < blocks ? " (not all at once: two rounds, not a rate)" : "");
    CUDA_CHECK(cudaFree(dsrc));
    CUDA_CHECK(cudaFree(dout));
  }
  // One exchange of an N-float vector between K clusters of 16, `kind` of them: meet_floor with the clusters
  // arriving (kCluster) or the 16 K blocks arriving one by one (kBlock), or meet_flagged (kFlagged: no counter).
  // Every cluster must be resident at once (the spinners wait for each other): K is run only where
  // cudaOccupancyMaxActiveClusters says K clusters of 16 fit.
  enum MeetKind { kCluster, kBlock, kFlagged };
  template <int kKind>
  void meet(int K, int N) {
    const int blocks = K * kS;
    const bool flagged = kKind == kFlagged;
    // meet_flagged's pairs a thread, and a pair for every block to write
    if (flagged && (N % 2 != 0 || N > 2 * kFlagPairs * k::dec::kCThreads || N / 2 < blocks)) {
      std::fprintf(stderr, "stage_floor: meet_flagged takes an even N from %d to %d, not %d\n", 2 * blocks,
                   2 * kFlagPairs * k::dec::kCThreads, N);
      std::exit(1);
    }
    void (*kern_counted)(float*, unsigned*, unsigned*, int, int, long long, unsigned*) = meet_floor<kKind == kCluster>;
    const void* kern = flagged ? reinterpret_cast<const void*>(meet_flagged) : reinterpret_cast<const void*>(kern_counted);
    // One block an SM, as the decoder's (its weight area takes most of the shared memory): a kernel this small
    // could otherwise run two blocks of a cluster on one SM (a first run of the flagged kind fitted 8 clusters
    // of 16 where the counted kinds fitted 7).
    const size_t smem = std::max(size_t(N) * 4, size_t(120) << 10);
    CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchAttribute attr[1];  // block arrivals and flagged words in clusters too: their blocks placed as the clustered run's
    const cudaLaunchConfig_t cfg = launch_cfg(blocks, kS, smem, attr);
    int fit = 0;
    const cudaError_t oe = cudaOccupancyMaxActiveClusters(&fit, kern, &cfg);
    char name[160];
    std::snprintf(name, sizeof name, "meet %d cluster%s of %d, %s, %d floats", K, K > 1 ? "s" : "", kS,
                  kKind == kCluster ? "cluster arrivals" : kKind == kBlock ? "block arrivals" : "flagged words", N);
    if (oe != cudaSuccess || fit < K) {
      (void)cudaGetLastError();
      std::printf("  %-48s not run: %d clusters of %d fit at once\n", name, fit, kS);
      res.config["meet_not_run"].push(json::Value(std::string(name)));  // in the file too, not only on the console
      return;
    }
    void* dvec;  // two N-element buffers: floats (counted) or 8-byte words (flagged)
    unsigned *dcnt, *dabort, *dbad;
    const size_t vec_bytes = size_t(2) * N * (flagged ? 8 : 4);
    CUDA_CHECK(cudaMalloc(&dvec, vec_bytes));
    CUDA_CHECK(cudaMalloc(&dcnt, 4));
    CUDA_CHECK(cudaMalloc(&dabort, 4));
    CUDA_CHECK(cudaMalloc(&dbad, size_t(blocks) * 4));
    CUDA_CHECK(cudaMemset(dbad, 0, size_t(blocks) * 4));
    CUDA_CHECK(cudaMemset(dcnt, 0, 4));
    CUDA_CHECK(cudaMemset(dabort, 0, 4));  // once: a wait that timed out in any launch fails the check
    int dev = 0, khz = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
    const long long spin_limit = 200LL * khz;  // 200 ms of clocks: a stage takes microseconds
    size_t stages = 0;  // over all launches: what every block read
    int last_n = 0;     // the last launch's: what the counter holds
    auto enqueue = [&](int n) {
      // NaN floats, or words whose tag (0xffffffff) no stage carries: a read of nothing written fails
      CUDA_CHECK(cudaMemsetAsync(dvec, 0xff, vec_bytes, stream));
      if (flagged) {
        CUDA_CHECK(cudaLaunchKernelEx(&cfg, meet_flagged, static_cast<unsigned long long*>(dvec), dabort, N, n,
                                      spin_limit, dbad));
      } else {
        CUDA_CHECK(cudaMemsetAsync(dcnt, 0, 4, stream));
        CUDA_CHECK(cudaLaunchKernelEx(&cfg, kern_counted, static_cast<float*>(dvec), dcnt, dabort, N, n, spin_limit,
                                      dbad));
      }
      stages += size_t(n), last_n = n;
    };
    const timing::Stats s1 = launches(enqueue, iters), s2 = launches(enqueue, 2 * iters);
    const double us = (s2.median_ms - s1.median_ms) * 1e3 / iters;
    unsigned cnt = 0, aborted = 0;
    std::vector<unsigned> bad(blocks);
    CUDA_CHECK(cudaMemcpy(&cnt, dcnt, 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&aborted, dabort, 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(bad.data(), dbad, size_t(blocks) * 4, cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (unsigned w : bad) wrong += w;
    const unsigned per_stage = kKind == kCluster ? unsigned(K) : kKind == kBlock ? unsigned(blocks) : 0u;
    const bool ok_count = !aborted && cnt == per_stage * unsigned(last_n);  // flagged: no counter, it stays 0
    res.add(verify::fact(std::string(name) + ": every element read at every stage", wrong == 0, "exact",
                         wrong ? "a block read a value its stage did not write" : "",
                         stages * size_t(blocks) * size_t(N), wrong));
    res.add(verify::fact(std::string(name) + (flagged ? ": no wait timed out" : ": every arrival counted, no wait timed out"),
                         ok_count, "exact",
                         aborted ? "a wait timed out" : ok_count ? "" : "the counter does not hold the arrivals", 1,
                         ok_count ? 0 : 1));
    results::Bench bb;
    bb.name = name, bb.dtype = "fp32", bb.shape = {K, kS, N};
    bb.ms = us * 1e-3, bb.min_ms = (s2.min_ms - s1.max_ms) / iters, bb.max_ms = (s2.max_ms - s1.min_ms) / iters;
    bb.reps = 7;
    bb.extra = json::Value::object();
    bb.extra["us_per_iteration"] = us, bb.extra["clusters"] = K, bb.extra["floats"] = N;
    if (!flagged) bb.extra["arrivals_per_stage"] = double(per_stage);
    bb.extra["iters"] = iters, bb.extra["dynamic_smem_bytes"] = double(smem);
    bb.extra["kind"] = std::string(kKind == kCluster ? "cluster arrivals" : kKind == kBlock ? "block arrivals" : "flagged words");
    res.add(bb);
    std::printf("  %-48s %6.3f us a stage%s\n", name, us, wrong || !ok_count ? "  (its check FAILED)" : "");
    CUDA_CHECK(cudaFree(dvec));
    CUDA_CHECK(cudaFree(dcnt));
    CUDA_CHECK(cudaFree(dabort));
    CUDA_CHECK(cudaFree(dbad));
  }
  // attn_floor: H heads of hs = 64 (C = 64 H) at position t, a two-layer cache of T = 256 positions of random k
  // and v, two q vectors.
  void attention(int H, int t) {
    const int hs = 64, C = H * hs, T = 256;
    int dev = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const k::dec::ClusterPlan p0 = k::dec::make_cluster_plan(C, H, 256, kS, 4, size_t(optin));
    k::dec::ClusterPlan p1 = p0;  // the odd iterations' partials and merged output, past p0's vectors
    const size_t attp_bytes = k::dec::pad16(size_t(H) * p0.G * p0.wstride * 4);
    p1.attp = p0.wts, p1.xn = unsigned(p0.wts + attp_bytes);
    const size_t smem = std::max(size_t(p1.xn) + size_t(C) * 4, size_t(120) << 10);  // one block an SM
    char name[160];
    std::snprintf(name, sizeof name, "attention %d head%s of 64 on one cluster of %d, position %d", H, H > 1 ? "s" : "",
                  kS, t);
    for (auto kern : {attn_floor<false>, attn_floor<true>}) {
      CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = launch_cfg(kS, kS, smem, attr);
    int fit = 0;
    if (cudaOccupancyMaxActiveClusters(&fit, attn_floor<false>, &cfg) != cudaSuccess || fit < 1) {
      (void)cudaGetLastError();
      std::printf("  %-56s not run: no cluster of %d fits\n", name, kS);
      res.config["attention_not_run"].push(json::Value(std::string(name)));
      return;
    }
    std::vector<float> kc(size_t(2) * T * C), vc(size_t(2) * T * C), q(size_t(2) * C);
    verify::Rng rng(4242);
    auto next = [&] { return float(double(rng.next() >> 11) / 9007199254740992.0 * 2.0 - 1.0); };
    for (auto& x : kc) x = next();
    for (auto& x : vc) x = next();
    for (auto& x : q) x = 2.f * next();
    const size_t nout = size_t(2) * kS * C;
    float *dk, *dv, *dq, *dout;
    CUDA_CHECK(cudaMalloc(&dk, kc.size() * 4));
    CUDA_CHECK(cudaMalloc(&dv, vc.size() * 4));
    CUDA_CHECK(cudaMalloc(&dq, q.size() * 4));
    CUDA_CHECK(cudaMalloc(&dout, nout * 4));
    CUDA_CHECK(cudaMemcpy(dk, kc.data(), kc.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dv, vc.data(), vc.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dq, q.data(), q.size() * 4, cudaMemcpyHostToDevice));
    k::dec::Net<float> n{};
    n.kc = dk, n.vc = dv, n.L = 2, n.C = C, n.H = H, n.T = T, n.V = 256;
    unsigned long long* dph;
    CUDA_CHECK(cudaMalloc(&dph, (size_t(kS) * 5 + 2) * 8));
    // What every block must hold after the last iteration of each parity: softmax(q k / sqrt(hs)) v of layer l
    // (q for l = 0, q1 for l = 1) over positions 0..t, in double.
    std::vector<double> want(nout);
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < H; ++h) {
        const float* K = kc.data() + size_t(l) * T * C;
        const float* V = vc.data() + size_t(l) * T * C;
        const float* Q = q.data() + size_t(l) * C;
        std::vector<double> sc(t + 1);
        double m = -1e300, den = 0;
        for (int s = 0; s <= t; ++s) {
          double d = 0;
          for (int i = 0; i < hs; ++i) d += double(Q[h * hs + i]) * K[size_t(s) * C + h * hs + i];
          sc[s] = d / std::sqrt(double(hs)), m = std::max(m, sc[s]);
        }
        for (int s = 0; s <= t; ++s) den += std::exp(sc[s] - m);
        for (int i = 0; i < hs; ++i) {
          double o = 0;
          for (int s = 0; s <= t; ++s) o += std::exp(sc[s] - m) * V[size_t(s) * C + h * hs + i];
          for (int b = 0; b < kS; ++b) want[(size_t(l) * kS + b) * C + h * hs + i] = o / den;
        }
      }
    std::vector<float> got(nout);
    auto check = [&](const std::string& what) {
      CUDA_CHECK(cudaMemcpy(got.data(), dout, nout * 4, cudaMemcpyDeviceToHost));
      res.add(verify::compare(std::string(name) + ", " + what + ": every block, both problems", got.data(), want.data(),
                              nout, verify::kFp32));
    };
    auto enqueue = [&](int it) {
      CUDA_CHECK(cudaMemsetAsync(dout, 0xff, nout * 4, stream));  // NaN: an output not written fails
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, attn_floor<false>, n, p0, p1, static_cast<const float*>(dq), t, it, dout,
                                    static_cast<unsigned long long*>(nullptr)));
    };
    const timing::Stats s1 = launches(enqueue, iters), s2 = launches(enqueue, 2 * iters);
    const double us = (s2.median_ms - s1.median_ms) * 1e3 / iters;
    check("the timed launches' last");
    // The phases, from one more (stamped, untimed) launch: clocks an iteration, in microseconds at the SM clock of
    // that launch (block 0 also stamped its whole loop in clocks and in the global timer's ns).
    CUDA_CHECK(cudaMemsetAsync(dout, 0xff, nout * 4, stream));
    CUDA_CHECK(cudaMemsetAsync(dph, 0, (size_t(kS) * 5 + 2) * 8, stream));
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, attn_floor<true>, n, p0, p1, static_cast<const float*>(dq), t, iters, dout, dph));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    check("the stamped launch");
    std::vector<unsigned long long> ph(size_t(kS) * 5 + 2);
    CUDA_CHECK(cudaMemcpy(ph.data(), dph, ph.size() * 8, cudaMemcpyDeviceToHost));
    const double mhz = double(ph[size_t(kS) * 5]) / double(std::max(1ull, ph[size_t(kS) * 5 + 1])) * 1e3;
    const double stamped_us = double(ph[size_t(kS) * 5 + 1]) / iters * 1e-3;
    // Busy blocks (an attention item each): the mean of each phase over them. Each phase's largest over all 16
    // blocks too (maxima of different blocks: they do not add up to the stage).
    const int busy = std::min(kS, H * p0.G);
    double mx[5] = {}, mean[5] = {};
    for (int b = 0; b < kS; ++b)
      for (int k = 0; k < 5; ++k) {
        const double u = double(ph[size_t(b) * 5 + k]) / iters / mhz;
        mx[k] = std::max(mx[k], u);
        if (b < busy) mean[k] += u / busy;
      }
    results::Bench bb;
    bb.name = name, bb.dtype = "fp32", bb.shape = {H, hs, t + 1};
    bb.ms = us * 1e-3, bb.min_ms = (s2.min_ms - s1.max_ms) / iters, bb.max_ms = (s2.max_ms - s1.min_ms) / iters;
    bb.reps = 7;
    bb.extra = json::Value::object();
    bb.extra["us_per_iteration"] = us, bb.extra["heads"] = H, bb.extra["parts_a_head"] = p0.G;
    bb.extra["positions"] = t + 1, bb.extra["iters"] = iters, bb.extra["busy_blocks"] = busy;
    bb.extra["dynamic_smem_bytes"] = double(smem);
    static const char* kPhase[5] = {"partials", "block_merge", "push_and_barrier", "wait", "parts_merge"};
    json::Value jb = json::Value::object(), jx = json::Value::object();
    for (int k = 0; k < 5; ++k) jb[kPhase[k]] = mean[k], jx[kPhase[k]] = mx[k];
    bb.extra["phase_us_busy_mean"] = jb, bb.extra["phase_us_max_each"] = jx;
    bb.extra["stamp_clock_mhz"] = mhz, bb.extra["stamped_us_per_iteration"] = stamped_us;
    res.add(bb);
    std::printf("  %-56s %6.3f us a stage (attention, push, barrier, merge; stamped %.3f)\n", name, us, stamped_us);
    std::printf("    phases, mean of the %d busy blocks (us): partials %.3f, block merge %.3f, push+barrier %.3f, wait %.3f,"
                " parts merge %.3f (clock %.0f MHz)\n", busy, mean[0], mean[1], mean[2], mean[3], mean[4], mhz);
    CUDA_CHECK(cudaFree(dph));
    CUDA_CHECK(cudaFree(dk));
    CUDA_CHECK(cudaFree(dv));
    CUDA_CHECK(cudaFree(dq));
    CUDA_CHECK(cudaFree(dout));
  }
  // sample_floor: V logits with ties (values on a grid of 1/8), 64 draws; each pick checked against the same
  // arithmetic on the CPU (the order by value, then index; the weights' exponentials in double; the walk).
  template <bool kSort>
  void sample(int V, int top_k) {
    const double temperature = 0.8;
    std::vector<float> lg(V);
    std::vector<double> u(64);
    verify::Rng rng(777);
    auto next = [&] { return double(rng.next() >> 11) / 9007199254740992.0; };
    for (auto& x : lg) x = float(std::floor(next() * 64.0) / 8.0 - 4.0);  // values on a grid of 1/8: many ties
    for (auto& x : u) x = next();
    std::vector<double> want(64);
    for (int j = 0; j < 64; ++j) want[j] = gpt::sample_top_k(lg, temperature, top_k, u[j]);  // the CPU original
    float* dl;
    double* du;
    int* dout;
    CUDA_CHECK(cudaMalloc(&dl, V * 4));
    CUDA_CHECK(cudaMalloc(&du, 64 * 8));
    CUDA_CHECK(cudaMalloc(&dout, 64 * 4));
    CUDA_CHECK(cudaMemcpy(dl, lg.data(), V * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(du, u.data(), 64 * 8, cudaMemcpyHostToDevice));
    const size_t smem = k::dec::pad16(size_t(V) * 4) + size_t(V) * 16;
    auto kern = sample_floor<kSort>;
    CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    auto enqueue = [&](int n) {
      CUDA_CHECK(cudaMemsetAsync(dout, 0xff, 64 * 4, stream));
      kern<<<1, k::dec::kCThreads, smem, stream>>>(dl, V, temperature, top_k, du, n, dout);
      LAUNCH_CHECK();
    };
    const double t1 = launches(enqueue, iters).median_ms, t2 = launches(enqueue, 2 * iters).median_ms;
    const double us = (t2 - t1) * 1e3 / iters;
    std::vector<int> got(64);
    CUDA_CHECK(cudaMemcpy(got.data(), dout, 64 * 4, cudaMemcpyDeviceToHost));
    std::vector<double> gotd(got.begin(), got.end());
    char name[160];
    std::snprintf(name, sizeof name, "sample %s, %d logits, top-%d", kSort ? "by the sort" : "by the ranks", V, top_k);
    res.add(verify::compare(name, gotd.data(), want.data(), 64, verify::Tol{0, 0, "exact"}));
    results::Bench b;
    b.name = name, b.dtype = "fp32", b.shape = {V, top_k};
    b.ms = us * 1e-3, b.reps = 7;
    b.extra = json::Value::object();
    b.extra["us_per_iteration"] = us, b.extra["iters"] = iters;
    res.add(b);
    std::printf("  sample %-13s %d logits top-%d  %6.3f us a pick\n", kSort ? "by the sort" : "by the ranks", V, top_k,
                us);
    CUDA_CHECK(cudaFree(dl));
    CUDA_CHECK(cudaFree(du));
    CUDA_CHECK(cudaFree(dout));
  }
  template <class W>
  void shapes(const char* dtype) {
    static const Shape kShapes[] = {{"qkv", 72, 384, true},
                                    {"proj", 24, 384, false},
                                    {"fc", 96, 384, true},
                                    {"fc2", 24, 1536, false},
                                    {"head", 16, 384, true}};
    for (const Shape& sh : kShapes) {
      if (sh.stats) {
        one<W, kGemv, true>(sh, dtype), one<W, kStage, true>(sh, dtype), one<W, kStageCopy, true>(sh, dtype);
        one<W, kGemvUnrolled, true, 384>(sh, dtype), one<W, kStageUnrolled, true, 384>(sh, dtype);
      } else {
        one<W, kGemv, false>(sh, dtype), one<W, kStage, false>(sh, dtype), one<W, kStageCopy, false>(sh, dtype);
        if (sh.I == 384)
          one<W, kGemvUnrolled, false, 384>(sh, dtype), one<W, kStageUnrolled, false, 384>(sh, dtype);
        else
          one<W, kGemvUnrolled, false, 1536>(sh, dtype), one<W, kStageUnrolled, false, 1536>(sh, dtype);
      }
    }
  }
  // The GEMVs of two decoders spread over several clusters of 16, fp32, beside the meetings (meet ... flagged words):
  // what such a stage's own work would take at least.
  //   /4  split as today's over four clusters (64 blocks: a 64th of each stage's rows a block, rounded up to a
  //       multiple of 4 as make_cluster_plan does): qkv 20, proj 8, fc 24, fc2 8, the head 4 rows;
  //   /h  a cluster a head (6 clusters): qkv the head's 3 x 64 rows (12 a block), the projection's partial sum over the
  //       head's 64 inputs (all 384 rows, 24 a block), fc a sixth of its rows (16 a block), fc2's partial sum over
  //       that sixth of its inputs (384 rows of 256, 24 a block); the partial sums meet through L2 (6 x 384 numbers).
  void shapes_split() {
    static const Shape kShapes[] = {{"qkv/4", 20, 384, true}, {"proj/4", 8, 384, false}, {"fc/4", 24, 384, true},
                                    {"fc2/4", 8, 1536, false}, {"head/4", 4, 384, true}, {"qkv/h", 12, 384, true},
                                    {"proj/h", 24, 64, false},  {"fc/h", 16, 384, true},  {"fc2/h", 24, 256, false}};
    for (const Shape& sh : kShapes) {
      if (sh.stats)
        one<float, kGemv, true>(sh, "fp32");
      else
        one<float, kGemv, false>(sh, "fp32");
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  cli::Args args(argc, argv, "stage_floor", "the cluster decoder's stage, piece by piece, alone (see the file's head)");
  const int iters = int(args.integer("iters", 2000, 64, 1000000,
                                     "iterations of the shorter launch (the longer: twice), a multiple of 4"));
  const std::string json_path = args.str("json", "", "write the results file here ({gpu} = the GPU's slug)");
  args.finish();
  // (64 or more: sample writes 64 picks from iters draws; a multiple of 4: the copies run iters / 4 and iters / 2)
  if (iters % 4 != 0) cli::usage_error("stage_floor", "--iters must be a multiple of 4, got " + std::to_string(iters));
  if (!json_path.empty()) results::require_writable_json("stage_floor", json_path);
  results::Results res("day50_gpt", "stage_floor");
  const int dev = env::require_gpu("stage_floor");
  res.mode = "bench";
  res.env = env::collect(dev);
  env::print(res.env);
  env::watch_clocks(res, dev);
  int can = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&can, cudaDevAttrClusterLaunch, dev));
  if (!can) cli::skip("stage_floor", "this GPU launches no thread-block clusters");
  res.config["iters"] = iters, res.config["blocks"] = kS, res.config["threads"] = k::dec::kCThreads;
  Runner run{iters, nullptr, res};
  CUDA_CHECK(cudaStreamCreate(&run.stream));
  const Shape none{"none", 24, 384, false};
  run.one<float, kBarrier, false>(none, "none");
  run.one<float, kSync, false>(none, "none");
  for (int R : {16, 24, 72, 96}) {
    const Shape p{"push", R, 384, false};
    run.one<float, kPush, false>(p, "fp32");
  }
  run.sample<false>(256, 40);
  run.sample<true>(256, 40);
  run.sample<false>(256, 256);
  run.sample<true>(256, 256);
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  for (int pieces : {1, 2, 4, 8}) run.copy(16, 147456u, pieces, true);  // the decoder's: fc's fp32 bundle
  run.copy(16, 36864u, 1, true);                                        // proj's
  for (int blocks : {1, 2, 4, 8}) run.copy(blocks, 147456u, 1, true);
  run.copy(16, 147456u, 1, false);
  run.copy(sms, 147456u, 1, false);  // a block on every SM
  for (int K : {2, 4, 8}) run.copy(K * kS, 147456u, 1, true, kS);  // K clusters of 16: K GPCs' ways to L2?
  for (int N : {384, 1536})
    for (int K : {1, 2, 4, 6, 8})
      run.meet<Runner::kCluster>(K, N), run.meet<Runner::kBlock>(K, N), run.meet<Runner::kFlagged>(K, N);
  run.meet<Runner::kBlock>(6, 2304), run.meet<Runner::kFlagged>(6, 2304);  // a cluster a head: 6 partial sums of 384
  run.shapes<float>("fp32");
  run.shapes<__nv_bfloat16>("bf16");
  run.shapes_split();
  for (int t : {100, 127, 255}) run.attention(6, t);  // (100: parts of unequal chunks)
  for (int t : {10, 127, 255}) run.attention(1, t);  // (10: 5 of the 16 parts empty)
  return res.finish("stage_floor", json_path);
}
