// day50_gpt/run/data_parallel.cuh: one GPU's part in data-parallel training, through NCCL or the copy
// engines (run/copy_allreduce.cuh).
//
// Every GPU holds the whole model (a replica) and takes its own slice of each global batch. After the
// backward, each replica's gradient is the mean over its slice; NCCL's all-reduce (ncclAvg) turns it
// into the mean over the global batch, on every GPU at once, so every replica takes the same AdamW
// step and the weights stay identical without ever being sent. The gradient is all-reduced in
// buckets (dp_plan.h) on a second CUDA stream, each bucket as soon as the backward has finished it,
// so the communication of the last blocks overlaps the backward of the first ones.
//
// Two ways to start the replicas, both here:
//   - one process, one thread per GPU (--gpus N): ncclCommInitAll makes the N communicators at once;
//   - one process per GPU (--world N --rank R --id-file PATH), on one host or several: rank 0 makes
//     NCCL's unique id and publishes it; every rank joins with ncclCommInitRank.
// NVLink SHARP (multicast) stays off: NCCL_NVLS_ENABLE=0 is set unless the user set it (see the notes).
#pragma once

#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../dp_plan.h"
#include "../nn/kernels/adamw.cuh"
#include "../nn/types.cuh"
#include "check.cuh"
#include "copy_allreduce.cuh"
#include "dp_timeline.cuh"
#include "stream_gate.cuh"

#define NCCL_CHECK(call)                                                                                        \
  do {                                                                                                          \
    const ncclResult_t r_ = (call);                                                                             \
    if (r_ != ncclSuccess) {                                                                                    \
      std::fprintf(stderr, "error: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
      std::exit(1);                                                                                             \
    }                                                                                                           \
  } while (0)

namespace dp {

// NVLink SHARP lets the switch reduce in the network; on a shared machine a program using it can
// take the GPUs out of service, so it stays off unless the user asked for it.
inline void nvls_off() { setenv("NCCL_NVLS_ENABLE", "0", 0); }

inline std::string nccl_version() {
  int v = 0;
  NCCL_CHECK(ncclGetVersion(&v));
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

// What a replica does with the gradient, beyond its buckets' size (from TrainOptions).
struct Settings {
  size_t bucket_bytes = size_t(25) << 20, first_bytes = 0;
  Order order = Order::kBackward;
  bool bf16 = false;  // the collectives carry bf16 (cast from the fp32 gradient, widened back after)
  int zero = 0;       // 1: ZeRO-1 (gradient reduced to its shard's owner, AdamW per shard, all-gather)
  bool copy = false;  // the buckets summed through the copy engines (run/copy_allreduce.cuh), not NCCL
  // ZeRO-1 on the copy engines, the checks only: hold each range of the gather back this many ns;
  // skip the forward's wait for one range (TrainOptions::test_gather_delay_ns, test_skip_range_wait)
  unsigned long long gather_delay = 0;
  int skip_range_wait = -1;
};

// One replica's link to the others: its communicator, the side stream the collectives run on, and
// the bucket plan of the gradient. All calls are collective: every replica makes them in the same
// order (NCCL matches the n-th collective of one rank with the n-th of the others).
class Replica {
 public:
  const int rank, world;

  // copy_world: the process's replicas' shared state for --collectives copy (run_threads makes one;
  // a process of one rank has none, and --collectives copy is refused there).
  Replica(ncclComm_t comm, int rank_, int world_, CopyWorld* copy_world = nullptr)
      : rank(rank_), world(world_), comm_(comm), copy_world_(copy_world) {
    // Non-blocking: the legacy default stream, where the model's kernels run, does not wait for it
    // (nor it for the default stream) except where the events below say so. High priority: when a
    // backward kernel's blocks finish, the all-reduce's blocks get the freed SMs first instead of
    // queueing behind the next GEMM's (NCCL's kernel keeps its few SMs until the bucket is done).
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, greatest));

    CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc(&scalars_, 4 * sizeof(float)));
  }
  ~Replica() {
    for (cudaEvent_t e : range_done_) cudaEventDestroy(e);
    cudaFree(scalars_);
    cudaEventDestroy(done_), cudaEventDestroy(ready_), cudaStreamDestroy(side_);
    ncclCommDestroy(comm_);
  }
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // The plan over `total` parameters. With ZeRO-1 the caller (dp::attach) pads the gradient and
  // parameter arrays to shards().padded elements before handing the gradient over with set_grads().
  void plan(const gpt::Config& c, const Settings& s) {
    set_ = s;
    if (s.copy && !port_.on()) {
      if (!copy_world_) {
        std::fprintf(stderr, "error: --collectives copy needs --gpus N (one process)\n");
        std::exit(1);
      }
      port_.open(copy_world_, rank);
    }
    // The copy engines' side stream at the lowest priority: its kernels (the averaging, bf16's casts)
    // then take the SMs the backward leaves free instead of running ahead of the next GEMM. Traced on
    // 2 x H200 (the large model), the lowest saved 0.3 ms a step while the host threads met on a
    // condition variable, and made no difference once they spun (HostBarrier): it stays, as the order
    // that fits. NCCL's side stream keeps the highest (the constructor's): its kernel holds its SMs
    // until the bucket is done, so it should start as soon as it can.
    if (s.copy != side_low_) {
      int least = 0, greatest = 0;
      CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      CUDA_CHECK(cudaStreamSynchronize(side_));
      CUDA_CHECK(cudaStreamDestroy(side_));
      CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, s.copy ? least : greatest));
      side_low_ = s.copy;
    }
    buckets_ = plan_buckets(c, s.bucket_bytes, s.first_bytes, s.order), next_ = 0, layers_ = c.layers;
    shards_ = plan_shards(gpt::Layout(c).total, world);
    // ZeRO-1 on the copy engines: the ranges the next forward reads one after the other (the embeddings,
    // then each block, the last with the final LayerNorm), each with the event its gather records.
    ranges_.clear();
    if (s.copy && s.zero) {
      ranges_ = gpt::Layout(c).forward_ranges();
      while (range_done_.size() < ranges_.size()) {
        cudaEvent_t e;
        CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        range_done_.push_back(e);
      }
    }
    total_ = shards_.total;
    const size_t elems = s.zero ? shards_.padded : total_;
    if (s.bf16) {
      stage_.alloc(elems * sizeof(bf16));
      CUDA_CHECK(cudaMemset(stage_.as(), 0, stage_.bytes()));  // the padding stays zero
    }
  }
  void set_grads(float* grads) {
    grads_ = grads;
    if (set_.copy) {
      size_t largest = 0;
      for (const Bucket& b : buckets_) largest = std::max(largest, b.end - b.begin);
      port_.attach(grads, set_.bf16 ? stage_.as<bf16>() : nullptr, largest, zero() ? shards_.shard : 0);
    }
  }
  // ZeRO-1 on the copy engines: the weights (fp32, padded like the gradient) and their copy in the
  // step's type (tsz bytes an element; null in the fp32 model), whose other shards gather() pulls.
  void set_params(float* params, void* params_t, size_t tsz) {
    params_ = params, params_t_ = static_cast<char*>(params_t), tsz_ = tsz;
    if (copy_zero()) port_.attach_params(params, params_t);
  }
  bool copy_zero() const { return set_.copy && zero(); }

  // ZeRO-1 on the copy engines, the optimizer step around this rank's AdamW (on the compute stream):
  // before it, wait until the others have pulled this rank's last update; after it, pull theirs on the
  // side stream, range by range. Nothing waits here for those copies: the next forward waits for each
  // range as it reaches it (block_forward), and settle() for all of them.
  void before_update() { port_.before_update(0); }
  void gather() {
    log_.point("AdamW on this rank's shard");
    fork_side();  // after this rank's AdamW: its own shard is final, the others' ranges are free to overwrite
    port_.before_gather(0, side_);  // and after the others' AdamW (the interval below starts there)
    log_.open(side_, "gather the others' shards (beside the next forward)");
    port_.gather_params(ranges_, shards_, params_, params_t_, tsz_, range_done_, side_, set_.gather_delay);
    log_.close(side_);
    ++gathers_;
  }
  // The forward is about to read range r (0: the embeddings, 1 + l: block l): wait for its gather.
  void block_forward(int r) {
    if (r == set_.skip_range_wait) return;  // the checks' negative control only
    if (copy_zero() && size_t(r) < range_done_.size()) CUDA_CHECK(cudaStreamWaitEvent(0, range_done_[size_t(r)], 0));
  }
  // Before the host reads or overwrites the weights: the last gather has landed.
  void settle() {
    if (copy_zero()) port_.settle(0);
  }
  // Before a replica's model is freed outside the usual end (a run stopped by a NaN loss): every rank
  // has finished pulling from this one and this one from them. Collective. (The usual end needs none:
  // an NCCL collective on the side stream, after the last gather on every rank, comes first.)
  void quiesce() {
    if (!copy_zero()) return;
    // Each rank's pulls run on its own side stream: once every rank has drained its streams and met
    // here, every pull of every rank has landed (no event involved: a wait enqueued now might bind to a
    // peer's `pulled` of the step before, if that peer has not yet recorded its last one).
    CUDA_CHECK(cudaStreamSynchronize(0));
    CUDA_CHECK(cudaStreamSynchronize(side_));
    port_.meet();
  }
  // The checks' evidence that ZeRO-1 ran on the copy engines: the gathers enqueued.
  size_t copy_gathers() const { return gathers_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const ShardPlan& shards() const { return shards_; }
  bool zero() const { return set_.zero > 0; }
  size_t staging_bytes() const { return stage_.bytes(); }

  // Bench: log every step while on (run/dp_timeline.cuh): the last step's timeline is log(), its
  // collectives' own times last_comm_ms(). Off, a step records no events.
  void time_buckets(bool on) { timed_ = on; }
  const EventLog& log() const { return log_; }
  void step_begin() { log_.begin_step(timed_); }
  void mark(const std::string& label, bool busy = true) { log_.point(label, busy); }

  // The backward calls this when block l's gradients are enqueued (l = -1: the end of the backward).
  // Every bucket that was waiting for block l starts on the side stream, after what the compute
  // stream has enqueued so far.
  void block_done(int l) {
    if (log_.on())  // the last block's interval also holds the output head's and the final LayerNorm's backward
      log_.point(l < 0              ? "embeddings backward"
                 : l == layers_ - 1 ? "output head + block " + std::to_string(l) + " backward"
                                    : "block " + std::to_string(l) + " backward");
    while (next_ < buckets_.size() && buckets_[next_].after_block == l) launch(next_++);
  }

  // After the backward: the buckets not yet started, the step's loss (each replica's loss is the mean
  // over its slice; their mean is the global batch's), and the compute stream waits for all of it
  // before the optimizer reads the gradient.
  void finish(float* loss) {
    while (next_ < buckets_.size()) launch(next_++);
    if (set_.copy) port_.finish(side_);  // the others are done reading this GPU's gradient, and it theirs
    log_.open(side_, "loss all-reduce");
    NCCL_CHECK(ncclAllReduce(loss, loss, 1, ncclFloat, ncclAvg, comm_, side_));
    log_.close(side_);
    join_side();
    log_.point("waiting for the gradient", false);
    next_ = 0;
  }

  // ZeRO-1, inside the optimizer step: the global squared gradient norm from each rank's sum over its
  // shard (an all-reduce of one float; every rank gets the same bits, so all clip alike).
  void sum_over_ranks(float* x) {
    log_.point("sum of squares over the shard");
    fork_side();
    log_.open(side_, "norm all-reduce");
    NCCL_CHECK(ncclAllReduce(x, x, 1, ncclFloat, ncclSum, comm_, side_));
    log_.close(side_);
    join_side();
    log_.point("waiting for the norm", false);
  }
  // ZeRO-1, after AdamW: every rank's updated shard to every rank (in place: this rank's shard is
  // already where the gathered array puts it).
  void gather_params(float* params) {
    fork_side();
    log_.open(side_, "all-gather parameters");
    NCCL_CHECK(ncclAllGather(params + size_t(rank) * shards_.shard, params, shards_.shard, ncclFloat, comm_, side_));
    log_.close(side_);
    join_side();
    log_.point("waiting for the parameters", false);
  }
  // ZeRO-1, for a checkpoint: the whole of a sharded array (m or v, `shard` elements here) on every
  // rank, `total` elements. Collective: every rank calls it, so every rank can write the file.
  std::vector<float> gather_shards(const float* shard) {
    DeviceBuffer all(shards_.padded * sizeof(float));
    fork_side();
    NCCL_CHECK(ncclAllGather(shard, all.as<float>(), shards_.shard, ncclFloat, comm_, side_));
    CUDA_CHECK(cudaStreamSynchronize(side_));
    return to_host(all.as<float>(), total_);
  }

  // The collectives' milliseconds in the last step (bench; synchronizes): the log's NCCL intervals.
  std::vector<double> last_comm_ms() const {
    std::vector<double> ms;
    for (const Interval& i : log_.comm()) ms.push_back(i.end - i.start);
    return ms;
  }

  // The mean of a host value over the replicas (validation loss: each replica scores its slice).
  double mean(double x) {
    const float v = float(x);
    CUDA_CHECK(cudaMemcpy(scalars_, &v, sizeof v, cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclAllReduce(scalars_, scalars_, 1, ncclFloat, ncclAvg, comm_, side_));
    float out = 0;
    CUDA_CHECK(cudaStreamSynchronize(side_));
    CUDA_CHECK(cudaMemcpy(&out, scalars_, sizeof out, cudaMemcpyDeviceToHost));
    return out;
  }

  // Whether a value computed on the GPU (on the compute stream) is the same on every replica: its
  // max and its min over the replicas must be equal. Returns {equal, the value here}.
  std::pair<bool, float> same_everywhere(const float* value) {
    fork_side();
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclAllReduce(value, scalars_, 1, ncclFloat, ncclMax, comm_, side_));
    NCCL_CHECK(ncclAllReduce(value, scalars_ + 1, 1, ncclFloat, ncclMin, comm_, side_));
    NCCL_CHECK(ncclGroupEnd());
    CUDA_CHECK(cudaMemcpyAsync(scalars_ + 2, value, sizeof(float), cudaMemcpyDeviceToDevice, side_));
    float h[3];
    CUDA_CHECK(cudaStreamSynchronize(side_));
    CUDA_CHECK(cudaMemcpy(h, scalars_, sizeof h, cudaMemcpyDeviceToHost));
    return {h[0] == h[1], h[2]};
  }

  // Bench, --collectives copy: the copy engines' all-reduce of the largest bucket alone, on idle GPUs
  // (collective; the gradient ends averaged, as after a step): the median ms of one all-reduce with its
  // step-end meeting, the bf16 cast included. The reps are enqueued behind a gate (run/stream_gate.cuh)
  // and run back to back: timed one by one, an idle GPU would wait for each rep's host-side meetings
  // and calls, and the figure would be the host's pace.
  double time_copy_bucket_ms(int reps) {
    size_t lo = 0, hi = 0;
    for (const Bucket& b : buckets_)
      if (b.end - b.begin > hi - lo) lo = b.begin, hi = b.end;
    const auto one = [&] {
      if (set_.bf16) {
        k::convert<bf16><<<grid_for(hi - lo), 256, 0, side_>>>(grads_ + lo, stage_.as<bf16>() + lo, hi - lo);
        LAUNCH_CHECK();
      }
      port_.all_reduce(lo, hi, side_);
      port_.finish(side_);
    };
    fork_side();  // after everything the compute stream has enqueued (the last step's gradient)
    for (int i = 0; i < 3; ++i) one();  // warm-up
    std::vector<cudaEvent_t> ev(size_t(reps) + 1);
    for (cudaEvent_t& e : ev) CUDA_CHECK(cudaEventCreate(&e));
    StreamGate gate;
    gate.hold(side_);
    CUDA_CHECK(cudaEventRecord(ev[0], side_));
    for (int i = 0; i < reps; ++i) {
      one();
      CUDA_CHECK(cudaEventRecord(ev[size_t(i) + 1], side_));
    }
    gate.release();
    CUDA_CHECK(cudaEventSynchronize(ev.back()));
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      float x = 0;
      CUDA_CHECK(cudaEventElapsedTime(&x, ev[size_t(i)], ev[size_t(i) + 1]));
      ms.push_back(x);
    }
    for (cudaEvent_t e : ev) cudaEventDestroy(e);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  // --collectives copy: the buckets this replica's copy engines have all-reduced (the checks' evidence).
  size_t copy_reduced() const { return port_.reduced(); }

  // Bench: NCCL alone, on idle GPUs: the median time of an all-reduce (ncclAvg, fp32) of `bytes`.
  double time_allreduce_ms(float* buf, size_t bytes, int reps) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    std::vector<double> ms;
    for (int i = -3; i < reps; ++i) {  // three warm-ups: NCCL sets up its channels on first use
      CUDA_CHECK(cudaEventRecord(a, side_));
      NCCL_CHECK(ncclAllReduce(buf, buf, bytes / sizeof(float), ncclFloat, ncclAvg, comm_, side_));
      CUDA_CHECK(cudaEventRecord(b, side_));
      CUDA_CHECK(cudaEventSynchronize(b));
      float x = 0;
      CUDA_CHECK(cudaEventElapsedTime(&x, a, b));
      if (i >= 0) ms.push_back(x);
    }
    cudaEventDestroy(a), cudaEventDestroy(b);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

 private:
  // The side stream waits for what the compute stream has enqueued so far; and back.
  void fork_side() {
    CUDA_CHECK(cudaEventRecord(ready_, 0));
    CUDA_CHECK(cudaStreamWaitEvent(side_, ready_, 0));
  }
  void join_side() {
    CUDA_CHECK(cudaEventRecord(done_, side_));
    CUDA_CHECK(cudaStreamWaitEvent(0, done_, 0));
  }
  std::string bucket_label(size_t i) const {
    const Bucket& b = buckets_[i];
    char s[96];
    std::snprintf(s, sizeof s, "bucket %zu (%.1f MB%s)", i, double(b.end - b.begin) * 4e-6,
                  zero() ? ", to its shards' owners" : "");
    return s;
  }
  // Bucket i's collective: an all-reduce (plain data parallelism), or with ZeRO-1 a reduce of each of
  // its pieces to the rank that owns it (one reduce-scatter when one bucket holds everything); in bf16
  // the bucket is cast to the staging buffer first and the result widened back into the gradient.
  void launch(size_t i) {
    const Bucket& b = buckets_[i];
    fork_side();  // the compute stream's work so far: this bucket's gradients
    log_.open(side_, bucket_label(i));
    const bool whole = zero() && b.begin == 0 && b.end == total_;
    const size_t lo = b.begin, hi = whole ? shards_.padded : b.end, n = hi - lo;
    void* buf = grads_ + lo;
    const ncclDataType_t type = set_.bf16 ? ncclBfloat16 : ncclFloat;
    if (set_.bf16) {
      k::convert<bf16><<<grid_for(n), 256, 0, side_>>>(grads_ + lo, stage_.as<bf16>() + lo, n);
      LAUNCH_CHECK();
      buf = stage_.as<bf16>() + lo;
    }
    if (set_.copy) {  // the copy engines (run/copy_allreduce.cuh)
      if (zero())       // ZeRO-1: each piece to its owner only
        port_.reduce_to_owners(bucket_pieces(Bucket{lo, b.end, b.after_block}, shards_), side_);
      else
        port_.all_reduce(lo, b.end, side_);
      log_.close(side_);
      return;
    }
    const size_t esz = set_.bf16 ? sizeof(bf16) : sizeof(float);
    char* base = static_cast<char*>(buf) - lo * esz;  // element 0 of the array `buf` points into
    const size_t S = shards_.shard, mine = size_t(rank) * S;
    if (!zero()) {
      NCCL_CHECK(ncclAllReduce(buf, buf, n, type, ncclAvg, comm_, side_));
      widen(lo, n);
    } else if (whole) {
      NCCL_CHECK(ncclReduceScatter(base, base + mine * esz, S, type, ncclAvg, comm_, side_));
      widen(mine, S);
    } else {
      NCCL_CHECK(ncclGroupStart());
      for (const Piece& p : bucket_pieces(b, shards_)) {
        void* at = base + p.begin * esz;
        NCCL_CHECK(ncclReduce(at, at, p.end - p.begin, type, ncclAvg, p.root, comm_, side_));
      }
      NCCL_CHECK(ncclGroupEnd());
      for (const Piece& p : bucket_pieces(b, shards_))
        if (p.root == rank) widen(p.begin, p.end - p.begin);
    }
    log_.close(side_);
  }
  // bf16 collectives: the reduced elements [at, at + n) back into the fp32 gradient.
  void widen(size_t at, size_t n) {
    if (!set_.bf16 || !n) return;
    k::widen<<<grid_for(n), 256, 0, side_>>>(stage_.as<bf16>() + at, grads_ + at, n);
    LAUNCH_CHECK();
  }

  ncclComm_t comm_;
  cudaStream_t side_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  float* scalars_ = nullptr;
  Settings set_;
  std::vector<Bucket> buckets_;
  ShardPlan shards_;
  size_t next_ = 0, total_ = 0;
  int layers_ = 0;
  float* grads_ = nullptr;
  DeviceBuffer stage_;  // bf16 collectives: the gradient in bf16
  CopyWorld* copy_world_ = nullptr;
  CopyPort port_;          // --collectives copy: this GPU's end of the copy-engine all-reduce
  // ZeRO-1 on the copy engines: the forward's ranges, their gathers' events, the weights
  std::vector<std::pair<size_t, size_t>> ranges_;
  std::vector<cudaEvent_t> range_done_;
  float* params_ = nullptr;
  char* params_t_ = nullptr;
  size_t tsz_ = 0, gathers_ = 0;
  bool side_low_ = false;  // the side stream is at the lowest priority (the copy engines')
  EventLog log_;
  bool timed_ = false;
};

// NCCL's channels. A collective is split over channels, each one CTA (a thread block on one SM) that
// moves its slice through its own buffers and links. More channels: more bandwidth, until the links
// are full; but every channel's SM is taken from the backward's GEMMs for as long as the collective
// runs (a 132-SM H100/H200 gives up 1/132 of its compute per channel). Fewer channels leave the GEMMs
// more SMs and make each all-reduce slower: with the all-reduces hidden behind the backward, that can
// be the better trade. The environment variables that set it (recorded in the results when set):
inline const std::vector<const char*>& nccl_settings() {
  static const std::vector<const char*> v = {
      "NCCL_NVLS_ENABLE", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_NCHANNELS_PER_NET_PEER",
      "NCCL_MAX_CTAS",    "NCCL_MIN_CTAS",      "NCCL_ALGO",          "NCCL_PROTO"};
  return v;
}
// --nccl-channels N: NCCL_MAX_NCHANNELS=N in the environment, set before the first communicator is
// made (NCCL reads it when a communicator is created; a user's own value is replaced).
inline void set_channels_env(int channels) {
  if (channels > 0) setenv("NCCL_MAX_NCHANNELS", std::to_string(channels).c_str(), 1);
}
// The same limit per communicator (ncclConfig_t::maxCTAs, NCCL 2.17+): the benchmark's channel rows
// make one communicator each with their own limit, in one process. The environment may be read once
// per process and cached by NCCL, so changing it between rows would not be a measurement.
inline ncclConfig_t comm_config(int channels) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 17, 0)
  if (channels > 0) cfg.maxCTAs = channels;
#else
  (void)channels;
#endif
  return cfg;
}

// --gpus N: one process, one thread per GPU (GPUs 0..n-1). `body(replica)` runs on each thread with
// its device set; it returns when all have returned. channels > 0: at most that many NCCL channels.
// Each GPU is one rank: NCCL refuses two ranks of one communicator on one GPU ("Duplicate GPU detected",
// ncclInvalidUsage, checked in its init against the ranks' PCI bus ids), so N ranks need N GPUs.
inline void run_threads(int n, const std::function<void(Replica&)>& body, int channels = 0) {
  nvls_off();
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  // The configs outlive the group: inside it NCCL may finish the inits only at ncclGroupEnd.
  std::vector<ncclConfig_t> cfgs(static_cast<size_t>(n), comm_config(channels));
  NCCL_CHECK(ncclGroupStart());  // one thread makes all N communicators: grouped, or the first init waits forever
  for (int i = 0; i < n; ++i) {
    CUDA_CHECK(cudaSetDevice(i));
    NCCL_CHECK(ncclCommInitRankConfig(&comms[size_t(i)], n, id, i, &cfgs[size_t(i)]));
  }
  NCCL_CHECK(ncclGroupEnd());
  CopyWorld copy_world(n);  // used only by replicas that plan --collectives copy
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      CUDA_CHECK(cudaSetDevice(r));
      Replica rep(comms[size_t(r)], r, n, &copy_world);
      body(rep);
    });
  for (auto& t : threads) t.join();
}

// --world N --rank R --id-file PATH: this process's communicator. Returns "" or what went wrong (the
// caller reports it as a usage error: the id file is the user's input).
inline std::string join_by_file(int world, int rank, int device, const std::string& id_file, double timeout_s,
                                ncclComm_t& comm, int channels = 0) {
  nvls_off();
  ncclUniqueId id;
  if (rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    const std::string err = publish_id(id_file, &id, sizeof id);
    if (!err.empty()) return "--id-file: " + err;
  } else {
    const std::string err = wait_for_id(id_file, &id, sizeof id, timeout_s);
    if (!err.empty()) return "rank " + std::to_string(rank) + ": " + err;
  }
  CUDA_CHECK(cudaSetDevice(device));
  ncclConfig_t cfg = comm_config(channels);
  NCCL_CHECK(ncclCommInitRankConfig(&comm, world, id, rank, &cfg));  // returns once all `world` ranks have joined
  if (rank == 0) std::remove(id_file.c_str());  // everyone has it: a stale file would mislead the next run
  return "";
}

}  // namespace dp
