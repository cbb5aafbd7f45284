// day50_gpt/nn/backend.h: which library runs the model's layers (host-only, for the command line).
//   custom  our kernels, cuBLAS / cuBLASLt matmuls with their epilogues, cuDNN's fused attention
//   cudnn   every layer cuDNN's graph API can express as a cached cuDNN graph (nn/backend_cudnn.cuh);
//           the rest (embedding, loss, dropout, optimizer) stays ours, and is counted
#pragma once
#include <string>

enum class Backend { kCustom, kCudnn };
inline const char* backend_name(Backend b) { return b == Backend::kCudnn ? "cudnn" : "custom"; }
