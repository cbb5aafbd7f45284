// Steps 10 and 11: Hopper wgmma + TMA (10_wgmma_tma.cu, 11_wgmma_cluster.cu), compiled for sm_90a.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

// Whether step 10 can run here: an sm_90 GPU and a build that contains sm_90a code.
// On false, `why` says what is missing (one line, for the SKIP message).
bool wgmma_gpu_supported(std::string* why);
// Whether this shape suits the kernel: TMA needs 16-byte row strides, so K % 8 == 0 and
// N % 8 == 0 for bf16. Other shapes are refused up front, never computed wrong.
bool wgmma_shape_supported(int M, int N, int K, std::string* why);
// Tile order: groups of `g` rows of tiles (1 = plain row-of-tiles order). Default 16.
void set_wgmma_group_m(int g);
// C (M x N, bf16) = A (M x K, bf16) * Bt^T, Bt stored N x K; all row-major.
// Step 11 (11_wgmma_cluster.cu) has the same contract and the same shape limits.
void run_11_wgmma_cluster(int M, int N, int K, const __nv_bfloat16* A, const __nv_bfloat16* Bt, __nv_bfloat16* C,
                          int group_m, cudaStream_t s);
void run_10_wgmma(int M, int N, int K, const __nv_bfloat16* A, const __nv_bfloat16* Bt, __nv_bfloat16* C,
                  cudaStream_t s);
