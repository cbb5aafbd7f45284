// day50_gpt/nn/flash_sm90.h: our flash backward with its block products on Hopper's warpgroup tensor-core
// instruction, wgmma (nn/flash_sm90.cu; built for sm_90a, Makefile: SM90A_UNITS). The same passes, blocks,
// tiles and results as nn/kernels/flash_bwd.cuh's dqkv_kernel (mma.sync); --flash-mma picks one.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/flash_parts.cuh"  // Maps, kThreads, kSmemBytes

namespace flash90 {
// Whether this GPU runs it: an sm_90 device and a build with the sm_90a kernels (gemm_sm90.cu's probe: the
// two units are built with the same flags).
bool available();
// dQ, dK, dV (and the qkv bias gradient's partials, bias_part not null) of B * H heads of T rows, as
// k::flash::dqkv_kernel computes them: grid (2 T / 64, B H), k::flash::kThreads threads, k::flash::kSmemBytes
// of shared memory (allowed here, once per device). pdl: a programmatic dependent launch (nn/pdl.cuh).
// Q, K, V, O and dO come only through the tensor maps (maps.qkv, maps.o, maps.dout): the copy engine loads
// every tile, so no pointer to them is passed.
void dqkv(bool pdl, int B, int H, int T, int C, const k::flash::Maps& maps, const float* stats, __nv_bfloat16* dqkv,
          float* bias_part, float scale, cudaStream_t s);
}  // namespace flash90
