// day50_gpt/run/generate.cuh: generation with a KV cache, batch 1. Generator (fp32): one position at a time
// through the model (nn/kernels/decode.cuh), captured as CUDA graphs, with top-k sampling on the GPU;
// past the context length, a sliding window re-prefilled by the training forward. FastDecoder (below,
// inside the context; fp32 or bf16 weights): the same model in 5 fused stages a layer
// (nn/kernels/decode_stages.cuh), as a CUDA graph per token or as one persistent kernel
// (nn/kernels/decode_persistent.cuh).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../gpt_ref.h"
#include "../nn/kernels/decode.cuh"
#include "../nn/kernels/decode_cluster.cuh"
#include "../nn/kernels/decode_heads.cuh"
#include "../nn/kernels/decode_persistent.cuh"
#include "../nn/kernels/layernorm.cuh"
#include "../nn/model.cuh"
#include "../nn/types.cuh"
#include "cuda_graph.cuh"
#include "verify.h"

// Each new token runs one position through the model: its key and value are appended to the
// layer's cache, and its query attends to the cache. A token costs O(t) attention work and one
// row of every matmul, instead of re-running the whole context. fp32 throughout.
//
// At batch 1 every matmul is a matrix times one vector: memory-bound, a few microseconds each, so a
// token is ~45 tiny kernels (gemv_bias with the bias, the residual add or the GELU folded in). Enqueued
// one by one, the host's launch time would dominate; so the step (embedding -> logits, then position
// + 1) is captured once as a CUDA graph, and a second graph puts the GPU sampling kernel in front of
// it: generating n bytes is n graph launches and one copy back at the end.
//
// Past the context length T the model sees a sliding window: the last T bytes, the newest at position
// T - 1 (as nanoGPT's generate crops to the last block_size tokens). The positions are learned and
// absolute, so when the window slides by one every byte moves to a new position, and every cached key
// and value (computed at the old positions, through all the layers above the embedding) is stale: a
// rolling cache would not compute the same function. So each byte past the context re-prefills: the
// training forward (nn/model.cuh, batch 1, fp32, no dropout) runs over the window, each layer's keys
// and values of positions 0..T-2 are copied into the cache, and the usual decoding step runs the
// newest byte at position T - 1. A byte then costs a whole forward over T positions instead of one
// position's work; nothing cheaper computes the same logits with absolute positions.
struct Generator {
  gpt::Config c;
  gpt::Layout lay;
  cudaStream_t stream;
  cudaGraphExec_t step_graph = nullptr, gen_graph = nullptr, sample_graph = nullptr;
  cudaEvent_t to_window = nullptr, from_window = nullptr;
  DeviceBuffer params, x, ln, qkv, att, gl, logits, mean, rstd, tok, pos, count, draws, hist;
  std::vector<DeviceBuffer> kc, vc;
  int prompt_len = 0;
  int* out = nullptr;                    // the sampled bytes: hist after the prompt
  std::unique_ptr<Model<float>> window;  // the re-prefill's forward (built only when the window slides)
  Generator(const gpt::Config& cfg, const std::vector<float>& p, int max_new, int prompt_bytes = 0)
      : c(cfg), lay(cfg), prompt_len(prompt_bytes) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const size_t C = size_t(c.width);
    params.alloc(lay.total * 4);
    to_device(params.as<float>(), p);
    x.alloc(C * 4), ln.alloc(C * 4), qkv.alloc(3 * C * 4), att.alloc(C * 4), gl.alloc(4 * C * 4);
    logits.alloc(size_t(c.vocab) * 4), mean.alloc(4), rstd.alloc(4), tok.alloc(4), pos.alloc(4), count.alloc(4);
    draws.alloc(size_t(std::max(1, max_new)) * 8), hist.alloc(size_t(prompt_len + std::max(1, max_new)) * 4);
    out = hist.as<int>() + prompt_len;
    for (int l = 0; l < c.layers; ++l)
      kc.emplace_back(size_t(c.context) * C * 4), vc.emplace_back(size_t(c.context) * C * 4);
    CUDA_CHECK(cudaMemset(pos.as(), 0, 4));
    CUDA_CHECK(cudaMemset(count.as(), 0, 4));
    step_graph = cuda_graph::capture(stream, [&] { enqueue_step(); });
    if (prompt_len + max_new > c.context) {  // the window will slide
      window = std::make_unique<Model<float>>(c, 1, Attn::kMatmul);
      CUDA_CHECK(cudaMemcpy(window->params.as(), params.as(), lay.total * 4, cudaMemcpyDeviceToDevice));
      CUDA_CHECK(cudaMemset(window->tgt.as(), 0, window->tgt.bytes()));  // the loss it computes is unused
      CUDA_CHECK(cudaEventCreateWithFlags(&to_window, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&from_window, cudaEventDisableTiming));
    }
  }
  ~Generator() {
    window.reset();
    if (to_window) cudaEventDestroy(to_window), cudaEventDestroy(from_window);
    if (sample_graph) cuda_graph::destroy(sample_graph);
    if (gen_graph) cuda_graph::destroy(gen_graph);
    if (step_graph) cuda_graph::destroy(step_graph);
    cudaStreamDestroy(stream);
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
  // Feed one byte of the prompt (the prompt is shorter than T: prompt_len bytes, fed in order); the
  // logits stay on the GPU. The byte is kept in the history the sliding window reads.
  int fed = 0;
  void feed(int token) {
    CUDA_CHECK(cudaMemcpyAsync(tok.as(), &token, 4, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(hist.as<int>() + fed++, tok.as(), 4, cudaMemcpyDeviceToDevice, stream));
    CUDA_CHECK(cudaGraphLaunch(step_graph, stream));
  }
  // The window slides: the last T bytes of the history, ending with the newest at absolute position
  // `at`, go through the training forward (on the legacy stream, ordered after and before this
  // generator's stream by events); its keys and values of positions 0..T-2 become the cache, and the
  // next step runs the newest byte at position T - 1.
  void reprefill(int at) {
    const int T = c.context;
    const size_t C = size_t(c.width);
    CUDA_CHECK(cudaEventRecord(to_window, stream));
    CUDA_CHECK(cudaStreamWaitEvent(0, to_window, 0));
    CUDA_CHECK(
        cudaMemcpyAsync(window->tok.as(), hist.as<int>() + (at - T + 1), size_t(T) * 4, cudaMemcpyDeviceToDevice, 0));
    window->forward(false);
    for (int l = 0; l < c.layers; ++l) {
      const float* q = window->layer[size_t(l)].qkv.as<float>();  // rows [q | k | v], 3C wide
      CUDA_CHECK(cudaMemcpy2DAsync(kc[size_t(l)].as(), C * 4, q + C, 3 * C * 4, C * 4, size_t(T - 1),
                                   cudaMemcpyDeviceToDevice, 0));
      CUDA_CHECK(cudaMemcpy2DAsync(vc[size_t(l)].as(), C * 4, q + 2 * C, 3 * C * 4, C * 4, size_t(T - 1),
                                   cudaMemcpyDeviceToDevice, 0));
    }
    k::set_position<<<1, 1, 0, 0>>>(pos.as<int>(), T - 1);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaEventRecord(from_window, 0));
    CUDA_CHECK(cudaStreamWaitEvent(stream, from_window, 0));
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
    if (gen_graph) CUDA_CHECK(cuda_graph::destroy(gen_graph));
    if (sample_graph) CUDA_CHECK(cuda_graph::destroy(sample_graph));
    gen_graph = cuda_graph::capture(stream, [&] { enqueue_sample_and_step(); });
    sample_graph = cuda_graph::capture(stream, [&] { enqueue_sample(); });
  }
  void enqueue_sample() {
    k::sample_top_k<<<1, 256, 0, stream>>>(logits.as<float>(), c.vocab, temperature_, top_k_, draws.as<double>(),
                                           count.as<int>(), tok.as<int>(), out);
    LAUNCH_CHECK();
  }
  void enqueue_sample_and_step() {
    enqueue_sample();
    enqueue_step();
  }
  // Sampled byte i (from the current logits), fed back in: inside the context one graph (sample + step),
  // past it the sample, the window's re-prefill and the step. use_graph false: the same kernels launched
  // one by one, the host waiting for every byte (the usual first version; the bench measures the gain).
  void generate_one(int i, bool use_graph = true) {
    const int at = prompt_len + i;  // the new byte's place in the whole text
    if (at < c.context) {
      if (use_graph)
        CUDA_CHECK(cudaGraphLaunch(gen_graph, stream));
      else
        enqueue_sample_and_step();
    } else {
      if (use_graph)
        CUDA_CHECK(cudaGraphLaunch(sample_graph, stream));
      else
        enqueue_sample();
      reprefill(at);
      if (use_graph)
        CUDA_CHECK(cudaGraphLaunch(step_graph, stream));
      else
        enqueue_step();
    }
    if (!use_graph) CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  // Samples the prepared number of bytes from the current logits onward, feeding each back in. The
  // bytes inside the context and those past it (the window sliding) are timed apart: one more wait.
  int slid = 0;
  double seconds_inside = 0, seconds_sliding = 0;
  std::vector<int> generate(bool use_graph = true) {
    const int inside = std::max(0, std::min(n_, c.context - prompt_len));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < inside; ++i) generate_one(i, use_graph);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto t1 = std::chrono::steady_clock::now();
    for (int i = inside; i < n_; ++i) generate_one(i, use_graph);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto t2 = std::chrono::steady_clock::now();
    slid = n_ - inside;
    seconds_inside = std::chrono::duration<double>(t1 - t0).count();
    seconds_sliding = std::chrono::duration<double>(t2 - t1).count();
    return to_host(out, size_t(n_));
  }
};

struct Sampled {
  std::string text;
  int made = 0;
  double seconds = 0;
  int slid = 0;                // of the `made` bytes, those generated past the context (the window sliding)
  double seconds_sliding = 0;  // their time (in `seconds` too)
};
// Generates n bytes after the prompt (shorter than the context), sliding the window past the context.
inline Sampled generate(const gpt::Config& cfg, const std::vector<float>& params, const std::string& prompt, int n,
                        double temperature, int top_k, uint64_t seed, bool use_graph = true) {
  const int want = std::max(0, n);
  std::vector<int> pr;
  for (char ch : prompt) pr.push_back(int(static_cast<unsigned char>(ch)));
  Generator g(cfg, params, want, int(pr.size()));
  verify::Rng rng(seed);
  std::vector<double> u(static_cast<size_t>(want));
  for (auto& x : u) x = double(rng.next() >> 11) / 9007199254740992.0;
  for (int t : pr) g.feed(t);
  if (want > 0) g.prepare(u, temperature, top_k);
  CUDA_CHECK(cudaDeviceSynchronize());  // the window's model was set up on the legacy stream
  Sampled s;
  s.text = prompt;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> toks = want > 0 ? g.generate(use_graph) : std::vector<int>();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int t : toks) s.text.push_back(char(t));
  s.made = int(toks.size());
  s.slid = g.slid, s.seconds_sliding = g.seconds_sliding;
  return s;
}

// ---- Faster generation, inside the context: fused stages, then one persistent kernel ---------------
// The generator above spends a token in ~8 kernels a layer. FastDecoder runs the same model through
// nn/kernels/decode_stages.cuh's 5 fused stages a layer (LayerNorm, residual add and GELU folded into
// the GEMVs, k and v written into the cache by the qkv GEMV, sampling folded into the first stage), with
// its weights in W = float or bf16 (activations, cache and sums stay fp32), along one of three paths:
//   kStages      one kernel per stage, a token's 5L + 1 kernels captured once as a CUDA graph; the
//                position and the draw count live on the device, so the graph replays for every token
//   kPersistent  one cooperative kernel (nn/kernels/decode_persistent.cuh) for all the tokens of a
//                call, grid-wide barriers between the stages (per_token: one launch per token instead;
//                net.prefetch false: without asking L1 for the next stage's weights before a barrier;
//                merge: attention waits for its own head's qkv rows instead of a barrier; own_barrier: a
//                hand-written grid barrier instead of grid.sync(); use_blocks(b): b blocks, not one per SM;
//                set_resident(): the weights copied into shared memory once per launch, where they fit;
//                net.late_epilogue: each GEMV's epilogue operands loaded after its sums, as before)
//   kCluster     one thread-block cluster of 16 (or 8) SMs for all the tokens of a call
//                (nn/kernels/decode_cluster.cuh): every vector in each block's shared memory, pushed
//                between blocks through distributed shared memory, cluster barriers, the weights
//                streamed in one stage ahead (per_token: one launch per token; use_cluster(s): s blocks)
//   kHeads       H clusters of 16 SMs, cluster c for head c (nn/kernels/decode_heads.cuh): the KV cache in
//                shared memory, the two partial sums of a layer meeting through L2 (per_token as above)
// The sampled bytes use the same draws u[i] (verify::Rng on the host, uploaded before the clock starts)
// and the same ranking and double arithmetic as k::sample_top_k, so with fp32 weights the bytes are
// the current generator's. Only inside the context: past it, Generator's sliding window (above).
enum class DecodePath { kStages, kPersistent, kCluster, kHeads };
// --clusters off: no decoder of this process plans a cluster (kCluster then runs nowhere, as on a GPU
// without clusters). Set once by main, before any decoder is made.
inline bool& clusters_enabled() {
  static bool on = true;
  return on;
}

// ---- Thread-block clusters (the cluster decoder, and the bench's cluster barrier alone) -------------
// A launch of `blocks` blocks of k::dec::kCThreads as one cluster; attr: the launch's one attribute (the
// cluster's size), which the caller keeps alive as long as the configuration.
inline cudaLaunchConfig_t cluster_launch(int blocks, size_t smem, cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(blocks)), cfg.blockDim = dim3(unsigned(k::dec::kCThreads));
  cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(blocks), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr, cfg.numAttrs = 1;
  return cfg;
}
// Whether kernel fn can run as a cluster here: the GPU launches clusters and the build targets sm_90 (for an
// older target the cluster kernels' bodies are empty). fa: the kernel's attributes (static shared memory).
inline bool cluster_runnable(const void* fn, cudaFuncAttributes& fa) {
  int dev = 0, can = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&can, cudaDevAttrClusterLaunch, dev));
  CUDA_CHECK(cudaFuncGetAttributes(&fa, fn));
  return can && fa.ptxVersion >= 90;
}
// How many such clusters the GPU holds at once: 0 where this size cannot be placed (a cluster-size or
// not-supported error, cleared); any other error is a bug and fails.
template <class Kernel>
int clusters_that_fit(Kernel kernel, const cudaLaunchConfig_t& cfg) {
  int clusters = 0;
  const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg);
  if (e == cudaErrorInvalidClusterSize || e == cudaErrorNotSupported) {
    (void)cudaGetLastError();
    return 0;
  }
  CUDA_CHECK(e);
  return clusters;
}

template <class W>
struct FastDecoder {
  gpt::Config c;
  DecodePath path;
  bool per_token = false;
  bool merge = false;          // kPersistent: no barrier between qkv and attention (per-head counts instead)
  bool own_barrier = false;    // kPersistent: the hand-written grid barrier instead of grid.sync()
  bool count_barrier = false;  // with own_barrier: its counting kind
  cudaStream_t stream;
  int blocks = 0, pos = 0;
  size_t smem = 0;
  DeviceBuffer mat, vec, wpe, kc, vc, x, q, h, part, logits, logits_all, seq, draws, out, state, done;
  k::dec::Net<W> net{};
  cudaGraphExec_t feed_graph = nullptr, gen_graph = nullptr;

  // Supported: heads up to k::dec::kMaxHead wide, a 4C-float GEMV input within 48 KB of shared memory.
  static bool supported(const gpt::Config& c) {
    return c.width / c.heads <= k::dec::kMaxHead &&
           k::dec::smem_bytes(c.width, c.heads, c.vocab, c.context) <= 48 * 1024;
  }
  static W cvt(float f) {
    if constexpr (std::is_same<W, float>::value)
      return f;
    else
      return __float2bfloat16(f);
  }
  static float to_float(W w) {
    if constexpr (std::is_same<W, float>::value)
      return w;
    else
      return __bfloat162float(w);
  }
  // keep_logits: every position's logits in logits_all [T][V] (the checks read them).
  FastDecoder(const gpt::Config& cfg, const std::vector<float>& p, int max_new, DecodePath pth, int blocks_per_sm = 1,
              bool keep_logits = false)
      : c(cfg), path(pth) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    pack(p);
    const size_t C = size_t(c.width), T = size_t(c.context), V = size_t(c.vocab), L = size_t(c.layers);
    // The partials for the shortest attention chunk (net.chunk may be set shorter for the persistent kernel).
    const size_t hs = C / size_t(c.heads), nck = (T + k::dec::kMinChunk - 1) / k::dec::kMinChunk;
    for (auto* b : {&kc, &vc}) b->alloc(L * T * C * 4);
    x.alloc(C * 4), q.alloc(C * 4), h.alloc(4 * C * 4), part.alloc(size_t(c.heads) * nck * (hs + 2) * 4);
    logits.alloc(V * 4), logits_all.alloc(keep_logits ? T * V * 4 : 0);
    seq.alloc(T * 4), draws.alloc(size_t(std::max(1, max_new)) * 8), out.alloc(size_t(std::max(1, max_new)) * 4);
    state.alloc(8), done.alloc(4), ready.alloc(size_t(c.heads + 1) * 4), bar.alloc(12);
    // Every buffer starts as NaN: a stage that reads what no stage wrote poisons the logits.
    for (auto* b : {&kc, &vc, &x, &q, &h, &part, &logits, &logits_all, &out})
      if (b->bytes()) poison(b->as(), b->bytes());
    CUDA_CHECK(cudaMemset(state.as(), 0, 8));
    CUDA_CHECK(cudaMemset(done.as(), 0, 4));
    net.mat = mat.as<W>(), net.vec = vec.as<float>(), net.wpe = wpe.as<float>();
    net.kc = kc.as<float>(), net.vc = vc.as<float>();
    net.L = c.layers, net.C = c.width, net.H = c.heads, net.T = c.context, net.V = c.vocab;
    net.x = x.as<float>(), net.q = q.as<float>(), net.h = h.as<float>(), net.part = part.as<float>();
    net.logits = logits.as<float>(), net.logits_all = keep_logits ? logits_all.as<float>() : nullptr;
    net.forced = seq.as<int>(), net.u = draws.as<double>(), net.out = out.as<int>();
    net.temperature = 1.0, net.top_k = 1, net.state = state.as<int>(), net.done = done.as<unsigned>();
    net.prefetch = true, net.trace = nullptr, net.sub = nullptr, net.ready = nullptr, net.bar = nullptr;
    net.chunk = k::dec::kChunk, net.resident_at = 0, net.late_epilogue = false;
    smem = k::dec::smem_bytes(c.width, c.heads, c.vocab, c.context);
    int dev = 0, sms = 0, occ = 0, coop = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k::dec::decode_persistent<W>, k::dec::kThreads, smem));
    if (path == DecodePath::kPersistent && (!coop || occ < 1))
      throw std::runtime_error("this GPU cannot launch the persistent decoder (cooperative launch)");
    // The cooperative launch needs every block resident at once: at most occ per SM.
    blocks = sms * std::max(1, std::min(occ, blocks_per_sm));
    if (path == DecodePath::kCluster) plan_cluster(0);
    if (path == DecodePath::kHeads) plan_heads();
    // The poisoning and the zeroing ran on the legacy stream, which `stream` (non-blocking) does not wait for.
    CUDA_CHECK(cudaDeviceSynchronize());
    if (path == DecodePath::kStages) feed_graph = cuda_graph::capture(stream, [&] { enqueue_token(net); });
  }
  ~FastDecoder() {
    if (gen_graph) cuda_graph::destroy(gen_graph);
    if (feed_graph) cuda_graph::destroy(feed_graph);
    cudaStreamDestroy(stream);
  }
  FastDecoder(const FastDecoder&) = delete;
  FastDecoder& operator=(const FastDecoder&) = delete;

  // Where pack() puts each piece, in elements (k::dec::Net's accessors read the same places on the device):
  // kind 0 qkv, 1 proj, 2 fc, 3 fc2 of layer l, 4 the head. mat: the matrix in the W image; ln: the
  // LayerNorm before it, gain then bias (qkv ln1, fc ln2, the head lnf; none for proj and fc2); bias: its
  // bias in the fp32 image (none for the head). pack_bundles reads the same table.
  struct Placed {
    size_t mat, ln, bias;
  };
  static Placed placed(int kind, size_t l, size_t C, size_t L) {
    const size_t CC = C * C, mo = l * 12 * CC, vo = l * 13 * C;
    switch (kind) {
      case 0: return {mo, vo, vo + 2 * C};
      case 1: return {mo + 3 * CC, 0, vo + 5 * C};
      case 2: return {mo + 4 * CC, vo + 6 * C, vo + 8 * C};
      case 3: return {mo + 8 * CC, 0, vo + 12 * C};
      default: return {L * 12 * CC, L * 13 * C, 0};
    }
  }
  // The packing k::dec::Net describes: per layer the four matrices in W, the vectors in fp32.
  void pack(const std::vector<float>& p) {
    const gpt::Layout lay(c);
    const size_t C = size_t(c.width), CC = C * C, L = size_t(c.layers), V = size_t(c.vocab);
    std::vector<W> m(L * 12 * CC + V * C);
    std::vector<float> v(L * 13 * C + 2 * C);
    auto put_m = [&](size_t at, size_t from, size_t n) {
      for (size_t i = 0; i < n; ++i) m[at + i] = cvt(p[from + i]);
    };
    auto put_v = [&](size_t at, size_t from, size_t n) {
      std::copy_n(p.begin() + long(from), n, v.begin() + long(at));
    };
    for (size_t l = 0; l < L; ++l) {
      const auto& Y = lay.layer[l];
      const Placed q = placed(0, l, C, L), o = placed(1, l, C, L), f = placed(2, l, C, L), f2 = placed(3, l, C, L);
      put_m(q.mat, Y.qkv_w, 3 * CC), put_m(o.mat, Y.proj_w, CC), put_m(f.mat, Y.fc_w, 4 * CC), put_m(f2.mat, Y.fc2_w, 4 * CC);
      put_v(q.ln, Y.ln1_w, C), put_v(q.ln + C, Y.ln1_b, C), put_v(q.bias, Y.qkv_b, 3 * C), put_v(o.bias, Y.proj_b, C);
      put_v(f.ln, Y.ln2_w, C), put_v(f.ln + C, Y.ln2_b, C), put_v(f.bias, Y.fc_b, 4 * C), put_v(f2.bias, Y.fc2_b, C);
    }
    const Placed hd = placed(4, 0, C, L);
    put_m(hd.mat, lay.wte, V * C);
    put_v(hd.ln, lay.lnf_w, C), put_v(hd.ln + C, lay.lnf_b, C);
    mat.alloc(m.size() * sizeof(W)), vec.alloc(v.size() * 4), wpe.alloc(size_t(c.context) * C * 4);
    to_device(mat.as<W>(), m);
    to_device(vec.as<float>(), v);
    if (path == DecodePath::kCluster || path == DecodePath::kHeads)  // pack_bundles' and pack_heads' source
      host_mat = std::move(m), host_vec = std::move(v);
    to_device(wpe.as<float>(),
              std::vector<float>(p.begin() + long(lay.wpe), p.begin() + long(lay.wpe + c.context * C)));
  }
  // kCluster: exactly s blocks (16 or 8); returns whether that cluster can run here (cluster_ok). The
  // constructor's plan is kept when it already has s blocks (its bundles are packed once).
  bool use_cluster(int s) { return cluster_ok && plan.S == s ? true : plan_cluster(s); }
  // kPersistent: fewer blocks than the GPU holds (at least 1; every stage's work is spread by gridDim,
  // so any count computes the same logits): fewer arrivals at each barrier, fewer SMs pulling weights.
  void use_blocks(int b) {
    if (resident) throw std::logic_error("FastDecoder: use_blocks after set_resident (the copy is sized per block)");
    if (path == DecodePath::kPersistent) blocks = std::max(1, std::min(blocks, b));
  }
  // kPersistent: the weights in shared memory (k::dec::Net::resident_at). Block 0 holds the most rows of
  // every matrix (row o is block o % grid's), so its share sizes every block's copy. Needs that much beside
  // the stages' shared memory in one block, and every block of the launch resident at once with it. Call
  // after use_blocks; returns whether the weights fit (if not, nothing changes).
  bool resident = false;
  size_t resident_bytes() const {
    const size_t C = size_t(c.width), g = size_t(blocks);
    auto elems = [&](size_t O, size_t I) { return k::dec::resident_elems<W>((O + g - 1) / g, I); };
    const size_t layer = elems(3 * C, C) + elems(C, C) + elems(4 * C, C) + elems(C, 4 * C);
    return (size_t(c.layers) * layer + elems(size_t(c.vocab), C)) * sizeof(W);
  }
  bool set_resident() {
    if (path != DecodePath::kPersistent || resident) return resident;
    const size_t at = (smem + 15) / 16 * 16, need = at + resident_bytes();
    int dev = 0, optin = 0, sms = 0, occ = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (need > size_t(optin)) return false;
    // The permit is the kernel's, for every decoder of this process: never below the 48 KiB any launch
    // may use without it, or a later decoder needing more than this one (but no more than 48 KiB) would
    // be refused at launch.
    CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&k::dec::decode_persistent<W>),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(std::max<size_t>(need, size_t(48) << 10))));
    CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k::dec::decode_persistent<W>, k::dec::kThreads, need));
    if (occ * sms < blocks) return false;
    net.resident_at = unsigned(at), smem = need, resident = true;
    return true;
  }
  // kCluster (nn/kernels/decode_cluster.cuh): one cluster of `want` blocks (0: 16 if this GPU can run it,
  // else 8), each with its share of two consecutive stages' weights in shared memory. cluster_ok: whether
  // it can run here (an sm_90 build on an sm_90 GPU; heads a multiple of 16 and at most k::dec::kCMaxHead
  // wide; C % 8 == 0; the largest stage's share fits). Returns cluster_ok.
  k::dec::ClusterPlan plan{};
  bool cluster_ok = false;
  std::vector<W> host_mat;
  std::vector<float> host_vec;
  DeviceBuffer bundles;
  // Each bundle (k::dec::ClusterPlan) of each block as its shared memory will hold it: the block's rows of
  // the matrix (zeros past the matrix's end); after a LayerNorm (qkv, fc, the head) its gain g, then the
  // rows' sums S[o] = sum_i W[o,i] g_i; then the rows' biases, which after a LayerNorm with bias b are
  // c[o] = bias[o] + sum_i W[o,i] b_i (decode_cluster.cuh's folded LayerNorm). W as the decoder holds it
  // (rounded to bf16 in bf16), the sums in double.
  void pack_bundles(k::dec::ClusterPlan& pl) {
    const int C = c.width, L = c.layers, J = 4 * L + 1;
    const size_t stride = widest_bundle(pl);
    std::vector<unsigned char> img(size_t(J) * pl.S * stride, 0);
    std::vector<float> sums, bias;
    for (int j = 0; j < J; ++j) {
      const int kind = j == 4 * L ? 4 : j % 4, l = j / 4, R = pl.R(kind), O = pl.O(kind), I = pl.I(kind);
      const Placed src = placed(kind, size_t(l), size_t(C), size_t(L));
      const float* g = pl.ln(kind) ? host_vec.data() + src.ln : nullptr;  // the LayerNorm's gain, then its bias
      for (int b = 0; b < pl.S; ++b) {
        unsigned char* at = img.data() + (size_t(j) * pl.S + b) * stride;
        const int r0 = b * R, rows = std::max(0, std::min(R, O - r0));
        if (rows > 0) std::memcpy(at, host_mat.data() + src.mat + size_t(r0) * I, size_t(rows) * I * sizeof(W));
        sums.assign(size_t(rows), 0.f), bias.assign(size_t(rows), 0.f);
        for (int r = 0; r < rows; ++r)
          fold_row(host_mat.data() + src.mat + size_t(r0 + r) * I, I, g,
                   kind == 4 ? 0.0 : double(host_vec[src.bias + size_t(r0 + r)]), sums[size_t(r)], bias[size_t(r)]);
        put_tail(at, pl, kind, g, sums, bias);
      }
    }
    upload_bundles(img, stride, pl);
  }
  // What pack_bundles and pack_heads share. The largest bundle of the plan (every bundle's stride in the image).
  template <class Plan>
  static size_t widest_bundle(const Plan& pl) {
    size_t stride = 0;
    for (int kk = 0; kk < 5; ++kk) stride = std::max(stride, pl.bytes(kk));
    return stride;
  }
  // One row w[0, I) of a matrix after a LayerNorm (g: its gain, then its bias, C each; null where none comes
  // first): S = sum_i w_i g_i and c = bias + sum_i w_i b_i, the folded LayerNorm's constants, in double.
  void fold_row(const W* w, int I, const float* g, double bias, float& S, float& cb) const {
    double s = 0;
    for (int i = 0; g && i < I; ++i) s += double(to_float(w[i])) * g[i], bias += double(to_float(w[i])) * g[c.width + i];
    S = float(s), cb = float(bias);
  }
  // A bundle's tail, behind its rows' weights: after a LayerNorm its gain and the rows' sums, then their biases.
  template <class Plan>
  void put_tail(unsigned char* at, const Plan& pl, int kind, const float* g, const std::vector<float>& sums,
                const std::vector<float>& bias) const {
    unsigned char* tail = at + pl.w_bytes(kind);
    if (g) {
      std::memcpy(tail, g, size_t(c.width) * 4);
      std::memcpy(tail + pl.gain_bytes(), sums.data(), sums.size() * 4);
      tail += pl.gain_bytes() + pl.row_bytes(kind);
    }
    std::memcpy(tail, bias.data(), bias.size() * 4);
  }
  // The packed image to the device, where the plan points. On the decoder's stream and waited for: a copy from
  // pageable memory may return before its DMA ends, and the kernels run on `stream`, which does not wait for
  // the legacy stream.
  template <class Plan>
  void upload_bundles(const std::vector<unsigned char>& img, size_t stride, Plan& pl) {
    bundles.alloc(img.size());
    CUDA_CHECK(cudaMemcpyAsync(bundles.as(), img.data(), img.size(), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    pl.pack = static_cast<const unsigned char*>(bundles.as()), pl.stride = stride;
  }
  bool plan_cluster(int want) {
    cluster_ok = false;
    const int C = c.width, H = c.heads, hs = C / H;
    if (path != DecodePath::kCluster || !clusters_enabled() || C % 8 != 0 || hs % 16 != 0 || hs > k::dec::kCMaxHead)
      return false;
    // Two builds of the kernel, the same but for the stamps (kTrace): both get the launch attributes.
    const void* fn = reinterpret_cast<const void*>(&k::dec::decode_cluster<W, false>);
    const void* fn_traced = reinterpret_cast<const void*>(&k::dec::decode_cluster<W, true>);
    cudaFuncAttributes fa{}, fa_traced{};
    if (!cluster_runnable(fn, fa) || !cluster_runnable(fn_traced, fa_traced)) return false;
    fa.sharedSizeBytes = std::max(fa.sharedSizeBytes, fa_traced.sharedSizeBytes);  // the plan fits both builds
    int dev = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    for (int S : {16, 8}) {
      if (want && S != want) continue;
      const k::dec::ClusterPlan pl =
          k::dec::make_cluster_plan(C, H, c.vocab, S, int(sizeof(W)), size_t(optin) - fa.sharedSizeBytes);
      if (!pl.valid()) continue;
      for (const void* f : {fn, fn_traced}) {
        CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.total)));
        if (S > 8) CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      }
      cudaLaunchAttribute attr[1];
      if (clusters_that_fit(k::dec::decode_cluster<W, false>, cluster_launch(S, pl.total, stream, attr)) < 1 ||
          clusters_that_fit(k::dec::decode_cluster<W, true>, cluster_launch(S, pl.total, stream, attr)) < 1)
        continue;
      plan = pl, cluster_ok = true, blocks = S, smem = pl.total;
      pack_bundles(plan);
      return true;
    }
    return false;
  }
  void launch_cluster(const k::dec::Net<W>& n, int start, int count0, int steps) {
    if (!cluster_ok) throw std::runtime_error("FastDecoder: this GPU or build cannot run the cluster decoder");
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = cluster_launch(plan.S, plan.total, stream, attr);
    // The build without stamps where nothing is stamped, in both precisions. (fp32 used to launch the stamped
    // build here too: after step 7 its plain one ran ~2% slower in development, ptxas placing the two builds'
    // registers otherwise. The decoder has changed since: in results/nvidia-h200/day50_decode/step19_dev/ the plain
    // fp32 build of main's decoder ran 3% faster than its stamped one, a call apart on one H200, and with the
    // merges without tests its stamped build spills more.)
    if (n.trace)
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, k::dec::decode_cluster<W, true>, n, plan, start, count0, steps));
    else
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, k::dec::decode_cluster<W, false>, n, plan, start, count0, steps));
  }
  // kHeads (nn/kernels/decode_heads.cuh): H clusters of 16 blocks, cluster c working for head c. heads_ok:
  // whether it runs here (an sm_90 build and GPU; the plan's limits, k::dec::HeadsPlan::valid; H clusters of
  // 16 resident at once, which their meetings through L2 need: a cluster that waited for one not yet placed
  // would wait forever). Packs the bundles once.
  k::dec::HeadsPlan hplan{};
  bool heads_ok = false;
  DeviceBuffer meet_words, meet_flag;
  unsigned meet_tag = 0;  // the last meeting's tag (every launch's tags follow the last one's: none is reused)
  cudaLaunchConfig_t heads_launch(cudaLaunchAttribute* attr) const {
    cudaLaunchConfig_t cfg = cluster_launch(hplan.S, hplan.total, stream, attr);
    cfg.gridDim = dim3(unsigned(hplan.S * hplan.K));
    return cfg;
  }
  bool plan_heads() {
    heads_ok = false;
    const int C = c.width, H = c.heads;
    if (path != DecodePath::kHeads || !clusters_enabled() || C % H != 0 || (4 * C) % H != 0) return false;
    const void* fn = reinterpret_cast<const void*>(&k::dec::decode_heads<W, false>);
    const void* fn_traced = reinterpret_cast<const void*>(&k::dec::decode_heads<W, true>);
    cudaFuncAttributes fa{}, fa_traced{};
    if (!cluster_runnable(fn, fa) || !cluster_runnable(fn_traced, fa_traced)) return false;
    fa.sharedSizeBytes = std::max(fa.sharedSizeBytes, fa_traced.sharedSizeBytes);  // the plan fits both builds
    int dev = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const k::dec::HeadsPlan pl =
        k::dec::make_heads_plan(C, H, c.vocab, c.context, c.layers, 16, int(sizeof(W)));
    if (!pl.valid(size_t(optin) - fa.sharedSizeBytes)) return false;
    for (const void* f : {fn, fn_traced}) {
      CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.total)));
      CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }
    hplan = pl;
    cudaLaunchAttribute attr[1];
    if (clusters_that_fit(k::dec::decode_heads<W, false>, heads_launch(attr)) < H ||
        clusters_that_fit(k::dec::decode_heads<W, true>, heads_launch(attr)) < H)
      return false;
    pack_heads(hplan);
    meet_words.alloc(size_t(2) * H * C * 8), meet_flag.alloc(4);
    CUDA_CHECK(cudaMemset(meet_words.as(), 0, meet_words.bytes()));  // tag 0: no meeting's
    CUDA_CHECK(cudaMemset(meet_flag.as(), 0, 4));
    heads_ok = true, blocks = pl.S * pl.K, smem = pl.total;
    return true;
  }
  // Bundle j of block b of cluster c (k::dec::HeadsPlan): that block's rows of the cluster's share of the
  // matrix (qkv: head c's q, k and v rows; proj: head c's columns; fc: hidden units [cF, cF + F); fc2: those
  // columns; the head: all of it), then as pack_bundles: after a LayerNorm its gain and the rows' sums of
  // weights times gain; then the biases (with the LayerNorm's bias carried through the matrix; proj's and
  // fc2's own bias in cluster 0's bundles only, zeros elsewhere: each partial sum meets the others once).
  void pack_heads(k::dec::HeadsPlan& pl) {
    const int C = c.width, L = c.layers, J = 4 * L + 1, hs = pl.hs, F = pl.F;
    const size_t stride = widest_bundle(pl);
    std::vector<unsigned char> img(size_t(J) * pl.K * pl.S * stride, 0);
    std::vector<float> sums, bias;
    for (int j = 0; j < J; ++j) {
      const int kind = k::dec::HeadsPlan::kind_of(j, L), l = j / 4, R = pl.R(kind), O = pl.O(kind), I = pl.I(kind);
      const Placed src = placed(kind, size_t(l), size_t(C), size_t(L));
      const int Ifull = kind == 3 ? 4 * C : C;  // the source matrix's row length
      const float* g = pl.ln(kind) ? host_vec.data() + src.ln : nullptr;
      for (int cl = 0; cl < pl.K; ++cl)
        for (int b = 0; b < pl.S; ++b) {
          unsigned char* at = img.data() + ((size_t(j) * pl.K + cl) * pl.S + b) * stride;
          const int r0 = b * R, rows = std::max(0, std::min(R, O - r0));
          sums.assign(size_t(rows), 0.f), bias.assign(size_t(rows), 0.f);
          for (int r = 0; r < rows; ++r) {
            const int o = r0 + r;
            // the source row and first column of local row o
            const int srow = kind == 0 ? (o / hs) * C + cl * hs + o % hs : kind == 2 ? cl * F + o : o;
            const int scol = kind == 1 ? cl * hs : kind == 3 ? cl * F : 0;
            const W* w = host_mat.data() + src.mat + size_t(srow) * Ifull + scol;
            std::memcpy(at + size_t(r) * I * sizeof(W), w, size_t(I) * sizeof(W));
            const bool own_bias = kind == 0 || kind == 2 || ((kind == 1 || kind == 3) && cl == 0);
            fold_row(w, I, g, own_bias ? double(host_vec[src.bias + size_t(srow)]) : 0.0, sums[size_t(r)], bias[size_t(r)]);
          }
          put_tail(at, pl, kind, g, sums, bias);
        }
    }
    upload_bundles(img, stride, pl);
  }
  void launch_heads(const k::dec::Net<W>& n, int start, int count0, int steps) {
    if (!heads_ok) throw std::runtime_error("FastDecoder: this GPU or build cannot run the decoder with a cluster a head");
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = heads_launch(attr);
    const k::dec::Meet m{meet_words.as<unsigned long long>(), meet_flag.as<unsigned>(), meet_tag + 1};
    meet_tag += unsigned(2 * c.layers * steps);
    if (n.trace)  // the bench's breakdown (heads_breakdown): the build with stamps
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, k::dec::decode_heads<W, true>, n, hplan, m, start, count0, steps));
    else
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, k::dec::decode_heads<W, false>, n, hplan, m, start, count0, steps));
  }
  // One launch of the persistent or a cluster kernel.
  void launch(const k::dec::Net<W>& n, int start, int count0, int steps) {
    if (path == DecodePath::kHeads)
      launch_heads(n, start, count0, steps);
    else if (path == DecodePath::kCluster)
      launch_cluster(n, start, count0, steps);
    else
      launch_persistent(n, start, count0, steps);
  }
  // kPersistent: stamp the time after every stage of the next calls (up to `steps` tokens a call).
  DeviceBuffer trace, ready, bar;
  // Merged stages: whether a wait for a head's rows ever gave up in the last launch; own barrier: whether a
  // wait at the barrier did (a bug either way: never expected).
  bool gave_up() {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return (merge && to_host(ready.as<unsigned>() + c.heads, 1)[0] != 0) ||
           (own_barrier && to_host(bar.as<unsigned>() + 2, 1)[0] != 0) ||
           (heads_ok && to_host(meet_flag.as<unsigned>(), 1)[0] != 0);
  }
  void enable_trace(int steps) {  // kCluster: three more stamps a stage (decode_cluster)
    trace.alloc((size_t(steps) * (c.layers * k::dec::kStagesPerLayer + 1) * (path == DecodePath::kCluster ? 4 : 1) +
                 1) * 8);
    net.trace = trace.as<unsigned long long>();
  }
  // The bytes of weights one token reads: every matrix once (the memory floor's numerator).
  size_t weight_bytes() const { return mat.bytes(); }

  // One token through the stage kernels (kStages): 5L + 1 launches.
  void enqueue_token(const k::dec::Net<W>& n) {
    for (int s = 0; s <= c.layers * k::dec::kStagesPerLayer; ++s) {
      k::dec::decode_stage<W><<<blocks, k::dec::kThreads, smem, stream>>>(n, s);
      LAUNCH_CHECK();
    }
  }
  void launch_persistent(k::dec::Net<W> n, int start, int count0, int steps) {
    if (merge) {  // the per-head counts start at 0 every launch (and the gave-up flag after them)
      CUDA_CHECK(cudaMemsetAsync(ready.as(), 0, ready.bytes(), stream));
      n.ready = ready.as<unsigned>();
    }
    if (own_barrier) {  // the arrival count, the generation and the gave-up flag start at 0 every launch
      CUDA_CHECK(cudaMemsetAsync(bar.as(), 0, bar.bytes(), stream));
      n.bar = bar.as<unsigned>(), n.bar_count = count_barrier;
    }
    void* args[] = {&n, &start, &count0, &steps};
    CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&k::dec::decode_persistent<W>), dim3(blocks),
                                           dim3(k::dec::kThreads), args, smem, stream));
  }
  // Back to position 0 (the cache is overwritten as positions are fed again).
  void reset() {
    pos = 0;
    CUDA_CHECK(cudaMemsetAsync(state.as(), 0, 8, stream));
  }
  // The attention chunks the stages take (net.chunk): stage_attention's kChunk or stage_attention_split's.
  void check_chunk() const {
    if (net.chunk != k::dec::kChunk && net.chunk != 16 && net.chunk != k::dec::kMinChunk)
      throw std::invalid_argument("FastDecoder: net.chunk must be 32, 16 or 8");
  }
  // Feeds toks at positions pos, pos + 1, ... (teacher forcing; the prompt): logits after the last.
  void feed(const std::vector<int>& toks) {
    check_chunk();
    if (toks.empty()) return;
    if (pos + int(toks.size()) > c.context) throw std::runtime_error("FastDecoder::feed past the context");
    CUDA_CHECK(cudaMemcpyAsync(seq.as<int>() + pos, toks.data(), toks.size() * 4, cudaMemcpyHostToDevice, stream));
    if (path == DecodePath::kStages)
      for (size_t i = 0; i < toks.size(); ++i) CUDA_CHECK(cudaGraphLaunch(feed_graph, stream));
    else
      launch(net, pos, 0, int(toks.size()));
    pos += int(toks.size());
    CUDA_CHECK(cudaStreamSynchronize(stream));  // toks is the host's: the copy must be done before it goes
  }
  // The draws, temperature and top-k of the next generate() (uploaded and captured outside its time).
  void prepare(const std::vector<double>& u, double temperature, int top_k) {
    to_device(draws.as<double>(), u);
    net.temperature = temperature, net.top_k = top_k;
    if (path == DecodePath::kStages) {
      if (gen_graph) CUDA_CHECK(cuda_graph::destroy(gen_graph));
      k::dec::Net<W> g = net;
      g.forced = nullptr;
      gen_graph = cuda_graph::capture(stream, [&] { enqueue_token(g); });
    }
  }
  // Samples n bytes (draws 0 .. n-1) from the current logits on, each fed back in; enqueued only (the
  // caller times and waits).
  void generate(int n) {
    check_chunk();
    if (pos + n > c.context) throw std::runtime_error("FastDecoder::generate past the context");
    k::dec::Net<W> g = net;
    g.forced = nullptr;
    if (path == DecodePath::kStages) {
      CUDA_CHECK(cudaMemsetAsync(state.as<int>() + 1, 0, 4, stream));  // the draw count
      for (int i = 0; i < n; ++i) CUDA_CHECK(cudaGraphLaunch(gen_graph, stream));
    } else if (per_token) {
      for (int i = 0; i < n; ++i) launch(g, pos + i, i, 1);
    } else {
      launch(g, pos, 0, n);
    }
    pos += n;
  }
  std::vector<int> bytes(int n) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return to_host(out.as<int>(), size_t(n));
  }
  std::vector<float> logits_at(int positions) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return to_host(logits_all.as<float>(), size_t(positions) * size_t(c.vocab));
  }
};

// generate() through a FastDecoder: the same bytes' distribution (the same draws; with fp32 weights the
// same bytes), for a --sample flag to pick. Past the context it falls back to generate() (the sliding
// window), which is the only generator that goes there.
template <class W>
Sampled generate_fast(const gpt::Config& cfg, const std::vector<float>& params, const std::string& prompt, int n,
                      double temperature, int top_k, uint64_t seed, DecodePath path) {
  const int want = std::max(0, n);
  if (!FastDecoder<W>::supported(cfg) || int(prompt.size()) + want > cfg.context)
    return generate(cfg, params, prompt, n, temperature, top_k, seed);
  std::vector<int> pr;
  for (char ch : prompt) pr.push_back(int(static_cast<unsigned char>(ch)));
  verify::Rng rng(seed);
  std::vector<double> u(static_cast<size_t>(want));
  for (auto& x : u) x = double(rng.next() >> 11) / 9007199254740992.0;
  FastDecoder<W> d(cfg, params, want, path);
  d.feed(pr);
  d.prepare(u, temperature, top_k);
  Sampled s;
  s.text = prompt;
  const auto t0 = std::chrono::steady_clock::now();
  d.generate(want);
  const std::vector<int> toks = d.bytes(want);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int t : toks) s.text.push_back(char(t));
  s.made = want;
  return s;
}
