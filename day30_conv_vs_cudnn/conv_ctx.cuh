// day30_conv_vs_cudnn/conv_ctx.cuh: what the parts of conv_cudnn.cu share: the ways of handing data
// to cuDNN (type, layout, math), tolerances, host data, the run's context and the CPU reference.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "check.cuh"
#include "conv_shape.h"
#include "cudnn_conv.cuh"
#include "host_tensor.cuh"
#include "results.h"
#include "timing.cuh"
#include "verify.h"

// Nothing at all: timed like everything else, it is the fixed cost of one launch in this harness.
__global__ void empty_kernel() {}

using dnn::Dir;

// Interleaved repeats of each headline ratio (our best against cuDNN's best): median and min-max.
constexpr int kRatioRepeats = 3;

// One way of handing data to cuDNN: element type, memory layout, math type.
struct Config {
  cudnnDataType_t dt;
  cudnnTensorFormat_t fmt;
  cudnnMathType_t math;
};

static const Config kFp32Fma{CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH};
static const Config kFp32Default{CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_DEFAULT_MATH};
static const Config kFp32Nhwc{CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, CUDNN_FMA_MATH};
static const Config kFp16Nhwc{CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH};
static const Config kBf16Nhwc{CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH};

static std::string config_name(const Config& c) {
  return std::string(dnn::dtype_name(c.dt)) + " " + dnn::layout_name(c.fmt) + " " + dnn::math_name(c.math);
}

// The tolerance for a result of `len`-long dot products: by storage precision, and TF32 where
// cuDNN may use it (DEFAULT math on fp32 data).
static verify::Tol tol_for(const Config& c, double len) {
  const verify::Tol base = c.dt == CUDNN_DATA_HALF       ? verify::kFp16
                           : c.dt == CUDNN_DATA_BFLOAT16 ? verify::kBf16
                           : c.math == CUDNN_FMA_MATH    ? verify::kFp32
                                                         : verify::kTf32;
  return base.scaled(std::sqrt(len));
}

// ---- Host data in the three element types and two layouts (common/host_tensor.cuh) -----------

using ht::Dims;
using ht::round_to;
static DeviceBuffer upload(const std::vector<float>& nchw, Dims d, const Config& c) {
  return ht::upload(nchw, d, c.dt, c.fmt == CUDNN_TENSOR_NHWC);
}
static std::vector<float> download(const DeviceBuffer& buf, Dims d, const Config& c) {
  return ht::download(buf, d, c.dt, c.fmt == CUDNN_TENSOR_NHWC);
}

// ---- The program's shared state --------------------------------------------------------------------

struct Ctx {
  cudnnHandle_t dnn = nullptr;
  cublasHandle_t blas = nullptr;
  results::Results* res = nullptr;
  verify::Rng* rng = nullptr;
  bool timed = false;  // false in --verify
  timing::Options topt;
  size_t ws_limit = 0;  // the most workspace we offer cuDNN (--workspace-mib)
  dnn::Workspace ws;
  double fp32_peak = NAN, copy_peak = NAN;
  std::map<std::string, double> tensor_peak;  // "fp16", "bf16", "tf32" -> TFLOP/s (cuBLAS GEMM)
  json::Value survey = json::Value::array(), contest = json::Value::array(), refusals = json::Value::array(),
              descriptors = json::Value::array();
  struct ContestRow {
    std::string label, shape, custom, cudnn, winner;
    double custom_ms, cudnn_ms, speedup, speedup_min, speedup_max;  // speedup: median of interleaved repeats
  };
  std::vector<ContestRow> table;
};

// "a, b, c"
static void append(std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; }

static std::vector<long long> shape_vec(const ConvShape& s) {
  return {s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.pad, s.stride, s.dil};
}

// The tensors of one direction: operands (a, b) and result, with their dims.
struct DirTensors {
  Dims a, b, out;
  double reduction;  // length of each output's dot product
};
static DirTensors tensors_of(const ConvShape& s, Dir dir) {
  const Dims x{s.N, s.C, s.H, s.W}, w{s.K, s.C, s.R, s.S}, y{s.N, s.K, s.P(), s.Q()};
  if (dir == Dir::Fwd) return {x, w, y, double(s.C) * s.R * s.S};
  if (dir == Dir::BwdData) return {w, y, x, double(s.K) * s.R * s.S};
  return {x, y, w, double(s.N) * s.P() * s.Q()};
}

// The CPU reference at `idx` (flat NCHW indices of the result).
static std::vector<double> reference(const ConvShape& s, Dir dir, const std::vector<float>& a,
                                     const std::vector<float>& b, const std::vector<size_t>& idx) {
  if (dir == Dir::BwdData) return ref::bwd_data_sampled(s, b.data(), a.data(), idx);
  if (dir == Dir::BwdFilter) return ref::bwd_filter_sampled(s, a.data(), b.data(), idx);
  const int P = s.P(), Q = s.Q();
  return ref::eval_at(idx, [&](size_t f) {
    const ref::Idx4 i = ref::unflatten(f, s.K, P, Q);
    return ref::conv_at(s, a.data(), b.data(), i.a, i.b, i.c, i.d);
  });
}

static double peak_for(const Ctx& cx, const Config& c, std::string* what) {
  if (c.dt == CUDNN_DATA_FLOAT && c.math == CUDNN_FMA_MATH) {
    *what = "measured FP32 FMA ceiling";
    return cx.fp32_peak;
  }
  const std::string key = c.dt == CUDNN_DATA_HALF ? "fp16" : c.dt == CUDNN_DATA_BFLOAT16 ? "bf16" : "tf32";
  *what = "measured cuBLAS " + key + " GEMM (n=8192)";
  auto it = cx.tensor_peak.find(key);
  return it == cx.tensor_peak.end() ? NAN : it->second;
}
