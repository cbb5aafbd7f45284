// day50_gpt/run/data_parallel.cuh: one GPU's part in data-parallel training, through NCCL.
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

#include <cstdlib>
#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "check.cuh"
#include "../dp_plan.h"

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

// One replica's link to the others: its communicator, the side stream the all-reduces run on, and
// the bucket plan of the gradient. All calls are collective: every replica makes them in the same
// order (NCCL matches the n-th all-reduce of one rank with the n-th of the others).
class Replica {
 public:
  const int rank, world;

  Replica(ncclComm_t comm, int rank_, int world_) : rank(rank_), world(world_), comm_(comm) {
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
    for (auto e : t0_) cudaEventDestroy(e);
    for (auto e : t1_) cudaEventDestroy(e);
    cudaFree(scalars_);
    cudaEventDestroy(done_), cudaEventDestroy(ready_), cudaStreamDestroy(side_);
    ncclCommDestroy(comm_);
  }
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // The gradient array the buckets index, and the bucket size (0: one all-reduce after the backward).
  void plan(const gpt::Config& c, size_t bucket_bytes, float* grads) {
    buckets_ = plan_buckets(c, bucket_bytes), grads_ = grads, next_ = 0;
  }
  const std::vector<Bucket>& buckets() const { return buckets_; }

  // Bench: events around every bucket's all-reduce, read by last_comm_ms().
  void time_buckets(bool on) {
    timed_ = on;
    while (on && t0_.size() < buckets_.size()) {
      t0_.emplace_back(), t1_.emplace_back();
      CUDA_CHECK(cudaEventCreate(&t0_.back()));
      CUDA_CHECK(cudaEventCreate(&t1_.back()));
    }
  }

  // The backward calls this when block l's gradients are enqueued (l = -1: the end of the backward).
  // Every bucket that was waiting for block l starts on the side stream, after what the compute
  // stream has enqueued so far.
  void block_done(int l) {
    while (next_ < buckets_.size() && buckets_[next_].after_block == l) launch(next_++);
  }

  // After the backward: the buckets not yet started, the step's loss (each replica's loss is the mean
  // over its slice; their mean is the global batch's), and the compute stream waits for all of it
  // before the optimizer reads the gradient.
  void finish(float* loss) {
    while (next_ < buckets_.size()) launch(next_++);
    NCCL_CHECK(ncclAllReduce(loss, loss, 1, ncclFloat, ncclAvg, comm_, side_));
    CUDA_CHECK(cudaEventRecord(done_, side_));
    CUDA_CHECK(cudaStreamWaitEvent(0, done_, 0));
    next_ = 0;
  }

  // The milliseconds each bucket's all-reduce took in the last step (bench; synchronizes). A bucket's
  // time runs from when both the gradient and the side stream were ready, so it includes waiting for
  // the slower replica and sharing the GPU with the backward.
  std::vector<double> last_comm_ms() const {
    std::vector<double> ms;
    for (size_t i = 0; timed_ && i < buckets_.size(); ++i) {
      float x = 0;
      CUDA_CHECK(cudaEventSynchronize(t1_[i]));
      CUDA_CHECK(cudaEventElapsedTime(&x, t0_[i], t1_[i]));
      ms.push_back(x);
    }
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
    CUDA_CHECK(cudaEventRecord(ready_, 0));
    CUDA_CHECK(cudaStreamWaitEvent(side_, ready_, 0));
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
  void launch(size_t i) {
    const Bucket& b = buckets_[i];
    CUDA_CHECK(cudaEventRecord(ready_, 0));  // the compute stream's work so far: this bucket's gradients
    CUDA_CHECK(cudaStreamWaitEvent(side_, ready_, 0));
    if (timed_) CUDA_CHECK(cudaEventRecord(t0_[i], side_));
    NCCL_CHECK(ncclAllReduce(grads_ + b.begin, grads_ + b.begin, b.end - b.begin, ncclFloat, ncclAvg, comm_, side_));
    if (timed_) CUDA_CHECK(cudaEventRecord(t1_[i], side_));
  }

  ncclComm_t comm_;
  cudaStream_t side_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  float* scalars_ = nullptr;
  std::vector<Bucket> buckets_;
  size_t next_ = 0;
  float* grads_ = nullptr;
  bool timed_ = false;
  std::vector<cudaEvent_t> t0_, t1_;
};

// --gpus N: one process, one thread per GPU (GPUs 0..n-1). `body(replica)` runs on each thread with
// its device set; it returns when all have returned.
inline void run_threads(int n, const std::function<void(Replica&)>& body) {
  nvls_off();
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  std::vector<int> devs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) devs[size_t(i)] = i;
  NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      CUDA_CHECK(cudaSetDevice(r));
      Replica rep(comms[size_t(r)], r, n);
      body(rep);
    });
  for (auto& t : threads) t.join();
}

// --world N --rank R --id-file PATH: this process's communicator. Returns "" or what went wrong (the
// caller reports it as a usage error: the id file is the user's input).
inline std::string join_by_file(int world, int rank, int device, const std::string& id_file, double timeout_s,
                                ncclComm_t& comm) {
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
  NCCL_CHECK(ncclCommInitRank(&comm, world, id, rank));  // returns once all `world` ranks have joined
  if (rank == 0) std::remove(id_file.c_str());           // everyone has it: a stale file would mislead the next run
  return "";
}

}  // namespace dp
