// Steps 12 and 13 (12_wgmma_tma_store.cu, sm_90a): step 10's persistent warp-specialized
// wgmma kernel with an epilogue that goes registers -> swizzled shared memory -> TMA store
// (step 12), and the same with step 11's 2-CTA clusters and B multicast (step 13).
// Same contract and shape limits as steps 10 and 11 (10_wgmma_tma.h): C (M x N, bf16) =
// A (M x K) * Bt^T, Bt stored N x K, all row-major; K % 8 == 0 and N % 8 == 0.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <vector>

// One compiled configuration of step 12 or 13: the kernel is a template over the stage count,
// the size of the C staging buffer and the cluster size, so one run times them all.
struct TmaStoreConfig {
  int step;          // 12 (one CTA) or 13 (2-CTA cluster, B multicast)
  const char* name;  // e.g. "s4 c2": 4 stages, C staged two 64x64 boxes at a time
  void (*run)(int M, int N, int K, const __nv_bfloat16* A, const __nv_bfloat16* Bt, __nv_bfloat16* C, int group_m,
              cudaStream_t s);
};
const std::vector<TmaStoreConfig>& tma_store_configs();
