// day10_matmul/matmul.cu: from a slow matmul to a fast one, each step checked and timed
// against cuBLAS.
//
// Convention (stated once, used everywhere): every matrix is row-major.
//   Steps 1-8 (FP32 on CUDA cores):  C[M x N] = A[M x K] * B[K x N]            fp32 in/out
//   Steps 9-16 (tensor cores, bf16): C[M x N] = A[M x K] * Bt[N x K]^T         bf16 in/out,
//                                    fp32 accumulation (Bt: a linear layer's weight layout)
// cuBLAS is column-major; a row-major matrix is its transpose in column-major, so
// C = A*B is computed as C^T = B^T * A^T: cublasSgemm(N, N, n=N, m=M, k=K, B, ldb=N, A, lda=K,
// C, ldc=N). See baseline_*() below and the notes.
//
// The ladder (kernels/NN_*.cuh, one idea per step):
//   01 naive · 02 coalesced · 03 shared-memory tiles · 04 1D register blocking ·
//   05 2D register blocking · 06 float4 loads + transposed A tile · 07 warp tiling +
//   double buffering · 08 step 7 with the tile shape autotuned on this GPU ·
//   08b step 8 with cp.async tile copies into a 2-4 stage shared-memory ring ·
//   08c step 8b with register fragments double-buffered across the tile boundary ·
//   08d step 8b/8c as persistent blocks with a stream-K tail ·
//   08e step 8c with the next k's shared-memory reads spread through the FFMAs ·
//   08f step 8e's main loop in step 8d's stream-K kernel ·
//   08g steps 8e/8f compiled with ptxas's register-usage level at 10 (its own object) ·
//   09 WMMA bf16 tensor cores · 10 wgmma + TMA + mbarrier pipeline + warp specialization +
//   persistent tiles (sm_90a) · 11 step 10 + 2-CTA clusters with TMA multicast (sm_90a) ·
//   12 step 10 with the epilogue through shared memory and TMA stores · 13 step 12 + clusters ·
//   14 step 12 with a stream-K tail (the last partial wave's k-steps shared by every SM) ·
//   15 step 12 with ping-pong consumers (each its own tiles, one's epilogue under the other's wgmmas) ·
//   16 step 12 with the epilogue's stores deferred into the next tile's first k-steps
//   (steps 12-16: several configurations, each checked and timed as its own row, e.g. "[s4 c2]")
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
#include <set>
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

#include "headline.h"

#include "kernels/01_naive.cuh"
#include "kernels/02_coalesced.cuh"
#include "kernels/03_smem_tiling.cuh"
#include "kernels/04_1d_blocktiling.cuh"
#include "kernels/05_2d_blocktiling.cuh"
#include "kernels/06_vectorized.cuh"
#include "kernels/07_warptiling.cuh"
#include "kernels/tuned_steps.cuh"
#include "kernels/09_wmma_bf16.cuh"
#include "kernels/10_wgmma_tma.h"
#include "kernels/12_wgmma_tma_store.h"
#include "kernels/14_stream_k.h"
#include "kernels/15_pingpong.h"
#include "kernels/16_deferred_epilogue.h"

using bf16 = __nv_bfloat16;
static const char* kProg = "matmul";
static int g_group_m = 16;  // --group-m: tile order of steps 10-16

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

using Fp32Fn = void (*)(int, int, int, const float*, const float*, float*, cudaStream_t);
static Kernel f32(std::string id, std::string name, Fp32Fn fn) {
  return Kernel{id, name, Kind::Fp32,
                [fn](const Shape& s, Buffers& d, cudaStream_t st) { fn(s.M, s.N, s.K, d.A, d.B, d.C, st); },
                [](const Shape&, std::string*) { return true; }};
}

// Candidate `cand` of tuned step `step` (kernels/tuned_steps.cuh) as a kernel of the ladder.
static Kernel tuned_kernel(size_t step, size_t cand) {
  const TunedStep& t = tuned_steps()[step];
  const TunedKernel& c = t.candidates()[cand];
  return f32(t.id, std::string(t.name) + " [" + c.name + "]", c.run);
}

// tuned[i]: the chosen candidate of tuned_steps()[i].
static std::vector<Kernel> make_kernels(const std::vector<int>& tuned) {
  std::vector<Kernel> k = {
      f32("01", "01_naive", run_01_naive),
      f32("02", "02_coalesced", run_02_coalesced),
      f32("03", "03_smem_tiling", run_03_smem_tiling),
      f32("04", "04_1d_blocktiling", run_04_1d_blocktiling),
      f32("05", "05_2d_blocktiling", run_05_2d_blocktiling),
      f32("06", "06_vectorized", run_06_vectorized),
      f32("07", "07_warptiling", run_07_warptiling),
  };
  for (size_t i = 0; i < tuned_steps().size(); ++i) k.push_back(tuned_kernel(i, size_t(tuned[i])));
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
  std::vector<TmaStoreConfig> cfgs = tma_store_configs();  // steps 12-16: every configuration is checked and timed
  cfgs.insert(cfgs.end(), stream_k_configs().begin(), stream_k_configs().end());
  cfgs.insert(cfgs.end(), pingpong_configs().begin(), pingpong_configs().end());
  cfgs.insert(cfgs.end(), deferred_epilogue_configs().begin(), deferred_epilogue_configs().end());
  for (const TmaStoreConfig& c : cfgs) {
    const auto run = c.run;
    const char* base = c.step == 12   ? "12_wgmma_tma_store ["
                       : c.step == 13 ? "13_tma_store_cluster ["
                       : c.step == 14 ? "14_stream_k ["
                       : c.step == 15 ? "15_pingpong ["
                                      : "16_deferred_epilogue [";
    k.push_back(
        {std::to_string(c.step), std::string(base) + c.name + "]", Kind::Bf16,
         [run](const Shape& s, Buffers& d, cudaStream_t st) { run(s.M, s.N, s.K, d.Ah, d.Bth, d.Ch, g_group_m, st); },
         [](const Shape& s, std::string* why) {
           return wgmma_gpu_supported(why) && wgmma_shape_supported(s.M, s.N, s.K, why);
         }});
  }
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

// A check's name starts with the step: for FP32 its id ("08b", and an autotune candidate's shape
// after it); the bf16 steps with several configurations (12-14) add theirs, so that a failing
// configuration is named.
static std::string check_tag(const Kernel& k) {
  if (k.kind == Kind::Fp32) return k.id;
  const size_t cfg = k.name.find(" [");
  return k.name.substr(0, 2) + (cfg != std::string::npos ? k.name.substr(cfg) : "");
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
  const std::string name = check_tag(k) + " " + s.str() + " vs " + against;
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

// ---- the run: options, then checks, ceilings and autotuning, timing -------------------
struct Options {
  cli::Standard st;
  std::vector<Shape> timed;  // shapes to time (empty in --verify unless --shape)
  std::vector<long long> kernel_ids;
  int group_m = 16;
  bool interleave_all = false;  // --interleave-all
  bool wanted(const std::string& id) const {
    if (kernel_ids.empty()) return true;
    for (auto k : kernel_ids)
      if (std::stoi(id) == k) return true;
    return false;
  }
};

static Options parse_options(int argc, char** argv) {
  cli::Args args(argc, argv, kProg, "the matmul ladder, from naive to wgmma, checked and timed against cuBLAS");
  Options o{cli::standard_flags(args, 20261122,
                                "write A, B and C (reference and kernel 08) of the 127x129x131 check as .npy"),
            {},
            {},
            16};
  std::vector<long long> sizes =
      args.int_list("sizes", {}, 1, 46340, "square sizes to time (default: 4096; --bench: 256..8192)");
  const std::vector<long long> shape_arg =
      args.int_list("shape", {}, 1, 1 << 30, "one extra M,N,K shape to check and time");
  o.kernel_ids = args.int_list("kernels", {}, 1, 16, "kernel numbers to run, e.g. 5,6,7,8 (default: all)");
  o.group_m = int(
      args.integer("group-m", 16, 1, 1024, "steps 10-16: rows of tiles per group in the tile order (1 = plain order)"));
  o.interleave_all = args.flag("interleave-all",
                               "at 4096 and 8192, re-time every bf16 row from step 12 on in 3 interleaved rounds "
                               "(to compare configurations; the headline stays the one picked without it)");
  args.finish();
  o.st.validate(kProg);
  if (!shape_arg.empty() && shape_arg.size() != 3) cli::usage_error(kProg, "--shape expects three numbers M,N,K");
  // --verify times nothing: a size given with it would be silently ignored.
  if (o.st.verify && !sizes.empty()) cli::usage_error(kProg, "--sizes times kernels; --verify times nothing");
  results::require_outputs(kProg, o.st);
  if (sizes.empty())
    // --bench: 3072 and 6144 fill in the TFLOP/s-against-N curve between the powers of two,
    // where steps 10-13 run partial waves (288 and 1152 tiles of 128x256 on 132 SMs).
    sizes = o.st.bench ? std::vector<long long>{256, 512, 1024, 2048, 3072, 4096, 6144, 8192}
                       : std::vector<long long>{4096};
  if (!o.st.verify) {
    for (auto n : sizes) o.timed.push_back({int(n), int(n), int(n)});
    if (o.st.bench)  // a GPT MLP's two GEMMs (B*T = 16384 tokens, width 384) and a long-K product
      for (Shape s : {Shape{16384, 1536, 384}, Shape{16384, 384, 1536}, Shape{1024, 1024, 16384}}) o.timed.push_back(s);
  }
  if (shape_arg.size() == 3) o.timed.push_back({int(shape_arg[0]), int(shape_arg[1]), int(shape_arg[2])});
  // The kernels index within a matrix with 32-bit tile arithmetic and 64-bit offsets; keep
  // every matrix under 2^31 elements so that no index can wrap.
  for (const Shape& s : o.timed)
    for (double e : {double(s.M) * s.K, double(s.K) * s.N, double(s.M) * s.N})
      if (e >= 2147483648.0) cli::usage_error(kProg, "shape " + s.str() + " has a matrix of more than 2^31 elements");
  return o;
}

struct Run {
  const Options& o;
  results::Results& res;
  Blas blas;
  verify::Rng rng;
  Buffers d;
  std::vector<int> tuned = std::vector<int>(tuned_steps().size(), 0);
  std::vector<Kernel> kernels = make_kernels(tuned);
  std::vector<std::string> refused;
  std::set<std::string> failed;  // kernels that failed a check: reported, and not timed
  Run(const Options& opt, results::Results& r) : o(opt), res(r), rng{uint64_t(opt.st.seed)} {}
};

static void save_npy(const std::string& dir, const Shape& s, const HostInputs& h, const std::vector<double>& ref32,
                     Buffers& d) {
  const size_t mn = size_t(s.M) * s.N;
  try {
    npy::save(dir + "/A.npy", h.A.data(), {size_t(s.M), size_t(s.K)});
    npy::save(dir + "/B.npy", h.B.data(), {size_t(s.K), size_t(s.N)});
    npy::save(dir + "/C_ref.npy", ref32.data(), {size_t(s.M), size_t(s.N)});
    npy::save(dir + "/C_08.npy", download_f32(d.C, mn).data(), {size_t(s.M), size_t(s.N)});
    std::printf("  wrote A.npy, B.npy, C_ref.npy, C_08.npy to %s\n", dir.c_str());
  } catch (const std::exception& e) { cli::usage_error(kProg, std::string("--save-npy: ") + e.what()); }
}

// One check shape: the baselines themselves, then each kernel, against the same reference
// (a CPU reference in double where `cpu`, otherwise cuBLAS).
static void check_shape(Run& r, const Shape& s, bool cpu) {
  r.d.alloc(s);
  HostInputs h = make_inputs(s, r.rng, r.d);
  const size_t mn = size_t(s.M) * s.N;
  std::vector<double> ref32, ref16;
  if (cpu) {
    ref32.resize(mn);
    ref16.resize(mn);
    ref::gemm_nn(s.M, s.N, s.K, h.A.data(), h.B.data(), ref32.data());
    ref::gemm_nt(s.M, s.N, s.K, h.Ahf.data(), h.Bthf.data(), ref16.data());
  }
  poison(r.d.Cref, mn * 4);
  poison(r.d.Chref, mn * 2);
  baseline_sgemm(r.blas, s, r.d.A, r.d.B, r.d.Cref);
  baseline_bf16(r.blas, s, r.d.Ah, r.d.Bth, r.d.Chref);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> blas32 = download_f32(r.d.Cref, mn), blas16 = download_bf16(r.d.Chref, mn);
  if (cpu) {
    r.res.add(verify::compare("cuBLAS SGEMM " + s.str() + " vs CPU", blas32.data(), ref32.data(), mn, tol_fp32(s)));
    r.res.add(verify::compare("cuBLAS BF16 " + s.str() + " vs CPU", blas16.data(), ref16.data(), mn, tol_bf16(s)));
  }
  auto check = [&](const Kernel& k) {
    if (cpu) return run_and_check(k, s, r.d, k.kind == Kind::Fp32 ? ref32.data() : ref16.data(), "CPU");
    return run_and_check(k, s, r.d, k.kind == Kind::Fp32 ? blas32.data() : blas16.data(), "cuBLAS");
  };
  for (const Kernel& k : r.kernels) {
    if (!r.o.wanted(k.id)) continue;
    std::string why;
    if (!k.supports(s, &why)) {
      std::printf("  SKIP  %s %s: %s\n", k.name.c_str(), s.str().c_str(), why.c_str());
      r.refused.push_back(k.name + " " + s.str() + ": " + why);
      continue;
    }
    verify::Check c = check(k);
    if (!c.passed) r.failed.insert(k.name);
    r.res.add(c);
    if (k.id == "08" && s.M == 127 && !r.o.st.npy_dir.empty()) save_npy(r.o.st.npy_dir, s, h, ref32, r.d);
  }
  // Every autotune candidate must be correct, not only the winner (the check's name carries its shape).
  for (size_t i = 0; i < tuned_steps().size(); ++i) {
    if (!r.o.wanted(tuned_steps()[i].id)) continue;
    for (size_t c = 0; c < tuned_steps()[i].candidates().size(); ++c) {
      Kernel kc = tuned_kernel(i, c);
      kc.id += std::string(" [") + tuned_steps()[i].candidates()[c].name + "]";
      r.res.add(check(kc));
    }
  }
}

// Small and odd shapes against a CPU reference in double; a large one against cuBLAS (whose
// own output is checked against the CPU at the small shapes).
static void run_checks(Run& r) {
  const bool verify_mode = r.o.st.verify, small = r.o.st.small;
  std::vector<Shape> cpu_shapes = {{127, 129, 131},   {1, 1, 1},         {1, 1500, 777}, {1000, 1, 777}, {129, 130, 1},
                                   {1000, 1500, 777}, {1000, 1504, 776}, {64, 8, 4104},  {256, 256, 256}};
  if (!verify_mode) cpu_shapes = {{127, 129, 131}, {1000, 1500, 777}, {1000, 1504, 776}};
  if (small)
    cpu_shapes = {{127, 129, 131}, {1, 1, 1}, {1, 150, 77}, {100, 1, 77}, {129, 130, 1}, {130, 264, 72}, {64, 8, 1032}};
  // 3000x4104x1032: ~3 tiles per persistent block of steps 10-16 (the pipeline and the C staging
  // slots carried from tile to tile), with partial tiles at both edges; for step 14, the 12
  // tiles of the partial wave split ~11 ways each (64x8x4104: one tile split 65 ways).
  std::vector<Shape> blas_shapes = {{2048, 2048, 2048}, {3000, 4104, 1032}};
  if (!verify_mode || small) blas_shapes.clear();
  std::printf("\n1. Checks (outputs poisoned with NaN before each run)\n");
  for (auto& s : cpu_shapes) check_shape(r, s, true);
  for (auto& s : blas_shapes) check_shape(r, s, false);
}

static timing::Options timing_options() {
  timing::Options topt;
  topt.flush_l2 = true;  // every repeat reads A and B from device memory, as a cold GEMM would
  topt.warmup = 1;
  topt.min_reps = 3;
  topt.reps = 25;
  topt.budget_ms = 800;
  return topt;
}

// One tuned step at the tuning shape (kernels/tuned_steps.cuh: tune_step). Step 8's table keeps its
// historical keys ("autotune", "autotuned_config"); the others get the step's id appended.
static void autotune_step(Run& r, size_t step, const Shape& ts, const std::vector<float>& blas,
                          const timing::Options& topt) {
  const TunedStep& st = tuned_steps()[step];
  const size_t mn = size_t(ts.M) * ts.N;
  auto run = [&](const TunedKernel& k) { k.run(ts.M, ts.N, ts.K, r.d.A, r.d.B, r.d.C, 0); };
  auto check = [&](const TunedKernel& k) {
    poison(r.d.C, mn * 4);
    run(k);
    CUDA_CHECK(cudaDeviceSynchronize());
    return verify::compare(std::string(st.id) + " [" + k.name + "] " + ts.str() + " vs cuBLAS",
                           download_f32(r.d.C, mn).data(), blas.data(), mn, tol_fp32(ts));
  };
  json::Value tune = json::Value::array();
  r.tuned[step] = tune_step(st, ts.str(), ts.flops(), check, run, topt, r.res, tune);
  const std::string suffix = step == 0 ? "" : std::string("_") + st.id;
  r.res.config["autotune" + suffix] = tune;
  r.res.config["autotuned_config" + suffix] = st.candidates()[r.tuned[step]].name;
}

// Autotunes the tuned FP32 steps at 4096 (or the largest timed square size below it).
static void autotune(Run& r, const timing::Options& topt) {
  bool any = false;
  for (const TunedStep& t : tuned_steps()) any = any || r.o.wanted(t.id);
  if (!any) return;
  int tn = 0;
  for (auto& s : r.o.timed)
    if (s.M == s.N && s.N == s.K && s.M <= 4096) tn = std::max(tn, s.M);
  if (tn == 0) tn = std::min(4096, r.o.timed.front().M);
  Shape ts{tn, tn, tn};
  r.d.alloc(ts);
  make_inputs(ts, r.rng, r.d);
  poison(r.d.Cref, size_t(tn) * tn * 4);
  baseline_sgemm(r.blas, ts, r.d.A, r.d.B, r.d.Cref);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> blas = download_f32(r.d.Cref, size_t(tn) * tn);
  r.res.config["autotune_size"] = tn;
  for (size_t i = 0; i < tuned_steps().size(); ++i)
    if (r.o.wanted(tuned_steps()[i].id)) autotune_step(r, i, ts, blas, topt);
  r.kernels = make_kernels(r.tuned);
}

struct Peaks {
  double fp32 = NAN, bf16 = NAN;
  std::string bf16_name;
};

static results::Bench make_row(const Shape& s, const std::string& name, const char* dtype, const timing::Stats& t,
                               const std::string& ref, double ref_ms, double peak, const std::string& peak_name) {
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
  return b;
}

static void print_row(const results::Bench& b) {
  std::printf("  %-44s %10.4f %9.2f %11s%% %9.1f%%\n", b.name.c_str(), b.ms, b.tflops,
              b.ref.empty() ? "  –" : (std::to_string(int(std::lround(b.pct_of_ref())))).c_str(), b.pct_of_peak());
}

// Every wanted kernel at one shape, baselines first (their times are the denominators); each
// kernel's output re-checked after timing (a fast wrong kernel must not pass).
static void time_shape(Run& r, const Shape& s, const Peaks& pk, const timing::Options& topt) {
  Buffers& d = r.d;
  d.alloc(s);
  make_inputs(s, r.rng, d);
  const size_t mn = size_t(s.M) * s.N;
  std::printf("\n  %s (%.1f GFLOP)\n  %-44s %10s %9s %12s %10s\n", s.str().c_str(), s.flops() / 1e9, "kernel", "ms",
              "TFLOP/s", "% of cuBLAS", "% of peak");
  std::vector<results::Bench> rows;
  auto add = [&](results::Bench b) {
    print_row(b);
    rows.push_back(b);
  };
  const auto sgemm = [&] { baseline_sgemm(r.blas, s, d.A, d.B, d.Cref); };
  const auto bf16 = [&] { baseline_bf16(r.blas, s, d.Ah, d.Bth, d.Chref); };
  const timing::Stats t_sgemm = timing::time_gpu(sgemm, topt);
  add(make_row(s, "cublas_sgemm", "fp32", t_sgemm, "", NAN, pk.fp32, "measured FP32 FMA ceiling"));
  const timing::Stats t_tf32 = timing::time_gpu([&] { baseline_tf32(r.blas, s, d.A, d.B, d.C); }, topt);
  add(make_row(s, "cublas_tf32", "tf32", t_tf32, "cublas_sgemm", t_sgemm.median_ms, NAN, ""));
  const timing::Stats t_bf16 = timing::time_gpu(bf16, topt);
  add(make_row(s, "cublas_bf16", "bf16", t_bf16, "", NAN, pk.bf16, pk.bf16_name));
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> blas32 = download_f32(d.Cref, mn), blas16 = download_bf16(d.Chref, mn);
  for (const Kernel& k : r.kernels) {
    if (!r.o.wanted(k.id)) continue;
    std::string why;
    if (!k.supports(s, &why)) {
      std::printf("  %-44s skipped: %s\n", k.name.c_str(), why.c_str());
      continue;
    }
    if (r.failed.count(k.name)) {
      std::printf("  %-44s not timed: it failed a check above\n", k.name.c_str());
      continue;
    }
    const bool f32 = k.kind == Kind::Fp32;
    if (f32)
      poison(d.C, mn * 4);
    else
      poison(d.Ch, mn * 2);
    timing::Stats t = timing::time_gpu([&] { k.run(s, d, 0); }, topt);
    add(make_row(s, k.name, f32 ? "fp32" : "bf16", t, f32 ? "cublas_sgemm" : "cublas_bf16",
                 f32 ? t_sgemm.median_ms : t_bf16.median_ms, f32 ? pk.fp32 : pk.bf16,
                 f32 ? "measured FP32 FMA ceiling" : pk.bf16_name));
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::string cname = check_tag(k) + " " + s.str() + " after timing vs cuBLAS";
    verify::Check c = f32 ? verify::compare(cname, download_f32(d.C, mn).data(), blas32.data(), mn, tol_fp32(s))
                          : verify::compare(cname, download_bf16(d.Ch, mn).data(), blas16.data(), mn, tol_bf16(s));
    if (!c.passed) verify::print(c);
    r.res.add_quiet(c);
  }
  if (s.M == s.N && s.N == s.K && (s.M == 4096 || s.M == 8192)) {  // the notes' headline sizes (headline.h)
    const headline::Launcher launch = [&](const std::string& name) -> std::function<void()> {
      for (const Kernel& k : r.kernels)
        if (k.name == name) return [&r, &s, &k] { k.run(s, r.d, 0); };
      return {};
    };
    const std::string n = std::to_string(s.M);
    const results::Bench* h32 = headline::pick(rows, "fp32", 1, launch, sgemm, s.flops(), topt);
    for (auto& b : rows)  // the other FP32 steps from 07 on too: the notes compare them with each other
      if (b.dtype == "fp32" && !b.ref.empty() && b.ref_repeats == 0 && b.name >= std::string("07"))
        if (const auto ours = launch(b.name)) headline::interleave(b, ours, sgemm, s.flops(), topt);
    const results::Bench* h16 = headline::pick(rows, "bf16", 2, launch, bf16, s.flops(), topt);
    if (r.o.interleave_all) {  // the configurations of steps 12-16 against each other, each against cuBLAS
      for (auto& b : rows)
        if (b.dtype == "bf16" && !b.ref.empty() && b.ref_repeats == 0 && b.name >= std::string("12"))
          if (const auto ours = launch(b.name)) headline::interleave(b, ours, bf16, s.flops(), topt);
      // The best of them all is printed, not made the headline: the highest of many medians, each a few
      // tenths of noise, is biased upwards; the goal stays on headline::pick's, chosen before its re-timing.
      const results::Bench* top = nullptr;
      for (const auto& b : rows)
        if (b.dtype == "bf16" && b.ref_repeats > 0 && (!top || b.pct_of_ref_median > top->pct_of_ref_median)) top = &b;
      if (top)
        std::printf("  best bf16 of all (not the headline): %s at %.1f%% of cuBLAS\n", top->name.c_str(),
                    top->pct_of_ref_median);
    }
    if (h16)
      r.res.add_goal("bf16 >= 100% of cuBLAS at " + n + " (median of 3 interleaved rounds)", h16->pct_of_ref_median,
                     h16->pct_of_ref_median >= 100);
    if (h32 && s.M == 4096)
      r.res.add_goal("FP32 >= 90% of cuBLAS SGEMM at 4096 (median of 3 interleaved rounds)", h32->pct_of_ref_median,
                     h32->pct_of_ref_median >= 90);
  }
  for (const auto& b : rows) r.res.add(b);
}

// The measured FP32 ceiling (its kernel checked bit for bit), the autotuning, then every shape.
static void run_timing(Run& r) {
  std::printf("\n2. Ceilings measured in this run\n");
  ceilings::Fma fma = ceilings::fp32_fma();
  r.res.add(verify::fact("FP32 FMA ceiling kernel matches the CPU bit for bit", fma.exact, "exact", "",
                         size_t(fma.checked), !fma.exact));
  Peaks pk;
  pk.fp32 = fma.tflops;
  pk.bf16 = published_bf16_peak(r.res.env.find("gpu")->str(), &pk.bf16_name);
  std::printf("  FP32 FMA: %.1f TFLOP/s (measured);  BF16 dense: %s\n", fma.tflops,
              std::isfinite(pk.bf16) ? (std::to_string(int(pk.bf16)) + " TFLOP/s (" + pk.bf16_name + ")").c_str()
                                     : "no published figure for this GPU");
  const timing::Options topt = timing_options();
  autotune(r, topt);
  std::printf(
      "\n3. Timing (median of CUDA events, L2 flushed before each repeat; %% of peak: FP32 vs the measured FMA "
      "ceiling, BF16 vs %s)\n",
      std::isfinite(pk.bf16) ? "the published dense peak" : "nothing");
  for (const Shape& s : r.o.timed) time_shape(r, s, pk, topt);
}

// Refuses (exit 2) what will not fit before any allocation: the largest shape's buffers.
static void require_memory(const Options& o) {
  size_t max_bytes = 0;
  Shape biggest{2048, 2048, 2048};
  for (auto& s : o.timed)
    if (Buffers::bytes(s) > max_bytes) max_bytes = Buffers::bytes(s), biggest = s;
  max_bytes = std::max(max_bytes, Buffers::bytes({2048, 2048, 2048}));
  env::require_memory(kProg, max_bytes, "shape " + biggest.str() + " (A, B, C and a reference, in fp32 and bf16)");
}

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  results::Results res("day10_matmul", kProg);
  env::begin(res, o.st);
  res.config["group_m"] = o.group_m;
  set_wgmma_group_m(o.group_m);
  g_group_m = o.group_m;
  require_memory(o);
  std::printf("seed %lld; all matrices row-major; fp32 ladder C = A*B, bf16 steps C = A*Bt^T\n", o.st.seed);
  {
    Run r(o, res);
    run_checks(r);
    if (!o.timed.empty()) run_timing(r);
    r.d.free();
    stream_k_release();
    if (!r.refused.empty()) {
      json::Value j = json::Value::array();
      for (auto& x : r.refused) j.push(x);
      res.config["refused"] = j;
    }
  }
  return res.finish(kProg, o.st.json);
}
