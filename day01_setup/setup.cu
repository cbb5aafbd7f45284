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

// ---- the run's options -----------------------------------------------------------------
struct Options {
  cli::Standard st;
  long n = 0, copy_mib = 0;
  std::vector<long> sizes;  // the vector-add checks
  long max_n = 0;
  size_t copy_bytes = 0;  // one copy buffer
};

// Arguments, then the sizes they imply; a bad one is refused here, before the GPU is touched.
static Options parse(int argc, char** argv) {
  cli::Args args(argc, argv, "setup", "describe the GPU, run a first checked kernel, measure the ceilings");
  Options o;
  o.st = cli::standard_flags(args, 20261122, "write the vector-add a, b, c as .npy into this folder");
  o.n = long(args.integer("n", 50000017, 1, 1L << 30, "vector-add length (odd on purpose)"));
  o.copy_mib = long(args.integer("copy-mib", 1024, 1, 1 << 20, "size of each copy buffer, MiB"));
  args.finish();
  o.st.validate("setup");
  results::require_outputs("setup", o.st);
  const bool v = o.st.verify, small = o.st.small;
  o.sizes = v ? std::vector<long>{1, 31, small ? 4097L : 1000003L} : std::vector<long>{1, 1000003, o.n};
  for (long s : o.sizes) o.max_n = std::max(o.max_n, s);
  o.copy_bytes = v ? (small ? size_t(4) << 20 : size_t(64) << 20) : size_t(o.copy_mib) << 20;
  return o;
}

// The GPU (or SKIP), what cannot fit refused before anything is printed or allocated, then the
// environment (env::begin). Returns the device.
static int start(results::Results& res, const Options& o) {
  env::require_gpu("setup");
  env::require_memory("setup", size_t(o.max_n) * 3 * sizeof(float),
                      "the vector add (3 arrays of " + std::to_string(o.max_n) + " floats)");
  env::require_memory("setup", 2 * o.copy_bytes,
                      "the copy test (2 buffers of " + std::to_string(o.copy_bytes >> 20) + " MiB)");
  res.config["n"] = o.n;
  res.config["copy_mib"] = o.copy_mib;
  return env::begin(res, o.st);
}

// ---- 1. the device -----------------------------------------------------------------
struct Device {
  cudaDeviceProp p;
  double sm_clock_ghz = 0, mem_clock_mhz = 0;
  double dram_gbps_theory = 0, fp32_tflops_theory = NAN;
  int lanes = 0;
};

static Device describe_device(int dev) {
  Device d;
  cudaDeviceProp& p = d.p;
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&v, a, dev));
    return v;
  };
  d.sm_clock_ghz = attr(cudaDevAttrClockRate) / 1e6;
  d.mem_clock_mhz = attr(cudaDevAttrMemoryClockRate) / 1e3;
  // HBM and GDDR transfer on both clock edges: bytes/s = 2 * clock * bus width / 8.
  d.dram_gbps_theory = 2.0 * d.mem_clock_mhz * 1e6 * p.memoryBusWidth / 8 / 1e9;
  d.lanes = fp32_lanes_per_sm(p.major, p.minor);
  if (d.lanes) d.fp32_tflops_theory = p.multiProcessorCount * d.lanes * 2.0 * d.sm_clock_ghz * 1e9 / 1e12;

  std::printf("\n1. The device\n");
  std::printf("  %-34s %s\n", "name", p.name);
  std::printf("  %-34s %d.%d\n", "compute capability", p.major, p.minor);
  std::printf("  %-34s %d\n", "multiprocessors (SMs)", p.multiProcessorCount);
  std::printf("  %-34s %.0f MHz\n", "SM clock (max)", d.sm_clock_ghz * 1e3);
  std::printf("  %-34s %.0f MHz x %d bit -> %.0f GB/s theoretical\n", "memory clock x bus", d.mem_clock_mhz,
              p.memoryBusWidth, d.dram_gbps_theory);
  std::printf("  %-34s %.1f GiB\n", "device memory", env::gib(p.totalGlobalMem));
  std::printf("  %-34s %.1f MiB\n", "L2 cache", p.l2CacheSize / 1048576.0);
  std::printf("  %-34s %zu KiB (opt-in max %zu KiB)\n", "shared memory per block", p.sharedMemPerBlock / 1024,
              p.sharedMemPerBlockOptin / 1024);
  std::printf("  %-34s %zu KiB\n", "shared memory per SM", p.sharedMemPerMultiprocessor / 1024);
  std::printf("  %-34s %d per block, %d per SM\n", "32-bit registers", p.regsPerBlock, p.regsPerMultiprocessor);
  std::printf("  %-34s %d per block, %d per SM, warp %d\n", "threads", p.maxThreadsPerBlock,
              p.maxThreadsPerMultiProcessor, p.warpSize);
  std::printf("  %-34s %d FP32 lanes/SM -> %.1f TFLOP/s theoretical\n", "FP32 (CUDA cores)", d.lanes,
              d.fp32_tflops_theory);
  return d;
}

// ---- 2. the software ---------------------------------------------------------------
static void describe_software(const json::Value& env) {
  auto str = [&](const char* key) { return env.find(key)->str(); };
  std::printf("\n2. The software\n");
  std::printf("  %-34s %s (CUDA driver API %s)\n", "driver", str("driver").c_str(), str("cuda_driver_api").c_str());
  std::printf("  %-34s %s (compiled with %d.%d)\n", "CUDA runtime", str("cuda_runtime").c_str(), __CUDACC_VER_MAJOR__,
              __CUDACC_VER_MINOR__);
  std::printf("  %-34s %s\n", "cuBLAS", str("cublas").c_str());
  std::printf("  %-34s loaded %s, compiled against %s\n", "cuDNN", str("cudnn_loaded").c_str(),
              str("cudnn_compiled").c_str());
  // cuDNN promises compatibility within a major version only if the loaded library is at
  // least as new as the headers; an older one may lack functions or enum values we use.
  if (cudnnGetVersion() / 10000 != CUDNN_VERSION / 10000)
    std::printf("  WARNING: cuDNN major versions differ: rebuild against the loaded cuDNN (make clean && make)\n");
  else if (cudnnGetVersion() < size_t(CUDNN_VERSION))
    std::printf(
        "  WARNING: the loaded cuDNN is older than the headers: rebuild (make clean && make) or fix the library "
        "path\n");
}

// ---- 3. a first kernel, then a checked one ------------------------------------------
static void save_npy(const std::string& dir, const std::vector<float>& a, const std::vector<float>& b,
                     const std::vector<float>& c) {
  try {
    npy::save(dir + "/a.npy", a.data(), {a.size()});
    npy::save(dir + "/b.npy", b.data(), {b.size()});
    npy::save(dir + "/c.npy", c.data(), {c.size()});
    std::printf("  wrote a.npy, b.npy, c.npy (n = %zu) to %s\n", c.size(), dir.c_str());
  } catch (const std::exception& e) { cli::usage_error("setup", std::string("--save-npy: ") + e.what()); }
}

// Hello, then the vector add checked at every size; returns the timing of the largest, which
// moves 12 bytes per element (two reads, one write): a bandwidth test too.
static timing::Stats first_kernels(results::Results& res, const Options& o) {
  std::printf("\n3. First kernels\n");
  hello_kernel<<<2, 3>>>();
  LAUNCH_CHECK();
  CUDA_CHECK(cudaDeviceSynchronize());

  DeviceBuffer da(o.max_n * sizeof(float)), db(o.max_n * sizeof(float)), dc(o.max_n * sizeof(float));
  verify::Rng rng{uint64_t(o.st.seed)};
  std::printf("  vector add, random inputs in [-1, 1), seed %lld:\n", o.st.seed);
  for (long s : o.sizes) {
    std::vector<float> a(s), b(s), c(s);
    verify::fill_uniform(a, rng);  // fresh inputs for every check
    verify::fill_uniform(b, rng);
    CUDA_CHECK(cudaMemcpy(da.as<float>(), a.data(), s * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db.as<float>(), b.data(), s * sizeof(float), cudaMemcpyHostToDevice));
    poison(dc.as<float>(), s * sizeof(float));
    launch_vector_add(da.as<float>(), db.as<float>(), dc.as<float>(), s);
    CUDA_CHECK(cudaMemcpy(c.data(), dc.as<float>(), s * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<double> ref(s);
    for (long i = 0; i < s; ++i) ref[i] = double(a[i]) + double(b[i]);
    // One fp32 rounding of an exact sum: |err| <= 2^-24 |ref|, so rtol 1e-7 with a tiny atol.
    res.add(verify::compare("vector_add n=" + std::to_string(s), c.data(), ref.data(), s,
                            verify::Tol{1e-30, 1.2e-7, "fp32 (one rounding)"}));
    if (!o.st.npy_dir.empty() && s == o.sizes.back()) save_npy(o.st.npy_dir, a, b, c);
  }
  const long vn = o.sizes.back();
  timing::Options t;
  t.flush_l2 = true;
  return timing::time_gpu([&] { launch_vector_add(da.as<float>(), db.as<float>(), dc.as<float>(), vn); }, t);
}

// ---- 4. the ceilings ----------------------------------------------------------------
static results::Bench bench_row(const char* name, const char* dtype, std::vector<long long> shape,
                                const timing::Stats& t, double tflops, double gbps, double peak,
                                const std::string& peak_name) {
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
  return b;
}

// Copy bandwidth and FP32 FMA throughput, each checked, then the table with the vector add's row.
static void measure_ceilings(results::Results& res, const Options& o, const Device& d, const timing::Stats& vt) {
  std::printf("\n4. Ceilings (median of CUDA-event timings)\n");
  const cudaDeviceProp& p = d.p;
  char theory_bw[128], theory_fp[128];
  std::snprintf(theory_bw, sizeof theory_bw, "theoretical DRAM: 2 x %.0f MHz x %d bit / 8", d.mem_clock_mhz,
                p.memoryBusWidth);
  std::snprintf(theory_fp, sizeof theory_fp, "theoretical FP32: %d SMs x %d lanes x 2 x %.0f MHz",
                p.multiProcessorCount, d.lanes, d.sm_clock_ghz * 1e3);
  const ceilings::Copy cp = ceilings::copy_bandwidth(o.copy_bytes);
  res.add(verify::fact("copy reproduces its source (memcpy and kernel)", cp.exact, "exact", "",
                       o.copy_bytes / sizeof(float), cp.exact ? 0 : 1));
  const long long bytes = (long long)o.copy_bytes, vn = o.sizes.back();
  const double vadd_gbps = 12.0 * vn / (vt.median_ms * 1e-3) / 1e9;
  std::vector<results::Bench> rows = {
      bench_row("copy_cudaMemcpy_d2d", "bytes", {bytes}, cp.memcpy_t, NAN, cp.memcpy_gbps, d.dram_gbps_theory,
                theory_bw),
      bench_row("copy_kernel_float4", "bytes", {bytes}, cp.kernel_t, NAN, cp.kernel_gbps, d.dram_gbps_theory,
                theory_bw),
      bench_row("vector_add", "fp32", {vn}, vt, NAN, vadd_gbps, d.dram_gbps_theory, theory_bw)};
  for (const auto& b : rows) res.add(b);  // each row takes a clock reading as it arrives

  const bool v = o.st.verify, small = o.st.small;
  const ceilings::Fma fm = ceilings::fp32_fma(v ? (small ? 64 : 2048) : 65536);
  res.add(verify::fact("FMA chains match the CPU bit for bit", fm.exact, "exact", "", size_t(fm.checked),
                       fm.exact ? 0 : 1));
  rows.push_back(bench_row("fp32_fma_chains", "fp32", {fm.threads, fm.iters, ceilings::kChains}, fm.t, fm.tflops, NAN,
                           d.fp32_tflops_theory, theory_fp));
  res.add(rows.back());

  std::printf("  %-22s %10s %12s %14s\n", "what", "ms", "rate", "% of theory");
  for (auto& b : rows)
    std::printf("  %-22s %10.4f %8.1f %-4s %13.1f%%\n", b.name.c_str(), b.ms, b.rate(),
                std::isfinite(b.tflops) ? "TF/s" : "GB/s", b.pct_of_peak());
  std::printf("  -> ceilings for later lessons: copy %.0f GB/s, FP32 %.1f TFLOP/s\n", cp.best(), fm.tflops);
  if (v) std::printf("  (--verify uses small sizes: these rates are not the ceilings; run --bench)\n");
}

// Parse, run the four parts, write the results.
int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  results::Results res("day01_setup", "setup");
  const int dev = start(res, o);
  const Device d = describe_device(dev);
  describe_software(res.env);
  const timing::Stats vt = first_kernels(res, o);
  measure_ceilings(res, o, d, vt);
  return res.finish("setup", o.st.json);
}
