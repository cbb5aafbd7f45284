// day50_gpt/nn/dw_stream.h: --dw-stream on (the default): in the captured training step (CUDA graph), the
// weight gradients' matmuls run on a second stream, beside the chain of data gradients.
//
// Why. The backward of a linear layer is two matmuls that both read d(out): din = d(out) . W, which the
// next layer's backward waits for, and dW += d(out)^T . in, which nothing waits for until the optimizer.
// At this model's thin shapes a dW matmul's output is a few dozen 128 x 128 tiles (fc's: 3 x 12 = 36 on
// 132 SMs), so it fills the GPU only by splitting its long reduction (N = 16,384 rows), and the memory-bound
// kernels of the chain (the LayerNorm backward) leave the tensor cores idle. On two streams the graph has
// two branches, and the GPU runs a dW matmul on the SMs the chain's kernel leaves free. The results stay
// bit-identical: every kernel is the same, on the same inputs, with the same algorithm (a workspace of
// its own, of the same size, so cuBLASLt keeps its choice); only when they run changes.
//
// What it must respect. The chain reuses its scratch: d(out) of one layer lives in a buffer that a later
// kernel of the chain overwrites (d(sublayer output), which fc2's and proj's dW read, is rewritten by the
// next LayerNorm backward; dfc, which fc's dW reads, by the next layer's dGELU GEMM). So each dW launch
// records an event after it and notes the buffers it reads; before the chain writes one of them it waits
// for that event (before_write). Where that wait came too soon it costs a buffer: dqkv, which shares
// dfc's memory on one stream, gets its own (Model::dqkv_own), else the next layer's first GEMM would wait
// for qkv's dW, which has only one LayerNorm backward to hide behind. The backward's end waits for the
// whole side stream (join) before the gradients are read.
//
// Only inside a capture: the first, eager step times its choices (nn/linear.cuh) on one stream, and the
// bench's phase table (events between eager phases) measures each phase alone. The bit-exact comparison
// of the graph with the eager steps (run/verify_step.cuh) is therefore also the check of this schedule.
#pragma once
#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include <cstdio>
#include <cstdlib>

#include "check.cuh"
#include "kernels/spin.cuh"  // k::spin_ns: --verify's race detector (delay_ns)

class DwStream {
 public:
  DwStream() = default;
  DwStream(const DwStream&) = delete;
  DwStream& operator=(const DwStream&) = delete;
  ~DwStream() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (side_) cudaStreamDestroy(side_);
  }
  // Creates the stream and `events` events (one per dW launch of a backward, and one for the join).
  void create(int events) {
    if (side_) return;
    int least = 0, greatest = 0;  // the lowest priority (the default's): see --chain-priority (run/trainer.cuh)
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, least));
    events_.resize(size_t(events));
    for (cudaEvent_t& e : events_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  bool created() const { return side_ != nullptr; }
  cudaStream_t side() const { return side_; }
  // The side stream waits for everything enqueued on `main` so far (the dW's inputs are ready); with
  // delay_ns (--verify only), it then idles that long before the dW.
  void fork(cudaStream_t main) {
    cudaEvent_t e = next();
    CUDA_CHECK(cudaEventRecord(e, main));
    CUDA_CHECK(cudaStreamWaitEvent(side_, e, 0));
    if (delay_ns) {
      k::spin_ns<<<1, 1, 0, side_>>>(delay_ns);
      CUDA_CHECK(cudaGetLastError());
    }
  }
  unsigned long long delay_ns = 0;
  // After a dW launch on the side stream: it reads `a` and `b` until this point of the side stream.
  void reads(const void* a, const void* b) {
    cudaEvent_t e = next();
    CUDA_CHECK(cudaEventRecord(e, side_));
    reading_.push_back({a, e});
    reading_.push_back({b, e});
    pending_ = true;
  }
  // Before `main` overwrites the buffer at `p`: wait for the side stream's reads of it.
  void before_write(cudaStream_t main, const void* p) {
    if (!p) return;
    for (size_t i = 0; i < reading_.size();) {
      if (reading_[i].first == p) {
        CUDA_CHECK(cudaStreamWaitEvent(main, reading_[i].second, 0));
        reading_.erase(reading_.begin() + long(i));
      } else {
        ++i;
      }
    }
  }
  // `main` waits for all the side stream's work (in a capture: the side branch joins the graph's end).
  void join(cudaStream_t main) {
    if (pending_) {
      cudaEvent_t e = next();
      CUDA_CHECK(cudaEventRecord(e, side_));
      CUDA_CHECK(cudaStreamWaitEvent(main, e, 0));
    }
    reading_.clear();
    pending_ = false;
    at_ = 0;
  }
  int launches = 0;  // dW launches put on the side stream (for --verify's coverage check)

 private:
  // The next event of the pool: each is recorded once per backward (a capture keeps the dependency of
  // the record it saw, so a pool as long as one backward's records is enough; join starts it again).
  cudaEvent_t next() {
    if (at_ >= events_.size()) {  // a programming error: create() was told too few
      std::fprintf(stderr, "error: DwStream: a backward recorded more than its %zu events\n", events_.size());
      std::exit(1);
    }
    return events_[at_++];
  }
  cudaStream_t side_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::vector<std::pair<const void*, cudaEvent_t>> reading_;
  size_t at_ = 0;
  bool pending_ = false;
};
