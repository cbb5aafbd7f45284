// common/check.cuh: error checks for CUDA, cuBLAS and cuDNN, a launch check, and poisoning.
//
// Every CUDA/cuBLAS/cuDNN call in the lessons goes through one of these macros. On
// failure they print one line naming the call, the file and the line, and exit 1
// (a run-time failure is a failed run). The cuDNN one adds cuDNN's own explanation
// from cudnnGetLastErrorString, which usually says *which* attribute it disliked.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#define CUDA_CHECK(call)                                                                                              \
  do {                                                                                                                \
    cudaError_t err_ = (call);                                                                                        \
    if (err_ != cudaSuccess) {                                                                                        \
      std::fprintf(stderr, "error: %s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_), \
                   cudaGetErrorName(err_));                                                                           \
      std::exit(1);                                                                                                   \
    }                                                                                                                 \
  } while (0)

// After every kernel launch: catches bad launch configurations at once (asynchronous
// faults inside the kernel surface at the next synchronizing call's CUDA_CHECK).
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                                                          \
  do {                                                                                                              \
    cublasStatus_t st_ = (call);                                                                                    \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
      std::fprintf(stderr, "error: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cublasGetStatusString(st_)); \
      std::exit(1);                                                                                                 \
    }                                                                                                               \
  } while (0)

// cudnnGetLastErrorString fills a buffer with the most recent error message on this thread.
inline const char* cudnn_last_error() {
  static thread_local char buf[1024];
  buf[0] = '\0';
  cudnnGetLastErrorString(buf, sizeof buf);
  return buf[0] ? buf : "(no further detail)";
}

#define CUDNN_CHECK(call)                                                                                            \
  do {                                                                                                               \
    cudnnStatus_t st_ = (call);                                                                                      \
    if (st_ != CUDNN_STATUS_SUCCESS) {                                                                               \
      std::fprintf(stderr, "error: %s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call, cudnnGetErrorString(st_), \
                   cudnn_last_error());                                                                              \
      std::exit(1);                                                                                                  \
    }                                                                                                                \
  } while (0)

// Fill a device buffer with 0xFF bytes before a kernel writes it: as float, half and
// bf16 that pattern is NaN, so any element the kernel forgets fails the NaN-safe check.
inline void poison(void* dev_ptr, size_t bytes, cudaStream_t stream = 0) {
  CUDA_CHECK(cudaMemsetAsync(dev_ptr, 0xFF, bytes, stream));
}

// Ceiling division, for grid sizes.
template <class T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Copy n elements of a device array to a new host vector (synchronous).
template <class T>
std::vector<T> to_host(const T* dev, size_t n) {
  std::vector<T> h(n);
  CUDA_CHECK(cudaMemcpy(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// Copy a host vector into device memory that the caller already allocated.
template <class T>
void to_device(T* dev, const std::vector<T>& h) {
  CUDA_CHECK(cudaMemcpy(dev, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// A device allocation that frees itself (move-only). `as<T>()` gives a typed pointer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { alloc(bytes); }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void alloc(size_t bytes) {
    if (p_) CUDA_CHECK(cudaFree(p_));
    p_ = nullptr;
    bytes_ = bytes;
    if (bytes) CUDA_CHECK(cudaMalloc(&p_, bytes));
  }
  template <class T = void>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};
