// Step 10: Hopper wgmma + TMA (see 10_wgmma_tma.cu). Compiled separately for sm_90a.
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
// C (M x N, bf16) = A (M x K, bf16) * Bt^T, Bt stored N x K; all row-major.
void run_10_wgmma(int M, int N, int K, const __nv_bfloat16* A, const __nv_bfloat16* Bt, __nv_bfloat16* C,
                  cudaStream_t s);
