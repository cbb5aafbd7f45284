// day50_gpt/run/dp_timeline.cuh: one data-parallel training step seen from both of its streams, from
// CUDA events: on the compute stream a point where each phase ends (the forward, each block's
// backward, the wait for the gradient, the optimizer), on the NCCL stream an interval around each
// collective. The benchmark writes it into the results file as `timeline` (ms from the step's start;
// dp::timeline_json in dp_plan.h), so a plot can show which all-reduces ran beside the backward and
// which the step waited for.
//
// Events on two streams of one device share one clock, so their elapsed times from the step's first
// event place both streams on one axis. Recording an event costs a few microseconds of launch
// overhead; the log is on for one traced step only, never while steps are timed.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "../dp_plan.h"
#include "check.cuh"

namespace dp {

class EventLog {
 public:
  EventLog() = default;
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  ~EventLog() {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  bool on() const { return on_; }
  // Starts a step's log (its first event is the step's start, on the compute stream), or stops logging.
  void begin_step(bool on) {
    on_ = on, used_ = 0;
    points_.clear(), spans_.clear();
    if (on) start_ = record(0);
  }
  // The compute stream has reached the end of `label` (which began at the previous point). busy=false:
  // the stream was waiting (for the NCCL stream), not computing.
  void point(const std::string& label, bool busy = true) {
    if (on_) points_.push_back({label, record(0), nullptr, busy});
  }
  // A collective on stream `s`: open() before it is enqueued, close() after.
  void open(cudaStream_t s, const std::string& label) {
    if (on_) spans_.push_back({label, record(s), nullptr, true});
  }
  void close(cudaStream_t s) {
    if (on_ && !spans_.empty()) spans_.back().b = record(s);
  }
  // The logged step's intervals, in ms from its start (synchronizes with the step's last event).
  std::vector<Interval> compute() const {
    std::vector<Interval> out;
    double at = 0;
    for (const Span& p : points_) {
      const double t = ms(p.a);
      out.push_back({p.label, at, t, p.busy});
      at = t;
    }
    return out;
  }
  std::vector<Interval> comm() const {
    std::vector<Interval> out;
    for (const Span& s : spans_)
      if (s.b) out.push_back({s.label, ms(s.a), ms(s.b), true});
    return out;
  }

 private:
  struct Span {
    std::string label;
    cudaEvent_t a = nullptr, b = nullptr;
    bool busy = true;
  };
  cudaEvent_t record(cudaStream_t s) {
    if (used_ == pool_.size()) {
      pool_.emplace_back();
      CUDA_CHECK(cudaEventCreate(&pool_.back()));
    }
    cudaEvent_t e = pool_[used_++];
    CUDA_CHECK(cudaEventRecord(e, s));
    return e;
  }
  double ms(cudaEvent_t e) const {
    CUDA_CHECK(cudaEventSynchronize(e));
    float x = 0;
    CUDA_CHECK(cudaEventElapsedTime(&x, start_, e));
    return x;
  }
  bool on_ = false;
  cudaEvent_t start_ = nullptr;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;
  std::vector<Span> points_, spans_;
};

}  // namespace dp
