// day50_gpt/gpt.cu: a GPT-2-style model that trains on any text file and then writes more of it, in
// CUDA C++ with cuBLAS and cuDNN and no framework.
//
// What it teaches: a transformer as a list of kernels. Token + position embedding, pre-LayerNorm
// blocks (causal multi-head attention, a GELU MLP four times wide), residual connections, a final
// LayerNorm and an output head tied to the token embedding; the backward of every one of them; AdamW
// with weight decay, gradient clipping and a warm-up + cosine schedule; bf16 mixed precision; and
// generation with a KV cache. Matmuls go to cuBLAS, attention to cuDNN's fused flash-attention graph
// (nn/sdpa_cudnn.h) or to the hand-written kernels of nn/kernels/attention.cuh, and everything else is
// hand-written. The CPU reference gpt_ref.h (double precision, finite-difference-checked) is the oracle.
//
// This file only dispatches. The code, by concern:
//   options.h          every flag and every rule between flags (host-only)
//   nn/                the model: types, matmuls, one kernel file per layer, attention, optimizer
//   run/               trainer, training loop, generation, verification, benchmarks, multi-GPU
//   dev/attention.cu   the three attentions alone (./build/attention)
//
// Build: make                         Run: see the notes (README.md) for the full tour.
//   ./build/gpt                                   train on data/shakespeare.txt
//   ./build/gpt --data my.txt --steps 5000 --save my.ckpt
//   ./build/gpt --sample my.ckpt --prompt "Once" --tokens 400
//   ./build/gpt --verify                          GPU vs CPU, attention vs CPU, loss falls, resume == uninterrupted
//   ./build/gpt --bench --json results/{gpu}/day50_gpt.json
// Exit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped (no GPU / missing cuDNN feature).
#include <cstdio>
#include <string>
#include <vector>

#include "env.cuh"
#include "options.h"
#include "results.h"
#include "run/bench.cuh"
#include "run/generate.cuh"
#include "run/multi_gpu.cuh"
#include "run/train.cuh"
#include "run/verify.cuh"
#include "run/verify_cudnn.cuh"
#include "run/verify_dropout.cuh"
#include "run/verify_gemm.cuh"
#include "run/verify_tf32.cuh"
#include "run/verify_window.cuh"

// The one place the precision picks the template: f<bf16> for bf16, f<float> for fp32 and for tf32 (the
// fp32 model; TrainOptions::tf32 puts its matmuls on the TF32 tensor cores).
template <class F>
static auto by_precision(const std::string& prec, F&& f) {
  return prec == "bf16" ? f(bf16()) : f(float());
}

// The GPUs visible (0 where there are none: env::begin then skips the run).
static int gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) cudaGetLastError(), count = 0;
  return count;
}

static int run_sample(const gpt::Options& o) {
  results::Results res("day50_gpt", kProg);
  env::begin(res, o.st);
  const ckpt::Checkpoint& k = o.sample_ckpt;
  const Sampled s = generate(k.config, k.params, o.prompt, o.ntok, o.temperature, o.top_k, uint64_t(o.st.seed));
  std::printf("%s\n\n(%d tokens in %.3f s: %.0f tokens/s", s.text.c_str(), s.made, s.seconds, s.made / s.seconds);
  if (s.slid > 0)
    std::printf("; %d of them past the context length, through the sliding window: %.3f ms each", s.slid,
                1e3 * s.seconds_sliding / s.slid);
  std::printf(")\n");
  return 0;
}

static void run_verify(results::Results& res, const gpt::Options& o, const train::Corpus& data, int n) {
  const uint64_t seed = uint64_t(o.st.seed);
  const Attn attn = o.attn;
  const bool small = o.st.small;
  if (o.verify_only == "cudnn") return verify_cudnn_backend(res, data, seed + 17, small);
  // fp32 (and tf32): the matmul attention (auto) and the naive one; bf16: cuDNN (auto), matmul and naive.
  // --attention narrows this to one kind. The training checks use the precision's default.
  const Attn f32 = attn == Attn::kCudnn ? Attn::kAuto : attn;
  if (o.verify_only == "tf32") return verify_tf32(res, data, seed, f32, small);  // run/verify_tf32.cuh
#ifdef GPT_HAVE_NCCL
  if (o.verify_only == "dp") {  // the data-parallel checks alone (the one-GPU ones are a plain --verify's)
    if (n < 2) cli::skip(kProg, "--verify-only dp needs two GPUs; " + std::to_string(n) + " visible");
    verify_data_parallel<float>(res, data, seed + 5, f32, n);
    verify_data_parallel<bf16>(res, data, seed + 5, attn, n);
    return;
  }
#else
  if (o.verify_only == "dp") cli::skip(kProg, "--verify-only dp needs NCCL, and this build found none");
#endif
  for (Attn a : attn == Attn::kAuto ? std::vector<Attn>{Attn::kMatmul, Attn::kNaive} : std::vector<Attn>{f32}) {
    verify_tiny<float>(res, seed, a);
    if (!small) verify_attention<float>(res, seed + 1, a);
  }
  verify_tiny<float>(res, seed, f32, false);      // the unfused matmuls (no cuBLASLt epilogues) too
  verify_tiny<float>(res, seed, f32, true, 0.2);  // dropout: the same masks as the CPU's
  verify_tiny<float>(res, seed + 29, f32, true, 0.2, nullptr, false, Backend::kCustom, false, false, true);  // --recompute on
  verify_dropout_mask(res, seed, 0.1);
  verify_random_batches(res, data, seed + 7);
  verify_training<float>(res, data, seed + 2, f32, small);
  const bool fp32_only = o.verify_only == "fp32" || o.verify_only == "fp32+ours";
  if (o.verify_only == "fp32+ours" && sm90::available())  // our fused GEMM's own checks: ours and the CPU, no cuBLAS
    verify_gemm_keep_a(res, seed + 37, false);             // (racecheck: without the step's shape, minutes under it)
  if (o.verify_only == "fp32+ours" && (attn == Attn::kAuto || attn == Attn::kCudnn)) {
    // Our flash backward alone (cuDNN's forward, our dq/dkv kernels, the qkv bias sums), at the default
    // shape, with no bf16 GEMM before or after: cuBLAS's Hopper bf16 kernels stop racecheck with a hardware
    // exception, and the flash kernels exist only in bf16 (Makefile: RACECHECK_ARGS_gpt).
    verify_attention<bf16>(res, seed + 1, attn);
    if (flash90::available()) verify_attention<bf16>(res, seed + 1, attn, true, false, false);  // and on mma.sync
  }
  if (!fp32_only) verify_tf32(res, data, seed, f32, small);
  if (!fp32_only) {
    for (Attn a :
         attn == Attn::kAuto ? std::vector<Attn>{Attn::kAuto, Attn::kMatmul, Attn::kNaive} : std::vector<Attn>{attn}) {
      verify_tiny<bf16>(res, seed, a);
      if (!small) verify_attention<bf16>(res, seed + 1, a);
    }
    verify_tiny<bf16>(res, seed, attn, false);
    verify_tiny<bf16>(res, seed, attn, true, 0.2);
    verify_tiny<bf16>(res, seed + 29, attn, true, 0.2, nullptr, false, Backend::kCustom, false, false, true);  // --recompute on
    // --gelu-deriv off: fc keeping its pre-activation, with our passes (the kept derivative's are run/verify.cuh's
    // forced ones) and, below, with our fused GEMM
    verify_tiny<bf16>(res, seed + 43, attn, true, 0.2, nullptr, true, Backend::kCustom, false, false, false, false);
    if (attn == Attn::kAuto || attn == Attn::kCudnn) {
      // Our flash backward takes head size 64 and T a multiple of 64, which the tiny model has not: a model
      // with two heads of 64 and T = 128 (two blocks: masked and unmasked ones), every gradient against the
      // CPU; and cuDNN's own backward alone, which it replaces at the default shape.
      gpt::Config f = tiny_config();
      f.width = 128, f.heads = 2, f.context = 128;
      verify_tiny<bf16>(res, seed + 19, attn, true, 0.2, &f);
      if (!small) verify_attention<bf16>(res, seed + 1, attn, false);
      // our flash backward on mma.sync (--flash-mma sync) where the lines above ran it on wgmma
      if (!small && flash90::available()) verify_attention<bf16>(res, seed + 1, attn, true, false, false);
      // Our fused-epilogue GEMM (nn/gemm_sm90.h) in every linear layer it can take, against the CPU: the
      // same model (its widths are multiples of 8, as TMA needs), where this GPU runs the kernel.
      if (sm90::available()) verify_tiny<bf16>(res, seed + 23, attn, true, 0.2, &f, false, Backend::kCustom, false, true);
    }
    if (sm90::available()) {
      // ... and at shapes that are not whole 128 x 128 tiles: the tiny model (39 rows: the row tile's
      // edge, in the dGELU GEMM's column sums too) and width 80 (fc 320 wide: two tiles and a half, the
      // column sums' edge; 5 heads of 16).
      verify_tiny<bf16>(res, seed + 31, attn, true, 0.2, nullptr, false, Backend::kCustom, false, true);
      gpt::Config e = tiny_config();
      e.width = 80, e.heads = 5;
      verify_tiny<bf16>(res, seed + 31, attn, true, 0.2, &e, false, Backend::kCustom, false, true);
      verify_tiny<bf16>(res, seed + 47, attn, true, 0.2, &e, false, Backend::kCustom, false, true, false, false);
      // ... and its two loops, A streamed (the default) and A kept, on the same inputs (run/verify_gemm.cuh)
      verify_gemm_keep_a(res, seed + 37);
    }
    verify_training<bf16>(res, data, seed + 2, attn, small);
    if (attn == Attn::kAuto || attn == Attn::kCudnn) verify_cudnn_backend(res, data, seed + 17, small);
  }
  gpt::Config g1 = tiny_config(), g2 = tiny_config();
  g1.context = 24;                                               // head size 16: the grouped output path
  g2.context = 20, g2.layers = 1, g2.heads = 1, g2.width = 256;  // head size 256: the wide path
  verify_generate(res, seed + 3, g1);
  verify_generate(res, seed + 4, g2);
  verify_sliding_window(res, seed + 6, g1);
  // Data parallelism, where there are GPUs to spread over: all of them, or --gpus N of them.
#ifdef GPT_HAVE_NCCL
  if (n >= 2 && o.verify_only == "all") {
    verify_data_parallel<float>(res, data, seed + 5, f32, n);
    verify_data_parallel<bf16>(res, data, seed + 5, attn, n);
  } else {
    const std::string why = n < 2 ? "one GPU visible" : "--verify-only " + o.verify_only;
    std::printf("  (data-parallel checks not run: %s)\n", why.c_str());
  }
#else
  std::printf("  (data-parallel checks not run: this build has no NCCL)\n");
  (void)n;
#endif
}

// Training (or the multi-GPU benchmark) on 1 GPU, N GPUs in threads, or as one rank of N processes.
// Returns non-zero to exit with at once (a failed run, or a rank other than 0, which writes no file).
static int run_train(results::Results& res, const gpt::Options& o, const train::Corpus& data, int gpus, int count) {
  const uint64_t seed = uint64_t(o.st.seed);
#ifdef GPT_HAVE_NCCL
  if (o.st.bench) {
    res.config["layers"] = o.cfg.layers, res.config["heads"] = o.cfg.heads, res.config["width"] = o.cfg.width,
    res.config["context"] = o.cfg.context;
    res.config["batch"] = o.train.batch;
    by_precision(o.prec, [&](auto t) {
      bench_multi<decltype(t)>(res, o.cfg, o.train, data, o.attn, seed, gpus, o.bench_steps);
      return 0;
    });
    return 0;
  }
  if (o.world > 1) {
    const int dev = o.device >= 0 ? o.device : o.rank % count;
    if (dev >= count)
      cli::usage_error(kProg,
                       "--device " + std::to_string(dev) + ": this machine has " + std::to_string(count) + " GPU(s)");
    const int rc = by_precision(o.prec, [&](auto t) {
      return train_process<decltype(t)>(res, o.cfg, o.train, data, o.files, o.attn, seed, o.world, o.rank, dev,
                                        o.id_file);
    });
    if (rc) return rc;
    if (o.rank != 0) {  // rank 0 writes the results file; the others only report
      res.print_summary();
      return res.exit_code() ? res.exit_code() : -1;
    }
    return 0;
  }
  if (gpus > 1)
    return by_precision(o.prec, [&](auto t) {
      return train_threads<decltype(t)>(res, o.cfg, o.train, data, o.files, o.attn, seed, gpus);
    });
#else
  if (o.world > 1)
    cli::usage_error(kProg, "--world > 1 needs NCCL, and this build found none (see the first lines make prints)");
  (void)count;
#endif
  return by_precision(
      o.prec, [&](auto t) { return train_run<decltype(t)>(&res, o.cfg, o.train, data, o.files, o.attn, seed); });
}

int main(int argc, char** argv) {
  gpt::Options o = gpt::parse_options(argc, argv);
  if (o.check_args) return 0;
  clusters_enabled() = o.clusters;
  if (!o.sample.empty()) return run_sample(o);
  // --gpus: the GPUs this process drives, against the GPUs there are (with none, env::begin below
  // skips the run); before anything is printed, so a refusal is one line.
  const int count = gpu_count();
  int gpus = 1;
  if (o.gpus_s != "1") {
    gpus = o.gpus_s == "all" ? std::max(count, 1) : int(o.gpus_req);
    if (count > 0 && gpus > count)
      cli::usage_error(kProg, "--gpus " + o.gpus_s + ": this machine has " + std::to_string(count) + " GPU(s)");
    if (o.train.batch % gpus)
      cli::usage_error(kProg, "--batch " + std::to_string(o.train.batch) + " does not split evenly over " +
                                  std::to_string(gpus) + " GPUs");
#ifdef GPT_HAVE_NCCL
    // --collectives: copy asked for must be possible; auto takes the copy engines wherever they can run
    // (one process, no NCCL channel limit asked for, peer access between every pair of GPUs; with or
    // without ZeRO-1), else NCCL.
    const std::string why = count > 0 && gpus > 1 ? dp::peer_access_missing(gpus) : "no GPUs to pair";
    if (o.collectives == "copy" && count > 0 && gpus > 1 && !why.empty())
      cli::usage_error(kProg, "--collectives copy: " + why);
    if (o.collectives == "auto")  // --nccl-channels asks for NCCL's kernels: auto keeps them then
      o.train.copy_collectives = o.world == 1 && !o.train.nccl_channels && why.empty();
    // --zero auto: ZeRO-1 where the copy engines carry the collectives. There each GPU runs AdamW on
    // its shard only and pulls the others' beside the next forward: a shorter step than the plain
    // all-reduce, and less memory (make bench-multi measures both). NCCL's ZeRO-1 all-gathers after
    // AdamW, in the step's path, so with NCCL the plain all-reduce stays the default.
    if (o.zero == "auto") o.train.zero = o.train.copy_collectives ? 1 : 0;
#else
    if (gpus > 1)
      cli::usage_error(kProg, "--gpus > 1 needs NCCL, and this build found none (see the first lines make prints)");
#endif
  }
  train::Corpus data;
  try {
    std::string text = train::read_file(o.data_path);
    if (o.data_limit > 0 && text.size() > size_t(o.data_limit)) text.resize(size_t(o.data_limit));
    data = train::split_bytes(text, o.st.verify ? 64 : o.cfg.context);
  } catch (const std::exception& e) { cli::usage_error(kProg, e.what()); }
  results::Results res("day50_gpt", kProg);
  env::begin(res, o.st);
  res.config["precision"] = o.prec;
  res.config["attention"] = o.attn_s;
  res.config["backend"] = o.backend_s;  // the quality runs of --bench train with it too
  res.config["data"] = o.files.data_name;
  if (o.data_limit > 0) res.config["data_limit"] = o.data_limit;
  res.config["dropout"] = o.train.dropout;
  res.config["residual"] = o.train.residual_bf16 ? "bf16" : "fp32";  // the stream a training run kept (--residual)
  // --verify spreads its data-parallel checks over every GPU it sees (or --gpus N): the file says how many.
  const int verify_gpus = gpus > 1 ? gpus : count;
  const int file_gpus = o.world > 1 ? o.world : o.st.verify ? verify_gpus : gpus;
  res.config["gpus"] = file_gpus;
  if (o.st.verify) {
    run_verify(res, o, data, verify_gpus);
  } else if (o.st.bench && gpus == 1) {
    run_bench(res, o, data);
  } else if (const int rc = run_train(res, o, data, gpus, count)) {
    return rc < 0 ? 0 : rc;
  } else if (o.train.tf32) {
    // The trainer turns TF32 on from its options (run/trainer.cuh: m.set_tf32(o.tf32)); a run that
    // trained without it would be an fp32 run under tf32's name.
    const bool on = Model<float>::tf32_models() > 0;
    res.add(verify::fact("--precision tf32: the trained model's matmuls ran on the TF32 tensor cores", on, "exact",
                         on ? "" : "the trainer never called Model::set_tf32"));
  }
  // "{gpus}" in --json: the GPU count the file reports (results/{gpu}x{gpus}/...): for --verify, the GPUs its
  // data-parallel checks spread over, not --gpus (a verify run without --gpus named its file x1)
  std::string json_path = o.st.json;
  for (size_t p; (p = json_path.find("{gpus}")) != std::string::npos;)
    json_path.replace(p, 6, std::to_string(file_gpus));
  return res.finish(kProg, json_path);
}
