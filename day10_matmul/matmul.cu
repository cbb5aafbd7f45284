// day10_matmul/matmul.cu: from a slow matmul to a fast one, each step checked and timed
// against cuBLAS.
//
// Convention (stated once, used everywhere): every matrix is row-major.
//   Steps 1-8 (FP32 on CUDA cores):  C[M x N] = A[M x K] * B[K x N]            fp32 in/out
//   Steps 9-11 (tensor cores, bf16): C[M x N] = A[M x K] * Bt[N x K]^T         bf16 in/out,
//                                    fp32 accumulation (Bt: a linear layer's weight layout)
// cuBLAS is column-major; a row-major matrix is its transpose in column-major, so
// C = A*B is computed as C^T = B^T * A^T: cublasSgemm(N, N, n=N, m=M, k=K, B, ldb=N, A, lda=K,
// C, ldc=N). See baseline_*() below and the notes.
//
// The ladder (kernels/NN_*.cuh, one idea per step):
//   01 naive · 02 coalesced · 03 shared-memory tiles · 04 1D register blocking ·
//   05 2D register blocking · 06 float4 loads + transposed A tile · 07 warp tiling +
//   double buffering · 08 step 7 with the tile shape autotuned on this GPU ·
//   09 WMMA bf16 tensor cores · 10 wgmma + TMA + mbarrier pipeline + warp specialization +
//   persistent tiles (sm_90a) · 11 step 10 + 2-CTA clusters with TMA multicast (sm_90a)
// Baselines in the same run: cuBLAS SGEMM (TF32 off), cuBLAS TF32, cuBLAS BF16.
//
// Build and run
//   make                  # in this folder
//   make run              # checks at a few shapes, then times every kernel at 4096
//   ./build/matmul --verify                # all checks (odd shapes, M/N/K = 1), no timing
//   ./build/matmul --bench --json ../results/{gpu}/day10_matmul.json   # the full sweep
//   ./build/matmul --sizes 1024,2048 --kernels 5,6,7,8
//   ./build/matmul --help
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "ceilings.cuh"
#include "check.cuh"
#include "cli.h"
#include "env.cuh"
#include "npy.h"
#include "reference.h"
#include "results.h"
#include "timing.cuh"
#include "verify.h"

#include "kernels/01_naive.cuh"
#include "kernels/02_coalesced.cuh"
#include "kernels/03_smem_tiling.cuh"
#include "kernels/04_1d_blocktiling.cuh"
#include "kernels/05_2d_blocktiling.cuh"
#include "kernels/06_vectorized.cuh"
#include "kernels/07_warptiling.cuh"
#include "kernels/08_autotuned.cuh"
#include "kernels/09_wmma_bf16.cuh"
#include "kernels/10_wgmma_tma.h"

using bf16 = __nv_bfloat16;
static const char* kProg = "matmul";
static int g_group_m = 16;  // --group-m: tile order of steps 10 and 11

struct Shape {
  int M, N, K;
  std::string str() const { return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K); }
  double flops() const { return 2.0 * M * N * K; }
};

// ---- device buffers for one shape ---------------------------------------------------
struct Buffers {
  Shape s{0, 0, 0};
  float *A = nullptr, *B = nullptr, *C = nullptr, *Cref = nullptr;      // fp32 ladder
  bf16 *Ah = nullptr, *Bth = nullptr, *Ch = nullptr, *Chref = nullptr;  // bf16 steps
  static size_t bytes(const Shape& s) {
    const size_t mk = size_t(s.M) * s.K, kn = size_t(s.K) * s.N, mn = size_t(s.M) * s.N;
    return (mk + kn + 2 * mn) * (sizeof(float) + sizeof(bf16));
  }
  void alloc(const Shape& sh) {
    free();
    s = sh;
    const size_t mk = size_t(s.M) * s.K, kn = size_t(s.K) * s.N, mn = size_t(s.M) * s.N;
    CUDA_CHECK(cudaMalloc(&A, mk * 4));
    CUDA_CHECK(cudaMalloc(&B, kn * 4));
    CUDA_CHECK(cudaMalloc(&C, mn * 4));
    CUDA_CHECK(cudaMalloc(&Cref, mn * 4));
    CUDA_CHECK(cudaMalloc(&Ah, mk * 2));
    CUDA_CHECK(cudaMalloc(&Bth, kn * 2));
    CUDA_CHECK(cudaMalloc(&Ch, mn * 2));
    CUDA_CHECK(cudaMalloc(&Chref, mn * 2));
  }
  void free() {
    for (void* p : {(void*)A, (void*)B, (void*)C, (void*)Cref, (void*)Ah, (void*)Bth, (void*)Ch, (void*)Chref})
      if (p) CUDA_CHECK(cudaFree(p));
    A = B = C = Cref = nullptr;
    Ah = Bth = Ch = Chref = nullptr;
  }
};

// Host copies of one shape's inputs: fresh random numbers for every shape.
struct HostInputs {
  std::vector<float> A, B;       // fp32 ladder: A (M x K), B (K x N)
  std::vector<bf16> Ah, Bth;     // bf16 steps: A (M x K), Bt (N x K), independent draws
  std::vector<float> Ahf, Bthf;  // the same bf16 values as float, for the CPU reference
};

static HostInputs make_inputs(const Shape& s, verify::Rng& rng, Buffers& d) {
  HostInputs h;
  const size_t mk = size_t(s.M) * s.K, kn = size_t(s.K) * s.N;
  h.A.resize(mk);
  h.B.resize(kn);
  verify::fill_uniform(h.A, rng);
  verify::fill_uniform(h.B, rng);
  h.Ah.resize(mk);
  h.Bth.resize(kn);
  h.Ahf.resize(mk);
  h.Bthf.resize(kn);
  for (size_t i = 0; i < mk; ++i) {
    h.Ah[i] = __float2bfloat16(rng.uniform());
    h.Ahf[i] = __bfloat162float(h.Ah[i]);
  }
  for (size_t i = 0; i < kn; ++i) {
    h.Bth[i] = __float2bfloat16(rng.uniform());
    h.Bthf[i] = __bfloat162float(h.Bth[i]);
  }
  CUDA_CHECK(cudaMemcpy(d.A, h.A.data(), mk * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.B, h.B.data(), kn * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.Ah, h.Ah.data(), mk * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.Bth, h.Bth.data(), kn * 2, cudaMemcpyHostToDevice));
  return h;
}

// ---- cuBLAS baselines --------------------------------------------------------------
struct Blas {
  cublasHandle_t h = nullptr;
  void* workspace = nullptr;
  Blas() {
    CUBLAS_CHECK(cublasCreate(&h));
    // Default math: cublasSgemm stays on the FP32 pipes (no TF32) unless asked otherwise.
    CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    const size_t ws = size_t(32) << 20;  // a workspace lets cuBLAS pick its fastest kernels
    CUDA_CHECK(cudaMalloc(&workspace, ws));
    CUBLAS_CHECK(cublasSetWorkspace(h, workspace, ws));
  }
  ~Blas() {
    cublasDestroy(h);
    cudaFree(workspace);
  }
};

// Row-major C = A*B as column-major C^T = B^T * A^T (no data is transposed, only the view).
static void baseline_sgemm(Blas& b, const Shape& s, const float* A, const float* B, float* C) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasSgemm(b.h, CUBLAS_OP_N, CUBLAS_OP_N, s.N, s.M, s.K, &one, B, s.N, A, s.K, &zero, C, s.N));
}
static void baseline_tf32(Blas& b, const Shape& s, const float* A, const float* B, float* C) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasGemmEx(b.h, CUBLAS_OP_N, CUBLAS_OP_N, s.N, s.M, s.K, &one, B, CUDA_R_32F, s.N, A, CUDA_R_32F, s.K,
                            &zero, C, CUDA_R_32F, s.N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
}
// Row-major C = A * Bt^T: column-major C^T = Bt * A^T; Bt row-major (N x K) is column-major
// K x N, so it enters transposed (OP_T, ld = K); A enters as is (OP_N, ld = K).
static void baseline_bf16(Blas& b, const Shape& s, const bf16* A, const bf16* Bt, bf16* C) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasGemmEx(b.h, CUBLAS_OP_T, CUBLAS_OP_N, s.N, s.M, s.K, &one, Bt, CUDA_R_16BF, s.K, A, CUDA_R_16BF,
                            s.K, &zero, C, CUDA_R_16BF, s.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// ---- the kernels, uniformly ------------------------------------------------------------
enum class Kind { Fp32, Bf16 };
struct Kernel {
  std::string id;    // "05"
  std::string name;  // "05_2d_blocktiling"
  Kind kind;
  std::function<void(const Shape&, Buffers&, cudaStream_t)> run;  // writes d.C or d.Ch
  std::function<bool(const Shape&, std::string*)> supports;       // refused shapes say why
};

static std::vector<Kernel> make_kernels(int tuned_index) {
  auto f32 = [](std::string id, std::string name,
                void (*fn)(int, int, int, const float*, const float*, float*, cudaStream_t)) {
    return Kernel{id, name, Kind::Fp32,
                  [fn](const Shape& s, Buffers& d, cudaStream_t st) { fn(s.M, s.N, s.K, d.A, d.B, d.C, st); },
                  [](const Shape&, std::string*) { return true; }};
  };
  std::vector<Kernel> k = {
      f32("01", "01_naive", run_01_naive),
      f32("02", "02_coalesced", run_02_coalesced),
      f32("03", "03_smem_tiling", run_03_smem_tiling),
      f32("04", "04_1d_blocktiling", run_04_1d_blocktiling),
      f32("05", "05_2d_blocktiling", run_05_2d_blocktiling),
      f32("06", "06_vectorized", run_06_vectorized),
      f32("07", "07_warptiling", run_07_warptiling),
      f32("08", std::string("08_autotuned [") + tune_candidates()[tuned_index].name + "]",
          tune_candidates()[tuned_index].run),
  };
  k.push_back({"09", "09_wmma_bf16", Kind::Bf16,
               [](const Shape& s, Buffers& d, cudaStream_t st) { run_09_wmma(s.M, s.N, s.K, d.Ah, d.Bth, d.Ch, st); },
               [](const Shape&, std::string*) { return true; }});
  k.push_back({"10", "10_wgmma_tma_ws", Kind::Bf16,
               [](const Shape& s, Buffers& d, cudaStream_t st) { run_10_wgmma(s.M, s.N, s.K, d.Ah, d.Bth, d.Ch, st); },
               [](const Shape& s, std::string* why) {
                 return wgmma_gpu_supported(why) && wgmma_shape_supported(s.M, s.N, s.K, why);
               }});
  k.push_back({"11", "11_wgmma_cluster_multicast", Kind::Bf16,
               [](const Shape& s, Buffers& d, cudaStream_t st) {
                 run_11_wgmma_cluster(s.M, s.N, s.K, d.Ah, d.Bth, d.Ch, g_group_m, st);
               },
               [](const Shape& s, std::string* why) {
                 return wgmma_gpu_supported(why) && wgmma_shape_supported(s.M, s.N, s.K, why);
               }});
  return k;
}

// Tolerances. fp32: a K-long dot product of O(1) numbers has magnitude ~sqrt(K), so atol
// scales with sqrt(K). bf16 output: one rounding to 8 significant bits (relative 2^-8 at
// worst near a power of two, so two independent roundings can differ by 2^-7 ~ 7.8e-3);
// the inputs are the same bf16 values on both sides, so nothing else differs but the
// fp32 accumulation order.
static verify::Tol tol_fp32(const Shape& s) { return verify::kFp32.scaled(std::sqrt(double(s.K))); }
static verify::Tol tol_bf16(const Shape& s) {
  return verify::Tol{1e-3 * std::sqrt(double(s.K)), verify::kBf16.rtol, "bf16"};
}

static std::vector<float> download_f32(const float* d, size_t n) { return to_host(d, n); }
static std::vector<float> download_bf16(const bf16* d, size_t n) {
  const std::vector<bf16> h = to_host(d, n);
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = __bfloat162float(h[i]);
  return f;
}

// Runs kernel k once on poisoned output and compares with `ref` (CPU double or cuBLAS).
template <class R>
static verify::Check run_and_check(const Kernel& k, const Shape& s, Buffers& d, const R* ref,
                                   const std::string& against) {
  const size_t mn = size_t(s.M) * s.N;
  if (k.kind == Kind::Fp32)
    poison(d.C, mn * 4);
  else
    poison(d.Ch, mn * 2);
  k.run(s, d, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::string name = k.name.substr(0, 2) + " " + s.str() + " vs " + against;
  if (k.kind == Kind::Fp32) return verify::compare(name, download_f32(d.C, mn).data(), ref, mn, tol_fp32(s));
  return verify::compare(name, download_bf16(d.Ch, mn).data(), ref, mn, tol_bf16(s));
}

// Peak figures: FP32 is measured in this run (common/ceilings.cuh); dense BF16 tensor-core
// peaks are the published datasheet figures (NVIDIA H100 Tensor Core GPU datasheet: SXM5
// 989.4 TFLOP/s, PCIe 756 TFLOP/s, without sparsity; H200 SXM as H100 SXM).
static double published_bf16_peak(const std::string& gpu, std::string* which) {
  if (gpu.find("H100") != std::string::npos && gpu.find("PCIe") != std::string::npos) {
    *which = "published dense BF16 (H100 PCIe datasheet)";
    return 756.0;
  }
  if (gpu.find("H100") != std::string::npos || gpu.find("H200") != std::string::npos) {
    *which = "published dense BF16 (H100/H200 SXM datasheet)";
    return 989.4;
  }
  *which = "";
  return NAN;
}

int main(int argc, char** argv) {
  cli::Args args(argc, argv, kProg, "the matmul ladder, from naive to wgmma, checked and timed against cuBLAS");
  const cli::Standard st = cli::standard_flags(
      args, 20261122, "write A, B and C (reference and kernel 08) of the 127x129x131 check as .npy");
  const bool verify_mode = st.verify, small = st.small, bench_mode = st.bench;
  const long long seed = st.seed;
  const std::string &json_path = st.json, &npy_dir = st.npy_dir;
  std::vector<long long> sizes =
      args.int_list("sizes", {}, 1, 46340, "square sizes to time (default: 4096; --bench: 256..8192)");
  const std::vector<long long> shape_arg =
      args.int_list("shape", {}, 1, 1 << 30, "one extra M,N,K shape to check and time");
  const std::vector<long long> kernel_ids =
      args.int_list("kernels", {}, 1, 11, "kernel numbers to run, e.g. 5,6,7,8 (default: all)");
  const int group_m =
      int(args.integer("group-m", 16, 1, 1024, "step 10: rows of tiles per group in the tile order (1 = plain order)"));
  args.finish();
  st.validate(kProg);
  if (!shape_arg.empty() && shape_arg.size() != 3) cli::usage_error(kProg, "--shape expects three numbers M,N,K");
  results::require_outputs(kProg, st);
  if (sizes.empty())
    sizes = bench_mode ? std::vector<long long>{256, 512, 1024, 2048, 4096, 8192} : std::vector<long long>{4096};
  std::vector<Shape> timed;
  if (!verify_mode) {
    for (auto n : sizes) timed.push_back({int(n), int(n), int(n)});
    if (bench_mode)  // a GPT MLP's two GEMMs (B*T = 16384 tokens, width 384) and a long-K product
      for (Shape s : {Shape{16384, 1536, 384}, Shape{16384, 384, 1536}, Shape{1024, 1024, 16384}}) timed.push_back(s);
  }
  if (shape_arg.size() == 3) timed.push_back({int(shape_arg[0]), int(shape_arg[1]), int(shape_arg[2])});
  // The kernels index within a matrix with 32-bit tile arithmetic and 64-bit offsets; keep
  // every matrix under 2^31 elements so that no index can wrap.
  for (const Shape& s : timed)
    for (double e : {double(s.M) * s.K, double(s.K) * s.N, double(s.M) * s.N})
      if (e >= 2147483648.0) cli::usage_error(kProg, "shape " + s.str() + " has a matrix of more than 2^31 elements");
  auto wanted = [&](const std::string& id) {
    if (kernel_ids.empty()) return true;
    for (auto k : kernel_ids)
      if (std::stoi(id) == k) return true;
    return false;
  };

  const int dev = env::require_gpu(kProg);
  results::Results res("day10_matmul", kProg);
  res.mode = st.mode();
  res.env = env::collect(dev);
  res.config["seed"] = seed;
  res.config["group_m"] = group_m;
  set_wgmma_group_m(group_m);
  g_group_m = group_m;
  size_t max_bytes = 0;
  Shape biggest{2048, 2048, 2048};
  for (auto& s : timed)
    if (Buffers::bytes(s) > max_bytes) max_bytes = Buffers::bytes(s), biggest = s;
  max_bytes = std::max(max_bytes, Buffers::bytes({2048, 2048, 2048}));
  env::require_memory(kProg, max_bytes, "shape " + biggest.str() + " (A, B, C and a reference, in fp32 and bf16)");
  env::print(res.env);

  Blas blas;
  verify::Rng rng{uint64_t(seed)};
  Buffers d;
  std::printf("seed %lld; all matrices row-major; fp32 ladder C = A*B, bf16 steps C = A*Bt^T\n", seed);

  // ---- 1. correctness ----------------------------------------------------------------
  // Small and odd shapes against a CPU reference in double; a large one against cuBLAS
  // (whose own output is checked against the CPU at the small shapes).
  std::vector<Shape> cpu_shapes = {{127, 129, 131},   {1, 1, 1},         {1, 1500, 777}, {1000, 1, 777}, {129, 130, 1},
                                   {1000, 1500, 777}, {1000, 1504, 776}, {64, 8, 4104},  {256, 256, 256}};
  if (!verify_mode) cpu_shapes = {{127, 129, 131}, {1000, 1500, 777}, {1000, 1504, 776}};
  if (small)
    cpu_shapes = {{127, 129, 131}, {1, 1, 1}, {1, 150, 77}, {100, 1, 77}, {129, 130, 1}, {130, 264, 72}, {64, 8, 1032}};
  std::vector<Shape> blas_shapes = {{2048, 2048, 2048}};
  if (!verify_mode || small) blas_shapes.clear();

  // In --verify every autotune candidate is checked; otherwise only the one step 8 uses.
  int tuned = 0;
  std::vector<Kernel> kernels = make_kernels(tuned);
  std::printf("\n1. Checks (outputs poisoned with NaN before each run)\n");
  std::vector<std::string> refused;
  auto check_shape = [&](const Shape& s, bool cpu) {
    d.alloc(s);
    HostInputs h = make_inputs(s, rng, d);
    const size_t mn = size_t(s.M) * s.N;
    std::vector<double> ref32, ref16;
    if (cpu) {
      ref32.resize(mn);
      ref16.resize(mn);
      ref::gemm_nn(s.M, s.N, s.K, h.A.data(), h.B.data(), ref32.data());
      ref::gemm_nt(s.M, s.N, s.K, h.Ahf.data(), h.Bthf.data(), ref16.data());
    }
    // The baselines themselves, then each kernel, against the same reference.
    poison(d.Cref, mn * 4);
    poison(d.Chref, mn * 2);
    baseline_sgemm(blas, s, d.A, d.B, d.Cref);
    baseline_bf16(blas, s, d.Ah, d.Bth, d.Chref);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> blas32 = download_f32(d.Cref, mn), blas16 = download_bf16(d.Chref, mn);
    if (cpu) {
      res.add(verify::compare("cuBLAS SGEMM " + s.str() + " vs CPU", blas32.data(), ref32.data(), mn, tol_fp32(s)));
      res.add(verify::compare("cuBLAS BF16 " + s.str() + " vs CPU", blas16.data(), ref16.data(), mn, tol_bf16(s)));
    }
    for (const Kernel& k : kernels) {
      if (!wanted(k.id)) continue;
      std::string why;
      if (!k.supports(s, &why)) {
        std::printf("  SKIP  %s %s: %s\n", k.name.c_str(), s.str().c_str(), why.c_str());
        refused.push_back(k.name + " " + s.str() + ": " + why);
        continue;
      }
      if (cpu)
        res.add(run_and_check(k, s, d, k.kind == Kind::Fp32 ? ref32.data() : ref16.data(), "CPU"));
      else
        res.add(run_and_check(k, s, d, k.kind == Kind::Fp32 ? blas32.data() : blas16.data(), "cuBLAS"));
      if (k.id == "08" && s.M == 127 && !npy_dir.empty()) {
        try {
          npy::save(npy_dir + "/A.npy", h.A.data(), {size_t(s.M), size_t(s.K)});
          npy::save(npy_dir + "/B.npy", h.B.data(), {size_t(s.K), size_t(s.N)});
          npy::save(npy_dir + "/C_ref.npy", ref32.data(), {size_t(s.M), size_t(s.N)});
          npy::save(npy_dir + "/C_08.npy", download_f32(d.C, mn).data(), {size_t(s.M), size_t(s.N)});
          std::printf("  wrote A.npy, B.npy, C_ref.npy, C_08.npy to %s\n", npy_dir.c_str());
        } catch (const std::exception& e) { cli::usage_error(kProg, std::string("--save-npy: ") + e.what()); }
      }
    }
    if (verify_mode && wanted("08")) {  // every autotune candidate must be correct, not only the winner
      const auto& cands = tune_candidates();
      for (size_t c = 0; c < cands.size(); ++c) {
        Kernel k = make_kernels(int(c))[7];
        if (cpu)
          res.add(run_and_check(k, s, d, ref32.data(), "CPU"));
        else
          res.add(run_and_check(k, s, d, blas32.data(), "cuBLAS"));
      }
    }
  };
  for (auto& s : cpu_shapes) check_shape(s, true);
  for (auto& s : blas_shapes) check_shape(s, false);

  // ---- 2. ceilings and autotuning -----------------------------------------------------
  if (!timed.empty()) {
    std::printf("\n2. Ceilings measured in this run\n");
    ceilings::Fma fma = ceilings::fp32_fma();
    verify::Check fc;
    fc.name = "FP32 FMA ceiling kernel matches the CPU bit for bit";
    fc.passed = fma.exact;
    fc.n = size_t(fma.checked);
    fc.n_bad = !fma.exact;
    fc.tol = verify::Tol{0, 0, "exact"};
    res.add(fc);
    std::string bf16_peak_name;
    const double bf16_peak = published_bf16_peak(res.env.find("gpu")->str(), &bf16_peak_name);
    std::printf("  FP32 FMA: %.1f TFLOP/s (measured);  BF16 dense: %s\n", fma.tflops,
                std::isfinite(bf16_peak)
                    ? (std::to_string(int(bf16_peak)) + " TFLOP/s (" + bf16_peak_name + ")").c_str()
                    : "no published figure for this GPU");

    timing::Options topt;
    topt.flush_l2 = true;  // every repeat reads A and B from device memory, as a cold GEMM would
    topt.warmup = 1;
    topt.min_reps = 3;
    topt.reps = 25;
    topt.budget_ms = 800;

    // Autotune step 8 at 4096 (or the largest timed square size below it).
    if (wanted("08")) {
      int tn = 0;
      for (auto& s : timed)
        if (s.M == s.N && s.N == s.K && s.M <= 4096) tn = std::max(tn, s.M);
      if (tn == 0) tn = std::min(4096, timed.front().M);
      Shape ts{tn, tn, tn};
      d.alloc(ts);
      make_inputs(ts, rng, d);
      std::printf("\n  Autotuning step 8 at %s (step 7's kernel, tile shapes compiled in):\n", ts.str().c_str());
      double best = 1e30;
      json::Value tune = json::Value::array();
      const auto& cands = tune_candidates();
      for (size_t c = 0; c < cands.size(); ++c) {
        timing::Stats t = timing::time_gpu([&] { cands[c].run(ts.M, ts.N, ts.K, d.A, d.B, d.C, 0); }, topt);
        std::printf("    %-34s %8.3f ms  %6.1f TFLOP/s\n", cands[c].name, t.median_ms, ts.flops() / t.median_ms / 1e9);
        json::Value row = json::Value::object();
        row["config"] = cands[c].name;
        row["ms"] = t.median_ms;
        row["tflops"] = ts.flops() / t.median_ms / 1e9;
        tune.push(row);
        if (t.median_ms < best) {
          best = t.median_ms;
          tuned = int(c);
        }
      }
      std::printf("  -> step 8 uses %s\n", cands[tuned].name);
      res.config["autotune_size"] = tn;
      res.config["autotune"] = tune;
      res.config["autotuned_config"] = cands[tuned].name;
      kernels = make_kernels(tuned);
    }

    // ---- 3. timing ----------------------------------------------------------------------
    std::printf(
        "\n3. Timing (median of CUDA events, L2 flushed before each repeat; %% of peak: FP32 vs the measured FMA "
        "ceiling, BF16 vs %s)\n",
        std::isfinite(bf16_peak) ? "the published dense peak" : "nothing");
    for (const Shape& s : timed) {
      d.alloc(s);
      make_inputs(s, rng, d);
      const size_t mn = size_t(s.M) * s.N;
      std::printf("\n  %s (%.1f GFLOP)\n  %-44s %10s %9s %12s %10s\n", s.str().c_str(), s.flops() / 1e9, "kernel", "ms",
                  "TFLOP/s", "% of cuBLAS", "% of peak");
      auto add_row = [&](const std::string& name, const char* dtype, const timing::Stats& t, const std::string& ref,
                         double ref_ms, double peak, const std::string& peak_name) {
        results::Bench b;
        b.name = name;
        b.dtype = dtype;
        b.shape = {s.M, s.N, s.K};
        b.ms = t.median_ms;
        b.min_ms = t.min_ms;
        b.max_ms = t.max_ms;
        b.reps = t.reps;
        b.tflops = s.flops() / t.median_ms / 1e9;
        b.ref = ref;
        b.ref_ms = ref_ms;
        b.peak = peak;
        b.peak_name = peak_name;
        res.add(b);
        std::printf("  %-44s %10.4f %9.2f %11s%% %9.1f%%\n", name.c_str(), b.ms, b.tflops,
                    ref.empty() ? "  –" : (std::to_string(int(std::lround(b.pct_of_ref())))).c_str(), b.pct_of_peak());
      };
      // Baselines first: their times are the denominators.
      timing::Stats t_sgemm = timing::time_gpu([&] { baseline_sgemm(blas, s, d.A, d.B, d.Cref); }, topt);
      add_row("cublas_sgemm", "fp32", t_sgemm, "", NAN, fma.tflops, "measured FP32 FMA ceiling");
      timing::Stats t_tf32 = timing::time_gpu([&] { baseline_tf32(blas, s, d.A, d.B, d.C); }, topt);
      add_row("cublas_tf32", "tf32", t_tf32, "cublas_sgemm", t_sgemm.median_ms, NAN, "");
      timing::Stats t_bf16 = timing::time_gpu([&] { baseline_bf16(blas, s, d.Ah, d.Bth, d.Chref); }, topt);
      add_row("cublas_bf16", "bf16", t_bf16, "", NAN, bf16_peak, bf16_peak_name);
      CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> blas32 = download_f32(d.Cref, mn), blas16 = download_bf16(d.Chref, mn);
      for (const Kernel& k : kernels) {
        if (!wanted(k.id)) continue;
        std::string why;
        if (!k.supports(s, &why)) {
          std::printf("  %-44s skipped: %s\n", k.name.c_str(), why.c_str());
          continue;
        }
        const bool f32 = k.kind == Kind::Fp32;
        if (f32)
          poison(d.C, mn * 4);
        else
          poison(d.Ch, mn * 2);
        timing::Stats t = timing::time_gpu([&] { k.run(s, d, 0); }, topt);
        add_row(k.name, f32 ? "fp32" : "bf16", t, f32 ? "cublas_sgemm" : "cublas_bf16",
                f32 ? t_sgemm.median_ms : t_bf16.median_ms, f32 ? fma.tflops : bf16_peak,
                f32 ? "measured FP32 FMA ceiling" : bf16_peak_name);
        // Re-check the output the timed runs left behind: a fast wrong kernel must not pass.
        CUDA_CHECK(cudaDeviceSynchronize());
        const std::string cname = k.name.substr(0, 2) + " " + s.str() + " after timing vs cuBLAS";
        verify::Check c = f32 ? verify::compare(cname, download_f32(d.C, mn).data(), blas32.data(), mn, tol_fp32(s))
                              : verify::compare(cname, download_bf16(d.Ch, mn).data(), blas16.data(), mn, tol_bf16(s));
        if (!c.passed) verify::print(c);
        res.add_quiet(c);
      }
    }
  }
  d.free();
  if (!refused.empty()) {
    json::Value r = json::Value::array();
    for (auto& x : refused) r.push(x);
    res.config["refused"] = r;
  }

  return res.finish(kProg, json_path);
}
