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
// called alone (the attention check, the LayerNorm bench) finishes its sums at once, as before. The job
// table, the slices and which block does which job are host arithmetic (nn/finish_plan.h), checked without
// a GPU by test_finish_plan.cpp.
#pragma once
#include <cuda_runtime.h>

#include "check.cuh"
#include "finish_plan.h"
#include "kernels/layernorm.cuh"

class FinishQueue : public FinishPlan {
 public:
  // Every queued finish in one launch, on stream s; returns whether there was one.
  bool flush(cudaStream_t s) {
    if (empty()) {
      clear();
      return false;
    }
    k::ln_partials_finish_many<<<unsigned(blocks()), dim3(32, k::kLnFinishRows), 0, s>>>(jobs());
    LAUNCH_CHECK();
    clear();
    ++launches;
    return true;
  }
  long launches = 0;  // the launches that ran the queued finishes (run/verify_step.cuh)
};
