// day50_gpt/gpt.cu: a GPT-2-style model that trains on any text file and then writes more of it, in
// CUDA C++ with cuBLAS and cuDNN and no framework.
//
// What it teaches: a transformer as a list of kernels. Token + position embedding, pre-LayerNorm
// blocks (causal multi-head attention, a GELU MLP four times wide), residual connections, a final
// LayerNorm and an output head tied to the token embedding; the backward of every one of them; AdamW
// with weight decay, gradient clipping and a warm-up + cosine schedule; bf16 mixed precision; and
// generation with a KV cache. Matmuls go to cuBLAS, attention to cuDNN's fused flash-attention graph
// (sdpa_cudnn.h) or to the hand-written kernels of kernels.cuh, and everything else is hand-written.
// The CPU reference gpt_ref.h (double precision, finite-difference-checked) is the oracle.
//
// Build: make                         Run: see the notes (README.md) for the full tour.
//   ./build/gpt                                   train on data/corpus.txt (this repository's notes)
//   ./build/gpt --data my.txt --steps 5000 --save my.ckpt
//   ./build/gpt --sample my.ckpt --prompt "Once" --tokens 400
//   ./build/gpt --verify                          GPU vs CPU, attention vs CPU, loss falls, resume == uninterrupted
//   ./build/gpt --bench --json results/{gpu}/day50_gpt.json
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU / missing cuDNN feature).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "check.cuh"
#include "checkpoint.h"
#include "cublaslt.h"
#include "cli.h"
#include "env.cuh"
#include "gpt_ref.h"
#include "kernels.cuh"
#include "npy.h"
#include "results.h"
#include "sdpa_cudnn.h"
#include "timing.cuh"
#include "train_ref.h"
#include "verify.h"
// Data parallelism over several GPUs (--gpus, --world) needs NCCL; the toolchain defines
// GPT_HAVE_NCCL where it found it. Without it a null dp::Replica* means "one GPU", as always.
#ifdef GPT_HAVE_NCCL
#include "data_parallel.cuh"
#else
namespace dp {
class Replica;
}
#endif

static const char* kProg = "gpt";
using bf16 = __nv_bfloat16;

// Three ways to compute attention, all checked against the CPU:
//   cudnn   cuDNN's fused flash-attention graph (bf16): scores never leave the chip
//   matmul  cuBLAS batched GEMMs for Q.K^T and P.V (and the backward's four products) with our causal
//           softmax kernels between them: the T x T scores and probabilities go through memory
//   naive   one warp per query row, every step ours: the teaching version (slow)
enum class Attn { kAuto, kCudnn, kMatmul, kNaive };
static const char* attn_name(Attn a) {
  return a == Attn::kCudnn ? "cuDNN" : a == Attn::kMatmul ? "matmul" : a == Attn::kNaive ? "naive" : "auto";
}

template <class T>
struct Types;
template <>
struct Types<float> {
  static constexpr cudaDataType_t blas = CUDA_R_32F;
  static constexpr cudnnDataType_t dnn = CUDNN_DATA_FLOAT;
  static const char* name() { return "fp32"; }
};
template <>
struct Types<bf16> {
  static constexpr cudaDataType_t blas = CUDA_R_16BF;
  static constexpr cudnnDataType_t dnn = CUDNN_DATA_BFLOAT16;
  static const char* name() { return "bf16"; }
};

// ---- Matmuls through cuBLAS ------------------------------------------------------------------------
// Our tensors are row-major; cuBLAS is column-major. A row-major [R][K] matrix is the column-major
// [K][R] one, so out[N][O] = in[N][I] . W[O][I]^T is computed as out^T (O x N) = W^T . in^T with
// W read "transposed" (CUBLAS_OP_T). Inputs in T (fp32 or bf16), accumulation always in fp32
// (CUBLAS_COMPUTE_32F: in fp32 mode no TF32), outputs in TO.
template <class T, class TO>
static void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* A, int lda,
                 const T* B, int ldb, TO* C, int ldc, float beta) {
  const float one = 1.f;
  CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &one, A, Types<T>::blas, lda, B, Types<T>::blas, ldb, &beta, C,
                            Types<TO>::blas, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
// out[N][O] = in[N][I] . W[O][I]^T
template <class T, class TO>
static void matmul_fwd(cublasHandle_t h, const T* in, const T* W, TO* out, int N, int I, int O) {
  gemm<T, TO>(h, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, W, I, in, I, out, O, 0.f);
}
// din[N][I] = dout[N][O] . W[O][I]
template <class T>
static void matmul_bwd_in(cublasHandle_t h, const T* dout, const T* W, T* din, int N, int I, int O) {
  gemm<T, T>(h, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, W, I, dout, O, din, I, 0.f);
}
// dW[O][I] += dout^T . in (fp32 gradients, whatever T is)
template <class T>
static void matmul_bwd_w(cublasHandle_t h, const T* in, const T* dout, float* dW, int N, int I, int O) {
  gemm<T, float>(h, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, in, I, dout, O, dW, I, 1.f);
}

// Batched over the B*H heads, through arrays of pointers (a head's rows are strided inside qkv).
template <class T>
static void gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         void* const* A, int lda, void* const* B, int ldb, void* const* C, int ldc, int batch) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasGemmBatchedEx(h, ta, tb, m, n, k, &one, A, Types<T>::blas, lda, B, Types<T>::blas, ldb, &zero, C,
                                   Types<T>::blas, ldc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

constexpr size_t kLtWorkspace = size_t(32) << 20;  // cuBLASLt's workspace

static int grid_for(size_t n) { return int(std::min<size_t>((n + 255) / 256, 132 * 16)); }
static size_t used_bytes() {
  size_t f = 0, t = 0;
  CUDA_CHECK(cudaMemGetInfo(&f, &t));
  return t - f;
}

// ---- Where the time goes: events between the phases of one step ----------------------------------
enum Phase { kEmbed, kLayerNorm, kMatmul, kAttention, kGelu, kResidual, kLoss, kOptimizer, kPhases };
static const char* kPhaseName[kPhases] = {"embedding", "layernorm",     "matmul (cuBLAS)", "attention",
                                          "gelu",      "bias+residual", "softmax+loss",    "grad norm+AdamW"};
struct Phases {
  bool on = false;
  std::vector<std::pair<int, cudaEvent_t>> marks;
  void start() {
    on = true;
    mark(-1);
  }
  // Everything enqueued since the previous mark is charged to `p`.
  void mark(int p) {
    if (!on) return;
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaEventRecord(e));
    marks.push_back({p, e});
  }
  std::vector<double> finish() {
    std::vector<double> ms(kPhases, 0.0);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 1; i < marks.size(); ++i) {
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, marks[i - 1].second, marks[i].second));
      ms[size_t(marks[i].first)] += t;
    }
    for (auto& m : marks) CUDA_CHECK(cudaEventDestroy(m.second));
    marks.clear();
    on = false;
    return ms;
  }
};

// A second name for (part of) a buffer, with DeviceBuffer's accessors.
struct View {
  void* p = nullptr;
  size_t b = 0;
  template <class U = void>
  U* as() const {
    return static_cast<U*>(p);
  }
  size_t bytes() const { return b; }
};

// What one transformer block keeps from its forward for its backward.
struct Layer {
  DeviceBuffer ln1, ln1_mean, ln1_rstd, qkv, att, x_mid, ln2, ln2_mean, ln2_rstd, fc, gl;
  DeviceBuffer P;      // matmul / naive attention: the probabilities [B][H][T][T]
  DeviceBuffer stats;  // cuDNN attention: the softmax statistics [B][H][T]
  DeviceBuffer ptrs;   // matmul attention: per head, pointers to its Q, K, V, O, P
};

// ---- The model on the GPU ----------------------------------------------------------------------------
// Parameters (fp32 master copy, plus a bf16 copy for the matmuls in bf16 mode), gradients, AdamW
// state, and the activations of one batch that the backward needs.
template <class T>
struct Model {
  gpt::Config c;
  gpt::Layout lay;
  int B, T_, N;
  Attn impl = Attn::kNaive;  // the attention this model runs (never kAuto)
  std::string attn_note;     // which attention, and why
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t blas_lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  // Fusion into the matmuls (cuBLASLt epilogues): bias adds, the GELU and its backward, and the bias
  // gradients ride on the GEMMs instead of taking passes of their own. --fusion off turns it off (the
  // bench measures both); a combination cuBLASLt refuses falls back to the unfused path by itself.
  bool fuse = true;
  std::map<std::string, std::unique_ptr<lt::Matmul>> lt_cache;
  DeviceBuffer lt_ws;
  std::unique_ptr<sdpa::Attention> sdpa;
  DeviceBuffer ws;
  Phases* ph = nullptr;
  // Called by backward() as soon as block l's parameter gradients are enqueued (l = -1: at the end,
  // embeddings included). Data parallelism starts the all-reduce of finished gradients from here,
  // while the backward of the earlier blocks goes on.
  std::function<void(int)> on_block_grads;

  DeviceBuffer params, params_t, grads, m, v, decay;
  DeviceBuffer tok, tgt, loss, logits, dlogits;
  std::vector<DeviceBuffer> xs;  // the residual stream: xs[l] enters block l, xs[L] leaves the last one
  std::vector<Layer> layer;
  DeviceBuffer lnf, lnf_mean, lnf_rstd;
  DeviceBuffer dx, dx_t, dS, dptrs, partial, dsum, dq_acc, norm_partial, sumsq;
  // Scratch that is never live at the same time shares memory: a sublayer's output before the
  // residual add (forward) with the backward's d(attention output) and d(LayerNorm output); dqkv
  // (attention backward) with dfc (MLP backward) and the embedding's partial sums (the very end).
  DeviceBuffer scratch_small, scratch_big;
  View tmp, dln, datt, dqkv, dfc, embed_partial;

  Model(const gpt::Config& cfg, int b, Attn want, bool fusion = true)
      : c(cfg), lay(cfg), B(b), T_(cfg.context), N(b * cfg.context), fuse(fusion) {
    CUBLAS_CHECK(cublasCreate(&blas));
    CUBLAS_CHECK(cublasLtCreate(&blas_lt));
    lt_ws.alloc(kLtWorkspace);
    CUBLAS_CHECK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));  // fp32 stays fp32: no TF32
    CUDNN_CHECK(cudnnCreate(&dnn));
    const size_t C = size_t(c.width), V = size_t(c.vocab), n = lay.total, NN = size_t(N), H = size_t(c.heads),
                 E = sizeof(T);
    // Attention: cuDNN's fused graph where it can run (bf16), else cuBLAS matmuls + our softmax.
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
      sdpa = std::make_unique<sdpa::Attention>(dnn, sdpa::Shape{B, int64_t(H), T_, int64_t(C / H)}, Types<T>::dnn);
      const std::string why = sdpa->build();
      if (why.empty()) {
        impl = Attn::kCudnn;
        attn_note =
            "cuDNN fused flash attention (forward: " + sdpa->fwd_variant() + "; backward: " + sdpa->bwd_variant() + ")";
      } else {
        if (want == Attn::kCudnn) cli::skip(kProg, "cuDNN refused the attention graph: " + why);
        impl = Attn::kMatmul,
        attn_note =
            "matmul: cuBLAS batched GEMMs + hand-written causal softmax (cuDNN refused the fused graph: " + why + ")";
        sdpa.reset();
      }
    }
    params.alloc(n * 4), grads.alloc(n * 4), m.alloc(n * 4), v.alloc(n * 4), decay.alloc(n);
    if (bf) params_t.alloc(n * E);
    const size_t BHTT = size_t(B) * H * T_ * T_,
                 pe = impl == Attn::kMatmul ? E : 4;  // the naive kernels keep P in fp32
    tok.alloc(NN * 4), tgt.alloc(NN * 4), loss.alloc(NN * 4), logits.alloc(NN * V * 4), dlogits.alloc(NN * V * E);
    for (int l = 0; l <= c.layers; ++l) xs.emplace_back(NN * C * 4);
    layer.resize(size_t(c.layers));
    for (auto& L : layer) {
      L.ln1.alloc(NN * C * E), L.ln1_mean.alloc(NN * 4), L.ln1_rstd.alloc(NN * 4), L.qkv.alloc(NN * 3 * C * E),
          L.att.alloc(NN * C * E);
      if (impl == Attn::kCudnn)
        L.stats.alloc(size_t(B) * H * T_ * 4);
      else
        L.P.alloc(BHTT * pe);
      L.x_mid.alloc(NN * C * 4), L.ln2.alloc(NN * C * E), L.ln2_mean.alloc(NN * 4), L.ln2_rstd.alloc(NN * 4);
      L.fc.alloc(NN * 4 * C * E), L.gl.alloc(NN * 4 * C * E);
    }
    lnf.alloc(NN * C * E), lnf_mean.alloc(NN * 4), lnf_rstd.alloc(NN * 4);
    dx.alloc(NN * C * 4);
    const size_t embed_bytes = size_t(k::embed_slices(N)) * V * C * 4;
    scratch_small.alloc(NN * C * E), scratch_big.alloc(std::max(NN * 4 * C * E, embed_bytes));
    tmp = dln = datt = View{scratch_small.as(), scratch_small.bytes()};
    dqkv = dfc = embed_partial = View{scratch_big.as(), scratch_big.bytes()};
    if (bf) dx_t.alloc(NN * C * E);
    if (impl == Attn::kCudnn)
      dsum.alloc(sdpa->dsum_elems() * 4), dq_acc.alloc(sdpa->dq_acc_elems() * 4), ws.alloc(sdpa->workspace());
    else
      dS.alloc(BHTT * pe);
    if (impl == Attn::kMatmul) build_head_pointers();
    partial.alloc(size_t(k::col_chunks(N)) * 4 * C * 4);  // the widest column sum: a bias of 4C
    norm_partial.alloc(k::kNormBlocks * 4), sumsq.alloc(4);
    // Every activation and scratch buffer starts as NaN (0xFF bytes): an element some kernel or
    // library call fails to write poisons the loss and the checks, instead of reading as a stale zero.
    // (It also gives compute-sanitizer's initcheck a defined starting pattern. Without it, initcheck
    // reported reads of bf16 matmul outputs written by cuBLASLt's tensor-core kernels as uninitialized,
    // although the GPU-vs-CPU checks show every one of those values is right: most likely stores it
    // does not track (an inference, not established).)
    for (DeviceBuffer* b : {&tok, &tgt, &loss, &logits, &dlogits, &lnf, &lnf_mean, &lnf_rstd, &dx, &dx_t, &dS, &dsum,
                            &dq_acc, &scratch_small, &scratch_big, &partial, &norm_partial, &sumsq})
      if (b->bytes()) poison(b->as(), b->bytes());
    for (auto& x : xs) poison(x.as(), x.bytes());
    for (auto& L : layer)
      for (DeviceBuffer* b : {&L.ln1, &L.ln1_mean, &L.ln1_rstd, &L.qkv, &L.att, &L.x_mid, &L.ln2, &L.ln2_mean,
                              &L.ln2_rstd, &L.fc, &L.gl, &L.P, &L.stats})
        if (b->bytes()) poison(b->as(), b->bytes());
    to_device(decay.as<uint8_t>(), train::decay_mask(c));
    CUDA_CHECK(cudaMemset(m.as(), 0, m.bytes()));
    CUDA_CHECK(cudaMemset(v.as(), 0, v.bytes()));
  }
  ~Model() {
    sdpa.reset();
    lt_cache.clear();
    cublasLtDestroy(blas_lt);
    cudnnDestroy(dnn);
    cublasDestroy(blas);
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  float* P(size_t off) const { return params.as<float>() + off; }
  float* G(size_t off) const { return grads.as<float>() + off; }
  // The weights the matmuls read: the master copy in fp32 mode, the bf16 copy in bf16 mode.
  const T* W(size_t off) const {
    if constexpr (std::is_same<T, float>::value)
      return params.as<float>() + off;
    else
      return params_t.as<T>() + off;
  }
  T* dxT() const {
    if constexpr (std::is_same<T, float>::value)
      return dx.as<float>();
    else
      return dx_t.as<T>();
  }
  // Per head (b, h): where its Q, K, V rows start inside qkv (row stride 3C), its O inside att (stride
  // C), its T x T block of P; and the same for the backward's dO, dS, dQ, dK, dV. Built once: the
  // buffers never move.
  void build_head_pointers() {
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
  // After the master weights change outside AdamW (initialization, a checkpoint): refresh the bf16 copy.
  void sync_weights() {
    if constexpr (!std::is_same<T, float>::value) {
      k::convert<T><<<grid_for(lay.total), 256>>>(params.as<float>(), params_t.as<T>(), lay.total);
      LAUNCH_CHECK();
    }
  }
  void mark(Phase p) {
    if (ph) ph->mark(p);
  }

  // The cuBLASLt matmul for one (shape, epilogue), built on first use; null where cuBLASLt refuses it.
  lt::Matmul* lt_get(const lt::Spec& sp, cudaDataType_t out_type) {
    if (!fuse) return nullptr;
    const std::string key = std::to_string(sp.ta) + std::to_string(sp.tb) + "," + std::to_string(sp.m) + "," +
                            std::to_string(sp.n) + "," + std::to_string(sp.k) + "," + std::to_string(int(sp.epilogue)) +
                            "," + std::to_string(int(out_type));
    auto it = lt_cache.find(key);
    if (it == lt_cache.end()) {
      lt::Spec s2 = sp;
      s2.ab = Types<T>::blas, s2.cd = out_type;
      it = lt_cache.emplace(key, std::make_unique<lt::Matmul>(blas_lt, s2, kLtWorkspace)).first;
      if (!it->second->ok())
        std::printf("note: %s (epilogue %d, %dx%dx%d); using the unfused path there\n", it->second->why().c_str(),
                    int(sp.epilogue), sp.m, sp.n, sp.k);
    }
    return it->second->ok() ? it->second.get() : nullptr;
  }

  // out[N][O] = in[N][I] . W^T + b; with gelu_out: out keeps the pre-activation and gelu_out = gelu(out).
  void linear(const T* in, size_t w, size_t b, T* out, int I, int O, T* gelu_out = nullptr) {
    lt::Spec sp;
    sp.ta = CUBLAS_OP_T, sp.tb = CUBLAS_OP_N, sp.m = O, sp.n = N, sp.k = I, sp.lda = I, sp.ldb = I, sp.ldd = O;
    sp.epilogue = gelu_out ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS, sp.aux_ld = gelu_out ? O : 0;
    if (lt::Matmul* mm = lt_get(sp, Types<T>::blas)) {
      // The bias in the output's type: the fp32 master in fp32 mode, its bf16 copy in bf16 mode.
      mm->run(W(w), in, gelu_out ? gelu_out : out, 0.f, W(b), gelu_out ? out : nullptr, lt_ws.as());
      mark(kMatmul);
      return;
    }
    matmul_fwd<T, T>(blas, in, W(w), out, N, I, O);
    mark(kMatmul);
    k::add_bias<T><<<grid_for(size_t(N) * O), 256>>>(out, P(b), N, O);
    LAUNCH_CHECK();
    mark(kResidual);
    if (gelu_out) {
      k::gelu_fwd<T><<<grid_for(size_t(N) * O), 256>>>(out, gelu_out, size_t(N) * O);
      LAUNCH_CHECK();
      mark(kGelu);
    }
  }
  // din = dout . W (with gelu_pre: times gelu'(gelu_pre), the backward of the GELU that fed this
  // layer), dW += dout^T . in, db = column sums of dout.
  void linear_back(const T* in, size_t w, size_t b, const T* dout, T* din, int I, int O, const T* gelu_pre = nullptr) {
    bool din_done = false, dw_done = false;
    if (gelu_pre) {
      lt::Spec sp;
      sp.ta = CUBLAS_OP_N, sp.tb = CUBLAS_OP_N, sp.m = I, sp.n = N, sp.k = O, sp.lda = I, sp.ldb = O, sp.ldd = I;
      sp.epilogue = CUBLASLT_EPILOGUE_DGELU, sp.aux_ld = I;
      if (lt::Matmul* mm = lt_get(sp, Types<T>::blas)) {
        mm->run(W(w), dout, din, 0.f, nullptr, const_cast<T*>(gelu_pre), lt_ws.as());
        din_done = true;
      }
    }
    if (!din_done) matmul_bwd_in<T>(blas, dout, W(w), din, N, I, O);
    {
      lt::Spec sp;
      sp.ta = CUBLAS_OP_N, sp.tb = CUBLAS_OP_T, sp.m = I, sp.n = O, sp.k = N, sp.lda = I, sp.ldb = O, sp.ldd = I;
      sp.epilogue = CUBLASLT_EPILOGUE_BGRADB;
      if (lt::Matmul* mm = lt_get(sp, CUDA_R_32F)) {
        // dW accumulates (beta 1) into the zeroed gradients; the bias gradient is written (each bias
        // belongs to exactly one layer, so nothing else adds to it).
        mm->run(in, dout, G(w), 1.f, G(b), nullptr, lt_ws.as());
        dw_done = true;
      }
    }
    if (!dw_done) matmul_bwd_w<T>(blas, in, dout, G(w), N, I, O);
    mark(kMatmul);
    if (gelu_pre && !din_done) {
      k::gelu_bwd<T><<<grid_for(size_t(N) * I), 256>>>(gelu_pre, din, din, size_t(N) * I);
      LAUNCH_CHECK();
      mark(kGelu);
    }
    if (!dw_done) {
      const int chunks = k::col_chunks(N);
      k::bias_partials<T><<<dim3((O + 31) / 32, chunks), dim3(32, 8)>>>(dout, partial.as<float>(), N, O);
      LAUNCH_CHECK();
      k::colsum_finish<<<grid_for(size_t(O)), 256>>>(partial.as<float>(), chunks, 1, O, G(b), nullptr);
      LAUNCH_CHECK();
      mark(kResidual);
    }
  }
  int rows_grid() const { return (N + 7) / 8; }  // 8 warps (rows) per 256-thread block
  void ln_fwd(const float* x, size_t w, size_t b, T* y, float* mean, float* rstd) {
    k::layernorm_fwd<T><<<rows_grid(), 256>>>(x, P(w), P(b), y, mean, rstd, N, c.width);
    LAUNCH_CHECK();
    mark(kLayerNorm);
  }
  // dx (+)= LayerNorm backward; dx_t gets the result in T; the gains' and biases' gradients by column sums.
  void ln_back(const float* x, size_t w, size_t b, const float* mean, const float* rstd, const T* dy, bool accumulate) {
    const int C = c.width, chunks = k::col_chunks(N);
    k::layernorm_bwd<T><<<rows_grid(), 256>>>(x, P(w), mean, rstd, dy, dx.as<float>(), dxT(), N, C, accumulate);
    LAUNCH_CHECK();
    k::ln_param_partials<T><<<dim3((C + 31) / 32, chunks), dim3(32, 8)>>>(x, mean, rstd, dy, partial.as<float>(), N, C);
    LAUNCH_CHECK();
    k::colsum_finish<<<grid_for(size_t(2) * C), 256>>>(partial.as<float>(), chunks, 2, C, G(w), G(b));
    LAUNCH_CHECK();
    mark(kLayerNorm);
  }
  void attention_fwd(Layer& L) {
    const int rows = B * c.heads * T_, C = c.width, D = C / c.heads, BH = B * c.heads;
    if (impl == Attn::kCudnn) {
      sdpa->forward(L.qkv.as(), L.att.as(), L.stats.as<float>(), ws.as());
    } else if (impl == Attn::kMatmul) {
      void* const* p = L.ptrs.as<void*>();  // Q, K, V, O, P: BH pointers each
      // Column-major view: S^T (T x T) = K^T . Q  (see the notes for the transposes)
      gemm_batched<T>(blas, CUBLAS_OP_T, CUBLAS_OP_N, T_, T_, D, p + 1 * BH, 3 * C, p + 0 * BH, 3 * C, p + 4 * BH, T_,
                      BH);
      k::causal_softmax_fwd<T><<<(rows + 7) / 8, 256>>>(L.P.as<T>(), rows, T_, 1.f / std::sqrt(float(D)));
      LAUNCH_CHECK();
      gemm_batched<T>(blas, CUBLAS_OP_N, CUBLAS_OP_N, D, T_, T_, p + 2 * BH, 3 * C, p + 4 * BH, T_, p + 3 * BH, C,
                      BH);  // O = P.V
    } else {
      k::attention_fwd<T><<<(rows + 7) / 8, 256>>>(L.qkv.as<T>(), L.P.as<float>(), L.att.as<T>(), B, T_, C, c.heads);
      LAUNCH_CHECK();
    }
    mark(kAttention);
  }
  void attention_bwd(Layer& L) {
    const int rows = B * c.heads * T_, C = c.width, D = C / c.heads, BH = B * c.heads;
    if (impl == Attn::kCudnn) {
      sdpa->backward(L.qkv.as(), L.att.as(), datt.as(), L.stats.as<float>(), dqkv.as(), dsum.as<float>(),
                     dq_acc.as<float>(), ws.as());
    } else if (impl == Attn::kMatmul) {
      void* const* p = L.ptrs.as<void*>();  // Q, K, V, O, P
      void* const* d = dptrs.as<void*>();   // dO, dS, dQ, dK, dV
      gemm_batched<T>(blas, CUBLAS_OP_T, CUBLAS_OP_N, T_, T_, D, p + 2 * BH, 3 * C, d + 0 * BH, C, d + 1 * BH, T_,
                      BH);  // dP = dO.V^T
      k::causal_softmax_bwd<T>
          <<<(rows + 7) / 8, 256>>>(L.P.as<T>(), dS.as<T>(), rows, T_, 1.f / std::sqrt(float(D)));  // dS, in place
      LAUNCH_CHECK();
      gemm_batched<T>(blas, CUBLAS_OP_N, CUBLAS_OP_N, D, T_, T_, p + 1 * BH, 3 * C, d + 1 * BH, T_, d + 2 * BH, 3 * C,
                      BH);  // dQ = dS.K
      gemm_batched<T>(blas, CUBLAS_OP_N, CUBLAS_OP_T, D, T_, T_, p + 0 * BH, 3 * C, d + 1 * BH, T_, d + 3 * BH, 3 * C,
                      BH);  // dK = dS^T.Q
      gemm_batched<T>(blas, CUBLAS_OP_N, CUBLAS_OP_T, D, T_, T_, d + 0 * BH, C, p + 4 * BH, T_, d + 4 * BH, 3 * C,
                      BH);  // dV = P^T.dO
    } else {
      k::attention_bwd_q<T><<<(rows + 7) / 8, 256>>>(L.qkv.as<T>(), L.P.as<float>(), datt.as<T>(), dS.as<float>(),
                                                     dqkv.as<T>(), B, T_, C, c.heads);
      LAUNCH_CHECK();
      k::attention_bwd_kv<T><<<(rows + 7) / 8, 256>>>(L.qkv.as<T>(), L.P.as<float>(), datt.as<T>(), dS.as<float>(),
                                                      dqkv.as<T>(), B, T_, C, c.heads);
      LAUNCH_CHECK();
    }
    mark(kAttention);
  }

  // Forward of the batch in tok/tgt: per-row losses in `loss`, dlogits (in T) ready for the backward.
  void forward() {
    const int C = c.width;
    const size_t NC = size_t(N) * C;
    k::embed_fwd<<<grid_for(NC), 256>>>(tok.as<int>(), P(lay.wte), P(lay.wpe), xs[0].as<float>(), N, T_, C);
    LAUNCH_CHECK();
    mark(kEmbed);
    for (int l = 0; l < c.layers; ++l) {
      auto& L = layer[size_t(l)];
      const auto& Wl = lay.layer[size_t(l)];
      ln_fwd(xs[size_t(l)].as<float>(), Wl.ln1_w, Wl.ln1_b, L.ln1.as<T>(), L.ln1_mean.as<float>(),
             L.ln1_rstd.as<float>());
      linear(L.ln1.as<T>(), Wl.qkv_w, Wl.qkv_b, L.qkv.as<T>(), C, 3 * C);
      attention_fwd(L);
      linear(L.att.as<T>(), Wl.proj_w, Wl.proj_b, tmp.as<T>(), C, C);
      k::residual_add<T><<<grid_for(NC), 256>>>(L.x_mid.as<float>(), xs[size_t(l)].as<float>(), tmp.as<T>(), NC);
      LAUNCH_CHECK();
      mark(kResidual);
      ln_fwd(L.x_mid.as<float>(), Wl.ln2_w, Wl.ln2_b, L.ln2.as<T>(), L.ln2_mean.as<float>(), L.ln2_rstd.as<float>());
      linear(L.ln2.as<T>(), Wl.fc_w, Wl.fc_b, L.fc.as<T>(), C, 4 * C, L.gl.as<T>());  // fc keeps the pre-activation
      linear(L.gl.as<T>(), Wl.fc2_w, Wl.fc2_b, tmp.as<T>(), 4 * C, C);
      k::residual_add<T><<<grid_for(NC), 256>>>(xs[size_t(l) + 1].as<float>(), L.x_mid.as<float>(), tmp.as<T>(), NC);
      LAUNCH_CHECK();
      mark(kResidual);
    }
    ln_fwd(xs.back().as<float>(), lay.lnf_w, lay.lnf_b, lnf.as<T>(), lnf_mean.as<float>(), lnf_rstd.as<float>());
    matmul_fwd<T, float>(blas, lnf.as<T>(), W(lay.wte), logits.as<float>(), N, C,
                         c.vocab);  // the tied head, fp32 logits
    mark(kMatmul);
    k::softmax_xent<T>
        <<<rows_grid(), 256>>>(logits.as<float>(), tgt.as<int>(), loss.as<float>(), dlogits.as<T>(), N, c.vocab);
    LAUNCH_CHECK();
    mark(kLoss);
  }

  // Backward from dlogits into `grads` (zeroed here).
  void backward() {
    const int C = c.width;
    CUDA_CHECK(cudaMemsetAsync(grads.as(), 0, grads.bytes()));
    matmul_bwd_in<T>(blas, dlogits.as<T>(), W(lay.wte), dln.as<T>(), N, C, c.vocab);
    matmul_bwd_w<T>(blas, lnf.as<T>(), dlogits.as<T>(), G(lay.wte), N, C, c.vocab);
    mark(kMatmul);
    ln_back(xs.back().as<float>(), lay.lnf_w, lay.lnf_b, lnf_mean.as<float>(), lnf_rstd.as<float>(), dln.as<T>(),
            false);
    for (int l = c.layers - 1; l >= 0; --l) {
      auto& L = layer[size_t(l)];
      const auto& Wl = lay.layer[size_t(l)];
      // MLP: xs[l+1] = x_mid + fc2(gelu(fc(ln2(x_mid)))); dx holds d/dxs[l+1]
      linear_back(L.gl.as<T>(), Wl.fc2_w, Wl.fc2_b, dxT(), dfc.as<T>(), 4 * C, C,
                  L.fc.as<T>());  // dfc = d(gl) * gelu'(fc)
      linear_back(L.ln2.as<T>(), Wl.fc_w, Wl.fc_b, dfc.as<T>(), dln.as<T>(), C, 4 * C);
      ln_back(L.x_mid.as<float>(), Wl.ln2_w, Wl.ln2_b, L.ln2_mean.as<float>(), L.ln2_rstd.as<float>(), dln.as<T>(),
              true);
      // Attention: x_mid = xs[l] + proj(attention(qkv(ln1(xs[l])))); dx now holds d/dx_mid
      linear_back(L.att.as<T>(), Wl.proj_w, Wl.proj_b, dxT(), datt.as<T>(), C, C);
      attention_bwd(L);
      linear_back(L.ln1.as<T>(), Wl.qkv_w, Wl.qkv_b, dqkv.as<T>(), dln.as<T>(), C, 3 * C);
      ln_back(xs[size_t(l)].as<float>(), Wl.ln1_w, Wl.ln1_b, L.ln1_mean.as<float>(), L.ln1_rstd.as<float>(),
              dln.as<T>(), true);
      if (on_block_grads) on_block_grads(l);
    }
    k::embed_bwd_pos<<<grid_for(size_t(T_) * C), 256>>>(dx.as<float>(), G(lay.wpe), B, T_, C);
    LAUNCH_CHECK();
    const int slices = k::embed_slices(N);
    k::embed_bwd_tok<<<dim3(c.vocab, slices), 256>>>(tok.as<int>(), dx.as<float>(), embed_partial.as<float>(), N, C,
                                                     c.vocab);
    LAUNCH_CHECK();
    k::colsum_finish<<<grid_for(size_t(c.vocab) * C), 256>>>(embed_partial.as<float>(), slices, 1, c.vocab * C,
                                                             G(lay.wte), nullptr);
    LAUNCH_CHECK();
    mark(kEmbed);
    if (on_block_grads) on_block_grads(-1);
  }

  // The gradient norm and the AdamW update, all on the GPU; norm_out receives the norm.
  void optimizer_step(const train::AdamW& opt, double lr, int64_t t, double clip, float* norm_out) {
    k::sum_squares_partial<<<k::kNormBlocks, 256>>>(grads.as<float>(), lay.total, norm_partial.as<float>());
    LAUNCH_CHECK();
    k::block_sum<<<1, 256>>>(norm_partial.as<float>(), k::kNormBlocks, sumsq.as<float>(), false);
    LAUNCH_CHECK();
    T* pt = nullptr;
    if constexpr (!std::is_same<T, float>::value) pt = params_t.as<T>();
    k::adamw_clipped<T><<<grid_for(lay.total), 256>>>(
        params.as<float>(), pt, grads.as<float>(), m.as<float>(), v.as<float>(), decay.as<unsigned char>(), lay.total,
        float(lr), float(opt.beta1), float(opt.beta2), float(opt.eps), float(opt.weight_decay),
        float(1 - std::pow(opt.beta1, double(t))), float(1 - std::pow(opt.beta2, double(t))), sumsq.as<float>(),
        float(clip), norm_out);
    LAUNCH_CHECK();
    mark(kOptimizer);
  }
};

// ---- Training --------------------------------------------------------------------------------------
struct TrainOptions {
  int batch = 64, steps = 400, until = 0, warmup = 100, val_every = 100, val_batches = 8, log_every = 50;
  double lr = 1e-3, lr_min_frac = 0.1, clip = 1.0, weight_decay = 0.1;
  bool fusion = true;                      // cuBLASLt epilogues
  size_t bucket_bytes = size_t(25) << 20;  // data parallel: gradient all-reduce buckets (0: one, after the backward)
};

// One training run's state: the model, the corpus on the GPU, the step and the data position. The
// step enqueues work only (the batch is gathered on the GPU, loss and gradient norm stay there):
// the host reads them back once per logging interval.
template <class T>
struct Trainer {
  gpt::Config cfg;
  TrainOptions o;
  const train::Corpus& data;
  Model<T> m;
  train::AdamW opt;
  int64_t step = 0;
  uint64_t pos = 0, rng_state = 0;
  DeviceBuffer corpus, step_loss, step_norm;
  std::vector<float> losses, norms;  // per step, filled by read_back()
  int pending = 0;                   // steps whose loss is still only on the GPU
  // --dump: the next step's batch, mean loss and raw gradients (before clipping), for the PyTorch oracle.
  bool capture = false;
  std::vector<float> cap_grads;
  std::vector<int> cap_tok, cap_tgt;
  double cap_loss = NAN;

  // Data parallelism (dp non-null): this replica is dp->rank of dp->world and takes batch / world of
  // each global batch's sequences. The global batch, the data order and the schedule are those of one
  // GPU with the same --batch, so the learning rate means the same thing whatever the GPU count.
  dp::Replica* dp = nullptr;
  int world = 1, rank = 0;
  DeviceBuffer checksum;  // replicas_identical()'s

  Trainer(const gpt::Config& c, const TrainOptions& opts, const train::Corpus& d, Attn attn, uint64_t seed,
          dp::Replica* replica = nullptr)
      : cfg(c),
        o(opts),
        data(d),
        m(c, opts.batch / replica_count(replica), attn, opts.fusion),
        rng_state(seed),
        dp(replica) {
    opt.lr = o.lr, opt.weight_decay = o.weight_decay;
    corpus.alloc(data.train.size() * sizeof(int));
    to_device(corpus.as<int>(), data.train);
    step_loss.alloc(size_t(o.log_every) * 4), step_norm.alloc(size_t(o.log_every) * 4);
    verify::Rng rng(seed);
    to_device(m.params.template as<float>(),
              gpt::init_params(cfg, rng));  // the same seed on every replica: the same weights
    rng_state = rng.next();
    m.sync_weights();
#ifdef GPT_HAVE_NCCL
    if (dp) {
      world = dp->world, rank = dp->rank;
      dp->plan(cfg, o.bucket_bytes, m.grads.template as<float>());
      m.on_block_grads = [this](int l) { dp->block_done(l); };
    }
#endif
  }
#ifdef GPT_HAVE_NCCL
  // Whether every replica holds the same weights, bit for bit: a checksum (the sum of squares, reduced
  // in a fixed order) compared across the replicas. Collective: every replica calls it at the same step.
  bool replicas_identical() {
    if (!checksum.bytes()) checksum.alloc(sizeof(float));
    k::sum_squares_partial<<<k::kNormBlocks, 256>>>(m.params.template as<float>(), m.lay.total,
                                                    m.norm_partial.template as<float>());
    LAUNCH_CHECK();
    k::block_sum<<<1, 256>>>(m.norm_partial.template as<float>(), k::kNormBlocks, checksum.as<float>(), false);
    LAUNCH_CHECK();
    return dp->same_everywhere(checksum.as<float>()).first;
  }
#endif
  static int replica_count(dp::Replica* r) {
#ifdef GPT_HAVE_NCCL
    if (r) return r->world;
#endif
    (void)r;  // without NCCL nothing can make a Replica: one GPU
    return 1;
  }
  void step_once() {
    const int B = m.B, Tq = cfg.context;  // this replica's share of the global batch: sequences rank*B ... rank*B + B-1
    k::gather_batch<<<grid_for(size_t(B) * Tq), 256>>>(corpus.as<int>(), data.train.size(),
                                                       pos + uint64_t(rank) * B * Tq, B, Tq, m.tok.template as<int>(),
                                                       m.tgt.template as<int>());
    LAUNCH_CHECK();
    pos = (pos + uint64_t(o.batch) * Tq) % data.train.size();
    m.forward();
    k::block_sum<<<1, 256>>>(m.loss.template as<float>(), m.N, step_loss.as<float>() + pending, true);
    LAUNCH_CHECK();
    m.backward();  // with dp, the buckets' all-reduces start from inside it
#ifdef GPT_HAVE_NCCL
    if (dp)
      dp->finish(step_loss.as<float>() + pending);  // the rest, then the compute stream waits for the mean gradient
#endif
    if (capture) {
      capture = false;
      cap_grads = to_host(m.grads.template as<float>(), m.lay.total);
      cap_tok = to_host(m.tok.template as<int>(), size_t(m.N)),
      cap_tgt = to_host(m.tgt.template as<int>(), size_t(m.N));
      const std::vector<float> l = to_host(m.loss.template as<float>(), size_t(m.N));
      cap_loss = 0;
      for (float x : l) cap_loss += x;
      cap_loss /= double(l.size());
    }
    const double lr = train::lr_at(step, o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac);
    m.optimizer_step(opt, lr, step + 1, o.clip, step_norm.as<float>() + pending);
    ++step, ++pending;
    if (pending == o.log_every) read_back();
  }
  // Bring the pending steps' losses and norms to the host (one synchronization).
  void read_back() {
    if (!pending) return;
    const std::vector<float> ls = to_host(step_loss.as<float>(), size_t(pending)),
                             ns = to_host(step_norm.as<float>(), size_t(pending));
    losses.insert(losses.end(), ls.begin(), ls.end());
    norms.insert(norms.end(), ns.begin(), ns.end());
    pending = 0;
  }
  double lr_now() const {
    return train::lr_at(std::max<int64_t>(0, step - 1), o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac);
  }
  // Mean loss over the first `batches` batches of the validation text (forward only).
  double val_loss(int batches) {
    uint64_t vpos = 0;
    double s = 0;
    std::vector<int> tok, tgt;
    DeviceBuffer mean(4);
    for (int i = 0; i < batches; ++i) {
      // the global batch at vpos, of which this replica scores its slice
      train::batch(data.val, vpos + uint64_t(rank) * m.B * cfg.context, m.B, cfg.context, tok, tgt);
      vpos = (vpos + uint64_t(o.batch) * cfg.context) % data.val.size();
      to_device(m.tok.template as<int>(), tok), to_device(m.tgt.template as<int>(), tgt);
      m.forward();
      k::block_sum<<<1, 256>>>(m.loss.template as<float>(), m.N, mean.as<float>(), true);
      LAUNCH_CHECK();
      s += double(to_host(mean.as<float>(), 1)[0]);
    }
#ifdef GPT_HAVE_NCCL
    if (dp) return dp->mean(s / batches);  // equal slices: the mean of the replicas' means is the global mean
#endif
    return s / batches;
  }
  ckpt::Checkpoint checkpoint() {
    read_back();
    ckpt::Checkpoint k;
    k.config = cfg, k.step = step, k.data_pos = pos, k.rng_state = rng_state;
    k.params = to_host(m.params.template as<float>(), m.lay.total),
    k.m = to_host(m.m.template as<float>(), m.lay.total), k.v = to_host(m.v.template as<float>(), m.lay.total);
    return k;
  }
  void restore(const ckpt::Checkpoint& k) {
    to_device(m.params.template as<float>(), k.params), to_device(m.m.template as<float>(), k.m),
        to_device(m.v.template as<float>(), k.v);
    step = k.step, pos = k.data_pos % data.train.size(), rng_state = k.rng_state;
    m.sync_weights();
  }
};

// The files of a training run (empty: not used).
struct RunFiles {
  std::string data_name, save, resume, log, dump;
};

// A training run on one GPU, or one replica's part of a data-parallel run (dp non-null). Every
// replica runs this same loop in lockstep (the all-reduces inside the step keep them so); rank 0
// alone prints, writes the log and the checkpoint, and reports to `res` (null on the other ranks of
// a one-process run, whose results would only repeat rank 0's).
template <class T>
static int train_run(results::Results* res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
                     const RunFiles& f, Attn attn, uint64_t seed, dp::Replica* dp = nullptr) {
  Trainer<T> tr(cfg, o, data, attn, seed, dp);
  const bool talk = tr.rank == 0;
  if (talk)
    std::printf("data: %s, %zu training bytes, %zu validation bytes\n", f.data_name.c_str(), data.train.size(),
                data.val.size());
  if (!f.resume.empty()) {
    // Every replica loads the same checkpoint: the weights are identical again, and the data position
    // is the global batch's, so a checkpoint moves freely between GPU counts.
    ckpt::Checkpoint from;
    try {
      from = ckpt::load(f.resume, &cfg);
    } catch (const std::exception& e) { cli::usage_error(kProg, e.what()); }
    const int64_t stop = o.until > 0 ? std::min<int64_t>(o.until, o.steps) : o.steps;
    if (from.step >= stop)
      cli::usage_error(kProg, f.resume + " is at step " + std::to_string(from.step) + ": nothing to do before step " +
                                  std::to_string(stop) + " (raise --steps or --until)");
    tr.restore(from);
  }
  if (talk) {
    std::printf("model: %d layers, %d heads, width %d, context %d: %zu parameters; batch %d", cfg.layers, cfg.heads,
                cfg.width, cfg.context, tr.m.lay.total, o.batch);
    if (tr.world > 1) std::printf(" (%d per GPU on %d GPUs)", tr.m.B, tr.world);
    std::printf("; %s\nattention: %s\n", Types<T>::name(), tr.m.attn_note.c_str());
    if (!f.resume.empty()) std::printf("resumed from %s at step %lld\n", f.resume.c_str(), (long long)tr.step);
  }
  if (!f.dump.empty()) {
    // The initial weights as a checkpoint, then the first step's batch, loss and gradients.
    try {
      std::filesystem::create_directories(f.dump);
      ckpt::save(f.dump + "/init.ckpt", tr.checkpoint());
    } catch (const std::exception& e) { cli::usage_error(kProg, std::string("--dump: ") + e.what()); }
    tr.capture = true;
  }
  FILE* log = nullptr;
  if (talk && !f.log.empty() && !(log = std::fopen(f.log.c_str(), tr.step ? "a" : "w")))
    cli::usage_error(kProg, "--log: cannot write " + f.log);
  const int64_t last = o.until > 0 ? std::min<int64_t>(o.until, o.steps)
                                   : o.steps;  // --until stops early; the schedule still spans --steps
  const int64_t first = tr.step;
  size_t logged = 0;
  double val = NAN;
  int comparisons = 0, differ = 0;  // data parallel: the replicas' weight checksums
  const auto t0 = std::chrono::steady_clock::now();
  while (tr.step < last) {
    tr.step_once();
    if (!f.dump.empty() && !tr.cap_grads.empty()) {
      const size_t Bn = size_t(o.batch), Tn = size_t(cfg.context);
      npy::save(f.dump + "/grads0.npy", tr.cap_grads.data(), {tr.cap_grads.size()});
      npy::save(f.dump + "/tokens0.npy", tr.cap_tok.data(), {Bn, Tn});
      npy::save(f.dump + "/targets0.npy", tr.cap_tgt.data(), {Bn, Tn});
      npy::save(f.dump + "/loss0.npy", &tr.cap_loss, {1});
      tr.cap_grads.clear();
      std::printf("dumped the initial weights and step 0's batch, loss and gradients to %s/\n", f.dump.c_str());
    }
    const bool log_now = tr.step % o.log_every == 0 || tr.step == last,
               val_now = tr.step % o.val_every == 0 || tr.step == last;
    if (!log_now && !val_now) continue;
    tr.read_back();
    for (; logged < tr.losses.size(); ++logged) {
      const int64_t s = first + int64_t(logged);
      if (!std::isfinite(tr.losses[logged])) {  // the loss is the replicas' mean: every replica stops here
        std::fprintf(stderr, "error: the loss became %g at step %lld (try a lower --lr)\n", tr.losses[logged],
                     (long long)s);
        return cli::kFail;
      }
      if (log) std::fprintf(log, "%lld %.6f\n", (long long)s, tr.losses[logged]);
    }
    if (val_now) {
      val = tr.val_loss(o.val_batches);
      if (log) std::fprintf(log, "%lld val %.6f\n", (long long)tr.step - 1, val);
    }
    std::string replicas;
#ifdef GPT_HAVE_NCCL
    if (dp) {
      // The replicas must hold the same weights; any difference would grow, so it is worth the check.
      const bool same = tr.replicas_identical();
      ++comparisons, differ += !same;
      replicas = same ? "  replicas identical" : "  REPLICAS DIFFER";
    }
#endif
    if (!talk) continue;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double done = double(tr.step - first);
    char vs[32] = "   -  ";
    if (std::isfinite(val)) std::snprintf(vs, sizeof vs, "%.4f", val);
    std::printf("step %6lld/%d  loss %.4f  val %s  lr %.2e  |g| %.2f  %.0f tok/s  %.0f s elapsed, ETA %.0f s%s\n",
                (long long)tr.step, o.steps, tr.losses.back(), vs, tr.lr_now(), tr.norms.back(),
                done * o.batch * cfg.context / el, el, el / done * double(last - tr.step), replicas.c_str());
    std::fflush(stdout);
  }
  if (log) std::fclose(log);
  if (talk && !f.save.empty()) {
    try {
      ckpt::save(f.save, tr.checkpoint());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return cli::kFail;
    }
    std::printf("saved %s (step %lld)\n", f.save.c_str(), (long long)tr.step);
  }
  if (!res) return 0;
  // A training run is its own check: the loss must be finite (a non-finite one stopped the run above)
  // and, for a run from scratch, must have fallen from the start.
  if (first > 0 || !talk) {
    verify::Check ch;
    ch.name = talk ? "resumed training: every loss finite" : "rank " + std::to_string(tr.rank) + ": every loss finite";
    ch.n = tr.losses.size();
    ch.passed = !tr.losses.empty();
    for (float l : tr.losses) ch.passed = ch.passed && std::isfinite(l);
    ch.tol = verify::Tol{0, 0, Types<T>::name()};
    res->add(ch);
  } else if (!tr.losses.empty()) {
    const size_t n = tr.losses.size(), k = std::max<size_t>(1, n / 10);
    double tail = 0;
    for (size_t i = n - k; i < n; ++i) tail += tr.losses[i];
    tail /= double(k);
    verify::Check ch;
    ch.name = "training loss fell (mean of the last 10% of steps vs the first)";
    ch.n = 1;
    ch.passed = std::isfinite(tail) && tail < tr.losses[0];
    ch.max_abs_err = tr.losses[0] - tail;
    ch.tol = verify::Tol{0, 0, Types<T>::name()};
    res->add(ch);
  }
  if (dp) {
    verify::Check same;
    same.name = "data parallel over " + std::to_string(tr.world) +
                " GPUs: the replicas' weights stay identical (checksum at every progress line)";
    same.n = size_t(comparisons), same.n_bad = size_t(differ);
    same.passed = comparisons > 0 && differ == 0;
    same.tol = verify::Tol{0, 0, "exact"};
    res->add(same);
  }
  if (talk) {
    res->config["gpus"] = tr.world;
    res->config["final_train_loss"] = tr.losses.empty() ? NAN : double(tr.losses.back());
    res->config["final_val_loss"] = val;
  }
  return 0;
}

// ---- Data parallel over several GPUs (NCCL) ---------------------------------------------------------
#ifdef GPT_HAVE_NCCL
// --gpus N: one process, one thread and one replica per GPU; rank 0 reports.
template <class T>
static int train_threads(results::Results& res, const gpt::Config& cfg, const TrainOptions& o,
                         const train::Corpus& data, const RunFiles& f, Attn attn, uint64_t seed, int n) {
  dp::nvls_off();
  const std::string buckets =
      o.bucket_bytes ? std::to_string(o.bucket_bytes >> 20) + " MiB" : "the whole gradient (no overlap)";
  std::printf("data parallel: %d GPUs, one thread each; NCCL %s, NCCL_NVLS_ENABLE=%s; all-reduce buckets of %s\n", n,
              dp::nccl_version().c_str(), std::getenv("NCCL_NVLS_ENABLE"), buckets.c_str());
  std::vector<int> rc(static_cast<size_t>(n), 0);
  dp::run_threads(n, [&](dp::Replica& r) {
    rc[size_t(r.rank)] = train_run<T>(r.rank == 0 ? &res : nullptr, cfg, o, data, f, attn, seed, &r);
  });
  return *std::max_element(rc.begin(), rc.end());
}

// --world N --rank R --id-file PATH [--device D]: this process is one replica. Every rank reports its
// own checks; rank 0 alone prints progress, writes the log, the checkpoint and the results file.
template <class T>
static int train_process(results::Results& res, const gpt::Config& cfg, const TrainOptions& o,
                         const train::Corpus& data, const RunFiles& f, Attn attn, uint64_t seed, int world, int rank,
                         int device, const std::string& id_file) {
  ncclComm_t comm = nullptr;
  const std::string err = dp::join_by_file(world, rank, device, id_file, 120.0, comm);
  if (!err.empty()) cli::usage_error(kProg, err);
  std::printf("data parallel: rank %d of %d on GPU %d; NCCL %s, NCCL_NVLS_ENABLE=%s\n", rank, world, device,
              dp::nccl_version().c_str(), std::getenv("NCCL_NVLS_ENABLE"));
  dp::Replica r(comm, rank, world);
  return train_run<T>(&res, cfg, o, data, f, attn, seed, &r);
}
#endif

// ---- Generation with a KV cache --------------------------------------------------------------------
// Each new token runs one position through the model: its key and value are appended to the
// layer's cache, and its query attends to the cache. A token costs O(t) attention work and one
// row of every matmul, instead of re-running the whole context. fp32 throughout.
//
// At batch 1 every matmul is a matrix times one vector: memory-bound, a few microseconds each, so a
// token is ~45 tiny kernels (gemv_bias with the bias, the residual add or the GELU folded in). Enqueued
// one by one, the host's launch time would dominate; so the step (embedding -> logits, then position
// + 1) is captured once as a CUDA graph, and a second graph puts the GPU sampling kernel in front of
// it: generating n bytes is n graph launches and one copy back at the end.
struct Generator {
  gpt::Config c;
  gpt::Layout lay;
  cudaStream_t stream;
  cudaGraphExec_t step_graph = nullptr, gen_graph = nullptr;
  DeviceBuffer params, x, ln, qkv, att, gl, logits, mean, rstd, tok, pos, count, draws, out;
  std::vector<DeviceBuffer> kc, vc;
  Generator(const gpt::Config& cfg, const std::vector<float>& p, int max_new) : c(cfg), lay(cfg) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const size_t C = size_t(c.width);
    params.alloc(lay.total * 4);
    to_device(params.as<float>(), p);
    x.alloc(C * 4), ln.alloc(C * 4), qkv.alloc(3 * C * 4), att.alloc(C * 4), gl.alloc(4 * C * 4);
    logits.alloc(size_t(c.vocab) * 4), mean.alloc(4), rstd.alloc(4), tok.alloc(4), pos.alloc(4), count.alloc(4);
    draws.alloc(size_t(std::max(1, max_new)) * 8), out.alloc(size_t(std::max(1, max_new)) * 4);
    for (int l = 0; l < c.layers; ++l)
      kc.emplace_back(size_t(c.context) * C * 4), vc.emplace_back(size_t(c.context) * C * 4);
    CUDA_CHECK(cudaMemset(pos.as(), 0, 4));
    CUDA_CHECK(cudaMemset(count.as(), 0, 4));
    step_graph = capture([&] { enqueue_step(); });
  }
  ~Generator() {
    if (gen_graph) cudaGraphExecDestroy(gen_graph);
    if (step_graph) cudaGraphExecDestroy(step_graph);
    cudaStreamDestroy(stream);
  }
  template <class F>
  cudaGraphExec_t capture(F&& enqueue) {
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CUDA_CHECK(cudaStreamEndCapture(stream, &g));
    cudaGraphExec_t e;
    CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
    CUDA_CHECK(cudaGraphDestroy(g));
    return e;
  }
  float* P(size_t off) const { return params.as<float>() + off; }
  // o (=, +=, gelu of) W . in + b for one position (b = size_t(-1): no bias).
  void linear(const float* in, size_t w, size_t b, float* o, int I, int O, k::GemvEpilogue epi = k::kStore) {
    const float* Wp = P(w);
    const bool vec =
        I % 4 == 0 && reinterpret_cast<uintptr_t>(Wp) % 16 == 0 && reinterpret_cast<uintptr_t>(in) % 16 == 0;
    const float* bp = b == size_t(-1) ? nullptr : P(b);
    if (vec)
      k::gemv_bias<true><<<(O + 7) / 8, 256, 0, stream>>>(Wp, in, bp, o, I, O, epi);
    else
      k::gemv_bias<false><<<(O + 7) / 8, 256, 0, stream>>>(Wp, in, bp, o, I, O, epi);
    LAUNCH_CHECK();
  }
  // The token tok[0] at position pos[0] (the cache holds 0..pos-1) -> logits; then pos + 1.
  void enqueue_step() {
    const int C = c.width;
    k::embed_token<<<grid_for(size_t(C)), 256, 0, stream>>>(tok.as<int>(), pos.as<int>(), P(lay.wte), P(lay.wpe),
                                                            x.as<float>(), C);
    LAUNCH_CHECK();
    for (int l = 0; l < c.layers; ++l) {
      const auto& W = lay.layer[size_t(l)];
      k::layernorm_fwd<float><<<1, 32, 0, stream>>>(x.as<float>(), P(W.ln1_w), P(W.ln1_b), ln.as<float>(),
                                                    mean.as<float>(), rstd.as<float>(), 1, C);
      LAUNCH_CHECK();
      linear(ln.as<float>(), W.qkv_w, W.qkv_b, qkv.as<float>(), C, 3 * C);
      k::attention_decode<<<c.heads, 256, (c.context + 256) * sizeof(float), stream>>>(
          qkv.as<float>(), kc[size_t(l)].as<float>(), vc[size_t(l)].as<float>(), att.as<float>(), pos.as<int>(), C,
          c.heads);
      LAUNCH_CHECK();
      linear(att.as<float>(), W.proj_w, W.proj_b, x.as<float>(), C, C, k::kAdd);  // x += proj(att): the residual
      k::layernorm_fwd<float><<<1, 32, 0, stream>>>(x.as<float>(), P(W.ln2_w), P(W.ln2_b), ln.as<float>(),
                                                    mean.as<float>(), rstd.as<float>(), 1, C);
      LAUNCH_CHECK();
      linear(ln.as<float>(), W.fc_w, W.fc_b, gl.as<float>(), C, 4 * C, k::kGelu);  // gl = gelu(fc(ln))
      linear(gl.as<float>(), W.fc2_w, W.fc2_b, x.as<float>(), 4 * C, C, k::kAdd);  // x += fc2(gl)
    }
    k::layernorm_fwd<float><<<1, 32, 0, stream>>>(x.as<float>(), P(lay.lnf_w), P(lay.lnf_b), ln.as<float>(),
                                                  mean.as<float>(), rstd.as<float>(), 1, C);
    LAUNCH_CHECK();
    linear(ln.as<float>(), lay.wte, size_t(-1), logits.as<float>(), C, c.vocab);
    k::advance_position<<<1, 1, 0, stream>>>(pos.as<int>());
    LAUNCH_CHECK();
  }
  // Feed one known token (the prompt); the logits stay on the GPU.
  void feed(int token) {
    CUDA_CHECK(cudaMemcpyAsync(tok.as(), &token, 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaGraphLaunch(step_graph, stream));
  }
  std::vector<float> logits_now() {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return to_host(logits.as<float>(), size_t(c.vocab));
  }
  // Before generating: the draws (u[i] is draw i) go to the GPU and the sampling + step graph is
  // captured, so that neither is inside the time generate() is measured over.
  double temperature_ = 1.0;
  int top_k_ = 1, n_ = 0;
  void prepare(const std::vector<double>& u, double temperature, int top_k) {
    to_device(draws.as<double>(), u);
    n_ = int(u.size()), temperature_ = temperature, top_k_ = top_k;
    if (gen_graph) CUDA_CHECK(cudaGraphExecDestroy(gen_graph));
    gen_graph = capture([&] { enqueue_sample_and_step(); });
  }
  void enqueue_sample_and_step() {
    k::sample_top_k<<<1, 256, 0, stream>>>(logits.as<float>(), c.vocab, temperature_, top_k_, draws.as<double>(),
                                           count.as<int>(), tok.as<int>(), out.as<int>());
    LAUNCH_CHECK();
    enqueue_step();
  }
  // Sample the prepared number of tokens from the current logits onward, feeding each back in. With
  // use_graph false the same kernels are launched one by one and the host waits for every token (the
  // usual first version): the bench measures what the graph saves.
  std::vector<int> generate(bool use_graph = true) {
    for (int i = 0; i < n_; ++i) {
      if (use_graph) {
        CUDA_CHECK(cudaGraphLaunch(gen_graph, stream));
      } else {
        enqueue_sample_and_step();
        CUDA_CHECK(cudaStreamSynchronize(stream));
      }
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return to_host(out.as<int>(), size_t(n_));
  }
};

struct Sampled {
  std::string text;
  int made = 0;
  double seconds = 0;
};
// Generates up to n bytes after the prompt (the context is the limit: the last position fed must be < T).
static Sampled generate(const gpt::Config& cfg, const std::vector<float>& params, const std::string& prompt, int n,
                        double temperature, int top_k, uint64_t seed, bool use_graph = true) {
  const int room =
      cfg.context - int(prompt.size());  // positions left after the prompt; the last draw needs no step after it
  const int want = std::max(0, std::min(n, room));
  Generator g(cfg, params, want);
  verify::Rng rng(seed);
  std::vector<double> u(static_cast<size_t>(want));
  for (auto& x : u) x = double(rng.next() >> 11) / 9007199254740992.0;
  for (char ch : prompt) g.feed(int(static_cast<unsigned char>(ch)));
  if (want > 0) g.prepare(u, temperature, top_k);
  CUDA_CHECK(cudaStreamSynchronize(g.stream));
  Sampled s;
  s.text = prompt;
  const auto t0 = std::chrono::steady_clock::now();
  // The graph samples and then feeds the sample; the final feed runs at position T - 1 at most.
  const std::vector<int> toks = want > 0 ? g.generate(use_graph) : std::vector<int>();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int t : toks) s.text.push_back(char(t));
  s.made = int(toks.size());
  return s;
}

// ---- Verification ----------------------------------------------------------------------------------
static gpt::Config tiny_config() {
  gpt::Config c;
  c.vocab = 256, c.context = 13, c.layers = 2, c.heads = 4,
  c.width = 64;  // T = 13: not a multiple of any tile; head size 16
  return c;
}

// GPU vs CPU on a tiny configuration: logits, loss and every parameter's gradient.
template <class T>
static void verify_tiny(results::Results& res, uint64_t seed, Attn attn, bool fusion = true) {
  const gpt::Config c = tiny_config();
  const int B = 3, Tq = c.context;
  verify::Rng rng(seed);
  std::vector<float> p = gpt::init_params(c, rng);
  // Weights 5x GPT-2's initialization, so that every gradient is well above rounding, but the
  // LayerNorm gains left at 1: scaling them too makes the attention softmax saturate, and then
  // fp32-sized changes of the weights move some gradients by 1e-3 (measured with the CPU model).
  const gpt::Layout lay(c);
  std::vector<uint8_t> is_gain(lay.total, 0);
  for (const auto& L : lay.layer)
    for (int i = 0; i < c.width; ++i) is_gain[L.ln1_w + size_t(i)] = is_gain[L.ln2_w + size_t(i)] = 1;
  for (int i = 0; i < c.width; ++i) is_gain[lay.lnf_w + size_t(i)] = 1;
  for (size_t i = 0; i < p.size(); ++i)
    if (!is_gain[i]) p[i] = p[i] * 5.f + (p[i] == 0.f ? 0.02f * rng.uniform() : 0.f);  // biases non-zero too
  std::vector<int> tok(size_t(B) * Tq), tgt(size_t(B) * Tq);
  for (auto& t : tok) t = int(rng.next() % 256);
  for (auto& t : tgt) t = int(rng.next() % 256);
  gpt::Activations a;
  const double loss_ref = gpt::forward(c, p, tok, tgt, B, Tq, a);
  const std::vector<double> g_ref = gpt::backward(c, p, tok, tgt, B, Tq, a);
  Model<T> m(c, B, attn, fusion);
  const std::string tag =
      std::string("tiny GPT ") + Types<T>::name() + " " + attn_name(m.impl) + "-attn" + (fusion ? "" : " unfused");
  std::printf("%s: attention = %s\n", tag.c_str(), m.attn_note.c_str());
  to_device(m.params.template as<float>(), p);
  m.sync_weights();
  to_device(m.tok.template as<int>(), tok);
  to_device(m.tgt.template as<int>(), tgt);
  poison(m.logits.as(), m.logits.bytes());
  poison(m.loss.as(), m.loss.bytes());
  m.forward();
  poison(m.grads.as(), m.grads.bytes());  // backward must zero it itself
  m.backward();
  CUDA_CHECK(cudaDeviceSynchronize());
  const bool bf = std::is_same<T, bf16>::value;
  double zmax = 0, gmax = 0;
  for (double z : a.logits) zmax = std::max(zmax, std::fabs(z));
  for (double x : g_ref) gmax = std::max(gmax, std::fabs(x));
  // Tolerances by precision. fp32: rounding only. bf16: activations and matmul weights carry 8
  // significant bits (relative 2^-9 per rounding), through two blocks and the head.
  const verify::Tol tl = bf ? verify::Tol{0.015 * zmax, 0.02, "bf16"} : verify::Tol{1e-5 * zmax, 1e-4, "fp32"};
  const verify::Tol tloss = bf ? verify::Tol{0.01, 0.01, "bf16"} : verify::kFp32;
  const verify::Tol tg = bf ? verify::Tol{0.01 * gmax, 0.05, "bf16"} : verify::Tol{1e-4 * gmax, 1e-3, "fp32"};
  const std::vector<float> logits = to_host(m.logits.template as<float>(), a.logits.size());
  res.add(verify::compare(tag + " logits vs CPU", logits.data(), a.logits.data(), logits.size(), tl));
  const std::vector<float> losses = to_host(m.loss.template as<float>(), size_t(B) * Tq);
  double loss = 0;
  for (float l : losses) loss += l;
  loss /= double(losses.size());
  res.add(verify::compare(tag + " mean loss vs CPU", &loss, &loss_ref, 1, tloss));
  const std::vector<float> g = to_host(m.grads.template as<float>(), g_ref.size());
  res.add(verify::compare(tag + " every gradient vs CPU", g.data(), g_ref.data(), g.size(), tg));
}

// Generation on the GPU (KV cache, CUDA graphs, sampling kernel) against the CPU's decode_step and
// sample_top_k: the logits after each prompt byte, every sampled byte (same draws), and the logits
// after the last one.
static void verify_generate(results::Results& res, uint64_t seed, gpt::Config c) {
  const std::string tag = "generation (head size " + std::to_string(c.width / c.heads) + ")";
  verify::Rng rng(seed);
  std::vector<float> p = gpt::init_params(c, rng);
  for (auto& w : p) w *= 3.f;  // spread the probabilities, so that sampling has real choices
  const std::vector<int> prompt = {int(rng.next() % 256), int(rng.next() % 256), int(rng.next() % 256)};
  const int n = c.context - int(prompt.size());
  const double temperature = 0.9;
  const int top_k = 5;
  std::vector<double> u(static_cast<size_t>(n));
  for (auto& x : u) x = double(rng.next() >> 11) / 9007199254740992.0;
  gpt::KVCache cache(c);
  Generator g(c, p, n);
  std::vector<double> got, want;
  int pos = 0;
  std::vector<double> cpu;
  for (int t : prompt) {
    g.feed(t);
    const std::vector<float> l = g.logits_now();
    cpu = gpt::decode_step(c, p, cache, t, pos++);
    got.insert(got.end(), l.begin(), l.end()), want.insert(want.end(), cpu.begin(), cpu.end());
  }
  res.add(verify::compare(tag + ": logits after each prompt byte vs CPU", got.data(), want.data(), got.size(),
                          verify::Tol{1e-5, 1e-4, "fp32"}));
  g.prepare(u, temperature, top_k);
  const std::vector<int> toks = g.generate();
  int same = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<float> lf(cpu.begin(), cpu.end());
    same += gpt::sample_top_k(lf, temperature, top_k, u[size_t(i)]) == toks[size_t(i)];
    cpu = gpt::decode_step(c, p, cache, toks[size_t(i)], pos++);  // follow the GPU's bytes
  }
  verify::Check ch;
  ch.name = tag + ": GPU-sampled bytes == CPU sampling (same draws, top-k 5)";
  ch.n = size_t(n);
  ch.n_bad = size_t(n - same);
  ch.passed = same == n;
  ch.tol = verify::Tol{0, 0, "exact"};
  res.add(ch);
  const std::vector<float> last = g.logits_now();
  res.add(verify::compare(tag + ": logits after the last sampled byte vs CPU", last.data(), cpu.data(), last.size(),
                          verify::Tol{1e-5, 1e-4, "fp32"}));
}

// Attention alone at the default model's shape (head size 64, T = 256): the GPU's forward output and
// dq, dk, dv against the CPU in double, on the first heads.
template <class T>
static void verify_attention(results::Results& res, uint64_t seed, Attn attn) {
  gpt::Config c;  // default width, heads and context
  const int B = 2, Tq = c.context, C = c.width, H = c.heads;
  Model<T> m(c, B, attn);
  const std::string tag =
      std::string("attention ") + Types<T>::name() + " " + attn_name(m.impl) + " B=2 H=6 T=256 D=64";
  verify::Rng rng(seed ^ 0xA77E);
  const size_t N = size_t(B) * Tq;
  std::vector<float> qkv(N * 3 * C), dout(N * C);
  for (auto& x : qkv) x = rng.uniform(-2.f, 2.f);
  for (auto& x : dout) x = rng.uniform(-1.f, 1.f);
  std::vector<T> qkv_t(qkv.size()), dout_t(dout.size());
  for (size_t i = 0; i < qkv.size(); ++i)
    qkv_t[i] = T(qkv[i]), qkv[i] = float(qkv_t[i]);  // the CPU sees exactly what the GPU sees
  for (size_t i = 0; i < dout.size(); ++i) dout_t[i] = T(dout[i]), dout[i] = float(dout_t[i]);
  auto& L = m.layer[0];
  to_device(L.qkv.template as<T>(), qkv_t);
  to_device(m.datt.template as<T>(), dout_t);
  poison(L.att.as(), L.att.bytes());
  poison(m.dqkv.as(), m.dqkv.bytes());
  m.attention_fwd(L);
  m.attention_bwd(L);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<T> out_t = to_host(L.att.template as<T>(), N * C),
                       dqkv_t = to_host(m.dqkv.template as<T>(), N * 3 * C);
  // CPU reference for heads (b=0, h=0) and (b=1, h=H-1).
  std::vector<double> q64(qkv.begin(), qkv.end()), d64(dout.begin(), dout.end()), out_ref(N * C, 0.0),
      dqkv_ref(N * 3 * C, 0.0), Pm(size_t(Tq) * Tq);
  std::vector<double> got_o, ref_o, got_d, ref_d;
  const int hs = C / H;
  for (auto [b, h] : {std::pair<int, int>{0, 0}, {1, H - 1}}) {
    gpt::attention_head_fwd(q64.data(), Tq, size_t(C), size_t(H), b, size_t(h), Pm.data(), out_ref.data());
    gpt::attention_head_bwd(q64.data(), Pm.data(), d64.data(), Tq, size_t(C), size_t(H), b, size_t(h), dqkv_ref.data());
    for (int t = 0; t < Tq; ++t)
      for (int i = 0; i < hs; ++i) {
        const size_t o = (size_t(b) * Tq + t) * C + size_t(h) * hs + i;
        got_o.push_back(double(float(out_t[o]))), ref_o.push_back(out_ref[o]);
        for (int part = 0; part < 3; ++part) {
          const size_t d = (size_t(b) * Tq + t) * 3 * C + size_t(part) * C + size_t(h) * hs + i;
          got_d.push_back(double(float(dqkv_t[d]))), ref_d.push_back(dqkv_ref[d]);
        }
      }
  }
  double dmax = 0;
  for (double x : ref_d) dmax = std::max(dmax, std::fabs(x));
  const bool bf = std::is_same<T, bf16>::value;
  res.add(verify::compare(tag + " output vs CPU", got_o.data(), ref_o.data(), got_o.size(),
                          bf ? verify::Tol{1e-2, 2e-2, "bf16"} : verify::Tol{1e-5, 1e-4, "fp32"}));
  res.add(verify::compare(tag + " dq,dk,dv vs CPU", got_d.data(), ref_d.data(), got_d.size(),
                          bf ? verify::Tol{5e-3 * dmax, 3e-2, "bf16"} : verify::Tol{1e-5 * dmax, 1e-4, "fp32"}));
}

// A small model trained on the corpus: the loss must fall; then save at mid-run, load into a fresh
// trainer, and continue: the resumed losses must equal the uninterrupted run's (bit for bit on the
// deterministic fp32 path; to rounding where cuDNN's attention backward accumulates with atomics).
template <class T>
static void verify_training(results::Results& res, const train::Corpus& data, uint64_t seed, Attn attn, bool small) {
  gpt::Config c;
  c.layers = 2, c.heads = 4, c.width = 128, c.context = 64;
  TrainOptions o;
  o.batch = 16, o.steps = small ? 20 : 200, o.warmup = 10, o.lr = 3e-3, o.log_every = 10;
  std::vector<float> full;
  std::string tag;
  bool deterministic = false;
  {
    Trainer<T> a(c, o, data, attn, seed);
    tag = std::string("training ") + Types<T>::name() + " " + attn_name(a.m.impl) + "-attn";
    deterministic = a.m.impl != Attn::kCudnn;
    while (a.step < o.steps) a.step_once();
    a.read_back();
    full = a.losses;
  }
  const size_t n = full.size(), k = n / 10;
  double tail = 0;
  for (size_t i = n - k; i < n; ++i) tail += full[i];
  tail /= double(k);
  verify::Check fell;
  // ln(256) = 5.55 at the start; a model that only learned the byte frequencies sits near 3.4 on
  // this text. Below 65% of the start (3.6) in 200 steps, it has begun to use the context.
  fell.name = tag + ": loss falls (last-10% mean < 65% of the first, " + std::to_string(o.steps) + " steps)";
  fell.n = 1;
  fell.passed = std::isfinite(tail) && tail < 0.65 * full[0];
  fell.max_abs_err = full[0] - tail;
  fell.tol = verify::Tol{0, 0.65, Types<T>::name()};
  fell.note = "first " + std::to_string(full[0]) + ", last-10% mean " + std::to_string(tail);
  if (!small) res.add(fell);  // --small (for compute-sanitizer) runs too few steps to judge
  // Interrupted at the half, resumed from the checkpoint file.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("gpt_verify_" + std::to_string(seed) + ".ckpt")).string();
  std::vector<float> resumed;
  {
    Trainer<T> b(c, o, data, attn, seed);
    while (b.step < o.steps / 2) b.step_once();
    ckpt::save(path, b.checkpoint());
    resumed = b.losses;  // the first half: also a second uninterrupted run (determinism)
  }
  {
    Trainer<T> r(c, o, data, attn, seed + 99);  // other init: everything must come from the file
    r.restore(ckpt::load(path, &c));
    while (r.step < o.steps) r.step_once();
    r.read_back();
    resumed.insert(resumed.end(), r.losses.begin(), r.losses.end());
  }
  std::remove(path.c_str());
  const verify::Tol exact{0, 0, "bitwise"}, close{0, 1e-3, "bf16 atomics"};
  std::vector<double> a(full.begin(), full.end()), b(resumed.begin(), resumed.end());
  res.add(verify::compare(tag + ": resumed run's losses == uninterrupted run's", b.data(), a.data(),
                          std::min(a.size(), b.size()), deterministic ? exact : close));
}

// ---- Benchmark -------------------------------------------------------------------------------------
struct BenchOptions {
  int steps = 1000, timed = 20;
};

// The times of `reps` training steps, from events on the compute stream between them, sorted. With
// data parallelism every step ends with the all-reduce, so rank 0's step is every GPU's step.
template <class T>
static std::vector<double> step_times(Trainer<T>& tr, int reps) {
  std::vector<cudaEvent_t> ev(size_t(reps) + 1);
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  CUDA_CHECK(cudaEventRecord(ev[0]));
  for (int i = 0; i < reps; ++i) {
    tr.step_once();
    CUDA_CHECK(cudaEventRecord(ev[size_t(i) + 1]));
  }
  CUDA_CHECK(cudaEventSynchronize(ev[size_t(reps)]));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, ev[size_t(i)], ev[size_t(i) + 1]));
    ms.push_back(t);
  }
  for (auto& e : ev) CUDA_CHECK(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  return ms;
}
static double median_of_sorted(const std::vector<double>& v) {
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

template <class T>
static void bench_train(results::Results& res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
                        Attn attn, uint64_t seed) {
  const size_t base = used_bytes();
  Trainer<T> tr(cfg, o, data, attn, seed);
  const std::string name = std::string("train step ") + Types<T>::name() + (o.fusion ? "" : " unfused");
  std::printf("\n%s: attention = %s\n", name.c_str(), tr.m.attn_note.c_str());
  for (int i = 0; i < 3; ++i) tr.step_once();  // warm-up (cuBLAS heuristics, first launches)
  CUDA_CHECK(cudaDeviceSynchronize());
  const size_t peak = used_bytes() - base;
  // Where the time goes: one step with events between phases.
  Phases ph;
  tr.m.ph = &ph;
  ph.start();
  tr.step_once();
  const std::vector<double> phase_ms = ph.finish();
  tr.m.ph = nullptr;
  // Step time: events around each step (the training data differs every step: nothing is cached).
  const int reps = 20;
  const std::vector<double> ms = step_times(tr, reps);
  tr.read_back();
  for (float l : tr.losses)
    if (!std::isfinite(l)) {
      verify::Check ch;
      ch.name = name + ": losses finite while timing";
      ch.n = 1;
      ch.passed = false;
      res.add(ch);
    }
  results::Bench b;
  b.name = name;
  b.dtype = Types<T>::name();
  b.shape = {cfg.layers, cfg.heads, cfg.width, cfg.context, o.batch};
  b.ms = median_of_sorted(ms);
  b.min_ms = ms.front(), b.max_ms = ms.back(), b.reps = reps;
  b.tokens_per_s = double(o.batch) * cfg.context / (b.ms * 1e-3);
  // Model FLOPs per step: 6 * params * tokens for the matmuls (forward 2, backward 4) plus attention's
  // 6 * 2 * L * T * C per token (causal half of QK^T and PV, fwd + bwd)... reported for reference only.
  json::Value ex = json::Value::object();
  ex["attention"] = tr.m.attn_note;
  ex["fusion"] = o.fusion;
  ex["peak_gpu_mib"] = double(peak) / (1 << 20);
  json::Value pj = json::Value::object();
  double total = 0;
  for (int p = 0; p < kPhases; ++p) pj[kPhaseName[p]] = phase_ms[size_t(p)], total += phase_ms[size_t(p)];
  ex["phase_ms"] = pj;
  ex["phase_total_ms"] = total;
  b.extra = ex;
  res.add(b);
  std::printf("%s: median %.2f ms/step (min %.2f, max %.2f) = %.0f tokens/s; GPU memory %.0f MiB\n", name.c_str(), b.ms,
              b.min_ms, b.max_ms, b.tokens_per_s, double(peak) / (1 << 20));
  std::printf("  where one step's time goes (events between phases; %.2f ms in all):\n", total);
  for (int p = 0; p < kPhases; ++p)
    std::printf("    %-18s %8.3f ms  %5.1f%%\n", kPhaseName[p], phase_ms[size_t(p)],
                100.0 * phase_ms[size_t(p)] / total);
}

// The three attentions alone at the model's shape (one layer's forward + backward), same inputs.
template <class T>
static void bench_attention(results::Results& res, const gpt::Config& cfg, int batch, Attn a, uint64_t seed) {
  gpt::Config c1 = cfg;
  c1.layers = 1;
  Model<T> m(c1, batch, a == Attn::kCudnn ? Attn::kAuto : a);  // auto: a refusal falls back instead of exiting
  if (m.impl != a) return;                                     // cuDNN refused: the training bench says so
  verify::Rng rng(seed);
  const size_t N = size_t(m.N), C = size_t(cfg.width);
  std::vector<T> qkv(N * 3 * C), dout(N * C);
  for (auto& x : qkv) x = T(rng.uniform(-2.f, 2.f));
  for (auto& x : dout) x = T(rng.uniform(-1.f, 1.f) * 1e-3f);
  Layer& L = m.layer[0];
  to_device(L.qkv.template as<T>(), qkv);
  to_device(m.datt.template as<T>(), dout);
  timing::Options opt;
  opt.warmup = 3, opt.reps = 30, opt.budget_ms = 500;
  const timing::Stats f = timing::time_gpu([&] { m.attention_fwd(L); }, opt);
  const timing::Stats fb = timing::time_gpu([&] { m.attention_fwd(L), m.attention_bwd(L); }, opt);
  // FLOPs as implemented by a non-causal matmul formulation: 2 products forward, 4 backward, each 2*B*H*T*T*D.
  const double D = double(cfg.width) / cfg.heads,
               prod = 2.0 * batch * cfg.heads * double(cfg.context) * cfg.context * D;
  results::Bench b;
  b.name = std::string("attention fwd+bwd ") + Types<T>::name() + " " + attn_name(m.impl);
  b.dtype = Types<T>::name();
  b.shape = {batch, cfg.heads, cfg.context, (long long)D};
  b.ms = fb.median_ms, b.min_ms = fb.min_ms, b.max_ms = fb.max_ms, b.reps = fb.reps;
  b.tflops = 6 * prod / (fb.median_ms * 1e-3) / 1e12;
  json::Value ex = json::Value::object();
  ex["forward_ms"] = f.median_ms;
  ex["note"] = "TFLOP/s counts the full T x T products (6 of them); causal masking makes half of that work unnecessary";
  b.extra = ex;
  res.add(b);
  std::printf("  %-34s forward %8.3f ms, forward+backward %8.3f ms (%.1f TFLOP/s as 6 full products)\n", b.name.c_str(),
              f.median_ms, fb.median_ms, b.tflops);
}

// The quality run: train for a fixed number of steps, record the loss curve and the validation
// loss, then sample from the trained model and time generation.
template <class T>
static void bench_quality(results::Results& res, const gpt::Config& cfg, TrainOptions o, const train::Corpus& data,
                          Attn attn, uint64_t seed, int steps) {
  o.steps = steps, o.log_every = 10;
  Trainer<T> tr(cfg, o, data, attn, seed);
  json::Value st = json::Value::array(), tl = json::Value::array(), vs = json::Value::array(),
              vl = json::Value::array();
  double last_val = NAN;
  const auto t0 = std::chrono::steady_clock::now();
  while (tr.step < o.steps) {
    tr.step_once();
    if (tr.step % 100 == 0 || tr.step == o.steps) {
      const double v = tr.val_loss(o.val_batches);
      vs.push((long long)tr.step), vl.push(v);
      last_val = v;
      std::printf("  step %5lld  train %.4f  val %.4f\n", (long long)tr.step,
                  tr.losses.empty() ? NAN : double(tr.losses.back()), v);
      std::fflush(stdout);
    }
  }
  tr.read_back();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < tr.losses.size(); ++i) st.push((long long)i + 1), tl.push(double(tr.losses[i]));
  json::Value curve = json::Value::object();
  curve["precision"] = Types<T>::name();
  curve["step"] = st, curve["train_loss"] = tl, curve["val_step"] = vs, curve["val_loss"] = vl;
  curve["seconds"] = secs;
  res.config["loss_curve"] = curve;
  const double final_val = last_val;
  res.config["val_loss_after_steps"] = final_val;
  res.config["quality_steps"] = steps;
  verify::Check ch;
  ch.name =
      std::string("quality run ") + Types<T>::name() + ": validation loss finite and below the initial ln(256) = 5.545";
  ch.n = 1;
  ch.passed = std::isfinite(final_val) && final_val < std::log(256.0);
  ch.max_abs_err = final_val;
  ch.tol = verify::Tol{0, 0, Types<T>::name()};
  res.add(ch);
  // Generation from the trained weights.
  const ckpt::Checkpoint k = tr.checkpoint();
  const Sampled s = generate(cfg, k.params, "The GPU ", 200, 0.8, 40, seed);
  std::printf("\nsample after %d steps:\n%s\n(%d tokens in %.3f s: %.0f tokens/s)\n", steps, s.text.c_str(), s.made,
              s.seconds, s.made / s.seconds);
  res.config["sample"] = s.text;
  // The same generation without CUDA graphs (kernels launched one by one, the host waiting per token).
  const Sampled plain = generate(cfg, k.params, "The GPU ", 200, 0.8, 40, seed, false);
  verify::Check same;
  same.name = "generation with and without CUDA graphs writes the same bytes";
  same.n = 1;
  same.passed = plain.text == s.text;
  same.tol = verify::Tol{0, 0, "exact"};
  res.add(same);
  for (const Sampled* r : {&plain, &s}) {
    results::Bench g;
    g.name = r == &s ? "generate, batch 1, KV cache" : "generate, batch 1, KV cache, no CUDA graph";
    g.dtype = "fp32";
    g.shape = {cfg.layers, cfg.heads, cfg.width, cfg.context, 1};
    g.ms = 1e3 * r->seconds / r->made;
    g.min_ms = g.max_ms = g.ms, g.reps = r->made;
    g.tokens_per_s = r->made / r->seconds;
    res.add(g);
  }
  std::printf("generation without CUDA graphs: %.0f tokens/s\n", plain.made / plain.seconds);
}

// ---- Data parallel: verification and benchmark -------------------------------------------------------
#ifdef GPT_HAVE_NCCL
// What one data-parallel run (or the one-GPU reference) leaves behind for the checks.
struct DpRun {
  std::vector<float> grads0, losses;  // the first step's gradient (after the all-reduce), every step's loss
  double val = NAN;
  bool replicas_same = true;
};

// Train `steps` steps of `o` on `n` GPUs (n = 1: one GPU, no NCCL) and keep what the checks compare.
template <class T>
static DpRun dp_train(const gpt::Config& c, const TrainOptions& o, const train::Corpus& data, Attn attn, uint64_t seed,
                      int n) {
  DpRun out;
  auto body = [&](dp::Replica* rep) {
    Trainer<T> tr(c, o, data, attn, seed, rep);
    tr.capture = true;
    while (tr.step < o.steps) tr.step_once();
    tr.read_back();
    const double val = tr.val_loss(o.val_batches);  // collective: every replica scores its slice
    const bool same = rep ? tr.replicas_identical() : true;
    if (tr.rank == 0) out.grads0 = tr.cap_grads, out.losses = tr.losses, out.val = val, out.replicas_same = same;
  };
  if (n == 1)
    body(nullptr);
  else
    dp::run_threads(n, [&](dp::Replica& r) { body(&r); });
  CUDA_CHECK(cudaSetDevice(0));
  return out;
}

// --verify on a machine with two or more GPUs: N GPUs must train as one GPU does with the same global
// batch. The first step's averaged gradient equals the one-GPU gradient (up to summation order), the
// losses of the next steps follow the one-GPU run's, the validation loss too, and the replicas end
// with identical weights; with the gradient in one bucket (no overlap) and in one bucket per block.
template <class T>
static void verify_data_parallel(results::Results& res, const train::Corpus& data, uint64_t seed, Attn attn, int n) {
  gpt::Config c;
  c.layers = 3, c.heads = 4, c.width = 128, c.context = 64;
  TrainOptions o;
  o.batch = 8 * n, o.steps = 60, o.warmup = 10, o.lr = 3e-3, o.log_every = 10, o.val_batches = 2;
  const DpRun one = dp_train<T>(c, o, data, attn, seed, 1);
  const bool bf = std::is_same<T, bf16>::value;
  // Only the order of the sums differs (each GPU's mean over half the rows, then their mean); the
  // losses then drift apart slowly, as any two runs that differ in rounding do.
  const verify::Tol grad_tol{bf ? 1e-5 : 1e-6, bf ? 5e-3 : 1e-3, Types<T>::name()},
      first_tol{0, bf ? 5e-3 : 1e-4, Types<T>::name()}, loss_tol{0, bf ? 1e-2 : 1e-3, Types<T>::name()};
  for (size_t bucket :
       {size_t(0),
        size_t(1)}) {  // one all-reduce after the backward; one per block (a bucket of 1 byte closes at every block)
    o.bucket_bytes = bucket;
    const DpRun many = dp_train<T>(c, o, data, attn, seed, n);
    const std::string tag = "data parallel " + std::to_string(n) + " GPUs " + Types<T>::name() +
                            (bucket ? ", a bucket per block" : ", one bucket");
    res.add(verify::compare(tag + ": first step's averaged gradient == one GPU's", many.grads0.data(),
                            one.grads0.data(), std::min(many.grads0.size(), one.grads0.size()), grad_tol));
    // The first 10 steps one by one, then means over windows of 10 steps: in bf16 two runs that differ
    // in rounding soon take different, equally good paths, and single steps' losses scatter.
    std::vector<double> a, r;
    const size_t nl = many.losses.size() == one.losses.size() ? one.losses.size() : 0;
    for (size_t i = 0; i < std::min<size_t>(10, nl); ++i) a.push_back(many.losses[i]), r.push_back(one.losses[i]);
    res.add(
        verify::compare(tag + ": the first 10 steps' losses == one GPU's", a.data(), r.data(), a.size(), first_tol));
    a.clear(), r.clear();
    for (size_t i = 0; i + 10 <= nl; i += 10) {
      double sa = 0, sr = 0;
      for (size_t j = i; j < i + 10; ++j) sa += many.losses[j], sr += one.losses[j];
      a.push_back(sa / 10), r.push_back(sr / 10);
    }
    res.add(
        verify::compare(tag + ": " + std::to_string(o.steps) + " steps' losses follow one GPU's (means of 10 steps)",
                        a.data(), r.data(), a.size(), loss_tol));
    res.add(verify::compare(tag + ": validation loss == one GPU's", &many.val, &one.val, 1, loss_tol));
    verify::Check same;
    same.name = tag + ": replicas' weights identical after training";
    same.n = 1, same.passed = many.replicas_same, same.tol = verify::Tol{0, 0, "exact"};
    res.add(same);
  }
}

// --bench --gpus N: tokens/s on 1 and N GPUs for the given model and a larger one, with and without
// overlapping the all-reduce with the backward; NCCL's all-reduce alone at the same message sizes;
// and the loss curve of N GPUs against one GPU's.
// A training-step row of the data-parallel benchmark, from sorted step times.
static results::Bench step_row(const std::string& name, const char* dtype, const gpt::Config& c, int batch,
                               const std::vector<double>& ms) {
  results::Bench b;
  b.name = name, b.dtype = dtype;
  b.shape = {c.layers, c.heads, c.width, c.context, batch};
  b.ms = median_of_sorted(ms), b.min_ms = ms.front(), b.max_ms = ms.back(), b.reps = int(ms.size());
  b.tokens_per_s = double(batch) * c.context / (b.ms * 1e-3);
  b.extra = json::Value::object();
  return b;
}

// One GPU training `batch` sequences a step: sorted step times after a warm-up.
template <class T>
static std::vector<double> one_gpu_step_times(const gpt::Config& c, TrainOptions o, int batch,
                                              const train::Corpus& data, Attn attn, uint64_t seed, int warm, int reps) {
  o.batch = batch;
  Trainer<T> tr(c, o, data, attn, seed);
  for (int i = 0; i < warm; ++i) tr.step_once();
  return step_times(tr, reps);
}

struct MultiConfig {
  std::string name;
  gpt::Config cfg;
  int batch;
};

template <class T>
static void bench_multi(results::Results& res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
                        Attn attn, uint64_t seed, int n, int quality_steps) {
  gpt::Config big = cfg;
  big.layers = 12, big.heads = 12, big.width = 768, big.context = 1024;
  // The large model at two global batches: 16 (8 sequences per GPU on 2 GPUs) and 2 x 16 (each GPU
  // keeps the one-GPU batch of 16). The first asks N GPUs to finish the same step faster (strong
  // scaling); the second gives each GPU as much work as one GPU had (weak scaling), which is how data
  // parallelism is used when the global batch can grow.
  const std::vector<MultiConfig> configs = {
      {"default", cfg, o.batch}, {"large", big, 16}, {"large-b" + std::to_string(16 * n), big, 16 * n}};
  const int warm = 5, reps = 30;
  res.config["gpus"] = n;
  res.config["nccl"] = dp::nccl_version();
  for (const char* v :
       {"NCCL_NVLS_ENABLE", "NCCL_MAX_CTAS", "NCCL_ALGO", "NCCL_PROTO"})  // the NCCL settings this run had
    if (std::getenv(v)) res.config[v] = std::getenv(v);
  res.config["bucket_mib"] = double(o.bucket_bytes) / (1 << 20);
  double large_eff = NAN, large32_eff = NAN;
  for (const auto& mc : configs) {
    TrainOptions to = o;
    to.batch = mc.batch, to.steps = 100000,
    to.log_every = 50;  // a long schedule: the timed steps sit at the warm-up's learning rates
    const gpt::Layout lay(mc.cfg);
    const double grad_bytes = double(lay.total) * sizeof(float);
    std::printf(
        "\n%s model: %d layers, width %d, context %d, global batch %d: %zu parameters (%.1f MB of fp32 gradient)\n",
        mc.name.c_str(), mc.cfg.layers, mc.cfg.width, mc.cfg.context, mc.batch, lay.total, grad_bytes / 1e6);
    // One GPU, the whole batch.
    const std::vector<double> one = one_gpu_step_times<T>(mc.cfg, to, mc.batch, data, attn, seed, warm, reps);
    const double one_ms = median_of_sorted(one);
    {
      results::Bench b = step_row("train step " + mc.name + " 1 GPU", Types<T>::name(), mc.cfg, mc.batch, one);
      b.extra["gpus"] = 1, b.extra["config"] = mc.name;
      res.add(b);
      std::printf("  1 GPU                      %8.2f ms/step  %10.0f tokens/s\n", one_ms, b.tokens_per_s);
    }
    // One GPU with one replica's share of the batch: what an N-GPU step would take if communication
    // were free. The gap from one_ms / N is the smaller per-GPU batch (less work per kernel, the same
    // optimizer step over every parameter); the rest of the N-GPU step's time is communication.
    const std::vector<double> share = one_gpu_step_times<T>(mc.cfg, to, mc.batch / n, data, attn, seed, warm, reps);
    const double share_ms = median_of_sorted(share);
    {
      results::Bench b = step_row("train step " + mc.name + " 1 GPU, one replica's share of the batch",
                                  Types<T>::name(), mc.cfg, mc.batch / n, share);
      b.extra["gpus"] = 1, b.extra["config"] = mc.name, b.extra["batch"] = mc.batch / n;
      b.extra["ideal_scaling_pct"] =
          100.0 * one_ms / (n * share_ms);  // the best N GPUs could do with free communication
      b.extra["share_tokens_per_s"] = b.tokens_per_s;
      res.add(b);
      std::printf(
          "  1 GPU, batch %-4d           %8.2f ms/step  (an N-GPU step with free communication: at most %.1f%% "
          "scaling)\n",
          mc.batch / n, share_ms, 100.0 * one_ms / (n * share_ms));
    }
    // N GPUs: the gradient in one all-reduce after the backward, then in buckets of several sizes during it.
    std::vector<size_t> sizes = {0, size_t(8) << 20, size_t(25) << 20, size_t(100) << 20};
    if (std::find(sizes.begin(), sizes.end(), o.bucket_bytes) == sizes.end())
      sizes.push_back(o.bucket_bytes);  // --bucket-mb's own
    for (size_t bucket : sizes) {
      TrainOptions tb = to;
      tb.bucket_bytes = bucket;
      std::vector<double> ms, comm;
      size_t nb = 0, biggest = 0;
      double alone_all = 0, alone_bucket = 0;
      bool finite = true, same = true;
      dp::run_threads(n, [&](dp::Replica& r) {
        Trainer<T> tr(mc.cfg, tb, data, attn, seed, &r);
        for (int i = 0; i < warm; ++i) tr.step_once();
        const std::vector<double> t = step_times(tr, reps);
        // The all-reduces' own times inside training: a few more steps with events on the side stream.
        r.time_buckets(true);
        std::vector<double> c;
        for (int i = 0; i < 5; ++i) {
          tr.step_once();
          const std::vector<double> b = r.last_comm_ms();
          double sum = 0;
          for (double x : b) sum += x;
          c.push_back(sum);
        }
        r.time_buckets(false);
        tr.read_back();
        bool ok = true;
        for (float l : tr.losses) ok = ok && std::isfinite(l);
        const bool s = tr.replicas_identical();
        // NCCL alone, with the GPUs otherwise idle: the whole gradient, and the largest bucket.
        size_t big_b = 0;
        for (const auto& bk : r.buckets()) big_b = std::max(big_b, (bk.end - bk.begin) * sizeof(float));
        const double all_ms = r.time_allreduce_ms(tr.m.grads.template as<float>(), tr.m.lay.total * sizeof(float), 20);
        const double bucket_ms = bucket ? r.time_allreduce_ms(tr.m.grads.template as<float>(), big_b, 20) : all_ms;
        std::sort(c.begin(), c.end());
        if (r.rank == 0)
          ms = t, comm = c, nb = r.buckets().size(), biggest = big_b, alone_all = all_ms, alone_bucket = bucket_ms,
          finite = ok, same = s;
      });
      CUDA_CHECK(cudaSetDevice(0));
      const double med = median_of_sorted(ms);
      const double scaling = 100.0 * one_ms / (n * med);  // tokens/s on N GPUs / (N x tokens/s on one)
      const double comm_ms = comm[comm.size() / 2];
      const std::string mode = bucket ? "buckets of " + std::to_string(bucket >> 20) + " MiB" : "one all-reduce";
      results::Bench b = step_row("train step " + mc.name + " " + std::to_string(n) + " GPUs " + mode, Types<T>::name(),
                                  mc.cfg, mc.batch, ms);
      json::Value ex = json::Value::object();
      ex["gpus"] = n, ex["config"] = mc.name, ex["mode"] = mode;
      ex["scaling_efficiency_pct"] = scaling;
      ex["bucket_bytes"] = double(bucket), ex["default_bucket"] = bucket == o.bucket_bytes;
      ex["exposed_ms"] = med - share_ms;  // the step beyond one replica's compute: communication not hidden
      // Weak scaling: N GPUs against N times one GPU running one replica's batch.
      ex["weak_scaling_pct"] = 100.0 * share_ms / med;
      ex["buckets"] = double(nb), ex["largest_bucket_bytes"] = double(biggest);
      ex["comm_ms_in_training"] =
          comm_ms;  // the all-reduces' time inside a step (side-stream events; includes waiting)
      ex["bus_gbps_in_training"] = dp::bus_gbps(grad_bytes, comm_ms, n);
      ex["allreduce_alone_ms"] = alone_all;
      ex["bus_gbps_alone"] = dp::bus_gbps(grad_bytes, alone_all, n);
      ex["bucket_allreduce_alone_ms"] = alone_bucket;
      ex["bucket_bus_gbps_alone"] = dp::bus_gbps(double(biggest), alone_bucket, n);
      b.extra = ex;
      res.add(b);
      std::printf(
          "  %d GPUs, %-20s %8.2f ms/step  %10.0f tokens/s  scaling %.1f%%  (all-reduce in training %.2f ms, %.0f GB/s "
          "bus; NCCL "
          "alone %.2f ms, %.0f GB/s bus)\n",
          n, mode.c_str(), med, b.tokens_per_s, scaling, comm_ms, dp::bus_gbps(grad_bytes, comm_ms, n), alone_all,
          dp::bus_gbps(grad_bytes, alone_all, n));
      verify::Check ch;
      ch.name = mc.name + " model, " + std::to_string(n) + " GPUs, " + mode +
                ": losses finite and replicas identical while timing";
      ch.n = 1, ch.passed = finite && same, ch.tol = verify::Tol{0, 0, "exact"};
      res.add(ch);
      if (bucket == o.bucket_bytes && mc.name == "large") large_eff = scaling;
      if (bucket == o.bucket_bytes && mc.name != "default" && mc.name != "large") large32_eff = scaling;
    }
  }
  // NCCL alone over a range of sizes: the bus bandwidth curve that the gradient's sizes sit on.
  {
    std::vector<std::pair<double, double>> curve;  // bytes, ms
    dp::run_threads(n, [&](dp::Replica& r) {
      DeviceBuffer buf(size_t(1) << 30);
      CUDA_CHECK(cudaMemset(buf.as(), 0, buf.bytes()));
      std::vector<std::pair<double, double>> c;
      for (size_t bytes = size_t(1) << 20; bytes <= buf.bytes(); bytes <<= 1)
        c.push_back({double(bytes), r.time_allreduce_ms(buf.as<float>(), bytes, 20)});
      if (r.rank == 0) curve = c;
    });
    CUDA_CHECK(cudaSetDevice(0));
    std::printf("\nNCCL all-reduce alone (fp32, ncclAvg), %d GPUs:\n", n);
    for (const auto& [bytes, ms] : curve) {
      results::Bench b;
      b.name = "nccl all-reduce alone";
      b.dtype = "fp32";
      b.shape = {(long long)bytes};
      b.ms = ms, b.min_ms = b.max_ms = ms, b.reps = 20;
      b.gbps = dp::bus_gbps(bytes, ms, n);
      json::Value ex = json::Value::object();
      ex["gpus"] = n, ex["note"] = "gbps is the bus bandwidth: 2(N-1)/N x bytes / time, as nccl-tests reports it";
      b.extra = ex;
      res.add(b);
      std::printf("  %10.0f bytes  %8.3f ms  %6.1f GB/s bus\n", bytes, ms, b.gbps);
    }
  }
  // The same training on 1 and N GPUs: the loss curves must agree (same global batch, same data).
  {
    TrainOptions q = o;
    q.steps = quality_steps, q.log_every = 10;
    std::printf("\nloss curves, %s, %d steps: 1 GPU against %d GPUs\n", Types<T>::name(), q.steps, n);
    const DpRun one = dp_train<T>(cfg, q, data, attn, seed, 1), many = dp_train<T>(cfg, q, data, attn, seed, n);
    // Means over windows of 25 steps: single steps are noisy, and two runs that differ in rounding
    // take different (equally good) paths.
    const size_t w = 25;
    json::Value st = json::Value::array(), l1 = json::Value::array(), ln = json::Value::array();
    std::vector<double> a, r;
    for (size_t i = 0; i + w <= std::min(one.losses.size(), many.losses.size()); i += w) {
      double s1 = 0, sn = 0;
      for (size_t j = i; j < i + w; ++j) s1 += one.losses[j], sn += many.losses[j];
      r.push_back(s1 / w), a.push_back(sn / w);
      st.push((long long)(i + w)), l1.push(s1 / w), ln.push(sn / w);
      std::printf("  steps %4zu-%-4zu  1 GPU %.4f  %d GPUs %.4f\n", i + 1, i + w, s1 / w, n, sn / w);
    }
    std::printf("  validation loss: 1 GPU %.4f, %d GPUs %.4f\n", one.val, n, many.val);
    json::Value lc = json::Value::object();
    lc["window"] = (long long)w, lc["step"] = st, lc["loss_1gpu"] = l1, lc["loss_ngpu"] = ln, lc["val_1gpu"] = one.val,
    lc["val_ngpu"] = many.val;
    res.config["loss_curves"] = lc;
    const verify::Tol t{0, 0.03, "bf16 run-to-run"};
    res.add(verify::compare(std::to_string(n) + " GPUs' loss curve follows 1 GPU's (means of 25 steps)", a.data(),
                            r.data(), a.size(), t));
    res.add(verify::compare(std::to_string(n) + " GPUs' validation loss == 1 GPU's", &many.val, &one.val, 1, t));
  }
  std::printf("\n");
  const std::string tail =
      " GPUs, large model, buckets of " + std::to_string(o.bucket_bytes >> 20) + " MiB (%; goal >= 90)";
  res.add_goal("scaling efficiency on " + std::to_string(n) + tail + ", global batch 16", large_eff, large_eff >= 90);
  res.add_goal("scaling efficiency on " + std::to_string(n) + tail + ", global batch " + std::to_string(16 * n),
               large32_eff, large32_eff >= 90);
}
#endif

// ---- main --------------------------------------------------------------------------------------------
int main(int argc, char** argv) {
  cli::Args args(
      argc, argv, kProg,
      "a small GPT trained on any text, then sampled (fp32 or bf16; cuBLAS, cuDNN and hand-written kernels)");
  const cli::Standard st = cli::standard_flags(args, 20261150);
  gpt::Config cfg;
  cfg.layers = int(args.integer("layers", 6, 1, 96, "transformer blocks"));
  cfg.heads = int(args.integer("heads", 6, 1, 128, "attention heads (must divide the width)"));
  cfg.width = int(args.integer("width", 384, 8, 8192, "model width C"));
  cfg.context = int(args.integer("context", 256, 2, 8192, "context length T"));
  TrainOptions o;
  o.batch = int(args.integer("batch", 64, 1, 4096, "sequences per step"));
  o.steps = int(args.integer("steps", 400, 1, 100000000, "training steps (the schedule's length)"));
  o.until = int(
      args.integer("until", 0, 0, 100000000, "stop after this step (0: at --steps); the schedule still spans --steps"));
  o.warmup = int(args.integer("warmup", 100, 1, 100000000, "warm-up steps"));
  o.lr = args.real("lr", 1e-3, 1e-7, 1.0, "peak learning rate");
  o.val_every = int(args.integer("val-every", 100, 1, 100000000, "steps between validation losses"));
  o.log_every = int(args.integer("log-every", 50, 1, 100000, "steps between progress lines"));
  const std::string fusion_s =
      args.str("fusion", "on", "on | off: bias, GELU and bias gradients fused into the matmuls (cuBLASLt epilogues)");
  const std::string prec =
      args.str("precision", "bf16", "fp32 | bf16 (bf16 activations and matmuls, fp32 master weights and optimizer)");
  const std::string attn_s = args.str(
      "attention", "auto", "auto | cudnn | matmul | naive (auto: cuDNN's fused attention in bf16, matmul otherwise)");
  const std::string data_path =
      args.str("data", "data/corpus.txt", "the text to train on (any file: bytes are the vocabulary)");
  const std::string save = args.str("save", "", "write a checkpoint here at the end");
  const std::string resume = args.str("resume", "", "continue from this checkpoint");
  const std::string log_path = args.str("log", "", "write the loss log here (lines: step loss / step val loss)");
  const std::string dump =
      args.str("dump", "",
               "write the initial weights and the first step's batch, loss and gradients here (for torch_oracle.py)");
  const std::string sample = args.str("sample", "", "generate from this checkpoint instead of training");
  const std::string prompt = args.str("prompt", "The ", "with --sample: the text to continue");
  const int ntok = int(args.integer("tokens", 200, 1, 1 << 20, "with --sample: bytes to generate"));
  const double temperature = args.real("temperature", 0.8, 0.01, 10.0, "with --sample: softmax temperature");
  const int top_k = int(args.integer("top-k", 40, 1, 256, "with --sample: sample among the k likeliest bytes"));
  const std::string gpus_s =
      args.str("gpus", "1", "GPUs to train on, one thread each (data parallel through NCCL): a number or 'all'");
  const int world_n = int(args.integer(
      "world", 1, 1, 4096, "processes of a multi-process data-parallel run, one GPU each (with --rank, --id-file)"));
  const int rank_n = int(args.integer("rank", 0, 0, 4095, "this process's rank in a multi-process run"));
  const int device_n =
      int(args.integer("device", -1, -1, 1023, "the GPU this rank uses (default: rank modulo the GPUs visible)"));
  const std::string id_file =
      args.str("id-file", "", "multi-process run: where rank 0 publishes NCCL's unique id and the others read it");
  const double bucket_mb = args.real(
      "bucket-mb", 25, 0, 1 << 20,
      "data parallel: all-reduce the gradient in buckets of this many MiB during the backward (0: all of it after)");
  const std::string verify_only = args.str(
      "verify-only", "all", "with --verify: all | fp32 (skip the bf16 checks; for racecheck, see the Makefile)");
  BenchOptions bo;
  bo.steps = int(args.integer("bench-steps", 1000, 10, 1000000, "with --bench: steps of the quality run"));
  args.finish();
  st.validate(kProg);
  long long gpus_req = 0;
  if (gpus_s != "all" && (!cli::parse_int(gpus_s, gpus_req) || gpus_req < 1))
    cli::usage_error(kProg, "--gpus must be a positive number or 'all', got '" + gpus_s + "'");
  const bool multi = gpus_s != "1" || world_n > 1;
  if (world_n > 1 && gpus_s != "1")
    cli::usage_error(kProg, "--world (one process per GPU) and --gpus (one process, several GPUs) exclude each other");
  if (world_n > 1 && id_file.empty())
    cli::usage_error(kProg, "--world needs --id-file (the file where the ranks meet)");
  if (rank_n >= world_n) cli::usage_error(kProg, "--rank must be below --world");
  if (world_n > 1 && (st.verify || st.bench))
    cli::usage_error(kProg, "--world runs training; --verify and --bench take --gpus N (one process)");
  if (world_n > 1 && o.batch % world_n)
    cli::usage_error(kProg, "--batch " + std::to_string(o.batch) + " does not split evenly over " +
                                std::to_string(world_n) + " ranks");
  if (multi && !dump.empty()) cli::usage_error(kProg, "--dump captures one GPU's step: leave out --gpus / --world");
  if (multi && !sample.empty()) cli::usage_error(kProg, "--sample generates on one GPU: leave out --gpus / --world");
  o.bucket_bytes = size_t(bucket_mb * (1 << 20));
  if (verify_only != "all" && verify_only != "fp32")
    cli::usage_error(kProg, "--verify-only must be all or fp32, got '" + verify_only + "'");
  if (fusion_s != "on" && fusion_s != "off")
    cli::usage_error(kProg, "--fusion must be on or off, got '" + fusion_s + "'");
  o.fusion = fusion_s == "on";
  if (prec != "fp32" && prec != "bf16") cli::usage_error(kProg, "--precision must be fp32 or bf16, got '" + prec + "'");
  Attn attn = Attn::kAuto;
  if (attn_s == "cudnn")
    attn = Attn::kCudnn;
  else if (attn_s == "matmul")
    attn = Attn::kMatmul;
  else if (attn_s == "naive")
    attn = Attn::kNaive;
  else if (attn_s != "auto")
    cli::usage_error(kProg, "--attention must be auto, cudnn, matmul or naive, got '" + attn_s + "'");
  if (attn == Attn::kCudnn && prec == "fp32")
    cli::usage_error(kProg, "--attention cudnn needs --precision bf16 (cuDNN's fused attention takes fp16/bf16)");
  const std::string bad = cfg.invalid();
  if (!bad.empty()) cli::usage_error(kProg, bad);
  if (cfg.width > 32 * 256) cli::usage_error(kProg, "--width above 8192 is not supported");
  results::require_outputs(kProg, st);

  // Every input is checked before the GPU is touched.
  if (!sample.empty()) {
    ckpt::Checkpoint k;
    try {
      k = ckpt::load(sample);
    } catch (const std::exception& e) { cli::usage_error(kProg, e.what()); }
    if (prompt.empty()) cli::usage_error(kProg, "--prompt must not be empty");
    if (int(prompt.size()) >= k.config.context) cli::usage_error(kProg, "--prompt is longer than the model's context");
    results::Results res("day50_gpt", kProg);
    env::begin(res, st);
    const Sampled s = generate(k.config, k.params, prompt, ntok, temperature, top_k, uint64_t(st.seed));
    std::printf("%s\n\n(%d tokens in %.3f s: %.0f tokens/s%s)\n", s.text.c_str(), s.made, s.seconds, s.made / s.seconds,
                s.made < ntok ? "; stopped at the context length" : "");
    return 0;
  }
  // --gpus: the GPUs this process drives, against the GPUs there are (with none, env::begin below
  // skips the run); before anything is printed, so a refusal is one line.
  int gpus = 1;
  if (gpus_s != "1") {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) cudaGetLastError(), count = 0;
    gpus = gpus_s == "all" ? std::max(count, 1) : int(gpus_req);
    if (count > 0 && gpus > count)
      cli::usage_error(kProg, "--gpus " + gpus_s + ": this machine has " + std::to_string(count) + " GPU(s)");
    if (o.batch % gpus)
      cli::usage_error(kProg, "--batch " + std::to_string(o.batch) + " does not split evenly over " +
                                  std::to_string(gpus) + " GPUs");
#ifndef GPT_HAVE_NCCL
    if (gpus > 1)
      cli::usage_error(kProg, "--gpus > 1 needs NCCL, and this build found none (see the first lines make prints)");
#endif
  }
  train::Corpus data;
  try {
    data = train::split_bytes(train::read_file(data_path), st.verify ? 64 : cfg.context);
  } catch (const std::exception& e) { cli::usage_error(kProg, e.what()); }
  results::Results res("day50_gpt", kProg);
  env::begin(res, st);
  res.config["precision"] = prec;
  res.config["attention"] = attn_s;
  res.config["data"] = data_path;
  const uint64_t seed = uint64_t(st.seed);
  const RunFiles files{data_path, save, resume, log_path, dump};
  res.config["gpus"] = world_n > 1 ? world_n : gpus;
  if (st.verify) {
    // fp32: the matmul attention (auto) and the naive one; bf16: cuDNN (auto), matmul and naive.
    // --attention narrows this to one kind. The training checks use the precision's default.
    const Attn f32 = attn == Attn::kCudnn ? Attn::kAuto : attn;
    for (Attn a : attn == Attn::kAuto ? std::vector<Attn>{Attn::kMatmul, Attn::kNaive} : std::vector<Attn>{f32}) {
      verify_tiny<float>(res, seed, a);
      if (!st.small) verify_attention<float>(res, seed + 1, a);
    }
    verify_tiny<float>(res, seed, f32, false);  // the unfused matmuls (no cuBLASLt epilogues) too
    verify_training<float>(res, data, seed + 2, f32, st.small);
    if (verify_only != "fp32") {
      for (Attn a : attn == Attn::kAuto ? std::vector<Attn>{Attn::kAuto, Attn::kMatmul, Attn::kNaive}
                                        : std::vector<Attn>{attn}) {
        verify_tiny<bf16>(res, seed, a);
        if (!st.small) verify_attention<bf16>(res, seed + 1, a);
      }
      verify_tiny<bf16>(res, seed, attn, false);
      verify_training<bf16>(res, data, seed + 2, attn, st.small);
    }
    gpt::Config g1 = tiny_config(), g2 = tiny_config();
    g1.context = 24;                                               // head size 16: the grouped output path
    g2.context = 20, g2.layers = 1, g2.heads = 1, g2.width = 256;  // head size 256: the wide path
    verify_generate(res, seed + 3, g1);
    verify_generate(res, seed + 4, g2);
    // Data parallelism, where there are GPUs to spread over: all of them, or --gpus N of them.
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    const int n = gpus > 1 ? gpus : count;
#ifdef GPT_HAVE_NCCL
    if (n >= 2 && verify_only == "all") {
      verify_data_parallel<float>(res, data, seed + 5, f32, n);
      verify_data_parallel<bf16>(res, data, seed + 5, attn, n);
    } else {
      std::printf("  (data-parallel checks not run: %s)\n", n < 2 ? "one GPU visible" : "--verify-only fp32");
    }
#else
    std::printf("  (data-parallel checks not run: this build has no NCCL)\n");
    (void)n;
#endif
  } else if (st.bench && gpus > 1) {
#ifdef GPT_HAVE_NCCL
    res.config["layers"] = cfg.layers, res.config["heads"] = cfg.heads, res.config["width"] = cfg.width,
    res.config["context"] = cfg.context;
    res.config["batch"] = o.batch;
    if (prec == "fp32")
      bench_multi<float>(res, cfg, o, data, attn, seed, gpus, bo.steps);
    else
      bench_multi<bf16>(res, cfg, o, data, attn, seed, gpus, bo.steps);
#endif
  } else if (st.bench) {
    res.config["layers"] = cfg.layers, res.config["heads"] = cfg.heads, res.config["width"] = cfg.width,
    res.config["context"] = cfg.context;
    res.config["batch"] = o.batch;
    std::printf("\nattention alone, one layer, batch %d:\n", o.batch);
    for (Attn a : {Attn::kMatmul, Attn::kNaive}) bench_attention<float>(res, cfg, o.batch, a, seed);
    for (Attn a : {Attn::kCudnn, Attn::kMatmul, Attn::kNaive}) bench_attention<bf16>(res, cfg, o.batch, a, seed);
    // Each precision without and with the matmul epilogues: the fusion's gain, measured in one run.
    for (bool f : {false, true}) {
      TrainOptions of = o;
      of.fusion = f;
      bench_train<float>(res, cfg, of, data, attn == Attn::kCudnn ? Attn::kAuto : attn, seed);
    }
    for (bool f : {false, true}) {
      TrainOptions of = o;
      of.fusion = f;
      bench_train<bf16>(res, cfg, of, data, attn, seed);
    }
    std::printf("\nquality run: bf16, %d steps\n", bo.steps);
    bench_quality<bf16>(res, cfg, o, data, attn, seed, bo.steps);
  } else if (world_n > 1) {
#ifdef GPT_HAVE_NCCL
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    const int dev = device_n >= 0 ? device_n : rank_n % count;
    if (dev >= count)
      cli::usage_error(kProg,
                       "--device " + std::to_string(dev) + ": this machine has " + std::to_string(count) + " GPU(s)");
    const int rc = prec == "fp32"
                       ? train_process<float>(res, cfg, o, data, files, attn, seed, world_n, rank_n, dev, id_file)
                       : train_process<bf16>(res, cfg, o, data, files, attn, seed, world_n, rank_n, dev, id_file);
    if (rc) return rc;
    if (rank_n != 0) {  // rank 0 writes the results file; the others only report
      res.print_summary();
      return res.exit_code();
    }
#else
    cli::usage_error(kProg, "--world > 1 needs NCCL, and this build found none (see the first lines make prints)");
#endif
  } else if (gpus > 1) {
#ifdef GPT_HAVE_NCCL
    const int rc = prec == "fp32" ? train_threads<float>(res, cfg, o, data, files, attn, seed, gpus)
                                  : train_threads<bf16>(res, cfg, o, data, files, attn, seed, gpus);
    if (rc) return rc;
#endif
  } else {
    const int rc = prec == "fp32" ? train_run<float>(&res, cfg, o, data, files, attn, seed)
                                  : train_run<bf16>(&res, cfg, o, data, files, attn, seed);
    if (rc) return rc;
  }
  std::string json_path = st.json;  // "{gpus}" in --json: the GPU count (results/{gpu}x{gpus}/...)
  for (size_t p; (p = json_path.find("{gpus}")) != std::string::npos;)
    json_path.replace(p, 6, std::to_string(world_n > 1 ? world_n : gpus));
  return res.finish(kProg, json_path);
}
