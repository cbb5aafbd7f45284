// day20_conv_slow_fast/cudnn_conv.h: cuDNN's forward convolution as the yardstick (legacy API).
//
// Fair-baseline rules: the same NCHW fp32 tensors, CUDNN_CROSS_CORRELATION (what our kernels
// compute, no flipped filter), FP32 FMA math only (CUDNN_FMA_MATH: no TF32 tensor cores, which
// CUDNN_DEFAULT_MATH would allow on Ampere and later), every algorithm measured by
// cudnnFindConvolutionForwardAlgorithmEx with a real workspace. Find times each algorithm
// once; for problems of a few microseconds that single run is noisy (seen on the 1024x2048
// single-channel case: one run's first choice took 152 us under repeated timing, where
// another run's first choice took 23 us), so the runner re-times every
// algorithm that worked with the same harness as our kernels and keeps the fastest. day30 takes this API apart step by step; here it is only the yardstick.
#pragma once
#include <cudnn.h>

#include <string>
#include <vector>

#include "conv_shape.h"
#include "check.cuh"

inline const char* cudnn_fwd_algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "unknown";
  }
}

struct CudnnAlgoResult {
  cudnnConvolutionFwdAlgo_t algo;
  std::string name;
  float ms;  // cuDNN's own measurement inside Find (one run)
  size_t workspace;
  bool ok;
};

class CudnnConv {
 public:
  // Builds the descriptors and runs Find on the given buffers (y is overwritten).
  CudnnConv(cudnnHandle_t h, const ConvShape& s, const float* x, const float* w, float* y) : h_(h) {
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&xd_));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&yd_));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&wd_));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cd_));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(xd_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.N, s.C, s.H, s.W));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(wd_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.K, s.C, s.R, s.S));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(cd_, s.pad, s.pad, s.stride, s.stride, s.dil, s.dil,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(cd_, CUDNN_FMA_MATH));
    int n, k, p, q;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(cd_, xd_, wd_, &n, &k, &p, &q));
    if (n != s.N || k != s.K || p != s.P() || q != s.Q()) {
      std::fprintf(stderr, "error: cuDNN's output shape %dx%dx%dx%d differs from ours %dx%dx%dx%d\n", n, k, p, q, s.N, s.K,
                   s.P(), s.Q());
      std::exit(1);
    }
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(yd_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, p, q));
    // Find measures every algorithm that fits in the workspace we offer.
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    size_t offer = std::min<size_t>(size_t(1) << 30, free_b / 4);
    void* tmp = nullptr;
    CUDA_CHECK(cudaMalloc(&tmp, offer));
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h_, xd_, x, wd_, w, cd_, yd_, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                       &got, perf, tmp, offer));
    CUDA_CHECK(cudaFree(tmp));
    for (int i = 0; i < got; ++i) {
      algos_.push_back({perf[i].algo, cudnn_fwd_algo_name(perf[i].algo), perf[i].time, perf[i].memory,
                        perf[i].status == CUDNN_STATUS_SUCCESS});
      // Results come sorted by time; keep the first that ran, in FMA math.
      if (!found_ && perf[i].status == CUDNN_STATUS_SUCCESS) {
        found_ = true;
        algo_ = perf[i].algo;
        ws_bytes_ = perf[i].memory;
      }
    }
    if (!found_) {
      std::fprintf(stderr, "error: cuDNN found no working forward algorithm for %s\n", s.str().c_str());
      std::exit(1);
    }
    // One workspace, large enough for every algorithm that ran, allocated once and reused.
    for (auto& a : algos_)
      if (a.ok) ws_alloc_ = std::max(ws_alloc_, a.workspace);
    if (ws_alloc_) CUDA_CHECK(cudaMalloc(&ws_, ws_alloc_));
  }
  ~CudnnConv() {
    if (ws_) cudaFree(ws_);
    cudnnDestroyConvolutionDescriptor(cd_);
    cudnnDestroyFilterDescriptor(wd_);
    cudnnDestroyTensorDescriptor(yd_);
    cudnnDestroyTensorDescriptor(xd_);
  }
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  void run(const float* x, const float* w, float* y, cudaStream_t st) {
    const float one = 1.f, zero = 0.f;
    CUDNN_CHECK(cudnnSetStream(h_, st));
    CUDNN_CHECK(cudnnConvolutionForward(h_, &one, xd_, x, wd_, w, cd_, algo_, ws_, ws_bytes_, &zero, yd_, y));
  }
  // Switch to algorithm i of algos() (one that ran in Find).
  void use(size_t i) {
    algo_ = algos_.at(i).algo;
    ws_bytes_ = algos_[i].workspace;
  }
  std::string algo_name() const { return cudnn_fwd_algo_name(algo_); }
  size_t workspace() const { return ws_bytes_; }
  const std::vector<CudnnAlgoResult>& algos() const { return algos_; }

 private:
  cudnnHandle_t h_;
  cudnnTensorDescriptor_t xd_ = nullptr, yd_ = nullptr;
  cudnnFilterDescriptor_t wd_ = nullptr;
  cudnnConvolutionDescriptor_t cd_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  bool found_ = false;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0, ws_alloc_ = 0;
  std::vector<CudnnAlgoResult> algos_;
};
