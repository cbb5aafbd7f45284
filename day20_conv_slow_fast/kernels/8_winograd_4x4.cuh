// Variant 8: Winograd F(4x4, 3x3), non-fused: three transform kernels around 36 batched GEMMs
// done by cuBLAS (cublasSgemmStridedBatched, pure fp32: the handle is in CUBLAS_DEFAULT_MATH).
// The matrices, the layout and the error model are in 8_winograd_4x4.h; variants 9 to 11 reuse
// the transform kernels.
//
// Compared with variant 7 (F(2x2)): 36 products per 16 outputs instead of 16 per 4, so the GEMMs
// do 36/16 / (16/4) = 0.5625x the multiply-adds, and the transformed input V and products M are
// 36/16 = 2.25x the size of the input and output they stand for (F(2x2): 4x). Less work and
// less traffic; the price is a larger rounding error (8_winograd_4x4.h) and, on images whose
// size is not a multiple of 4, padding tiles (14x14 needs 16x16 of tiles).
//
// The transforms are elementwise over tiles and bound by memory: one thread per (channel, tile),
// consecutive threads on consecutive tiles, so each of the 36 stores of a warp is one coalesced
// 128-byte line. The filter transform runs inside the timed call, as cuDNN's does (a network
// would transform the weights once per update; the program reports its share separately).
#pragma once
#include <cublas_v2.h>

#include "8_winograd_4x4.h"
#include "check.cuh"
#include "conv_shape.h"

// U[ij][c][k] = (G g G^T)[ij] of filter (k, c); 0 in the padding up to Cp and Kp.
//
// First version, kept for comparison (the program times both alone): one thread per (c, k), k
// fastest, so the 36 stores of a warp are coalesced but its loads are not: neighbouring threads
// read filters 9*C floats apart. The weights looked like the smallest array, but at 7x7 x 512
// channels they are 9.4 MB, U is 4x that, and the filter transform is a sizeable part of the
// call (filter_transform_ms in the results).
__global__ void wino4_filter_transform_per_thread(ConvShape s, const float* __restrict__ w, float* __restrict__ U) {
  const int Kp = wino4::k_padded(s);
  const size_t KC = size_t(wino4::c_padded(s)) * Kp;
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= KC) return;
  const int k = int(i % Kp), c = int(i / Kp);
  float u[36];
  if (c < s.C && k < s.K) {
    float g[9];
    const float* wk = w + (size_t(k) * s.C + c) * 9;
#pragma unroll
    for (int e = 0; e < 9; ++e) g[e] = wk[e];
    wino4::filter_2d(g, u);
  } else {
#pragma unroll
    for (int e = 0; e < 36; ++e) u[e] = 0.f;
  }
#pragma unroll
  for (int e = 0; e < 36; ++e) U[e * KC + i] = u[e];
}

// The one in use: both sides coalesced through shared memory. A block of 256 threads takes 32
// output channels x 8 input channels. It first copies their weights: for each of the 32 k, the 8
// filters w[k][c0..c0+7] are 72 consecutive floats, read by consecutive threads. Then thread
// (k, c), k fastest, transforms its filter from shared memory and stores as before (a warp's 32 k
// are one 128-byte span per e). A row of 73 floats puts the 32 k of a warp in 32 different banks
// (73 = 9 mod 32, odd). Channels past C and K load as 0 and transform to zeros (some of them
// -0.0, which add like 0).
namespace wino4 {
constexpr int kFtK = 32, kFtC = 8;  // output x input channels per block: 256 threads
}
__global__ void __launch_bounds__(256)
    wino4_filter_transform(ConvShape s, const float* __restrict__ w, float* __restrict__ U) {
  using wino4::kFtC;
  using wino4::kFtK;
  __shared__ float g[kFtK][kFtC * 9 + 1];
  const int Kp = wino4::k_padded(s), Cp = wino4::c_padded(s);
  const size_t KC = size_t(Cp) * Kp;
  const int k0 = blockIdx.x * kFtK, c0 = blockIdx.y * kFtC;
  for (int i = threadIdx.x; i < kFtK * kFtC * 9; i += blockDim.x) {
    const int kk = i / (kFtC * 9), j = i % (kFtC * 9);
    const int k = k0 + kk, c = c0 + j / 9;
    g[kk][j] = k < s.K && c < s.C ? __ldg(w + (size_t(k) * s.C + c0) * 9 + j) : 0.f;
  }
  __syncthreads();
  const int kk = threadIdx.x % kFtK, cc = threadIdx.x / kFtK;
  const int k = k0 + kk, c = c0 + cc;
  if (k >= Kp || c >= Cp) return;  // the last block's k past the padding (no barrier follows)
  float u[36];
  wino4::filter_2d(&g[kk][cc * 9], u);
  const size_t i = size_t(c) * Kp + k;
#pragma unroll
  for (int e = 0; e < 36; ++e) U[e * KC + i] = u[e];
}

// V[ij][c][t] = (B^T d B)[ij], d the 6x6 patch at (4*tp - pad, 4*tq - pad), zero outside the
// image; zero for the padding channels and tiles. One thread per (c, t), t fastest.
__global__ void wino4_input_transform(ConvShape s, const float* __restrict__ x, float* __restrict__ V) {
  const int T = wino4::tiles(s), Tp = wino4::tiles_padded(s), TP = wino4::tiles_p(s), TQ = wino4::tiles_q(s);
  const size_t CT = size_t(wino4::c_padded(s)) * Tp;
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= CT) return;
  const int t = int(i % Tp), c = int(i / Tp);
  float d[36];
#pragma unroll
  for (int e = 0; e < 36; ++e) d[e] = 0.f;
  if (c < s.C && t < T) {
    const int tq = t % TQ, tp = (t / TQ) % TP, n = t / (TQ * TP);
    const float* xc = x + (size_t(n) * s.C + c) * s.H * s.W;
    const int h0 = 4 * tp - s.pad, v0 = 4 * tq - s.pad;
#pragma unroll
    for (int r = 0; r < 6; ++r) {
      const int h = h0 + r;
      if (h < 0 || h >= s.H) continue;
#pragma unroll
      for (int u = 0; u < 6; ++u) {
        const int v = v0 + u;
        if (v >= 0 && v < s.W) d[r * 6 + u] = __ldg(xc + size_t(h) * s.W + v);
      }
    }
  }
  float v[36];
  wino4::input_2d(d, v);
#pragma unroll
  for (int e = 0; e < 36; ++e) V[e * CT + i] = v[e];
}

// Stores the 4x4 outputs o of (k, t), those inside P x Q. Rows of 4 go out as one float4 when
// Q % 4 == 0 (then every row starts 16-byte aligned and lies inside the image).
__device__ __forceinline__ void wino4_store_tile(const ConvShape& s, int k, int t, const float* o,
                                                 float* __restrict__ y) {
  const int TP = wino4::tiles_p(s), TQ = wino4::tiles_q(s), P = s.P(), Q = s.Q();
  const int tq = t % TQ, tp = (t / TQ) % TP, n = t / (TQ * TP);
  const int p0 = 4 * tp, q0 = 4 * tq;
  float* yk = y + (size_t(n) * s.K + k) * P * Q;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int p = p0 + a;
    if (p >= P) break;
    float* row = yk + size_t(p) * Q + q0;
    if (Q % 4 == 0) {
      *reinterpret_cast<float4*>(row) = make_float4(o[a * 4], o[a * 4 + 1], o[a * 4 + 2], o[a * 4 + 3]);
    } else {
#pragma unroll
      for (int b = 0; b < 4; ++b)
        if (q0 + b < Q) row[b] = o[a * 4 + b];
    }
  }
}

// y = A^T M A: the 4x4 outputs of one (k, t).
__global__ void wino4_output_transform(ConvShape s, const float* __restrict__ M, float* __restrict__ y) {
  const int T = wino4::tiles(s), Tp = wino4::tiles_padded(s);
  const size_t KT = size_t(s.K) * Tp;
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= KT) return;
  const int t = int(i % Tp), k = int(i / Tp);
  if (t >= T) return;
  float m[36], o[16];
#pragma unroll
  for (int e = 0; e < 36; ++e) m[e] = M[e * KT + i];
  wino4::output_2d(m, o);
  wino4_store_tile(s, k, t, o, y);
}

inline bool supports_08(const ConvShape& s, std::string* why) {
  if (s.R != 3 || s.S != 3 || s.stride != 1 || s.dil != 1) {
    *why = "Winograd F(4x4,3x3): needs a 3x3 filter, stride 1, dilation 1";
    return false;
  }
  return true;
}

// The three parts around the GEMMs, each a launch. ws holds U, V, M in that order.
struct Wino4Bufs {
  float *U, *V, *M;
  explicit Wino4Bufs(const ConvShape& s, float* ws)
      : U(ws), V(ws + wino4::u_floats(s)), M(ws + wino4::u_floats(s) + wino4::v_floats(s)) {}
  Wino4Bufs(float* u, float* v, float* m) : U(u), V(v), M(m) {}
};
inline void wino4_filter(const ConvShape& s, const float* w, float* U, cudaStream_t st) {
  static_assert(wino4::kCpad % wino4::kFtC == 0, "the blocks cover the padded channels exactly");
  const dim3 grid(unsigned(ceil_div(wino4::k_padded(s), wino4::kFtK)), unsigned(wino4::c_padded(s) / wino4::kFtC));
  wino4_filter_transform<<<grid, wino4::kFtK * wino4::kFtC, 0, st>>>(s, w, U);
  LAUNCH_CHECK();
}
inline void wino4_filter_per_thread(const ConvShape& s, const float* w, float* U, cudaStream_t st) {
  const size_t n = size_t(wino4::k_padded(s)) * wino4::c_padded(s);
  wino4_filter_transform_per_thread<<<unsigned(ceil_div<size_t>(n, 256)), 256, 0, st>>>(s, w, U);
  LAUNCH_CHECK();
}
inline void wino4_input(const ConvShape& s, const float* x, float* V, cudaStream_t st) {
  const size_t n = size_t(wino4::c_padded(s)) * wino4::tiles_padded(s);
  wino4_input_transform<<<unsigned(ceil_div<size_t>(n, 256)), 256, 0, st>>>(s, x, V);
  LAUNCH_CHECK();
}
inline void wino4_output(const ConvShape& s, const float* M, float* y, cudaStream_t st) {
  const size_t n = size_t(s.K) * wino4::tiles_padded(s);
  wino4_output_transform<<<unsigned(ceil_div<size_t>(n, 256)), 256, 0, st>>>(s, M, y);
  LAUNCH_CHECK();
}

// ws: wino4::workspace_bytes(s) bytes.
inline void run_08_winograd4_cublas(cublasHandle_t h, const ConvShape& s, const float* x, const float* w, float* y,
                                    float* ws, cudaStream_t st) {
  const Wino4Bufs b(s, ws);
  const int Tp = wino4::tiles_padded(s), Cp = wino4::c_padded(s), Kp = wino4::k_padded(s);
  wino4_filter(s, w, b.U, st);
  wino4_input(s, x, b.V, st);
  // For each ij, row-major: M (K x Tp) = U^T (K x Cp) * V (Cp x Tp), U stored Cp x Kp. cuBLAS is
  // column-major, where the same memory reads M^T (Tp x K) = V^T (Tp x Cp) * op(U'), with U' the
  // Kp x Cp column-major matrix our U is, transposed (CUBLAS_OP_T) to Cp x K.
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasSetStream(h, st));
  CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, Tp, s.K, Cp, &one, b.V, Tp, (long long)Cp * Tp,
                                         b.U, Kp, (long long)Cp * Kp, &zero, b.M, Tp, (long long)s.K * Tp, 36));
  wino4_output(s, b.M, y, st);
}
