// day50_gpt/nn/lt_tuned.cuh: a cuBLASLt matmul (common/cublaslt.h's Spec) whose algorithm is chosen by
// timing, not by the heuristic's first guess (--lt-search on, bf16 only).
//
// Why: the heuristic ranks algorithms by a model of the GPU, and for the model's thin shapes (K = 384
// or 4 * 384 against 16,384 rows) with an epilogue its first pick need not be the fastest. So the first
// call asks for up to kCandidates algorithms, runs each a few times on the real inputs (outputs into
// scratch, so the search changes nothing), keeps the fastest, and remembers the choice for the whole
// process, keyed by the shape: every model of the run then uses the same algorithm, so two runs in one
// process still compute the same bits (what the resume checks compare). fp32 keeps the heuristic's
// first pick: its path is the bitwise-reproducible one, also from one process to the next; so does
// tf32 (the same fp32 model, its matmuls on TF32 tensor cores: the same path, another compute type).
#pragma once
#include <cublasLt.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "check.cuh"
#include "cublaslt.h"

namespace lt {

constexpr int kCandidates = 8;

// The index (in the heuristic's list) chosen for each shape, for the whole process (data parallelism's
// threads share it: every access holds the mutex).
inline std::map<std::string, int>& chosen_algos() {
  static std::map<std::string, int> m;
  return m;
}
inline std::mutex& chosen_mutex() {
  static std::mutex mu;
  return mu;
}

// The other choices made by timing (nn/linear.cuh: an epilogue or the plain matmul and a pass of ours),
// remembered like the algorithms: the index in chosen_algos, a line saying what was measured here
// (the bench copies these lines into its results file).
inline std::map<std::string, std::string>& choice_notes() {
  static std::map<std::string, std::string> m;
  return m;
}
// ... and, for the placements (nn/linear.cuh), the measured times themselves (us per path, and the pick),
// so that the results file carries numbers the notes can compute with, not only the printed line.
inline std::map<std::string, std::map<std::string, double>>& choice_times() {
  static std::map<std::string, std::map<std::string, double>> m;
  return m;
}
inline void remember_times(const std::string& key, const std::map<std::string, double>& us) {
  std::lock_guard<std::mutex> lock(chosen_mutex());
  choice_times()[key] = us;
}
inline int recall(const std::string& key) {
  std::lock_guard<std::mutex> lock(chosen_mutex());
  auto it = chosen_algos().find(key);
  return it == chosen_algos().end() ? -1 : it->second;
}
inline void remember(const std::string& key, int pick, const std::string& note) {
  std::lock_guard<std::mutex> lock(chosen_mutex());
  chosen_algos()[key] = pick;
  choice_notes()[key] = note;
}
inline bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
  return cs != cudaStreamCaptureStatusNone;
}
// Ways to compute the same thing, timed on `stream` in turn: f(i) for i < n, 6 runs each, the first a
// warm-up (and any search of its own); t[i] is the best of the other 5 (ms). Not inside a capture.
template <class F>
void time_each(cudaStream_t stream, int n, float* t, F&& f) {
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < n; ++i) t[i] = 1e30f;
  for (int rep = 0; rep < 6; ++rep)
    for (int i = 0; i < n; ++i) {
      CUDA_CHECK(cudaEventRecord(e0, stream));
      f(i);
      CUDA_CHECK(cudaEventRecord(e1, stream));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep > 0) t[i] = std::min(t[i], ms);
    }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
}
template <class F0, class F1>
void time_two(cudaStream_t stream, F0&& f0, F1&& f1, float t[2]) {
  time_each(stream, 2, t, [&](int i) {
    if (i == 0)
      f0();
    else
      f1();
  });
}

class Tuned {
 public:
  Tuned(cublasLtHandle_t h, const Spec& s, size_t workspace_bytes, const std::string& key, bool search)
      : h_(h), s_(s), ws_bytes_(workspace_bytes), key_(key), search_(search), ds_(s) {
    cublasLtMatmulHeuristicResult_t r[kCandidates] = {};
    const int found = ds_.heuristic(h_, ws_bytes_, search ? kCandidates : 1, r, &why_);
    if (found == 0) return;
    for (int i = 0; i < found; ++i) algos_.push_back(r[i].algo);
    std::lock_guard<std::mutex> lock(chosen_mutex());
    auto it = chosen_algos().find(key_);
    if (it != chosen_algos().end() && it->second < found)
      pick_ = it->second;
    else if (found == 1 || !search_)
      pick_ = 0;  // nothing to search
  }
  Tuned(const Tuned&) = delete;
  Tuned& operator=(const Tuned&) = delete;
  bool ok() const { return !algos_.empty(); }
  const std::string& why() const { return why_; }
  int candidates() const { return int(algos_.size()); }
  int picked() const { return pick_; }
  const Spec& spec() const { return s_; }
  // The picked algorithm's split-K reduction scheme (cublasLtReductionScheme_t) as its configuration
  // reports it; -1 where it does not say (or nothing is picked yet).
  int picked_reduction() const {
    if (pick_ < 0 || algos_.empty()) return -1;
    uint32_t v = 0;
    size_t written = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(&algos_[size_t(pick_)], CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &v,
                                                sizeof v, &written) == CUBLAS_STATUS_SUCCESS && written == sizeof v
               ? int(v)
               : -1;
  }

  // D = epilogue(op(A).op(B) + beta * D), as cuBLASLt computes it; the first call may search first.
  void run(const void* A, const void* B, void* D, float beta, const void* bias, void* aux, void* workspace,
           cudaStream_t stream = 0) {
    if (pick_ < 0) search(A, B, D, beta, bias, aux, workspace, stream);
    set_pointers(bias, aux);
    const float one = 1.f;
    CUBLAS_CHECK(cublasLtMatmul(h_, ds_.op, &one, A, ds_.a, B, ds_.b, &beta, D, ds_.d, D, ds_.d, &algos_[size_t(pick_)],
                                workspace, ws_bytes_, stream));
  }

 private:
  void set_pointers(const void* bias, void* aux) { ds_.set_pointers(bias, aux); }
  // Time every candidate (best of 5 runs after one warm-up) into scratch outputs: D, and what the
  // epilogue writes (the GELU's pre-activation for GELU_AUX, the bias gradient for BGRADB). Inside a
  // CUDA graph capture no timing is possible: the first candidate then, unsearched.
  void search(const void* A, const void* B, void* D, float beta, const void* bias, void* aux, void* workspace,
              cudaStream_t stream) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
    if (cs != cudaStreamCaptureStatusNone) {
      pick_ = 0;
      return;
    }
    const size_t esz_d = s_.cd == CUDA_R_32F ? 4 : 2, esz_ab = s_.ab == CUDA_R_32F ? 4 : 2;
    const bool aux_out = s_.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || s_.epilogue == CUBLASLT_EPILOGUE_GELU_AUX,
               bias_out = s_.epilogue == CUBLASLT_EPILOGUE_BGRADB || s_.epilogue == CUBLASLT_EPILOGUE_BGRADA;
    void *d_s = nullptr, *aux_s = nullptr, *bias_s = nullptr;
    CUDA_CHECK(cudaMalloc(&d_s, size_t(s_.ldd) * s_.n * esz_d));
    CUDA_CHECK(cudaMemsetAsync(d_s, 0, size_t(s_.ldd) * s_.n * esz_d, stream));  // beta * D reads it
    if (aux_out) CUDA_CHECK(cudaMalloc(&aux_s, size_t(s_.aux_ld) * s_.n * esz_ab));
    if (bias_out) CUDA_CHECK(cudaMalloc(&bias_s, size_t(std::max(s_.m, s_.n)) * 4));
    set_pointers(bias_out ? bias_s : bias, aux_out ? aux_s : aux);
    (void)D;
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    const float one = 1.f;
    float best = 1e30f;
    for (int i = 0; i < int(algos_.size()); ++i) {
      float t_best = 1e30f;
      bool fine = true;
      for (int rep = 0; rep < 6 && fine; ++rep) {
        CUDA_CHECK(cudaEventRecord(e0, stream));
        fine = cublasLtMatmul(h_, ds_.op, &one, A, ds_.a, B, ds_.b, &beta, d_s, ds_.d, d_s, ds_.d, &algos_[size_t(i)],
                              workspace, ws_bytes_, stream) == CUBLAS_STATUS_SUCCESS;
        CUDA_CHECK(cudaEventRecord(e1, stream));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
        if (rep > 0) t_best = std::min(t_best, t);  // rep 0: warm-up
      }
      if (fine && t_best < best) best = t_best, pick_ = i;
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaFree(d_s));
    if (aux_s) CUDA_CHECK(cudaFree(aux_s));
    if (bias_s) CUDA_CHECK(cudaFree(bias_s));
    if (pick_ < 0) pick_ = 0;  // none ran: the heuristic's first, whose error run() then reports
    {
      std::lock_guard<std::mutex> lock(chosen_mutex());
      chosen_algos()[key_] = pick_;
    }
    std::printf("cuBLASLt search %s: algorithm %d of %zu fastest (%.1f us)\n", key_.c_str(), pick_, algos_.size(),
                1e3 * best);
  }

  cublasLtHandle_t h_;
  Spec s_;
  size_t ws_bytes_;
  std::string key_;
  bool search_;
  Descs ds_;
  std::vector<cublasLtMatmulAlgo_t> algos_;
  int pick_ = -1;  // -1: not searched yet
  std::string why_;
};

}  // namespace lt
