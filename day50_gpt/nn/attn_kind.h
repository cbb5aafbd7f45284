// day50_gpt/nn/attn_kind.h: the three ways this GPT computes attention (host-only, so that the
// command line can name them without CUDA headers). All three are checked against the CPU:
//   cudnn   cuDNN's fused flash-attention graph (bf16): scores never leave the chip (nn/sdpa_cudnn.h)
//   matmul  cuBLAS batched GEMMs for Q.K^T and P.V (and the backward's four products) with our causal
//           softmax kernels between them: the T x T scores and probabilities go through memory
//   naive   one warp per query row, every step ours: the teaching version (slow)
#pragma once

// The program's name in its error and SKIP lines.
inline const char* kProg = "gpt";

enum class Attn { kAuto, kCudnn, kMatmul, kNaive };
inline const char* attn_name(Attn a) {
  return a == Attn::kCudnn ? "cuDNN" : a == Attn::kMatmul ? "matmul" : a == Attn::kNaive ? "naive" : "auto";
}
