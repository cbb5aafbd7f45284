// common/cudnn_conv.cuh: cuDNN's classic (legacy) convolution API, wrapped just enough for the
// lessons that use it (day20's yardstick, day30's survey and contest, day40's unfused baseline).
//
// What it holds, and why each piece exists:
//  - ConvDesc: the four descriptors of one convolution (input, filter, convolution, output),
//    built in the order cuDNN needs them, the output size queried from cuDNN and compared to
//    ours. It never exits: a problem cuDNN refuses keeps cuDNN's reason in `error`, so a
//    program can report it and go on with the rest.
//  - heuristic() and find(): cuDNN's predicted ranking (the _v7 calls, no GPU work) and its
//    measured one (the FindEx calls, every algorithm run once on our buffers).
//  - run(): one direction (forward, backward data, backward filter) with one algorithm.
//  - fastest(): Find times each algorithm once; a few-microsecond problem is noisy at one
//    run, so every algorithm that ran is re-timed with timing::time_gpu and the fastest kept.
//  - Workspace: one buffer that only grows, allocated outside the timed region.
//
// Data types: fp32, fp16 and bf16 tensors; the convolution's compute type is always fp32
// (fp16/bf16 inputs are accumulated in fp32). Layouts: NCHW (filter KCRS) or NHWC (filter KRSC).
#pragma once
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "check.cuh"
#include "conv_shape.h"
#include "timing.cuh"

namespace dnn {

enum class Dir { Fwd, BwdData, BwdFilter };

inline const char* dir_name(Dir d) {
  return d == Dir::Fwd ? "forward" : d == Dir::BwdData ? "backward data" : "backward filter";
}

inline int algo_count(Dir d) {
  return d == Dir::Fwd       ? int(CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
         : d == Dir::BwdData ? int(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
                             : int(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
}

inline const char* algo_name(Dir d, int a) {
  if (d == Dir::Fwd) {
    switch (cudnnConvolutionFwdAlgo_t(a)) {
      case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
        return "IMPLICIT_GEMM";
      case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
        return "IMPLICIT_PRECOMP_GEMM";
      case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
        return "GEMM";
      case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
        return "DIRECT";
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
        return "FFT";
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
        return "FFT_TILING";
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
        return "WINOGRAD";
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
        return "WINOGRAD_NONFUSED";
      default:
        return "unknown";
    }
  }
  if (d == Dir::BwdData) {
    switch (cudnnConvolutionBwdDataAlgo_t(a)) {
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
        return "ALGO_0";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
        return "ALGO_1";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
        return "FFT";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
        return "FFT_TILING";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
        return "WINOGRAD";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
        return "WINOGRAD_NONFUSED";
      default:
        return "unknown";
    }
  }
  switch (cudnnConvolutionBwdFilterAlgo_t(a)) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
      return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
      return "FFT_TILING";
    default:
      return "unknown";
  }
}

inline const char* dtype_name(cudnnDataType_t t) {
  return t == CUDNN_DATA_FLOAT ? "fp32" : t == CUDNN_DATA_HALF ? "fp16" : t == CUDNN_DATA_BFLOAT16 ? "bf16" : "other";
}
inline size_t dtype_bytes(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : 2; }
inline const char* layout_name(cudnnTensorFormat_t f) { return f == CUDNN_TENSOR_NHWC ? "NHWC" : "NCHW"; }
inline const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "DEFAULT";
    case CUDNN_TENSOR_OP_MATH:
      return "TENSOR_OP";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "TENSOR_OP_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH:
      return "FMA";
    default:
      return "unknown";
  }
}

// "CUDNN_STATUS_BAD_PARAM: <cuDNN's last error>" for a status that is not SUCCESS.
inline std::string status_text(cudnnStatus_t st) {
  return std::string(cudnnGetErrorString(st)) + ": " + cudnn_last_error();
}

class ConvDesc {
 public:
  ConvShape s;
  cudnnDataType_t dtype;
  cudnnTensorFormat_t layout;
  cudnnMathType_t math;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::string error;  // empty: cuDNN accepted every descriptor; otherwise which call failed and why

  ConvDesc(const ConvShape& shape, cudnnDataType_t dt, cudnnTensorFormat_t fmt, cudnnMathType_t m)
      : s(shape), dtype(dt), layout(fmt), math(m) {
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    // The dimensions are always given in N, C, H, W order; `fmt` says how they lie in memory.
    if (!step("cudnnSetTensor4dDescriptor(x)", cudnnSetTensor4dDescriptor(x, fmt, dt, s.N, s.C, s.H, s.W))) return;
    if (!step("cudnnSetFilter4dDescriptor(w)", cudnnSetFilter4dDescriptor(w, dt, fmt, s.K, s.C, s.R, s.S))) return;
    // Cross-correlation (no filter flip) is what deep-learning frameworks call convolution.
    // The last argument is the compute type: fp32 accumulation for every data type here.
    if (!step("cudnnSetConvolution2dDescriptor",
              cudnnSetConvolution2dDescriptor(conv, s.pad, s.pad, s.stride, s.stride, s.dil, s.dil,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)))
      return;
    if (!step("cudnnSetConvolutionMathType", cudnnSetConvolutionMathType(conv, m))) return;
    int n = 0, k = 0, p = 0, q = 0;
    if (!step("cudnnGetConvolution2dForwardOutputDim",
              cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &k, &p, &q)))
      return;
    if (n != s.N || k != s.K || p != s.P() || q != s.Q()) {
      error = "cuDNN's output shape " + std::to_string(n) + "x" + std::to_string(k) + "x" + std::to_string(p) + "x" +
              std::to_string(q) + " differs from ours";
      return;
    }
    step("cudnnSetTensor4dDescriptor(y)", cudnnSetTensor4dDescriptor(y, fmt, dt, n, k, p, q));
  }
  ~ConvDesc() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;

  bool ok() const { return error.empty(); }
  std::string config() const {
    return std::string(dtype_name(dtype)) + " " + layout_name(layout) + " " + math_name(math);
  }

 private:
  bool step(const char* what, cudnnStatus_t st) {
    if (st == CUDNN_STATUS_SUCCESS) return true;
    error = std::string(what) + " -> " + status_text(st);
    return false;
  }
};

// One algorithm as cuDNN reports it, plus our own measurement.
struct AlgoPerf {
  int algo = 0;
  std::string name;
  cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
  float ms = -1;  // cuDNN's own time (Find: one run; heuristic: -1, it runs nothing)
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  bool deterministic = false;
  int rank = -1;  // position in cuDNN's list
  bool ok() const { return status == CUDNN_STATUS_SUCCESS; }
};

template <class Perf>
AlgoPerf from_perf(Dir d, const Perf& p, int rank) {
  AlgoPerf a;
  a.algo = int(p.algo);
  a.name = algo_name(d, a.algo);
  a.status = p.status;
  a.ms = p.time;
  a.workspace = p.memory;
  a.math = p.mathType;
  a.deterministic = p.determinism == CUDNN_DETERMINISTIC;
  a.rank = rank;
  return a;
}

// cuDNN's heuristic ranking: no GPU work, every algorithm listed with a status.
inline std::vector<AlgoPerf> heuristic(cudnnHandle_t h, const ConvDesc& d, Dir dir) {
  std::vector<AlgoPerf> out;
  int got = 0;
  if (dir == Dir::Fwd) {
    cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CUDNN_CHECK(
        cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, p));
    for (int i = 0; i < got; ++i) out.push_back(from_perf(dir, p[i], i));
  } else if (dir == Dir::BwdData) {
    cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, p));
    for (int i = 0; i < got; ++i) out.push_back(from_perf(dir, p[i], i));
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w,
                                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, p));
    for (int i = 0; i < got; ++i) out.push_back(from_perf(dir, p[i], i));
  }
  return out;
}

// The buffers of one direction: two inputs and one output.
//   forward:          a = x,  b = w,  out = y
//   backward data:    a = w,  b = dy, out = dx
//   backward filter:  a = x,  b = dy, out = dw
struct Operands {
  const void* a;
  const void* b;
  void* out;
};

// cuDNN's measured ranking: every algorithm that fits in `ws_bytes` is run once on our buffers
// (the output is overwritten). Algorithms that need more workspace come back with an error status.
inline std::vector<AlgoPerf> find(cudnnHandle_t h, const ConvDesc& d, Dir dir, Operands o, void* ws, size_t ws_bytes) {
  std::vector<AlgoPerf> out;
  int got = 0;
  if (dir == Dir::Fwd) {
    cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, d.x, o.a, d.w, o.b, d.conv, d.y, o.out,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, p, ws, ws_bytes));
    for (int i = 0; i < got; ++i) out.push_back(from_perf(dir, p[i], i));
  } else if (dir == Dir::BwdData) {
    cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, d.w, o.a, d.y, o.b, d.conv, d.x, o.out, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, p, ws, ws_bytes));
    for (int i = 0; i < got; ++i) out.push_back(from_perf(dir, p[i], i));
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, d.x, o.a, d.y, o.b, d.conv, d.w, o.out, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, p, ws, ws_bytes));
    for (int i = 0; i < got; ++i) out.push_back(from_perf(dir, p[i], i));
  }
  return out;
}

// The workspace one algorithm needs (or why it cannot run this problem at all).
inline cudnnStatus_t workspace_size(cudnnHandle_t h, const ConvDesc& d, Dir dir, int algo, size_t* bytes) {
  *bytes = 0;
  if (dir == Dir::Fwd)
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, cudnnConvolutionFwdAlgo_t(algo), bytes);
  if (dir == Dir::BwdData)
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, cudnnConvolutionBwdDataAlgo_t(algo),
                                                        bytes);
  return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, cudnnConvolutionBwdFilterAlgo_t(algo),
                                                        bytes);
}

// Runs one direction with one algorithm; returns cuDNN's status instead of exiting, so a
// caller can report an unsupported pair and go on. `math` is the math type the algorithm was
// measured with (Find may report tensor-op variants under DEFAULT math).
inline cudnnStatus_t run(cudnnHandle_t h, ConvDesc& d, Dir dir, int algo, cudnnMathType_t math, Operands o, void* ws,
                         size_t ws_bytes, cudaStream_t st = 0) {
  const float one = 1.f, zero = 0.f;  // alpha, beta: float for fp32, fp16 and bf16 data
  cudnnStatus_t s = cudnnSetStream(h, st);
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetConvolutionMathType(d.conv, math);
  if (s != CUDNN_STATUS_SUCCESS) return s;
  if (dir == Dir::Fwd)
    return cudnnConvolutionForward(h, &one, d.x, o.a, d.w, o.b, d.conv, cudnnConvolutionFwdAlgo_t(algo), ws, ws_bytes,
                                   &zero, d.y, o.out);
  if (dir == Dir::BwdData)
    return cudnnConvolutionBackwardData(h, &one, d.w, o.a, d.y, o.b, d.conv, cudnnConvolutionBwdDataAlgo_t(algo), ws,
                                        ws_bytes, &zero, d.x, o.out);
  return cudnnConvolutionBackwardFilter(h, &one, d.x, o.a, d.y, o.b, d.conv, cudnnConvolutionBwdFilterAlgo_t(algo), ws,
                                        ws_bytes, &zero, d.w, o.out);
}

// One device workspace for everything: it grows when a larger request comes, never shrinks,
// and is (re)allocated only outside timed regions.
class Workspace {
 public:
  ~Workspace() {
    if (p_) cudaFree(p_);
  }
  void* get(size_t bytes) {
    if (bytes > bytes_) {
      if (p_) CUDA_CHECK(cudaFree(p_));
      p_ = nullptr;
      CUDA_CHECK(cudaMalloc(&p_, bytes));
      // Zeroed once, outside any timing, so that the scratch space is defined memory. (Added while
      // chasing initcheck reports in day30; those turned out to come from undefined *inputs*, and
      // whether cuDNN ever reads scratch it has not written was not established.)
      CUDA_CHECK(cudaMemset(p_, 0, bytes));
      bytes_ = bytes;
    }
    return p_;
  }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// How much workspace we are willing to offer: what the caller allows, and at most half of
// the memory that is free right now (the rest of the program needs some too).
inline size_t workspace_budget(size_t limit_bytes) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return std::min(limit_bytes, free_b / 2);
}

struct Timed {
  AlgoPerf algo;
  timing::Stats t;
};

// Every algorithm in `list` that ran in Find and fits in the workspace is re-timed with our
// harness (the same one the custom kernels use); the result is sorted, fastest first.
inline std::vector<Timed> retime(cudnnHandle_t h, ConvDesc& d, Dir dir, const std::vector<AlgoPerf>& list, Operands o,
                                 Workspace& ws, size_t ws_limit, const timing::Options& opt) {
  std::vector<Timed> out;
  for (const AlgoPerf& a : list) {
    if (!a.ok() || a.workspace > ws_limit) continue;
    void* wp = a.workspace ? ws.get(a.workspace) : nullptr;
    cudnnStatus_t st = run(h, d, dir, a.algo, a.math, o, wp, a.workspace, opt.stream);
    if (st != CUDNN_STATUS_SUCCESS) continue;  // Find said yes, the call said no: leave it out
    timing::Stats t =
        timing::time_gpu([&] { CUDNN_CHECK(run(h, d, dir, a.algo, a.math, o, wp, a.workspace, opt.stream)); }, opt);
    out.push_back({a, t});
  }
  std::sort(out.begin(), out.end(), [](const Timed& l, const Timed& r) { return l.t.median_ms < r.t.median_ms; });
  return out;
}

}  // namespace dnn
