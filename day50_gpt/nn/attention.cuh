// day50_gpt/nn/attention.cuh: causal multi-head attention three ways (nn/attn_kind.h), forward and
// backward: cuDNN's fused flash-attention graph (nn/sdpa_cudnn.h), cuBLAS batched matmuls around our
// causal softmax, or our naive kernels (nn/kernels/attention.cuh). dev/attention.cu times them alone.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "hopper.cuh"  // make_map_bf16: the flash backward's tensor maps
#include "model.cuh"

// Attention: cuDNN's fused graph where it can run (bf16), else cuBLAS matmuls + our softmax.
template <class T>
void Model<T>::choose_attention(Attn want) {
  const bool bf = std::is_same<T, bf16>::value;
  if (want == Attn::kNaive) {
    impl = Attn::kNaive, attn_note = "naive: hand-written kernels, one warp per query row (asked for)";
  } else if (want == Attn::kMatmul) {
    impl = Attn::kMatmul, attn_note = "matmul: cuBLAS batched GEMMs + hand-written causal softmax (asked for)";
  } else if (!bf) {
    impl = Attn::kMatmul,
    attn_note =
        "matmul: cuBLAS batched GEMMs + hand-written causal softmax (cuDNN's fused attention takes fp16/bf16 only)";
  } else {
    sdpa = std::make_unique<sdpa::Attention>(dnn, sdpa::Shape{B, int64_t(c.heads), T_, int64_t(c.width / c.heads)},
                                             Types<T>::dnn);
    const std::string why = sdpa->build();
    if (why.empty()) {
      impl = Attn::kCudnn;
      // Our flash backward's kernel takes more than the default 48 KB of dynamic shared memory. The
      // attribute belongs to the current device, so each Model sets it on its own: with 2 GPUs each rank
      // builds its Model on its GPU, and a once-per-process setting left GPU 1's launches invalid. (The
      // wgmma kernel's is set by flash90::dqkv, once per device, at its first launch.)
      if constexpr (std::is_same<T, bf16>::value)
        if (ours_attn_bwd())
        {
          CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&k::flash::dqkv_kernel),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, k::flash::kSmemBytes));
          for (const void* f : {reinterpret_cast<const void*>(&k::flash::dq_kernel),
                                reinterpret_cast<const void*>(&k::flash::dkv_kernel)})
            CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            k::flash::kSmemTwoLaunches));
        }
      attn_note = "cuDNN fused flash attention (forward: " + sdpa->fwd_variant() + "; backward: " +
                  (ours_attn_bwd() ? "ours: nn/kernels/flash_bwd.cuh on mma.sync or nn/flash_sm90.cu on wgmma (--flash-mma)" : sdpa->bwd_variant()) + ")";
    } else {
      if (want == Attn::kCudnn) cli::skip(kProg, "cuDNN refused the attention graph: " + why);
      impl = Attn::kMatmul,
      attn_note =
          "matmul: cuBLAS batched GEMMs + hand-written causal softmax (cuDNN refused the fused graph: " + why + ")";
      sdpa.reset();
    }
  }
}

// Per head (b, h): where its Q, K, V rows start inside qkv (row stride 3C), its O inside att (stride
// C), its T x T block of P; and the same for the backward's dO, dS, dQ, dK, dV. Built once: the
// buffers never move.
template <class T>
void Model<T>::build_head_pointers() {
  const size_t C = size_t(c.width), D = C / size_t(c.heads), BH = size_t(B) * c.heads, E = sizeof(T),
               TT = size_t(T_) * T_;
  auto at = [&](const auto& buf, size_t elems) { return static_cast<void*>(buf.template as<char>() + elems * E); };
  for (auto& L : layer) {
    std::vector<void*> p(5 * BH);
    for (size_t b = 0; b < size_t(B); ++b)
      for (size_t h = 0; h < size_t(c.heads); ++h) {
        const size_t i = b * c.heads + h, row0 = b * T_;
        p[0 * BH + i] = at(L.qkv, row0 * 3 * C + h * D);
        p[1 * BH + i] = at(L.qkv, row0 * 3 * C + C + h * D);
        p[2 * BH + i] = at(L.qkv, row0 * 3 * C + 2 * C + h * D);
        p[3 * BH + i] = at(L.att, row0 * C + h * D);
        p[4 * BH + i] = at(L.P, i * TT);
      }
    L.ptrs.alloc(p.size() * sizeof(void*));
    to_device(L.ptrs.as<void*>(), p);
  }
  std::vector<void*> d(5 * BH);
  for (size_t b = 0; b < size_t(B); ++b)
    for (size_t h = 0; h < size_t(c.heads); ++h) {
      const size_t i = b * c.heads + h, row0 = b * T_;
      d[0 * BH + i] = at(datt, row0 * C + h * D);
      d[1 * BH + i] = at(dS, i * TT);
      d[2 * BH + i] = at(dqkv, row0 * 3 * C + h * D);
      d[3 * BH + i] = at(dqkv, row0 * 3 * C + C + h * D);
      d[4 * BH + i] = at(dqkv, row0 * 3 * C + 2 * C + h * D);
    }
  dptrs.alloc(d.size() * sizeof(void*));
  to_device(dptrs.as<void*>(), d);
}

template <class T>
void Model<T>::attention_fwd(Layer& L) {
  const int rows = B * c.heads * T_, C = c.width, D = C / c.heads, BH = B * c.heads;
  if (impl == Attn::kCudnn) {
    sdpa->forward(L.qkv.as(), L.att.as(), L.stats.as<float>(), ws.as(), s);
  } else if (impl == Attn::kMatmul) {
    void* const* p = L.ptrs.as<void*>();  // Q, K, V, O, P: BH pointers each
    // Column-major view: S^T (T x T) = K^T . Q  (see the notes for the transposes)
    gemm_batched<T>(blas, CUBLAS_OP_T, CUBLAS_OP_N, T_, T_, D, p + 1 * BH, 3 * C, p + 0 * BH, 3 * C, p + 4 * BH, T_,
                    BH);
    hw("causal_softmax_fwd");
    k::causal_softmax_fwd<T><<<(rows + 7) / 8, 256, 0, s>>>(L.P.as<T>(), rows, T_, 1.f / std::sqrt(float(D)));
    LAUNCH_CHECK();
    gemm_batched<T>(blas, CUBLAS_OP_N, CUBLAS_OP_N, D, T_, T_, p + 2 * BH, 3 * C, p + 4 * BH, T_, p + 3 * BH, C,
                    BH);  // O = P.V
  } else {
    k::attention_fwd<T>
        <<<(rows + 7) / 8, 256, 0, s>>>(L.qkv.as<T>(), L.P.as<float>(), L.att.as<T>(), B, T_, C, c.heads);
    LAUNCH_CHECK();
  }
  mark(kAttention);
}
// bias_grad (the qkv bias gradient, zeroed with the gradients) gets dqkv's column sums added where our
// flash backward runs: its kernel writes a partial per block of 64 rows as they store dqkv, and
// ln_partials_finish adds them up (inside backward(), queued: nn/finish_queue.cuh). Returns whether it did
// (the weight gradient's matmul then goes without
// cuBLASLt's bias-gradient epilogue).
template <class T>
bool Model<T>::attention_bwd(Layer& L, float* bias_grad) {
  const int rows = B * c.heads * T_, C = c.width, D = C / c.heads, BH = B * c.heads;
  bool bias_done = false;
  if (ours_attn_bwd()) {
    if constexpr (std::is_same<T, bf16>::value) {
      // dQ and dK/dV in one launch, each pass computing its own Dsum (nn/kernels/flash_bwd.cuh), or the
      // first version's two (flash_two_launches: dQ first, it writes Dsum), on mma.sync; or the one launch on
      // wgmma (nn/flash_sm90.cu, flash_on_wgmma). The mma.sync kernels' shared-memory sizes were allowed when
      // this Model chose its attention (choose_attention); the wgmma kernel's is allowed by flash90::dqkv.
      const float scale = 1.f / std::sqrt(float(D));
      const int chunks = N / k::flash::kBlk;
      float* part = !bias_grad         ? nullptr  // [B * T / 64][3C]
                    : finishing_later ? finish_slice(size_t(chunks) * 3 * C)
                                      : partial.as<float>();
      const unsigned nb = unsigned(T_ / k::flash::kBlk);
      // The tensor maps the kernels' copy engine reads the tiles through (64 x 64 boxes, 128-byte swizzle):
      // encoded on the host for this layer's buffers (a graph's capture keeps them with the launch).
      k::flash::Maps maps;
      maps.qkv = hopper::make_map_bf16(L.qkv.as<bf16>(), N, 3 * C, k::flash::kBlk);
      maps.o = hopper::make_map_bf16(L.att.as<bf16>(), N, C, k::flash::kBlk);
      maps.dout = hopper::make_map_bf16(datt.as<bf16>(), N, C, k::flash::kBlk);
      if (flash_on_wgmma()) {
        flash90::dqkv(pdl, B, c.heads, T_, C, maps, L.stats.as<float>(), dqkv.as<bf16>(), part, scale, s);
        LAUNCH_CHECK();
      } else if (!flash_two_launches) {
        pdl::launch(pdl, k::flash::dqkv_kernel, dim3(2 * nb, unsigned(BH)), dim3(k::flash::kThreads),
                    size_t(k::flash::kSmemBytes), s, maps, L.qkv.as<bf16>(), L.att.as<bf16>(), datt.as<bf16>(),
                    L.stats.as<float>(), dqkv.as<bf16>(), part, T_, C, c.heads, scale);
        LAUNCH_CHECK();
      } else {
        k::flash::dq_kernel<<<dim3(nb, unsigned(BH)), k::flash::kThreads, k::flash::kSmemTwoLaunches, s>>>(
            maps, L.qkv.as<bf16>(), L.att.as<bf16>(), datt.as<bf16>(), L.stats.as<float>(), dsum.as<float>(),
            dqkv.as<bf16>(), part, T_, C, c.heads, scale);
        LAUNCH_CHECK();
        k::flash::dkv_kernel<<<dim3(nb, unsigned(BH)), k::flash::kThreads, k::flash::kSmemTwoLaunches, s>>>(
            maps, L.qkv.as<bf16>(), datt.as<bf16>(), L.stats.as<float>(), dsum.as<float>(), dqkv.as<bf16>(), part, T_, C,
            c.heads, scale);
        LAUNCH_CHECK();
      }
      if (part && finishing_later) {
        finishes.push(part, chunks, 3 * C, 1, bias_grad);
      } else if (part) {
        hw("ln_partials_finish");
        k::ln_partials_finish<<<(3 * C + 31) / 32, dim3(32, k::kLnFinishRows), 0, s>>>(part, chunks, 3 * C, 1,
                                                                                       bias_grad, nullptr, nullptr);
        LAUNCH_CHECK();
      }
      bias_done = part != nullptr;
    }
  } else if (impl == Attn::kCudnn) {
    sdpa->backward(L.qkv.as(), L.att.as(), datt.as(), L.stats.as<float>(), dqkv.as(), dsum.as<float>(),
                   dq_acc.as<float>(), ws.as(), s);
  } else if (impl == Attn::kMatmul) {
    void* const* p = L.ptrs.as<void*>();  // Q, K, V, O, P
    void* const* d = dptrs.as<void*>();   // dO, dS, dQ, dK, dV
    gemm_batched<T>(blas, CUBLAS_OP_T, CUBLAS_OP_N, T_, T_, D, p + 2 * BH, 3 * C, d + 0 * BH, C, d + 1 * BH, T_,
                    BH);  // dP = dO.V^T
    hw("causal_softmax_bwd");
    k::causal_softmax_bwd<T>
        <<<(rows + 7) / 8, 256, 0, s>>>(L.P.as<T>(), dS.as<T>(), rows, T_, 1.f / std::sqrt(float(D)));  // dS, in place
    LAUNCH_CHECK();
    gemm_batched<T>(blas, CUBLAS_OP_N, CUBLAS_OP_N, D, T_, T_, p + 1 * BH, 3 * C, d + 1 * BH, T_, d + 2 * BH, 3 * C,
                    BH);  // dQ = dS.K
    gemm_batched<T>(blas, CUBLAS_OP_N, CUBLAS_OP_T, D, T_, T_, p + 0 * BH, 3 * C, d + 1 * BH, T_, d + 3 * BH, 3 * C,
                    BH);  // dK = dS^T.Q
    gemm_batched<T>(blas, CUBLAS_OP_N, CUBLAS_OP_T, D, T_, T_, d + 0 * BH, C, p + 4 * BH, T_, d + 4 * BH, 3 * C,
                    BH);  // dV = P^T.dO
  } else {
    k::attention_bwd_q<T><<<(rows + 7) / 8, 256, 0, s>>>(L.qkv.as<T>(), L.P.as<float>(), datt.as<T>(), dS.as<float>(),
                                                         dqkv.as<T>(), B, T_, C, c.heads);
    LAUNCH_CHECK();
    k::attention_bwd_kv<T><<<(rows + 7) / 8, 256, 0, s>>>(L.qkv.as<T>(), L.P.as<float>(), datt.as<T>(), dS.as<float>(),
                                                          dqkv.as<T>(), B, T_, C, c.heads);
    LAUNCH_CHECK();
  }
  mark(kAttention);
  return bias_done;
}
