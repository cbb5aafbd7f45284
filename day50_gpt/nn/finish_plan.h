// day50_gpt/nn/finish_plan.h: the queue of column-sum finishes (nn/finish_queue.cuh) as host-only
// arithmetic that the kernel (k::ln_partials_finish_many) and the queue share and that test_finish_plan.cpp
// checks without a GPU: the job table, which block of the grid belongs to which job, and the slices of the
// partials buffer that the producers write into.
#pragma once
#include <cstddef>
#include <stdexcept>

#ifdef __CUDACC__
#define FINISH_HD __host__ __device__
#else
#define FINISH_HD
#endif

namespace k {

// out[k][c] += the sum over chunks of partial[chunk][k][c], for k < sums and c < C: blocks of 32 columns,
// [first, first + (sums * C + 31) / 32) of the grid.
struct FinishJob {
  const float* partial;
  float* out[3];
  int chunks, C, sums, first;
};
constexpr int kFinishJobsMax = 64;  // per launch (a kernel parameter: 64 x 48 bytes, under the 4 KB limit)
struct FinishJobs {
  FinishJob job[kFinishJobsMax];
  int n;
};
// The block after a job's last.
FINISH_HD inline int finish_end_block(const FinishJob& f) { return f.first + (f.sums * f.C + 31) / 32; }
// The job that owns block b: the last whose first block is at or before it (the jobs in order, the first
// starting at block 0). A linear scan: at most 64 jobs, and every block of a launch does it once.
FINISH_HD inline int finish_job_of(const FinishJobs& jobs, int b) {
  int j = 0;
  while (j + 1 < jobs.n && jobs.job[j + 1].first <= b) ++j;
  return j;
}

}  // namespace k

// The host's side of the queue: the jobs waiting, and the part of the partials buffer (the arena) their
// partials take. FinishQueue (nn/finish_queue.cuh) adds the launch.
class FinishPlan {
 public:
  void bind(float* arena, size_t floats) { base_ = arena, cap_ = floats, used_ = 0, jobs_.n = 0; }
  bool empty() const { return jobs_.n == 0; }
  // Whether `floats` more partial sums and one more job fit after what is queued (if not: flush first).
  bool fits(size_t floats) const { return used_ + floats <= cap_ && jobs_.n < k::kFinishJobsMax; }
  // Room for `floats` partial sums after what is queued (fits() first).
  float* take(size_t floats) {
    if (floats > cap_) throw std::logic_error("FinishPlan::take: partials larger than the arena");
    if (!fits(floats)) throw std::logic_error("FinishPlan::take: the queue is full (flush first)");
    float* p = base_ + used_;
    used_ += (floats + 31) / 32 * 32;  // each slice starts 128-byte aligned
    return p;
  }
  // out[k][c] += the sum over chunks of partial[chunk][k][c] (k < sums; partial from take()), at the next
  // flush.
  void push(const float* partial, int chunks, int C, int sums, float* out0, float* out1 = nullptr,
            float* out2 = nullptr) {
    if (jobs_.n >= k::kFinishJobsMax) throw std::logic_error("FinishPlan::push: more jobs than one launch takes");
    k::FinishJob& f = jobs_.job[jobs_.n];
    f.partial = partial, f.out[0] = out0, f.out[1] = out1, f.out[2] = out2;
    f.chunks = chunks, f.C = C, f.sums = sums;
    f.first = jobs_.n ? k::finish_end_block(jobs_.job[jobs_.n - 1]) : 0;
    ++jobs_.n, ++pushed;
  }
  const k::FinishJobs& jobs() const { return jobs_; }
  // The blocks a launch of what is queued takes.
  int blocks() const { return jobs_.n ? k::finish_end_block(jobs_.job[jobs_.n - 1]) : 0; }
  // After the launch: the arena and the table are free again.
  void clear() { used_ = 0, jobs_.n = 0; }
  long pushed = 0;  // finishes queued (run/verify_step.cuh)

 private:
  float* base_ = nullptr;
  size_t cap_ = 0, used_ = 0;
  k::FinishJobs jobs_{};
};
