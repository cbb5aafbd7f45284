// Step 16 (16_deferred_epilogue.cu, sm_90a): step 12 with the epilogue's shared-memory and TMA
// stores moved into the next tile's first k-steps (the accumulator packed to bf16 registers at
// the tile's end). Same contract and shape limits as steps 10-15 (10_wgmma_tma.h).
#pragma once
#include <vector>

#include "12_wgmma_tma_store.h"

// The configurations of step 16 ("sS cC" as step 12's), each its own row.
const std::vector<TmaStoreConfig>& deferred_epilogue_configs();
