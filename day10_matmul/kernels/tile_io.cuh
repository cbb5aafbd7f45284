// Tile loaders shared by steps 6-8: 128-bit (float4) global loads that stay correct at the
// edges of the matrix.
//
// A float4 load needs 16-byte alignment: with a row-major matrix of `ld` columns that
// holds for every row only if ld % 4 == 0 (the base pointer comes from cudaMalloc, which
// aligns to 256 bytes). Where the vector would cross the matrix edge, or ld is not a
// multiple of 4, the loader falls back to scalar loads and fills the rest with zeros,
// which add nothing to a dot product.
#pragma once
#include "check.cuh"

__device__ __forceinline__ float4 load4_guarded(const float* __restrict__ src, int rows, int cols, int r, int c,
                                                bool vec_ok) {
  if (vec_ok && r < rows && c + 3 < cols) return *reinterpret_cast<const float4*>(src + size_t(r) * cols + c);
  float4 v;
  const float* p = src + size_t(r) * cols + c;
  const bool rok = r < rows;
  v.x = (rok && c + 0 < cols) ? p[0] : 0.f;
  v.y = (rok && c + 1 < cols) ? p[1] : 0.f;
  v.z = (rok && c + 2 < cols) ? p[2] : 0.f;
  v.w = (rok && c + 3 < cols) ? p[3] : 0.f;
  return v;
}

// Global -> registers: a ROWS x COLS tile at (r0, c0), as float4 groups, NT threads.
// Thread t takes groups t, t + NT, ...; group g covers row g / (COLS/4), columns 4*(g % (COLS/4)) ...
template <int ROWS, int COLS, int NT>
struct TileLoader {
  static_assert(COLS % 4 == 0 && (ROWS * COLS / 4) % NT == 0, "tile must split evenly into float4 per thread");
  static constexpr int kPerThread = ROWS * COLS / 4 / NT;
  float4 v[kPerThread];

  __device__ __forceinline__ void load(const float* __restrict__ src, int rows, int cols, int r0, int c0, bool vec_ok) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int g = threadIdx.x + j * NT;
      v[j] = load4_guarded(src, rows, cols, r0 + g / (COLS / 4), c0 + 4 * (g % (COLS / 4)), vec_ok);
    }
  }
  // Registers -> shared, same layout as global: dst[row][col], row stride COLS.
  __device__ __forceinline__ void store(float* dst) const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int g = threadIdx.x + j * NT;
      *reinterpret_cast<float4*>(dst + (g / (COLS / 4)) * COLS + 4 * (g % (COLS / 4))) = v[j];
    }
  }
  // Registers -> shared, transposed: dst[col][row], row stride LD (>= ROWS). Used for the
  // A tile, so that the compute loop reads TM consecutive rows of one k as one float4.
  template <int LD>
  __device__ __forceinline__ void store_transposed(float* dst) const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int g = threadIdx.x + j * NT;
      const int r = g / (COLS / 4), c = 4 * (g % (COLS / 4));
      dst[(c + 0) * LD + r] = v[j].x;
      dst[(c + 1) * LD + r] = v[j].y;
      dst[(c + 2) * LD + r] = v[j].z;
      dst[(c + 3) * LD + r] = v[j].w;
    }
  }
};

// Registers -> C, TN consecutive outputs of one row; float4 stores where alignment allows.
template <int TN>
__device__ __forceinline__ void store_row(float* __restrict__ C, int M, int N, int r, int c, const float* vals,
                                          bool vec_ok) {
  if (r >= M) return;
  float* p = C + size_t(r) * N + c;
  if (TN % 4 == 0 && vec_ok && c + TN <= N) {
#pragma unroll
    for (int j = 0; j < TN; j += 4)
      *reinterpret_cast<float4*>(p + j) = make_float4(vals[j], vals[j + 1], vals[j + 2], vals[j + 3]);
  } else {
#pragma unroll
    for (int j = 0; j < TN; ++j)
      if (c + j < N) p[j] = vals[j];
  }
}
