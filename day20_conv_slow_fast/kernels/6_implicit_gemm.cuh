// Variant 6: implicit GEMM. The GEMM of variant 5 (Y[K][N*P*Q] = W[K][CRS] * col[CRS][N*P*Q])
// computed without ever storing col: the loader of the B tile works out, for each (crs, j),
// which input element col[crs][j] would have held, and loads it from x directly.
//
// The GEMM part is day10's recipe: a 64 x 128 block tile, K step 16, 256 threads with 8 x 4
// outputs each, the filter tile stored transposed in shared memory so a thread's 8 values
// come as two LDS.128, and register double buffering so the next tile's global loads are in
// flight during the FMAs.
//
// The index arithmetic is the new cost. Splitting j into (n, p, q) happens once per thread
// (its column never changes). Splitting crs into (c, r, s) would cost two integer divisions
// per loaded element. Instead a table in __constant__ memory maps crs to (offset of
// (c, r*dil, s*dil) in x, r*dil, s*dil). All 32 threads of a warp load the same crs at the same
// time, and that is exactly the access the constant cache broadcasts.
#pragma once
#include <vector>

#include "conv_shape.h"
#include "check.cuh"

namespace igemm {
constexpr int BM = 64, BN = 128, BK = 16, TM = 8, TN = 4, NT = 256;
constexpr int kMaxCRS = 3072;  // 48 KB of the 64 KB constant bank (C = 341 at 3x3)
}  // namespace igemm
__constant__ int4 c_crs_table[igemm::kMaxCRS];  // {offset in x, r*dil, s*dil, 0}

__global__ void __launch_bounds__(igemm::NT)
    conv_06_igemm(ConvShape s, const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
  using namespace igemm;
  const int P = s.P(), Q = s.Q(), PQ = P * Q, CRS = s.C * s.R * s.S, NPQ = s.N * PQ;
  __shared__ __align__(16) float As[2][BK][BM + 4];  // filter tile, transposed: As[crs][k]
  __shared__ __align__(16) float Bs[2][BK][BN];      // implicit im2col tile: Bs[crs][j]
  const int tid = threadIdx.x, tx = tid % 32, ty = tid / 32;
  const int m0 = blockIdx.y * BM, j0 = blockIdx.x * BN;

  // This thread's column of the B tile is fixed: decompose it once.
  const int jj = tid % BN, kk0 = tid / BN;  // rows kk0, kk0 + 2, ..., kk0 + 14
  const int j = j0 + jj;
  const bool jvalid = j < NPQ;
  int hbase = 0, vbase = 0;
  const float* xbase = x;
  if (jvalid) {
    const int n = j / PQ, pq = j % PQ, p = pq / Q, q = pq % Q;
    hbase = p * s.stride - s.pad;
    vbase = q * s.stride - s.pad;
    xbase = x + size_t(n) * s.C * s.H * s.W + ptrdiff_t(hbase) * s.W + vbase;
  }
  float ra_g[BM * BK / NT], rb_g[BK * BN / NT];  // staging registers (4 + 8)
  auto load = [&](int k0) {
#pragma unroll
    for (int i = 0; i < BM * BK / NT; ++i) {
      const int e = tid + i * NT, m = e / BK, kk = e % BK;
      ra_g[i] = (m0 + m < s.K && k0 + kk < CRS) ? w[size_t(m0 + m) * CRS + k0 + kk] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < BK * BN / NT; ++i) {
      const int crs = k0 + kk0 + 2 * i;
      float v = 0.f;
      if (jvalid && crs < CRS) {
        const int4 t = c_crs_table[crs];  // same crs for the whole warp: a broadcast
        const int h = hbase + t.y, c = vbase + t.z;
        if (h >= 0 && h < s.H && c >= 0 && c < s.W) v = xbase[t.x];
      }
      rb_g[i] = v;
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int i = 0; i < BM * BK / NT; ++i) {
      const int e = tid + i * NT;
      As[buf][e % BK][e / BK] = ra_g[i];
    }
#pragma unroll
    for (int i = 0; i < BK * BN / NT; ++i) Bs[buf][kk0 + 2 * i][jj] = rb_g[i];
  };

  float acc[TM][TN] = {{0.f}};
  load(0);
  store(0);
  __syncthreads();
  const int ktiles = (CRS + BK - 1) / BK;
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) load((kt + 1) * BK);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float ra[TM], rb[TN];
      *reinterpret_cast<float4*>(&ra[0]) = *reinterpret_cast<const float4*>(&As[cur][kk][ty * TM]);
      *reinterpret_cast<float4*>(&ra[4]) = *reinterpret_cast<const float4*>(&As[cur][kk][ty * TM + 4]);
      *reinterpret_cast<float4*>(&rb[0]) = *reinterpret_cast<const float4*>(&Bs[cur][kk][tx * TN]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int jx = 0; jx < TN; ++jx) acc[i][jx] += ra[i] * rb[jx];
    }
    if (more) store(cur ^ 1);
    __syncthreads();
  }
  // Column j = n*PQ + pq of the GEMM is y[n][k][pq]: NCHW again.
#pragma unroll
  for (int jx = 0; jx < TN; ++jx) {
    const int jo = j0 + tx * TN + jx;
    if (jo >= NPQ) continue;
    const int n = jo / PQ, pq = jo % PQ;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int k = m0 + ty * TM + i;
      if (k < s.K) y[(size_t(n) * s.K + k) * PQ + pq] = acc[i][jx];
    }
  }
}

inline bool supports_06(const ConvShape& s, std::string* why) {
  if (s.C * s.R * s.S > igemm::kMaxCRS) {
    *why = "implicit GEMM: C*R*S must be <= 3072 (the size of its constant-memory index table)";
    return false;
  }
  return true;
}

// Build the crs -> (offset, r*dil, s*dil) table for this shape (once, outside timing).
inline void set_06_table(const ConvShape& s) {
  std::vector<int4> t(size_t(s.C) * s.R * s.S);
  for (int c = 0; c < s.C; ++c)
    for (int r = 0; r < s.R; ++r)
      for (int u = 0; u < s.S; ++u)
        t[(size_t(c) * s.R + r) * s.S + u] =
            make_int4(c * s.H * s.W + r * s.dil * s.W + u * s.dil, r * s.dil, u * s.dil, 0);
  CUDA_CHECK(cudaMemcpyToSymbol(c_crs_table, t.data(), sizeof(int4) * t.size()));
}

inline void run_06_implicit_gemm(const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
  using namespace igemm;
  dim3 grid(ceil_div(s.N * s.P() * s.Q(), BN), ceil_div(s.K, BM));
  conv_06_igemm<<<grid, NT, 0, st>>>(s, x, w, y);
  LAUNCH_CHECK();
}
