// day50_gpt/run/train.cuh: the training loop (one GPU, or one replica of a data-parallel run): progress
// lines, the loss log, --dump for the PyTorch oracle, the checkpoint at the end, and the run's checks.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "npy.h"
#include "results.h"
#include "trainer.cuh"

// Writes the checkpoint; if that fails (a full disk, a folder gone), the weights are not lost: they go
// to <path>.rescue-<pid> beside it, else to the temp folder, and stderr says where. False: the run
// failed (exit 1) even if the rescue worked.
inline bool save_or_rescue(const std::string& path, const ckpt::Checkpoint& k, int64_t step) {
  try {
    ckpt::save(path, k);
    std::printf("saved %s (step %lld)\n", path.c_str(), (long long)step);
    return true;
  } catch (const std::exception& e) { std::fprintf(stderr, "error: %s\n", e.what()); }
  const std::string tag = ".rescue-" + std::to_string(getpid());
  const std::filesystem::path p(path);
  for (const std::filesystem::path& to :
       {std::filesystem::path(path + tag), std::filesystem::temp_directory_path() / (p.filename().string() + tag)}) {
    try {
      ckpt::save(to.string(), k);
      std::fprintf(stderr, "error: --save failed; the weights (step %lld) are in %s instead\n", (long long)step,
                   to.c_str());
      return false;
    } catch (const std::exception&) {}
  }
  std::fprintf(stderr, "error: --save failed, and so did the rescue copies beside it and in the temp folder\n");
  return false;
}

// A training run is its own check: the loss must be finite (a non-finite one stopped the run) and,
// for a run from scratch, must have fallen from the start; with data parallelism, the replicas' weights
// must have stayed identical.
template <class T>
void report_training(results::Results& res, Trainer<T>& tr, int64_t first, int comparisons, int differ, double val,
                     double val_min) {
  const bool talk = tr.rank == 0;
  if (first > 0 || !talk) {
    size_t bad = 0;
    for (float l : tr.losses) bad += !std::isfinite(l);
    res.add(verify::fact(
        talk ? "resumed training: every loss finite" : "rank " + std::to_string(tr.rank) + ": every loss finite",
        bad == 0, Types<T>::name(), "", tr.losses.size(), bad));
  } else if (!tr.losses.empty()) {
    const size_t n = tr.losses.size(), k = std::max<size_t>(1, n / 10);
    double tail = 0;
    for (size_t i = n - k; i < n; ++i) tail += tr.losses[i];
    tail /= double(k);
    verify::Check ch = verify::fact("training loss fell (mean of the last 10% of steps vs the first)",
                                    std::isfinite(tail) && tail < tr.losses[0], Types<T>::name());
    ch.max_abs_err = tr.losses[0] - tail;
    res.add(ch);
  }
  if (tr.dp)
    res.add(verify::fact("data parallel over " + std::to_string(tr.world) +
                             " GPUs: the replicas' weights stay identical (checksum at every progress line)",
                         differ == 0, "exact", "", size_t(comparisons), size_t(differ)));
  if (talk) {
    res.config["gpus"] = tr.world;
    res.config["final_train_loss"] = tr.losses.empty() ? NAN : double(tr.losses.back());
    res.config["final_val_loss"] = val;
    res.config["min_val_loss"] = val_min;
    if (tr.priority.decided) tr.priority.record(res.config);  // --chain-priority auto's choice (run/trainer.cuh)
  }
}

// A training run on one GPU, or one replica's part of a data-parallel run (dp non-null). Every
// replica runs this same loop in lockstep (the all-reduces inside the step keep them so); rank 0
// alone prints, writes the log and the checkpoint, and reports to `res` (null on the other ranks of
// a one-process run, whose results would only repeat rank 0's).
template <class T>
int train_run(results::Results* res, const gpt::Config& cfg, const TrainOptions& o, const train::Corpus& data,
              const RunFiles& f, Attn attn, uint64_t seed, dp::Replica* dp = nullptr) {
  Trainer<T> tr(cfg, o, data, attn, seed, dp);
  const bool talk = tr.rank == 0;
  if (talk)
    std::printf("data: %s, %zu training bytes, %zu validation bytes\n", f.data_name.c_str(), data.train.size(),
                data.val.size());
  if (f.resume_ckpt) {
    // Every replica restores the same checkpoint (loaded once, with the arguments): the weights are
    // identical again, and the data position is the global batch's, so a checkpoint moves freely
    // between GPU counts.
    tr.restore(*f.resume_ckpt);
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
  double val = NAN, val_min = NAN;
  int64_t val_min_step = -1;
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
        dp::quiesce(tr.dp);  // ZeRO-1 on the copy engines: nobody still pulls from this model as it is freed
        return cli::kFail;
      }
      if (log) std::fprintf(log, "%lld %.6f\n", (long long)s, tr.losses[logged]);
    }
    if (val_now) {
      val = tr.val_loss(o.val_batches);
      if (!(val >= val_min)) val_min = val, val_min_step = tr.step;
      if (log) std::fprintf(log, "%lld val %.6f\n", (long long)tr.step - 1, val);
    }
    std::string replicas;
    if (dp) {
      // The replicas must hold the same weights; any difference would grow, so it is worth the check.
      const bool same = tr.replicas_identical();
      ++comparisons, differ += !same;
      replicas = same ? "  replicas identical" : "  REPLICAS DIFFER";
    }
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
  if (talk && std::isfinite(val))
    std::printf("validation loss: final %.4f, lowest %.4f (step %lld)%s\n", val, val_min, (long long)val_min_step,
                val > val_min + 0.05 ? "  (it rose by more than 0.05 at the end: the model overfits)" : "");
  if (!f.save.empty()) {
    const ckpt::Checkpoint k = tr.checkpoint();  // every rank: under ZeRO-1 this gathers the shards of m and v
    if (talk && !save_or_rescue(f.save, k, tr.step)) return cli::kFail;
  }
  if (res) report_training(*res, tr, first, comparisons, differ, val, val_min);
  return 0;
}
