// common/cuda_graph.cuh: what a function enqueues on a stream, captured once as a CUDA graph and
// instantiated, so that the same launches can be replayed with one cudaGraphLaunch.
#pragma once
#include <cuda_runtime.h>

#include "check.cuh"

namespace cuda_graph {

// Thread-local capture mode: CUDA calls made meanwhile by other threads (another GPU's replica in a
// data-parallel run) are neither captured nor refused.
template <class F>
cudaGraphExec_t capture(cudaStream_t stream, F&& enqueue) {
  cudaGraph_t g;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CUDA_CHECK(cudaStreamEndCapture(stream, &g));
  cudaGraphExec_t e;
  CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  CUDA_CHECK(cudaGraphDestroy(g));
  return e;
}

}  // namespace cuda_graph
