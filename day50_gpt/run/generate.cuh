// day50_gpt/run/generate.cuh: generation with a KV cache, batch 1, fp32: one position at a time through
// the model (nn/kernels/decode.cuh), captured as CUDA graphs, with top-k sampling on the GPU.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "../gpt_ref.h"
#include "../nn/kernels/decode.cuh"
#include "../nn/kernels/layernorm.cuh"
#include "../nn/types.cuh"
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
inline Sampled generate(const gpt::Config& cfg, const std::vector<float>& params, const std::string& prompt, int n,
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
