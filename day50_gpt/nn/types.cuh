// day50_gpt/nn/types.cuh: the activation types (fp32, bf16) with their cuBLAS and cuDNN names, and
// the small helpers every GPU file of the model uses.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cudnn.h>

#include <algorithm>

#include "attn_kind.h"
#include "check.cuh"

using bf16 = __nv_bfloat16;

template <class T>
struct Types;
template <>
struct Types<float> {
  static constexpr cudaDataType_t blas = CUDA_R_32F;
  static constexpr cudnnDataType_t dnn = CUDNN_DATA_FLOAT;
  static const char* name() { return "fp32"; }
};
template <>
struct Types<bf16> {
  static constexpr cudaDataType_t blas = CUDA_R_16BF;
  static constexpr cudnnDataType_t dnn = CUDNN_DATA_BFLOAT16;
  static const char* name() { return "bf16"; }
};

// Grid-stride kernels: 256 threads a block, at most 16 blocks per SM of a 132-SM H100/H200.
inline int grid_for(size_t n) { return int(std::min<size_t>((n + 255) / 256, 132 * 16)); }
// Device memory in use (the whole GPU's, as cudaMemGetInfo sees it).
inline size_t used_bytes() {
  size_t f = 0, t = 0;
  CUDA_CHECK(cudaMemGetInfo(&f, &t));
  return t - f;
}
