// day50_gpt/gpt.cu: a GPT-2-style model that trains on any text file, in CUDA C++ with cuBLAS.
//
// WORK IN PROGRESS (branch day50-wip): the fp32 path (cuBLAS matmuls + the hand-written kernels of
// kernels.cuh, attention included), checked against the CPU reference gpt_ref.h, and a training
// loop with AdamW, clipping, the warm-up + cosine schedule, validation and checkpoints. Compiled on
// the build machine; not yet run on a GPU. Still to come: bf16, cuDNN's fused attention graph,
// sampling with a KV cache, the notes.
//
//   ./build/gpt --verify                       # GPU vs CPU on a tiny config: loss, logits, every gradient
//   ./build/gpt --data FILE --steps 2000       # train
//   ./build/gpt --resume ckpt.bin --save ckpt.bin
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "check.cuh"
#include "checkpoint.h"
#include "cli.h"
#include "env.cuh"
#include "gpt_ref.h"
#include "kernels.cuh"
#include "results.h"
#include "train_ref.h"
#include "verify.h"

static const char* kProg = "gpt";

// Row-major out[N][O] = in[N][I] . W[O][I]^T, through column-major cuBLAS:
// out^T (O x N) = W_cm^T (O x I) . in_cm (I x N).
static void matmul_fwd(cublasHandle_t h, const float* in, const float* W, float* out, int N, int I, int O) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &one, W, I, in, I, &zero, out, O));
}
// din[N][I] (+)= dout[N][O] . W[O][I];  dW[O][I] += dout^T . in.
static void matmul_bwd(cublasHandle_t h, const float* in, const float* W, const float* dout, float* din, float* dW, int N, int I, int O,
                       bool accumulate_din) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, &one, W, I, dout, O, accumulate_din ? &one : &zero, din, I));
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, &one, in, I, dout, O, &one, dW, I));
}

static int grid_for(size_t n) { return int(std::min<size_t>((n + 255) / 256, 132 * 16)); }

// The model on the GPU: parameters, gradients, optimizer state and the activations of one batch.
struct Model {
  gpt::Config c;
  gpt::Layout lay;
  int B, T, N;
  cublasHandle_t blas;
  DeviceBuffer params, grads, m, v, decay;
  DeviceBuffer tok, tgt, x, loss;
  struct Layer {
    DeviceBuffer x_in, ln1, ln1_mean, ln1_rstd, qkv, P, att, x_mid, ln2, ln2_mean, ln2_rstd, fc, gl;
  };
  std::vector<Layer> layer;
  DeviceBuffer lnf, lnf_mean, lnf_rstd, logits, tmp, dtmp, dtmp2, dqkv, dfc;

  Model(const gpt::Config& cfg, int b, int t) : c(cfg), lay(cfg), B(b), T(t), N(b * t) {
    CUBLAS_CHECK(cublasCreate(&blas));
    CUBLAS_CHECK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));  // fp32: no TF32
    const size_t C = size_t(c.width), V = size_t(c.vocab), n = lay.total, NN = size_t(N);
    params.alloc(n * 4), grads.alloc(n * 4), m.alloc(n * 4), v.alloc(n * 4), decay.alloc(n);
    tok.alloc(NN * 4), tgt.alloc(NN * 4), x.alloc(NN * C * 4), loss.alloc(NN * 4);
    layer.resize(size_t(c.layers));
    for (auto& L : layer) {
      L.x_in.alloc(NN * C * 4), L.ln1.alloc(NN * C * 4), L.ln1_mean.alloc(NN * 4), L.ln1_rstd.alloc(NN * 4);
      L.qkv.alloc(NN * 3 * C * 4), L.P.alloc(size_t(B) * c.heads * T * T * 4), L.att.alloc(NN * C * 4), L.x_mid.alloc(NN * C * 4);
      L.ln2.alloc(NN * C * 4), L.ln2_mean.alloc(NN * 4), L.ln2_rstd.alloc(NN * 4), L.fc.alloc(NN * 4 * C * 4), L.gl.alloc(NN * 4 * C * 4);
    }
    lnf.alloc(NN * C * 4), lnf_mean.alloc(NN * 4), lnf_rstd.alloc(NN * 4), logits.alloc(NN * V * 4);
    tmp.alloc(NN * C * 4), dtmp.alloc(NN * 4 * C * 4), dtmp2.alloc(NN * C * 4), dqkv.alloc(NN * 3 * C * 4), dfc.alloc(NN * 4 * C * 4);
    const std::vector<uint8_t> d = train::decay_mask(c);
    to_device(decay.as<uint8_t>(), d);
    CUDA_CHECK(cudaMemset(m.as(), 0, m.bytes()));
    CUDA_CHECK(cudaMemset(v.as(), 0, v.bytes()));
  }
  ~Model() { cublasDestroy(blas); }
  float* P(size_t off) const { return params.as<float>() + off; }
  float* G(size_t off) const { return grads.as<float>() + off; }

  void linear(const float* in, size_t w, size_t b, float* out, int I, int O) {
    matmul_fwd(blas, in, P(w), out, N, I, O);
    k::add_bias<<<grid_for(size_t(N) * O), 256>>>(out, P(b), N, O);
    LAUNCH_CHECK();
  }
  void linear_back(const float* in, size_t w, size_t b, const float* dout, float* din, int I, int O, bool acc) {
    matmul_bwd(blas, in, P(w), dout, din, G(w), N, I, O, acc);
    k::bias_grad<<<(O + 255) / 256, 256>>>(dout, G(b), N, O);
    LAUNCH_CHECK();
  }

  // Forward of the batch in tok/tgt; leaves per-row losses in `loss` and dlogits in `logits`.
  void forward() {
    const int C = c.width, V = c.vocab, rows_per_block = 256 / k::kWarp, rgrid = (N + rows_per_block - 1) / rows_per_block;
    k::embed_fwd<<<grid_for(size_t(N) * C), 256>>>(tok.as<int>(), P(lay.wte), P(lay.wpe), x.as<float>(), N, T, C);
    LAUNCH_CHECK();
    for (int l = 0; l < c.layers; ++l) {
      auto& L = layer[size_t(l)];
      const auto& W = lay.layer[size_t(l)];
      CUDA_CHECK(cudaMemcpyAsync(L.x_in.as(), x.as(), x.bytes(), cudaMemcpyDeviceToDevice));
      k::layernorm_fwd<<<rgrid, 256>>>(x.as<float>(), P(W.ln1_w), P(W.ln1_b), L.ln1.as<float>(), L.ln1_mean.as<float>(), L.ln1_rstd.as<float>(), N, C);
      LAUNCH_CHECK();
      linear(L.ln1.as<float>(), W.qkv_w, W.qkv_b, L.qkv.as<float>(), C, 3 * C);
      const int rows = B * c.heads * T;
      k::attention_fwd<<<(rows + rows_per_block - 1) / rows_per_block, 256>>>(L.qkv.as<float>(), L.P.as<float>(), L.att.as<float>(), B, T, C, c.heads);
      LAUNCH_CHECK();
      linear(L.att.as<float>(), W.proj_w, W.proj_b, tmp.as<float>(), C, C);
      k::add_inplace<<<grid_for(size_t(N) * C), 256>>>(x.as<float>(), tmp.as<float>(), size_t(N) * C);
      LAUNCH_CHECK();
      CUDA_CHECK(cudaMemcpyAsync(L.x_mid.as(), x.as(), x.bytes(), cudaMemcpyDeviceToDevice));
      k::layernorm_fwd<<<rgrid, 256>>>(x.as<float>(), P(W.ln2_w), P(W.ln2_b), L.ln2.as<float>(), L.ln2_mean.as<float>(), L.ln2_rstd.as<float>(), N, C);
      LAUNCH_CHECK();
      linear(L.ln2.as<float>(), W.fc_w, W.fc_b, L.fc.as<float>(), C, 4 * C);
      k::gelu_fwd<<<grid_for(size_t(N) * 4 * C), 256>>>(L.fc.as<float>(), L.gl.as<float>(), size_t(N) * 4 * C);
      LAUNCH_CHECK();
      linear(L.gl.as<float>(), W.fc2_w, W.fc2_b, tmp.as<float>(), 4 * C, C);
      k::add_inplace<<<grid_for(size_t(N) * C), 256>>>(x.as<float>(), tmp.as<float>(), size_t(N) * C);
      LAUNCH_CHECK();
    }
    k::layernorm_fwd<<<rgrid, 256>>>(x.as<float>(), P(lay.lnf_w), P(lay.lnf_b), lnf.as<float>(), lnf_mean.as<float>(), lnf_rstd.as<float>(), N, C);
    LAUNCH_CHECK();
    matmul_fwd(blas, lnf.as<float>(), P(lay.wte), logits.as<float>(), N, C, V);  // the tied head
  }
  void loss_and_dlogits() {
    const int rows_per_block = 256 / k::kWarp;
    k::softmax_xent<<<(N + rows_per_block - 1) / rows_per_block, 256>>>(logits.as<float>(), tgt.as<int>(), loss.as<float>(), N, c.vocab);
    LAUNCH_CHECK();
  }

  // Backward from dlogits (in `logits`) into `grads` (zeroed here).
  void backward() {
    const int C = c.width, V = c.vocab, rows_per_block = 256 / k::kWarp, rgrid = (N + rows_per_block - 1) / rows_per_block;
    CUDA_CHECK(cudaMemsetAsync(grads.as(), 0, grads.bytes()));
    float* dx = dtmp2.as<float>();  // the residual stream's gradient
    float* dln = tmp.as<float>();
    matmul_bwd(blas, lnf.as<float>(), P(lay.wte), logits.as<float>(), dln, G(lay.wte), N, C, V, false);
    CUDA_CHECK(cudaMemsetAsync(dx, 0, size_t(N) * C * 4));
    k::layernorm_bwd<<<rgrid, 256>>>(x.as<float>(), P(lay.lnf_w), lnf_mean.as<float>(), lnf_rstd.as<float>(), dln, dx, G(lay.lnf_w), G(lay.lnf_b), N, C);
    LAUNCH_CHECK();
    for (int l = c.layers - 1; l >= 0; --l) {
      auto& L = layer[size_t(l)];
      const auto& W = lay.layer[size_t(l)];
      // MLP
      linear_back(L.gl.as<float>(), W.fc2_w, W.fc2_b, dx, dfc.as<float>(), 4 * C, C, false);
      k::gelu_bwd<<<grid_for(size_t(N) * 4 * C), 256>>>(L.fc.as<float>(), dfc.as<float>(), dfc.as<float>(), size_t(N) * 4 * C);
      LAUNCH_CHECK();
      linear_back(L.ln2.as<float>(), W.fc_w, W.fc_b, dfc.as<float>(), dln, C, 4 * C, false);
      k::layernorm_bwd<<<rgrid, 256>>>(L.x_mid.as<float>(), P(W.ln2_w), L.ln2_mean.as<float>(), L.ln2_rstd.as<float>(), dln, dx, G(W.ln2_w),
                                       G(W.ln2_b), N, C);
      LAUNCH_CHECK();
      // Attention
      float* datt = dtmp.as<float>();
      linear_back(L.att.as<float>(), W.proj_w, W.proj_b, dx, datt, C, C, false);
      CUDA_CHECK(cudaMemsetAsync(dqkv.as(), 0, dqkv.bytes()));
      const int rows = B * c.heads * T;
      k::attention_bwd<<<(rows + rows_per_block - 1) / rows_per_block, 256>>>(L.qkv.as<float>(), L.P.as<float>(), datt, dqkv.as<float>(), B, T, C,
                                                                              c.heads);
      LAUNCH_CHECK();
      linear_back(L.ln1.as<float>(), W.qkv_w, W.qkv_b, dqkv.as<float>(), dln, C, 3 * C, false);
      k::layernorm_bwd<<<rgrid, 256>>>(L.x_in.as<float>(), P(W.ln1_w), L.ln1_mean.as<float>(), L.ln1_rstd.as<float>(), dln, dx, G(W.ln1_w),
                                       G(W.ln1_b), N, C);
      LAUNCH_CHECK();
    }
    k::embed_bwd<<<grid_for(size_t(N) * C), 256>>>(tok.as<int>(), dx, G(lay.wte), G(lay.wpe), N, T, C);
    LAUNCH_CHECK();
  }
};

// GPU vs CPU on a tiny configuration: loss, logits and every gradient.
static int verify_tiny(results::Results& res, uint64_t seed) {
  gpt::Config c;
  c.vocab = 256, c.context = 16, c.layers = 2, c.heads = 4, c.width = 32;
  const int B = 3, T = 13;  // T not a multiple of 32, heads of 8: odd on purpose
  verify::Rng rng(seed);
  std::vector<float> p = gpt::init_params(c, rng);
  for (auto& w : p) w *= 10.f;  // larger than GPT-2's init, so that every gradient is well above rounding
  std::vector<int> tok(size_t(B) * T), tgt(size_t(B) * T);
  for (auto& t : tok) t = int(rng.next() % 256);
  for (auto& t : tgt) t = int(rng.next() % 256);
  gpt::Activations a;
  const double loss_ref = gpt::forward(c, p, tok, tgt, B, T, a);
  const std::vector<double> g_ref = gpt::backward(c, p, tok, tgt, B, T, a);
  Model m(c, B, T);
  to_device(m.params.as<float>(), p);
  to_device(m.tok.as<int>(), tok);
  to_device(m.tgt.as<int>(), tgt);
  poison(m.logits.as(), m.logits.bytes());
  m.forward();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> logits = to_host(m.logits.as<float>(), a.logits.size());
  res.add(verify::compare("tiny GPT logits vs CPU", logits.data(), a.logits.data(), logits.size(), verify::kFp32.scaled(10)));
  m.loss_and_dlogits();
  poison(m.grads.as(), m.grads.bytes());
  m.backward();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> losses = to_host(m.loss.as<float>(), size_t(B) * T);
  double loss = 0;
  for (float l : losses) loss += l;
  loss /= double(losses.size());
  res.add(verify::compare("tiny GPT mean loss vs CPU", &loss, &loss_ref, 1, verify::kFp32));
  const std::vector<float> g = to_host(m.grads.as<float>(), g_ref.size());
  double gmax = 0;
  for (double x : g_ref) gmax = std::max(gmax, std::fabs(x));
  res.add(verify::compare("tiny GPT every gradient vs CPU", g.data(), g_ref.data(), g.size(), verify::Tol{1e-4 * gmax, 1e-3, "fp32"}));
  return 0;
}


// ---- Generation with a KV cache --------------------------------------------------------------------
// Each new token runs one position through the model: its key and value are appended to the
// layer's cache, and its query attends to the cache. A token costs O(t) attention work and one
// row of every matmul, instead of re-running the whole context.
struct Generator {
  gpt::Config c;
  gpt::Layout lay;
  cublasHandle_t blas;
  DeviceBuffer params, x, ln, qkv, att, tmp, fc, gl, logits, mean, rstd;
  std::vector<DeviceBuffer> kc, vc;
  explicit Generator(const ckpt::Checkpoint& k) : c(k.config), lay(k.config) {
    CUBLAS_CHECK(cublasCreate(&blas));
    const size_t C = size_t(c.width);
    params.alloc(lay.total * 4);
    to_device(params.as<float>(), k.params);
    x.alloc(C * 4), ln.alloc(C * 4), qkv.alloc(3 * C * 4), att.alloc(C * 4), tmp.alloc(C * 4), fc.alloc(4 * C * 4), gl.alloc(4 * C * 4);
    logits.alloc(size_t(c.vocab) * 4), mean.alloc(4), rstd.alloc(4);
    for (int l = 0; l < c.layers; ++l) kc.emplace_back(size_t(c.context) * C * 4), vc.emplace_back(size_t(c.context) * C * 4);
  }
  ~Generator() { cublasDestroy(blas); }
  float* P(size_t off) const { return params.as<float>() + off; }
  void linear(const float* in, size_t w, size_t b, float* out, int I, int O) {
    matmul_fwd(blas, in, P(w), out, 1, I, O);
    if (b != size_t(-1)) {
      k::add_bias<<<grid_for(size_t(O)), 256>>>(out, P(b), 1, O);
      LAUNCH_CHECK();
    }
  }
  // Logits for `token` at position `pos` (the cache holds positions 0..pos-1).
  std::vector<float> step(int token, int pos) {
    const int C = c.width;
    k::embed_one<<<grid_for(size_t(C)), 256>>>(token, pos, P(lay.wte), P(lay.wpe), x.as<float>(), C);
    LAUNCH_CHECK();
    for (int l = 0; l < c.layers; ++l) {
      const auto& W = lay.layer[size_t(l)];
      k::layernorm_fwd<<<1, 32>>>(x.as<float>(), P(W.ln1_w), P(W.ln1_b), ln.as<float>(), mean.as<float>(), rstd.as<float>(), 1, C);
      LAUNCH_CHECK();
      linear(ln.as<float>(), W.qkv_w, W.qkv_b, qkv.as<float>(), C, 3 * C);
      k::attention_decode<<<(c.heads + 7) / 8, 256>>>(qkv.as<float>(), kc[size_t(l)].as<float>(), vc[size_t(l)].as<float>(), att.as<float>(), pos,
                                                      C, c.heads);
      LAUNCH_CHECK();
      linear(att.as<float>(), W.proj_w, W.proj_b, tmp.as<float>(), C, C);
      k::add_inplace<<<grid_for(size_t(C)), 256>>>(x.as<float>(), tmp.as<float>(), size_t(C));
      k::layernorm_fwd<<<1, 32>>>(x.as<float>(), P(W.ln2_w), P(W.ln2_b), ln.as<float>(), mean.as<float>(), rstd.as<float>(), 1, C);
      linear(ln.as<float>(), W.fc_w, W.fc_b, fc.as<float>(), C, 4 * C);
      k::gelu_fwd<<<grid_for(size_t(4 * C)), 256>>>(fc.as<float>(), gl.as<float>(), size_t(4 * C));
      linear(gl.as<float>(), W.fc2_w, W.fc2_b, tmp.as<float>(), 4 * C, C);
      k::add_inplace<<<grid_for(size_t(C)), 256>>>(x.as<float>(), tmp.as<float>(), size_t(C));
      LAUNCH_CHECK();
    }
    k::layernorm_fwd<<<1, 32>>>(x.as<float>(), P(lay.lnf_w), P(lay.lnf_b), ln.as<float>(), mean.as<float>(), rstd.as<float>(), 1, C);
    LAUNCH_CHECK();
    linear(ln.as<float>(), lay.wte, size_t(-1), logits.as<float>(), C, c.vocab);
    return to_host(logits.as<float>(), size_t(c.vocab));
  }
};

static int sample_token(const std::vector<float>& logits, double temperature, int top_k, verify::Rng& rng) {
  return gpt::sample_top_k(logits, temperature, top_k, double(rng.next() >> 11) / 9007199254740992.0);
}

static int sample_run(const ckpt::Checkpoint& k, const std::string& prompt, int n, double temperature, int top_k, uint64_t seed) {
  Generator g(k);
  verify::Rng rng(seed);
  std::string out = prompt;
  std::vector<float> logits;
  for (size_t i = 0; i < prompt.size(); ++i) logits = g.step(int(static_cast<unsigned char>(prompt[i])), int(i));
  const auto t0 = std::chrono::steady_clock::now();
  int made = 0;
  for (int pos = int(prompt.size()); made < n && pos < k.config.context; ++made, ++pos) {
    const int tok = sample_token(logits, temperature, top_k, rng);
    out.push_back(char(tok));
    if (pos + 1 < k.config.context) logits = g.step(tok, pos);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s\n\n(%d tokens in %.3f s: %.0f tokens/s%s)\n", out.c_str(), made, s, made / s,
              made < n ? "; stopped at the context length" : "");
  return 0;
}

// Mean loss over the batch now in the model (forward + loss only).
static double batch_loss(Model& m) {
  m.forward();
  m.loss_and_dlogits();
  const std::vector<float> l = to_host(m.loss.as<float>(), size_t(m.N));
  double s = 0;
  for (float x : l) s += x;
  return s / double(l.size());
}

struct TrainOptions {
  std::string data, save, resume, log;
  int batch = 64, steps = 2000, warmup = 100, val_every = 250, val_batches = 8, log_every = 50;
  double lr = 1e-3, lr_min_frac = 0.1, clip = 1.0, weight_decay = 0.1;
};

static int train_run(results::Results& res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data, uint64_t seed) {
  std::printf("data: %s, %zu training bytes, %zu validation bytes\n", o.data.c_str(), data.train.size(), data.val.size());
  const int B = o.batch, T = cfg.context;
  Model m(cfg, B, T);
  verify::Rng rng(seed);
  int64_t step = 0;
  uint64_t pos = 0;
  if (!o.resume.empty()) {
    ckpt::Checkpoint k;
    try {
      k = ckpt::load(o.resume, &cfg);
    } catch (const std::exception& e) {
      cli::usage_error(kProg, e.what());
    }
    to_device(m.params.as<float>(), k.params), to_device(m.m.as<float>(), k.m), to_device(m.v.as<float>(), k.v);
    step = k.step, pos = k.data_pos, rng = verify::Rng(k.rng_state);
    std::printf("resumed from %s at step %lld\n", o.resume.c_str(), (long long)step);
  } else {
    to_device(m.params.as<float>(), gpt::init_params(cfg, rng));
  }
  std::printf("model: %d layers, %d heads, width %d, context %d: %zu parameters; batch %d\n", cfg.layers, cfg.heads, cfg.width,
              cfg.context, m.lay.total, B);
  FILE* log = o.log.empty() ? nullptr : std::fopen(o.log.c_str(), step ? "a" : "w");
  if (!o.log.empty() && !log) cli::usage_error(kProg, "--log: cannot write " + o.log);
  train::AdamW opt;
  opt.lr = o.lr, opt.weight_decay = o.weight_decay;
  // The training text lives on the GPU; each step's batch is gathered there (no per-step upload).
  DeviceBuffer corpus(data.train.size() * sizeof(int));
  to_device(corpus.as<int>(), data.train);
  // Per logging interval: each step's mean loss and gradient norm, read by the host only when it logs.
  DeviceBuffer sq(4), step_loss(size_t(o.log_every) * 4), step_norm(size_t(o.log_every) * 4);
  std::vector<int> tok, tgt;
  const auto t0 = std::chrono::steady_clock::now();
  double last_loss = NAN, val_loss = NAN, lr = 0, last_norm = NAN;
  const int64_t first = step;
  int64_t interval_start = step;
  for (; step < o.steps; ++step) {
    k::gather_batch<<<grid_for(size_t(B) * T), 256>>>(corpus.as<int>(), data.train.size(), pos, B, T, m.tok.as<int>(), m.tgt.as<int>());
    LAUNCH_CHECK();
    pos = (pos + uint64_t(B) * T) % data.train.size();
    m.forward();
    m.loss_and_dlogits();
    const int slot = int(step - interval_start);
    k::mean_of<<<1, 256>>>(m.loss.as<float>(), m.N, step_loss.as<float>() + slot);
    LAUNCH_CHECK();
    m.backward();
    CUDA_CHECK(cudaMemsetAsync(sq.as(), 0, 4));
    k::sum_squares<<<grid_for(m.lay.total), 256>>>(m.grads.as<float>(), m.lay.total, sq.as<float>());
    LAUNCH_CHECK();
    lr = train::lr_at(step, o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac);
    const int64_t t = step + 1;
    k::adamw_clipped<<<grid_for(m.lay.total), 256>>>(m.params.as<float>(), m.grads.as<float>(), m.m.as<float>(), m.v.as<float>(),
                                                     m.decay.as<unsigned char>(), m.lay.total, float(lr), float(opt.beta1),
                                                     float(opt.beta2), float(opt.eps), float(opt.weight_decay),
                                                     float(1 - std::pow(opt.beta1, double(t))), float(1 - std::pow(opt.beta2, double(t))),
                                                     sq.as<float>(), float(o.clip), step_norm.as<float>() + slot);
    LAUNCH_CHECK();
    const bool log_now = (step + 1) % o.log_every == 0 || step + 1 == o.steps;
    const bool val_now = (step + 1) % o.val_every == 0 || step + 1 == o.steps;
    if (!log_now && !val_now && slot + 1 < o.log_every) continue;  // nothing for the host to read yet
    // The host reads the interval's losses and norms (one synchronization per interval).
    const std::vector<float> ls = to_host(step_loss.as<float>(), size_t(slot) + 1), ns = to_host(step_norm.as<float>(), size_t(slot) + 1);
    for (int i = 0; i <= slot; ++i) {
      if (!std::isfinite(ls[size_t(i)])) {
        std::fprintf(stderr, "error: the loss became %g at step %lld\n", ls[size_t(i)], (long long)(interval_start + i));
        return cli::kFail;
      }
      if (log) std::fprintf(log, "%lld %.6f\n", (long long)(interval_start + i), ls[size_t(i)]);
    }
    last_loss = ls[size_t(slot)], last_norm = ns[size_t(slot)];
    interval_start = step + 1;
    if (val_now) {
      uint64_t vpos = 0;
      double vs = 0;
      for (int i = 0; i < o.val_batches; ++i) {
        vpos = train::batch(data.val, vpos, B, T, tok, tgt);
        to_device(m.tok.as<int>(), tok), to_device(m.tgt.as<int>(), tgt);
        vs += batch_loss(m);
      }
      val_loss = vs / o.val_batches;
      if (log) std::fprintf(log, "%lld val %.6f\n", (long long)step, val_loss);
    }
    if (log_now) {
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double tps = double(step + 1 - first) * B * T / el;
      std::printf("step %6lld/%d  loss %.4f  val %.4f  lr %.2e  |g| %.2f  %.0f tok/s  %.0f s elapsed, ETA %.0f s\n", (long long)step + 1,
                  o.steps, last_loss, val_loss, lr, last_norm, tps, el, el / double(step + 1 - first) * double(o.steps - step - 1));
      std::fflush(stdout);
    }
  }
  if (log) std::fclose(log);
  if (!o.save.empty()) {
    ckpt::Checkpoint k;
    k.config = cfg, k.step = step, k.data_pos = pos, k.rng_state = rng.next();
    k.params = to_host(m.params.as<float>(), m.lay.total), k.m = to_host(m.m.as<float>(), m.lay.total), k.v = to_host(m.v.as<float>(), m.lay.total);
    try {
      ckpt::save(o.save, k);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return cli::kFail;
    }
    std::printf("saved %s (step %lld)\n", o.save.c_str(), (long long)step);
  }
  res.config["final_train_loss"] = last_loss;
  res.config["final_val_loss"] = val_loss;
  return 0;
}

int main(int argc, char** argv) {
  cli::Args args(argc, argv, kProg, "a small GPT trained on any text (work in progress: fp32 path)");
  const cli::Standard st = cli::standard_flags(args, 20261150);
  gpt::Config cfg;
  cfg.layers = int(args.integer("layers", 6, 1, 96, "transformer blocks"));
  cfg.heads = int(args.integer("heads", 6, 1, 128, "attention heads (must divide the width)"));
  cfg.width = int(args.integer("width", 384, 8, 8192, "model width C"));
  cfg.context = int(args.integer("context", 256, 2, 8192, "context length T"));
  TrainOptions o;
  o.batch = int(args.integer("batch", 64, 1, 4096, "sequences per step"));
  o.steps = int(args.integer("steps", 2000, 1, 100000000, "training steps"));
  o.warmup = int(args.integer("warmup", 100, 1, 100000000, "warm-up steps"));
  o.lr = args.real("lr", 1e-3, 1e-7, 1.0, "peak learning rate");
  o.data = args.str("data", "data/corpus.txt", "the text to train on");
  o.save = args.str("save", "", "write a checkpoint here at the end");
  o.resume = args.str("resume", "", "continue from this checkpoint");
  o.log = args.str("log", "", "write the loss log here (step loss / step val loss)");
  const std::string sample = args.str("sample", "", "generate from this checkpoint instead of training");
  const std::string prompt = args.str("prompt", "The ", "with --sample: the text to continue");
  const int ntok = int(args.integer("tokens", 200, 1, 1 << 20, "with --sample: bytes to generate"));
  const double temperature = args.real("temperature", 0.8, 0.01, 10.0, "with --sample: softmax temperature");
  const int top_k = int(args.integer("top-k", 40, 1, 256, "with --sample: sample among the k likeliest bytes"));
  args.finish();
  st.validate(kProg);
  const std::string bad = cfg.invalid();
  if (!bad.empty()) cli::usage_error(kProg, bad);
  results::require_outputs(kProg, st);
  // The data file is checked before the GPU is touched, like every other input.
  train::Corpus data;
  if (!sample.empty()) {
    // The checkpoint and the prompt are checked before the GPU is touched.
    ckpt::Checkpoint k;
    try {
      k = ckpt::load(sample);
    } catch (const std::exception& e) {
      cli::usage_error(kProg, e.what());
    }
    if (prompt.empty()) cli::usage_error(kProg, "--prompt must not be empty");
    if (int(prompt.size()) >= k.config.context) cli::usage_error(kProg, "--prompt is longer than the model's context");
    results::Results res("day50_gpt", kProg);
    env::begin(res, st);
    return sample_run(k, prompt, ntok, temperature, top_k, uint64_t(st.seed));
  }
  if (!st.verify) {
    try {
      data = train::split_bytes(train::read_file(o.data), cfg.context);
    } catch (const std::exception& e) {
      cli::usage_error(kProg, e.what());
    }
  }
  results::Results res("day50_gpt", kProg);
  env::begin(res, st);
  if (st.verify) {
    verify_tiny(res, uint64_t(st.seed));
  } else {
    const int rc = train_run(res, cfg, o, data, uint64_t(st.seed));
    if (rc) return rc;
  }
  return res.finish(kProg, st.json);
}
