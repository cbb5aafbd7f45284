// day50_gpt/nn/finish_queue.cuh: the backward's column-sum finishes, queued and run a few at a time.
//
// Why. Four kinds of kernel in the backward leave a parameter gradient as per-block partial sums, to be
// added up in a fixed order (no atomics: the same bits every run, nn/kernels/common.cuh): each fused
// LayerNorm backward (its gain and bias, and the next linear layer's bias), our flash backward (the qkv
// bias) and our fused dGELU GEMM (the fc bias). Run one by one, each finish is a kernel of a few dozen
// blocks that the GPU gets through in a few microseconds, mostly launch and tail, on the step's chain:
// 4 L + 1 of them a step. Nothing reads those gradients before the optimizer (or, data parallel, before the
// block's all-reduce), so they can wait: each producer writes its partials into its own slice of one
// arena, and flush() adds all the queued ones up in one launch (k::ln_partials_finish_many).
//
// The arena is the model's column-sum partials buffer (no memory added). When a producer's partials no
// longer fit, the queue is flushed first: its launch goes on the stream before the producer's kernel, so it
// reads the old partials before they are overwritten. A kernel that uses the buffer directly (the
// unfused LayerNorm, the bias gradient apart, the first step's timings) flushes it first
// (Model::partials_now). Everything runs on the model's main stream, in stream order, and only inside
// Model::backward(), which flushes at its end (and before each block's all-reduce, data parallel): a layer
// called alone (the attention check, the LayerNorm bench) finishes its sums at once, as before.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>

#include "check.cuh"
#include "kernels/layernorm.cuh"

class FinishQueue {
 public:
  void bind(float* arena, size_t floats) { base_ = arena, cap_ = floats, used_ = 0, jobs_.n = 0; }
  bool empty() const { return jobs_.n == 0; }
  // Whether `floats` more partial sums and one more job fit after what is queued (if not: flush first).
  bool fits(size_t floats) const { return used_ + floats <= cap_ && jobs_.n < k::kFinishJobsMax; }
  // Room for `floats` partial sums after what is queued (fits() first).
  float* take(size_t floats) {
    if (floats > cap_) throw std::logic_error("FinishQueue::take: partials larger than the arena");
    if (!fits(floats)) throw std::logic_error("FinishQueue::take: the queue is full (flush first)");
    float* p = base_ + used_;
    used_ += (floats + 31) / 32 * 32;  // each slice starts 128-byte aligned
    return p;
  }
  // out[k][c] += the sum over chunks of partial[chunk][k][c] (k < sums; partial from take()), at the next
  // flush.
  void push(const float* partial, int chunks, int C, int sums, float* out0, float* out1 = nullptr,
            float* out2 = nullptr) {
    k::FinishJob& f = jobs_.job[jobs_.n];
    f.partial = partial, f.out[0] = out0, f.out[1] = out1, f.out[2] = out2;
    f.chunks = chunks, f.C = C, f.sums = sums;
    f.first = jobs_.n ? end_block(jobs_.job[jobs_.n - 1]) : 0;
    ++jobs_.n, ++pushed;
  }
  // Every queued finish in one launch, on stream s; returns whether there was one.
  bool flush(cudaStream_t s) {
    used_ = 0;
    if (!jobs_.n) return false;
    const unsigned blocks = unsigned(end_block(jobs_.job[jobs_.n - 1]));
    k::ln_partials_finish_many<<<blocks, dim3(32, k::kLnFinishRows), 0, s>>>(jobs_);
    LAUNCH_CHECK();
    jobs_.n = 0;
    ++launches;
    return true;
  }
  long pushed = 0, launches = 0;  // finishes queued, and the launches that ran them (run/verify_step.cuh)

 private:
  static int end_block(const k::FinishJob& f) { return f.first + (f.sums * f.C + 31) / 32; }
  float* base_ = nullptr;
  size_t cap_ = 0, used_ = 0;
  k::FinishJobs jobs_{};
};
