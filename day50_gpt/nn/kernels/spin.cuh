// day50_gpt/nn/kernels/spin.cuh: a kernel that only waits, for the checks that must see a missing wait: placed
// on a stream before some work, it makes that work start late on purpose, so that a reader that forgot to
// wait for it reads the old values on every run, not only when the timing happens to overlap. --verify's
// graph holds every side-stream weight gradient back this way (nn/dw_stream.h, DwStream::delay_ns), and the
// data-parallel checks every range of ZeRO-1's gather (run/copy_allreduce.cuh, run/multi_gpu.cuh).
#pragma once

namespace k {

// One thread spins until `ns` nanoseconds have passed on the GPU's global timer (independent of the clocks).
__global__ void spin_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

}  // namespace k
