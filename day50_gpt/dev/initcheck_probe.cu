// day50_gpt/dev/initcheck_probe.cu: does compute-sanitizer's initcheck see cuBLAS's bf16 GEMM writes?
// Why it is here: under initcheck, gpt --verify reported some 500,000 "uninitialized reads", every
// printed one our bias pass (k::bias_gelu_vec) reading a fresh cudaMalloc buffer right after cuBLAS's
// plain matmul had written all of it (the timed choice in nn/linear.cuh, fwd_path), while every check of
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
// That is why fwd_path and dgelu_path write their scratch with cudaMemsetAsync first (all bits set:
// NaN, which also makes the comparison there stricter). Exit 0 after the run, 77 without a GPU, 2 for a
// wrong argument; a failed CUDA or cuBLAS call exits 1 through common/check.cuh.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstdio>

#include "check.cuh"
#include "cli.h"
#include "env.cuh"

__global__ void read_all(const uint4* c, size_t n, unsigned* out) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x ^= c[i].x;
  atomicXor(out, x);
}

int main(int argc, char** argv) {
  cli::Args args(argc, argv, "initcheck_probe",
                 "cuBLAS writes C, our kernel reads it: run under compute-sanitizer --tool initcheck");
  const bool control = args.flag("control", "cudaMemset C before cuBLAS writes it (the control run)");
  args.finish();
  env::require_gpu("initcheck_probe");
  // day50's first MLP matmul at 512 rows: out[N][O] = in[N][I] . W[O][I]^T (m = O, n = N, k = I).
  const int O = 1536, N = 512, I = 384;
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  DeviceBuffer W(sizeof(__nv_bfloat16) * O * I), X(sizeof(__nv_bfloat16) * I * N), sink(4);
  CUDA_CHECK(cudaMemset(W.as(), 0, W.bytes()));
  CUDA_CHECK(cudaMemset(X.as(), 0, X.bytes()));
  CUDA_CHECK(cudaMemset(sink.as(), 0, sink.bytes()));
  {
    DeviceBuffer C(sizeof(__nv_bfloat16) * size_t(O) * N);  // fresh: nothing has written it
    if (control) CUDA_CHECK(cudaMemset(C.as(), 0, C.bytes()));
    const float one = 1.f, zero = 0.f;
    CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &one, W.as(), CUDA_R_16BF, I, X.as(), CUDA_R_16BF,
                              I, &zero, C.as(), CUDA_R_16BF, O, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("--- %s: our kernel reads C (%d x %d bf16)\n",
                control ? "control, cudaMemset first, then cuBLAS" : "fresh buffer, written only by cuBLAS", O, N);
    std::fflush(stdout);
    read_all<<<132, 256>>>(C.as<const uint4>(), C.bytes() / 16, sink.as<unsigned>());
    LAUNCH_CHECK();
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  CUBLAS_CHECK(cublasDestroy(h));
  std::printf("done (%s)\n", control ? "control" : "fresh");
  return 0;
}
