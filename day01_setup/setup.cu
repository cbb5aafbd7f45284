// day01_setup/setup.cu: check the machine before any lesson, and measure its two ceilings.
//
// What it teaches
//   1. Which GPU you have and what it offers (SMs, clocks, memory, L2, shared memory, registers).
//   2. Which driver, CUDA runtime, cuBLAS and cuDNN the program really loaded (a cuDNN that
//      differs from the headers it was compiled against is the most common silent mismatch).
//   3. A first kernel (threads saying hello) and a first *checked* kernel (vector add vs the CPU).
//   4. The two ceilings every later "% of peak" is measured against: device-memory copy
//      bandwidth (GB/s, bytes read + written) and FP32 FMA throughput (TFLOP/s).
//
// Build and run
//   make                 # in this folder (or `make day01_setup` at the top)
//   make run             # = ./build/setup
//   ./build/setup --verify                 # quick checks only (what `make test` runs)
//   ./build/setup --bench --json ../results/{gpu}/day01_setup.json
//   ./build/setup --help
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cstdio>
#include <string>
#include <vector>

#include "ceilings.cuh"
#include "check.cuh"
#include "cli.h"
#include "env.cuh"
#include "npy.h"
#include "results.h"
#include "timing.cuh"
#include "verify.h"

// ---- kernel 1: hello ----------------------------------------------------------------
// printf from the device lands in a buffer that the host prints at the next synchronization.
__global__ void hello_kernel() {
  printf("  hello from block %d, thread %d (warp %d, lane %d)\n", blockIdx.x, threadIdx.x, threadIdx.x / 32,
         threadIdx.x % 32);
}

// ---- kernel 2: vector add -------------------------------------------------------------
// One thread per element; the bounds test matters because n is rarely a multiple of the block.
__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, long n) {
  long i = blockIdx.x * long(blockDim.x) + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

static void launch_vector_add(const float* a, const float* b, float* c, long n, cudaStream_t s = 0) {
  const int block = 256;
  vector_add<<<unsigned(ceil_div<long>(n, block)), block, 0, s>>>(a, b, c, n);
  LAUNCH_CHECK();
}

// FP32 lanes per SM by architecture (CUDA C Programming Guide, "Arithmetic Instructions"
// throughput table: results per clock per multiprocessor for 32-bit fadd/fmul/fma).
static int fp32_lanes_per_sm(int major, int minor) {
  if (major == 9 || major == 10 || major == 12) return 128;
  if (major == 8) return minor == 0 ? 64 : 128;
  if (major == 7) return 64;
  if (major == 6) return minor == 0 ? 64 : 128;
  return 0;  // unknown: no theoretical figure
}

int main(int argc, char** argv) {
  cli::Args args(argc, argv, "setup", "describe the GPU, run a first checked kernel, measure the ceilings");
  const cli::Standard st = cli::standard_flags(args, 20261122, "write the vector-add a, b, c as .npy into this folder");
  const bool verify_mode = st.verify, small = st.small;
  const long long seed = st.seed;
  const std::string &json_path = st.json, &npy_dir = st.npy_dir;
  const long n = long(args.integer("n", 50000017, 1, 1L << 30, "vector-add length (odd on purpose)"));
  const long copy_mib = long(args.integer("copy-mib", 1024, 1, 1 << 20, "size of each copy buffer, MiB"));
  args.finish();
  st.validate("setup");
  results::require_outputs("setup", st);

  const int dev = env::require_gpu("setup");
  // Refuse what cannot fit before printing or allocating anything.
  std::vector<long> sizes =
      verify_mode ? std::vector<long>{1, 31, small ? 4097L : 1000003L} : std::vector<long>{1, 1000003, n};
  long max_n = 0;
  for (long s : sizes) max_n = std::max(max_n, s);
  const size_t copy_bytes = verify_mode ? (small ? size_t(4) << 20 : size_t(64) << 20) : size_t(copy_mib) << 20;
  env::require_memory("setup", size_t(max_n) * 3 * sizeof(float),
                      "the vector add (3 arrays of " + std::to_string(max_n) + " floats)");
  env::require_memory("setup", 2 * copy_bytes,
                      "the copy test (2 buffers of " + std::to_string(copy_bytes >> 20) + " MiB)");
  results::Results res("day01_setup", "setup");
  res.mode = st.mode();
  res.env = env::collect(dev);
  res.config["n"] = n;
  res.config["copy_mib"] = copy_mib;
  res.config["seed"] = seed;
  env::print(res.env);

  // ---- 1. the device -----------------------------------------------------------------
  cudaDeviceProp p;
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&v, a, dev));
    return v;
  };
  const double sm_clock_ghz = attr(cudaDevAttrClockRate) / 1e6;
  const double mem_clock_mhz = attr(cudaDevAttrMemoryClockRate) / 1e3;
  // HBM and GDDR transfer on both clock edges: bytes/s = 2 * clock * bus width / 8.
  const double dram_gbps_theory = 2.0 * mem_clock_mhz * 1e6 * p.memoryBusWidth / 8 / 1e9;
  const int lanes = fp32_lanes_per_sm(p.major, p.minor);
  const double fp32_tflops_theory = lanes ? p.multiProcessorCount * lanes * 2.0 * sm_clock_ghz * 1e9 / 1e12 : NAN;

  std::printf("\n1. The device\n");
  std::printf("  %-34s %s\n", "name", p.name);
  std::printf("  %-34s %d.%d\n", "compute capability", p.major, p.minor);
  std::printf("  %-34s %d\n", "multiprocessors (SMs)", p.multiProcessorCount);
  std::printf("  %-34s %.0f MHz\n", "SM clock (max)", sm_clock_ghz * 1e3);
  std::printf("  %-34s %.0f MHz x %d bit -> %.0f GB/s theoretical\n", "memory clock x bus", mem_clock_mhz,
              p.memoryBusWidth, dram_gbps_theory);
  std::printf("  %-34s %.1f GiB\n", "device memory", env::gib(p.totalGlobalMem));
  std::printf("  %-34s %.1f MiB\n", "L2 cache", p.l2CacheSize / 1048576.0);
  std::printf("  %-34s %zu KiB (opt-in max %zu KiB)\n", "shared memory per block", p.sharedMemPerBlock / 1024,
              p.sharedMemPerBlockOptin / 1024);
  std::printf("  %-34s %zu KiB\n", "shared memory per SM", p.sharedMemPerMultiprocessor / 1024);
  std::printf("  %-34s %d per block, %d per SM\n", "32-bit registers", p.regsPerBlock, p.regsPerMultiprocessor);
  std::printf("  %-34s %d per block, %d per SM, warp %d\n", "threads", p.maxThreadsPerBlock,
              p.maxThreadsPerMultiProcessor, p.warpSize);
  std::printf("  %-34s %d FP32 lanes/SM -> %.1f TFLOP/s theoretical\n", "FP32 (CUDA cores)", lanes, fp32_tflops_theory);

  // ---- 2. the software ---------------------------------------------------------------
  std::printf("\n2. The software\n");
  std::printf("  %-34s %s (CUDA driver API %s)\n", "driver", res.env.find("driver")->str().c_str(),
              res.env.find("cuda_driver_api")->str().c_str());
  std::printf("  %-34s %s (compiled with %d.%d)\n", "CUDA runtime", res.env.find("cuda_runtime")->str().c_str(),
              __CUDACC_VER_MAJOR__, __CUDACC_VER_MINOR__);
  std::printf("  %-34s %s\n", "cuBLAS", res.env.find("cublas")->str().c_str());
  const std::string cudnn_loaded = res.env.find("cudnn_loaded")->str(),
                    cudnn_compiled = res.env.find("cudnn_compiled")->str();
  std::printf("  %-34s loaded %s, compiled against %s\n", "cuDNN", cudnn_loaded.c_str(), cudnn_compiled.c_str());
  // cuDNN promises compatibility within a major version only if the loaded library is at
  // least as new as the headers; an older one may lack functions or enum values we use.
  if (cudnnGetVersion() / 10000 != CUDNN_VERSION / 10000)
    std::printf("  WARNING: cuDNN major versions differ: rebuild against the loaded cuDNN (make clean && make)\n");
  else if (cudnnGetVersion() < size_t(CUDNN_VERSION))
    std::printf(
        "  WARNING: the loaded cuDNN is older than the headers: rebuild (make clean && make) or fix the library "
        "path\n");

  // ---- 3. a first kernel, then a checked one ------------------------------------------
  std::printf("\n3. First kernels\n");
  hello_kernel<<<2, 3>>>();
  LAUNCH_CHECK();
  CUDA_CHECK(cudaDeviceSynchronize());

  float *da, *db, *dc;
  CUDA_CHECK(cudaMalloc(&da, max_n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&db, max_n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dc, max_n * sizeof(float)));
  verify::Rng rng{uint64_t(seed)};
  std::printf("  vector add, random inputs in [-1, 1), seed %lld:\n", seed);
  for (long s : sizes) {
    std::vector<float> a(s), b(s), c(s);
    verify::fill_uniform(a, rng);  // fresh inputs for every check
    verify::fill_uniform(b, rng);
    CUDA_CHECK(cudaMemcpy(da, a.data(), s * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db, b.data(), s * sizeof(float), cudaMemcpyHostToDevice));
    poison(dc, s * sizeof(float));
    launch_vector_add(da, db, dc, s);
    CUDA_CHECK(cudaMemcpy(c.data(), dc, s * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<double> ref(s);
    for (long i = 0; i < s; ++i) ref[i] = double(a[i]) + double(b[i]);
    // One fp32 rounding of an exact sum: |err| <= 2^-24 |ref|, so rtol 1e-7 with a tiny atol.
    res.add(verify::compare("vector_add n=" + std::to_string(s), c.data(), ref.data(), s,
                            verify::Tol{1e-30, 1.2e-7, "fp32 (one rounding)"}));
    if (!npy_dir.empty() && s == sizes.back()) {
      try {
        npy::save(npy_dir + "/a.npy", a.data(), {size_t(s)});
        npy::save(npy_dir + "/b.npy", b.data(), {size_t(s)});
        npy::save(npy_dir + "/c.npy", c.data(), {size_t(s)});
        std::printf("  wrote a.npy, b.npy, c.npy (n = %ld) to %s\n", s, npy_dir.c_str());
      } catch (const std::exception& e) { cli::usage_error("setup", std::string("--save-npy: ") + e.what()); }
    }
  }
  // The vector add moves 12 bytes per element (two reads, one write): a bandwidth test too.
  const long vn = sizes.back();
  timing::Stats vt = timing::time_gpu([&] { launch_vector_add(da, db, dc, vn); },
                                      [] {
                                        timing::Options o;
                                        o.flush_l2 = true;
                                        return o;
                                      }());
  CUDA_CHECK(cudaFree(da));
  CUDA_CHECK(cudaFree(db));
  CUDA_CHECK(cudaFree(dc));

  // ---- 4. the ceilings ----------------------------------------------------------------
  std::printf("\n4. Ceilings (median of CUDA-event timings)\n");
  ceilings::Copy cp = ceilings::copy_bandwidth(copy_bytes);
  verify::Check cc;
  cc.name = "copy reproduces its source (memcpy and kernel)";
  cc.passed = cp.exact;
  cc.n = copy_bytes / sizeof(float);
  cc.n_bad = cp.exact ? 0 : 1;
  cc.tol = verify::Tol{0, 0, "exact"};
  res.add(cc);
  ceilings::Fma fm = ceilings::fp32_fma(verify_mode ? (small ? 64 : 2048) : 65536);
  verify::Check fc;
  fc.name = "FMA chains match the CPU bit for bit";
  fc.passed = fm.exact;
  fc.n = size_t(fm.checked);
  fc.n_bad = fm.exact ? 0 : 1;
  fc.tol = verify::Tol{0, 0, "exact"};
  res.add(fc);

  char theory_bw[128], theory_fp[128];
  std::snprintf(theory_bw, sizeof theory_bw, "theoretical DRAM: 2 x %.0f MHz x %d bit / 8", mem_clock_mhz,
                p.memoryBusWidth);
  std::snprintf(theory_fp, sizeof theory_fp, "theoretical FP32: %d SMs x %d lanes x 2 x %.0f MHz",
                p.multiProcessorCount, lanes, sm_clock_ghz * 1e3);
  auto row = [&](const char* name, const char* dtype, std::vector<long long> shape, const timing::Stats& t,
                 double tflops, double gbps, double peak, const char* peak_name) {
    results::Bench b;
    b.name = name;
    b.dtype = dtype;
    b.shape = shape;
    b.ms = t.median_ms;
    b.min_ms = t.min_ms;
    b.max_ms = t.max_ms;
    b.reps = t.reps;
    b.tflops = tflops;
    b.gbps = gbps;
    b.peak = peak;
    b.peak_name = peak_name;
    res.add(b);
    return b;
  };
  const double vadd_gbps = 12.0 * vn / (vt.median_ms * 1e-3) / 1e9;
  std::vector<results::Bench> rows = {
      row("copy_cudaMemcpy_d2d", "bytes", {(long long)copy_bytes}, cp.memcpy_t, NAN, cp.memcpy_gbps, dram_gbps_theory,
          theory_bw),
      row("copy_kernel_float4", "bytes", {(long long)copy_bytes}, cp.kernel_t, NAN, cp.kernel_gbps, dram_gbps_theory,
          theory_bw),
      row("vector_add", "fp32", {(long long)vn}, vt, NAN, vadd_gbps, dram_gbps_theory, theory_bw),
      row("fp32_fma_chains", "fp32", {fm.threads, fm.iters, ceilings::kChains}, fm.t, fm.tflops, NAN,
          fp32_tflops_theory, theory_fp)};
  std::printf("  %-22s %10s %12s %14s\n", "what", "ms", "rate", "% of theory");
  for (auto& b : rows)
    std::printf("  %-22s %10.4f %8.1f %-4s %13.1f%%\n", b.name.c_str(), b.ms, b.rate(),
                std::isfinite(b.tflops) ? "TF/s" : "GB/s", b.pct_of_peak());
  std::printf("  -> ceilings for later lessons: copy %.0f GB/s, FP32 %.1f TFLOP/s\n", cp.best(), fm.tflops);
  if (verify_mode) std::printf("  (--verify uses small sizes: these rates are not the ceilings; run --bench)\n");

  return res.finish("setup", json_path);
}
