// day50_gpt/run/bench.cuh: gpt --bench on one GPU, in parts (--bench-part): the training step's time
// and where it goes (fp32 and bf16, each without and with the matmul epilogues; tf32's default step
// against fp32's, run/bench_tf32.cuh), the quality runs
// (run/quality.cuh: the default run on the plays, then on a 1.1 MB cut of them), generation from the
// trained weights, and generation alone on fresh weights. The attentions alone are dev/attention.cu's.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "ceilings.cuh"
#include "bench_cudnn.cuh"
#include "bench_step.cuh"
#include "bench_tf32.cuh"
#include "generate.cuh"
#include "json.h"
#include "quality.cuh"
#include "results.h"
#include "timing.cuh"
#include "trainer.cuh"

// The training step's speed-ups, switched on one after another: none (" unfused"), the matmul epilogues,
// the fused LayerNorm, the CUDA graph, and in bf16 the cuBLASLt algorithm search (the default step, whose
// name has no suffix). fp32 has no search (nn/lt_tuned.cuh): its last variant is its default step.
inline std::vector<TrainOptions> step_variants(const TrainOptions& base, bool bf) {
  std::vector<TrainOptions> v(bf ? 5 : 4, base);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i].fusion = i >= 1, v[i].fused_ln = i >= 2, v[i].graph = i >= 3;
    v[i].lt_search = !bf || i >= 4;
    v[i].backend = Backend::kCustom;  // the cuDNN-graph step has its own row (run/bench_cudnn.cuh)
    v[i].tf32 = false;                // the tf32 step has its own row (run/bench_tf32.cuh)
    v[i].recompute = false;           // the step recomputing the GELU outputs has its own row (run_bench)
    v[i].flash_bwd = true;            // so has the step with cuDNN's attention backward
    v[i].flash_wgmma = true;          // and ours on mma.sync
    v[i].dw_stream = true;            // and the graph with every matmul on one stream
    v[i].keep_a = false;              // and our fused GEMM keeping A (nn/gemm_sm90.h)
    v[i].store_slots = 4;             // and fc's forward storing through two staging slots a consumer
    v[i].batch_finish = true;         // and the step finishing each column sum in a launch of its own
    v[i].chain_priority = ChainPriority::kAuto;  // chosen by timing; and the graph at either fixed setting (off, on)
    v[i].gelu_deriv = true;           // and the step keeping the GELU's input, not its derivative
    v[i].dw_reduce_kernel = true;     // and the weight gradients asked to add their split-K parts in place
    v[i].residual_bf16 = false;       // the residual stream in fp32 (the default); bf16's has its own row
    v[i].adamw_overlap = true;        // a graph step's AdamW beside the next forward; at the step's end: own row
    v[i].pdl = false;                 // plain launches; the programmatic ones have their own row
    // bf16's graph sizes the weight gradients for half the SMs (options.h: kDwSmShareDefault); the step
    // sized for every SM has its own row. Without the graph (the dW on the chain's stream) and in fp32: every SM.
    v[i].dw_sm_share = bf && v[i].graph ? kDwSmShareDefault : 1;
  }
  return v;
}
inline bool default_step(const TrainOptions& o, bool bf) {
  return o.fusion && o.fused_ln && o.graph && o.lt_search && !o.recompute && o.flash_bwd && o.flash_wgmma && o.dw_stream &&
         !o.keep_a && o.store_slots == 4 &&
         o.batch_finish && o.chain_priority == ChainPriority::kAuto && o.gelu_deriv && o.dw_reduce_kernel &&
         o.dw_sm_share == (bf ? kDwSmShareDefault : 1) && !o.residual_bf16 && o.adamw_overlap && !o.pdl;
}
inline std::string variant_name(const TrainOptions& o, double default_share) {
  if (!o.fusion) return " unfused";
  std::string s;
  if (!o.fused_ln) s += ", no fused LN";
  if (!o.graph) s += ", no graph";
  if (!o.lt_search) s += ", no Lt search";
  if (o.recompute) s += ", recompute";
  if (!o.flash_bwd) s += ", cuDNN attention backward";
  if (o.flash_bwd && !o.flash_wgmma) s += ", flash backward on mma.sync";
  if (o.graph && !o.dw_stream) s += ", one stream";
  if (o.keep_a) s += ", A kept";
  if (o.store_slots != 4) s += ", two staging slots";
  if (!o.batch_finish) s += ", finishes one by one";
  if (o.graph && o.dw_stream && o.chain_priority == ChainPriority::kOff) s += ", chain at default priority";
  if (o.graph && o.dw_stream && o.chain_priority == ChainPriority::kOn) s += ", chain at high priority";
  if (!o.gelu_deriv) s += ", GELU input kept";
  if (!o.dw_reduce_kernel) s += ", dW asked to reduce in place";
  if (o.residual_bf16) s += ", residual stream in bf16";
  if (o.graph && o.dw_stream && !o.adamw_overlap) s += ", AdamW at the step's end";  // (one stream: both off)
  if (o.pdl) s += ", programmatic launches";
  // A graph row with the weight gradients on the side stream names its SM share where it is not its precision's
  // default (default_share: bf16's 0.5, options.h; fp32's 1), as "every SM" or as a percentage.
  if (o.graph && o.dw_stream && o.dw_sm_share != default_share)
    s += o.dw_sm_share < 1 ? ", dW sized for " + std::to_string(int(o.dw_sm_share * 100 + 0.5)) + "% of the SMs"
                           : ", dW sized for every SM";
  return s.empty() ? s : " " + s.substr(2);
}

// The times of `reps` training steps, from events on the compute stream between them. With
// data parallelism every step ends with the all-reduce, so rank 0's step is every GPU's step.
template <class T>
std::vector<double> step_times(Trainer<T>& tr, int reps) {
  std::vector<cudaEvent_t> ev(size_t(reps) + 1);
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  CUDA_CHECK(cudaEventRecord(ev[0], tr.stream));
  for (int i = 0; i < reps; ++i) {
    tr.step_once();
    CUDA_CHECK(cudaEventRecord(ev[size_t(i) + 1], tr.stream));
  }
  CUDA_CHECK(cudaEventSynchronize(ev[size_t(reps)]));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, ev[size_t(i)], ev[size_t(i) + 1]));
    ms.push_back(t);
  }
  for (auto& e : ev) CUDA_CHECK(cudaEventDestroy(e));
  return ms;
}

// The timed steps are checked, not only timed: every loss finite, and their first two losses (the
// graph's where the variant has one) equal to an eager re-run of the same two steps from a checkpoint
// taken before them. The first loss is a forward only, from the same weights and batch: the same
// launches, so it must match to the last bits (a tight tolerance, for a library that might pick another kernel inside a
// capture); the second follows a backward and an AdamW step, where cuDNN's backward adds with atomics: to rounding.
// Leaves the trainer eager at a step it has already run: call after the timing.
template <class T>
void check_timed_steps(results::Results& res, Trainer<T>& tr, const ckpt::Checkpoint& before, size_t first,
                       const std::string& name) {
  tr.read_back();
  const std::vector<float> timed(tr.losses.begin() + std::ptrdiff_t(first), tr.losses.end());
  size_t bad = 0;
  for (float l : timed) bad += !std::isfinite(l);
  res.add(verify::fact(name + ": the timed steps' losses are finite", bad == 0 && !timed.empty(), Types<T>::name(), "",
                       timed.size(), bad));
  const size_t n = std::min<size_t>(2, timed.size());
  tr.restore(before);
  tr.o.graph = false;
  for (size_t i = 0; i < n; ++i) tr.step_once();
  tr.read_back();
  const std::vector<double> again(tr.losses.end() - std::ptrdiff_t(n), tr.losses.end()),
      got(timed.begin(), timed.begin() + std::ptrdiff_t(n));
  res.add(verify::compare(name + ": the first timed step's loss == an eager re-run's (forward only: same weights)",
                          got.data(), again.data(), std::min<size_t>(1, n), verify::Tol{1e-5, 1e-5, "same launches"}));
  if (n > 1)
    res.add(verify::compare(name + ": the second timed step's loss == an eager re-run's (after a backward and AdamW)",
                            got.data() + 1, again.data() + 1, 1, verify::Tol{2e-3, 2e-3, "rounding (atomics)"}));
}

// Dense TF32 tensor-core peak (no sparsity) of the H100 / H200 SXM data sheets: 989 TFLOP/s with
// sparsity, half that dense.
constexpr double kPeakTf32Tflops = 494.7;

// One training step row: its time (events between steps), where it goes, its MFU. more (if set) adds
// to the row before it is stored (the tf32 row: its ratio to fp32, run/bench_tf32.cuh).
template <class T>
void bench_train(results::Results& res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
                 Attn attn, uint64_t seed, const std::function<void(results::Bench&)>& more = nullptr) {
  const size_t base = used_bytes();
  Trainer<T> tr(cfg, o, data, attn, seed);
  tr.m.set_tf32(o.tf32);  // before its first step
  const std::string prec = o.tf32 ? "tf32" : Types<T>::name();
  const std::string name =
      "train step " + prec + variant_name(o, std::is_same<T, bf16>::value ? kDwSmShareDefault : 1.0);
  std::printf("\n%s: attention = %s\n", name.c_str(), tr.m.attn_note.c_str());
  for (int i = 0; i < 3; ++i) tr.step_once();  // warm-up (cuBLAS heuristics, first launches, the graph's capture)
  tr.settle_priority();  // and --chain-priority auto's timed steps: the timed steps below run its choice alone
  CUDA_CHECK(cudaDeviceSynchronize());
  const size_t peak = used_bytes() - base;
  // Where the time goes: one step with events between phases.
  Phases ph;
  tr.m.ph = &ph;
  tr.settle_update();  // (--adamw-overlap on: the warm-up's last AdamW, before the first phase's event)
  ph.start(tr.stream);
  tr.step_once();  // eager (a step split into phases is never replayed as a graph)
  const std::vector<double> phase_ms = ph.finish();
  tr.m.ph = nullptr;
  // Step time: events around each step (the training data differs every step: nothing is cached).
  const int reps = 20;
  const ckpt::Checkpoint before = tr.checkpoint();  // for check_timed_steps
  const size_t first_timed = tr.losses.size();
  const std::vector<double> ms = step_times(tr, reps);
  check_timed_steps(res, tr, before, first_timed, name);
  results::Bench b;
  b.name = name;
  b.dtype = prec;
  b.shape = {cfg.layers, cfg.heads, cfg.width, cfg.context, o.batch};
  const timing::Stats s = timing::summarize(ms);
  b.ms = s.median_ms, b.min_ms = s.min_ms, b.max_ms = s.max_ms, b.reps = s.reps;
  b.tokens_per_s = double(o.batch) * cfg.context / (b.ms * 1e-3);
  const bool bf = std::is_same<T, bf16>::value;
  const double flops = model_flops_per_step(cfg, o.batch), tflops = flops / (b.ms * 1e9),
               peak_tf = bf       ? kPeakBf16Tflops
                         : o.tf32 ? kPeakTf32Tflops
                                  : kPeakFp32Tflops;
  json::Value ex = json::Value::object();
  ex["attention"] = tr.m.attn_note;
  ex["fusion"] = o.fusion;
  ex["fused_ln"] = o.fused_ln, ex["residual_bf16"] = o.residual_bf16, ex["pdl"] = o.pdl;
  if (o.graph) ex["programmatic_edges"] = tr.graph_census.programmatic_edges;  // what the capture made of it
  ex["graph"] = o.graph;
  ex["lt_search"] = o.lt_search;
  ex["recompute"] = o.recompute;
  ex["dw_stream"] = tr.m.dw_stream && o.graph;  // what the step did (the model turns it off where it cannot)
  ex["adamw_overlap"] = tr.upd_launches > 0;   // what the step did: AdamW beside the next forward (run/trainer.cuh)
  ex["flash_bwd"] = o.flash_bwd, ex["flash_wgmma"] = tr.m.ours_attn_bwd() && tr.m.flash_on_wgmma();  // (what ran)
  ex["keep_a"] = o.keep_a;
  ex["store_slots"] = o.keep_a ? 2 : o.store_slots;  // what fc's forward used: the loop keeping A has two slots only
  ex["batch_finish"] = o.batch_finish;
  ex["chain_priority"] = chain_priority_name(o.chain_priority);
  if (tr.priority.decided) tr.priority.record(ex);  // auto's choice (run/trainer.cuh) and the medians that made it
  ex["dw_reduce_kernel"] = o.dw_reduce_kernel;
  ex["dw_sm_share"] = o.dw_sm_share;
  ex["gelu_deriv"] = o.gelu_deriv && tr.m.gelu_deriv_applies();  // what the step did (the model's conditions)
  ex["model_flops_per_step"] = flops;
  ex["model_tflops"] = tflops;
  ex["mfu_pct"] = 100 * tflops / peak_tf;
  ex["mfu_peak_tflops"] = peak_tf;
  ex["mfu_formula"] =
      "tokens * (6 * (12 L C^2 + C V) + 12 L T C) / step time / dense peak (H100/H200 SXM data sheet: "
      "989.4 TFLOP/s bf16, 494.7 tf32, 66.9 fp32)";
  ex["peak_gpu_mib"] = double(peak) / (1 << 20);
  json::Value pj = json::Value::object();
  double total = 0;
  for (int p = 0; p < kPhases; ++p) pj[kPhaseName[p]] = phase_ms[size_t(p)], total += phase_ms[size_t(p)];
  ex["phase_ms"] = pj;
  ex["phase_total_ms"] = total;
  // The default step's LayerNorm alone (last: it leaves the trainer's buffers as garbage); tf32's is fp32's.
  // The bf16 residual stream's too (fewer bytes: is it still near copy bandwidth?), recorded, not a goal.
  if ((default_step(o, bf) || (o.residual_bf16 && !o.pdl)) && !o.tf32)  // (the bf16 stream's alone: its own row's)
    ex["layernorm_alone"] = bench_layernorm(res, tr, name, !o.residual_bf16);
  b.extra = ex;
  if (more) more(b);
  res.add(b);
  std::printf("%s: median %.2f ms/step (min %.2f, max %.2f) = %.0f tokens/s; GPU memory %.0f MiB\n", name.c_str(), b.ms,
              b.min_ms, b.max_ms, b.tokens_per_s, double(peak) / (1 << 20));
  std::printf("  model FLOPs %.3g per step: %.0f TFLOP/s = MFU %.1f%% of %.0f TFLOP/s\n", flops, tflops,
              100 * tflops / peak_tf, peak_tf);
  std::printf("  where one step's time goes (events between phases, one eager step; %.2f ms in all):\n", total);
  for (int p = 0; p < kPhases; ++p)
    std::printf("    %-18s %8.3f ms  %5.1f%%\n", kPhaseName[p], phase_ms[size_t(p)],
                100.0 * phase_ms[size_t(p)] / total);
  if (default_step(o, bf) && bf)
    res.add_goal(name + ": MFU >= 35% (model FLOPs / dense bf16 peak)", 100 * tflops / peak_tf,
                 tflops >= 0.35 * peak_tf);
}

// ---- Generation, each step of the lesson at batch 1 ----------------------------------------------
// One generator variant's speed: `reps` runs of n bytes from the same prompt and draws (after one
// warm-up run), each timed by events around generate(n) alone; its bytes (the last run's).
struct GenVariant {
  const char* name;
  bool bf;  // bf16 weights (else fp32)
  DecodePath path;
  bool per_token;              // persistent: one launch per token
  int blocks_per_sm;           // persistent: blocks resident per SM (at most what fits)
  bool prefetch;               // persistent: the next stage's weights asked for before each barrier
  bool merge;                  // persistent: attention waits for its head's qkv rows, not for a barrier
  bool own_barrier = false;    // persistent: the hand-written grid barrier, not grid.sync()
  int sms_per_block = 1;       // persistent: one block per this many SMs (fewer arrivals at each barrier)
  int chunk = k::dec::kChunk;  // persistent: cached positions per attention work item
  bool count_barrier = false;  // persistent, own_barrier: the counting kind
  bool resident = false;       // persistent: the weights in shared memory (FastDecoder::set_resident)
  bool late_epilogue = false;  // the GEMVs' residual and bias loaded after the sums (Net::late_epilogue)
  int cluster = 0;             // kCluster: the cluster's size (FastDecoder::use_cluster)
};
struct GenTiming {
  std::vector<double> ms_per_token;
  std::string text;
  size_t weight_bytes = 0;
  int blocks = 0;
  json::Value stage_us;  // persistent kernel: mean microseconds per stage of each kind (barrier included)
  bool gave_up = false;  // a wait (a meeting, a count, the hand-written barrier) gave up in the last launch
  double resident_kb = 0;  // weights in shared memory: KiB of them a block holds (block 0's, the most)
  // The cluster decoder's stamped run is another build of the kernel (decode_cluster<W, true>): how many of
  // its bytes differ from the timed run's (-1: no stamped run).
  long stamped_bytes_differ = -1;
};

// One more run of a persistent decoder with the per-stage time stamps on: the mean time of each kind
// of stage (its work, the prefetch and the barrier after it), over every layer and token.
template <class W>
json::Value stage_breakdown(FastDecoder<W>& d, const std::vector<int>& prompt, int n) {
  d.enable_trace(n);
  const int L = d.c.layers, S = L * k::dec::kStagesPerLayer + 1;
  // kCluster: + when the next copy was handed over, when the weights were there, when the work was done.
  const bool parts = d.path == DecodePath::kCluster;
  const size_t NS = size_t(n) * S;
  d.reset();
  d.feed(prompt);
#ifdef DECODE_SUBSTAMPS
  // Every block's clock64() at kSub points of every stage (decode_cluster.cuh), for the generated tokens only
  // (set after the prompt's launch, which would stamp its own stages into the same places).
  DeviceBuffer subbuf;
  if (parts && n > 0) {
    subbuf.alloc(NS * size_t(d.blocks) * k::dec::kSub * 8);
    CUDA_CHECK(cudaMemsetAsync(subbuf.as(), 0, subbuf.bytes(), d.stream));  // on the decoder's stream: ordered
    d.net.sub = subbuf.as<unsigned long long>();
  }
#endif
  d.generate(n);
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
  const std::vector<unsigned long long> tr = to_host(d.trace.template as<unsigned long long>(), NS * (parts ? 4 : 1) + 1);
  static const char* kKind[] = {"qkv", "attention", "proj", "fc", "fc2", "head"};
  double sum[6] = {}, issue[6] = {}, wait[6] = {}, work[6] = {}, sync[6] = {};
  for (int i = 0; i < n; ++i)
    for (int s = 0; s < S; ++s) {
      const size_t at = size_t(i) * S + size_t(s);
      const int kk = s == S - 1 ? 5 : s % k::dec::kStagesPerLayer;
      sum[kk] += double(tr[at + 1] - tr[at]) * 1e-3;
      if (parts) {
        const unsigned long long handed = tr[NS + 1 + 3 * at], got = tr[NS + 2 + 3 * at], done = tr[NS + 3 + 3 * at];
        issue[kk] += double(handed - tr[at]) * 1e-3, wait[kk] += double(got - handed) * 1e-3;
        work[kk] += double(done - got) * 1e-3, sync[kk] += double(tr[at + 1] - done) * 1e-3;
      }
    }
  json::Value v = json::Value::object();
  for (int kk = 0; kk < 6; ++kk) {
    const double per = double(n) * (kk == 5 ? 1 : L);
    v[kKind[kk]] = sum[kk] / per;
    if (parts) {  // the stage's parts: handing the next copy over, waiting for its weights, its work, the barrier
      v[std::string(kKind[kk]) + " issue"] = issue[kk] / per;
      v[std::string(kKind[kk]) + " wait"] = wait[kk] / per;
      v[std::string(kKind[kk]) + " work"] = work[kk] / per;
      v[std::string(kKind[kk]) + " barrier"] = sync[kk] / per;
    }
  }
  v["token"] = double(tr[size_t(n) * S] - tr[0]) * 1e-3 / n;
  d.net.trace = nullptr;
#ifdef DECODE_SUBSTAMPS
  // Each point's time from the block's own stage start: block 0's, the mean and the maximum over the blocks.
  if (parts && n > 0) {
    const int B = d.blocks, P = k::dec::kSub;
    std::vector<unsigned long long> sb = to_host(d.net.sub, NS * size_t(B) * P);
    d.net.sub = nullptr;
    for (size_t at = 0; at < NS * size_t(B); ++at)  // a point not reached: the one before it
      for (int q = 1; q < P; ++q)
        if (sb[at * P + q] == 0) sb[at * P + q] = sb[at * P + q - 1];
    // Cycles per ns: block 0's span over the stamped launch against the global timer's.
    const double span_cyc = double(sb[((NS - 1) * B) * P + k::dec::kSubLanded] - sb[k::dec::kSubStart]);
    const double ghz = span_cyc / double(tr[NS] - tr[0]);
    static const char* kPoint[] = {"start",   "issued", "weights", "A",    "B",     "pushed",
                                   "barrier", "landed", "ranks",   "exps", "picked"};
    static_assert(sizeof(kPoint) / sizeof(kPoint[0]) == k::dec::kSub, "a name for every point");
    // Kinds as kKind, then layer 0's qkv apart (kind 0 here: the other layers'), which samples.
    double acc[7][k::dec::kSub][3] = {};
    for (size_t st = 0; st < NS; ++st) {
      const int s_in = int(st % S), kk = s_in == 0 ? 6 : s_in == S - 1 ? 5 : s_in % k::dec::kStagesPerLayer;
      for (int q = 1; q < P; ++q) {
        double b0 = 0, mean = 0, mx = 0;
        for (int b = 0; b < B; ++b) {
          const unsigned long long* e = &sb[(st * B + b) * P];
          const double c = double(e[q] - e[0]) / ghz * 1e-3;
          if (b == 0) b0 = c;
          mean += c / B, mx = std::max(mx, c);
        }
        acc[kk][q][0] += b0, acc[kk][q][1] += mean, acc[kk][q][2] += mx;
      }
    }
    json::Value sv = json::Value::object();
    sv["sm_ghz"] = ghz;
    std::printf(
        "    sub-stamps (us from the block's stage start: block 0 / mean / max over the %d blocks; SM clock %.3f "
        "GHz)\n",
        B, ghz);
    for (int kk = 0; kk < 7; ++kk) {
      const double per = double(n) * (kk == 5 || kk == 6 ? 1 : kk == 0 ? L - 1 : L);
      if (per <= 0) continue;
      const char* kname = kk == 6 ? "qkv0" : kKind[kk];
      json::Value kv = json::Value::object();
      std::printf("      %-9s", kname);
      for (int q = 1; q < P; ++q) {
        if (q > k::dec::kSubLanded && kk != 6) continue;  // the sampling's points: layer 0's qkv only
        json::Value t = json::Value::array();
        for (int m = 0; m < 3; ++m) t.push(acc[kk][q][m] / per);
        kv[kPoint[q]] = t;
        std::printf(" %s %.2f/%.2f/%.2f", kPoint[q], acc[kk][q][0] / per, acc[kk][q][1] / per, acc[kk][q][2] / per);
      }
      std::printf("\n");
      sv[kname] = kv;
    }
    v["sub"] = sv;
  }
#endif
  return v;
}
// The decoder with a cluster a head (kHeads): one more run with its stamps on (decode_heads<W, true>): for the
// first block of cluster 0 and the last block of the last cluster, the mean microseconds of each kind of stage
// (layer 0's qkv apart, with the sampling and the embedding in its work) spent waiting for its weights, working
// and exchanging (the pushes within the cluster and their barrier, or the meeting through L2).
template <class W>
json::Value heads_breakdown(FastDecoder<W>& d, const std::vector<int>& prompt, int n) {
  const int L = d.c.layers, S = 5 * L + 1;
  const size_t per = size_t(3) * S, most = std::max<size_t>(size_t(n), prompt.size());
  DeviceBuffer buf((1 + 2 * most * per) * 8);
  d.net.trace = buf.as<unsigned long long>();
  d.reset();
  d.feed(prompt);
  d.generate(n);
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
  d.net.trace = nullptr;
  const std::vector<unsigned long long> tr = to_host(buf.as<unsigned long long>(), 1 + 2 * size_t(n) * per);
  static const char* kKind[] = {"qkv0", "qkv", "attention", "proj", "fc", "fc2", "head"};
  static const char* kPart[] = {"weights", "work", "exchange"};
  json::Value v = json::Value::object();
  for (int b = 0; b < 2; ++b) {
    const size_t base = 1 + size_t(b) * size_t(n) * per;
    double sum[7][3] = {}, cnt[7] = {};
    for (int i = 0; i < n; ++i)
      for (int st = 0; st < S; ++st) {
        const size_t k = size_t(i) * S + size_t(st);
        if (b == 1 && k == 0) continue;  // the last block has no launch-start stamp
        const int kind = st == S - 1 ? 6 : st % 5 == 0 ? (st == 0 ? 0 : 1) : st % 5 + 1;
        const double prev = double(k == 0 ? tr[0] : tr[base + 3 * (k - 1) + 2]);
        const double w = double(tr[base + 3 * k]), dn = double(tr[base + 3 * k + 1]), e = double(tr[base + 3 * k + 2]);
        sum[kind][0] += (w - prev) * 1e-3, sum[kind][1] += (dn - w) * 1e-3, sum[kind][2] += (e - dn) * 1e-3;
        cnt[kind] += 1;
      }
    json::Value blk = json::Value::object();
    for (int kk = 0; kk < 7; ++kk)
      for (int q = 0; q < 3; ++q)
        blk[std::string(kKind[kk]) + " " + kPart[q]] = cnt[kk] > 0 ? sum[kk][q] / cnt[kk] : 0.0;
    v[b == 0 ? "first block" : "last block"] = blk;
  }
  v["token"] = double(tr[size_t(n) * per] - tr[0]) * 1e-3 / n;  // block 0's last stamp
  return v;
}

template <class W>
GenTiming time_fast_generation(const gpt::Config& cfg, const std::vector<float>& params, const std::string& prompt,
                               int n, double temperature, int top_k, uint64_t seed, const GenVariant& v, int reps) {
  std::vector<int> pr;
  for (char ch : prompt) pr.push_back(int(static_cast<unsigned char>(ch)));
  verify::Rng rng(seed);  // the draws generate() makes from the same seed
  std::vector<double> u(static_cast<size_t>(n));
  for (auto& x : u) x = double(rng.next() >> 11) / 9007199254740992.0;
  FastDecoder<W> d(cfg, params, n, v.path, v.blocks_per_sm);
  d.per_token = v.per_token, d.net.prefetch = v.prefetch, d.merge = v.merge, d.own_barrier = v.own_barrier;
  if (v.sms_per_block > 1) d.use_blocks(d.blocks / v.sms_per_block);
  d.net.chunk = v.chunk, d.count_barrier = v.count_barrier, d.net.late_epilogue = v.late_epilogue;
  GenTiming g;
  if (v.resident && !d.set_resident()) return g;  // does not fit on this GPU: no row
  if (v.path == DecodePath::kCluster && !d.use_cluster(v.cluster)) return g;  // no such cluster here: no row
  if (v.path == DecodePath::kHeads && !d.heads_ok) return g;                   // nor H clusters of 16: no row
  d.prepare(u, temperature, top_k);
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  for (int r = 0; r <= reps; ++r) {
    d.reset();
    d.feed(pr);  // waits: the clock starts on an idle stream
    CUDA_CHECK(cudaEventRecord(a, d.stream));
    d.generate(n);
    CUDA_CHECK(cudaEventRecord(b, d.stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r > 0) g.ms_per_token.push_back(double(ms) / n);  // run 0: warm-up
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  g.text = prompt;
  for (int t : d.bytes(n)) g.text.push_back(char(t));
  g.weight_bytes = d.weight_bytes(), g.blocks = d.blocks, g.resident_kb = d.resident ? d.resident_bytes() / 1024.0 : 0;
  g.gave_up = d.gave_up();
  if (v.path != DecodePath::kStages && !v.per_token) {
    const std::vector<int> timed = d.bytes(n);
    // poisoned first, so that a stamped run that wrote nothing cannot pass on the timed run's bytes
    CUDA_CHECK(cudaMemsetAsync(d.out.as(), 0xff, size_t(n) * sizeof(int), d.stream));
    g.stage_us = v.path == DecodePath::kHeads ? heads_breakdown(d, pr, n) : stage_breakdown(d, pr, n);
    g.gave_up = g.gave_up || d.gave_up();
    const std::vector<int> stamped = d.bytes(n);
    g.stamped_bytes_differ = 0;
    for (size_t i = 0; i < timed.size(); ++i) g.stamped_bytes_differ += stamped[i] != timed[i];
  }
  return g;
}

// The grid barrier alone (k::dec::barrier_only: no work between two barriers), grid.sync() against the
// hand-written one, with a block on every SM, every second SM, every fourth: what each of the persistent
// kernel's stages pays on top of its work. Rows "grid barrier alone, ...": ms is per barrier.
inline void bench_grid_barrier(results::Results& res) {
  int dev = 0, sms = 0, coop = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  if (!coop) return;
  DeviceBuffer bar(12);
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  int iters = 2000;
  const int reps = 5;
  // One row: `start` records event a and launches `iters` barriers; the median over reps runs after a warm-up.
  auto barrier_row = [&](const std::string& name, int blocks, int threads, const auto& start) {
    std::vector<double> ms;
    for (int r = 0; r <= reps; ++r) {  // run 0: warm-up
      start();
      CUDA_CHECK(cudaEventRecord(b));
      CUDA_CHECK(cudaEventSynchronize(b));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
      if (r > 0) ms.push_back(double(t) / iters);
    }
    const timing::Stats st = timing::summarize(ms);
    results::Bench row;
    row.name = name, row.dtype = "none", row.shape = {blocks, threads};
    row.ms = st.median_ms, row.min_ms = st.min_ms, row.max_ms = st.max_ms, row.reps = st.reps;
    row.extra = json::Value::object();
    row.extra["us_per_barrier"] = 1e3 * st.median_ms;
    row.extra["blocks"] = blocks, row.extra["barriers_per_run"] = iters;
    res.add(row);
    std::printf("%-66s %10.2f\n", row.name.c_str(), 1e3 * st.median_ms);
  };
  std::printf("%-66s %10s\n", "grid barrier alone", "us each");
  static const char* kKind[] = {"grid.sync()", "hand-written", "hand-written, counting"};
  for (int per : {1, 2, 4})
    for (int kind : {0, 1, 2}) {
      int blocks = std::max(1, sms / per);
      unsigned* bp = bar.as<unsigned>();
      void* args[] = {&bp, &iters, &kind};
      barrier_row(std::string("grid barrier alone, ") + kKind[kind] + ", " + std::to_string(blocks) + " blocks", blocks,
                  k::dec::kThreads, [&] {
                    CUDA_CHECK(cudaMemset(bar.as(), 0, 12));
                    CUDA_CHECK(cudaEventRecord(a));
                    CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&k::dec::barrier_only),
                                                           dim3(blocks), dim3(k::dec::kThreads), args, 0, nullptr));
                  });
    }
  // The cluster barrier (barrier.cluster, decode_cluster.cuh) with 16 and 8 blocks of 512 threads, one an SM.
  cudaFuncAttributes fa{};
  if (clusters_enabled() && cluster_runnable(reinterpret_cast<const void*>(&k::dec::cluster_barrier_only), fa)) {
    CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&k::dec::cluster_barrier_only),
                                    cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    for (int blocks : {16, 8}) {
      cudaLaunchAttribute attr[1];
      const cudaLaunchConfig_t cfg = cluster_launch(blocks, 0, nullptr, attr);
      if (clusters_that_fit(k::dec::cluster_barrier_only, cfg) < 1) continue;
      barrier_row("cluster barrier alone, " + std::to_string(blocks) + " blocks", blocks, k::dec::kCThreads, [&] {
        CUDA_CHECK(cudaEventRecord(a));
        CUDA_CHECK(cudaLaunchKernelEx(&cfg, k::dec::cluster_barrier_only, iters));
      });
    }
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
}

// One results row: tokens/s at the median ms per token, and the share of the memory floor (the weight
// bytes one token reads, at the measured copy bandwidth) that this time is.
inline results::Bench generation_row(const gpt::Config& cfg, const std::string& name, const char* dtype,
                                     const std::vector<double>& ms_per_token, size_t weight_bytes, double copy_gbps,
                                     int tokens) {
  results::Bench g;
  g.name = name, g.dtype = dtype;
  g.shape = {cfg.layers, cfg.heads, cfg.width, cfg.context, 1};
  const timing::Stats s = timing::summarize(ms_per_token);
  g.ms = s.median_ms, g.min_ms = s.min_ms, g.max_ms = s.max_ms, g.reps = s.reps;
  g.tokens_per_s = 1e3 / g.ms;
  json::Value ex = json::Value::object();
  ex["tokens"] = tokens;  // new bytes per run (reps: timed runs)
  ex["weight_mb"] = double(weight_bytes) / 1e6;
  const double floor_ms = double(weight_bytes) / (copy_gbps * 1e9) * 1e3;
  ex["memory_floor_ms"] = floor_ms;
  ex["pct_of_memory_floor"] = 100.0 * floor_ms / g.ms;
  g.extra = ex;
  return g;
}

// Generation from `params`, every step of the lesson: the current generator (kernels launched one by
// one with the host waiting per token; one CUDA graph per token), then FastDecoder (run/generate.cuh):
// the fused stages as a CUDA graph, and the persistent kernel (one launch for all the bytes; one per
// byte; 2 blocks per SM), each with fp32 and bf16 weights. The same prompt, 200 bytes, draws and
// sampling everywhere: the fp32 variants must write the current generator's bytes.
inline void bench_generation(results::Results& res, const gpt::Config& cfg, const std::vector<float>& params,
                             uint64_t seed, const std::string& title) {
  const std::string prompt = "The GPU ";
  const int n = 200, reps = 5;
  const double temperature = 0.8;
  const int top_k = 40;
  const Sampled s = generate(cfg, params, prompt, n, temperature, top_k, seed);
  std::printf("\n%s:\n%s\n(%d tokens in %.3f s: %.0f tokens/s)\n", title.c_str(), s.text.c_str(), s.made, s.seconds,
              s.made / s.seconds);
  res.config["sample"] = s.text;
  const Sampled plain = generate(cfg, params, prompt, n, temperature, top_k, seed, false);
  res.add(verify::fact("generation with and without CUDA graphs writes the same bytes", plain.text == s.text));
  // The memory floor: the bf16 weights (~21 MB at the default size) at the copy bandwidth measured now.
  const ceilings::Copy cp = ceilings::copy_bandwidth(size_t(256) << 20);
  const double gbps = cp.best();
  const size_t fp32_weights =
      FastDecoder<float>::supported(cfg)
          ? (size_t(12) * cfg.layers * cfg.width * cfg.width + size_t(cfg.vocab) * cfg.width) * 4
          : 0;
  for (const Sampled* r : {&plain, &s}) {
    const std::string name = r == &s ? "generate, batch 1, KV cache" : "generate, batch 1, KV cache, no CUDA graph";
    results::Bench row = generation_row(cfg, name, "fp32", {1e3 * r->seconds / r->made}, fp32_weights, gbps, r->made);
    row.reps = r->made;  // one timed run: these rows always counted its bytes here (torch_peer.py reads it)
    res.add(row);
  }
  std::printf("generation without CUDA graphs: %.0f tokens/s\n", plain.made / plain.seconds);
  if (!FastDecoder<float>::supported(cfg) || int(prompt.size()) + n > cfg.context) {
    std::printf("(the fused decoders not run: heads wider than %d, width too large, or %d bytes past the context)\n",
                k::dec::kMaxHead, int(prompt.size()) + n);
    return;
  }
  std::printf("memory floor: weight bytes / %.0f GB/s (device copy, bytes read + written, measured now)\n", gbps);
  bench_grid_barrier(res);
  const std::vector<GenVariant> variants = {
      {"generate fp32, batch 1, fused stages, CUDA graph", false, DecodePath::kStages, false, 1, false, false},
      {"generate bf16, batch 1, fused stages, CUDA graph", true, DecodePath::kStages, false, 1, false, false},
      {"generate fp32, batch 1, persistent kernel", false, DecodePath::kPersistent, false, 1, true, false},
      {"generate bf16, batch 1, persistent kernel", true, DecodePath::kPersistent, false, 1, true, false},
      {"generate bf16, batch 1, persistent kernel, no weight prefetch", true, DecodePath::kPersistent, false, 1, false,
       false},
      {"generate bf16, batch 1, persistent kernel, one launch per token", true, DecodePath::kPersistent, true, 1, true,
       false},
      {"generate bf16, batch 1, persistent kernel, 2 blocks per SM", true, DecodePath::kPersistent, false, 2, true,
       false},
      {"generate fp32, batch 1, persistent kernel, qkv + attention merged", false, DecodePath::kPersistent, false, 1,
       true, true},
      {"generate bf16, batch 1, persistent kernel, qkv + attention merged", true, DecodePath::kPersistent, false, 1,
       true, true},
      // The hand-written grid barrier (decode_persistent.cuh), with a block on every SM, every second, every
      // fourth; without the L1 prefetch (the better of the two with grid.sync), and with it once.
      {"generate fp32, batch 1, persistent kernel, hand-written barrier", false, DecodePath::kPersistent, false, 1,
       false, false, true},
      {"generate bf16, batch 1, persistent kernel, hand-written barrier", true, DecodePath::kPersistent, false, 1,
       false, false, true},
      {"generate bf16, batch 1, persistent kernel, hand-written barrier, weight prefetch", true,
       DecodePath::kPersistent, false, 1, true, false, true},
      {"generate bf16, batch 1, persistent kernel, hand-written barrier, 1 block per 2 SMs", true,
       DecodePath::kPersistent, false, 1, false, false, true, 2},
      {"generate bf16, batch 1, persistent kernel, hand-written barrier, 1 block per 4 SMs", true,
       DecodePath::kPersistent, false, 1, false, false, true, 4},
      {"generate bf16, batch 1, persistent kernel, grid.sync(), 1 block per 2 SMs", true, DecodePath::kPersistent,
       false, 1, false, false, false, 2},
      {"generate bf16, batch 1, persistent kernel, hand-written barrier, merged", true, DecodePath::kPersistent, false,
       1, false, true, true},
      {"generate bf16, batch 1, persistent kernel, hand-written barrier, merged, 1 block per 2 SMs", true,
       DecodePath::kPersistent, false, 1, false, true, true, 2},
      // Attention over shorter chunks (stage_attention_split): more warps, shorter chains of L2 trips.
      {"generate bf16, batch 1, persistent kernel, hand-written barrier, attention chunks of 16", true,
       DecodePath::kPersistent, false, 1, false, false, true, 1, 16},
      {"generate bf16, batch 1, persistent kernel, hand-written barrier, attention chunks of 8", true,
       DecodePath::kPersistent, false, 1, false, false, true, 1, 8},
      {"generate bf16, batch 1, persistent kernel, hand-written barrier, merged, attention chunks of 8", true,
       DecodePath::kPersistent, false, 1, false, true, true, 1, 8},
      {"generate bf16, batch 1, persistent kernel, hand-written barrier, 1 block per 2 SMs, attention chunks of 8",
       true, DecodePath::kPersistent, false, 1, false, false, true, 2, 8},
      {"generate fp32, batch 1, persistent kernel, hand-written barrier, attention chunks of 8", false,
       DecodePath::kPersistent, false, 1, false, false, true, 1, 8},
      // The counting barrier (no publishing hop).
      {"generate bf16, batch 1, persistent kernel, counting barrier", true, DecodePath::kPersistent, false, 1, false,
       false, true, 1, k::dec::kChunk, true},
      {"generate bf16, batch 1, persistent kernel, counting barrier, attention chunks of 8", true,
       DecodePath::kPersistent, false, 1, false, false, true, 1, 8, true},
      {"generate bf16, batch 1, persistent kernel, counting barrier, merged, attention chunks of 8", true,
       DecodePath::kPersistent, false, 1, false, true, true, 1, 8, true},
      {"generate bf16, batch 1, persistent kernel, counting barrier, 1 block per 2 SMs, attention chunks of 8", true,
       DecodePath::kPersistent, false, 1, false, false, true, 2, 8, true},
      {"generate fp32, batch 1, persistent kernel, counting barrier, attention chunks of 8", false,
       DecodePath::kPersistent, false, 1, false, false, true, 1, 8, true},
      // The weights in shared memory, copied once per launch (the bf16 model fits in the SMs' shared memory;
      // the fp32 one, twice the size, does not at this width): no stage waits for weights from L2.
      {"generate bf16, batch 1, persistent kernel, counting barrier, attention chunks of 8, weights in shared memory",
       true, DecodePath::kPersistent, false, 1, false, false, true, 1, 8, true, true},
      {"generate bf16, batch 1, persistent kernel, grid.sync(), attention chunks of 8", true, DecodePath::kPersistent,
       false, 1, false, false, false, 1, 8},
      // The same, with every GEMV's residual and bias loaded after its sum (as this lesson first did): the gain of
      // loading them before the products (decode_stages.cuh, gemv_rows_from).
      {"generate bf16, batch 1, persistent kernel, grid.sync(), attention chunks of 8, epilogue loads after the sum",
       true, DecodePath::kPersistent, false, 1, false, false, false, 1, 8, false, false, true},
      {"generate bf16, batch 1, persistent kernel, grid.sync(), attention chunks of 8, weights in shared memory", true,
       DecodePath::kPersistent, false, 1, false, false, false, 1, 8, false, true},
      {"generate bf16, batch 1, persistent kernel, counting barrier, merged, attention chunks of 8, weights in shared "
       "memory",
       true, DecodePath::kPersistent, false, 1, false, true, true, 1, 8, true, true},
      {"generate bf16, batch 1, persistent kernel, counting barrier, 2 blocks per SM, attention chunks of 8, weights "
       "in shared memory",
       true, DecodePath::kPersistent, false, 2, false, false, true, 1, 8, true, true},
      {"generate fp32, batch 1, persistent kernel, counting barrier, attention chunks of 8, weights in shared memory",
       false, DecodePath::kPersistent, false, 1, false, false, true, 1, 8, true, true},
      // One thread-block cluster (nn/kernels/decode_cluster.cuh): vectors in every block's shared memory,
      // pushed through distributed shared memory, cluster barriers, weights streamed one stage ahead.
      {"generate bf16, batch 1, one cluster of 16 SMs", true, DecodePath::kCluster, false, 1, false, false, false, 1,
       k::dec::kChunk, false, false, false, 16},
      {"generate bf16, batch 1, one cluster of 8 SMs", true, DecodePath::kCluster, false, 1, false, false, false, 1,
       k::dec::kChunk, false, false, false, 8},
      {"generate fp32, batch 1, one cluster of 16 SMs", false, DecodePath::kCluster, false, 1, false, false, false, 1,
       k::dec::kChunk, false, false, false, 16},
      // A cluster of 16 SMs a head (nn/kernels/decode_heads.cuh): six clusters, the KV cache in shared memory,
      // the two partial sums of a layer meeting through L2.
      {"generate fp32, batch 1, a cluster of 16 SMs a head", false, DecodePath::kHeads, false, 1, false, false},
      {"generate bf16, batch 1, a cluster of 16 SMs a head", true, DecodePath::kHeads, false, 1, false, false},
  };
  std::printf("%-66s %10s %9s %8s %7s  %s\n", "generator", "tokens/s", "ms/token", "% floor", "blocks", "bytes");
  double best_bf16 = 0;
  for (const GenVariant& v : variants) {
    const GenTiming g = v.bf ? time_fast_generation<bf16>(cfg, params, prompt, n, temperature, top_k, seed, v, reps)
                             : time_fast_generation<float>(cfg, params, prompt, n, temperature, top_k, seed, v, reps);
    if (g.ms_per_token.empty()) {
      std::printf("%-66s (%s here: not run)\n", v.name,
                  v.path == DecodePath::kCluster || v.path == DecodePath::kHeads ? "no such cluster, or --clusters off"
                                                                                 : "the weights do not fit in shared memory");
      continue;
    }
    results::Bench row = generation_row(cfg, v.name, v.bf ? "bf16" : "fp32", g.ms_per_token, g.weight_bytes, gbps, n);
    size_t same = 0;  // bytes equal to the current generator's before the first difference
    while (same < g.text.size() && same < s.text.size() && g.text[same] == s.text[same]) ++same;
    same -= std::min(same, prompt.size());
    row.extra["blocks"] = g.blocks;
    row.extra["bytes_equal_to_current"] = double(same);
    if (v.resident) row.extra["resident_kib_per_block"] = g.resident_kb;
    if (g.stage_us.kind() != json::Value::Null) row.extra["stage_us"] = g.stage_us;
    if (v.bf) best_bf16 = std::max(best_bf16, row.tokens_per_s);
    res.add(row);
    if (!v.bf)
      res.add(verify::fact(std::string(v.name) + ": the current generator's bytes", g.text == s.text, "exact", "",
                           size_t(n), size_t(n) - same));
    if (v.path == DecodePath::kHeads)
      res.add(verify::fact(std::string(v.name) + ": every meeting's wait ended by its tags, none gave up", !g.gave_up));
    if ((v.path == DecodePath::kCluster || v.path == DecodePath::kHeads) && g.stamped_bytes_differ >= 0)  // the same draws, the same decoder
      res.add(verify::fact(std::string(v.name) + ": the stamped run's bytes equal the timed run's",
                           g.stamped_bytes_differ == 0, "exact", "", size_t(n), size_t(g.stamped_bytes_differ)));
    std::printf("%-66s %10.0f %9.4f %7.1f%% %7d  %s\n", v.name, row.tokens_per_s, row.ms,
                row.extra.find("pct_of_memory_floor")->number(), g.blocks,
                g.text == s.text ? "= current" : (std::to_string(same) + " equal, then differ").c_str());
    if (v.path == DecodePath::kHeads && g.stage_us.kind() != json::Value::Null) {
      for (const char* b : {"first block", "last block"}) {
        std::printf("    %s, us waiting for weights / working / exchanging:", b);
        for (const char* kk : {"qkv0", "qkv", "attention", "proj", "fc", "fc2", "head"}) {
          const std::string k(kk);
          const json::Value* bl = g.stage_us.find(b);
          std::printf(" %s %.2f/%.2f/%.2f", kk, bl->find(k + " weights")->number(), bl->find(k + " work")->number(),
                      bl->find(k + " exchange")->number());
        }
        std::printf("\n");
      }
      std::printf("    stamped token %.2f us\n", g.stage_us.find("token")->number());
    } else if (g.stage_us.kind() != json::Value::Null) {
      std::printf("    us per stage (work + barrier):");
      for (const char* kk : {"qkv", "attention", "proj", "fc", "fc2", "head", "token"})
        std::printf(" %s %.2f", kk, g.stage_us.find(kk)->number());
      std::printf("\n");
      if (v.path == DecodePath::kCluster) {
        std::printf("    us handing the next copy over / waiting for weights / working / at the barrier:");
        for (const char* kk : {"qkv", "attention", "proj", "fc", "fc2", "head"}) {
          const std::string b(kk);
          std::printf(" %s %.2f/%.2f/%.2f/%.2f", kk, g.stage_us.find(b + " issue")->number(),
                      g.stage_us.find(b + " wait")->number(), g.stage_us.find(b + " work")->number(),
                      g.stage_us.find(b + " barrier")->number());
        }
        std::printf("\n");
      }
    }
  }
  // Issue 25's goals for batch-1 generation (the fastest bf16 generator; the peer's ratio is
  // torch_peer.py's).
  res.add_goal("generation (" + title + "): batch-1 bf16 >= 10,000 tokens/s", best_bf16, best_bf16 >= 10000);
  res.add_goal("generation (" + title + "): batch-1 bf16 >= 20,000 tokens/s (moonshot)", best_bf16, best_bf16 >= 20000);
}

// --bench on one GPU: the parts --bench-part names, in this order.
inline void run_bench(results::Results& res, const gpt::Options& op, const train::Corpus& data) {
  const gpt::Config& cfg = op.cfg;
  const uint64_t seed = uint64_t(op.st.seed);
  TrainOptions base = op.train;  // --precision does not pick the parts: tf32 only where a part asks for it
  base.tf32 = false;
  res.config["layers"] = cfg.layers, res.config["heads"] = cfg.heads, res.config["width"] = cfg.width,
  res.config["context"] = cfg.context;
  res.config["batch"] = base.batch;
  // Each precision with the step's speed-ups switched on one after another (step_variants): each one's
  // gain, measured in one run.
  for (const TrainOptions& of : step_variants(base, false)) {
    if (op.bench_part("train-fp32"))
      bench_train<float>(res, cfg, of, data, op.attn == Attn::kCudnn ? Attn::kAuto : op.attn, seed);
  }
  if (op.bench_part("train-tf32")) {  // fp32's default step with TF32 matmuls, against fp32's (run/bench_tf32.cuh)
    TrainOptions ot = step_variants(base, false).back();
    ot.tf32 = true;
    const Attn a = op.attn == Attn::kCudnn ? Attn::kAuto : op.attn;
    bench_train<float>(res, cfg, ot, data, a, seed,
                       [&](results::Bench& b) { tf32_against_fp32(res, b, cfg, ot, data, a, seed); });
  }
  for (const TrainOptions& of : step_variants(base, true))
    if (op.bench_part("train-bf16")) bench_train<bf16>(res, cfg, of, data, op.attn, seed);
  if (op.bench_part("train-bf16")) {  // the default step recomputing the GELU outputs: the memory
    TrainOptions again = step_variants(base, true).back();  // --recompute on saves, and what it costs
    again.recompute = true;
    bench_train<bf16>(res, cfg, again, data, op.attn, seed);
    TrainOptions theirs = step_variants(base, true).back();  // the default step with cuDNN's attention backward
    theirs.flash_bwd = false;                                 // in place of ours (nn/kernels/flash_bwd.cuh)
    bench_train<bf16>(res, cfg, theirs, data, op.attn, seed);
    TrainOptions sync = step_variants(base, true).back();  // the default step with our flash backward's products
    sync.flash_wgmma = false;                               // on mma.sync (nn/kernels/flash_bwd.cuh), not wgmma
    if (flash90::available()) bench_train<bf16>(res, cfg, sync, data, op.attn, seed);  // (elsewhere: the default's kernel)
    TrainOptions one = step_variants(base, true).back();  // the default step's graph with the weight gradients
    one.dw_stream = false, one.dw_sm_share = 1;            // in line, on the chain's stream (nn/dw_stream.h),
                                                           // sized for every SM (as the command line has it),
    one.adamw_overlap = false;                             // and AdamW on it too (no update stream beside it)
    bench_train<bf16>(res, cfg, one, data, op.attn, seed);
    TrainOptions kept = step_variants(base, true).back();  // the default step with our fused GEMM keeping A's
    kept.keep_a = true;                                     // row panels in shared memory (nn/gemm_sm90.h)
    bench_train<bf16>(res, cfg, kept, data, op.attn, seed);
    TrainOptions two = step_variants(base, true).back();  // the default step with fc's forward storing through two
    two.store_slots = 2;                                   // staging slots a consumer, day10's (--store-slots 2)
    bench_train<bf16>(res, cfg, two, data, op.attn, seed);
    TrainOptions each = step_variants(base, true).back();  // the default step with every column-sum finish
    each.batch_finish = false;                              // in a launch of its own (nn/finish_queue.cuh)
    bench_train<bf16>(res, cfg, each, data, op.attn, seed);
    // The default step's graph with the chain and the weight gradients at one stream priority, then with the chain
    // at the highest: the two settings the default chooses between by timing (--chain-priority auto, run/trainer.cuh)
    for (const ChainPriority p : {ChainPriority::kOff, ChainPriority::kOn}) {
      TrainOptions fixed = step_variants(base, true).back();
      fixed.chain_priority = p;
      bench_train<bf16>(res, cfg, fixed, data, op.attn, seed);
    }
    TrainOptions input = step_variants(base, true).back();  // the default step with fc keeping its pre-activation
    input.gelu_deriv = false;                                // and the backward computing gelu' (nn/linear.cuh)
    bench_train<bf16>(res, cfg, input, data, op.attn, seed);
    TrainOptions inside = step_variants(base, true).back();  // the default step with each layer's cuBLASLt weight
    inside.dw_reduce_kernel = false;                          // gradient asked to add its split-K parts in place
    bench_train<bf16>(res, cfg, inside, data, op.attn, seed);
    TrainOptions narrow = step_variants(base, true).back();  // the default step with the residual stream and its
    narrow.residual_bf16 = true;                              // gradient in bf16 (--residual bf16, nn/model.cuh)
    if (gpt::residual_bf16_width(cfg.width)) bench_train<bf16>(res, cfg, narrow, data, op.attn, seed);
    TrainOptions late = step_variants(base, true).back();  // the default step with its AdamW at its own end, not
    late.adamw_overlap = false;                             // beside the next forward (--adamw-overlap off)
    bench_train<bf16>(res, cfg, late, data, op.attn, seed);
    TrainOptions early = step_variants(base, true).back();  // the default step with the chains' kernels of ours
    early.pdl = true;                                        // as programmatic dependent launches (--pdl on)
    bench_train<bf16>(res, cfg, early, data, op.attn, seed);
    early.residual_bf16 = true;  // and with the residual stream in bf16 too: the two switches that save time
    if (gpt::residual_bf16_width(cfg.width)) bench_train<bf16>(res, cfg, early, data, op.attn, seed);
    for (double share : {1.0, 0.75}) {  // the default step with the weight gradients' algorithms sized for more SMs
      TrainOptions more = step_variants(base, true).back();
      more.dw_sm_share = share;
      bench_train<bf16>(res, cfg, more, data, op.attn, seed);
    }
  }
  if (op.bench_part("train-cudnn")) bench_cudnn_backend(res, cfg, base, data, seed);  // run/bench_cudnn.cuh
  // What the step chose by timing at start-up (nn/linear.cuh and the LayerNorm's launcher): where each
  // epilogue runs (cuBLASLt's, the plain matmul and a pass of ours, our fused GEMM), the bias gradients,
  // cuBLAS or cuBLASLt for the plain input gradients, the LayerNorm backward's rows per warp; with the
  // times that decided each.
  json::Value chosen = json::Value::object(), times = json::Value::object();
  {
    std::lock_guard<std::mutex> lock(lt::chosen_mutex());
    for (const auto& kv : lt::choice_notes()) chosen[kv.first] = kv.second;
    // The placements' times as numbers (us; pick: 0 cuBLASLt's epilogue, 1 plain matmul + ours, 2 our fused GEMM;
    // for the plain input gradients "din ...": 0 cuBLAS, 1 cuBLASLt searched)
    for (const auto& kv : lt::choice_times()) {
      json::Value one = json::Value::object();
      for (const auto& t : kv.second) one[t.first] = t.second;
      times[kv.first] = one;
    }
  }
  res.config["timed_choices"] = chosen;
  res.config["timed_choice_us"] = times;
  if (op.bench_part("quality")) {
    const Quality q = quality_run<bf16>(res, cfg, base, data, op.files.data_name, op.attn, seed, op.bench_steps);
    res.top.push_back({"quality", q.summary});  // (the curve as before, for the notes' plot)
    res.config["loss_curve"] = *q.summary.find("loss_curve");
    res.config["val_loss_after_steps"] = q.val_final, res.config["quality_steps"] = op.bench_steps;
    res.add_goal("quality: final validation loss <= 1.30 on the plays", q.val_final, q.val_final <= 1.30);
    res.add_goal("quality: final validation loss <= lowest + 0.05 (no overfitting at the end)", q.val_final - q.val_min,
                 q.val_final <= q.val_min + 0.05);
    bench_generation(res, cfg, q.params, seed, "sample after " + std::to_string(op.bench_steps) + " steps");
    results::Bench g;  // the quality sample's bytes past the context: one re-prefill each
    g.name = "generate past the context, batch 1, sliding window (re-prefill per byte)";
    g.dtype = "fp32", g.shape = {cfg.layers, cfg.heads, cfg.width, cfg.context, 1};
    g.ms = 1e3 * q.sample.seconds_sliding / std::max(1, q.sample.slid);
    g.min_ms = g.max_ms = g.ms, g.reps = q.sample.slid;
    g.tokens_per_s = 1e3 / g.ms;
    res.add(g);
    if (!base.residual_bf16 && base.fused_ln && base.backend != Backend::kCudnn &&
        gpt::residual_bf16_width(cfg.width)) {
      // The same run with the residual stream and its gradient in bf16 (--residual bf16): what rounding each
      // block's add to bf16 costs in validation loss, beside its step time ("... residual stream in bf16" above).
      TrainOptions narrow = base;
      narrow.residual_bf16 = true;
      const Quality r = quality_run<bf16>(res, cfg, narrow, data, op.files.data_name, op.attn, seed, op.bench_steps);
      res.top.push_back({"quality_residual_bf16", r.summary});
      res.config["val_loss_after_steps_residual_bf16"] = r.val_final;
    }
  }
  if (op.bench_part("quality-cut")) {
    // nanoGPT's character-level Shakespeare is 1,115,394 bytes; its 6L/384/6H model with dropout 0.2
    // reaches 1.47 there in 5,000 iterations. The same cut of this text, with the cut's own dropout and
    // schedule (options.h: a quarter of the data overfits sooner).
    const train::Corpus cut = quality_cut(op.data_path, op.data_limit, cfg.context);
    TrainOptions oc = base;
    oc.dropout = op.cut_dropout;
    const Quality q = quality_run<bf16>(res, cfg, oc, cut, op.files.data_name + " (first 1,115,394 bytes)", op.attn,
                                        seed, op.cut_steps);
    res.top.push_back({"quality_cut", q.summary});
    res.add_goal("quality_cut: final validation loss <= 1.50 on the first 1,115,394 bytes", q.val_final,
                 q.val_final <= 1.50);
    res.add_goal("quality_cut: final validation loss <= lowest + 0.05 (no overfitting at the end)",
                 q.val_final - q.val_min, q.val_final <= q.val_min + 0.05);
  }
  if (op.bench_part("generate")) {
    // Fresh weights (the seed's initialization): generation's speed does not depend on what was learned.
    verify::Rng rng(seed);
    bench_generation(res, cfg, gpt::init_params(cfg, rng), seed, "generation from freshly initialised weights");
  }
}
