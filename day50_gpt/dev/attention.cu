// day50_gpt/dev/attention.cu: the GPT's causal attention alone, three ways, at the model's shape (one
// layer, forward + backward, the same inputs): cuDNN's fused flash-attention graph (bf16), cuBLAS
// batched matmuls around our causal softmax, and our naive kernels (nn/attn_kind.h says what each
// does). Like llm.c's dev/cuda/attention_forward.cu: a standalone per-op benchmark beside the trainer,
// using the trainer's own code (nn/attention.cuh), so what it times is what training runs.
//
//   make && ./build/attention --verify     each implementation's output and dq, dk, dv vs the CPU in double
//   ./build/attention --bench --json ../results/{gpu}/day50_gpt-attention.json
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "env.cuh"
#include "results.h"
#include "timing.cuh"
#include "../nn/model.cuh"
#include "../run/verify_attention.cuh"

// The three attentions alone at the model's shape (one layer's forward + backward), same inputs.
// flash: cuDNN's forward with our flash backward instead of cuDNN's backward: one launch on wgmma (nn/flash_sm90.cu)
// where it runs, or on mma.sync (nn/kernels/flash_bwd.cuh; wgmma false), or mma.sync's two launches (two_launches).
template <class T>
static void bench_attention(results::Results& res, const gpt::Config& cfg, int batch, Attn a, uint64_t seed,
                            bool flash = false, bool two_launches = false, bool wgmma = true) {
  gpt::Config c1 = cfg;
  c1.layers = 1;
  // auto: a refusal falls back instead of exiting
  Model<T> m(c1, batch, a == Attn::kCudnn ? Attn::kAuto : a, true, 0, Backend::kCustom, true, flash);
  m.flash_two_launches = two_launches, m.flash_wgmma = wgmma;
  if (flash && !m.ours_attn_bwd()) {
    std::printf("  cuDNN + our flash backward: not run (%s)\n", m.attn_note.c_str());
    return;
  }
  if (m.impl != a) {                                           // cuDNN refused the graph: say so, and time the others
    std::printf("  %s: not run (%s)\n", attn_name(a), m.attn_note.c_str());
    return;
  }
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
  b.name = std::string("attention fwd+bwd ") + Types<T>::name() + " " + attn_name(m.impl) + flash_name(m);
  b.dtype = Types<T>::name();
  b.shape = {batch, cfg.heads, cfg.context, (long long)D};
  b.ms = fb.median_ms, b.min_ms = fb.min_ms, b.max_ms = fb.max_ms, b.reps = fb.reps;
  b.tflops = 6 * prod / (fb.median_ms * 1e-3) / 1e12;
  json::Value ex = json::Value::object();
  ex["forward_ms"] = f.median_ms;
  ex["backward_ms"] = fb.median_ms - f.median_ms;
  ex["note"] = "TFLOP/s counts the full T x T products (6 of them); causal masking makes half of that work unnecessary";
  b.extra = ex;
  res.add(b);
  std::printf("  %-34s forward %8.3f ms, forward+backward %8.3f ms (%.1f TFLOP/s as 6 full products)\n", b.name.c_str(),
              f.median_ms, fb.median_ms, b.tflops);
}

int main(int argc, char** argv) {
  const char* prog = "attention";
  cli::Args args(argc, argv, prog,
                 "the GPT's attention alone (forward + backward): cuDNN fused (its backward or our flash one), cuBLAS matmuls + softmax, naive");
  const cli::Standard st = cli::standard_flags(args, 20261151);
  gpt::Config cfg;  // the default model's width, heads and context
  const int batch = int(args.integer("batch", 64, 1, 4096, "with --bench: sequences (the training batch)"));
  args.finish();
  st.validate(prog);
  results::require_outputs(prog, st);
  results::Results res("day50_gpt", prog);
  env::begin(res, st);
  const uint64_t seed = uint64_t(st.seed);
  // Every mode checks first: fp32 matmul and naive; bf16 cuDNN (auto picks it where cuDNN builds the
  // graph), matmul, naive, each against the CPU in double. A benchmark of a wrong attention is no result.
  for (Attn a : {Attn::kMatmul, Attn::kNaive}) verify_attention<float>(res, seed, a);
  for (Attn a : {Attn::kAuto, Attn::kMatmul, Attn::kNaive}) verify_attention<bf16>(res, seed, a);
  verify_attention<bf16>(res, seed, Attn::kAuto, false);  // cuDNN's own backward (the line above: ours)
  verify_attention<bf16>(res, seed, Attn::kAuto, true, true);  // ours as the first version's two launches
  if (flash90::available())  // ours in one launch on mma.sync, where the line above ran it on wgmma
    verify_attention<bf16>(res, seed, Attn::kAuto, true, false, false);
  if (!st.verify) {
    res.config["layers"] = 1, res.config["heads"] = cfg.heads, res.config["width"] = cfg.width,
    res.config["context"] = cfg.context, res.config["batch"] = batch;
    std::printf("\nattention alone, one layer, batch %d:\n", batch);
    for (Attn a : {Attn::kMatmul, Attn::kNaive}) bench_attention<float>(res, cfg, batch, a, seed);
    for (Attn a : {Attn::kCudnn, Attn::kMatmul, Attn::kNaive}) bench_attention<bf16>(res, cfg, batch, a, seed);
    bench_attention<bf16>(res, cfg, batch, Attn::kCudnn, seed, true);
    bench_attention<bf16>(res, cfg, batch, Attn::kCudnn, seed, true, true);
    if (flash90::available()) bench_attention<bf16>(res, cfg, batch, Attn::kCudnn, seed, true, false, false);
  }
  return res.finish(prog, st.json);
}
