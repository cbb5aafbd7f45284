// common/cuda_graph.cuh: what a function enqueues on a stream, captured once as a CUDA graph and
// instantiated, so that the same launches can be replayed with one cudaGraphLaunch.
#pragma once
#include <cuda_runtime.h>

#include <set>
#include <vector>

#include "check.cuh"

namespace cuda_graph {

// Thread-local capture mode: CUDA calls made meanwhile by other threads (another GPU's replica in a
// data-parallel run) are neither captured nor refused.
// What one captured graph launches: every node by kind, and how many distinct kernels its kernel
// nodes run (a library's kernels included: a captured graph holds every launch the work made, which
// is how a lesson counts the kernels of a whole step without a profiler).
struct Census {
  int nodes = 0;             // every node, child graphs' included
  int kernel_launches = 0;   // kernel nodes
  int distinct_kernels = 0;  // distinct device functions among them
  int unresolved = 0;        // kernel nodes whose function the runtime did not name (counted apart)
  int memsets = 0, memcpys = 0, other = 0;
};

inline void add_census(cudaGraph_t g, Census& c, std::set<const void*>& funcs) {
  size_t n = 0;
  CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) CUDA_CHECK(cudaGraphGetNodes(g, nodes.data(), &n));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    CUDA_CHECK(cudaGraphNodeGetType(node, &t));
    ++c.nodes;
    if (t == cudaGraphNodeTypeKernel) {
      ++c.kernel_launches;
      cudaKernelNodeParams p = {};
      if (cudaGraphKernelNodeGetParams(node, &p) == cudaSuccess && p.func) {
        funcs.insert(p.func);
      } else {  // e.g. a kernel a library launched through the driver API: not deduplicated, counted
        (void)cudaGetLastError();
        ++c.unresolved;
      }
    } else if (t == cudaGraphNodeTypeMemset) {
      ++c.memsets;
    } else if (t == cudaGraphNodeTypeMemcpy) {
      ++c.memcpys;
    } else if (t == cudaGraphNodeTypeGraph) {
      cudaGraph_t child;
      CUDA_CHECK(cudaGraphChildGraphNodeGetGraph(node, &child));
      --c.nodes;  // the child's own nodes are counted instead
      add_census(child, c, funcs);
    } else {
      ++c.other;
    }
  }
  c.distinct_kernels = int(funcs.size());
}

// Captures what enqueue() launches on `stream`; with `census`, also counts what the graph holds.
template <class F>
cudaGraphExec_t capture(cudaStream_t stream, F&& enqueue, Census* census = nullptr) {
  cudaGraph_t g;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CUDA_CHECK(cudaStreamEndCapture(stream, &g));
  if (census) {
    std::set<const void*> funcs;
    *census = Census();
    add_census(g, *census, funcs);
  }
  cudaGraphExec_t e;
  CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  CUDA_CHECK(cudaGraphDestroy(g));
  return e;
}

}  // namespace cuda_graph
