// day50_gpt/run/verify_step.cuh: gpt --verify's checks of the training step's speed-ups: the step
// replayed as a CUDA graph gives the eager step's losses and weights (bit for bit where the step is
// deterministic; so does --chain-priority auto, which times two instantiations of the graph and keeps one,
// against either fixed setting), and the fused LayerNorm (residual add + LayerNorm, fused backward) trains
// like the unfused one (to rounding: its sums are added in another order), as does the step that recomputes every
// layer's GELU output (--recompute on) against the default that keeps it, and as does the step whose
// weight gradients add their split-K parts inside the GEMM (--dw-reduce-kernel off) or are sized for another
// share of the SMs than the default's (bf16: every SM against half of them). GPU vs CPU for the
// fused kernels and for both settings of --recompute is verify_tiny's (run/verify.cuh).
#pragma once
#include <string>
#include <vector>

#include "results.h"
#include "trainer.cuh"
#include "verify.h"

// Train `steps` steps with options o; the per-step losses and the final weights.
template <class T>
void train_for(const gpt::Config& c, const TrainOptions& o, const train::Corpus& data, Attn attn, uint64_t seed,
               int steps, std::vector<double>& losses, std::vector<double>& params, std::string& attn_used,
               int* side_launches = nullptr, bool* deterministic = nullptr, unsigned long long side_delay_ns = 0,
               long* finishes = nullptr, typename Model<T>::LtVariants* lt_variants = nullptr,
               size_t* residual_bytes = nullptr,  // [2]: the stream's element size, dx's copy's bytes
               int* update_launches = nullptr, int* programmatic_edges = nullptr) {
  Trainer<T> t(c, o, data, attn, seed);
  t.m.dws.delay_ns = side_delay_ns;  // (before the capture, which happens at the second step)
  t.m.set_tf32(o.tf32);  // --precision tf32's model (before its first step)
  while (t.step < steps) t.step_once();
  t.read_back();
  t.settle_update();  // (--adamw-overlap on: the last step's AdamW is still to run)
  if (update_launches) *update_launches = t.upd_launches;
  if (programmatic_edges) *programmatic_edges = t.graph_census.programmatic_edges;
  if (side_launches) *side_launches = t.m.dws.launches;  // dW matmuls captured on the side stream
  if (deterministic) *deterministic = t.m.impl != Attn::kCudnn || t.m.ours_attn_bwd();
  if (finishes) finishes[0] = t.m.finishes.pushed, finishes[1] = t.m.finishes.launches;
  if (lt_variants) *lt_variants = t.m.lt_variants();
  if (residual_bytes) {
    // The residual stream's element size as the buffers were allocated (not as the model says): every xs, every
    // block's x_mid and dx the same size (0 where they disagree); and the bytes of dx's separate copy in T (none
    // where dx is in T already: then dx itself is the next matmul's input, Model::dxT).
    const size_t NC = size_t(t.m.N) * size_t(c.width), b = t.m.dx.bytes() / NC;
    bool same = t.m.dx.bytes() == NC * b;
    for (const DeviceBuffer& x : t.m.xs) same = same && x.bytes() == NC * b;
    for (const Layer& L : t.m.layer) same = same && L.x_mid.bytes() == NC * b;
    residual_bytes[0] = same ? b : 0, residual_bytes[1] = t.m.dx_t.bytes();
  }
  losses.assign(t.losses.begin(), t.losses.end());
  const std::vector<float> p = to_host(t.m.params.template as<float>(), t.m.lay.total);
  params.assign(p.begin(), p.end());
  attn_used = attn_name(t.m.impl);
}

// Whether an executable graph runs its kernels at their own nodes' priorities: the flag it was instantiated
// with, as common/cuda_graph.cuh wrote it down by handle (the runtime's cudaGraphExecGetFlags does not report
// this flag). The handle is what the trainer keeps and swaps, so this still tells which of its two executables
// it kept. The runtime's report must agree on every other flag; an executable not from instantiate() is false.
inline bool runs_node_priorities(cudaGraphExec_t e) {
  unsigned long long f = 0, rt = 0;
  if (!e || !cuda_graph::instantiated_flags(e, &f)) return false;
  CUDA_CHECK(cudaGraphExecGetFlags(e, &rt));
  const unsigned long long others = ~(unsigned long long)cudaGraphInstantiateFlagUseNodePriority;
  return (f & cudaGraphInstantiateFlagUseNodePriority) != 0 && (rt & others) == (f & others);
}
// Trains t on to `steps` steps: its losses, and its weights after the pending update.
template <class T>
void train_on(Trainer<T>& t, int steps, std::vector<double>& losses, std::vector<double>& params) {
  while (t.step < steps) t.step_once();
  t.read_back();
  t.settle_update();
  losses.assign(t.losses.begin(), t.losses.end());
  const std::vector<float> p = to_host(t.m.params.template as<float>(), t.m.lay.total);
  params.assign(p.begin(), p.end());
}

// --chain-priority auto (the default, run/trainer.cuh): the step captured once and instantiated with node
// priorities ("on") and without ("level"), the two alternated over the first 2 K graph steps (K =
// kPriorityTimedSteps) and the faster kept. Counted: when it chose, the executables it held before and after
// (the check's negative control: its condition is false one step before the choice and before the first
// graph step), that the one kept is the one chosen (its instantiation flags), and that a restore recaptures
// the choice without timing again. Then which samples its medians left out: the launches right after a host
// synchronization (the capture's, and with o.log_every 4 each read-back's, which all fall on "level"), and
// with --log-every 1, where every launch follows one, that it still chose after 2 K launches, from all of
// them; and that a graph on one stream (no side stream: nothing for a priority to order) is not timed at all.
// Then its training against the fixed settings', bit for bit: a priority
// changes only the order in which the block scheduler starts the same kernels on the same inputs, and on this
// deterministic step the graph's bits are the eager steps' (the checks above), so auto's steps (both settings
// while it times, then its choice) must equal --chain-priority on's and off's, whichever it chose.
template <class T>
void verify_chain_priority(results::Results& res, const gpt::Config& c, const TrainOptions& o,
                           const train::Corpus& data, uint64_t seed, Attn det, const std::string& tag) {
  const int K = kPriorityTimedSteps, decide = 1 + 2 * K, steps = decide + 4;  // the eager first step, 2 K timed
  const std::string tp = tag + ", --chain-priority auto", ks = std::to_string(2 * K);
  TrainOptions oa = o, on = o, off = o;
  oa.chain_priority = ChainPriority::kAuto, on.chain_priority = ChainPriority::kOn;
  off.chain_priority = ChainPriority::kOff;
  std::vector<double> la, pa, l_on, p_on, l_off, p_off;
  const auto one_kept = [](const Trainer<T>& t) { return t.priority.decided && t.graph_execs() == 1; };
  bool before_first = false, before_choice = false, pair = false, chosen = false, kept_chosen = false, again = false,
       flags = false, sides = false, marked = false, left_out = false;
  std::string choice, counts, used;
  // Which timed launches follow a host synchronization: the first (after the capture), and launch i where a
  // read-back ran after step i (step 0 is eager; every o.log_every steps); each median is of its setting's
  // others where they are at least K/2, else of all K.
  std::vector<bool> disturbed(size_t(2 * K));
  int quiet[2] = {0, 0};
  for (int i = 0; i < 2 * K; ++i) {
    disturbed[size_t(i)] = i == 0 || (i + 1) % o.log_every == 0;
    quiet[i % 2] += !disturbed[size_t(i)];
  }
  const int on_used = 2 * quiet[0] >= K ? quiet[0] : K, level_used = 2 * quiet[1] >= K ? quiet[1] : K;
  {
    Trainer<T> t(c, oa, data, det, seed);
    sides = t.m.dw_stream && t.upd_stream;  // what makes the priorities matter (and auto time them)
    t.step_once();  // eager: no graph yet
    before_first = !one_kept(t) && t.graph_execs() == 0;
    while (t.step < decide - 1) t.step_once();
    before_choice = !one_kept(t) && t.graph_execs() == 2 && t.prio_launches == 2 * K - 1;
    pair = before_choice && runs_node_priorities(t.graph) && !runs_node_priorities(t.graph_level);
    t.step_once();  // the last timed launch: the choice
    chosen = one_kept(t) && t.priority.steps_each == K && t.priority.on_ms > 0 && t.priority.level_ms > 0;
    kept_chosen = chosen && runs_node_priorities(t.graph) == !t.priority.level;
    choice = t.priority.chosen();
    counts = std::to_string(t.priority.on_ms) + " / " + std::to_string(t.priority.level_ms) + " ms: " + choice;
    marked = true;
    for (int i = 0; i < 2 * K; ++i) marked = marked && t.prio_disturbed[i] == disturbed[size_t(i)];
    left_out = marked && t.priority.on_used == on_used && t.priority.level_used == level_used;
    used = std::to_string(t.priority.on_used) + " / " + std::to_string(t.priority.level_used) + " (expected " +
           std::to_string(on_used) + " / " + std::to_string(level_used) + ")";
    train_on(t, steps, la, pa);
    t.restore(t.checkpoint());  // (as --resume, or the bench's re-run: the graph is dropped)
    t.step_once();
    again = one_kept(t) && t.prio_launches == 2 * K && runs_node_priorities(t.graph) == (choice == "on");
  }
  res.add(verify::fact(tp + ": chosen at its " + ks + "th graph step, one executable kept, the one chosen (a graph "
                            "with side streams: the weight gradients' and AdamW's)",
                       sides && chosen && kept_chosen, "median step on / level", counts));
  res.add(verify::fact(tp + ", --log-every " + std::to_string(o.log_every) +
                           ": the timed launches after a host synchronization (the capture, each read-back) marked, "
                           "and each median of its setting's others (of all " + std::to_string(K) +
                           " where fewer than half are left)",
                       left_out, "samples in the medians on / level", used));
  {
    // --log-every 1: a read-back after every step, so every timed launch follows a synchronization. The
    // launches are as many: it still chooses at the (1 + 2 K)th step, each median of all K.
    TrainOptions o1 = oa;
    o1.log_every = 1;
    Trainer<T> t(c, o1, data, det, seed);
    t.settle_priority();
    bool all = true;
    for (int i = 0; i < 2 * K; ++i) all = all && t.prio_disturbed[i];
    res.add(verify::fact(tp + ", --log-every 1: every timed launch marked, chosen after " + ks +
                             " of them all the same, each median of all " + std::to_string(K),
                         one_kept(t) && t.step == decide && all && t.priority.on_used == K && t.priority.level_used == K,
                         "steps, samples on / level",
                         std::to_string(t.step) + ", " + std::to_string(t.priority.on_used) + " / " +
                             std::to_string(t.priority.level_used)));
  }
  {
    // One stream (--dw-stream off --adamw-overlap off): no side stream, so no timing: one executable, with
    // node priorities, from the first graph step on, and settle_priority runs no step.
    TrainOptions o1 = oa;
    o1.dw_stream = false, o1.adamw_overlap = false;
    Trainer<T> t(c, o1, data, det, seed);
    t.step_once(), t.step_once();  // the eager first step, the capture
    const int64_t at = t.step;
    t.settle_priority();
    res.add(verify::fact(tp + ", one stream (--dw-stream off --adamw-overlap off): not timed, one executable with "
                              "node priorities",
                         !t.m.dw_stream && !t.upd_stream && t.step == at && !t.priority.decided &&
                             t.prio_launches == 0 && t.graph_execs() == 1 && runs_node_priorities(t.graph)));
  }
  res.add(verify::fact(tp + ": one graph step before the choice both executables held (with and without node "
                            "priorities), before the first graph step none (the check above fails there: a "
                            "negative control)",
                       before_first && before_choice && pair));
  res.add(verify::fact(tp + ": after a restore the choice recaptured alone, not timed again", again));
  {
    Trainer<T> t(c, on, data, det, seed);
    train_on(t, steps, l_on, p_on);
    flags = runs_node_priorities(t.graph);
  }
  {
    Trainer<T> t(c, off, data, det, seed);
    train_on(t, steps, l_off, p_off);
    flags = flags && !runs_node_priorities(t.graph);
  }
  res.add(verify::fact(tag + ": --chain-priority on's graph runs node priorities, off's does not", flags));
  const verify::Tol exact{0, 0, "bitwise"};
  const std::string n = " (" + std::to_string(steps) + " steps, " + ks + " of them timed)";
  for (verify::Check ch :
       {verify::compare(tp + ": losses == --chain-priority on's" + n, la.data(), l_on.data(), l_on.size(), exact),
        verify::compare(tp + ": weights == --chain-priority on's", pa.data(), p_on.data(), p_on.size(), exact),
        verify::compare(tp + ": losses == --chain-priority off's" + n, la.data(), l_off.data(), l_off.size(), exact),
        verify::compare(tp + ": weights == --chain-priority off's", pa.data(), p_off.data(), p_off.size(), exact)}) {
    ch.note = "auto chose " + choice;  // (a note, not the name: the choice may differ from run to run)
    res.add(ch);
  }
}

template <class T>
void verify_step_paths(results::Results& res, const train::Corpus& data, uint64_t seed, Attn attn) {
  gpt::Config c;
  c.layers = 2, c.heads = 4, c.width = 128, c.context = 64;
  TrainOptions o;
  o.batch = 16, o.steps = 200, o.warmup = 10, o.lr = 3e-3, o.log_every = 4;  // 12 steps: 3 logging rounds
  // The command line's default share of the SMs for the weight gradients (options.h: bf16 only). The graph
  // steps below run at the default step's share, and the eager steps they are compared with run at it too
  // (which the command line refuses with --graph off): both then build the same algorithms, bit for bit.
  const double share = std::is_same<T, bf16>::value ? kDwSmShareDefault : 1.0;
  o.dw_sm_share = share;
  const int steps = 12;
  std::vector<double> l_eager, p_eager, l_graph, p_graph, l_fused, p_fused, l_unf, p_unf;
  std::string a;
  // Graph against eager, bit for bit: on a deterministic step, so the matmul attention where cuDNN's
  // would be (asked for, or chosen by auto): at this model's head size of 32 cuDNN's backward runs,
  // which adds with atomics. Its capture is exercised by verify_training's runs, which use the graph;
  // the default attention's bitwise check is the head-size-64 model below, where our flash backward runs.
  const Attn det = attn == Attn::kCudnn || attn == Attn::kAuto ? Attn::kMatmul : attn;
  o.graph = false;
  train_for<T>(c, o, data, det, seed, steps, l_eager, p_eager, a);
  o.graph = true;
  int side = 0;
  train_for<T>(c, o, data, det, seed, steps, l_graph, p_graph, a, &side);
  const std::string tag = std::string("training step ") + Types<T>::name() + " " + a + "-attn";
  const verify::Tol exact{0, 0, "bitwise"};
  // The graph runs the weight gradients on a second stream (--dw-stream on, nn/dw_stream.h), the eager
  // steps on one: bit-equal results say that no kernel of the chain overwrote what a dW still read.
  // How many go there: every cuBLASLt dW matmul, and a qkv or fc one is cuBLASLt's only where its bias
  // gradient is not timed apart (bf16, --lt-search: a choice that may differ from run to run); fc2's and
  // the projection's always are (their bias gradients come with the LayerNorm backward): at least 2 a layer.
  const auto side_ran = [](int launches, int layers) { return launches >= 2 * layers && launches <= 4 * layers; };
  res.add(verify::fact(tag + ": the captured step ran its weight-gradient matmuls on the side stream (2 to 4 a layer)",
                       side_ran(side, c.layers), "launches", std::to_string(side)));
  res.add(verify::compare(tag + ": CUDA graph replay's losses == eager steps' (" + std::to_string(steps) + " steps)",
                          l_graph.data(), l_eager.data(), l_eager.size(), exact));
  res.add(verify::compare(tag + ": CUDA graph replay's weights == eager steps'", p_graph.data(), p_eager.data(),
                          p_eager.size(), exact));
  verify_chain_priority<T>(res, c, o, data, seed, det, tag);  // (o: the graph on, as above)
  // The graph above leaves each step's AdamW to the next step, range by range beside its forward
  // (--adamw-overlap on, the default; run/trainer.cuh); the eager steps run it at their own end. Counted: the
  // range updates enqueued (the eager first step's and the capture's, layers + 1 each). Then the same with every
  // range's update held back 200 us on its stream (a forward that did not wait for a range would read weights
  // not yet updated, on every run), and the graph with AdamW at the step's end (--adamw-overlap off): each
  // against the eager steps, bit for bit.
  {
    const int per_step = c.layers + 1;
    int launches = 0;
    std::vector<double> lo, po;
    TrainOptions od = o;
    od.test_update_delay_ns = 200000ull;
    train_for<T>(c, od, data, det, seed, steps, lo, po, a, nullptr, nullptr, 0, nullptr, nullptr, nullptr, &launches);
    const std::string tu = tag + ", AdamW beside the next forward (--adamw-overlap on)";
    res.add(verify::fact(tu + ": the update ran in ranges on its own stream (layers + 1 a step, enqueued twice: the "
                              "eager first step and the capture)",
                         launches == 2 * per_step, "range updates", std::to_string(launches)));
    res.add(verify::compare(tu + ", every range's update delayed 200 us: losses == eager steps'", lo.data(),
                            l_eager.data(), l_eager.size(), exact));
    res.add(verify::compare(tu + ", every range's update delayed 200 us: weights == eager steps'", po.data(),
                            p_eager.data(), p_eager.size(), exact));
    // The negative control: the same delays, and the forward skipping its wait for block 0's range (not the
    // last, whose wait also joins the update's stream to the step): it reads block 0's weights before their
    // update, so its losses must differ (else the checks above could not see a missing wait).
    od.test_skip_update_wait = 1;
    std::vector<double> ls, ps;
    train_for<T>(c, od, data, det, seed, steps, ls, ps, a);
    int differ = 0;
    for (size_t i = 0; i < ls.size() && i < l_eager.size(); ++i) differ += ls[i] != l_eager[i];
    res.add(verify::fact(tu + ", every range's update delayed 200 us and the wait for block 0's skipped (a negative "
                              "control): losses differ from the eager steps'",
                         differ > 0 && ls.size() == l_eager.size(), "steps whose loss differs",
                         std::to_string(differ) + " of " + std::to_string(ls.size())));
    TrainOptions off = o;
    off.adamw_overlap = false;
    launches = -1;
    train_for<T>(c, off, data, det, seed, steps, lo, po, a, nullptr, nullptr, 0, nullptr, nullptr, nullptr, &launches);
    const std::string tf = tag + ", AdamW at the step's end (--adamw-overlap off)";
    res.add(verify::fact(tf + ": no range update ran", launches == 0, "range updates", std::to_string(launches)));
    res.add(verify::compare(tf + ": CUDA graph losses == eager steps'", lo.data(), l_eager.data(), l_eager.size(),
                            exact));
    res.add(verify::compare(tf + ": CUDA graph weights == eager steps'", po.data(), p_eager.data(), p_eager.size(),
                            exact));
  }
  if (std::is_same<T, bf16>::value && (attn == Attn::kAuto || attn == Attn::kCudnn)) {
    // The default step's attention (cuDNN's forward, our flash backward, which adds without atomics) at
    // head size 64, where the flash backward runs: graph (two streams) against eager, bit for bit.
    gpt::Config c64 = c;
    c64.heads = 2;
    TrainOptions eager = o;
    eager.graph = false;
    std::vector<double> le, pe, lg, pg;
    bool det_e = false, det_g = false;
    train_for<T>(c64, eager, data, attn, seed, steps, le, pe, a, nullptr, &det_e);
    train_for<T>(c64, o, data, attn, seed, steps, lg, pg, a, &side, &det_g);
    const std::string t64 = std::string("training step ") + Types<T>::name() + " " + a + "-attn, head size 64";
    res.add(verify::fact(t64 + ": attention backward without atomics (the matmul one or our flash kernels)",
                         det_e && det_g));
    res.add(verify::compare(t64 + ": CUDA graph (weight gradients on a second stream) losses == eager steps'",
                            lg.data(), le.data(), le.size(), exact));
    res.add(verify::compare(t64 + ": CUDA graph weights == eager steps'", pg.data(), pe.data(), pe.size(), exact));
    res.add(verify::fact(t64 + ": the captured step ran its weight-gradient matmuls on the side stream (2 to 4 a layer)",
                         side_ran(side, c64.layers), "launches", std::to_string(side)));
    // --pdl on (nn/pdl.cuh): the chains' kernels of ours launched programmatically, each waiting for the kernel
    // before it in its stream before it reads: the same kernels on the same inputs, so the eager steps' bits.
    // Counted: the eager first step and the capture each launch the LayerNorms (2 L + 1 forward, 2 L + 1
    // backward) and the flash backward (L) that way at least.
    TrainOptions op = o;
    op.pdl = true;
    std::vector<double> lp, pp, lq0, pq0;
    const long pdl_before = pdl::launches();
    int edges_on = 0, edges_off = 0;
    train_for<T>(c64, op, data, attn, seed, steps, lp, pp, a, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr,
                 &edges_on);
    const long pdl_n = pdl::launches() - pdl_before, pdl_least = 2 * (5 * c64.layers + 2);
    train_for<T>(c64, o, data, attn, seed, steps, lq0, pq0, a, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr,
                 &edges_off);
    const std::string tp = t64 + ", --pdl on (programmatic dependent launches)";
    res.add(verify::fact(tp + ": the step launched the chains' kernels programmatically", pdl_n >= pdl_least,
                         "launches", std::to_string(pdl_n) + " (at least " + std::to_string(pdl_least) + ")"));
    // ... and the capture made programmatic edges of them (kernel to kernel only: after a memset, a copy or
    // an event wait an edge stays plain), more than the step without the flag has (its finishes' at most)
    res.add(verify::fact(tp + ": the captured graph holds more programmatic edges than without it",
                         edges_on > edges_off && edges_off >= 0, "edges with / without",
                         std::to_string(edges_on) + " / " + std::to_string(edges_off)));
    res.add(verify::compare(tp + ": CUDA graph losses == eager steps'", lp.data(), le.data(), le.size(), exact));
    res.add(verify::compare(tp + ": CUDA graph weights == eager steps'", pp.data(), pe.data(), pe.size(), exact));
    // The column-sum finishes many to a launch (--batch-finish on, nn/finish_queue.cuh) against each in a
    // launch of its own: the same sums in the same order, so the same bits. Counted: the eager first step
    // and the capture each queue the LayerNorms' 2 L + 1 and the flash backward's L (and the fused dGELU
    // GEMM's L where it runs) in fewer launches than finishes. At this small model's timed rows per warp the
    // partials buffer may hold little more than one LayerNorm's partials, so the same comparison follows with
    // --lt-search off (4 rows a warp): 7 finishes a backward in 2 launches (test_finish_plan counts them).
    TrainOptions each = o;
    each.batch_finish = false;
    std::vector<double> lq, pq, lb, pb;
    long counts[2] = {0, 0};
    train_for<T>(c64, each, data, attn, seed, steps, lq, pq, a);
    train_for<T>(c64, o, data, attn, seed, steps, lb, pb, a, nullptr, nullptr, 0, counts);
    const std::string tq = t64 + ", column-sum finishes batched (--batch-finish on) against one launch each";
    const long least = 2 * (3 * c64.layers + 1);  // eager step + capture, each at least 3 L + 1
    res.add(verify::fact(tq + ": the backward queued its finishes and ran them in fewer launches",
                         counts[0] >= least && counts[1] > 0 && counts[1] < counts[0], "queued / launches",
                         std::to_string(counts[0]) + " / " + std::to_string(counts[1])));
    res.add(verify::compare(tq + ": losses ==", lb.data(), lq.data(), lq.size(), exact));
    res.add(verify::compare(tq + ": weights ==", pb.data(), pq.data(), pq.size(), exact));
    TrainOptions fixed = o, fixed_each = each;
    fixed.lt_search = fixed_each.lt_search = false;
    long c2[2] = {0, 0};
    train_for<T>(c64, fixed_each, data, attn, seed, steps, lq, pq, a);
    train_for<T>(c64, fixed, data, attn, seed, steps, lb, pb, a, nullptr, nullptr, 0, c2);
    const std::string tf = tq + ", --lt-search off";
    res.add(verify::fact(tf + ": at least two finishes a launch", c2[0] >= least && c2[1] > 0 && 2 * c2[1] <= c2[0],
                         "queued / launches", std::to_string(c2[0]) + " / " + std::to_string(c2[1])));
    res.add(verify::compare(tf + ": losses ==", lb.data(), lq.data(), lq.size(), exact));
    res.add(verify::compare(tf + ": weights ==", pb.data(), pq.data(), pq.size(), exact));
    // The same with every side-stream dW held back 200 us after its fork (nn/dw_stream.h, k::spin_ns), and
    // the GELU outputs recomputed into the one buffer the layers share (which fc2's dW reads); dropout is
    // on, as in every run here (the mask's output is a buffer the dW read): a wait missing anywhere now
    // loses the race on every run.
    TrainOptions od = o, ode = eager;
    od.recompute = ode.recompute = true;
    std::vector<double> lde, pde, ldg, pdg;
    train_for<T>(c64, ode, data, attn, seed, steps, lde, pde, a);
    train_for<T>(c64, od, data, attn, seed, steps, ldg, pdg, a, nullptr, nullptr, 200000ull);
    const std::string td = t64 + ", --recompute on, every side-stream dW delayed 200 us";
    res.add(verify::compare(td + ": CUDA graph losses == eager steps'", ldg.data(), lde.data(), lde.size(), exact));
    res.add(verify::compare(td + ": CUDA graph weights == eager steps'", pdg.data(), pde.data(), pde.size(), exact));
  }
  // Fused against unfused LayerNorm, with the attention asked for (both with the graph). The fused run is
  // the default step: it also counts its cuBLASLt matmuls built with an SM target (var_default, below).
  typename Model<T>::LtVariants var_default;
  train_for<T>(c, o, data, attn, seed, steps, l_fused, p_fused, a, nullptr, nullptr, 0, nullptr, &var_default);
  o.fused_ln = false;
  train_for<T>(c, o, data, attn, seed, steps, l_unf, p_unf, a);
  const bool bf = std::is_same<T, bf16>::value;
  // Adam divides by the gradients' size, so rounding-sized differences grow over the steps: loose.
  const verify::Tol tl = bf ? verify::Tol{0.02, 0.01, "bf16"} : verify::Tol{1e-3, 1e-3, "fp32, 12 steps"};
  const std::string tag2 = std::string("training step ") + Types<T>::name() + " " + a + "-attn";
  res.add(verify::compare(
      tag2 + ": fused LayerNorm's losses == unfused's, to rounding (" + std::to_string(steps) + " steps)",
      l_fused.data(), l_unf.data(), l_unf.size(), tl));
  // The GELU outputs recomputed in the backward against the default, which keeps them (the fused step,
  // as above): the recomputed values come from the rounded pre-activation, the forward's epilogue from
  // the fp32 accumulator, so they agree to rounding.
  o.fused_ln = true, o.recompute = true;
  std::vector<double> l_again, p_again;
  train_for<T>(c, o, data, attn, seed, steps, l_again, p_again, a);
  res.add(verify::compare(
      tag2 + ": GELU outputs recomputed (--recompute on): losses == kept's, to rounding (" + std::to_string(steps) +
          " steps)",
      l_again.data(), l_fused.data(), l_fused.size(), tl));
  // The layers' cuBLASLt weight gradients asked to reduce in place (--dw-reduce-kernel off: the heuristic
  // offers only algorithms whose configuration reports an in-place reduction or none) against the default:
  // other algorithms, the same sums in another order, so the same losses to rounding. These checks see the
  // request, not the kernels that run; only a trace shows those.
  o.recompute = false, o.dw_reduce_kernel = false;
  std::vector<double> l_in, p_in;
  typename Model<T>::LtVariants var;
  train_for<T>(c, o, data, attn, seed, steps, l_in, p_in, a, nullptr, nullptr, 0, nullptr, &var);
  // The flag reached the descriptors: the layers' dW matmuls (four shapes) were built with the mask, and
  // every pick's configuration reports its reduction scheme, none one the mask leaves out (an unreadable
  // scheme is no evidence, so it fails). (The losses alone could not tell: at this model's K of 1,024
  // tokens cuBLASLt may not split K at all.)
  res.add(verify::fact(tag2 + ": --dw-reduce-kernel off: the weight gradients' cuBLASLt matmuls asked for in-place "
                              "reductions only, and each picked one that reports such a reduction or none",
                       var.masked >= 1 && var.outside == 0 && var.unread == 0,
                       "built with the mask / outside it / unreadable",
                       std::to_string(var.masked) + " / " + std::to_string(var.outside) + " / " +
                           std::to_string(var.unread)));
  res.add(verify::compare(
      tag2 + ": weight gradients asked to reduce in place (--dw-reduce-kernel off): losses == default's, to rounding (" +
          std::to_string(steps) + " steps)",
      l_in.data(), l_fused.data(), l_fused.size(), tl));
  // ... and with the weight gradients' algorithms sized for the other share of the SMs (bf16's default is
  // half of them, so here every SM; fp32's is every SM, so here half): other algorithms, the same sums to
  // rounding. Counted: the cuBLASLt matmuls built with an SM target (lt_variants), in the run with half the
  // SMs at least one (the share reached the descriptors), in the run with every SM none.
  o.dw_reduce_kernel = true, o.dw_sm_share = share < 1 ? 1.0 : 0.5;
  std::vector<double> l_other, p_other;
  train_for<T>(c, o, data, attn, seed, steps, l_other, p_other, a, nullptr, nullptr, 0, nullptr, &var);
  const std::string other = o.dw_sm_share < 1 ? "half the SMs (--dw-sm-share 0.5)" : "every SM (--dw-sm-share 1)";
  const int half_built = share < 1 ? var_default.targeted : var.targeted,
            every_built = share < 1 ? var.targeted : var_default.targeted;
  res.add(verify::fact(tag2 + ": the weight gradients' cuBLASLt matmuls built with an SM target: some sized for half "
                              "the SMs, none sized for every SM (default: " +
                           (share < 1 ? std::string("half") : std::string("every SM")) + ")",
                       half_built >= 1 && every_built == 0, "half / every SM",
                       std::to_string(half_built) + " / " + std::to_string(every_built)));
  res.add(verify::compare(tag2 + ": weight gradients sized for " + other + ": losses == default's, to rounding (" +
                              std::to_string(steps) + " steps)",
                          l_other.data(), l_fused.data(), l_fused.size(), tl));
  // bf16: the residual stream and its gradient in bf16 (--residual bf16) against the default's fp32 stream:
  // each block's add rounded to bf16 as it is stored. The tolerance is the stream's own, tighter than the
  // bf16 comparisons above (whose differences compound through every rounded activation): the two runs share
  // every kernel but the stream's rounding.
  // Twice: with dropout (the default step) and without, where no dropout mask follows the LayerNorm backward
  // and a bf16 dx is the next matmul's input itself (Model::dxT). The buffers' sizes show the flag
  // arrived (the losses alone could not: a flag that did nothing would match exactly).
  if constexpr (std::is_same<T, bf16>::value) {
    // rtol 2^-9, half of bf16's unit roundoff (2^-8): the losses may move by what one rounding of the stream moves an element,
    // not more (measured, this model: about 1e-5 relative with dropout, 8e-4 without, where cuDNN's attention
    // backward adds with atomics and the runs differ by its order too). The shared bf16 tolerance is 5 to 10
    // times looser at these losses.
    const verify::Tol tr{0, 1.0 / 512, "bf16 stream: half of bf16's unit roundoff"};
    for (const double p : {o.dropout, 0.0}) {
      TrainOptions of = o, oe = o;
      of.dw_sm_share = oe.dw_sm_share = share, of.fused_ln = oe.fused_ln = true, of.recompute = oe.recompute = false;
      of.dw_reduce_kernel = oe.dw_reduce_kernel = true;
      of.dropout = oe.dropout = p, of.residual_bf16 = true, oe.residual_bf16 = false;
      std::vector<double> l_res, p_res, l_ref, p_ref;
      size_t rb[2] = {0, 0}, rf[2] = {0, 0};
      train_for<T>(c, of, data, attn, seed, steps, l_res, p_res, a, nullptr, nullptr, 0, nullptr, nullptr, rb);
      train_for<T>(c, oe, data, attn, seed, steps, l_ref, p_ref, a, nullptr, nullptr, 0, nullptr, nullptr, rf);
      const std::string tp = tag2 + ": --residual bf16" + (p > 0 ? "" : ", dropout 0");
      res.add(verify::fact(tp + ": the residual stream, x mid-block and dx allocated in bf16 and no copy of dx (the "
                                "fp32 stream's run: in fp32, with a bf16 copy of dx)",
                           rb[0] == 2 && rb[1] == 0 && rf[0] == 4 && rf[1] > 0,
                           "bytes an element / dx copy's bytes, bf16 stream; fp32 stream",
                           std::to_string(rb[0]) + " / " + std::to_string(rb[1]) + "; " + std::to_string(rf[0]) +
                               " / " + std::to_string(rf[1])));
      res.add(verify::compare(tp + ": losses == fp32 stream's, to the stream's rounding (" + std::to_string(steps) +
                                  " steps)",
                              l_res.data(), l_ref.data(), l_ref.size(), tr));
    }
  }
}
