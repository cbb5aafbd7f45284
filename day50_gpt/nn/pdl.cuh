// day50_gpt/nn/pdl.cuh: programmatic dependent launch (--pdl on, sm_90), the host side.
//
// A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization may start before the kernel ahead
// of it in the stream has finished: once every block of that one has called launch_dependents, the GPU
// launches this one, and its blocks take SMs as the other's blocks leave, instead of after the last of them
// and a launch gap. The kernel then waits in grid_dependency_wait (nn/kernels/async.cuh) until the kernel
// ahead has finished and its writes are visible, so it reads nothing early; only its launch, its blocks'
// placement and the work before its wait overlap the other's tail. In a captured stream the launch becomes a
// programmatic edge of the graph where the node before it is a kernel (after a memset, a copy or an event
// wait it is a plain edge: the same order, no overlap). The kernels launched this way (the LayerNorms', our fused GEMM, our flash
// backward: the chains of the training step) wait before they read or write anything. What it buys is a
// microsecond or two a kernel boundary on the chain, if anything: make bench's row "programmatic launches".
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <utility>

#include "check.cuh"

namespace pdl {
// Launches that asked for it, in this process (--verify checks that the step it compares made some).
inline std::atomic<long>& launches() {
  static std::atomic<long> n{0};
  return n;
}
// f<<<grid, block, smem, s>>>(args...), as a programmatic dependent launch where `on` (not counted in launches()).
template <class... P, class... A>
void launch_uncounted(bool on, void (*f)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr, cfg.numAttrs = on ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, f, std::forward<A>(args)...));
}
// ... counted: the chains' kernels that --pdl asks for.
template <class... P, class... A>
void launch(bool on, void (*f)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A&&... args) {
  launch_uncounted(on, f, grid, block, smem, s, std::forward<A>(args)...);
  if (on) ++launches();
}
}  // namespace pdl
