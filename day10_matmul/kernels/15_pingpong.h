// Step 15 (15_pingpong.cu, sm_90a): step 12 with "ping-pong" consumers -- each consumer
// warpgroup computes whole 64x256 tiles of its own, the two take turns on the tensor cores, and
// one's epilogue runs while the other's wgmmas do. Same contract and shape limits as steps
// 10-14 (10_wgmma_tma.h): C (M x N, bf16) = A (M x K) * Bt^T, Bt stored N x K, all row-major;
// K % 8 == 0 and N % 8 == 0.
#pragma once
#include <vector>

#include "12_wgmma_tma_store.h"

// The configurations of step 15 ("sS cC": S pipeline stages, C boxes of staging per consumer),
// each its own row in the checks and the timing.
const std::vector<TmaStoreConfig>& pingpong_configs();
