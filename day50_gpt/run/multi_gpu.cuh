// day50_gpt/run/multi_gpu.cuh: everything that spreads over several GPUs (NCCL, run/data_parallel.cuh):
// training with --gpus N (threads) or --world N (processes), the N-GPU-vs-1-GPU checks of --verify,
// and the multi-GPU benchmark (--bench --gpus N). Without NCCL this file compiles to nothing.
#pragma once
#ifdef GPT_HAVE_NCCL
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench.cuh"
#include "data_parallel.cuh"
#include "train.cuh"

// ---- Training ------------------------------------------------------------------------------------------
// --gpus N: one process, one thread and one replica per GPU; rank 0 reports.
template <class T>
int train_threads(results::Results& res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
                  const RunFiles& f, Attn attn, uint64_t seed, int n) {
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
int train_process(results::Results& res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
                  const RunFiles& f, Attn attn, uint64_t seed, int world, int rank, int device,
                  const std::string& id_file) {
  ncclComm_t comm = nullptr;
  const std::string err = dp::join_by_file(world, rank, device, id_file, 120.0, comm);
  if (!err.empty()) cli::usage_error(kProg, err);
  std::printf("data parallel: rank %d of %d on GPU %d; NCCL %s, NCCL_NVLS_ENABLE=%s\n", rank, world, device,
              dp::nccl_version().c_str(), std::getenv("NCCL_NVLS_ENABLE"));
  dp::Replica r(comm, rank, world);
  return train_run<T>(&res, cfg, o, data, f, attn, seed, &r);
}

// ---- Verification ---------------------------------------------------------------------------------
// What one data-parallel run (or the one-GPU reference) leaves behind for the checks.
struct DpRun {
  std::vector<float> grads0, losses;  // the first step's gradient (after the all-reduce), every step's loss
  double val = NAN;
  bool replicas_same = true;
};

// Train `steps` steps of `o` on `n` GPUs (n = 1: one GPU, no NCCL) and keep what the checks compare.
template <class T>
DpRun dp_train(const gpt::Config& c, const TrainOptions& o, const train::Corpus& data, Attn attn, uint64_t seed,
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
void verify_data_parallel(results::Results& res, const train::Corpus& data, uint64_t seed, Attn attn, int n) {
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
    res.add(verify::fact(tag + ": replicas' weights identical after training", many.replicas_same));
  }
}

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

// N GPUs training one configuration with the gradient all-reduced in buckets of `bucket` bytes (0: one
// all-reduce after the backward): the step's time and scaling, the all-reduces' time inside training
// and NCCL's alone. Returns the scaling efficiency (%).
template <class T>
double bench_multi_bucket(results::Results& res, const MultiConfig& mc, const TrainOptions& to, size_t bucket,
                          size_t default_bucket, const train::Corpus& data, Attn attn, uint64_t seed, int n,
                          const MultiTimes& mt) {
  TrainOptions tb = to;
  tb.bucket_bytes = bucket;
  std::vector<double> ms, comm;
  size_t nb = 0, biggest = 0;
  double alone_all = 0, alone_bucket = 0;
  bool finite = true, same = true;
  dp::run_threads(n, [&](dp::Replica& r) {
    Trainer<T> tr(mc.cfg, tb, data, attn, seed, &r);
    for (int i = 0; i < mt.warm; ++i) tr.step_once();
    const std::vector<double> t = step_times(tr, mt.reps);
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
  const double med = timing::summarize(ms).median_ms;
  const double scaling = 100.0 * mt.one_ms / (n * med);  // tokens/s on N GPUs / (N x tokens/s on one)
  const double comm_ms = comm[comm.size() / 2];
  const std::string mode = bucket ? "buckets of " + std::to_string(bucket >> 20) + " MiB" : "one all-reduce";
  results::Bench b = step_row("train step " + mc.name + " " + std::to_string(n) + " GPUs " + mode, Types<T>::name(),
                              mc.cfg, mc.batch, ms);
  json::Value ex = json::Value::object();
  ex["gpus"] = n, ex["config"] = mc.name, ex["mode"] = mode;
  ex["scaling_efficiency_pct"] = scaling;
  ex["bucket_bytes"] = double(bucket), ex["default_bucket"] = bucket == default_bucket;
  ex["exposed_ms"] = med - mt.share_ms;  // the step beyond one replica's compute: communication not hidden
  // Weak scaling: N GPUs against N times one GPU running one replica's batch.
  ex["weak_scaling_pct"] = 100.0 * mt.share_ms / med;
  ex["buckets"] = double(nb), ex["largest_bucket_bytes"] = double(biggest);
  ex["comm_ms_in_training"] = comm_ms;  // the all-reduces' time inside a step (side-stream events; includes waiting)
  ex["bus_gbps_in_training"] = dp::bus_gbps(mt.grad_bytes, comm_ms, n);
  ex["allreduce_almt.one_ms"] = alone_all;
  ex["bus_gbps_alone"] = dp::bus_gbps(mt.grad_bytes, alone_all, n);
  ex["bucket_allreduce_almt.one_ms"] = alone_bucket;
  ex["bucket_bus_gbps_alone"] = dp::bus_gbps(double(biggest), alone_bucket, n);
  b.extra = ex;
  res.add(b);
  std::printf(
      "  %d GPUs, %-20s %8.2f ms/step  %10.0f tokens/s  scaling %.1f%%  (all-reduce in training %.2f ms, %.0f GB/s "
      "bus; NCCL "
      "alone %.2f ms, %.0f GB/s bus)\n",
      n, mode.c_str(), med, b.tokens_per_s, scaling, comm_ms, dp::bus_gbps(mt.grad_bytes, comm_ms, n), alone_all,
      dp::bus_gbps(mt.grad_bytes, alone_all, n));
  res.add(verify::fact(mc.name + " model, " + std::to_string(n) + " GPUs, " + mode +
                           ": losses finite and replicas identical while timing",
                       finite && same));
  return scaling;
}

// One model configuration: 1 GPU with the whole batch, 1 GPU with one replica's share, then N GPUs
// with each bucket size. Returns the scaling efficiency (%) with --bucket-mb's buckets.
template <class T>
double bench_multi_config(results::Results& res, const MultiConfig& mc, const TrainOptions& o,
                          const train::Corpus& data, Attn attn, uint64_t seed, int n) {
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
  // were free. The gap from one_ms / N is the smaller per-GPU batch (less work per kernel, the same
  // optimizer step over every parameter); the rest of the N-GPU step's time is communication.
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
  // N GPUs: the gradient in one all-reduce after the backward, then in buckets of several sizes during it.
  std::vector<size_t> sizes = {0, size_t(8) << 20, size_t(25) << 20, size_t(100) << 20};
  if (std::find(sizes.begin(), sizes.end(), o.bucket_bytes) == sizes.end())
    sizes.push_back(o.bucket_bytes);  // --bucket-mb's own
  double at_default = NAN;
  for (size_t bucket : sizes) {
    const double s = bench_multi_bucket<T>(res, mc, to, bucket, o.bucket_bytes, data, attn, seed, n,
                                           MultiTimes{one_ms, share_ms, grad_bytes, warm, reps});
    if (bucket == o.bucket_bytes) at_default = s;
  }
  return at_default;
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
  for (const char* v :
       {"NCCL_NVLS_ENABLE", "NCCL_MAX_CTAS", "NCCL_ALGO", "NCCL_PROTO"})  // the NCCL settings this run had
    if (std::getenv(v)) res.config[v] = std::getenv(v);
  res.config["bucket_mib"] = double(o.bucket_bytes) / (1 << 20);
  double large_eff = NAN, large32_eff = NAN;
  for (const auto& mc : configs) {
    const double eff = bench_multi_config<T>(res, mc, o, data, attn, seed, n);
    if (mc.name == "large") large_eff = eff;
    if (mc.name != "default" && mc.name != "large") large32_eff = eff;
  }
  bench_nccl_curve(res, n);
  bench_loss_curves<T>(res, cfg, o, data, attn, seed, n, quality_steps);
  std::printf("\n");
  const std::string tail =
      " GPUs, large model, buckets of " + std::to_string(o.bucket_bytes >> 20) + " MiB (%; goal >= 90)";
  res.add_goal("scaling efficiency on " + std::to_string(n) + tail + ", global batch 16", large_eff, large_eff >= 90);
  res.add_goal("scaling efficiency on " + std::to_string(n) + tail + ", global batch " + std::to_string(16 * n),
               large32_eff, large32_eff >= 90);
}
#endif  // GPT_HAVE_NCCL
