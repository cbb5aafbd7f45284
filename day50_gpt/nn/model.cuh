// day50_gpt/nn/model.cuh: the GPT on the GPU: its buffers (one table), the layers' wiring into a
// forward and a backward, and the launchers that hand each layer to its kernels.
//
// Parameters (fp32 master copy, plus a bf16 copy for the matmuls in bf16 mode), gradients, AdamW
// state, and the activations of one batch that the backward needs. The layers themselves live one
// per file: nn/kernels/*.cuh (our kernels), nn/linear.cuh (cuBLAS / cuBLASLt matmuls),
// nn/attention.cuh (the three attentions), nn/optimizer.cuh (gradient norm + AdamW).
#pragma once
#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../gpt_ref.h"
#include "../train_ref.h"
#include "backend.h"
#include "check.cuh"
#include "cli.h"
#include "cudnn_layers.h"
#include "cublaslt.h"
#include "dw_stream.h"
#include "pdl.cuh"
#include "env.cuh"
#include "finish_queue.cuh"
// the layers' kernels
#include "kernels/adamw.cuh"
#include "kernels/attention.cuh"
#include "kernels/bias_gelu_residual.cuh"
#include "kernels/embedding.cuh"
#include "kernels/flash_bwd.cuh"
#include "kernels/layernorm.cuh"
#include "kernels/loss.cuh"
#include "kernels/transpose.cuh"
// the libraries
#include "lt_tuned.cuh"
#include "flash_sm90.h"
#include "gemm_sm90.h"
#include "matmul.cuh"
#include "phases.cuh"
#include "sdpa_cudnn.h"
#include "types.cuh"

// Where a linear layer's epilogue runs (nn/linear.cuh): cuBLASLt's fused epilogue, cuBLAS's plain matmul and
// a pass of ours apart, or our Hopper GEMM with the epilogue fused (nn/gemm_sm90.h).
enum class Path { kEpilogue = 0, kApart = 1, kFused = 2 };

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

// One row of the model's buffer table: the buffer, its size in bytes (0: not used by this
// configuration) and whether it starts as NaN.
struct BufferSpec {
  const char* name;
  DeviceBuffer* buf;
  size_t bytes;
  bool poisoned;
};

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
  std::map<std::string, std::unique_ptr<lt::Tuned>> lt_cache;
  bool lt_search = true;  // --lt-search: bf16's cuBLASLt algorithms chosen by timing (nn/lt_tuned.cuh)
  // --precision tf32 (set_tf32, below): every matmul on the TF32 tensor cores (inputs rounded to a
  // 10-bit mantissa, fp32 accumulation); everything else stays fp32. Off: fp32 matmuls, no TF32.
  bool tf32 = false;
  // --verify: our passes (nn/linear.cuh) in place of every epilogue they can replace, untimed, so that
  // the CPU comparison covers them whatever the timing would choose; ours_launches counts them.
  bool force_ours = false;
  int ours_launches = 0;
  // --verify: our fused-epilogue GEMM (nn/gemm_sm90.h) wherever it can run, untimed; fused_launches counts it.
  bool force_fused = false;
  int fused_launches = 0;
  std::unique_ptr<sdpa::Attention> sdpa;
  Phases* ph = nullptr;
  // Called by backward() as soon as block l's parameter gradients are enqueued (l = -1: at the end,
  // embeddings included). Data parallelism starts the all-reduce of finished gradients from here,
  // while the backward of the earlier blocks goes on.
  std::function<void(int)> on_block_grads;
  // Data parallel, ZeRO-1 on the copy engines: called before the forward first reads the weights of
  // range i (0: the embeddings, 1 + l: block l, the last with the final LayerNorm), whose other ranks'
  // shards may still be arriving (run/data_parallel.cuh, gather).
  std::function<void(int)> on_range_read;

  DeviceBuffer params, params_t, grads, m, v, decay;
  DeviceBuffer tok, tgt, loss, logits, dlogits;
  std::vector<DeviceBuffer> xs;  // the residual stream: xs[l] enters block l, xs[L] leaves the last one
  std::vector<Layer> layer;
  DeviceBuffer lnf, lnf_mean, lnf_rstd;
  DeviceBuffer dx, dx_t, dS, dptrs, partial, dsum, dq_acc, norm_partial, sumsq, ws, lt_ws;
  // Scratch that is never live at the same time shares memory: a sublayer's output before the
  // residual add (forward) with the backward's d(attention output) and d(LayerNorm output); dqkv
  // (attention backward) with dfc (MLP backward) and the embedding's partial sums (the very end).
  DeviceBuffer scratch_small, scratch_big;
  DeviceBuffer w_t;  // bf16: the fc2 weights transposed, as our fused dGELU GEMM reads them (Model::transposed)
  // --recompute on (off by default: faster, and still below PyTorch's memory): the MLP's GELU output
  // (N x 4C, the largest activation) is not kept
  // per layer. The forward writes it into one shared buffer, where the next matmul reads it, and the
  // backward recomputes it there from the kept pre-activation before the weight gradient that reads
  // it: L - 1 buffers of N x 4C fewer (at the bench's size 6 x 48 MiB kept become one) for one
  // elementwise pass per layer. Off: every layer keeps its own (L.gl).
  bool recompute_gelu = false;
  DeviceBuffer gl_shared;
  // --flash-bwd on (the default): with cuDNN's fused forward (bf16), the attention's backward is our
  // flash kernel (nn/kernels/flash_bwd.cuh on mma.sync, nn/flash_sm90.cu on wgmma: no fp32 dQ accumulator,
  // no atomics) where the head size is 64 and T a multiple of 64; off, or another shape: cuDNN's fused backward.
  bool flash_bwd = true;
  // Our flash backward as the first version's two launches (dQ, then dK/dV reading the Dsum dQ wrote)
  // instead of one: set by dev/attention.cu to time one against the other; the trainer never sets it.
  bool flash_two_launches = false;
  // --flash-mma wgmma (the default): the one launch's block products on wgmma (nn/flash_sm90.cu), where the
  // build and the GPU have it (sm_90a); sync: on mma.sync (nn/kernels/flash_bwd.cuh's dqkv_kernel), as
  // everywhere else. The two launches are mma.sync's only.
  bool flash_wgmma = true;
  bool flash_on_wgmma() const { return flash_wgmma && !flash_two_launches && flash90::available(); }
  // --keep-a on: our fused GEMM keeps A's 128-row panels in shared memory where K <= 384 (nn/gemm_sm90.h);
  // off (the default): it streams A beside B every tile, as day10's step 15 does.
  bool keep_a = false;
  // --store-slots 4 (the default): our fused GEMM's two-output epilogue (fc's forward) stores through four staging
  // slots a consumer beside five k-stages; 2: two beside six, day10's (nn/gemm_sm90.h). The same results.
  int store_slots = 4;
  // --gelu-deriv on (the default): fc's forward keeps gelu'(z) beside gelu(z) instead of the pre-activation z,
  // both from one tanh in its epilogue, and the backward multiplies by it (nn/linear.cuh: deriv_fwd,
  // deriv_path). Where it applies (gelu_deriv_applies): bf16 with the epilogues and the timed choices, our
  // layers (not --backend cudnn), the GELU outputs kept (--recompute on needs z to recompute them), and where
  // our fused GEMM runs (an sm_90 GPU, a width that is a multiple of 8: fc's two GEMMs then fit it), so that
  // the kept derivative never has to do without it. Elsewhere, and with off, fc keeps z and the backward
  // computes gelu'(z), in whichever of cuBLASLt's epilogues and ours the timed choices keep.
  bool gelu_deriv = true;
  // --dw-reduce-kernel on (the default): a layer's weight gradient (K = N, every token of the batch) may run
  // as any algorithm cuBLASLt's heuristic offers, among them those that split K over CTAs and add the parts
  // in a reduce kernel of their own, one more launch beside the chain. off: only algorithms whose own
  // configuration reports an in-place reduction or none (nn/linear.cuh, linear_back). Meant to make each
  // weight gradient one kernel, it does not: the H200 trace of 763c323 had 26 splitKreduce_kernel calls a
  // step either way, after the nvjet split-K kernels the preference lets through (the notes' "Also tried").
  // Either way the timed choices (--lt-search) pick the fastest of what the heuristic offers, timed alone.
  // Only cuBLASLt's take the preference: the tied head's and the embeddings' weight gradients, and a layer's
  // whose bias gradient is timed faster apart (bgrad_in_epilogue), are cuBLAS's plain matmul, which may still
  // add its split-K parts in a kernel of its own.
  bool dw_reduce_kernel = true;
  // --dw-sm-share F (1 here; the command line's default is 0.5 in bf16's one-GPU graph with --dw-stream on, options.h:
  // kDwSmShareDefault): a layer's weight gradient asks cuBLASLt's heuristic for algorithms sized
  // for F of the GPU's SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, made for a concurrent stream using the rest):
  // in the graph the weight gradients run beside the chain of data gradients (--dw-stream on), and a dW sized
  // for every SM holds SMs that the chain's next kernel waits for. The search still times them alone.
  double dw_sm_share = 1;
  int dw_sm_target() {
    if (!(dw_sm_share < 1)) return 0;
    if (sms == 0) {
      int dev = 0;
      CUDA_CHECK(cudaGetDevice(&dev));
      CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    return std::max(1, int(sms * dw_sm_share));
  }
  int sms = 0;  // the GPU's SM count, once asked for
  // What verify_step's checks of the two weight-gradient flags count among the cuBLASLt matmuls built so far:
  // masked, those whose descriptors carry a reduction mask (--dw-reduce-kernel off), and of those, how many
  // picked an algorithm whose configuration reports a reduction scheme outside the mask (outside) or none that
  // could be read (unread: the attribute query failed, no evidence either way); targeted, those built with an
  // SM target (--dw-sm-share below 1: bf16's default). Counted apart, because bf16's default puts a target on
  // every weight gradient: one count of both would see it even where the mask never arrived.
  struct LtVariants {
    int masked = 0, outside = 0, unread = 0, targeted = 0;
  };
  LtVariants lt_variants() const {
    LtVariants v;
    for (const auto& kv : lt_cache) {
      if (!kv.second->ok()) continue;
      const lt::Spec& sp = kv.second->spec();
      v.targeted += sp.sm_target != 0;
      if (sp.reductions == CUBLASLT_REDUCTION_SCHEME_MASK) continue;
      ++v.masked;
      const int r = kv.second->picked_reduction();
      if (r < 0) ++v.unread;
      else if ((uint32_t(r) & ~sp.reductions) != 0) ++v.outside;
    }
    return v;
  }
  bool gelu_deriv_applies() const {
    return gelu_deriv && std::is_same<T, bf16>::value && fuse && lt_search && !on_cudnn() && !recompute_gelu &&
           c.width % 8 == 0 && sm90::available();
  }
  // What fc's forward left in its aux buffer (L.fc): gelu'(z) (true) or z. Set by linear() when it runs fc,
  // read by the backward, so that the two agree even if a setting above changed in between.
  bool fc_holds_deriv = false;
  // --batch-finish on (the default): inside backward(), the column-sum finishes of the fused LayerNorm
  // backward, our flash backward and our fused dGELU GEMM are queued and run a few at a time, one launch for
  // many (nn/finish_queue.cuh); off: each right after its producer, a launch of its own.
  bool batch_finish = true;
  bool pdl = false;  // --pdl on: the chains' kernels of ours as programmatic dependent launches (nn/pdl.cuh)
  FinishQueue finishes;
  bool finishing_later = false;  // inside backward(), with batch_finish
  // Room for a finish to be queued (finishes.push): a slice of the column-sum partials buffer.
  float* finish_slice(size_t floats) {
    if (!finishes.fits(floats)) flush_finishes();
    return finishes.take(floats);
  }
  // The column-sum partials buffer whole, for a kernel that finishes its sums at once.
  float* partials_now() {
    flush_finishes();
    return partial.as<float>();
  }
  void flush_finishes() {
    // Counted as a hand-written kernel only when a launch happened: the cuDNN backend never queues a
    // finish, and counting the name on every call made its "hand-written kernels" one too many.
    if (finishes.flush(s)) {
      hw("ln_partials_finish_many");
      mark(kLayerNorm);
    }
  }
  bool ours_attn_bwd() const {
    return impl == Attn::kCudnn && flash_bwd && k::flash::fits(c.width / c.heads, T_) && k::flash::runs_here();
  }
  View tmp, dln, datt, dqkv, dfc, embed_partial;
  // bf16 on the custom backend: the embedding's gradients as one matmul, dW[wte; wpe] += onehot^T . d(embedding),
  // with onehot[n] = (the token's one-hot row | the position's one-hot row), built each step
  // (k::embed_onehot), and d(embedding) the bf16 copy layer 0's LayerNorm backward writes through the
  // embedding's dropout mask (as every other weight gradient of the bf16 step, from bf16 inputs). The
  // gather-and-sum kernels (fp32 and the cuDNN backend's fallback) walk each token's rows with few loads in
  // flight; the matmul is one pass on the tensor cores (the bench's phase table: "embedding"). The one-hot
  // rows grow as N x (V + T), that is B x T^2: at a long context they cost more memory than the gather
  // did (the buffer table counts them, so a size that does not fit is refused with one line, exit 2, before
  // any allocation: env::require_memory).
  DeviceBuffer oh_embed;
  bool embed_by_matmul() const { return std::is_same<T, bf16>::value && !on_cudnn(); }
  // Dropout (nn/dropout.h): probability drop_p at the embedding's output and at each sublayer's output.
  // The trainer sets the key (the run's seed), the step and, for a data-parallel replica, the index of
  // its first element in the global batch before each forward; `drop` is what the last forward used,
  // so the backward regenerates the same masks. ddrop: d(sublayer output) through the mask.
  double drop_p = 0;
  uint64_t drop_key = 0, drop_first = 0;
  int64_t drop_step = 0;
  dropout::Params drop;
  DeviceBuffer ddrop;
  // --fused-ln (the default): the residual add and the LayerNorm after it in one kernel, and the
  // LayerNorm backward with its parameter gradients and the next dropout in one (nn/kernels/layernorm.cuh).
  bool fused_ln = true;
  // --residual bf16 (res16; bf16 only, with the fused LayerNorm and our layers: gpt::parse_options refuses the
  // rest): the residual stream (xs, x_mid) and its gradient dx stored in bf16 instead of fp32. The fused
  // LayerNorms then move 2 bytes an element of x and dx instead of 4, three of the backward's five row-sized
  // tensors; each block's add is rounded to bf16 once as it is stored ("Mixed precision" in the notes says
  // why fp32 is the default). R below: the stream's element type, float or bf16.
  bool res16 = false;
  size_t res_bytes() const { return res16 ? 2 : 4; }
  template <class F>
  void with_res(F&& f) {  // f(R*) with a null pointer of the residual stream's type R
    if constexpr (std::is_same<T, bf16>::value)
      if (res16) return f(static_cast<bf16*>(nullptr));
    f(static_cast<float*>(nullptr));
  }
  // The stream the step is enqueued on (0: the legacy default stream; the trainer gives its own, which
  // it can capture into a CUDA graph), and the step's changing values in device memory (null: by
  // argument; see k::StepVars).
  cudaStream_t s = 0;
  const k::StepVars* sv = nullptr;
  // --dw-stream on (nn/dw_stream.h; the trainer asks for it where it captures the step): in a captured
  // step the weight gradients' cuBLASLt matmuls run on a second stream, with a cuBLASLt workspace of their
  // own, and dqkv gets a buffer of its own (shared with dfc, the next layer's first write would wait for
  // qkv's weight gradient, which reads dqkv: a window of one LayerNorm backward). Off: neither.
  bool dw_stream = false;
  DwStream dws;
  DeviceBuffer lt_ws_dw, dqkv_own;
  // Whether this launch of a dW matmul goes to the side stream: on, inside a capture.
  bool dw_side() const { return dw_stream && lt::capturing(s); }
  // The chain (stream s) is about to overwrite p: wait for the side stream's reads of it.
  void before_write(const void* p) {
    if (dw_side()) dws.before_write(s, p);
  }
  // --backend cudnn (nn/backend_cudnn.cuh): the layers as cached cuDNN graphs, with their own workspace
  // and the LayerNorm backward's dx (added into the stream's); the census of what stayed ours: each
  // kernel of ours the step launched (hw), and the layers that took the custom path because cuDNN
  // refused their graph here (fell_back).
  Backend backend = Backend::kCustom;
  std::unique_ptr<dnnl::Cache> graphs;
  DeviceBuffer dnn_ws, dnn_dx;
  // The layers around the blocks as cuDNN graphs (bf16): the tokens' and targets' one-hot rows (the
  // embedding's gather and scatter-add become matmuls with them, the loss picks its targets with them)
  // and the constants those graphs read (each element's column index, the positions' one-hot rows, a row
  // of ones for the bias gradients, the weight-decay mask in bf16); one dropout site's mask; the
  // log-softmax and the picked log-probabilities; and two scalars 16 bytes apart (the gradient's norm and
  // AdamW's clip divisor).
  DeviceBuffer oh_tok, oh_tgt, dnn_index, dnn_pos, dnn_ones, dnn_decay, dnn_mask, dnn_logp, dnn_prod, dnn_scal;
  std::unique_ptr<dnnl::Legacy> legacy;  // the reductions the graph API offered no engine for
  bool dnn_loss_ok = false, dnn_norm_ok = false;  // whether their workspace fits dnn_ws (dnn_setup)
  bool dnn_embedded = false;  // this forward's embedding ran as graphs: its one-hot rows are there for the backward
  const float dnn_inv_n = 1.f / float(N);  // by value in the loss gradient's graph: constant, as dnn_eps
  // By value: cuDNN copies it into the kernel's arguments at each execution, and a captured CUDA graph
  // keeps the copy it captured, so it must never change after the first step (const).
  const float dnn_eps = float(gpt::detail::kEps);
  std::set<std::string> hand_written, fell_back;
  int64_t dnn_runs = 0;  // cuDNN graph executions (dnn_run), for --verify's coverage check
  static constexpr int64_t kDnnWorkspace = int64_t(256) << 20;  // above it a plan is refused (the census says)
  bool on_cudnn() const { return backend == Backend::kCudnn; }
  bool cudnn_bf16() const { return on_cudnn() && std::is_same<T, bf16>::value; }
  void hw(const char* kernel) {
    if (on_cudnn()) hand_written.insert(kernel);
  }

  Model(const gpt::Config& cfg, int b, Attn want, bool fusion = true, double dropout_p = 0,
        Backend be = Backend::kCustom, bool recompute = false, bool flash = true, bool dw = false,
        bool residual_bf16 = false)
      : c(cfg),
        lay(cfg),
        B(b),
        T_(cfg.context),
        N(b * cfg.context),
        fuse(fusion),
        recompute_gelu(recompute),
        flash_bwd(flash && be == Backend::kCustom),  // the cuDNN backend keeps cuDNN's attention backward
        drop_p(dropout_p),
        dw_stream(dw && be == Backend::kCustom),  // (the cuDNN backend runs its own graphs)
        backend(be) {
    CUBLAS_CHECK(cublasCreate(&blas));
    CUBLAS_CHECK(cublasLtCreate(&blas_lt));
    CUBLAS_CHECK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));  // fp32 stays fp32: no TF32 (but by set_tf32)
    CUDNN_CHECK(cudnnCreate(&dnn));
    if (on_cudnn()) {  // cuDNN's attention where it runs (auto); kCudnn: or skip
      graphs = std::make_unique<dnnl::Cache>(kDnnWorkspace);
      if (want != Attn::kCudnn) want = Attn::kAuto;
    }
    choose_attention(want);  // nn/attention.cuh: which attention, before the table sizes its buffers
    // Whether our fused-epilogue GEMM runs on this GPU (nn/gemm_sm90.h): asked here, eagerly, so that the
    // answer (a probe kernel and a copy, once per device) is known before any CUDA graph capture.
    if (std::is_same<T, bf16>::value) (void)sm90::available();
    // --residual bf16: bf16 steps on our layers only (gpt::parse_options refuses the rest); before the table,
    // which sizes the stream's buffers by it.
    // Asked for where it cannot run: refused here too (a caller that bypassed the command line), not dropped.
    if (residual_bf16 && (!std::is_same<T, bf16>::value || be != Backend::kCustom))
      throw std::logic_error("Model: --residual bf16 needs the bf16 model on our layers (not fp32, not --backend cudnn)");
    res16 = residual_bf16;
    xs.resize(size_t(c.layers) + 1);
    layer.resize(size_t(c.layers));
    const std::vector<BufferSpec> table = buffers();
    size_t total = 0;
    for (const BufferSpec& s : table) total += s.bytes;
    env::require_memory(kProg, total, "the model's parameters, optimizer state and one batch's activations");
    // Every activation and scratch buffer starts as NaN (0xFF bytes): an element some kernel or
    // library call fails to write poisons the loss and the checks, instead of reading as a stale zero.
    // (It also gives compute-sanitizer's initcheck a defined starting pattern. Without it, initcheck
    // reported reads of bf16 matmul outputs written by cuBLASLt's tensor-core kernels as uninitialized,
    // although the GPU-vs-CPU checks show every one of those values is right: most likely stores it
    // does not track (an inference, not established).)
    for (const BufferSpec& s : table) {
      s.buf->alloc(s.bytes);
      if (s.poisoned && s.bytes) poison(s.buf->as(), s.bytes);
    }
    finishes.bind(partial.as<float>(), partial.bytes() / sizeof(float));
    tmp = dln = datt = View{scratch_small.as(), scratch_small.bytes()};
    dqkv = dfc = embed_partial = View{scratch_big.as(), scratch_big.bytes()};
    if (dw_stream) {
      dqkv = View{dqkv_own.as(), dqkv_own.bytes()};
      dws.create(8 * c.layers + 3);  // per dW launch (4 a layer) a fork and a read; the loss's mean's; one join
    }
    if (impl == Attn::kMatmul) build_head_pointers();
    use_stream(0);  // the workspace
    to_device(decay.as<uint8_t>(), train::decay_mask(c));
    CUDA_CHECK(cudaMemset(m.as(), 0, m.bytes()));
    CUDA_CHECK(cudaMemset(v.as(), 0, v.bytes()));
    if (cudnn_bf16()) dnn_setup();  // nn/backend_cudnn.cuh
  }
  ~Model() {
    if (dws.created()) cudaStreamSynchronize(dws.side());
    graphs.reset();
    sdpa.reset();
    lt_cache.clear();
    cublasLtDestroy(blas_lt);
    cudnnDestroy(dnn);
    cublasDestroy(blas);
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // --precision tf32: the same fp32 model with its matmuls on the TF32 tensor cores. Chosen once, before
  // the first matmul (the cuBLASLt descriptors built on first use carry the compute type): the
  // cuBLAS handle's math mode carries it to every cuBLAS call (nn/matmul.cuh's compute_type), the
  // model's flag to the cuBLASLt ones (nn/linear.cuh's lt_get). bf16 has no TF32 to turn on.
  void set_tf32(bool on) {
    if (on == tf32) return;
    if ((on && !std::is_same<T, float>::value) || !lt_cache.empty())
      throw std::logic_error("Model::set_tf32: fp32 models only, before the first matmul");
    tf32 = on;
    CUBLAS_CHECK(cublasSetMathMode(blas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    if (on) ++tf32_models();
  }
  // How many models of this process turned TF32 on (gpt.cu: proof that a --precision tf32 run's did).
  static std::atomic<int>& tf32_models() {
    static std::atomic<int> n{0};
    return n;
  }

  // Every buffer the model owns, with its size for this configuration: allocation, NaN poisoning and
  // the memory check above all read this one table, so a new buffer is one line here.
  std::vector<BufferSpec> buffers() {
    const size_t C = size_t(c.width), V = size_t(c.vocab), n = lay.total, NN = size_t(N), H = size_t(c.heads),
                 E = sizeof(T), BHTT = size_t(B) * H * T_ * T_;
    const bool bf = std::is_same<T, bf16>::value, cudnn = impl == Attn::kCudnn, cud = cudnn_bf16();
    const size_t pe = impl == Attn::kMatmul ? E : 4;  // the naive kernels keep P in fp32
    const size_t embed_bytes = size_t(k::embed_slices(N)) * V * C * 4;
    std::vector<BufferSpec> t = {
        {"params (fp32 master)", &params, n * 4, false},
        {"params (bf16 copy)", &params_t, bf ? n * E : 0, false},
        {"grads", &grads, n * 4, false},
        {"adam m", &m, n * 4, false},
        {"adam v", &v, n * 4, false},
        {"weight-decay mask", &decay, n, false},
        // One workspace for cuBLAS and cuBLASLt: their calls run one after another on the model's stream.
        {"cuBLAS/cuBLASLt workspace", &lt_ws, kLtWorkspace, false},
        {"cuBLASLt workspace of the weight gradients' stream (--dw-stream)", &lt_ws_dw, dw_stream ? kLtWorkspace : 0,
         false},
        {"dqkv, its own (--dw-stream)", &dqkv_own, dw_stream ? NN * 3 * C * E : 0, true},
        {"tokens", &tok, NN * 4, true},
        {"targets", &tgt, NN * 4, true},
        {"losses", &loss, NN * 4, true},
        {"logits", &logits, NN * V * 4, true},
        {"dlogits", &dlogits, NN * V * E, true},
        {"final ln", &lnf, NN * C * E, true},
        {"final ln mean", &lnf_mean, NN * 4, true},
        {"final ln rstd", &lnf_rstd, NN * 4, true},
        {"dx (the residual stream's gradient: fp32, or bf16 with --residual bf16)", &dx, NN * C * res_bytes(), true},
        {"dx (bf16 copy)", &dx_t, bf && !res16 ? NN * C * E : 0, true},
        {"scratch: sublayer out / d(att) / d(ln)", &scratch_small, NN * C * E, true},
        {"scratch: dqkv / dfc / embedding partials", &scratch_big, std::max(NN * 4 * C * E, embed_bytes), true},
        {"attention dS", &dS, cudnn ? 0 : BHTT * pe, true},
        {"cuDNN dsum", &dsum, cudnn ? sdpa->dsum_elems() * 4 : 0, true},  // (also our two launches' Dsum)
        {"cuDNN dq accumulator", &dq_acc, cudnn && !ours_attn_bwd() ? sdpa->dq_acc_elems() * 4 : 0, true},
        {"cuDNN workspace", &ws, cudnn ? sdpa->workspace() : 0, false},
        {"column-sum partials", &partial,  // widest: a bias of 4C, the fused LayerNorm's per-block partials,
                                           // the flash backward's qkv bias partials (per 64 rows), or the
                                           // fused dGELU GEMM's fc bias partials (per 128 rows)
         std::max({size_t(k::col_chunks(N)) * 4 * C, size_t(k::ln_bwd_blocks(N, k::kLnMinRowsPerWarp)) * 3 * C,
                   ours_attn_bwd() ? size_t(N / k::flash::kBlk) * 3 * C : 0,
                   bf ? size_t((N + sm90::kColsumRows - 1) / sm90::kColsumRows) * 4 * C : 0}) *
             4,
         true},
        {"norm partials", &norm_partial, size_t(k::kNormBlocks) * 4, true},
        {"fc2 weights transposed (our fused dGELU GEMM)", &w_t, bf ? size_t(c.layers) * wt_stride() * E : 0, true},
        {"sum of squares", &sumsq, 4, true},
        {"dropout: d(sublayer out) through the mask", &ddrop, drop_p > 0 ? NN * C * E : 0, true},
        {"cuDNN graphs workspace", &dnn_ws, on_cudnn() ? size_t(kDnnWorkspace) : 0, false},
        {"cuDNN LayerNorm backward dx", &dnn_dx, on_cudnn() ? NN * C * 4 : 0, true},
        {"gelu out (shared: --recompute on)", &gl_shared, recompute_gelu ? NN * 4 * C * E : 0, true},
        {"one-hot rows of tokens | positions (bf16 embedding backward)", &oh_embed,
         embed_by_matmul() ? NN * (V + size_t(T_)) * E : 0, true},
        {"cuDNN: one-hot tokens", &oh_tok, cud ? NN * V * 2 : 0, true},
        {"cuDNN: one-hot targets", &oh_tgt, cud ? NN * V * 4 : 0, true},
        {"cuDNN: column index (constant)", &dnn_index, cud ? NN * V * 4 : 0, false},
        {"cuDNN: positions' one-hot rows (constant)", &dnn_pos, cud ? NN * size_t(T_) * 2 : 0, false},
        {"cuDNN: ones (constant)", &dnn_ones, cud ? NN * 2 : 0, false},
        {"cuDNN: weight-decay mask in bf16 (constant)", &dnn_decay, cud ? n * 2 : 0, false},
        {"cuDNN: one dropout site's mask", &dnn_mask, cud && drop_p > 0 ? NN * C * 2 : 0, true},
        {"cuDNN: log-softmax", &dnn_logp, cud ? NN * V * 4 : 0, true},
        {"cuDNN: picked log-probabilities", &dnn_prod, cud ? NN * V * 4 : 0, true},
        {"cuDNN: the gradient's norm, AdamW's clip divisor", &dnn_scal, cud ? size_t(2 * 16) : 0, true},
    };
    for (auto& x : xs) t.push_back({"residual stream", &x, NN * C * res_bytes(), true});
    for (Layer& L : layer) {
      const std::vector<BufferSpec> per = {
          {"ln1", &L.ln1, NN * C * E, true},
          {"ln1 mean", &L.ln1_mean, NN * 4, true},
          {"ln1 rstd", &L.ln1_rstd, NN * 4, true},
          {"qkv", &L.qkv, NN * 3 * C * E, true},
          {"attention out", &L.att, NN * C * E, true},
          {"x mid-block", &L.x_mid, NN * C * res_bytes(), true},
          {"ln2", &L.ln2, NN * C * E, true},
          {"ln2 mean", &L.ln2_mean, NN * 4, true},
          {"ln2 rstd", &L.ln2_rstd, NN * 4, true},
          {"fc (pre-GELU)", &L.fc, NN * 4 * C * E, true},
          {"gelu out (--recompute off)", &L.gl, recompute_gelu ? 0 : NN * 4 * C * E, true},
          {"attention P", &L.P, cudnn ? 0 : BHTT * pe, true},
          {"cuDNN softmax stats", &L.stats, cudnn ? size_t(B) * H * T_ * 4 : 0, true},
      };
      t.insert(t.end(), per.begin(), per.end());
    }
    return t;
  }

  float* P(size_t off) const { return params.as<float>() + off; }
  float* G(size_t off) const { return grads.as<float>() + off; }
  // The weights the matmuls read: the master copy in fp32 mode, the bf16 copy in bf16 mode.
  const T* W(size_t off) const {
    if constexpr (std::is_same<T, float>::value)
      return params.as<float>() + off;
    else
      return params_t.as<T>() + off;
  }
  T* dxT() const {  // dx in T, the next matmul's input: dx itself where it is already in T
    if constexpr (std::is_same<T, float>::value)
      return dx.as<float>();
    else
      return res16 ? dx.as<T>() : dx_t.as<T>();
  }
  void mark(Phase p) {
    if (ph) ph->mark(p, s);
  }
  // Enqueue everything on `st` from now on (the matmuls through the cuBLAS handle; cuDNN and cuBLASLt
  // take the stream per call).
  // cuBLAS gets a workspace of our own, set again after each cublasSetStream (which resets it): then a
  // captured step (CUDA graph) and an eager one use the same workspace, with no allocation inside the
  // capture, and so the same algorithms.
  void use_stream(cudaStream_t st) {
    s = st;
    CUBLAS_CHECK(cublasSetStream(blas, st));
    CUBLAS_CHECK(cublasSetWorkspace(blas, lt_ws.as(), lt_ws.bytes()));
  }
  int rows_grid() const { return (N + 7) / 8; }  // 8 warps (rows) per 256-thread block

  // nn/linear.cuh: the matmuls with their bias (and GELU), forward and backward.
  lt::Tuned* lt_get(const lt::Spec& sp, cudaDataType_t out_type);
  bool bgrad_in_epilogue(lt::Tuned* mm, const T* in, const T* dout, int I, int O);
  bool din_in_lt(lt::Tuned* mm, const T* dout, size_t w, int I, int O);
  bool fused_fits(int M, int Nn, int K, const void* a, const void* bt, const void* c, const void* aux) const;
  const T* transposed(size_t w, int I, int O);
  bool in_backward = false, wt_ready = false;  // (transposed: every fc2 weight transposed in this backward)
  // w_t's slots, one a layer: 4C x C rounded up to 64 elements (each slot 128-byte aligned, as TMA needs).
  size_t wt_stride() const { return (size_t(4) * c.width * c.width + 63) / 64 * 64; }
  Path fwd_path(lt::Tuned* mm, const T* in, size_t w, size_t b, T* out, T* gelu_out, int I, int O);
  void fwd_run(Path p, lt::Tuned* mm, const T* in, size_t w, size_t b, T* out, T* gelu_out, int I, int O, bool marks);
  Path dgelu_path(lt::Tuned* mm, const T* dout, size_t w, const T* gelu_pre, T* din, int I, int O);
  void dgelu_run(Path p, lt::Tuned* mm, const T* dout, size_t w, const T* gelu_pre, T* din, int I, int O,
                 float* colsum = nullptr);
  void dgelu_pass(const T* gelu_pre, T* din, int I);
  // --gelu-deriv: fc's forward keeping gelu' (our fused GEMM or the plain matmul and a pass of ours, timed
  // against each other once per shape), and its backward's path (the same two, the multiply in each).
  void deriv_fwd(const T* in, size_t w, size_t b, T* out, T* gelu_out, int I, int O);
  Path deriv_path(bool fwd, int I, int O, const void* a, const void* bt, const void* c, const void* aux,
                  const std::function<void(Path, T*, T*)>& run, size_t n, bool two_outputs,
                  const std::function<void()>& before_timing = nullptr);
  void linear(const T* in, size_t w, size_t b, T* out, int I, int O, T* gelu_out = nullptr);
  // bias_done: the bias gradient is already added (by the LayerNorm backward that wrote dout: ln_back_to;
  // for fc, by the fused dGELU GEMM of fc2's backward: din_bias).
  // din_bias (with gelu_pre): where our fused dGELU GEMM runs, din's column sums (the bias gradient of the
  // layer that made din's pre-activation) are added into it too; returns whether they were.
  bool linear_back(const T* in, size_t w, size_t b, const T* dout, T* din, int I, int O, const T* gelu_pre = nullptr,
                   bool bias_done = false, float* din_bias = nullptr);
  void bias_grad(const T* dout, size_t b, int O);  // db += column sums of dout
  // nn/attention.cuh: the three attentions.
  void choose_attention(Attn want);
  void build_head_pointers();
  void attention_fwd(Layer& L);
  bool attention_bwd(Layer& L, float* bias_grad = nullptr);
  // nn/optimizer.cuh: gradient norm + AdamW, and the bf16 weight copy.
  // nn/backend_cudnn.cuh: the layers as cuDNN graphs (false: not here, take the custom path).
  bool dnn_run(cg::Graph* g, const std::vector<std::pair<std::string, const void*>>& ptrs);
  cg::Graph* dnn_matmul(const std::string& what, int64_t M, int64_t K, int64_t Nn, bool a_t, bool b_t,
                        cudnnDataType_t ct);
  cg::Graph* dnn_colsum(int64_t R, int64_t C);
  bool dnn_ln_fwd(const float* x, size_t w, size_t b, T* y, float* mean, float* rstd);
  bool dnn_add(float* y, const float* a, const T* b, uint32_t site);
  void dnn_setup();
  void drop_mask(uint32_t site);
  bool dnn_dropped(uint32_t site, T* y);
  cg::Graph* dropped_graph();
  bool dnn_embed_fwd();
  bool dnn_embed_back();
  bool dnn_loss();
  bool dnn_adamw(const train::AdamW& opt, double lr, int64_t t, double clip, float* norm_out);
  bool dnn_ln_back(const float* x, size_t w, size_t b, const float* mean, const float* rstd, const T* dy,
                   bool accumulate);
  bool dnn_linear(const T* in, size_t w, size_t b, T* out, int I, int O, T* gelu_out);
  bool dnn_gelu(const T* pre, T* act, int O);  // act = gelu(pre), N x O (--recompute on)
  cg::Graph* gelu_graph(int O);
  bool dnn_linear_back(const T* in, size_t w, size_t b, const T* dout, T* din, int I, int O, const T* gelu_pre);
  void head_fwd();
  void head_back();
  void loss_mean(float* out);
  void optimizer_step(const train::AdamW& opt, double lr, int64_t t, double clip, float* norm_out);
  // --adamw-overlap on (run/trainer.cuh): the step ends with the gradient's norm; its AdamW runs in the next
  // step, one range of parameters at a time, beside the forward (nn/optimizer.cuh).
  void optimizer_norm(float* norm_out);
  void adamw_range(cudaStream_t st, size_t begin, size_t end, const train::AdamW& opt, double lr, int64_t t,
                   double clip, const k::UpdateVars* uv);
  void sync_weights();

  void ln_fwd(const float* x, size_t w, size_t b, T* y, float* mean, float* rstd) {
    if (on_cudnn() && dnn_ln_fwd(x, w, b, y, mean, rstd)) return mark(kLayerNorm);
    if (on_cudnn()) fell_back.insert("layernorm forward");
    hw("layernorm_fwd");
    k::layernorm_fwd<T><<<rows_grid(), 256, 0, s>>>(x, P(w), P(b), y, mean, rstd, N, c.width);
    LAUNCH_CHECK();
    mark(kLayerNorm);
  }
  // dx (+)= LayerNorm backward; dx_t gets the result in T; the gains' and biases' gradients by column sums.
  void ln_back(const float* x, size_t w, size_t b, const float* mean, const float* rstd, const T* dy, bool accumulate) {
    if (on_cudnn() && dnn_ln_back(x, w, b, mean, rstd, dy, accumulate)) return mark(kLayerNorm);
    if (on_cudnn()) fell_back.insert("layernorm backward");
    hw("layernorm_bwd"), hw("ln_param_partials"), hw("colsum_finish");
    const int C = c.width, chunks = k::col_chunks(N);
    k::layernorm_bwd<T><<<rows_grid(), 256, 0, s>>>(x, P(w), mean, rstd, dy, dx.as<float>(), dxT(), N, C, accumulate);
    LAUNCH_CHECK();
    float* part = partials_now();
    k::ln_param_partials<T><<<dim3((C + 31) / 32, chunks), dim3(32, 8), 0, s>>>(x, mean, rstd, dy, part, N, C);
    LAUNCH_CHECK();
    k::colsum_finish<<<grid_for(size_t(2) * C), 256, 0, s>>>(part, chunks, 2, C, G(w), G(b));
    LAUNCH_CHECK();
    mark(kLayerNorm);
  }
  // The fused LayerNorm (--fused-ln): this width fits its vector kernels (C a multiple of 4, at most
  // 1024; the batch's first element, for dropout's groups of 4, is then a multiple of 4 too).
  bool ln_fused() const { return !on_cudnn() && fused_ln && c.width % 4 == 0 && c.width <= 128 * k::kLnMaxChunks; }
  template <class F>
  void with_chunks(F&& f) {  // f(K) with K = chunks of 4 per lane, a compile-time constant
    switch ((c.width / 4 + k::kWarp - 1) / k::kWarp) {
      case 1:
        return f(std::integral_constant<int, 1>());
      case 2:
        return f(std::integral_constant<int, 2>());
      case 3:
        return f(std::integral_constant<int, 3>());
      case 4:
        return f(std::integral_constant<int, 4>());
      case 5:
        return f(std::integral_constant<int, 5>());
      case 6:
        return f(std::integral_constant<int, 6>());
      case 7:
        return f(std::integral_constant<int, 7>());
      default:
        return f(std::integral_constant<int, 8>());
    }
  }
  // x_out = a + drop(y) at `site` (y null: x is a, nothing written), then the LayerNorm of x. x_out and a
  // are the residual stream's (R: with_res).
  void residual_ln_fwd(void* x_out, const void* a, const T* y, uint32_t site, size_t w, size_t b, T* ln, float* mean,
                       float* rstd) {
    with_res([&](auto r) {
      using R = std::remove_pointer_t<decltype(r)>;
      with_chunks([&](auto K) {
        pdl::launch(pdl, k::residual_layernorm_fwd<T, decltype(K)::value, R>, dim3(unsigned(rows_grid())), dim3(256), 0,
                    s, static_cast<R*>(x_out), static_cast<const R*>(a), y, P(w), P(b), ln, mean, rstd, N, c.width,
                    drop, site, sv);
      });
    });
    LAUNCH_CHECK();
    mark(kLayerNorm);
  }
  static constexpr uint32_t kNoSite = 0xFFFFFFFFu;  // no dropout site follows (the embedding's is done apart)
  // The LayerNorm backward into dx, then d(the sublayer output before it) for the next linear_back: dx
  // through `site`'s mask (in ddrop), or dx itself in T without dropout. Fused: one kernel writes both
  // and the parameter gradients' partials; unfused: ln_back, then dropout_bwd.
  // With next_bias (the bias of the linear layer whose output gradient that is) the fused kernel also adds
  // up its column sums, the bias gradient, from the values it stores (*bias_done then says so, and
  // linear_back skips it): the bias-gradient epilogue read dout a second time, a pass of its own.
  static constexpr size_t kNoBias = ~size_t(0);
  // (x: the residual stream's; fp32 off the fused path, which --residual bf16 requires.)
  const T* ln_back_to(const void* x, size_t w, size_t b, const float* mean, const float* rstd, const T* dy,
                      bool accumulate, uint32_t site, size_t next_bias = kNoBias, bool* bias_done = nullptr) {
    if (bias_done) *bias_done = false;
    before_write(dxT()), before_write(ddrop.as());  // where d(the sublayer's output) goes: a dW may read it
    if (!ln_fused()) {
      if (res16) throw std::logic_error("Model: --residual bf16 runs on the fused LayerNorm only");
      ln_back(static_cast<const float*>(x), w, b, mean, rstd, dy, accumulate);
      return site == kNoSite ? nullptr : through_dropout(site);
    }
    T* dout = site == kNoSite ? nullptr : drop.on ? ddrop.as<T>() : dxT();
    float* gd = dout && next_bias != kNoBias && bias_done ? G(next_bias) : nullptr;
    const int rows = ln_rows_per_warp(x, w, mean, rstd, dy, dout != nullptr, accumulate, site);
    const size_t floats = size_t(k::ln_bwd_blocks(N, rows)) * (gd ? 3 : 2) * c.width;
    float* part = finishing_later ? finish_slice(floats) : partial.as<float>();
    ln_bwd_fused(rows, x, w, mean, rstd, dy, dx.as(), dout, part, G(w), G(b), gd, accumulate, site, finishing_later);
    mark(kLayerNorm);
    if (bias_done) *bias_done = gd != nullptr;
    return dout;
  }
  // The fused backward (rows_per_warp rows a warp), then its partials added into the gradients gw, gb
  // (and dout's column sums into gd, if not null): at once, or (later) queued for flush_finishes.
  // (x and dxp: the residual stream's and its gradient's, R: with_res.)
  void ln_bwd_fused(int rows_per_warp, const void* x, size_t w, const float* mean, const float* rstd, const T* dy,
                    void* dxp, T* dout, float* part, float* gw, float* gb, float* gd, bool accumulate, uint32_t site,
                    bool later = false) {
    const int C = c.width, blocks = k::ln_bwd_blocks(N, rows_per_warp), sums = gd ? 3 : 2;
    with_res([&](auto r) {
      using R = std::remove_pointer_t<decltype(r)>;
      with_chunks([&](auto K) {
        constexpr int kK = decltype(K)::value;
        pdl::launch(pdl, k::layernorm_bwd_fused<T, kK, R>, dim3(unsigned(blocks)), dim3(256),
                    k::ln_bwd_smem_bytes<T, kK, R>(C), s, static_cast<const R*>(x), P(w), mean, rstd, dy,
                    static_cast<R*>(dxp), dout, part, N, C, rows_per_warp, accumulate, drop, site, sv, gd != nullptr);
      });
    });
    LAUNCH_CHECK();
    if (later) {
      finishes.push(part, blocks, C, sums, gw, gb, gd);
      return;
    }
    // The finish as a programmatic dependent launch, whatever --pdl says: it is scheduled while the backward's
    // last blocks run, instead of after them (a few us of launch gap a call, 13 calls a step). Not counted
    // among --pdl's launches (nn/pdl.cuh), which --verify counts for the chains' kernels alone.
    pdl::launch_uncounted(true, k::ln_partials_finish, dim3(unsigned(sums * C + 31) / 32), dim3(32, k::kLnFinishRows), 0,
                          s, static_cast<const float*>(part), blocks, C, sums, gw, gb, gd);
  }
  // Rows per warp of the fused backward: k::kLnRowsPerWarp, or in bf16 with --lt-search each of
  // k::kLnRowsChoices timed once per shape on the real inputs, into scratch outputs, and the fastest kept
  // for the process (nn/lt_tuned.cuh's memo, as the matmuls' choices). fp32 keeps the fixed one: its
  // sums' order, and so its bits, stay the same from one process to the next.
  int ln_rows_per_warp(const void* x, size_t w, const float* mean, const float* rstd, const T* dy, bool with_dout,
                       bool accumulate, uint32_t site) {
    if (!lt_search || !std::is_same<T, bf16>::value) return k::kLnRowsPerWarp;
    const std::string key = "LayerNorm backward rows per warp " + std::to_string(c.width) + "x" + std::to_string(N) +
                            (res16 ? ", bf16 residual stream" : "");
    const int known = lt::recall(key);
    if (known >= 0) return known;
    if (lt::capturing(s)) return k::kLnRowsPerWarp;
    const size_t NC = size_t(N) * c.width;
    void* dx_s = nullptr;
    float *part_s = nullptr, *g_s = nullptr;
    T* dout_s = nullptr;
    CUDA_CHECK(cudaMalloc(&dx_s, NC * res_bytes()));
    CUDA_CHECK(cudaMemsetAsync(dx_s, 0, NC * res_bytes(), s));  // accumulate reads it
    CUDA_CHECK(cudaMalloc(&part_s, partial.bytes()));
    CUDA_CHECK(cudaMalloc(&g_s, size_t(3) * c.width * sizeof(float)));
    CUDA_CHECK(cudaMemsetAsync(g_s, 0, size_t(3) * c.width * sizeof(float), s));
    if (with_dout) CUDA_CHECK(cudaMalloc(&dout_s, NC * sizeof(T)));
    constexpr int n = int(sizeof(k::kLnRowsChoices) / sizeof(int));
    float t[n];
    lt::time_each(s, n, t, [&](int i) {
      ln_bwd_fused(k::kLnRowsChoices[i], x, w, mean, rstd, dy, dx_s, dout_s, part_s, g_s, g_s + c.width,
                   dout_s ? g_s + 2 * c.width : nullptr, accumulate, site);
    });
    CUDA_CHECK(cudaFree(dx_s));
    CUDA_CHECK(cudaFree(part_s));
    CUDA_CHECK(cudaFree(g_s));
    if (dout_s) CUDA_CHECK(cudaFree(dout_s));
    int best = 0;
    std::string note;
    for (int i = 0; i < n; ++i) {
      if (t[i] < t[best]) best = i;
      note += std::to_string(k::kLnRowsChoices[i]) + ": " + std::to_string(int(1e3 * t[i] + 0.5)) + " us, ";
    }
    note += "kept " + std::to_string(k::kLnRowsChoices[best]);
    lt::remember(key, k::kLnRowsChoices[best], note);
    std::printf("%s: %s\n", key.c_str(), note.c_str());
    return k::kLnRowsChoices[best];
  }
  // d(sublayer output) for the backward: dx through `site`'s mask (in ddrop), or dx itself without dropout.
  const T* through_dropout(uint32_t site) {
    if (!drop.on) return dxT();
    if (on_cudnn() && dnn_dropped(site, ddrop.as<T>())) {
      mark(kResidual);
      return ddrop.as<T>();
    }
    if (on_cudnn()) fell_back.insert("dropout backward");
    hw("dropout_bwd");
    const size_t NC = size_t(N) * c.width;
    k::dropout_bwd<T><<<grid_for(NC), 256, 0, s>>>(dx.as<float>(), ddrop.as<T>(), NC, drop, site, sv);
    LAUNCH_CHECK();
    mark(kResidual);
    return ddrop.as<T>();
  }
  // Forward of the batch in tok/tgt: per-row losses in `loss`, dlogits (in T) ready for the backward.
  // train: with dropout (if drop_p > 0); false for validation and generation.
  void forward(bool train = true) {
    const int C = c.width;
    const size_t NC = size_t(N) * C;
    drop = dropout::Params();
    if (train && drop_p > 0) drop = dropout::make(drop_p, drop_key, drop_step), drop.first = drop_first;
    const bool fused = ln_fused();
    const auto reading = [&](int i) {
      if (on_range_read) on_range_read(i);
    };
    reading(0);
    dnn_embedded = on_cudnn() && dnn_embed_fwd();
    if (!dnn_embedded) {
      if (on_cudnn()) fell_back.insert("embedding forward");
      hw("embed_fwd");
      if (C % 4 == 0)
        with_res([&](auto r) {
          using R = std::remove_pointer_t<decltype(r)>;
          if (NC / 4 <= size_t(INT32_MAX) / 2)  // (room for the grid stride past the end)
            k::embed_fwd_vec<int, R><<<grid_for(NC / 4), 256, 0, s>>>(tok.as<int>(), P(lay.wte), P(lay.wpe),
                                                                      xs[0].as<R>(), N, T_, C, drop, sv);
          else
            k::embed_fwd_vec<long long, R><<<grid_for(NC / 4), 256, 0, s>>>(tok.as<int>(), P(lay.wte), P(lay.wpe),
                                                                            xs[0].as<R>(), N, T_, C, drop, sv);
        });
      else
        k::embed_fwd<<<grid_for(NC), 256, 0, s>>>(tok.as<int>(), P(lay.wte), P(lay.wpe), xs[0].as<float>(), N, T_, C,
                                                  drop, sv);
      LAUNCH_CHECK();
    }
    mark(kEmbed);
    reading(1);
    if (fused)  // block 0's ln1 (every later LayerNorm rides on the residual add before it)
      residual_ln_fwd(nullptr, xs[0].as<float>(), nullptr, kNoSite, lay.layer[0].ln1_w, lay.layer[0].ln1_b,
                      layer[0].ln1.as<T>(), layer[0].ln1_mean.as<float>(), layer[0].ln1_rstd.as<float>());
    for (int l = 0; l < c.layers; ++l) {
      auto& L = layer[size_t(l)];
      const auto& Wl = lay.layer[size_t(l)];
      if (!fused && (l == 0 || !on_cudnn()))  // cudnn: residual_then_ln below wrote it already
        ln_fwd(xs[size_t(l)].as<float>(), Wl.ln1_w, Wl.ln1_b, L.ln1.as<T>(), L.ln1_mean.as<float>(),
               L.ln1_rstd.as<float>());
      linear(L.ln1.as<T>(), Wl.qkv_w, Wl.qkv_b, L.qkv.as<T>(), C, 3 * C);
      attention_fwd(L);
      linear(L.att.as<T>(), Wl.proj_w, Wl.proj_b, tmp.as<T>(), C, C);
      residual_then_ln(L.x_mid.as<float>(), xs[size_t(l)].as<float>(), dropout::site_attn(l), Wl.ln2_w, Wl.ln2_b,
                       L.ln2.as<T>(), L.ln2_mean.as<float>(), L.ln2_rstd.as<float>());
      linear(L.ln2.as<T>(), Wl.fc_w, Wl.fc_b, L.fc.as<T>(), C, 4 * C, gelu_out(L));  // fc keeps the pre-activation
      linear(gelu_out(L), Wl.fc2_w, Wl.fc2_b, tmp.as<T>(), 4 * C, C);
      // The LayerNorm after this block: the next block's ln1, or the final one.
      const bool last = l + 1 == c.layers;
      if (!last) reading(l + 2);  // the next block's ln1
      Layer* nx = last ? nullptr : &layer[size_t(l) + 1];
      const size_t nw = last ? lay.lnf_w : lay.layer[size_t(l) + 1].ln1_w,
                   nb = last ? lay.lnf_b : lay.layer[size_t(l) + 1].ln1_b;
      residual_then_ln(xs[size_t(l) + 1].as<float>(), L.x_mid.as<float>(), dropout::site_mlp(l), nw, nb,
                       last ? lnf.as<T>() : nx->ln1.as<T>(), last ? lnf_mean.as<float>() : nx->ln1_mean.as<float>(),
                       last ? lnf_rstd.as<float>() : nx->ln1_rstd.as<float>());
    }
    head_fwd();  // the tied head, fp32 logits (nn/head.cuh)
    if (!(on_cudnn() && dnn_loss())) {
      if (on_cudnn()) fell_back.insert("loss");
      hw("softmax_xent");
      k::softmax_xent<T><<<rows_grid(), 256, 0, s>>>(logits.as<float>(), tgt.as<int>(), loss.as<float>(),
                                                     dlogits.as<T>(), N, c.vocab);
      LAUNCH_CHECK();
    }
    mark(kLoss);
  }
  // x_out = a + drop(tmp) at `site`, then the LayerNorm that reads x_out: one fused kernel, or the
  // residual add and, where a LayerNorm follows inside a block (ln2) or at the end (lnf), its own pass.
  // (x_out and a: the residual stream's; fp32 off the fused path, which --residual bf16 requires.)
  void residual_then_ln(void* x_out_v, const void* a_v, uint32_t site, size_t w, size_t b, T* ln, float* mean,
                        float* rstd) {
    if (ln_fused()) return residual_ln_fwd(x_out_v, a_v, tmp.as<T>(), site, w, b, ln, mean, rstd);
    if (res16) throw std::logic_error("Model: --residual bf16 runs on the fused LayerNorm only");
    float* x_out = static_cast<float*>(x_out_v);
    const float* a = static_cast<const float*>(a_v);
    const size_t NC = size_t(N) * c.width;
    if (on_cudnn() && dnn_add(x_out, a, tmp.as<T>(), site)) {
      mark(kResidual);
      return ln_fwd(x_out, w, b, ln, mean, rstd);
    }
    if (on_cudnn()) fell_back.insert("residual add");
    hw("residual_add");
    k::residual_add<T><<<grid_for(NC), 256, 0, s>>>(x_out, a, tmp.as<T>(), NC, drop, site, sv);
    LAUNCH_CHECK();
    mark(kResidual);
    ln_fwd(x_out, w, b, ln, mean, rstd);
  }

  // The MLP's GELU output: layer L's own buffer, or (--recompute on) the one they share.
  T* gelu_out(Layer& L) const { return recompute_gelu ? gl_shared.as<T>() : L.gl.as<T>(); }
  // --recompute on: gelu(fc) again, from the kept (rounded) pre-activation, into the shared buffer: as
  // the matmul-apart path (bias_gelu_vec) computes it. cuDNN's backend: its own GELU graph.
  void gelu_again(Layer& L) {
    const size_t n = size_t(N) * 4 * c.width;
    constexpr size_t V = 16 / sizeof(T);
    if (on_cudnn() && dnn_gelu(L.fc.as<T>(), gelu_out(L), 4 * c.width)) return mark(kGelu);
    if (on_cudnn()) fell_back.insert("GELU recompute");
    if (n % V == 0) {
      hw("gelu_fwd_vec");
      k::gelu_fwd_vec<T><<<grid_for(n / V), 256, 0, s>>>(L.fc.as<T>(), gelu_out(L), n / V);
    } else {
      hw("gelu_fwd");
      k::gelu_fwd<T><<<grid_for(n), 256, 0, s>>>(L.fc.as<T>(), gelu_out(L), n);
    }
    LAUNCH_CHECK();
    mark(kGelu);
  }

  // Backward from dlogits into `grads` (zeroed here).
  void backward() {
    const int C = c.width;
    CUDA_CHECK(cudaMemsetAsync(grads.as(), 0, grads.bytes(), s));
    finishing_later = batch_finish;  // (until the layers' gradients are all enqueued, below)
    in_backward = true, wt_ready = false;
    head_back();
    // dsub: d(the last block's MLP output), through its dropout
    // (sub_bias: whether its column sums, the fc2 bias gradient, came with it)
    bool sub_bias = false;
    const T* dsub = ln_back_to(xs.back().as<float>(), lay.lnf_w, lay.lnf_b, lnf_mean.as<float>(), lnf_rstd.as<float>(),
                               dln.as<T>(), false, dropout::site_mlp(c.layers - 1),
                               lay.layer[size_t(c.layers) - 1].fc2_b, &sub_bias);
    for (int l = c.layers - 1; l >= 0; --l) {
      auto& L = layer[size_t(l)];
      const auto& Wl = lay.layer[size_t(l)];
      // MLP: xs[l+1] = x_mid + drop(fc2(gelu(fc(ln2(x_mid))))); dx holds d/dxs[l+1]
      if (recompute_gelu) before_write(gelu_out(L)), gelu_again(L);  // fc2's weight gradient reads gelu(fc)
      // dfc = d(gl) * gelu'(fc), and (fc_bias) its column sums, fc's bias gradient, where our fused GEMM ran
      // (Not with --backend cudnn: its fc backward computes the bias itself, cuDNN graph or fallback.)
      const bool fc_bias = linear_back(gelu_out(L), Wl.fc2_w, Wl.fc2_b, dsub, dfc.as<T>(), 4 * C, C, L.fc.as<T>(),
                                       sub_bias, on_cudnn() ? nullptr : G(Wl.fc_b));
      linear_back(L.ln2.as<T>(), Wl.fc_w, Wl.fc_b, dfc.as<T>(), dln.as<T>(), C, 4 * C, nullptr, fc_bias);
      dsub = ln_back_to(L.x_mid.as<float>(), Wl.ln2_w, Wl.ln2_b, L.ln2_mean.as<float>(), L.ln2_rstd.as<float>(),
                        dln.as<T>(), true, dropout::site_attn(l), Wl.proj_b, &sub_bias);
      // Attention: x_mid = xs[l] + drop(proj(attention(qkv(ln1(xs[l]))))); dx now holds d/dx_mid
      linear_back(L.att.as<T>(), Wl.proj_w, Wl.proj_b, dsub, datt.as<T>(), C, C, nullptr, sub_bias);
      before_write(dqkv.as());  // (the layer above's qkv weight gradient may still read it)
      const bool qkv_bias = attention_bwd(L, G(Wl.qkv_b));  // our flash backward adds it up as it stores
      linear_back(L.ln1.as<T>(), Wl.qkv_w, Wl.qkv_b, dqkv.as<T>(), dln.as<T>(), C, 3 * C, nullptr, qkv_bias);
      // Layer 0's: d(embedding) in T through the embedding's dropout for the embedding's matmul (embed_by_matmul).
      const uint32_t below = l > 0 ? dropout::site_mlp(l - 1) : embed_by_matmul() ? dropout::site_embed() : kNoSite;
      dsub = ln_back_to(xs[size_t(l)].as<float>(), Wl.ln1_w, Wl.ln1_b, L.ln1_mean.as<float>(), L.ln1_rstd.as<float>(),
                        dln.as<T>(), true, below, l > 0 ? lay.layer[size_t(l) - 1].fc2_b : kNoBias, &sub_bias);
      if (on_block_grads) {  // (data parallel: its buckets read the block's weight gradients)
        if (dw_side()) dws.join(s);
        flush_finishes();  // (and its biases and LayerNorms')
        on_block_grads(l);
      }
    }
    if (dw_side()) dws.join(s);  // every weight gradient is done before the embedding's and the optimizer
    flush_finishes();
    finishing_later = false, in_backward = false;
    if (dnn_embedded && dnn_embed_back()) {
      mark(kEmbed);
      if (on_block_grads) on_block_grads(-1);
      return;
    }
    if (on_cudnn()) fell_back.insert("embedding backward");
    if constexpr (std::is_same<T, bf16>::value)  // (the one-hot kernel stores 8 bf16 at a time)
      if (embed_by_matmul()) {  // dsub: d(embedding) in T, from layer 0's LayerNorm backward above
        const int VT = c.vocab + T_;
        T* oh = oh_embed.as<T>();
        const bool wide = size_t(N) * VT > size_t(INT32_MAX) / 2;  // the kernel's index in 64 bits (stride room)
        if (VT % 8 == 0 && !wide)
          k::embed_onehot<T, 8, int><<<grid_for(size_t(N) * VT / 8), 256, 0, s>>>(tok.as<int>(), oh, N, T_, c.vocab);
        else if (VT % 8 == 0)
          k::embed_onehot<T, 8, long long>
              <<<grid_for(size_t(N) * VT / 8), 256, 0, s>>>(tok.as<int>(), oh, N, T_, c.vocab);
        else if (!wide)
          k::embed_onehot<T, 1, int><<<grid_for(size_t(N) * VT), 256, 0, s>>>(tok.as<int>(), oh, N, T_, c.vocab);
        else
          k::embed_onehot<T, 1, long long><<<grid_for(size_t(N) * VT), 256, 0, s>>>(tok.as<int>(), oh, N, T_, c.vocab);
        LAUNCH_CHECK();
        matmul_bwd_w<T>(blas, dsub, oh, G(lay.wte), N, C, VT);  // wpe's gradient follows wte's (Layout)
        mark(kEmbed);
        if (on_block_grads) on_block_grads(-1);
        return;
      }
    // The embedding's dropout: dx is read only by the two embedding gradients below. With C % 4 == 0 they
    // apply its factors as they load dx; otherwise dx is multiplied in place first.
    const bool vec = C % 4 == 0;
    dropout::Params d_embed = drop;
    if (drop.on && !vec) {
      hw("dropout_scale");
      k::dropout_scale<<<grid_for(size_t(N) * C), 256, 0, s>>>(dx.as<float>(), size_t(N) * C, drop,
                                                               dropout::site_embed(), sv);
      LAUNCH_CHECK();
      d_embed.on = false;
    }
    hw("embed_bwd_pos"), hw("embed_bwd_tok"), hw("colsum_finish");
    const int slices = k::embed_slices(N);
    if (vec) {
      // 64-thread blocks: one thread per 4 columns of a position is T x C / 4 threads, a few hundred blocks
      // of 64 (of 256, fewer blocks than SMs at the default size).
      k::embed_bwd_pos<4><<<unsigned((size_t(T_) * C / 4 + 63) / 64), 64, 0, s>>>(dx.as<float>(), G(lay.wpe), B, T_,
                                                                                 C, d_embed, sv);
      LAUNCH_CHECK();
      k::embed_bwd_tok<4><<<dim3(c.vocab, slices), 256, 0, s>>>(tok.as<int>(), dx.as<float>(),
                                                                embed_partial.as<float>(), N, C, c.vocab, d_embed, sv);
    } else {
      k::embed_bwd_pos<1><<<grid_for(size_t(T_) * C), 256, 0, s>>>(dx.as<float>(), G(lay.wpe), B, T_, C, d_embed, sv);
      LAUNCH_CHECK();
      k::embed_bwd_tok<1><<<dim3(c.vocab, slices), 256, 0, s>>>(tok.as<int>(), dx.as<float>(),
                                                                embed_partial.as<float>(), N, C, c.vocab, d_embed, sv);
    }
    LAUNCH_CHECK();
    k::colsum_finish<<<grid_for(size_t(c.vocab) * C), 256, 0, s>>>(embed_partial.as<float>(), slices, 1, c.vocab * C,
                                                                   G(lay.wte), nullptr);
    LAUNCH_CHECK();
    mark(kEmbed);
    if (on_block_grads) on_block_grads(-1);
  }
};

#include "attention.cuh"
#include "backend_cudnn.cuh"
#include "head.cuh"
#include "linear.cuh"
#include "optimizer.cuh"
