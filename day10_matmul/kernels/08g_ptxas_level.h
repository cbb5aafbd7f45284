// Step 8g (08g_ptxas_level.cu): steps 8e and 8f, the same source, compiled with ptxas told to spend
// registers more freely (-Xptxas --register-usage-level=10; the default is 5). Its own translation
// unit, because the flag applies to a whole compilation; the Makefile gives it to this object alone.
#pragma once
#include <vector>

#include "08_autotuned.cuh"

const std::vector<TunedKernel>& ptxas_level_candidates();
