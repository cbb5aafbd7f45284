// common/cuda_graph.cuh: what a function enqueues on a stream, captured once as a CUDA graph and
// instantiated, so that the same launches can be replayed with one cudaGraphLaunch.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "check.cuh"

namespace cuda_graph {

// What one captured graph launches: every node by kind, and how many distinct kernels its kernel
// nodes run (the libraries' kernels included: a captured graph holds every launch the work made, which
// is how a lesson counts the kernels of a whole step without a profiler). Best effort: where the
// runtime cannot say, `valid` is false and the step itself is untouched.
struct Census {
  bool valid = true;
  int nodes = 0;             // every node, child graphs' included
  int kernel_launches = 0;   // kernel nodes
  int distinct_kernels = 0;  // distinct kernels among them
  int unresolved = 0;        // kernel nodes the driver did not name (counted, not deduplicated)
  int memsets = 0, memcpys = 0, other = 0;
  int programmatic_edges = 0;  // edges a programmatic dependent launch made (kernel to kernel, nn/pdl.cuh in
                               // day50); -1 where the runtime could not list the edges
};

// A kernel node's kernel, through the driver's cuGraphKernelNodeGetParams (found through the runtime,
// so no -lcuda): the runtime's cudaGraphKernelNodeGetParams refuses kernels that another library's
// runtime or the driver launched (cuDNN's runtime-compiled kernels, cuBLAS's), the ones worth counting.
inline const void* kernel_of(cudaGraphNode_t node) {
  static const PFN_cuGraphKernelNodeGetParams_v12000 get = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuGraphKernelNodeGetParams", &f, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<PFN_cuGraphKernelNodeGetParams_v12000>(f);
  }();
  CUDA_KERNEL_NODE_PARAMS_v2 p = {};
  if (!get || get(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS) return nullptr;
  return p.func ? static_cast<const void*>(p.func) : static_cast<const void*>(p.kern);
}

inline void add_census(cudaGraph_t g, Census& c, std::set<const void*>& kernels) {
  size_t n = 0;
  std::vector<cudaGraphNode_t> nodes;
  if (cudaGraphGetNodes(g, nullptr, &n) == cudaSuccess) nodes.resize(n);
  if (nodes.size() != n || (n && cudaGraphGetNodes(g, nodes.data(), &n) != cudaSuccess)) {
    (void)cudaGetLastError();
    c.valid = false;
    return;
  }
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    if (cudaGraphNodeGetType(node, &t) != cudaSuccess) {
      (void)cudaGetLastError();
      c.valid = false;
      continue;
    }
    ++c.nodes;
    if (t == cudaGraphNodeTypeKernel) {
      ++c.kernel_launches;
      if (const void* k = kernel_of(node))
        kernels.insert(k);
      else
        ++c.unresolved;
    } else if (t == cudaGraphNodeTypeMemset) {
      ++c.memsets;
    } else if (t == cudaGraphNodeTypeMemcpy) {
      ++c.memcpys;
    } else if (t == cudaGraphNodeTypeGraph) {
      cudaGraph_t child;
      --c.nodes;  // the child's own nodes are counted instead
      if (cudaGraphChildGraphNodeGetGraph(node, &child) == cudaSuccess) {
        add_census(child, c, kernels);
      } else {
        (void)cudaGetLastError();
        c.valid = false;
      }
    } else {
      ++c.other;  // events, host nodes, conditional nodes (their bodies are not walked)
    }
  }
  size_t ne = 0;  // the edges, with their types (cudaGraphGetEdges: CUDA 12.3 and later); -1: not known
  if (cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &ne) != cudaSuccess) {
    (void)cudaGetLastError();
    c.programmatic_edges = -1;
  } else if (ne && c.programmatic_edges >= 0) {
    std::vector<cudaGraphNode_t> from(ne), to(ne);
    std::vector<cudaGraphEdgeData> data(ne);
    if (cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &ne) != cudaSuccess) {
      (void)cudaGetLastError();
      c.programmatic_edges = -1;
    } else {
      for (size_t i = 0; i < ne; ++i) c.programmatic_edges += data[i].type == cudaGraphDependencyTypeProgrammatic;
    }
  }
  c.distinct_kernels = int(kernels.size());
}

// Captures what enqueue() launches on `stream` (thread-local capture mode: CUDA calls made meanwhile by
// other threads, such as another GPU's replica in a data-parallel run, are neither captured nor
// refused) into a graph the caller instantiates (instantiate, below) and destroys; with `census`, also
// counts what the graph holds. Separate from capture() so that one capture can be instantiated more than
// one way (day50's --chain-priority auto: with and without node priorities, timed against each other).
template <class F>
cudaGraph_t capture_graph(cudaStream_t stream, F&& enqueue, Census* census = nullptr) {
  cudaGraph_t g;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CUDA_CHECK(cudaStreamEndCapture(stream, &g));
  if (census) {
    std::set<const void*> funcs;
    *census = Census();
    add_census(g, *census, funcs);
  }
  return g;
}

// The flags each executable was instantiated with, by handle. cudaGraphExecGetFlags does not return
// cudaGraphInstantiateFlagUseNodePriority: on an H200 (CUDA 13) executables instantiated with it read back
// without it, which failed day50's first checks of --chain-priority. So instantiate() writes down what it
// passed (a handle the driver hands out again is written over) and destroy() forgets it; a lesson asks
// instantiated_flags(). Guarded: a data-parallel run instantiates from one thread per GPU.
struct FlagBook {
  std::mutex mu;
  std::map<cudaGraphExec_t, unsigned long long> flags;
};
inline FlagBook& flag_book() {
  static FlagBook b;
  return b;
}

// An executable of g. With node_priority, each kernel keeps the priority of the stream it was captured
// from (a capture copies it into the node); without cudaGraphInstantiateFlagUseNodePriority the whole
// graph runs at its launch stream's.
inline cudaGraphExec_t instantiate(cudaGraph_t g, bool node_priority) {
  cudaGraphExec_t e;
  const unsigned long long f = node_priority ? cudaGraphInstantiateFlagUseNodePriority : 0;
  CUDA_CHECK(cudaGraphInstantiate(&e, g, f));
  FlagBook& b = flag_book();
  std::lock_guard<std::mutex> lock(b.mu);
  b.flags[e] = f;
  return e;
}

// The flags instantiate() passed for e; false where e did not come from instantiate().
inline bool instantiated_flags(cudaGraphExec_t e, unsigned long long* f) {
  FlagBook& b = flag_book();
  std::lock_guard<std::mutex> lock(b.mu);
  const auto it = b.flags.find(e);
  if (it == b.flags.end()) return false;
  *f = it->second;
  return true;
}

// Destroys e and forgets its flags; returns cudaGraphExecDestroy's status (a destructor may ignore it).
inline cudaError_t destroy(cudaGraphExec_t e) {
  {
    FlagBook& b = flag_book();
    std::lock_guard<std::mutex> lock(b.mu);
    b.flags.erase(e);
  }
  return cudaGraphExecDestroy(e);
}

// capture_graph and instantiate in one: the graph itself is not kept.
template <class F>
cudaGraphExec_t capture(cudaStream_t stream, F&& enqueue, Census* census = nullptr) {
  cudaGraph_t g = capture_graph(stream, enqueue, census);
  cudaGraphExec_t e = instantiate(g, false);
  CUDA_CHECK(cudaGraphDestroy(g));
  return e;
}

}  // namespace cuda_graph
