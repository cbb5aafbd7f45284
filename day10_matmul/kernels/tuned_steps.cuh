// The FP32 steps whose tile shape (and, for 8b-8f, pipeline depth) is picked by
// measurement at run time. Each compiles a list of candidates; tune_step() below checks and
// times them on the GPU it runs on (matmul.cu's autotune()), and the step's name carries the winner's.
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "results.h"
#include "timing.cuh"
#include "verify.h"

#include "08_autotuned.cuh"
#include "08b_cp_async.cuh"
#include "08c_frag_prefetch.cuh"
#include "08d_stream_k.cuh"
#include "08e_spread_lds.cuh"
#include "08f_stream_k_spread.cuh"
#include "08g_ptxas_level.h"

struct TunedStep {
  const char* id;    // "08b"
  const char* name;  // "08b_cp_async"
  const std::vector<TunedKernel>& (*candidates)();
};

inline const std::vector<TunedStep>& tuned_steps() {
  static const std::vector<TunedStep> t = {{"08", "08_autotuned", tune_candidates},
                                           {"08b", "08b_cp_async", cp_async_candidates},
                                           {"08c", "08c_frag_prefetch", prefetch_candidates},
                                           {"08d", "08d_stream_k", stream_k_candidates},
                                           {"08e", "08e_spread_lds", spread_candidates},
                                           {"08f", "08f_stream_k_spread", stream_k_spread_candidates},
                                           {"08g", "08g_ptxas_level", ptxas_level_candidates}};
  return t;
}

// Autotunes one step: each candidate is checked first (check(c): run on poisoned output and
// compared with cuBLAS, so a wrong one cannot win), then timed with run(c). Fills `table` (time,
// TFLOP/s, registers, spills per candidate) and returns the index of the fastest (0 if none passed).
inline int tune_step(const TunedStep& st, const std::string& shape, double flops,
                     const std::function<verify::Check(const TunedKernel&)>& check,
                     const std::function<void(const TunedKernel&)>& run, const timing::Options& topt,
                     results::Results& res, json::Value& table) {
  const auto& cands = st.candidates();
  std::printf("\n  Autotuning step %s at %s (%zu candidates):\n", st.id, shape.c_str(), cands.size());
  double best = 1e30;
  int win = 0;
  for (size_t c = 0; c < cands.size(); ++c) {
    const verify::Check chk = check(cands[c]);
    res.add_quiet(chk);
    if (!chk.passed) {
      verify::print(chk);
      continue;
    }
    timing::Stats t = timing::time_gpu([&] { run(cands[c]); }, topt);
    cudaFuncAttributes fa{};
    if (cands[c].attributes) fa = cands[c].attributes();
    std::printf("    %-40s %8.3f ms  %6.1f TFLOP/s  %3d regs  %4zu B spilled\n", cands[c].name, t.median_ms,
                flops / t.median_ms / 1e9, fa.numRegs, fa.localSizeBytes);
    json::Value row = json::Value::object();
    row["config"] = cands[c].name;
    row["ms"] = t.median_ms;
    row["tflops"] = flops / t.median_ms / 1e9;
    row["regs"] = fa.numRegs;
    row["local_bytes"] = static_cast<unsigned long>(fa.localSizeBytes);
    table.push(row);
    if (t.median_ms < best) {
      best = t.median_ms;
      win = int(c);
    }
  }
  std::printf("  -> step %s uses %s\n", st.id, cands[win].name);
  return win;
}
