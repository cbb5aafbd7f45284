// day50_gpt/nn/kernels/decode_persistent.cuh: the whole generation as one kernel. Every block stays
// resident (a cooperative launch: as many blocks as fit on the GPU at once) and walks the same stages
// as the CUDA-graph path (decode_stages.cuh), with a grid-wide barrier between two stages instead of a
// kernel boundary; the tokens follow each other inside the kernel, so the host launches once for all
// of them. The barrier is cooperative_groups' grid.sync() or, with n.bar set, the hand-written one below.
// With n.resident_at set, each block first copies the weight rows it will use into shared memory: the
// stages then read no weights from L2 (the copy's time is inside the launch, spread over its tokens).
//
// Why it should be faster: a kernel boundary costs the launch, the ramp-up of a new grid and the tail
// of the old one, even inside a CUDA graph; a grid barrier is one atomic per block and a spin on one
// flag (the bench measures both, and with the time stamps below, what each stage costs). The weights are read once per
// token either way (about 21 MB in bf16, which the 50 MB L2 of an H100/H200 can hold from one token to the next).
#pragma once
#include <cooperative_groups.h>

#include "decode_stages.cuh"

namespace k {
namespace dec {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A grid-wide barrier written by hand, the alternative to cooperative_groups' grid.sync() that the bench
// measures against it (alone, and inside the decoder). bar[0] counts arrivals and only grows within a
// launch (zeroed before it); bar[1] is the number of the last barrier every block has reached. Thread 0 of
// each block makes the block's writes visible (__threadfence after the block's __syncthreads), adds
// itself with one atomic, and the block that completes barrier g (arrival g * blocks) publishes g; the
// others spin on bar[1] with acquire loads (a spin that never ends gives up and sets bar[2], so that a
// bug fails the checks instead of hanging; a block that gave up once waits no more in this launch, so a
// broken barrier costs one wait per block, not one per barrier). No block can arrive at barrier g + 1 before every
// block has arrived at g (it is still waiting), so the arrivals of one barrier are never mixed with the next's. The
// counting kind (count true) saves the publishing hop: each block adds itself with a reduction that returns nothing
// (red.release: no round trip to wait for) and spins on the count itself until it reaches g * blocks, so the last
// arrival is seen one L2 trip sooner. What each saves against grid.sync is measured, not assumed: the bench times all
// three alone.
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ bool spin_until(const unsigned* word, unsigned target, unsigned* gave_up) {
  for (unsigned polls = 0; load_acquire(word) < target;)
    if (++polls == (1u << 22)) {  // far beyond any stage's work: a bug; flag it and go on
      atomicExch(gave_up, 1u);
      return false;
    }
  return true;
}
// generation: the barriers this block has passed in this launch; broken: whether it gave up (thread 0's).
__device__ __forceinline__ void grid_barrier(unsigned* bar, unsigned& generation, bool& broken, bool count) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned g = ++generation;
    __threadfence();
    if (count) {
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
      if (!broken) broken = !spin_until(bar, g * gridDim.x, bar + 2);
    } else if (atomicAdd(bar, 1u) + 1 == g * gridDim.x) {
      atomicExch(bar + 1, g);
    } else if (!broken) {
      broken = !spin_until(bar + 1, g, bar + 2);
    }
    __threadfence();
  }
  __syncthreads();
}

// The barrier alone, `iters` times: what one barrier costs with this many blocks (the stages' work
// taken away). kind 0: grid.sync; 1: the hand-written barrier above; 2: its counting kind (a cooperative
// launch either way).
__global__ void __launch_bounds__(kThreads) barrier_only(unsigned* bar, int iters, int kind) {
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  unsigned generation = 0;
  bool broken = false;
  for (int i = 0; i < iters; ++i)
    if (kind > 0)
      grid_barrier(bar, generation, broken, kind == 2);
    else
      grid.sync();
}

// Tokens start .. start + steps - 1 (positions), draws count0 .. count0 + steps - 1 when sampling.
// 5L + 1 barriers a token (4L + 1 with n.ready: qkv and attention merged): the last one after the head, because the
// next token's sampling reads the logits every block wrote a part of.
template <class W>
__global__ void __launch_bounds__(kThreads) decode_persistent(Net<W> n, int start, int count0, int steps) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float red[kWarps];
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const int stages = n.L * kStagesPerLayer + 1;
  const bool stamp = n.trace && blockIdx.x == 0 && threadIdx.x == 0;
  unsigned generation = 0;  // barriers passed in this launch (n.bar)
  bool broken = false;      // a wait at n.bar gave up
  if (stamp) n.trace[0] = global_ns();
  if (n.resident_at) load_resident(n, smem);  // once per launch: every token after reads weights on chip
  for (int i = 0; i < steps; ++i)
    for (int s = 0; s < stages; ++s) {
      run_stage(n, s, start + i, count0 + i, i, smem, red);
      if (n.prefetch && !n.resident_at) prefetch_stage(n, s + 1 == stages ? 0 : s + 1);
      // Makes every block's writes of this stage visible to the next stage's readers; merged, attention
      // waits on its head's rows instead (L barriers a token fewer).
      if (!(n.ready && s % kStagesPerLayer == 0 && s != stages - 1)) {
        if (n.bar)
          grid_barrier(n.bar, generation, broken, n.bar_count);
        else
          grid.sync();
      }
      if (stamp) n.trace[1 + size_t(i) * stages + s] = global_ns();
    }
}

}  // namespace dec
}  // namespace k
