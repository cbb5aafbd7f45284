// common/env.cuh: find the GPU (or skip), refuse what will not fit, record the environment.
//
//   int dev = env::require_gpu(prog);          // no usable GPU -> "SKIP: ..." and exit 77
//   env::require_memory(prog, bytes, "A, B, C"); // too big -> one line and exit 2
//   results.env = env::collect(dev);            // GPU, clocks, driver, CUDA, cuBLAS, cuDNN, commit, date
//   int dev = env::begin(res, st);              // all of the above, plus clock readings (below)
//
// The driver's release number, the clocks, the power draw and the throttle reasons come from
// NVML, which is opened with dlopen: linking it would stop the program from even starting on a
// machine without the driver (CI), where it must print a clean SKIP instead. Without NVML the
// clock fields are absent and nothing is flagged.
//
// Throttling (common/clocks.h): env::begin records env.clocks_begin and installs a sampler in the
// Results, which then reads the clocks at every add(Bench) and at finish (env.clocks_end). A row
// timed under HW slowdown, HW thermal slowdown or the HW power brake gets extra.unreliable and the
// file a top-level "throttled" (absent when NVML could not say).
//
// The commit: env.commit is the full hash of the code the program was built from, env.dirty
// whether tracked files other than results/ and *.md differed from it ("unknown" for both when
// the build had no stamp). common/toolchain.mk takes them from the file .repo-commit at the
// repository root where it exists (one line "<hash> <0|1>", written just before a tree is copied to
// a GPU machine, whose copy may have no .git or a stale one), otherwise from git, and lesson.mk links
// them into every program (build/repo_stamp.o, rebuilt when they change). A Python script reads the
// same two facts the same way:
//   .repo-commit:   its two words
//   otherwise:      git rev-parse HEAD
//                   git diff --quiet HEAD -- . ':(exclude)results' ':(exclude,glob)**/*.md'
//                   (exit 1: dirty); neither: "unknown"
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "check.cuh"
#include "cli.h"
#include "clocks.h"
#include "json.h"
#include "results.h"

// The build's stamp (lesson.mk compiles build/repo_stamp.o from common/toolchain.mk's REPO_COMMIT
// and REPO_DIRTY). Weak, so that a program compiled by hand without it still links, and says
// "unknown".
extern "C" {
__attribute__((weak)) extern const char repo_stamp_commit[];
__attribute__((weak)) extern const int repo_stamp_dirty;
}

namespace env {

// Whether any NVIDIA driver is installed. With none, CUDA reports "CUDA driver version is
// insufficient for CUDA runtime version", which sends people looking for a driver upgrade.
inline bool driver_installed() { return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != nullptr; }

// The first usable GPU, or a one-line SKIP (exit 77). Also catches a binary built for
// the wrong architecture, which would otherwise fail at the first kernel launch.
__global__ void probe_kernel(int* out) {
  if (out) *out = 1;
}

inline int require_gpu(const std::string& prog) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky error
    const std::string why = e == cudaSuccess      ? "no devices"
                            : !driver_installed() ? "no NVIDIA driver on this machine"
                                                  : cudaGetErrorString(e);
    cli::skip(prog, "no usable CUDA GPU (" + why + ")");
  }
  CUDA_CHECK(cudaSetDevice(0));
  cudaFuncAttributes fa;
  e = cudaFuncGetAttributes(&fa, probe_kernel);
  if (e != cudaSuccess) {
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    std::fprintf(stderr,
                 "%s: error: this build has no code for the GPU (%s, compute capability %d.%d): %s. "
                 "Rebuild with: make clean && make ARCH=sm_%d%d\n",
                 prog.c_str(), p.name, p.major, p.minor, cudaGetErrorString(e), p.major, p.minor);
    std::exit(cli::kUsage);
  }
  return 0;
}

inline double gib(size_t bytes) { return double(bytes) / double(1ull << 30); }

// Refuse, before allocating, a problem that cannot fit: one line with the sizes, exit 2.
inline void require_memory(const std::string& prog, size_t bytes, const std::string& what) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  // Leave a little room for cuBLAS/cuDNN workspaces and the CUDA context.
  const size_t reserve = size_t(256) << 20;
  if (bytes + reserve > free_b) {
    char b[512];
    std::snprintf(b, sizeof b, "%s needs %.2f GiB of GPU memory, but only %.2f GiB of %.2f GiB is free", what.c_str(),
                  gib(bytes), gib(free_b), gib(total_b));
    cli::usage_error(prog, b);
  }
}

// ---- NVML through dlopen -------------------------------------------------------------
struct Nvml {
  using Dev = void*;
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  int (*by_pci)(const char*, Dev*) = nullptr;
  int (*clock)(Dev, int, unsigned*) = nullptr;
  int (*max_clock)(Dev, int, unsigned*) = nullptr;
  int (*reasons)(Dev, unsigned long long*) = nullptr;  // optional: clocks event (throttle) reasons
  int (*power)(Dev, unsigned*) = nullptr;              // optional: milliwatts
  Dev dev = nullptr;
  bool ok = false;

  explicit Nvml(int cuda_dev) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    init = (int (*)())dlsym(lib, "nvmlInit_v2");
    driver_version = (int (*)(char*, unsigned))dlsym(lib, "nvmlSystemGetDriverVersion");
    by_pci = (int (*)(const char*, Dev*))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    clock = (int (*)(Dev, int, unsigned*))dlsym(lib, "nvmlDeviceGetClockInfo");
    max_clock = (int (*)(Dev, int, unsigned*))dlsym(lib, "nvmlDeviceGetMaxClockInfo");
    // "ClocksEvent" is the name since driver 535; older drivers have only "ClocksThrottle" (same bits).
    reasons = (int (*)(Dev, unsigned long long*))dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!reasons) reasons = (int (*)(Dev, unsigned long long*))dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    power = (int (*)(Dev, unsigned*))dlsym(lib, "nvmlDeviceGetPowerUsage");
    if (!init || !driver_version || !by_pci || !clock || !max_clock || init() != 0) return;
    char bus[64];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_dev) != cudaSuccess) return;
    ok = by_pci(bus, &dev) == 0;
  }
  // NVML clock types: 0 graphics, 1 SM, 2 memory.
  long current(int type) {
    unsigned v = 0;
    return ok && clock(dev, type, &v) == 0 ? long(v) : -1;
  }
  long maximum(int type) {
    unsigned v = 0;
    return ok && max_clock(dev, type, &v) == 0 ? long(v) : -1;
  }
  // One reading of the clocks, the power draw and the throttle reasons; what NVML cannot say stays unknown.
  clocks::Sample sample() {
    clocks::Sample s;
    s.sm_mhz = current(1);
    s.mem_mhz = current(2);
    unsigned mw = 0;
    if (ok && power && power(dev, &mw) == 0) s.power_w = mw / 1000.0;
    unsigned long long bits = 0;
    s.reasons_known = ok && reasons && reasons(dev, &bits) == 0;
    s.reasons = s.reasons_known ? bits : 0;
    return s;
  }
  std::string driver() {
    char b[96] = {0};
    return lib && driver_version && driver_version(b, sizeof b) == 0 ? std::string(b) : "unknown";
  }
};

inline std::string version_str(int v) {  // CUDA's 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

inline std::string cudnn_str(size_t v) {  // cuDNN 9: 91400 -> "9.14.0"
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

// The commit this program was built from (see the top of this file): "unknown" without a stamp,
// dirty -1 when unknown.
struct Stamp {
  std::string commit = "unknown";
  int dirty = -1;
};
inline Stamp stamp() {
  Stamp s;
  const std::string commit = repo_stamp_commit ? repo_stamp_commit : "";
  if (commit.empty() || commit == "unknown") return s;
  s.commit = commit;
  if (&repo_stamp_dirty && (repo_stamp_dirty == 0 || repo_stamp_dirty == 1)) s.dirty = repo_stamp_dirty;
  return s;
}
inline void record_commit(json::Value& e) {
  const Stamp s = stamp();
  e["commit"] = s.commit;
  if (s.dirty >= 0)
    e["dirty"] = s.dirty == 1;
  else
    e["dirty"] = "unknown";
}

inline json::Value collect(int dev) {
  cudaDeviceProp p;
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&v, a, dev));
    return v;
  };
  json::Value e = json::Value::object();
  e["gpu"] = p.name;
  e["gpu_slug"] = results::slug(p.name);
  e["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  e["sm_count"] = p.multiProcessorCount;
  e["sm_clock_max_mhz"] = attr(cudaDevAttrClockRate) / 1000;
  e["mem_clock_max_mhz"] = attr(cudaDevAttrMemoryClockRate) / 1000;
  e["mem_bus_bits"] = p.memoryBusWidth;
  e["mem_total_gib"] = gib(p.totalGlobalMem);
  e["l2_bytes"] = p.l2CacheSize;
  Nvml nvml(dev);
  e["sm_clock_now_mhz"] = nvml.current(1);
  e["mem_clock_now_mhz"] = nvml.current(2);
  e["driver"] = nvml.driver();
  int drv = 0, rt = 0;
  CUDA_CHECK(cudaDriverGetVersion(&drv));
  CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  e["cuda_driver_api"] = version_str(drv);
  e["cuda_runtime"] = version_str(rt);
  int ma = 0, mi = 0, pa = 0;
  CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &ma));
  CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &mi));
  CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &pa));
  e["cublas"] = std::to_string(ma) + "." + std::to_string(mi) + "." + std::to_string(pa);
  e["cudnn_loaded"] = cudnn_str(cudnnGetVersion());
  e["cudnn_compiled"] = cudnn_str(CUDNN_VERSION);
  record_commit(e);
  std::time_t t = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  e["date"] = date;
  return e;
}

// One line for the top of every program's output.
inline void print(const json::Value& e) {
  auto s = [&](const char* k) {
    const json::Value* v = e.find(k);
    return v ? v->dump(0).substr(0, v->dump(0).size() - 1) : std::string("?");
  };
  const Stamp st = stamp();
  const std::string code = st.commit.substr(0, 12) + (st.dirty == 1 ? " (dirty)" : "");
  std::printf("GPU %s (cc %s, %s SMs, SM clock max %s MHz) | driver %s | CUDA %s | cuBLAS %s | cuDNN %s | code %s\n",
              e.find("gpu")->str().c_str(), e.find("compute_capability")->str().c_str(), s("sm_count").c_str(),
              s("sm_clock_max_mhz").c_str(), e.find("driver")->str().c_str(), e.find("cuda_runtime")->str().c_str(),
              e.find("cublas")->str().c_str(), e.find("cudnn_loaded")->str().c_str(), code.c_str());
}

// Installs the clock sampler in the Results (where NVML can be opened) and records env.clocks_begin.
// A GPU that is already braking is announced at once: every time it gives will be meaningless.
inline void watch_clocks(results::Results& res, int dev) {
  auto nvml = std::make_shared<Nvml>(dev);
  if (!nvml->ok) return;  // no NVML (CI): no readings, nothing flagged
  res.set_clock_sampler([nvml] { return clocks::to_json(nvml->sample()); });
  res.env["clocks_begin"] = res.sample_clocks();
  const std::string why = res.throttled();
  if (!why.empty() && why != "unknown")
    std::printf("WARNING: %s before any timing: timings will be unreliable\n", why.c_str());
}

// The opening of every lesson program, after its arguments are parsed: the GPU (or a SKIP line
// and exit 77), then the results record: mode, environment (printed), seed. Returns the device.
inline int begin(results::Results& res, const cli::Standard& st) {
  const int dev = require_gpu(res.program());
  res.mode = st.mode();
  res.env = collect(dev);
  res.config["seed"] = st.seed;
  print(res.env);
  watch_clocks(res, dev);
  return dev;
}

}  // namespace env
