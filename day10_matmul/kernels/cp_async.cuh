// Asynchronous global -> shared copies (cp.async, sm_80+) and the tile copies of steps 8b-8c.
//
// cp.async moves bytes from device memory straight into shared memory: no register holds
// them on the way, and the thread does not wait for them. A thread groups its copies
// (commit_group) and later waits until at most N of its groups are still in flight
// (wait_group N); a __syncthreads() after the wait makes every thread's copies visible to
// the whole block.
//
// Edges: the copy's source size may be smaller than its size; the rest of the destination
// is filled with zeros, which add nothing to a dot product. A copy that lies wholly outside
// the matrix gets source size 0 (and a source address inside the matrix, so that no
// out-of-range address is ever formed), so one code path covers every tile.
#pragma once
#include "check.cuh"

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
// Before sm_80 there is no cp.async: plain (synchronous) copies keep the program correct.
__device__ __forceinline__ void cp_async_4(float* dst, const float* src, bool ok) { *dst = ok ? *src : 0.f; }
__device__ __forceinline__ void cp_async_16(float* dst, const float* src, bool ok) {
  *reinterpret_cast<float4*>(dst) = ok ? *reinterpret_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
}
__device__ __forceinline__ void cp_async_commit() {}
template <int N>
__device__ __forceinline__ void cp_async_wait() {}
#else
// One float; .ca (through L1) is the only cache mode the 4-byte size allows.
__device__ __forceinline__ void cp_async_4(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(ok ? 4 : 0)
               : "memory");
}
// Four floats (16 bytes; both addresses 16-byte aligned). .cg: bypass L1, the block reads
// each tile of B once, so there is nothing to keep there.
__device__ __forceinline__ void cp_async_16(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(ok ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

// Edges without a test per copy. Rows of A and columns of B past the matrix only feed rows
// and columns of C that are never stored, so their addresses are clamped to the last row
// (column) once, before the main loop, and copied like any other. Only K needs zeros: a k
// past the end would add to every output. So the copies of a tile come in two versions:
// GUARD = false for every full K tile (no comparisons at all), GUARD = true for the last
// tile when K % BK != 0 (source size 0 past K). Offsets are 32-bit (every matrix has fewer
// than 2^31 elements, which the program checks): one IMAD.WIDE forms each 64-bit address.

// The A tile (rows r0 .. r0+BM-1, k0 .. k0+BK-1 of the M x K matrix A) goes to shared memory
// transposed, As[k * LDA + m], one float per copy: a 16-byte copy cannot scatter its four
// floats over four rows of As. Each thread copies runs of 4 consecutive k (16 bytes of one
// row, addressed with one register and immediate offsets) from kPasses rows; BK/4 threads
// cover one row, so a warp reads whole 32-byte sectors of A. A needs no alignment (any K).
template <int BM, int BK, int LDA, int NT>
struct ACopier {
  static constexpr int kRuns = BK / 4, kRowsPerPass = NT / kRuns, kPasses = BM / kRowsPerPass;
  static_assert(BK % 4 == 0 && NT % kRuns == 0 && BM % kRowsPerPass == 0, "the A tile must split evenly");
  const float* A;
  int row_off[kPasses];  // (clamped row) * K + the run's first k
  int dst;               // the thread's first float in the stage: kq * LDA + m
  int kq;

  __device__ __forceinline__ ACopier(const float* A_, int M, int K, int r0) : A(A_) {
    kq = 4 * (threadIdx.x % kRuns);
    const int m = threadIdx.x / kRuns;
    dst = kq * LDA + m;
#pragma unroll
    for (int p = 0; p < kPasses; ++p) row_off[p] = min(r0 + m + p * kRowsPerPass, M - 1) * K + kq;
  }
  template <bool GUARD>
  __device__ __forceinline__ void issue(float* stage, int k0, int K) const {
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float* d = stage + dst + j * LDA + p * kRowsPerPass;
        if (GUARD) {  // the offset is formed only where it lies inside the matrix
          const bool ok = k0 + kq + j < K;
          cp_async_4(d, ok ? A + (row_off[p] + k0 + j) : A, ok);
        } else {
          cp_async_4(d, A + (row_off[p] + k0) + j, true);
        }
      }
    }
  }
};

// The B tile (rows k0 .. k0+BK-1, columns c0 .. c0+BN-1 of the K x N matrix B) goes to
// Bs[k * BN + n], the layout it has in device memory. `vec` (N % 4 == 0: every row starts
// 16-byte aligned, and a group of four columns lies wholly inside or wholly outside the
// matrix) selects 16-byte copies of (clamped) four-column groups; otherwise one float per
// copy, columns clamped the same way.
template <int BK, int BN, int NT>
struct BCopier {
  static constexpr int kGroups = BN / 4, kRowsPerPass = NT / kGroups, kPasses = BK / kRowsPerPass;
  static_assert(NT % kGroups == 0 && BK % kRowsPerPass == 0, "the B tile must split evenly");
  static constexpr int kScalar = BK * BN / NT;  // copies per thread on the one-float path
  static_assert((BK * BN) % NT == 0, "one-float path: the tile must split evenly");
  const float* B;
  int col_off;  // vec: first row's offset, clamped column group
  int kb;       // vec: the thread's first row in the tile
  bool vec;

  __device__ __forceinline__ BCopier(const float* B_, int N, int c0, bool vec_) : B(B_), vec(vec_) {
    kb = threadIdx.x / kGroups;
    const int n = 4 * (threadIdx.x % kGroups);
    col_off = vec ? kb * N + min(c0 + n, N - 4) : 0;
  }
  template <bool GUARD>
  __device__ __forceinline__ void issue(float* stage, int k0, int K, int N, int c0) const {
    if (vec) {
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        const int k = kb + p * kRowsPerPass;
        float* d = stage + k * BN + 4 * (threadIdx.x % kGroups);
        if (GUARD) {
          const bool ok = k0 + k < K;
          cp_async_16(d, ok ? B + (col_off + (k0 + p * kRowsPerPass) * N) : B, ok);
        } else {
          cp_async_16(d, B + (col_off + (k0 + p * kRowsPerPass) * N), true);
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < kScalar; ++j) {
        const int g = threadIdx.x + j * NT;
        const int k = g / BN, n = g % BN;
        const bool ok = !GUARD || k0 + k < K;
        cp_async_4(stage + k * BN + n, ok ? B + (k0 + k) * N + min(c0 + n, N - 1) : B, ok);
      }
    }
  }
};
