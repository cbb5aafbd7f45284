// day50_gpt/run/trainer.cuh: one training run's state and its step (the model, the corpus on the GPU,
// the optimizer, the data position), with checkpoints in and out.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "../checkpoint.h"
#include "../nn/model.cuh"
#include "../options.h"
#include "cuda_graph.cuh"
#include "json.h"
#include "replica.cuh"
#include "timing.cuh"

// The command line accepts --residual bf16 at the widths the fused LayerNorm takes (options.h, nn/model.cuh's
// ln_fused): the same bound, or a width the parser let through would reach the Model's throw.
static_assert(gpt::residual_bf16_width(128 * k::kLnMaxChunks) && !gpt::residual_bf16_width(128 * k::kLnMaxChunks + 4),
              "gpt::residual_bf16_width must stop where the fused LayerNorm does");

// One training run's state: the model, the corpus on the GPU, the step and the data position. The
// step enqueues work only (the batch is gathered on the GPU, loss and gradient norm stay there):
// the host reads them back once per logging interval.
template <class T>
struct Trainer {
  gpt::Config cfg;
  TrainOptions o;
  const train::Corpus& data;
  Model<T> m;
  train::AdamW opt;
  int64_t step = 0;
  uint64_t pos = 0, rng_state = 0;
  DeviceBuffer corpus, step_loss, step_norm;
  std::vector<float> losses, norms;  // per step, filled by read_back()
  int pending = 0;                   // steps whose loss is still only on the GPU
  // --dump: the next step's batch, mean loss and raw gradients (before clipping), for the PyTorch oracle.
  bool capture = false;
  std::vector<float> cap_grads;
  std::vector<int> cap_tok, cap_tgt;
  double cap_loss = NAN;

  // Data parallelism (dp non-null): this replica is dp->rank of dp->world and takes batch / world of
  // each global batch's sequences. The global batch, the data order and the schedule are those of one
  // GPU with the same --batch, so the learning rate means the same thing whatever the GPU count.
  dp::Replica* dp = nullptr;
  int world = 1, rank = 0;
  DeviceBuffer checksum;  // replicas_identical()'s

  // One GPU: the step runs on the trainer's own stream and reads what changes from step to step (the
  // step, the data position, the learning rate, the slot of its loss; k::StepVars) from device memory,
  // copied there before each step from a pinned ring (one entry per step between read_backs, which
  // synchronize: an entry is never rewritten while its copy may still be pending). So every step
  // enqueues the same launches, and with --graph on they are captured once into a CUDA graph and
  // replayed: one launch a step instead of several hundred. Data parallelism keeps the plain path.
  cudaStream_t stream = 0;
  DeviceBuffer step_vars;
  k::StepVars* ring = nullptr;
  cudaGraphExec_t graph = nullptr;
  cuda_graph::Census graph_census;  // what the captured step launches (kernels, memsets, ...)
  bool warmed = false;              // one eager step before the capture (cuBLAS and cuBLASLt set up on first use)
  // --chain-priority auto (options.h says why): the step is captured once and instantiated twice, `graph` with
  // node priorities ("on": the chain's kernels at this stream's priority, the highest, the side streams' at the
  // lowest) and `graph_level` without ("level": every kernel at this stream's). The first 2 K graph launches
  // (K = kPriorityTimedSteps) alternate the two, on first, each between two events on this stream. They are
  // real training steps: the same kernels on the same inputs, only the order in which the block scheduler
  // starts them differs, so nothing is undone. After the last, one synchronization: the faster by its median
  // is kept (a tie keeps on) and the other destroyed. graph_level is non-null only while the timing runs.
  // Both executables are uploaded right after their instantiation, so no timed launch uploads one. A launch
  // that follows a host synchronization (a read-back every --log-every steps, validation, a checkpoint, the
  // capture itself) finds the stream idle, so its interval also holds the host's launch latency, and after
  // validation or a checkpoint its step has no AdamW left to apply: such a sample is marked disturbed, and
  // each setting's median is of its undisturbed samples where it has at least K/2 of them, else of all (the
  // launches are as many either way, so the timing ends even with --log-every 1). Only graphs with a side
  // stream are timed (priority_undecided): on one stream there is nothing for a priority to order.
  // (Two executables of one graph are allowed because the captured step holds no memory allocation/free nodes
  // (the cuDNN bench row's census: other_nodes 0, for the cuDNN step's graph and ours) and no device-updatable
  // kernel nodes (no launch asks for one); CUDA allows one executable at a time of a graph holding either.)
  cudaGraphExec_t graph_level = nullptr;
  std::vector<cudaEvent_t> prio_events;  // [2 i], [2 i + 1]: around timed launch i
  int prio_launches = 0;                 // launches timed so far
  bool prio_idle = false;                // the stream was drained by a host synchronization since the last launch
  bool prio_disturbed[2 * kPriorityTimedSteps] = {};  // timed launch i followed one (prio_idle at its launch)
  struct PriorityChoice {
    bool decided = false;
    bool level = false;                  // the choice: the graph without node priorities
    double on_ms = NAN, level_ms = NAN;  // each one's median step time
    int steps_each = 0;                  // the launches timed per setting (K)
    int on_used = 0, level_used = 0;     // the samples each median is of (the undisturbed ones, or all K)
    const char* chosen() const { return level ? "level" : "on"; }
    // What a results file records of it (the bench's rows, a training run's config): chain_priority_chosen
    // and the medians that made it, chain_priority_ms.
    void record(json::Value& obj) const {
      obj["chain_priority_chosen"] = chosen();
      json::Value pm = json::Value::object();
      pm["on"] = on_ms, pm["level"] = level_ms, pm["steps_each"] = steps_each;
      pm["on_used"] = on_used, pm["level_used"] = level_used;
      obj["chain_priority_ms"] = pm;
    }
  } priority;
  // --adamw-overlap on (one GPU, the custom layers, a step that reads its values from m.sv): a step ends with
  // its gradient's norm, and its AdamW runs at the start of the next step on `upd_stream`, one range of
  // parameters at a time in the order the forward reads them (the embeddings, then each block, the last with
  // the final LayerNorm), each recording an event; before the forward first reads a range
  // (Model::on_range_read) the chain waits for that range's event only. So the update of block l runs
  // beside the forward of the blocks before it. The stream has the lowest priority: its blocks take the SMs
  // the forward leaves (a kernel's tail, a kernel with room beside it), and where the forward waits for one
  // the update runs alone. Whatever reads the weights from outside a step (validation, a checkpoint, the
  // checks) first applies a pending update (settle_update); a step that does not overlap applies it first.
  cudaStream_t upd_stream = nullptr;
  std::vector<cudaEvent_t> upd_events;                // [0]: the fork; [1 + r]: range r updated
  std::vector<std::pair<size_t, size_t>> upd_ranges;  // the forward's ranges of parameters
  bool overlap_now = false;                           // this step's update runs in the next step
  bool upd_pending = false;                           // a step's update is still to run
  int upd_launches = 0;                               // range updates enqueued or captured (for --verify)

  Trainer(const gpt::Config& c, const TrainOptions& opts, const train::Corpus& d, Attn attn, uint64_t seed,
          dp::Replica* replica = nullptr)
      : cfg(c),
        o(opts),
        data(d),
        m(c, opts.batch / dp::world_of(replica), attn, opts.fusion, opts.dropout, opts.backend, opts.recompute,
          opts.flash_bwd, opts.dw_stream && opts.graph && !replica,  // (a side stream only a captured step uses)
          opts.residual_bf16),
        rng_state(seed),
        dp(replica),
        world(dp::world_of(replica)),
        rank(dp::rank_of(replica)) {
    opt.lr = o.lr, opt.weight_decay = o.weight_decay;
    corpus.alloc(data.train.size() * sizeof(int));
    to_device(corpus.as<int>(), data.train);
    step_loss.alloc(size_t(o.log_every) * 4), step_norm.alloc(size_t(o.log_every) * 4);
    verify::Rng rng(seed);
    to_device(m.params.template as<float>(),
              gpt::init_params(cfg, rng));  // the same seed on every replica: the same weights
    rng_state = rng.next();
    m.sync_weights();
    m.fused_ln = o.fused_ln, m.lt_search = o.lt_search, m.keep_a = o.keep_a, m.store_slots = o.store_slots, m.batch_finish = o.batch_finish;
    m.pdl = o.pdl, m.flash_wgmma = o.flash_wgmma;
    m.gelu_deriv = o.gelu_deriv, m.dw_reduce_kernel = o.dw_reduce_kernel, m.dw_sm_share = o.dw_sm_share;
    m.set_tf32(o.tf32);  // --precision tf32 (nn/model.cuh): before the first step
    dp::attach(dp, cfg, o, m);
    if (!dp) {
      // A blocking stream: the host copies elsewhere (cudaMemcpy on the legacy stream) stay ordered with it.
      // --chain-priority on (and auto, whose "on" graph needs it): the highest priority, which the graph's
      // capture copies into every kernel of the chain; the weight gradients' side stream (nn/dw_stream.h) has
      // the lowest. When an SM frees up and both branches have blocks waiting, the block scheduler starts the
      // chain's first: its memory-bound kernels (the LayerNorm backward) are what the step waits for, the dW
      // matmuls are not. off: the lowest, as the side streams.
      int least = 0, greatest = 0;
      CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamDefault,
                                              o.chain_priority == ChainPriority::kOff ? least : greatest));
      if (o.chain_priority == ChainPriority::kAuto) {
        prio_events.resize(size_t(4 * kPriorityTimedSteps));
        for (cudaEvent_t& e : prio_events) CUDA_CHECK(cudaEventCreate(&e));
      }
      m.use_stream(stream);
      step_vars.alloc(sizeof(k::StepVars));
      CUDA_CHECK(cudaMallocHost(&ring, size_t(o.log_every) * sizeof(k::StepVars)));
      m.sv = step_vars.as<k::StepVars>();
      if (o.adamw_overlap && !m.on_cudnn()) {
        CUDA_CHECK(cudaStreamCreateWithPriority(&upd_stream, cudaStreamNonBlocking, least));
        upd_ranges = m.lay.forward_ranges();
        upd_events.resize(upd_ranges.size() + 1);
        for (cudaEvent_t& e : upd_events) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      }
    }
  }
  ~Trainer() {
    if (!stream) return;
    cudaStreamSynchronize(stream);
    if (graph) cuda_graph::destroy(graph);
    if (graph_level) cuda_graph::destroy(graph_level);
    for (cudaEvent_t e : prio_events) cudaEventDestroy(e);
    if (upd_stream) cudaStreamSynchronize(upd_stream), cudaStreamDestroy(upd_stream);
    for (cudaEvent_t e : upd_events) cudaEventDestroy(e);
    cudaFreeHost(ring);
    m.use_stream(0);
    cudaStreamDestroy(stream);
  }
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;
  // Whether every replica holds the same weights, bit for bit: a checksum (the sum of squares, reduced
  // in a fixed order) compared across the replicas. Collective: every replica calls it at the same step.
  bool replicas_identical() {
    if (!checksum.bytes()) checksum.alloc(sizeof(float));
    dp::settle(dp);  // (ZeRO-1 on the copy engines: the others' shards have landed)
    k::sum_squares_partial<<<k::kNormBlocks, 256>>>(m.params.template as<float>(), m.lay.total,
                                                    m.norm_partial.template as<float>());
    LAUNCH_CHECK();
    k::block_sum<<<1, 256>>>(m.norm_partial.template as<float>(), k::kNormBlocks, checksum.as<float>(), false);
    LAUNCH_CHECK();
    return dp::same_everywhere(dp, checksum.as<float>());
  }
  // Whether this step leaves its update to the next (--adamw-overlap on): the one-GPU step that reads its values
  // from device memory, with the graph on (its first, eager step too: the same launches), not a step split
  // into phases by the bench (each phase timed alone, AdamW among them).
  bool overlaps() const { return upd_stream && m.sv && o.graph && !m.ph; }
  void step_once() {
    dp::step_begin(dp);  // data parallel: the step's first event on the timeline (run/dp_timeline.cuh)
    overlap_now = overlaps();
    if (!overlap_now) settle_update();  // a step that runs its own AdamW: the one before it first
    if (m.sv) {
      k::StepVars& v = ring[pending];
      const double lr = train::lr_at(step, o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac);
      v.step = step, v.pos = pos, v.slot = pending;
      v.lr = float(lr), v.bc1 = float(1 - std::pow(opt.beta1, double(step + 1))),
      v.bc2 = float(1 - std::pow(opt.beta2, double(step + 1)));  // what optimizer_step would pass
      // The update this step applies first (overlap): the step before's, with its learning rate and t = step.
      v.upd.on = upd_pending ? 1 : 0;
      v.upd.lr = upd_pending ? float(train::lr_at(step - 1, o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac)) : 0.f;
      v.upd.bc1 = float(1 - std::pow(opt.beta1, double(step))), v.upd.bc2 = float(1 - std::pow(opt.beta2, double(step)));
      CUDA_CHECK(cudaMemcpyAsync(step_vars.as(), &v, sizeof v, cudaMemcpyHostToDevice, stream));
    }
    // Eager instead: the first step, a --dump capture, a step the bench splits into phases (events between them).
    if (m.sv && o.graph && !capture && warmed && !m.ph) {
      if (!graph) capture_step();
      launch_graph();
    } else {
      enqueue_step();
      warmed = true;
    }
    upd_pending = overlap_now;  // (the update enqueued at this step's start applied the one before)
    pos = (pos + uint64_t(o.batch) * cfg.context) % data.train.size();
    ++step, ++pending;
    if (pending == o.log_every) read_back();
  }
  // The step's work, enqueued (or captured): the batch, forward, loss, backward, clipping and AdamW.
  void enqueue_step() {
    const int B = m.B, Tq = cfg.context;  // this replica's share of the global batch: sequences rank*B ... rank*B + B-1
    const k::StepVars* sv = m.sv;         // non-null: step and data position from device memory
    if (overlap_now) enqueue_update();    // the step before's AdamW, range by range, beside this forward
    m.hw(o.random_batches ? "gather_batch_random" : "gather_batch"), m.hw("block_sum");
    if (o.random_batches)
      k::gather_batch_random<<<grid_for(size_t(B) * Tq), 256, 0, stream>>>(
          corpus.as<int>(), data.train.size(), rng_state, step, uint64_t(rank) * B, B, Tq, m.tok.template as<int>(),
          m.tgt.template as<int>(), sv);
    else
      k::gather_batch<<<grid_for(size_t(B) * Tq), 256, 0, stream>>>(
          corpus.as<int>(), data.train.size(), (sv ? 0 : pos) + uint64_t(rank) * B * Tq, B, Tq,
          m.tok.template as<int>(), m.tgt.template as<int>(), sv);
    LAUNCH_CHECK();
    // Dropout's masks: a function of (the run's seed, the step, the element's place in the global batch).
    m.drop_key = rng_state, m.drop_step = step, m.drop_first = uint64_t(rank) * B * Tq * cfg.width;
    m.forward();
    if (overlap_now) m.on_range_read = nullptr;  // (validation's forwards wait for nothing; data parallelism's hook stays)
    // With sv, the kernels add the step's slot to the logging buffers themselves.
    float* loss_at = step_loss.as<float>() + (sv ? 0 : pending);
    float* norm_at = step_norm.as<float>() + (sv ? 0 : pending);
    m.loss_mean(loss_at);  // (in a captured step beside the backward: nn/head.cuh)
    dp::mark(dp, "forward + loss");
    m.backward();  // with dp, the buckets' all-reduces start from inside it
    dp::finish_step(dp, loss_at);
    if (capture) {
      capture = false;
      cap_grads = to_host(m.grads.template as<float>(), m.lay.total);
      cap_tok = to_host(m.tok.template as<int>(), size_t(m.N)),
      cap_tgt = to_host(m.tgt.template as<int>(), size_t(m.N));
      const std::vector<float> l = to_host(m.loss.template as<float>(), size_t(m.N));
      cap_loss = 0;
      for (float x : l) cap_loss += x;
      cap_loss /= double(l.size());
    }
    if (overlap_now) return m.optimizer_norm(norm_at);  // AdamW: at the next step's start
    const double lr = train::lr_at(step, o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac);
    dp::optimizer_step(dp, m, opt, lr, step + 1, o.clip, norm_at);  // ZeRO-1: a shard
  }
  // --adamw-overlap on: the pending update (the step before's; nothing where m.sv->upd.on is 0), one range of
  // parameters at a time on upd_stream, forked from the chain here, at the step's start (after the step
  // before, whose gradient and norm partials it reads); the forward waits for each range as it reaches it, and
  // so joins the stream before the backward overwrites the gradient.
  void enqueue_update() {
    CUDA_CHECK(cudaEventRecord(upd_events[0], stream));
    CUDA_CHECK(cudaStreamWaitEvent(upd_stream, upd_events[0], 0));
    for (size_t r = 0; r < upd_ranges.size(); ++r) {
      if (o.test_update_delay_ns) {  // --verify only: every range late (k::spin_ns)
        k::spin_ns<<<1, 1, 0, upd_stream>>>(o.test_update_delay_ns);
        LAUNCH_CHECK();
      }
      m.adamw_range(upd_stream, upd_ranges[r].first, upd_ranges[r].second, opt, 0, 1, o.clip, &m.sv->upd);
      CUDA_CHECK(cudaEventRecord(upd_events[r + 1], upd_stream));
      ++upd_launches;
    }
    m.on_range_read = [this](int r) {
      if (r == o.test_skip_update_wait) return;  // the checks' negative control only
      if (size_t(r) + 1 < upd_events.size()) CUDA_CHECK(cudaStreamWaitEvent(stream, upd_events[size_t(r) + 1], 0));
    };
  }
  // A pending update (the last step's, --adamw-overlap on) applied now, on the chain, with the values it would
  // have had: before anything reads the weights from outside a step, and before a step that runs its own.
  void settle_update() {
    if (!upd_pending) return;
    const double lr = train::lr_at(step - 1, o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac);
    m.adamw_range(stream, 0, m.lay.total, opt, lr, step, o.clip, nullptr);
    upd_pending = false;
  }
  // The whole step as one CUDA graph (--graph on): captured once from enqueue_step, whose launches no
  // longer depend on the step (everything that does is read from m.sv). Logging, validation and
  // checkpoints stay outside it; restore() drops it (the dropout key may change). Instantiated with node
  // priorities for --chain-priority on, without for off; auto: both while it has not chosen, else the one
  // it chose (a capture after restore() is not timed again).
  void capture_step() {
    cudaGraph_t g = cuda_graph::capture_graph(stream, [&] { enqueue_step(); }, &graph_census);
    graph = cuda_graph::instantiate(g, o.chain_priority == ChainPriority::kOn ||
                                           (o.chain_priority == ChainPriority::kAuto && !priority.level));
    if (priority_undecided()) graph_level = cuda_graph::instantiate(g, false);
    CUDA_CHECK(cudaGraphDestroy(g));
    // Uploaded now, so that no timed launch (auto's, the bench's) uploads its executable.
    CUDA_CHECK(cudaGraphUpload(graph, stream));
    if (graph_level) CUDA_CHECK(cudaGraphUpload(graph_level, stream));
    prio_idle = true;  // the stream drained while the host captured and instantiated
  }
  // One graph step: the one graph, or while auto times them, the next of the two (on, level, on, ...).
  void launch_graph() {
    const bool idle = prio_idle;
    prio_idle = false;
    if (!graph_level) {
      CUDA_CHECK(cudaGraphLaunch(graph, stream));
      return;
    }
    const size_t i = size_t(prio_launches++);
    prio_disturbed[i] = idle;
    CUDA_CHECK(cudaEventRecord(prio_events[2 * i], stream));
    CUDA_CHECK(cudaGraphLaunch(i % 2 ? graph_level : graph, stream));
    CUDA_CHECK(cudaEventRecord(prio_events[2 * i + 1], stream));
    if (prio_launches == 2 * kPriorityTimedSteps) choose_priority();
  }
  // auto, after its last timed launch: the one synchronization, each setting's median (of its undisturbed
  // samples where at least K/2 are, else of all K), the faster kept.
  void choose_priority() {
    CUDA_CHECK(cudaEventSynchronize(prio_events.back()));
    std::vector<double> all[2], quiet[2];  // [0]: on, [1]: level
    for (size_t i = 0; i < size_t(prio_launches); ++i) {
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, prio_events[2 * i], prio_events[2 * i + 1]));
      all[i % 2].push_back(t);
      if (!prio_disturbed[i]) quiet[i % 2].push_back(t);
    }
    const auto used = [&](int s) -> const std::vector<double>& {
      return 2 * quiet[s].size() >= size_t(kPriorityTimedSteps) ? quiet[s] : all[s];
    };
    priority.on_ms = timing::summarize(used(0)).median_ms, priority.level_ms = timing::summarize(used(1)).median_ms;
    priority.on_used = int(used(0).size()), priority.level_used = int(used(1).size());
    priority.level = priority.level_ms < priority.on_ms;
    priority.steps_each = kPriorityTimedSteps, priority.decided = true;
    CUDA_CHECK(cuda_graph::destroy(priority.level ? graph : graph_level));
    if (priority.level) graph = graph_level;
    graph_level = nullptr;
    std::printf("chain priority chosen by timing: on %.3f ms, level %.3f ms (medians of %d and %d of %d steps each, "
                "steps after a host synchronization left out): %s\n",
                priority.on_ms, priority.level_ms, priority.on_used, priority.level_used, priority.steps_each,
                priority.chosen());
  }
  // --chain-priority auto on the one-GPU graph with a side stream (the weight gradients', AdamW's), not yet
  // chosen. On one stream every kernel waits for the one before it: no two are ever ready together, so a
  // priority has nothing to order and the graph is instantiated once (with node priorities) and not timed.
  bool priority_undecided() const {
    return o.chain_priority == ChainPriority::kAuto && m.sv && o.graph && (m.dw_stream || upd_stream) &&
           !priority.decided;
  }
  // Training steps until auto has chosen, so that the steps after run the chosen graph alone (the bench's
  // warm-up calls it before its timed steps). None where the next step would run eagerly (split into
  // phases, a --dump capture): it would never choose, so that is the caller's error.
  void settle_priority() {
    while (priority_undecided() && !m.ph && !capture) step_once();
    if (priority_undecided()) throw std::logic_error("settle_priority: a phase-split or --dump step pending");
  }
  // The executables held: 1 once a graph step has run (2 while auto times them).
  int graph_execs() const { return (graph ? 1 : 0) + (graph_level ? 1 : 0); }
  // Bring the pending steps' losses and norms to the host (one synchronization).
  void read_back() {
    if (!pending) return;
    prio_idle = true;  // (to_host synchronizes)
    const std::vector<float> ls = to_host(step_loss.as<float>(), size_t(pending)),
                             ns = to_host(step_norm.as<float>(), size_t(pending));
    losses.insert(losses.end(), ls.begin(), ls.end());
    norms.insert(norms.end(), ns.begin(), ns.end());
    pending = 0;
  }
  double lr_now() const {
    return train::lr_at(std::max<int64_t>(0, step - 1), o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac);
  }
  // Mean loss over the first `batches` batches of the validation text (forward only); batches <= 0:
  // every whole batch the validation text holds (on the plays, about 30 batches: the loss of one
  // play would rise and fall with what the model last trained on).
  double val_loss(int batches) {
    settle_update();
    prio_idle = true;  // its read-backs synchronize, and the next step has no update left to apply
    if (batches <= 0) batches = int(std::max<size_t>(1, data.val.size() / (size_t(o.batch) * size_t(cfg.context))));
    uint64_t vpos = 0;
    double s = 0;
    std::vector<int> tok, tgt;
    DeviceBuffer mean(4);
    for (int i = 0; i < batches; ++i) {
      // the global batch at vpos, of which this replica scores its slice
      train::batch(data.val, vpos + uint64_t(rank) * m.B * cfg.context, m.B, cfg.context, tok, tgt);
      vpos = (vpos + uint64_t(o.batch) * cfg.context) % data.val.size();
      to_device(m.tok.template as<int>(), tok), to_device(m.tgt.template as<int>(), tgt);
      m.forward(false);  // no dropout
      k::block_sum<<<1, 256>>>(m.loss.template as<float>(), m.N, mean.as<float>(), true);
      LAUNCH_CHECK();
      s += double(to_host(mean.as<float>(), 1)[0]);
    }
    return dp::global_mean(dp, s / batches);  // equal slices: the mean of the replicas' means is the global mean
  }
  ckpt::Checkpoint checkpoint() {
    read_back();
    settle_update();
    prio_idle = true;  // its copies synchronize, and the next step has no update left to apply
    ckpt::Checkpoint k;
    k.config = cfg, k.step = step, k.data_pos = pos, k.rng_state = rng_state;
    dp::settle(dp);
    k.params = to_host(m.params.template as<float>(), m.lay.total);
    dp::optimizer_state(dp, m, k.m, k.v);  // ZeRO-1: gathered from every rank (collective)
    return k;
  }
  void restore(const ckpt::Checkpoint& k) {
    dp::settle(dp);  // (no gather still writing the weights)
    to_device(m.params.template as<float>(), k.params);
    dp::restore_optimizer_state(dp, m, k.m, k.v);  // ZeRO-1: this rank's shard
    step = k.step, pos = k.data_pos % data.train.size(), rng_state = k.rng_state;
    upd_pending = false;  // (the checkpoint's weights and moments replace whatever update was pending)
    m.sync_weights();
    if (graph) {  // captured with the old rng_state (the dropout key)
      CUDA_CHECK(cuda_graph::destroy(graph));
      graph = nullptr;
    }
    if (graph_level) {  // auto, still timing: it starts over with the next capture
      CUDA_CHECK(cuda_graph::destroy(graph_level));
      graph_level = nullptr;
      prio_launches = 0;
    }
  }
};
