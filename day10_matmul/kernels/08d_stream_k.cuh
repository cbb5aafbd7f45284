// Step 8d: step 8b's kernel as persistent blocks, with the last waves' work split along K
// (stream-K), so that no SM idles through a partial last wave.
//
// Step 8b runs one block of 8 warps per SM. At n = 4096 its 128x256 tiles number 512: on an
// H200's 132 SMs that is 3 full waves and a 4th in which 116 SMs work and 16 wait, a loss of up
// to (132 - 116) / (4 * 132) of the run. Here the grid is one block per SM slot (grid = the
// number of blocks that fit at once, or the number of tiles if fewer), and
//  - every full wave but the last stays data-parallel: block b computes tiles b, b + grid, ...
//    (a whole tile each, in step 8b's row-major tile order, which keeps the blocks of one wave
//    on neighbouring rows of A and columns of B, as in step 8b);
//  - the rest, one full wave plus the partial one (sk_tiles = grid + tiles % grid tiles), is laid
//    out as sk_tiles * ktiles units of one K tile each and cut into `grid` equal contiguous
//    ranges, one per block. Every block then does the same number of K tiles (to within one).
// A range is at least one tile long (sk_tiles >= grid), so a tile is shared by at most two
// blocks: block b computes its first K tiles at the end of its range and block b + 1 the rest
// at the start of its own. The fixup goes through C itself: b + 1 stores its partial sums to
// the tile as if they were final, then raises a flag; b, which gets there at the very end of
// its work, waits for the flag (in practice it is long set), reads the partials back, adds its
// own and stores the sum. No workspace; the flags are a static array, each reset by its reader,
// so every launch leaves them all zero for the next.
// Waiting is safe because all blocks of the grid are resident at once (the grid is sized from
// the occupancy), and a producer's partial is the first thing it computes in its stream-K range.
#pragma once
#include <algorithm>
#include <vector>

#include "08b_cp_async.cuh"

// One flag per block of a launch; the grid is capped at this count.
constexpr int kStreamKMaxBlocks = 1024;
__device__ int g_08d_flags[kStreamKMaxBlocks];

// C[r][c .. c+TN-1] += vals, reading the partial sums stored by another block (through L2:
// __ldcg, so that no stale line of this SM's L1 can be read).
template <int TN>
__device__ __forceinline__ void add_row(float* __restrict__ C, int M, int N, int r, int c, const float* vals,
                                        bool vec_ok) {
  if (r >= M) return;
  float* p = C + size_t(r) * N + c;
  if (TN % 4 == 0 && vec_ok && c + TN <= N) {
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      float4 o = __ldcg(reinterpret_cast<const float4*>(p + j));
      o.x += vals[j], o.y += vals[j + 1], o.z += vals[j + 2], o.w += vals[j + 3];
      *reinterpret_cast<float4*>(p + j) = o;
    }
  } else {
#pragma unroll
    for (int j = 0; j < TN; ++j)
      if (c + j < N) p[j] = __ldcg(p + j) + vals[j];
  }
}

// The same walk over the thread's outputs as step 8b's store_tile, adding instead of storing.
template <class Cfg>
__device__ __forceinline__ void add_tile(float* __restrict__ C, int M, int N, int row0, int col0, int a_off, int b_off,
                                         const float (&acc)[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN]) {
  const bool c_vec = N % 4 == 0;
#pragma unroll
  for (int wm = 0; wm < Cfg::WMITER; ++wm)
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
      for (int wn = 0; wn < Cfg::WNITER; ++wn)
        add_row<Cfg::TN>(C, M, N, row0 + a_off + wm * Cfg::WSUBM + i, col0 + b_off + wn * Cfg::WSUBN,
                         &acc[wm * Cfg::TM + i][wn * Cfg::TN], c_vec);
}

// K tiles [kt0, kt1) of one output tile into acc: step 8b's pipeline, unchanged, started at kt0.
// Ends with a barrier, so that the next call's prologue may refill any stage.
template <class Cfg>
__device__ __forceinline__ void mainloop_range(float* smem, const TileCopier<Cfg>& copier, int kt0, int kt1,
                                               const ThreadPlace<Cfg>& p,
                                               float (&acc)[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN]) {
  constexpr int BK = Cfg::BK, STAGES = Cfg::STAGES;
  float ra[Cfg::WMITER * Cfg::TM], rb[Cfg::WNITER * Cfg::TN];
  const int n = kt1 - kt0;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n) copier.issue(smem + s * Cfg::kStageFloats, kt0 + s);
    cp_async_commit();
  }
  for (int i = 0; i < n; ++i) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = i + STAGES - 1;
    if (next < n) copier.issue(smem + (next % STAGES) * Cfg::kStageFloats, kt0 + next);
    cp_async_commit();
    const float* As = smem + (i % STAGES) * Cfg::kStageFloats;
    const float* Bs = As + BK * Cfg::LDA;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      load_fragments<Cfg>(ra, rb, As, Bs, k, p.a_off, p.b_off);
      outer_product<Cfg>(acc, ra, rb);
    }
  }
  __syncthreads();
}

// The same with step 8c's main loop: fragments for k+1 read while k is computed, across the
// tile boundary too (the barrier before the last k of a tile). Ends with a barrier.
template <class Cfg>
__device__ __forceinline__ void prefetch_range(float* smem, const TileCopier<Cfg>& copier, int kt0, int kt1,
                                               const ThreadPlace<Cfg>& p,
                                               float (&acc)[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN]) {
  constexpr int BK = Cfg::BK, STAGES = Cfg::STAGES;
  static_assert(BK % 2 == 0, "the next tile's first fragments go to set 0");
  float ra[2][Cfg::WMITER * Cfg::TM], rb[2][Cfg::WNITER * Cfg::TN];
  const int n = kt1 - kt0;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n) copier.issue(smem + s * Cfg::kStageFloats, kt0 + s);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>();
  __syncthreads();
  load_fragments<Cfg>(ra[0], rb[0], smem, smem + BK * Cfg::LDA, 0, p.a_off, p.b_off);
  for (int i = 0; i < n; ++i) {
    // Stage (i - 1) % STAGES is free: its last fragments were read before the barrier of the
    // previous iteration's last k (or, at i = 0, it is the stage the prologue left empty).
    const int next = i + STAGES - 1;
    if (next < n) copier.issue(smem + (next % STAGES) * Cfg::kStageFloats, kt0 + next);
    cp_async_commit();
    const float* As = smem + (i % STAGES) * Cfg::kStageFloats;
    const float* Bs = As + BK * Cfg::LDA;
    const bool more = i + 1 < n;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k + 1 < BK) {
        load_fragments<Cfg>(ra[(k + 1) % 2], rb[(k + 1) % 2], As, Bs, k + 1, p.a_off, p.b_off);
      } else if (more) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const float* An = smem + ((i + 1) % STAGES) * Cfg::kStageFloats;
        load_fragments<Cfg>(ra[0], rb[0], An, An + BK * Cfg::LDA, 0, p.a_off, p.b_off);
      }
      outer_product<Cfg>(acc, ra[k % 2], rb[k % 2]);
    }
  }
  __syncthreads();
}

// The main loops a stream-K kernel can run over a range of K tiles: step 8b's, step 8c's (and, in
// step 8f, step 8e's). Each: run<Cfg>(smem, copier, kt0, kt1, place, acc), ending with a barrier.
struct Loop8b {
  template <class Cfg>
  __device__ __forceinline__ static void run(float* smem, const TileCopier<Cfg>& c, int kt0, int kt1,
                                             const ThreadPlace<Cfg>& p,
                                             float (&acc)[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN]) {
    mainloop_range<Cfg>(smem, c, kt0, kt1, p, acc);
  }
};
struct Loop8c {
  template <class Cfg>
  __device__ __forceinline__ static void run(float* smem, const TileCopier<Cfg>& c, int kt0, int kt1,
                                             const ThreadPlace<Cfg>& p,
                                             float (&acc)[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN]) {
    prefetch_range<Cfg>(smem, c, kt0, kt1, p, acc);
  }
};

// The kernels' body, with main loop Loop.
template <class Cfg, class Loop>
__device__ __forceinline__ void stream_k_body(int M, int N, int K, const float* __restrict__ A,
                                              const float* __restrict__ B, float* __restrict__ C) {
  extern __shared__ __align__(16) float smem[];
  const ThreadPlace<Cfg> p;
  const int tiles_n = ceil_div(N, Cfg::BN), tiles = ceil_div(M, Cfg::BM) * tiles_n, ktiles = ceil_div(K, Cfg::BK);
  const int grid = gridDim.x, b = blockIdx.x;
  // The split: sk_tiles (0 when the tiles fill whole waves) at the end, the rest data-parallel.
  const int sk_tiles = tiles % grid == 0 ? 0 : min(grid + tiles % grid, tiles);
  const int dp_tiles = tiles - sk_tiles, dp_mine = dp_tiles / grid;  // dp_tiles: a multiple of grid
  // This block's stream-K range, units [u0, u1) of one K tile each (64-bit: tiles * K tiles can
  // pass 2^31), as tile sk_t0 from K tile sk_k0 on, up to tile sk_t1 before K tile sk_k1.
  const long long units = (long long)sk_tiles * ktiles;
  const long long u0 = units * b / grid, u1 = units * (b + 1) / grid;
  const int sk_t0 = dp_tiles + int(u0 / ktiles), sk_k0 = int(u0 % ktiles);
  const int sk_t1 = dp_tiles + int(u1 / ktiles), sk_k1 = int(u1 % ktiles);
  const int items = dp_mine + (sk_t1 - sk_t0) + (sk_k1 > 0 ? 1 : 0);

  // One loop over this block's work, whole tiles first, so that the unrolled main loop is
  // compiled once.
  for (int w = 0; w < items; ++w) {
    int t = b + w * grid, kt0 = 0, kt1 = ktiles;
    if (w >= dp_mine) {
      t = sk_t0 + (w - dp_mine);
      if (t == sk_t0) kt0 = sk_k0;
      if (t == sk_t1) kt1 = sk_k1;
    }
    const int row0 = (t / tiles_n) * Cfg::BM, col0 = (t % tiles_n) * Cfg::BN;
    float acc[Cfg::WMITER * Cfg::TM][Cfg::WNITER * Cfg::TN] = {{0.f}};
    const TileCopier<Cfg> copier(A, B, M, N, K, row0, col0);
    Loop::template run<Cfg>(smem, copier, kt0, kt1, p, acc);
    if (kt0 > 0) {
      // The tile's last K tiles (this range began inside it): partial sums to C, then the flag
      // that block b - 1, which computes the tile's first K tiles, waits for.
      store_tile<Cfg>(C, M, N, row0, col0, p.a_off, p.b_off, acc);
      __threadfence();  // each thread's stores visible device-wide before the flag
      __syncthreads();
      if (threadIdx.x == 0) atomicExch(&g_08d_flags[b], 1);
    } else if (kt1 < ktiles) {
      // The tile's first K tiles; block b + 1 computes the rest (at the start of its range).
      if (threadIdx.x == 0) {
        while (atomicAdd(&g_08d_flags[b + 1], 0) == 0) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
          __nanosleep(256);
#endif
        }
        g_08d_flags[b + 1] = 0;  // read once per launch: ready for the next
        __threadfence();
      }
      __syncthreads();
      add_tile<Cfg>(C, M, N, row0, col0, p.a_off, p.b_off, acc);
    } else {
      store_tile<Cfg>(C, M, N, row0, col0, p.a_off, p.b_off, acc);
    }
  }
}

// Two kernels rather than one with a bool argument, so that profilers and the SASS table
// (sass_summary.sh) tell them apart by name.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    sgemm_08d_stream_k(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C) {
  stream_k_body<Cfg, Loop8b>(M, N, K, A, B, C);
}
template <class Cfg>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MINB)
    sgemm_08d_stream_k_8c(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                          float* __restrict__ C) {
  stream_k_body<Cfg, Loop8c>(M, N, K, A, B, C);
}

// Which kernel a launch runs: Kernels::kernel<Cfg>() (if constexpr would not do here: each step's
// kernels are in its own file).
struct Kernels8b {
  template <class Cfg>
  static constexpr auto kernel() {
    return sgemm_08d_stream_k<Cfg>;
  }
};
struct Kernels8c {
  template <class Cfg>
  static constexpr auto kernel() {
    return sgemm_08d_stream_k_8c<Cfg>;
  }
};

template <class Kernels>
struct StreamKLaunch {
  template <class Cfg>
  static constexpr auto kernel() {
    return Kernels::template kernel<Cfg>();
  }
  template <class Cfg>
  static void run(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
    static int max_blocks = 0;  // per shape: blocks resident at once on this GPU
    if (max_blocks == 0) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel<Cfg>(), cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
      int dev = 0, sms = 0, per_sm = 0;
      CUDA_CHECK(cudaGetDevice(&dev));
      CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel<Cfg>(), Cfg::NT, Cfg::kSmemBytes));
      // (per_sm = 0 cannot happen for these shapes, whose step-8b twins launch; were it to, the
      // launch below fails and says so.)
      max_blocks = std::max(1, std::min(sms * per_sm, kStreamKMaxBlocks));
    }
    const int tiles = ceil_div(M, Cfg::BM) * ceil_div(N, Cfg::BN);
    kernel<Cfg>()<<<std::min(tiles, max_blocks), Cfg::NT, Cfg::kSmemBytes, s>>>(M, N, K, A, B, C);
    LAUNCH_CHECK();
  }
  template <class Cfg>
  static cudaFuncAttributes attributes() {
    cudaFuncAttributes a;
    CUDA_CHECK(cudaFuncGetAttributes(&a, kernel<Cfg>()));
    return a;
  }
};

#ifndef DAY10_KERNELS_ONLY  // (not in step 8g's translation unit: see 08g_ptxas_level.cu)
// Step 8b's two best shapes at 4096 (BK = 32, 3 stages; 8x16 outputs per thread, as two 8x8 or
// four 8x4 patches across the warp tile), and the same with the thread's rows as two 4-row
// patches 32 rows apart (t4x8, t4x4: see PipeQ in 08b_cp_async.cuh). Then "+8c": step 8c's main
// loop, with the t4 shapes at BK = 32 (which, unlike the t8 ones, fit both fragment sets in 255
// registers without spilling) and step 8c's winning BK = 16 shapes.
inline const std::vector<TunedKernel>& stream_k_candidates() {
  using L = StreamKLaunch<Kernels8b>;
  using L8c = StreamKLaunch<Kernels8c>;
  static const std::vector<TunedKernel> k = {
      {"128x256x32 w64x64 t8x8 256thr s3", L::run<PipeP>, L::attributes<PipeP>},
      {"128x256x32 w64x64 t8x4 256thr s3", L::run<PipeH>, L::attributes<PipeH>},
      {"128x256x32 w64x64 t4x8 256thr s3", L::run<PipeQ>, L::attributes<PipeQ>},
      {"128x256x32 w64x64 t4x4 256thr s3", L::run<PipeR>, L::attributes<PipeR>},
      {"128x256x32 w64x64 t4x8 256thr s3 +8c", L8c::run<PipeQ>, L8c::attributes<PipeQ>},
      {"128x256x32 w64x64 t4x4 256thr s3 +8c", L8c::run<PipeR>, L8c::attributes<PipeR>},
      {"128x256x16 w64x64 t8x4 256thr s4 +8c", L8c::run<PipeB>, L8c::attributes<PipeB>},
      {"128x256x16 w64x64 t4x4 256thr s4 +8c", L8c::run<PipeS>, L8c::attributes<PipeS>},
  };
  return k;
}
#endif  // DAY10_KERNELS_ONLY
