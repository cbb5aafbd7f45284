// day50_gpt/run/bench_cudnn.cuh: --bench's row "train step bf16 cuDNN graphs": the training step with
// `--backend cudnn` (nn/backend_cudnn.cuh) against the custom step, same configuration, same options,
// timed in interleaved rounds; with the census of what stayed hand-written (counted from the launches
// the step made, nn/model.cuh's hw), what each cached graph's plan is (engine, runtime-compiled or
// pre-compiled, build time, workspace), and the graphs cuDNN refused here with its reasons.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "json.h"
#include "results.h"
#include "timing.cuh"
#include "trainer.cuh"

// The census and the plans of a cudnn-backend model, as JSON and printed.
inline json::Value cudnn_census(const Model<bf16>& m) {
  json::Value j = json::Value::object(), hw = json::Value::array(), libs = json::Value::array(),
              graphs = json::Value::object();
  for (const std::string& k : m.hand_written) hw.push(k);
  for (const std::string& l : m.fell_back) libs.push(l);
  int64_t ws = 0;
  for (const auto& kv : m.graphs->entries()) {
    json::Value g = json::Value::object();
    const dnnl::Cache::Entry& e = kv.second;
    g["build_ms"] = e.build_ms;
    if (!e.why.empty()) {
      g["refused"] = e.why;
    } else {
      const cg::Engine& c = e.g->chosen();
      g["engine"] = double(c.global_index);
      g["compiled"] = c.runtime_compiled ? "runtime-compiled" : "pre-compiled";
      g["workspace_bytes"] = double(e.g->workspace());
      g["ops"] = e.g->op_count();
      ws = std::max<int64_t>(ws, e.g->workspace());
    }
    graphs[kv.first] = g;
  }
  j["hand_written_kernels"] = int(m.hand_written.size());
  j["hand_written"] = hw;
  j["layers_on_custom_path"] = libs;
  j["graphs_cached"] = int(m.graphs->entries().size());
  j["graphs_built"] = m.graphs->built();
  j["graph_build_ms"] = m.graphs->build_ms();
  j["largest_workspace_bytes"] = double(ws);
  j["graphs"] = graphs;
  std::printf("  cuDNN graphs (%d cached, %d built, %.0f ms to build):\n", int(m.graphs->entries().size()),
              m.graphs->built(), m.graphs->build_ms());
  m.graphs->print();
  std::printf("  hand-written kernels the step launched (%d):", int(m.hand_written.size()));
  for (const std::string& k : m.hand_written) std::printf(" %s", k.c_str());
  std::printf("\n  layers on the custom path (cuDNN refused their graphs here): %s\n",
              m.fell_back.empty() ? "none" : "");
  for (const std::string& l : m.fell_back) std::printf("    %s\n", l.c_str());
  return j;
}

// Why each remaining kernel stays ours: what neither cuDNN's graph API nor its legacy calls express.
// (The embedding's gather and scatter-add, the loss, the bias gradients, the gradient norm and AdamW
// moved to cuDNN: one-hot matmuls, pointwise graphs and the legacy log-softmax and reductions.)
inline json::Value why_hand_written() {
  json::Value j = json::Value::object();
  j["batch (gather_batch, gather_batch_random)"] =
      "reads the corpus at offsets known only on the GPU (random batches: computed there from the step; sequential "
      "ones: the position the trainer copies to device memory before each step): a gather at a device-side index, "
      "and a cuDNN graph's pointers are fixed once it runs inside a captured step";
  j["log (block_sum)"] =
      "writes the step's mean loss and gradient norm into the step's slot of the logging buffer, a device-side "
      "index, for the same reason";
  j["dropout (dropout_mask)"] =
      "draws the masks with our Philox keyed by (seed, step, element): the custom path's and the CPU reference's "
      "masks. cuDNN's RNG operation draws its own stream, so its masks would match neither";
  return j;
}

// What one training step launches, from the CUDA graph the trainer captured of it (--graph on): every
// kernel, cuDNN's and cuBLAS's included, without a profiler.
inline json::Value step_census(const Trainer<bf16>& t) {
  json::Value j = json::Value::object();
  j["captured"] = t.graph != nullptr;
  if (!t.graph) return j;
  const cuda_graph::Census& c = t.graph_census;
  j["complete"] = c.valid;  // false: the runtime could not list every node
  j["nodes"] = c.nodes;
  j["kernel_launches"] = c.kernel_launches;
  j["distinct_kernels"] = c.distinct_kernels;
  j["unresolved_kernel_nodes"] = c.unresolved;
  j["memsets"] = c.memsets;
  j["memcpys"] = c.memcpys;
  j["other_nodes"] = c.other;
  return j;
}

inline void bench_cudnn_backend(results::Results& res, const gpt::Config& cfg, const TrainOptions& o_in,
                                const train::Corpus& data, uint64_t seed) {
  TrainOptions o = o_in;
  o.log_every = 1000;  // no read-back (a host synchronization) inside the timed steps
  o.backend = Backend::kCustom;
  TrainOptions oc = o;
  oc.backend = Backend::kCudnn;
  const std::string name = "train step bf16 cuDNN graphs";
  Trainer<bf16> custom(cfg, o, data, Attn::kAuto, seed);
  Trainer<bf16> dn(cfg, oc, data, Attn::kAuto, seed);
  std::printf("\n%s: attention = %s\n", name.c_str(), dn.m.attn_note.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  dn.step_once();  // eager: every graph's plan is built here
  CUDA_CHECK(cudaDeviceSynchronize());
  const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < 3; ++i) dn.step_once(), custom.step_once();  // and the captures
  custom.step_once();
  dn.settle_priority(), custom.settle_priority();  // (--chain-priority auto: its timed steps, before these)
  CUDA_CHECK(cudaDeviceSynchronize());
  timing::Options to;  // the legacy stream: it waits for both trainers' (blocking) streams
  to.warmup = 2, to.reps = 20, to.budget_ms = 1000;
  const timing::Interleaved iv = timing::interleaved([&] { dn.step_once(); }, [&] { custom.step_once(); }, to, 3);
  // Where each step's time goes: one eager step of each, events between its phases (nn/phases.cuh; the
  // phase names are the custom step's: "matmul (cuBLAS)" is cuDNN's matmul graphs here).
  json::Value phases = json::Value::object();
  std::vector<double> pms[2];
  for (int i = 0; i < 2; ++i) {
    Trainer<bf16>& t = i == 0 ? dn : custom;
    Phases ph;
    t.m.ph = &ph;
    t.settle_update();  // (--adamw-overlap on: the last step's AdamW, before the first phase's event)
    ph.start(t.stream);
    t.step_once();  // eager: a step split into phases is never replayed as a graph
    pms[i] = ph.finish();
    t.m.ph = nullptr;
    json::Value pj = json::Value::object();
    double total = 0;
    for (int p = 0; p < kPhases; ++p) pj[kPhaseName[p]] = pms[i][size_t(p)], total += pms[i][size_t(p)];
    pj["total"] = total;
    phases[i == 0 ? "cudnn" : "custom"] = pj;
  }
  std::printf("  where one eager step's time goes (ms):   cudnn   custom\n");
  for (int p = 0; p < kPhases; ++p)
    std::printf("    %-34s %8.3f %8.3f\n", kPhaseName[p], pms[0][size_t(p)], pms[1][size_t(p)]);
  dn.read_back(), custom.read_back();
  size_t bad = 0;
  for (float l : dn.losses) bad += !std::isfinite(l);
  res.add(verify::fact(name + ": every step's loss is finite", bad == 0 && !dn.losses.empty(), "bf16", "",
                       dn.losses.size(), bad));
  results::Bench b;
  b.name = name;
  b.dtype = "bf16";
  b.shape = {cfg.layers, cfg.heads, cfg.width, cfg.context, o.batch};
  b.ms = iv.ours.median_ms, b.min_ms = iv.ours.min_ms, b.max_ms = iv.ours.max_ms, b.reps = iv.ours.reps;
  b.tokens_per_s = double(o.batch) * cfg.context / (b.ms * 1e-3);
  b.ref = "train step bf16 (custom backend, same options)";
  b.ref_ms = iv.ref.median_ms;
  b.ref_repeats = iv.repeats;
  b.pct_of_ref_median = iv.pct_median, b.pct_of_ref_min = iv.pct_min, b.pct_of_ref_max = iv.pct_max;
  json::Value ex = cudnn_census(dn.m);
  const int hw = int(dn.m.hand_written.size());
  ex["vs_custom"] = iv.ref.median_ms / iv.ours.median_ms;
  ex["vs_custom_note"] = "custom ms / cudnn ms (median of 3 interleaved rounds; above 1: cuDNN graphs faster)";
  ex["first_step_ms"] = first_ms;
  ex["first_step_note"] = "the eager first step, wall clock: every plan's build (runtime compilation) included";
  ex["dropout"] = o.dropout;
  ex["graph"] = o.graph;
  ex["attention"] = dn.m.attn_note;
  ex["why_hand_written"] = why_hand_written();
  json::Value kc = json::Value::object();
  kc["cudnn"] = step_census(dn);
  kc["custom"] = step_census(custom);
  ex["kernels_per_step"] = kc;
  ex["phase_ms"] = phases;
  ex["phase_ms_note"] =
      "one eager step of each backend (not the captured graph the timed steps replay), CUDA events between its "
      "phases; 'matmul (cuBLAS)' holds cuDNN's matmul graphs on the cudnn side";
  ex["kernels_per_step_note"] =
      "from the CUDA graph each trainer captured of one step: kernel nodes (launches), the distinct kernels "
      "among them (named by the driver, libraries' kernels included), and kernel nodes it did not name "
      "(counted, not deduplicated)";
  for (const Trainer<bf16>* t : {&dn, &custom})
    std::printf("  %s step: %d kernel launches, %d distinct kernels (+%d unnamed), %d memsets, %d copies\n",
                t == &dn ? "cudnn " : "custom", t->graph_census.kernel_launches, t->graph_census.distinct_kernels,
                t->graph_census.unresolved, t->graph_census.memsets, t->graph_census.memcpys);
  b.extra = ex;
  res.add(b);
  std::printf(
      "%s: median %.2f ms/step, custom %.2f ms: custom/cudnn = %.2f (rounds %.0f%%..%.0f%%); "
      "%d hand-written kernels; first step %.0f ms\n",
      name.c_str(), b.ms, b.ref_ms, b.ref_ms / b.ms, iv.pct_min, iv.pct_max, hw, first_ms);
  res.add_goal(name + ": at most 3 hand-written kernels in the step", hw, hw <= 3);
  res.add_goal(name + ": step within 1.3x of custom (custom/cudnn >= 1/1.3)", iv.ref.median_ms / iv.ours.median_ms,
               iv.ours.median_ms <= 1.3 * iv.ref.median_ms);
}
