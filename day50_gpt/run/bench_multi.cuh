// day50_gpt/run/bench_multi.cuh: the multi-GPU benchmark (--bench --gpus N, make bench-multi): tokens/s
// on 1 and N GPUs and the scaling efficiency, for each way of running the step (bucket sizes, the first
// bucket early, the forward order, bf16 collectives, ZeRO-1, NCCL's channel count); the exposed
// communication, one step's timeline and the memory per GPU for each; NCCL's all-reduce alone over a
// range of sizes; the loss curves of N GPUs against one. Part of run/multi_gpu.cuh (NCCL builds only).
#pragma once
#ifdef GPT_HAVE_NCCL
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench.cuh"
#include "../dp_variants.h"
#include "dp_timeline.cuh"
#include "multi_gpu.cuh"

// ---- Benchmark ------------------------------------------------------------------------------------
// A training-step row of the data-parallel benchmark, from its step times.
inline results::Bench step_row(const std::string& name, const char* dtype, const gpt::Config& c, int batch,
                               const std::vector<double>& ms) {
  results::Bench b;
  b.name = name, b.dtype = dtype;
  b.shape = {c.layers, c.heads, c.width, c.context, batch};
  const timing::Stats s = timing::summarize(ms);
  b.ms = s.median_ms, b.min_ms = s.min_ms, b.max_ms = s.max_ms, b.reps = s.reps;
  b.tokens_per_s = double(batch) * c.context / (b.ms * 1e-3);
  b.extra = json::Value::object();
  return b;
}

// One GPU training `batch` sequences a step: its step times after a warm-up.
template <class T>
std::vector<double> one_gpu_step_times(const gpt::Config& c, TrainOptions o, int batch, const train::Corpus& data,
                                       Attn attn, uint64_t seed, int warm, int reps) {
  o.batch = batch;
  o.graph = false;  // eager, like the N-GPU steps it is compared with (data parallelism has no graph)
  Trainer<T> tr(c, o, data, attn, seed);
  for (int i = 0; i < warm; ++i) tr.step_once();
  return step_times(tr, reps);
}

struct MultiConfig {
  std::string name;
  gpt::Config cfg;
  int batch;
};

// What one model configuration's 1-GPU runs measured, for its N-GPU rows.
struct MultiTimes {
  double one_ms, share_ms, grad_bytes;
  int warm, reps;
};

// What rank 0 of a variant's run measured.
struct VariantRun {
  std::vector<double> ms, comm;
  std::vector<dp::Interval> compute_tl, comm_tl;
  size_t buckets = 0, biggest = 0, staging = 0;
  double alone_all = NAN, alone_bucket = NAN, used_bytes = NAN, copy_bucket = NAN;
  bool finite = true, same = true;
};

template <class T>
VariantRun run_variant(const MultiConfig& mc, const dp::Variant& v, const train::Corpus& data, Attn attn, uint64_t seed,
                       int n, const MultiTimes& mt) {
  VariantRun out;
  dp::run_threads(
      n,
      [&](dp::Replica& r) {
        Trainer<T> tr(mc.cfg, v.o, data, attn, seed, &r);
        for (int i = 0; i < mt.warm; ++i) tr.step_once();
        const std::vector<double> t = step_times(tr, mt.reps);
        // The collectives' own times inside training: a few more steps, each logged (events on both
        // streams); the last one's log is the timeline.
        r.time_buckets(true);
        std::vector<double> c;
        for (int i = 0; i < 5; ++i) {
          tr.step_once();
          double sum = 0;
          for (double x : r.last_comm_ms()) sum += x;
          c.push_back(sum);
        }
        const std::vector<dp::Interval> ctl = r.log().compute(), ntl = r.log().comm();
        r.time_buckets(false);
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        tr.read_back();
        bool ok = true;
        for (float l : tr.losses) ok = ok && std::isfinite(l);
        const bool s = tr.replicas_identical();
        // NCCL alone, with the GPUs otherwise idle (fp32 all-reduces: the rows that use them).
        size_t big_b = 0;
        for (const auto& bk : r.buckets()) big_b = std::max(big_b, (bk.end - bk.begin) * sizeof(float));
        double all_ms = NAN, bucket_ms = NAN;
        if (!v.o.zero && !v.o.allreduce_bf16) {
          float* g = tr.m.grads.template as<float>();
          all_ms = r.time_allreduce_ms(g, tr.m.lay.total * sizeof(float), 20);
          bucket_ms = v.o.bucket_bytes ? r.time_allreduce_ms(g, big_b, 20) : all_ms;
        }
        // The copy engines' all-reduce of the largest bucket alone (its rows: the same GPUs, idle).
        const double copy_ms = v.o.copy_collectives && !v.o.zero ? r.time_copy_bucket_ms(20) : NAN;
        std::sort(c.begin(), c.end());
        if (r.rank == 0)
          out.ms = t, out.comm = c, out.compute_tl = ctl, out.comm_tl = ntl, out.buckets = r.buckets().size(),
          out.biggest = big_b, out.staging = r.staging_bytes(), out.alone_all = all_ms, out.alone_bucket = bucket_ms,
          out.used_bytes = double(total_b - free_b), out.finite = ok, out.same = s, out.copy_bucket = copy_ms;
      },
      v.channels);
  CUDA_CHECK(cudaSetDevice(0));
  return out;
}

// N GPUs training one configuration one way: the step's time and scaling, the collectives' time inside
// training and NCCL's alone, the exposed communication, one step's timeline, the memory per GPU.
// Returns the row (also added to `res`).
template <class T>
json::Value bench_multi_variant(results::Results& res, const MultiConfig& mc, const dp::Variant& v,
                                const train::Corpus& data, Attn attn, uint64_t seed, int n, const MultiTimes& mt) {
  const VariantRun run = run_variant<T>(mc, v, data, attn, seed, n, mt);
  const double med = timing::summarize(run.ms).median_ms;
  const double scaling = 100.0 * mt.one_ms / (n * med);  // tokens/s on N GPUs / (N x tokens/s on one)
  const double comm_ms = run.comm[run.comm.size() / 2];
  results::Bench b = step_row("train step " + mc.name + " " + std::to_string(n) + " GPUs " + v.mode, Types<T>::name(),
                              mc.cfg, mc.batch, run.ms);
  json::Value ex = json::Value::object();
  ex["gpus"] = n, ex["config"] = mc.name, ex["mode"] = v.mode;
  ex["scaling_efficiency_pct"] = scaling;
  ex["step_ms"] = med;
  ex["bucket_bytes"] = double(v.o.bucket_bytes), ex["default_bucket"] = v.headline, ex["headline"] = v.headline;
  ex["first_bucket_bytes"] = double(v.o.first_bucket_bytes);
  ex["bucket_order"] = v.o.bucket_forward ? "forward" : "backward";
  ex["allreduce"] = v.o.allreduce_bf16 ? "bf16" : "fp32", ex["zero"] = v.o.zero, ex["nccl_channels"] = v.channels;
  ex["collectives"] = v.o.copy_collectives ? "copy" : "nccl";
  // Exposed communication: the step beyond one replica's compute alone (the 1-GPU run of one replica's
  // share of the batch); hidden fraction: the share of the collectives' time that the timeline shows
  // beside computation, and the same judged from the exposed time.
  const double exposed = med - mt.share_ms;
  ex["exposed_ms"] = exposed;
  ex["hidden_fraction"] = dp::hidden_fraction(run.comm_tl, run.compute_tl);
  ex["hidden_fraction_vs_compute_only"] = comm_ms > 0 ? std::clamp(1.0 - exposed / comm_ms, 0.0, 1.0) : 1.0;
  // Weak scaling: N GPUs against N times one GPU running one replica's batch.
  ex["weak_scaling_pct"] = 100.0 * mt.share_ms / med;
  ex["buckets"] = double(run.buckets), ex["largest_bucket_bytes"] = double(run.biggest);
  ex["comm_ms_in_training"] = comm_ms;  // the collectives' time inside a step (side-stream events; includes waiting)
  // bf16 collectives move half the bytes; ZeRO-1's reduce-scatter + all-gather move an all-reduce's.
  const double moved = v.o.allreduce_bf16 ? mt.grad_bytes / 2 : mt.grad_bytes;
  ex["bus_gbps_in_training"] = dp::bus_gbps(moved, comm_ms, n);
  ex["allreduce_alone_ms"] = run.alone_all;  // fp32 rows only (NaN: not measured)
  ex["bus_gbps_alone"] = dp::bus_gbps(mt.grad_bytes, run.alone_all, n);
  ex["bucket_allreduce_alone_ms"] = run.alone_bucket;
  ex["bucket_bus_gbps_alone"] = dp::bus_gbps(double(run.biggest), run.alone_bucket, n);
  // --collectives copy: the copy engines' all-reduce of the largest bucket alone (in its type: bf16 moves half).
  ex["copy_bucket_alone_ms"] = run.copy_bucket;
  ex["copy_bucket_bus_gbps_alone"] =
      dp::bus_gbps(double(run.biggest) / (v.o.allreduce_bf16 ? 2 : 1), run.copy_bucket, n);
  // Memory per GPU: the model's state by arithmetic (dp_plan.h), against plain data parallelism, and
  // what the device had in use (everything: activations, NCCL's buffers, the libraries' workspaces).
  const size_t P = gpt::Layout(mc.cfg).total;
  const bool bfw = std::is_same<T, bf16>::value;
  const double state = dp::state_bytes(P, n, v.o.zero, bfw, v.o.allreduce_bf16).total(),
               plain = dp::state_bytes(P, n, false, bfw, false).total();
  ex["state_bytes_per_gpu"] = state, ex["state_bytes_per_gpu_plain_dp"] = plain;
  ex["device_bytes_in_use"] = run.used_bytes;
  ex["timeline"] = dp::timeline_json(run.compute_tl, run.comm_tl);
  b.extra = ex;
  res.add(b);
  std::printf(
      "  %d GPUs, %-44s %8.2f ms/step  %10.0f tokens/s  scaling %.1f%%  weak %.1f%%  (collectives %.2f ms, "
      "exposed %.2f ms, hidden %.0f%%)\n",
      n, v.mode.c_str(), med, b.tokens_per_s, scaling, 100.0 * mt.share_ms / med, comm_ms, exposed,
      100.0 * dp::hidden_fraction(run.comm_tl, run.compute_tl));
  if (const double after = dp::after_step_ms(run.comm_tl, run.compute_tl); after > 0)
    std::printf("      of the collectives' time, %.2f ms after the step's end, beside the next step's forward\n", after);
  if (v.o.zero || v.o.allreduce_bf16)
    std::printf("      memory per GPU: model state %.2f GB (plain data parallel %.2f GB); device in use %.2f GB\n",
                state / 1e9, plain / 1e9, run.used_bytes / 1e9);
  if (std::isfinite(run.copy_bucket))
    std::printf("      copy engines alone: the largest bucket %.3f ms (%.0f GB/s bus)\n", run.copy_bucket,
                dp::bus_gbps(double(run.biggest) / (v.o.allreduce_bf16 ? 2 : 1), run.copy_bucket, n));
  if (std::isfinite(run.alone_all))
    std::printf("      NCCL alone: the whole gradient %.2f ms (%.0f GB/s bus), the largest bucket %.2f ms\n",
                run.alone_all, dp::bus_gbps(mt.grad_bytes, run.alone_all, n), run.alone_bucket);
  res.add(verify::fact(mc.name + " model, " + std::to_string(n) + " GPUs, " + v.mode +
                           ": losses finite and replicas identical while timing",
                       run.finite && run.same));
  return ex;
}

// The goals' ratios, as the median of kRounds interleaved rounds: each round times one GPU with the
// whole batch, one GPU with one replica's share and N GPUs at the command line's settings, one after
// the other, and forms its own scaling and weak scaling. One round's ratio moved by a point or more
// between runs (loans) of the same code; the rounds show how far it moves within one run. Round 1 is
// the configuration's rows above (the variants ran between its 1-GPU and N-GPU steps).
constexpr int kRounds = 3;

template <class T>
json::Value headline_rounds(results::Results& res, const MultiConfig& mc, const dp::Variant& hv, const TrainOptions& to,
                            const train::Corpus& data, Attn attn, uint64_t seed, int n, const MultiTimes& mt,
                            double head_ms) {
  std::vector<double> one{mt.one_ms}, share{mt.share_ms}, many{head_ms}, strong, weak;
  bool ok = true;  // every later round's losses finite and replicas identical (round 1's: its row's own fact)
  for (int r = 1; r < kRounds; ++r) {
    one.push_back(timing::summarize(one_gpu_step_times<T>(mc.cfg, to, mc.batch, data, attn, seed, mt.warm, mt.reps))
                      .median_ms);
    share.push_back(
        timing::summarize(one_gpu_step_times<T>(mc.cfg, to, mc.batch / n, data, attn, seed, mt.warm, mt.reps))
            .median_ms);
    const VariantRun run = run_variant<T>(mc, hv, data, attn, seed, n, mt);
    ok = ok && run.finite && run.same;
    many.push_back(timing::summarize(run.ms).median_ms);
  }
  for (int r = 0; r < kRounds; ++r)
    strong.push_back(100.0 * one[size_t(r)] / (n * many[size_t(r)])), weak.push_back(100.0 * share[size_t(r)] / many[size_t(r)]);
  const timing::Stats s = timing::summarize(strong), w = timing::summarize(weak);
  // The row's ms, min_ms and max_ms are over the rounds' medians, and its reps the rounds, not steps.
  results::Bench b = step_row("interleaved rounds " + mc.name + " " + std::to_string(n) + " GPUs " + hv.mode,
                              Types<T>::name(), mc.cfg, mc.batch, many);
  json::Value ex = json::Value::object();
  const auto arr = [](const std::vector<double>& v) {
    json::Value a = json::Value::array();
    for (double x : v) a.push(x);
    return a;
  };
  ex["gpus"] = n, ex["rounds"] = kRounds, ex["mode"] = hv.mode, ex["model"] = mc.name;
  ex["one_gpu_ms"] = arr(one), ex["share_ms"] = arr(share), ex["n_gpu_ms"] = arr(many);
  ex["scaling_pct"] = arr(strong), ex["weak_scaling_pct"] = arr(weak);
  ex["scaling_median_pct"] = s.median_ms, ex["scaling_min_pct"] = s.min_ms, ex["scaling_max_pct"] = s.max_ms;
  ex["weak_median_pct"] = w.median_ms, ex["weak_min_pct"] = w.min_ms, ex["weak_max_pct"] = w.max_ms;
  b.extra = ex;
  res.add(b);
  res.add(verify::fact(mc.name + " model, " + std::to_string(n) + " GPUs, " + hv.mode +
                           ", interleaved rounds: losses finite and replicas identical while timing",
                       ok));
  std::printf("  %d GPUs, %s, %d interleaved rounds: scaling %.1f%% (%.1f-%.1f), weak %.1f%% (%.1f-%.1f)\n", n,
              hv.mode.c_str(), kRounds, s.median_ms, s.min_ms, s.max_ms, w.median_ms, w.min_ms, w.max_ms);
  return ex;
}

// One model configuration: 1 GPU with the whole batch, 1 GPU with one replica's share, then N GPUs
// each way (variants(); with `more`, the variants beyond the bucket sizes); with `rounds`, the headline
// again in interleaved rounds (headline_rounds). Returns the headline row (the command line's settings):
// its scaling and weak scaling, and with `rounds` their medians over the rounds ("rounds").
template <class T>
json::Value bench_multi_config(results::Results& res, const MultiConfig& mc, const TrainOptions& o,
                               const train::Corpus& data, Attn attn, uint64_t seed, int n, bool more, bool rounds) {
  const int warm = 5, reps = 30;
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
  const double one_ms = timing::summarize(one).median_ms;
  {
    results::Bench b = step_row("train step " + mc.name + " 1 GPU", Types<T>::name(), mc.cfg, mc.batch, one);
    b.extra["gpus"] = 1, b.extra["config"] = mc.name;
    res.add(b);
    std::printf("  1 GPU                      %8.2f ms/step  %10.0f tokens/s\n", one_ms, b.tokens_per_s);
  }
  // One GPU with one replica's share of the batch: what an N-GPU step would take if communication
  // were free (the compute-only step). The gap from one_ms / N is the smaller per-GPU batch (less work
  // per kernel, the same optimizer step over every parameter); the rest of the N-GPU step's time is
  // communication.
  const std::vector<double> share = one_gpu_step_times<T>(mc.cfg, to, mc.batch / n, data, attn, seed, warm, reps);
  const double share_ms = timing::summarize(share).median_ms;
  {
    results::Bench b = step_row("train step " + mc.name + " 1 GPU, one replica's share of the batch", Types<T>::name(),
                                mc.cfg, mc.batch / n, share);
    b.extra["gpus"] = 1, b.extra["config"] = mc.name, b.extra["batch"] = mc.batch / n;
    b.extra["ideal_scaling_pct"] = 100.0 * one_ms / (n * share_ms);  // the best N GPUs could do with free communication
    b.extra["share_tokens_per_s"] = b.tokens_per_s;
    res.add(b);
    std::printf(
        "  1 GPU, batch %-4d           %8.2f ms/step  (an N-GPU step with free communication: at most %.1f%% "
        "scaling)\n",
        mc.batch / n, share_ms, 100.0 * one_ms / (n * share_ms));
  }
  json::Value headline;
  const MultiTimes mt{one_ms, share_ms, grad_bytes, warm, reps};
  const std::vector<dp::Variant> vs = dp::variants(to, more, dp::peer_access_missing(n).empty());
  const dp::Variant* hv = nullptr;
  for (const dp::Variant& v : vs) {
    json::Value row = bench_multi_variant<T>(res, mc, v, data, attn, seed, n, mt);
    if (v.headline) headline = row, hv = &v;
  }
  if (hv && rounds)  // after every variant, so that round 1 is the rows above
    headline["rounds"] = headline_rounds<T>(res, mc, *hv, to, data, attn, seed, n, mt, headline.find("step_ms")->number());
  return headline;
}

// NCCL alone over a range of sizes: the bus bandwidth curve that the gradient's sizes sit on.
inline void bench_nccl_curve(results::Results& res, int n) {
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
template <class T>
void bench_loss_curves(results::Results& res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
                       Attn attn, uint64_t seed, int n, int quality_steps) {
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

// --bench --gpus N: tokens/s on 1 and N GPUs for the given model and a larger one, with and without
// overlapping the all-reduce with the backward; NCCL's all-reduce alone at the same message sizes;
// and the loss curve of N GPUs against one GPU's.
template <class T>
void bench_multi(results::Results& res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
                 Attn attn, uint64_t seed, int n, int quality_steps) {
  gpt::Config big = cfg;
  big.layers = 12, big.heads = 12, big.width = 768, big.context = 1024;
  // The large model at two global batches: 16 (8 sequences per GPU on 2 GPUs) and 2 x 16 (each GPU
  // keeps the one-GPU batch of 16). The first asks N GPUs to finish the same step faster (strong
  // scaling); the second gives each GPU as much work as one GPU had (weak scaling), which is how data
  // parallelism is used when the global batch can grow.
  const std::vector<MultiConfig> configs = {
      {"default", cfg, o.batch}, {"large", big, 16}, {"large-b" + std::to_string(16 * n), big, 16 * n}};
  res.config["gpus"] = n;
  res.config["nccl"] = dp::nccl_version();
  for (const char* v : dp::nccl_settings())  // the NCCL settings this run had
    if (std::getenv(v)) res.config[v] = std::getenv(v);
  res.config["bucket_mib"] = double(o.bucket_bytes) / (1 << 20);
  res.config["allreduce"] = o.allreduce_bf16 ? "bf16" : "fp32", res.config["zero"] = o.zero;
  res.config["collectives"] = o.copy_collectives ? "copy" : "nccl";
  if (o.nccl_channels) res.config["nccl_channels"] = o.nccl_channels;
  // The variants beyond the bucket sizes run on the default model and on the large one at the larger
  // batch (the goals' configurations); the large model at batch 16 keeps the bucket sizes only.
  std::vector<json::Value> head;
  for (const auto& mc : configs)  // the goals' configurations (all but "large") also in interleaved rounds
    head.push_back(bench_multi_config<T>(res, mc, o, data, attn, seed, n, mc.name != "large", mc.name != "large"));
  const auto num = [](const json::Value& row, const char* key) {
    const json::Value* x = row.find(key);
    return x ? x->number() : NAN;
  };
  // One step's timeline of the goal configuration, at the command line's settings, for the plot.
  if (const json::Value* tl = head[2].find("timeline")) {
    json::Value t = *tl;
    t["config"] = configs[2].name, t["mode"] = head[2].find("mode") ? *head[2].find("mode") : json::Value("");
    res.config["timeline"] = t;
  }
  bench_nccl_curve(res, n);
  bench_loss_curves<T>(res, cfg, o, data, attn, seed, n, quality_steps);
  std::printf("\n");
  // The goals read the medians of the interleaved rounds (head[0] is the default model, head[2] the
  // large one at 16 x n: configs' order), one run's ratio where a configuration ran no rounds.
  const auto med = [&](const json::Value& row, const char* key, const char* one_run) {
    const json::Value* r = row.find("rounds");
    return r ? num(*r, key) : num(row, one_run);
  };
  const double def = med(head[0], "scaling_median_pct", "scaling_efficiency_pct"),
               strong = med(head[2], "scaling_median_pct", "scaling_efficiency_pct"),
               weak = med(head[2], "weak_median_pct", "weak_scaling_pct");
  // Each goal's name says which it read: the rounds' median, or (no rounds) one run's ratio.
  const std::string on = " on " + std::to_string(n) + " GPUs";
  const auto of = [&](const json::Value& row) {
    return row.find("rounds") ? ", median of " + std::to_string(kRounds) + " interleaved rounds" : std::string();
  };
  res.add_goal("scaling efficiency" + on + ", default model, global batch " + std::to_string(o.batch) + of(head[0]) +
                   " (%; goal >= 80)",
               def, def >= 80);
  res.add_goal("scaling efficiency" + on + ", large model, global batch " + std::to_string(16 * n) + of(head[2]) +
                   " (%; goal >= 92)",
               strong, strong >= 92);
  res.add_goal("weak scaling" + on + ", large model, 16 sequences per GPU" + of(head[2]) + " (%; goal >= 97)", weak,
               weak >= 97);
}
#endif  // GPT_HAVE_NCCL
