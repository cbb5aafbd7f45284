// Step 14 (14_stream_k.cu, sm_90a): step 12 with a stream-K tail: whole waves of tiles as
// before, the last partial wave's k-steps shared evenly by every SM, partial tiles reduced
// in fp32 through a global workspace. Same contract and shape limits as steps 10-13.
#pragma once
#include "12_wgmma_tma_store.h"

// Its configurations, in the same form as steps 12-13 (each is checked and timed as a row).
const std::vector<TmaStoreConfig>& stream_k_configs();
// Frees the workspace and flags the first launch allocated (a later launch allocates them again).
void stream_k_release();
