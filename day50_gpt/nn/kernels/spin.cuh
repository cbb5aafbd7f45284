// day50_gpt/nn/kernels/spin.cuh: a kernel that only waits, for the data-parallel checks (run/multi_gpu.cuh):
// placed on a stream before some copies, it makes them land late on purpose, so that a reader that
// forgot to wait for them reads the old values and a check can see it.
#pragma once

namespace k {

// One thread spins for `cycles` SM clock cycles (2 ms is about 4e6 at 1.98 GHz).
__global__ void spin_cycles(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

}  // namespace k
