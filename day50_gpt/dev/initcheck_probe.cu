// day50_gpt/dev/initcheck_probe.cu: does compute-sanitizer's initcheck see cuBLAS's bf16 GEMM writes?
// Why it is here: under initcheck, gpt --verify reported some 500,000 "uninitialized reads", every
// printed one our bias pass (k::bias_gelu_vec) reading a fresh cudaMalloc buffer right after cuBLAS's
// plain matmul had written all of it (the timed choice in nn/linear.cuh, fwd_apart), while every check of
// the program passed. This program does the same thing with nothing else around it: cublasGemmEx
// (beta = 0) writes C, then a kernel of ours reads all of C: a fresh buffer, or with --control one that
// cudaMemset wrote first.
//
//   make && compute-sanitizer --tool initcheck ./build/initcheck_probe              (fresh)
//           compute-sanitizer --tool initcheck ./build/initcheck_probe --control    (memset first)
//
// If initcheck reports errors for the fresh buffer and none for the control, the tool does not see those
// library kernels' stores: a buffer that only cuBLAS wrote looks uninitialized to it. results/<gpu>/
// day50_gpt-initcheck_probe.json holds both counts as measured (scripts in the notes' sanitizer section).
// That is why fwd_apart and dgelu_apart write their scratch with cudaMemsetAsync first (all bits set:
// NaN, which also makes the comparison there stricter). Exit 0 after the run, 77 without a GPU, 2 for a
// wrong argument.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstdio>
#include <string>

__global__ void read_all(const uint4* c, size_t n, unsigned* out) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x ^= c[i].x;
  atomicXor(out, x);
}

#define OK(call)                                                                          \
  do {                                                                                    \
    if (!(call)) {                                                                        \
      std::fprintf(stderr, "initcheck_probe: %s failed (%s:%d)\n", #call, __FILE__, __LINE__); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(int argc, char** argv) {
  const bool control = argc == 2 && std::string(argv[1]) == "--control";
  if (argc > 2 || (argc == 2 && !control)) {
    std::fprintf(stderr, "usage: %s [--control]   (run it under compute-sanitizer --tool initcheck)\n", argv[0]);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no GPU\n");
    return 77;
  }
  // day50's first MLP matmul at 512 rows: out[N][O] = in[N][I] . W[O][I]^T (m = O, n = N, k = I).
  const int O = 1536, N = 512, I = 384;
  cublasHandle_t h;
  OK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  __nv_bfloat16 *W, *X;
  unsigned* sink;
  OK(cudaMalloc(&W, sizeof(__nv_bfloat16) * O * I) == cudaSuccess);
  OK(cudaMalloc(&X, sizeof(__nv_bfloat16) * I * N) == cudaSuccess);
  OK(cudaMalloc(&sink, 4) == cudaSuccess);
  OK(cudaMemset(W, 0, sizeof(__nv_bfloat16) * O * I) == cudaSuccess);
  OK(cudaMemset(X, 0, sizeof(__nv_bfloat16) * I * N) == cudaSuccess);
  OK(cudaMemset(sink, 0, 4) == cudaSuccess);
  {
    __nv_bfloat16* C;
    const size_t bytes = sizeof(__nv_bfloat16) * size_t(O) * N;
    OK(cudaMalloc(&C, bytes) == cudaSuccess);
    if (control) OK(cudaMemset(C, 0, bytes) == cudaSuccess);
    const float one = 1.f, zero = 0.f;
    OK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &one, W, CUDA_R_16BF, I, X, CUDA_R_16BF, I, &zero, C,
                    CUDA_R_16BF, O, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    OK(cudaDeviceSynchronize() == cudaSuccess);
    std::printf("--- %s: our kernel reads C (%d x %d bf16)\n",
                control ? "control, cudaMemset first, then cuBLAS" : "fresh buffer, written only by cuBLAS", O, N);
    std::fflush(stdout);
    read_all<<<132, 256>>>(reinterpret_cast<const uint4*>(C), bytes / 16, sink);
    OK(cudaGetLastError() == cudaSuccess);
    OK(cudaDeviceSynchronize() == cudaSuccess);
    OK(cudaFree(C) == cudaSuccess);
  }
  cublasDestroy(h);
  std::printf("done (%s)\n", control ? "control" : "fresh");
  return 0;
}
