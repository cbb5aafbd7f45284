// day50_gpt/nn/kernels/transpose.cuh: out[c][r] = in[r][c] (bf16): fc2's weight as our fused dGELU
// GEMM reads it (nn/gemm_sm90.h takes B as [N][K], and the input gradient multiplies by W, not W^T).
// A 32 x 32 tile through shared memory so that both the reads and the writes are coalesced; the extra
// column keeps the transposed reads off a single bank. Several matrices of one shape in one launch: matrix z
// of the grid at in + z * in_stride, out + z * out_stride (Model::transposed: every fc2 weight at once, six
// of 0.6 M elements at day50's shape; the trace's "other" category has its time).
#pragma once
#include <cuda_bf16.h>

namespace k {
template <class T>
__global__ void transpose(const T* __restrict__ in, T* __restrict__ out, int rows, int cols, size_t in_stride = 0,
                          size_t out_stride = 0) {
  __shared__ T tile[32][33];
  in += blockIdx.z * in_stride, out += blockIdx.z * out_stride;
  const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = in[size_t(r) * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int c = c0 + i, r = r0 + threadIdx.x;
    if (c < cols && r < rows) out[size_t(c) * rows + r] = tile[threadIdx.x][i];
  }
}
}  // namespace k
