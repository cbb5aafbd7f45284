// day50_gpt/run/copy_allreduce.cuh: the gradient's all-reduce through the copy engines (--collectives copy),
// and ZeRO-1's reduce to the shards' owners and gather of the updated shards (--zero 1).
//
// Why. NCCL's all-reduce is a kernel: each of its channels holds an SM for as long as a bucket is in
// flight. Beside the backward that costs more than those SMs' share of the time: a GEMM launched for all
// the SMs finds some of them taken and finishes with a ragged extra wave. A kernel trace of the large
// model on 2 x H200 (batch 16 per GPU, 25 MiB buckets) showed the backward's GEMMs 12.7% slower than on
// one GPU alone, more than the overlap hid. A GPU also has copy engines, DMA units that move memory over
// NVLink (or PCIe) without any SM. With N GPUs in one process and peer access between them, a bucket's
// all-reduce on GPU r becomes, all of it on r's side stream:
//   1. reduce-scatter: r pulls shard r of the bucket from each other GPU (cudaMemcpyPeerAsync: a copy engine);
//   2. r averages its N copies of shard r in one short kernel (k::shard_mean, a memory-bound pass);
//   3. all-gather: r pulls each other shard, averaged, from the GPU that owns it.
// Only step 2 takes SMs, for one pass over 1/N of the bucket.
//
// The GPUs wait for each other with events: r's stream waits for GPU p's event before it reads p's
// memory. A wait applies to the event's latest record, so the record must be enqueued first: the host
// threads meet at a barrier between "record" and "wait" (they enqueue far ahead of the GPUs, so a meeting
// costs microseconds of host time, not GPU time). Three events per GPU: `ready` (its bucket is written),
// `reduced` (its shard is averaged) and `done` (at the end of the step, it has finished reading the others).
// Each memory region is written only after every reader of its old value has been waited for:
//   - p's shard r (read by r in step 1) is overwritten by p's step 3, which waits for r's `reduced`,
//     recorded after r's step 1;
//   - the next step's backward overwrites the gradient, and the step's end waits for every `done`.
//
// ZeRO-1 on the copy engines (--zero 1, reduce_to_owners and gather_params below). Each GPU owns one
// contiguous shard of the parameters (dp_plan.h's ShardPlan, as NCCL's ZeRO-1 path) and keeps AdamW's
// m and v for it alone. A bucket's pieces are pulled only by their owner, which averages them (step 1
// and 2 above, no step 3): nobody needs the others' averaged gradient. After the backward each GPU
// updates its shard (half of AdamW's memory traffic on two GPUs), then pulls the others' updated shards,
// fp32 and bf16, block by block in the forward's order. Nothing waits for those copies but the next
// step's forward, block by block (Replica::block_forward), so they run beside it. Two more events:
//   - `updated` (its shard is written by AdamW): the others pull it only after that;
//   - `pulled` (it has copied the others' shards): the others' next AdamW overwrites their shard only
//     after that.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../nn/kernels/adamw.cuh"
#include "../nn/kernels/shard_mean.cuh"
#include "../nn/kernels/spin.cuh"
#include "../nn/types.cuh"
#include "../dp_plan.h"

namespace dp {

// The replicas' host threads meet here: nobody leaves until all have arrived. It spins: a bucket makes
// its threads meet twice, a step a few dozen times, and a thread put to sleep on a condition variable
// takes tens of microseconds to wake, time in which its GPU's stream may run dry (eager steps are
// enqueued just ahead of the GPU). The threads are few (one per GPU), so spinning costs no core
// that anything else needed.
class HostBarrier {
 public:
  explicit HostBarrier(int n) : n_(n) {}
  void wait() {
    const unsigned gen = gen_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);
      gen_.store(gen + 1, std::memory_order_release);  // the last to arrive lets everyone go
      return;
    }
    for (unsigned spins = 0; gen_.load(std::memory_order_acquire) == gen; ++spins)
      if (spins > (1u << 20))  // a peer thread is busy elsewhere (printing, a file): stop burning the core
        std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

 private:
  const int n_;
  alignas(64) std::atomic<int> arrived_{0};  // the two on their own cache lines: arrivals do not
  alignas(64) std::atomic<unsigned> gen_{0};  // disturb the spinning readers' line until the release
};

// What the GPUs of one process share: each rank's events and the array its peers read.
struct CopyWorld {
  struct Rank {
    const char* base = nullptr;  // the array the others read: the fp32 gradient, or its bf16 staging
    const float* params = nullptr;  // ZeRO-1: the weights the others pull this rank's shard of
    const char* params_t = nullptr;  // and their bf16 copy (null in the fp32 model)
    cudaEvent_t ready = nullptr, reduced = nullptr, done = nullptr, updated = nullptr, pulled = nullptr;
  };
  explicit CopyWorld(int n) : n(n), barrier(n), ranks(size_t(n)) {}
  const int n;
  HostBarrier barrier;
  std::vector<Rank> ranks;
};

// Whether every pair of GPUs 0..n-1 can read each other's memory: "" or why not (gpt.cu asks before
// any GPU work, so that a refusal is a usage error).
inline std::string peer_access_missing(int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      int ok = 0;
      if (i != j && (cudaDeviceCanAccessPeer(&ok, i, j) != cudaSuccess || !ok))
        return "GPU " + std::to_string(i) + " cannot read GPU " + std::to_string(j) + "'s memory (no peer access)";
    }
  return "";
}
// Peer access from the current GPU (`rank`) to the others. Enabling it again is not an error here.
inline void enable_peer_access(int rank, int n) {
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled)
      (void)cudaGetLastError();
    else
      CUDA_CHECK(e);
  }
}

// One GPU's end of the copy all-reduce. Collective: every rank calls all_reduce for the same buckets in
// the same order, and finish once per step.
class CopyPort {
 public:
  CopyPort() = default;
  CopyPort(const CopyPort&) = delete;
  CopyPort& operator=(const CopyPort&) = delete;
  ~CopyPort() {
    if (w_) {
      Rank& me = w_->ranks[size_t(rank_)];
      cudaEventDestroy(me.ready), cudaEventDestroy(me.reduced), cudaEventDestroy(me.done);
      cudaEventDestroy(me.updated), cudaEventDestroy(me.pulled);
    }
  }

  // On this rank's thread, its device current.
  void open(CopyWorld* w, int rank) {
    w_ = w, rank_ = rank;
    enable_peer_access(rank, w->n);
    Rank& me = w_->ranks[size_t(rank)];
    for (cudaEvent_t* e : {&me.ready, &me.reduced, &me.done, &me.updated, &me.pulled})
      CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  }
  bool on() const { return w_ != nullptr; }
  // How many buckets this end has all-reduced (the checks ask that the copy engines did run).
  size_t reduced() const { return reduced_; }

  // The arrays: the fp32 gradient, and with bf16 collectives the staging (what the others read);
  // scratch for the other ranks' copies of this rank's largest shard.
  // Shard q of [lo, hi): from shard_begin(q) to shard_begin(q + 1). The inner boundaries are rounded down
  // to kAlign elements (256 bytes in fp32), so that every shard but the first starts aligned for the
  // copy engines and the kernel; a shard may be empty (a bucket of fewer than N x kAlign elements).
  static constexpr size_t kAlign = 64;
  size_t shard_begin(size_t lo, size_t hi, int q) const {
    if (q <= 0) return lo;
    if (q >= w_->n) return hi;
    const size_t at = (lo + (hi - lo) * size_t(q) / size_t(w_->n)) / kAlign * kAlign;
    return std::max(lo, at);
  }

  // piece_cap > 0 (ZeRO-1): a piece is a bucket's overlap with one rank's shard, so a slot holds the
  // smaller of the largest bucket and a shard (piece_cap).
  void attach(float* grads, bf16* stage, size_t largest_bucket, size_t piece_cap = 0) {
    grads_ = grads, stage_ = stage;
    const size_t esz = stage ? sizeof(bf16) : sizeof(float);
    // The largest shard: 1/N of the largest bucket, plus what the rounding of its ends can add; slots
    // kAlign-aligned too.
    cap_ = ((piece_cap ? std::min(largest_bucket, piece_cap) : largest_bucket / size_t(w_->n) + 2 * kAlign) + kAlign -
            1) / kAlign * kAlign;
    scratch_.alloc(std::max<size_t>(1, size_t(w_->n - 1) * cap_ * esz));
    w_->ranks[size_t(rank_)].base = stage ? reinterpret_cast<const char*>(stage) : reinterpret_cast<const char*>(grads);
  }

  // Elements [lo, hi) of the gradient (already cast to the staging in bf16) averaged over the ranks,
  // on stream s; the fp32 gradient holds the mean afterwards on every rank.
  void all_reduce(size_t lo, size_t hi, cudaStream_t s) {
    const int n = w_->n;
    const size_t esz = stage_ ? sizeof(bf16) : sizeof(float);
    const auto shard = [&](int q) { return shard_begin(lo, hi, q); };
    const size_t m0 = shard(rank_), count = shard(rank_ + 1) - m0;
    Rank& me = w_->ranks[size_t(rank_)];
    char* mine = const_cast<char*>(me.base);
    ++reduced_;
    CUDA_CHECK(cudaEventRecord(me.ready, s));
    w_->barrier.wait();  // every rank's `ready` is recorded
    pull_and_average(m0, count, s);
    CUDA_CHECK(cudaEventRecord(me.reduced, s));
    w_->barrier.wait();  // every rank's `reduced` is recorded (and every wait on `ready` enqueued)
    for (int p = 0; p < n; ++p) {
      if (p == rank_) continue;
      const size_t b = shard(p), c = shard(p + 1) - b;
      CUDA_CHECK(cudaStreamWaitEvent(s, w_->ranks[size_t(p)].reduced, 0));
      if (!c) continue;
      CUDA_CHECK(cudaMemcpyPeerAsync(mine + b * esz, rank_, w_->ranks[size_t(p)].base + b * esz, p, c * esz, s));
      if (stage_) {
        k::widen<<<grid_for(c), 256, 0, s>>>(stage_ + b, grads_ + b, c);
        LAUNCH_CHECK();
      }
    }
  }

  // ZeRO-1: the weights the others pull this rank's shard of (after any reallocation of them).
  // Collective (every rank attaches a new model at the same point): the meeting first, so that no rank
  // is still enqueueing a gather from the old pointers while they change.
  void attach_params(const float* params, const void* params_t) {
    w_->barrier.wait();
    Rank& me = w_->ranks[size_t(rank_)];
    me.params = params, me.params_t = static_cast<const char*>(params_t);
  }

  // ZeRO-1: the bucket's pieces (dp_plan.h's bucket_pieces: [begin, end) and the rank that owns it),
  // each averaged over the ranks into its owner's gradient only. Steps 1 and 2 of all_reduce for the
  // pieces this rank owns; the others' are pulled from here by their owners. One meeting, where
  // all_reduce has two: a rank that owns nothing of this bucket may record `ready` for the next one
  // before a peer has enqueued its wait for this one; that wait then binds to the newer record, which
  // only waits longer (for this rank's next block), never too little, and cannot close a cycle.
  void reduce_to_owners(const std::vector<Piece>& pieces, cudaStream_t s) {
    Rank& me = w_->ranks[size_t(rank_)];
    ++reduced_;
    CUDA_CHECK(cudaEventRecord(me.ready, s));
    w_->barrier.wait();  // every rank's `ready` is recorded
    for (const Piece& pc : pieces)
      if (pc.root == rank_ && pc.end > pc.begin) pull_and_average(pc.begin, pc.end - pc.begin, s);
  }
  // ZeRO-1, before this rank's AdamW writes its shard (on the compute stream `c`): the others have
  // finished pulling the last update of it. The meeting after the waits: nobody records `pulled` again
  // before every wait on its last record is enqueued.
  void before_update(cudaStream_t c) {
    for (int p = 0; p < w_->n; ++p)
      if (p != rank_) CUDA_CHECK(cudaStreamWaitEvent(c, w_->ranks[size_t(p)].pulled, 0));
    w_->barrier.wait();
  }
  // ZeRO-1, after this rank's AdamW (enqueued on the compute stream `c`): stream s (which already
  // waits for `c`) waits for every other rank's AdamW ...
  void before_gather(cudaStream_t c, cudaStream_t s) {
    CUDA_CHECK(cudaEventRecord(w_->ranks[size_t(rank_)].updated, c));
    w_->barrier.wait();  // every rank's `updated` is recorded
    for (int p = 0; p < w_->n; ++p)
      if (p != rank_) CUDA_CHECK(cudaStreamWaitEvent(s, w_->ranks[size_t(p)].updated, 0));
  }
  // ... then pulls their updated shards, fp32 and bf16, one range of `ranges` (the forward's order) at a
  // time, recording ranges_done[i] after range i; `pulled` at the end.
  // hold > 0 (the checks only): a kernel spins that many nanoseconds before each range's copies, so every
  // range lands later than the next forward would reach it without its wait.
  void gather_params(const std::vector<std::pair<size_t, size_t>>& ranges, const ShardPlan& shards, float* params,
                     char* params_t, size_t tsz, const std::vector<cudaEvent_t>& ranges_done, cudaStream_t s,
                     unsigned long long hold = 0) {
    Rank& me = w_->ranks[size_t(rank_)];
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (hold > 0) {
        k::spin_ns<<<1, 1, 0, s>>>(hold);
        LAUNCH_CHECK();
      }
      for (int p = 0; p < w_->n; ++p) {
        if (p == rank_) continue;
        const size_t a = std::max(ranges[i].first, shards.begin(p)), b = std::min(ranges[i].second, shards.end(p));
        if (a >= b) continue;
        const Rank& peer = w_->ranks[size_t(p)];
        CUDA_CHECK(cudaMemcpyPeerAsync(params + a, rank_, peer.params + a, p, (b - a) * sizeof(float), s));
        if (params_t)
          CUDA_CHECK(cudaMemcpyPeerAsync(params_t + a * tsz, rank_, peer.params_t + a * tsz, p, (b - a) * tsz, s));
      }
      CUDA_CHECK(cudaEventRecord(ranges_done[i], s));
    }
    CUDA_CHECK(cudaEventRecord(me.pulled, s));
  }
  // All ranks' host threads meet (collective).
  void meet() { w_->barrier.wait(); }
  // Stream c waits until this rank's last gather_params has landed (before the host reads the weights).
  void settle(cudaStream_t c) { CUDA_CHECK(cudaStreamWaitEvent(c, w_->ranks[size_t(rank_)].pulled, 0)); }

  // The step's end: stream s waits until every rank has finished reading this rank's arrays (and this
  // rank theirs), so the next step may overwrite the gradient.
  void finish(cudaStream_t s) {
    CUDA_CHECK(cudaEventRecord(w_->ranks[size_t(rank_)].done, s));
    w_->barrier.wait();
    for (int p = 0; p < w_->n; ++p)
      if (p != rank_) CUDA_CHECK(cudaStreamWaitEvent(s, w_->ranks[size_t(p)].done, 0));
    w_->barrier.wait();  // nobody records `done` again (next step) before every wait on it is enqueued
  }

 private:
  using Rank = CopyWorld::Rank;
  // Steps 1 and 2 for elements [m0, m0 + count) owned here: wait for every other rank's `ready`, pull
  // its copy of them into a scratch slot (one per other rank, in rank order), then average all N copies
  // into this rank's gradient (and its bf16 staging). With count 0 only the waits are enqueued.
  void pull_and_average(size_t m0, size_t count, cudaStream_t s) {
    const int n = w_->n;
    const size_t esz = stage_ ? sizeof(bf16) : sizeof(float);
    int slot = 0;
    for (int p = 0; p < n; ++p) {
      if (p == rank_) continue;
      const Rank& peer = w_->ranks[size_t(p)];
      CUDA_CHECK(cudaStreamWaitEvent(s, peer.ready, 0));
      if (count)
        CUDA_CHECK(cudaMemcpyPeerAsync(scratch_.as<char>() + size_t(slot) * cap_ * esz, rank_, peer.base + m0 * esz, p,
                                       count * esz, s));
      ++slot;
    }
    if (!count) return;
    const int g = grid_for(count);
    if (stage_)
      (n == 2 ? k::shard_mean<bf16, 2> : k::shard_mean<bf16, 0>)<<<g, 256, 0, s>>>(
          stage_ + m0, scratch_.as<bf16>(), cap_, n, rank_, count, stage_ + m0, grads_ + m0);
    else
      (n == 2 ? k::shard_mean<float, 2> : k::shard_mean<float, 0>)<<<g, 256, 0, s>>>(
          grads_ + m0, scratch_.as<float>(), cap_, n, rank_, count, nullptr, grads_ + m0);
    LAUNCH_CHECK();
  }
  CopyWorld* w_ = nullptr;
  int rank_ = 0;
  float* grads_ = nullptr;
  bf16* stage_ = nullptr;
  size_t cap_ = 0, reduced_ = 0;
  DeviceBuffer scratch_;
};

}  // namespace dp
