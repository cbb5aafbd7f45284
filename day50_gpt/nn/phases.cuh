// day50_gpt/nn/phases.cuh: where one training step's time goes: CUDA events between its phases
// (the bench's breakdown; off otherwise, so the step itself is unchanged).
#pragma once
#include <utility>
#include <vector>

#include "check.cuh"

enum Phase { kEmbed, kLayerNorm, kMatmul, kAttention, kGelu, kResidual, kLoss, kOptimizer, kPhases };
inline const char* kPhaseName[kPhases] = {"embedding", "layernorm",     "matmul (cuBLAS)", "attention",
                                          "gelu",      "bias+residual", "softmax+loss",    "grad norm+AdamW"};
struct Phases {
  bool on = false;
  std::vector<std::pair<int, cudaEvent_t>> marks;
  void start(cudaStream_t st = 0) {
    on = true;
    mark(-1, st);
  }
  // Everything enqueued (on the step's stream st) since the previous mark is charged to `p`.
  void mark(int p, cudaStream_t st = 0) {
    if (!on) return;
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaEventRecord(e, st));
    marks.push_back({p, e});
  }
  std::vector<double> finish() {
    std::vector<double> ms(kPhases, 0.0);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 1; i < marks.size(); ++i) {
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, marks[i - 1].second, marks[i].second));
      ms[size_t(marks[i].first)] += t;
    }
    for (auto& m : marks) CUDA_CHECK(cudaEventDestroy(m.second));
    marks.clear();
    on = false;
    return ms;
  }
};
