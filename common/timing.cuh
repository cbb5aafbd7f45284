// common/timing.cuh: time GPU work with CUDA events: warm-ups, repeats, median.
//
//   timing::Stats s = timing::time_gpu([&] { my_kernel<<<g, b>>>(...); }, {.flush_l2 = true});
//   printf("%.3f ms\n", s.median_ms);
//
// Why each piece is there:
// - Warm-ups keep one-time costs (module load, cuBLAS/cuDNN heuristics and workspace,
//   clocks ramping up) out of the numbers.
// - The median of many repeats resists the odd slow repeat; min and max are kept too.
// - flush_l2 writes a buffer twice the size of L2 before each repeat (outside the timed
//   region), so an input that fits in L2 is read from device memory every time, as it
//   would be in a real pipeline. Or pass a callable taking the repeat index and rotate
//   between several input sets yourself.
// - The repeat count adapts to a time budget, so a slow naive kernel at a large size does
//   not run for minutes: reps = clamp(budget / first timing, min_reps, reps).
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>
#include <type_traits>
#include <vector>

#include "check.cuh"

namespace timing {

struct Options {
  int warmup = 2;
  int reps = 30;
  int min_reps = 5;
  double budget_ms = 1500.0;  // total timed work per measurement, roughly
  bool flush_l2 = false;
  bool flush_by_write = false;  // flush with a memset instead (leaves dirty lines: for comparison only)
  cudaStream_t stream = 0;
};

// The lessons' usual setting: L2 flushed before every repeat (inputs come from device memory),
// at most `reps` repeats and roughly `budget_ms` of timed work, at least 5.
inline Options flushed(int reps, double budget_ms, int warmup = 2) {
  Options o;
  o.flush_l2 = true;
  o.warmup = warmup;
  o.min_reps = 5;
  o.reps = reps;
  o.budget_ms = budget_ms;
  return o;
}

struct Stats {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};

// Median, min and max of host-side samples (ms): the one place the lessons turn a list of times
// into Stats. Sorts a copy; an empty list gives zeros and reps = 0.
inline Stats summarize(std::vector<double> ms) {
  Stats s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  s.reps = int(n);
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  s.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return s;
}

// Reads every byte of `buf`; writes only if the sum is an impossible value, so the loads
// cannot be optimized away and no line becomes dirty.
__global__ void l2_flush_read(const float4* __restrict__ buf, size_t n4, float* sink) {
  float acc = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x) {
    const float4 v = buf[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5f) *sink = acc;  // the buffer holds zeros: never taken
}

// A device buffer of twice the L2 size, *read* before each repeat so that the timed work
// finds nothing of its own in L2. Reading rather than writing: a memset leaves L2 full of
// dirty lines whose write-back to DRAM is then charged to the timed kernel. Measured on an
// H200 with day20's `--flush-by-write`, the effect on 11-16 us kernels was 2-9%: small, but
// the read flush is the one that charges the timed kernel nothing that is not its own.
// It lives for one time_gpu call (allocated outside the timed region), so nothing leaks.
struct L2Flusher {
  void* buf = nullptr;
  size_t bytes = 0;
  int sms = 1;
  bool by_write = false;
  explicit L2Flusher(bool on, bool write = false) : by_write(write) {
    if (!on) return;
    int dev = 0, l2 = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    bytes = std::max<size_t>(size_t(l2) * 2, size_t(64) << 20) / 16 * 16;
    CUDA_CHECK(cudaMalloc(&buf, bytes + 16));
    CUDA_CHECK(cudaMemset(buf, 0, bytes + 16));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  void operator()(cudaStream_t stream) const {
    if (!buf) return;
    if (by_write) {
      CUDA_CHECK(cudaMemsetAsync(buf, 0, bytes, stream));
      return;
    }
    l2_flush_read<<<sms * 4, 512, 0, stream>>>(static_cast<const float4*>(buf), bytes / 16,
                                               reinterpret_cast<float*>(static_cast<char*>(buf) + bytes));
    LAUNCH_CHECK();
  }
  ~L2Flusher() {
    if (buf) CUDA_CHECK(cudaFree(buf));
  }
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
};

template <class F>
void invoke(F& f, int rep) {
  if constexpr (std::is_invocable_v<F&, int>)
    f(rep);
  else
    f();
}

template <class F>
Stats time_gpu(F&& f, const Options& o = Options()) {
  L2Flusher flush_l2(o.flush_l2, o.flush_by_write);
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  // Warm-up; the last one is timed to size the repeat count.
  float first = 0;
  for (int i = 0; i < std::max(1, o.warmup); ++i) {
    flush_l2(o.stream);
    CUDA_CHECK(cudaEventRecord(a, o.stream));
    invoke(f, i);
    CUDA_CHECK(cudaEventRecord(b, o.stream));
  }
  CUDA_CHECK(cudaEventSynchronize(b));
  CUDA_CHECK(cudaEventElapsedTime(&first, a, b));
  int reps = o.reps;
  if (first > 0) reps = int(std::min<double>(o.reps, std::max<double>(o.min_reps, o.budget_ms / first)));
  reps = std::max(1, reps);

  std::vector<cudaEvent_t> start(reps), stop(reps);
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventCreate(&start[i]));
    CUDA_CHECK(cudaEventCreate(&stop[i]));
  }
  for (int i = 0; i < reps; ++i) {
    flush_l2(o.stream);
    CUDA_CHECK(cudaEventRecord(start[i], o.stream));
    invoke(f, i);
    CUDA_CHECK(cudaEventRecord(stop[i], o.stream));
  }
  CUDA_CHECK(cudaEventSynchronize(stop[reps - 1]));
  std::vector<double> ms(reps);
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, start[i], stop[i]));
    ms[i] = t;
    CUDA_CHECK(cudaEventDestroy(start[i]));
    CUDA_CHECK(cudaEventDestroy(stop[i]));
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return summarize(ms);
}

// A headline ratio, measured fairly: `repeats` rounds, each timing the reference and then ours
// (time_gpu with the same options), so that a drift in clocks or temperature during the run
// touches both sides alike. pct = 100 * ref / ours per round; the median round is the result and
// min..max its spread. Each side's Stats is the median round's.
struct Interleaved {
  Stats ours, ref;
  double pct_median = NAN, pct_min = NAN, pct_max = NAN;
  int repeats = 0;
};

template <class FO, class FR>
Interleaved interleaved(FO&& ours, FR&& ref, const Options& o, int repeats = 3) {
  Interleaved r;
  std::vector<std::pair<double, std::pair<Stats, Stats>>> rounds;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const Stats sr = time_gpu(ref, o);
    const Stats so = time_gpu(ours, o);
    rounds.push_back({100.0 * sr.median_ms / so.median_ms, {so, sr}});
  }
  std::sort(rounds.begin(), rounds.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto& mid = rounds[rounds.size() / 2];
  r.ours = mid.second.first;
  r.ref = mid.second.second;
  r.pct_median = mid.first;
  r.pct_min = rounds.front().first;
  r.pct_max = rounds.back().first;
  r.repeats = int(rounds.size());
  return r;
}

}  // namespace timing
