// The FP32 steps whose tile shape (and, for 8b and 8c, pipeline depth) is picked by
// measurement at run time. Each compiles a list of candidates; matmul.cu's autotune() checks
// and times them on the GPU it runs on, and the step's name carries the winner's.
#pragma once
#include <vector>

#include "08_autotuned.cuh"
#include "08b_cp_async.cuh"
#include "08c_frag_prefetch.cuh"

struct TunedStep {
  const char* id;    // "08b"
  const char* name;  // "08b_cp_async"
  const std::vector<TunedKernel>& (*candidates)();
};

inline const std::vector<TunedStep>& tuned_steps() {
  static const std::vector<TunedStep> t = {{"08", "08_autotuned", tune_candidates},
                                           {"08b", "08b_cp_async", cp_async_candidates},
                                           {"08c", "08c_frag_prefetch", prefetch_candidates}};
  return t;
}
