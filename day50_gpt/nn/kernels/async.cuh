// day50_gpt/nn/kernels/async.cuh: the asynchronous pieces the GPT's kernels share: programmatic dependent
// launch's two calls, shared-memory addresses, cp.async copies, and the bulk copies with the mbarriers that
// count their bytes. Apart from nn/kernels/common.cuh (which includes it) because the sm_90a translation
// units take it too (nn/flash_sm90.cu): it holds inline device functions only, nothing that two units
// linked together could both define.
#pragma once
#include <cuda_runtime.h>

namespace k {

// Programmatic dependent launch (sm_90; the host side: nn/pdl.cuh): the kernel after this one in the stream
// may be launched once every block of this one has called launch_dependents (its launch and its blocks'
// start overlap our tail), and waits in grid_dependency_wait until this grid has finished and its writes are
// visible. Both are no-ops where the launch did not ask for it (and below sm_90).
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// The shared-memory address of a generic pointer: what cp.async, ldmatrix, mbarriers and mapa take.
__device__ __forceinline__ unsigned smem_addr(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
// Asynchronous copies, global to shared memory without passing through registers (sm_80 and later):
// kBytes (4, 8 or 16) per thread through L1 (.ca), or 16 bytes past it (.cg: data each block reads once,
// nothing to keep in L1); grouped by commit, waited for by group: at most N groups still in flight.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(smem_addr(smem)), "l"(gmem), "n"(kBytes) : "memory");
}
__device__ __forceinline__ void cp_async_cg16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// The bulk copy (cp.async.bulk, sm_90) and the mbarriers that count a copy's bytes: one thread hands the copy
// engine a contiguous run of bytes (or, flash_parts.cuh's tma_tile, a tensor map's box) and an mbarrier, and the barrier's
// phase completes when every byte it was told to expect (mbar_expect) has landed. The cluster decoder streams
// its weights this way (decode_cluster.cuh), the flash backward its tiles.
__device__ __forceinline__ void mbar_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
// `bytes` (a multiple of 16; both ends 16-byte aligned) from global memory into this block's shared memory.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
// Waits until the barrier's phase `parity` has completed (every expected byte landed), acquiring at block
// scope (kCluster false: this block's own bulk copies) or at cluster scope (kCluster true: what other
// blocks' st.async stores released, their complete-tx being a release at cluster scope).
#define K_MBAR_WAIT(SEM)                                                        \
  asm volatile(                                                                   \
      "{\n\t.reg .pred done;\n\t"                                                 \
      "WAIT:\n\t"                                                                 \
      "mbarrier.try_wait.parity" SEM ".shared::cta.b64 done, [%0], %1;\n\t"        \
      "@!done bra WAIT;\n\t}" ::"r"(smem_addr(bar)),                               \
      "r"(parity)                                                                 \
      : "memory")
template <bool kCluster = false>
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  if constexpr (kCluster)
    K_MBAR_WAIT(".acquire.cluster");
  else
    K_MBAR_WAIT("");
}
#undef K_MBAR_WAIT

}  // namespace k
