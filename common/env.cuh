// common/env.cuh: find the GPU (or skip), refuse what will not fit, record the environment.
//
//   int dev = env::require_gpu(prog);          // no usable GPU -> "SKIP: ..." and exit 77
//   env::require_memory(prog, bytes, "A, B, C"); // too big -> one line and exit 2
//   results.env = env::collect(dev);            // GPU, clocks, driver, CUDA, cuBLAS, cuDNN, date
//
// The driver's release number and the current clocks come from NVML, which is opened
// with dlopen: linking it would stop the program from even starting on a machine without
// the driver (CI), where it must print a clean SKIP instead.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <ctime>
#include <string>

#include "check.cuh"
#include "cli.h"
#include "json.h"
#include "results.h"

namespace env {

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
    cli::skip(prog,
              std::string("no usable CUDA GPU (") + (e != cudaSuccess ? cudaGetErrorString(e) : "no devices") + ")");
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
  std::printf("GPU %s (cc %s, %s SMs, SM clock max %s MHz) | driver %s | CUDA %s | cuBLAS %s | cuDNN %s\n",
              e.find("gpu")->str().c_str(), e.find("compute_capability")->str().c_str(), s("sm_count").c_str(),
              s("sm_clock_max_mhz").c_str(), e.find("driver")->str().c_str(), e.find("cuda_runtime")->str().c_str(),
              e.find("cublas")->str().c_str(), e.find("cudnn_loaded")->str().c_str());
}

// The opening of every lesson program, after its arguments are parsed: the GPU (or a SKIP line
// and exit 77), then the results record: mode, environment (printed), seed. Returns the device.
inline int begin(results::Results& res, const cli::Standard& st) {
  const int dev = require_gpu(res.program());
  res.mode = st.mode();
  res.env = collect(dev);
  res.config["seed"] = st.seed;
  print(res.env);
  return dev;
}

}  // namespace env
