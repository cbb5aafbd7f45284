// Hopper building blocks (sm_90a) shared by day10's steps 10-16, day50's fused-epilogue GEMM
// (day50_gpt/nn/gemm_sm90.cu) and its wgmma flash backward (day50_gpt/nn/flash_sm90.cu): mbarriers, TMA loads and stores, wgmma descriptors and fences, the
// tile order, and the host-side tensor-map encoder.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "check.cuh"

namespace hopper {
using bf16 = __nv_bfloat16;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HOPPER_ENABLED 1
#include "wgmma_m64n256k16.inc"

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Spin until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}
// TMA: copy the box at (inner coordinate c0, outer c1) of the tensor into shared memory;
// completion is signalled as transaction bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
      : "memory");
}
// Shared-memory matrix descriptor for a K-major tile with 128-byte swizzle: rows of
// 64 bf16 (128 B), 8-row groups 1024 B apart (stride byte offset), swizzle mode 1.
__device__ __forceinline__ uint64_t smem_desc(const void* p) {
  const uint64_t addr = smem_u32(p);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }

// The epilogue of a 64x256 fp32 accumulator (one consumer warpgroup's wgmma m64n256 result)
// into a row-major bf16 C. Accumulator layout of m64nN: warp w holds rows 16w..16w+15;
// register 4j+q of lane l is row 16w + l/4 + 8*(q/2), column 8j + 2*(l%4) + (q%2).
// row0/col0: where this warpgroup's 64x256 block starts. Requires N % 8 == 0 (so a column
// pair never straddles the edge). Rows and columns past M and N are not written.
__device__ __forceinline__ void store_m64n256_bf16(const float (&d)[128], bf16* __restrict__ C, int M, int N, int row0,
                                                   int col0, int t) {
  const int w = t / 32, l = t % 32;
  const int row = row0 + w * 16 + l / 4;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int col = col0 + 8 * j + 2 * (l % 4);
    if (col < N) {
      if (row < M)
        *reinterpret_cast<__nv_bfloat162*>(&C[size_t(row) * N + col]) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
      if (row + 8 < M)
        *reinterpret_cast<__nv_bfloat162*>(&C[size_t(row + 8) * N + col]) =
            __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
    }
  }
}

// ---- the copy engine's store side, and a barrier for one warpgroup -----------------------
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
               "r"(smem_u32(src)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most N of this thread's committed bulk groups still read shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Ordinary shared-memory stores -> visible to the async proxy (the TMA unit) that reads them next.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// bar.sync on barrier `id` for the 128 threads of one consumer warpgroup (0 is __syncthreads).
__device__ __forceinline__ void warpgroup_sync(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

// Two floats -> one bf16 pair at a shared-memory address. Spelled as st.shared: through a
// plain pointer the compiler emitted generic stores (ST.E, which must first find out which
// memory the address is in) instead of STS.
__device__ __forceinline__ void st_shared_bf16x2(uint32_t addr, float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(*reinterpret_cast<const uint32_t*>(&v)) : "memory");
}

// Tile order: tiles come in groups of `group_m` rows of tiles, column by column inside a group,
// so the ~132 tiles in flight at once cover a compact patch of C (e.g. 16 x 8 tiles) and read a
// small set of A rows and B columns that stays in L2.
__device__ __forceinline__ void grouped_coords(int tile, int rows_total, int tiles_n, int group_m, int& bm, int& bn) {
  const int gsize = group_m * tiles_n, g = tile / gsize, first = g * group_m;
  const int rows = min(group_m, rows_total - first);
  bm = first + (tile % gsize) % rows;
  bn = (tile % gsize) / rows;
}

// ---- clusters (step 11) -----------------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// All threads of all CTAs of the cluster: release our writes, acquire theirs.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// Arrive on the mbarrier at the same shared-memory offset in CTA `rank` of this cluster.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
  // Default semantics (release at CTA scope): a cluster-scope release would make the arriving
  // thread wait for all its earlier memory operations to become visible cluster-wide, on
  // the critical path of every k-step. The wgmma reads it protects are already complete
  // (wgmma.wait_group) when we arrive.
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
// TMA with multicast: the box lands at the same offset in the shared memory of every CTA
// in `mask`, and each of their barriers at `bar`'s offset receives the transaction bytes.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1,
                                                      uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(mask)
      : "memory");
}
#else
#define HOPPER_ENABLED 0
#endif

// ---- host: tensor maps -------------------------------------------------------------------
// cuTensorMapEncodeTiled is a driver-API function; we take it from the runtime's entry-point
// query so the program needs no -lcuda (which would stop it from starting without a driver).
// Looked up once, in a static's initializer: C++ runs it exactly once even when several threads (one a
// GPU under --gpus N) call this first at the same time.
inline PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !p) {
      std::fprintf(stderr, "error: cuTensorMapEncodeTiled is not available from this driver\n");
      std::exit(1);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A row-major rows x cols bf16 matrix, read in boxes of box_rows x 64 (128 bytes) with the
// 128-byte swizzle that wgmma's descriptors expect; out-of-range elements read as zero.
inline CUtensorMap make_map_bf16(const bf16* ptr, int rows, int cols, int box_rows) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(cols) * sizeof(bf16)};
  const cuuint32_t box[2] = {64, cuuint32_t(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  CUresult r = encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(ptr), dims, strides, box, estr,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "error: cuTensorMapEncodeTiled failed (CUresult %d) for a %dx%d matrix\n", int(r), rows, cols);
    std::exit(1);
  }
  return m;
}
}  // namespace hopper
