// day50_gpt/run/stream_gate.cuh: a stream held until the host lets it go (the copy all-reduce's bench).
//
// Work enqueued behind the gate then runs back to back, so timing work whose enqueue is slow for the host
// (many small calls, host-side meetings between threads) measures the GPU's time, not the host's pace.
// The flag lives in mapped, portable host memory: every GPU reads it over the bus, and the one-thread
// kernel sleeps between looks.
#pragma once
#include "check.cuh"

namespace dp {

__global__ void hold_until(const volatile int* flag) {
  while (*flag == 0) __nanosleep(1000);
}

struct StreamGate {
  int* flag = nullptr;
  StreamGate() {
    CUDA_CHECK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    *flag = 0;
  }
  ~StreamGate() {
    if (flag) cudaFreeHost(flag);
  }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  void hold(cudaStream_t s) {
    __atomic_store_n(flag, 0, __ATOMIC_SEQ_CST);
    int* d = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d), flag, 0));
    hold_until<<<1, 1, 0, s>>>(d);
    LAUNCH_CHECK();
  }
  void release() { __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST); }
};

}  // namespace dp
