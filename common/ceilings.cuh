// common/ceilings.cuh: the two measured ceilings behind every "% of peak" in this repository.
//
//   ceilings::Copy c = ceilings::copy_bandwidth(bytes);  // device memory GB/s, read + write
//   ceilings::Fma  f = ceilings::fp32_fma();             // FP32 FMA TFLOP/s on CUDA cores
//   ceilings::Gemm g = ceilings::tensor_gemm(CUDA_R_16BF); // tensor cores, through cuBLAS
//
// day01_setup introduces them; later lessons call them again in their own run, so each
// results file's "% of peak" is against the GPU as it was during that run. Both verify
// their own output (an exact copy, a bit-exact FMA recurrence) and say so in `.exact`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "check.cuh"
#include "json.h"
#include "timing.cuh"
#include "verify.h"

namespace ceilings {

// 16-byte loads and stores, grid-stride: the simplest kernel that reaches copy bandwidth.
__global__ void copy_f4(const float4* __restrict__ in, float4* __restrict__ out, size_t n4) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

// Fills x[i] = f(i) so the copy is checked against a known pattern, not zeros.
__global__ void fill_pattern(float* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = float(i % 1048573) - 524286.0f;
}

__global__ void count_mismatch(const float* a, const float* b, size_t n, unsigned long long* bad) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    local += !(a[i] == b[i]);  // NaN (poison) counts as a mismatch
  if (local) atomicAdd(bad, local);
}

struct Copy {
  double memcpy_gbps = 0, kernel_gbps = 0;  // bytes read + bytes written, per second
  timing::Stats memcpy_t, kernel_t;
  size_t bytes = 0;    // size of one buffer
  bool exact = false;  // both copies reproduced the source exactly
  double best() const { return memcpy_gbps > kernel_gbps ? memcpy_gbps : kernel_gbps; }
};

inline Copy copy_bandwidth(size_t bytes) {
  Copy r;
  r.bytes = bytes = bytes / 16 * 16;
  const size_t n = bytes / sizeof(float);
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  float *src, *dst;
  unsigned long long* bad;
  CUDA_CHECK(cudaMalloc(&src, bytes));
  CUDA_CHECK(cudaMalloc(&dst, bytes));
  CUDA_CHECK(cudaMalloc(&bad, sizeof *bad));
  fill_pattern<<<sms * 4, 256>>>(src, n);
  LAUNCH_CHECK();
  auto mismatches = [&] {
    CUDA_CHECK(cudaMemset(bad, 0, sizeof *bad));
    count_mismatch<<<sms * 4, 256>>>(src, dst, n, bad);
    LAUNCH_CHECK();
    unsigned long long h = 0;
    CUDA_CHECK(cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost));
    return h;
  };
  // The buffers are many times L2, so no flush is needed; the time counts both directions.
  poison(dst, bytes);
  r.memcpy_t = timing::time_gpu([&] { CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
  bool ok = mismatches() == 0;
  poison(dst, bytes);
  const int grid = sms * 8;
  r.kernel_t = timing::time_gpu([&] {
    copy_f4<<<grid, 512>>>(reinterpret_cast<const float4*>(src), reinterpret_cast<float4*>(dst), n / 4);
    LAUNCH_CHECK();
  });
  ok = ok && mismatches() == 0;
  r.exact = ok;
  r.memcpy_gbps = 2.0 * bytes / (r.memcpy_t.median_ms * 1e-3) / 1e9;
  r.kernel_gbps = 2.0 * bytes / (r.kernel_t.median_ms * 1e-3) / 1e9;
  CUDA_CHECK(cudaFree(src));
  CUDA_CHECK(cudaFree(dst));
  CUDA_CHECK(cudaFree(bad));
  return r;
}

// kChains independent FMA chains per thread: an FMA's result is ready ~4 cycles after
// issue, so one chain per thread would leave the FP32 pipes idle most of the time.
constexpr int kChains = 8;

__global__ void fma_chains(float* out, float a, float b, int iters) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  float x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = fmaf(float(tid % 977), 1e-3f, float(c));
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) x[c] = fmaf(x[c], a, b);
  }
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += x[c];
  out[tid] = s;  // the result is stored, so the compiler cannot drop the loop
}

// The same recurrence on the CPU: fmaf is correctly rounded on both sides, so the
// GPU's result must match bit for bit.
inline float fma_chains_reference(int tid, float a, float b, int iters) {
  float x[kChains];
  for (int c = 0; c < kChains; ++c) x[c] = std::fmaf(float(tid % 977), 1e-3f, float(c));
  for (int it = 0; it < iters; ++it)
    for (int c = 0; c < kChains; ++c) x[c] = std::fmaf(x[c], a, b);
  float s = 0.f;
  for (int c = 0; c < kChains; ++c) s += x[c];
  return s;
}

struct Fma {
  double tflops = 0;
  timing::Stats t;
  long long threads = 0, iters = 0;
  bool exact = false;
  int checked = 0;  // threads compared with the CPU
};

inline Fma fp32_fma(int iters = 65536) {
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int block = 256, grid = sms * 8;
  const int threads = block * grid;
  const float a = 0.99993f, b = 1e-4f;
  float* out;
  CUDA_CHECK(cudaMalloc(&out, sizeof(float) * threads));
  poison(out, sizeof(float) * threads);
  Fma r;
  r.t = timing::time_gpu(
      [&] {
        fma_chains<<<grid, block>>>(out, a, b, iters);
        LAUNCH_CHECK();
      },
      [] {
        timing::Options o;
        o.warmup = 3;
        o.reps = 20;
        return o;
      }());
  r.threads = threads;
  r.iters = iters;
  r.tflops = 2.0 * threads * double(iters) * kChains / (r.t.median_ms * 1e-3) / 1e12;
  std::vector<float> h(threads);
  CUDA_CHECK(cudaMemcpy(h.data(), out, sizeof(float) * threads, cudaMemcpyDeviceToHost));
  // A sample of threads across every block, each with a different starting value.
  bool ok = true;
  for (int t = 0; t < threads; t += 4099) {
    ok = ok && (h[t] == fma_chains_reference(t, a, b, iters));
    ++r.checked;
  }
  r.exact = ok;
  CUDA_CHECK(cudaFree(out));
  return r;
}

// ---- The tensor-core ceiling, as cuBLAS reaches it ----------------------------------
// No simple kernel of ours reaches the tensor cores' peak, so the practical ceiling for
// fp16/bf16/TF32 work is cuBLAS on a large square GEMM (n = 8192, fp32 accumulation).
// Inputs are small integers in [-2, 2], exact in every one of these types, so every
// product and every sum (|C| <= 4n < 2^24) is exact in fp32: the result is checked
// bit for bit on a sample of entries.
template <class T>
__global__ void fill_small_ints(T* x, size_t n, unsigned salt) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = T(float(int((i * 2654435761u + salt) % 5u) - 2));
}
inline float small_int_at(size_t i, unsigned salt) { return float(int((i * 2654435761u + salt) % 5u) - 2); }

struct Gemm {
  double tflops = 0;
  timing::Stats t;
  int n = 0;
  bool exact = false;
  std::string what;
};

// type: CUDA_R_16BF, CUDA_R_16F, or CUDA_R_32F (run as TF32).
inline Gemm tensor_gemm(cudaDataType_t type, int n = 8192) {
  const size_t elems = size_t(n) * n, in_bytes = type == CUDA_R_32F ? 4 : 2;
  void *a, *b;
  float* c;
  CUDA_CHECK(cudaMalloc(&a, elems * in_bytes));
  CUDA_CHECK(cudaMalloc(&b, elems * in_bytes));
  CUDA_CHECK(cudaMalloc(&c, elems * sizeof(float)));
  auto fill = [&](void* p, unsigned salt) {
    if (type == CUDA_R_16BF)
      fill_small_ints<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p), elems, salt);
    else if (type == CUDA_R_16F)
      fill_small_ints<<<1024, 256>>>(static_cast<__half*>(p), elems, salt);
    else
      fill_small_ints<<<1024, 256>>>(static_cast<float*>(p), elems, salt);
    LAUNCH_CHECK();
  };
  fill(a, 1);
  fill(b, 2);
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  const cublasComputeType_t ct = type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.f, zero = 0.f;
  // Column-major C = A * B (n x n each).
  auto gemm = [&] {
    CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, type, n, b, type, n, &zero, c, CUDA_R_32F,
                              n, ct, CUBLAS_GEMM_DEFAULT));
  };
  timing::Options o;
  o.warmup = 3;
  o.reps = 20;
  o.budget_ms = 1000;
  Gemm r;
  poison(c, elems * sizeof(float));
  r.t = timing::time_gpu(gemm, o);
  r.n = n;
  r.tflops = 2.0 * double(n) * n * n / (r.t.median_ms * 1e-3) / 1e12;
  r.what = std::string("cuBLAS ") +
           (type == CUDA_R_16BF  ? "BF16"
            : type == CUDA_R_16F ? "FP16"
                                 : "TF32") +
           " GEMM n=" + std::to_string(n);
  // Check 32 entries of C(i, j) = sum_k A(i, k) B(k, j), column-major.
  std::vector<float> col(n);
  bool ok = true;
  for (int t = 0; t < 32; ++t) {
    const int i = (t * 977) % n, j = (t * 3571 + 11) % n;
    CUDA_CHECK(cudaMemcpy(col.data(), c + size_t(j) * n, sizeof(float) * n, cudaMemcpyDeviceToHost));
    double want = 0;
    for (int k = 0; k < n; ++k) want += double(small_int_at(size_t(k) * n + i, 1)) * small_int_at(size_t(j) * n + k, 2);
    ok = ok && col[i] == float(want);
  }
  r.exact = ok;
  CUBLAS_CHECK(cublasDestroy(h));
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
  CUDA_CHECK(cudaFree(c));
  return r;
}

// ---- All of them, for a lesson whose "% of peak" needs several ------------------------
// Measured in the program's own run; `checks()` turns each ceiling's self-check into a
// result check, `to_json()` is what goes into the results file's config.ceilings.
struct All {
  Copy copy;
  Fma fma;
  std::map<std::string, Gemm> gemm;  // "fp16", "bf16", "tf32"
  double tensor(const std::string& key) const {
    auto it = gemm.find(key);
    return it == gemm.end() ? NAN : it->second.tflops;
  }
  std::vector<verify::Check> checks() const {
    std::vector<verify::Check> v;
    v.push_back(verify::fact("ceiling: copy reproduced its source exactly", copy.exact));
    v.push_back(verify::fact("ceiling: FP32 FMA chains match the CPU bit for bit", fma.exact, "exact",
                             std::to_string(fma.checked) + " threads compared"));
    for (const auto& [k, g] : gemm)
      v.push_back(verify::fact("ceiling: " + g.what + " exact on small integers", g.exact, "exact", "32 entries"));
    return v;
  }
  json::Value to_json() const {
    json::Value j = json::Value::object();
    j["copy_gbps"] = copy.best();
    j["fp32_fma_tflops"] = fma.tflops;
    for (const auto& [k, g] : gemm) j[k + "_gemm_tflops"] = g.tflops;
    return j;
  }
  // Into a results::Results (a template, so this header needs no results.h): checks, config, a line.
  template <class Results>
  void record(Results& res) const {
    for (const auto& c : checks()) res.add_quiet(c);
    res.config["ceilings"] = to_json();
    print();
  }
  void print() const {
    std::printf(
        "ceilings measured in this run: copy %.0f GB/s, FP32 FMA %.1f TFLOP/s, cuBLAS GEMM fp16 %.0f / bf16 %.0f / "
        "tf32 %.0f TFLOP/s\n",
        copy.best(), fma.tflops, tensor("fp16"), tensor("bf16"), tensor("tf32"));
  }
};

inline All measure_all() {
  All a;
  a.copy = copy_bandwidth(size_t(1) << 30);
  a.fma = fp32_fma();
  a.gemm["fp16"] = tensor_gemm(CUDA_R_16F);
  a.gemm["bf16"] = tensor_gemm(CUDA_R_16BF);
  a.gemm["tf32"] = tensor_gemm(CUDA_R_32F);
  return a;
}

// The ceilings a lesson divides by, measured in its own run and recorded (checks, config, a line)
// in one call: day30 and day40 both start their timed runs with it.
struct Peaks {
  double copy_gbps = NAN, fp32_tflops = NAN;
  std::map<std::string, double> tensor_tflops;  // "fp16", "bf16", "tf32": cuBLAS GEMM
};
template <class Results>
inline Peaks measure_and_record(Results& res) {
  const All a = measure_all();
  a.record(res);
  Peaks p;
  p.copy_gbps = a.copy.best();
  p.fp32_tflops = a.fma.tflops;
  for (const auto& [k, g] : a.gemm) p.tensor_tflops[k] = g.tflops;
  return p;
}

}  // namespace ceilings
