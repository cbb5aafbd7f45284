// day30_conv_vs_cudnn/contest.cuh: part 3, our best kernel against cuDNN's best, same inputs, same
// cross-correlation, outputs compared before anything is timed.
#pragma once

#include "conv_ctx.cuh"

// day20's kernels, reused through the include path (-I../day20_conv_slow_fast).
#include "kernels/4_direct_multi.cuh"
#include "kernels/5_im2col_gemm.cuh"
#include "kernels/6_implicit_gemm.cuh"
#include "kernels/7_winograd.cuh"
// This lesson's own.
#include "kernels/8_strip_tuned.cuh"

// ---- 3. The contest ------------------------------------------------------------------------------

struct Custom {
  std::string name;
  std::function<bool(const ConvShape&, std::string*)> supports;
  std::function<void(const ConvShape&, const float*)> prepare;  // once per shape and filter, not timed (as in day20)
  std::function<void(const ConvShape&, const float*, const float*, float*, cudaStream_t)> run;  // (x, w, y)
};

// The hand-written contenders. Case (a): the single-channel kernels (day20's 3b and this lesson's
// tuned 8, at every configuration the autotuner tries). Case (b): day20's multi-channel kernels.
static std::vector<Custom> contenders(Ctx& cx, DeviceBuffer& cws) {
  std::vector<Custom> v;
  auto single = [&](std::string name, int V, void (*fn)(const ConvShape&, const float*, float*, cudaStream_t)) {
    v.push_back(
        {name, [V](const ConvShape& s, std::string* why) { return supports_08(s, V, why); },
         [](const ConvShape& s, const float* w) { set_03_filter(s, w); },  // the filter into constant memory
         [fn](const ConvShape& s, const float* x, const float*, float* y, cudaStream_t st) { fn(s, x, y, st); }});
  };
  single("03b_strip 4 cols x 4 rows (day20)", 1, run_03b_strip<4>);
  // V float4 per row, R rows per thread, B threads per block, M blocks per SM at least
  // (register cap), "stream": read-only loads and evict-first stores.
  single("08_strip V1 R4 B128 M4", 1, run_08_strip<1, 4, 128, 4, false>);
  single("08_strip V1 R4 B128 M8", 1, run_08_strip<1, 4, 128, 8, false>);
  single("08_strip V1 R4 B256 M4", 1, run_08_strip<1, 4, 256, 4, false>);
  single("08_strip V1 R2 B128 M8", 1, run_08_strip<1, 2, 128, 8, false>);
  single("08_strip V1 R2 B256 M8", 1, run_08_strip<1, 2, 256, 8, false>);
  single("08_strip V1 R8 B128 M4", 1, run_08_strip<1, 8, 128, 4, false>);
  single("08_strip V2 R2 B64 M8", 2, run_08_strip<2, 2, 64, 8, false>);
  single("08_strip V2 R2 B128 M4", 2, run_08_strip<2, 2, 128, 4, false>);
  single("08_strip V2 R4 B64 M8", 2, run_08_strip<2, 4, 64, 8, false>);
  single("08_strip V1 R4 B128 M4 stream", 1, run_08_strip<1, 4, 128, 4, true>);
  single("08_strip V1 R4 B128 M8 stream", 1, run_08_strip<1, 4, 128, 8, true>);
  single("08_strip V1 R2 B128 M8 stream", 1, run_08_strip<1, 2, 128, 8, true>);
  single("08_strip V2 R2 B128 M4 stream", 2, run_08_strip<2, 2, 128, 4, true>);
  auto none = [](const ConvShape&, const float*) {};
  v.push_back({"04_direct (day20)", [](const ConvShape& s, std::string* why) { return supports_04(s, why); }, none,
               [](const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
                 run_04_direct(s, x, w, y, st);
               }});
  v.push_back({"05_im2col_cublas (day20)",
               [&cws](const ConvShape& s, std::string* why) {
                 if (im2col_bytes(s) <= cws.bytes()) return true;
                 *why =
                     "im2col needs " + std::to_string(im2col_bytes(s) >> 20) + " MiB, more than the workspace we allow";
                 return false;
               },
               none,
               [&cx, &cws](const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
                 run_05_im2col(cx.blas, s, x, w, y, cws.as<float>(), st);
               }});
  v.push_back({"06_implicit_gemm (day20)", [](const ConvShape& s, std::string* why) { return supports_06(s, why); },
               [](const ConvShape& s, const float*) { set_06_table(s); },  // the gather offsets, per shape
               [](const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
                 run_06_implicit_gemm(s, x, w, y, st);
               }});
  v.push_back({"07_winograd (day20)",
               [&cws](const ConvShape& s, std::string* why) {
                 if (!supports_07(s, why)) return false;
                 if (wino::workspace_bytes(s) <= cws.bytes()) return true;
                 *why = "Winograd needs more workspace than we allow";
                 return false;
               },
               none,
               [&cx, &cws](const ConvShape& s, const float* x, const float* w, float* y, cudaStream_t st) {
                 run_07_winograd(cx.blas, s, x, w, y, cws.as<float>(), st);
               }});
  return v;
}

// One contest case's operands, references and cuDNN's best.
struct ContestCase {
  const std::string& label;
  const ConvShape& s;
  bool memory_bound;
  Dims dy;
  DeviceBuffer &x, &w, &y, &yd;
  std::vector<size_t> idx;
  std::vector<double> want;
  verify::Tol tol;
  dnn::Timed best{};  // cuDNN's fastest algorithm, re-timed (median INFINITY when not timed)
  Config best_cfg = kFp32Fma;
  json::Value cudnn_all = json::Value::array();  // every algorithm re-timed, each layout
};

// cuDNN: fp32 with FMA math (the same arithmetic as ours). When C = K = 1, NCHW and NHWC are the
// same bytes, so cuDNN may also use its NHWC kernels: it gets its best of both. Every algorithm
// that ran is checked against the CPU, not only the winner.
static void cudnn_best(Ctx& cx, ContestCase& k) {
  const ConvShape& s = k.s;
  std::vector<Config> cfgs = {kFp32Fma};
  if (s.C == 1 && s.K == 1) cfgs.push_back(kFp32Nhwc);
  const dnn::Operands ops{k.x.as(), k.w.as(), k.yd.as()};
  k.best.t.median_ms = INFINITY;
  for (const Config& c : cfgs) {
    dnn::ConvDesc d(s, c.dt, c.fmt, c.math);
    if (!d.ok()) {
      std::printf("  cuDNN %s refused: %s\n", config_name(c).c_str(), d.error.c_str());
      continue;
    }
    size_t offer = 0;
    for (const auto& h : dnn::heuristic(cx.dnn, d, Dir::Fwd))
      if (h.ok() && h.workspace <= cx.ws_limit) offer = std::max(offer, h.workspace);
    const std::vector<dnn::AlgoPerf> found =
        dnn::find(cx.dnn, d, Dir::Fwd, ops, offer ? cx.ws.get(offer) : nullptr, offer);
    for (const auto& f : found) {
      if (!f.ok()) continue;
      poison(k.yd.as(), k.yd.bytes());
      CUDNN_CHECK(dnn::run(cx.dnn, d, Dir::Fwd, f.algo, f.math, ops, f.workspace ? cx.ws.get(f.workspace) : nullptr,
                           f.workspace));
      cx.res->add_quiet(verify::compare_at("contest " + k.label + " cuDNN " + config_name(c) + " " + f.name,
                                           download(k.yd, k.dy, kFp32Fma), k.idx, k.want, k.tol));
    }
    if (!cx.timed) continue;
    for (const auto& tm : dnn::retime(cx.dnn, d, Dir::Fwd, found, ops, cx.ws, offer, cx.topt)) {
      json::Value j = json::Value::object();
      j["algo"] = tm.algo.name;
      j["config"] = config_name(c);
      j["ms"] = tm.t.median_ms;
      k.cudnn_all.push(j);
      if (tm.t.median_ms < k.best.t.median_ms) k.best = tm, k.best_cfg = c;
    }
  }
}

// Runs cuDNN's best (or, not timed, Find's first) once into yd. `d` is built once by the caller
// (k.best_cfg), so a timed call costs what cuDNN's call costs, not a descriptor's construction.
static void run_cudnn_best(Ctx& cx, const ContestCase& k, dnn::ConvDesc& d) {
  const dnn::Operands ops{k.x.as(), k.w.as(), k.yd.as()};
  int algo = k.best.algo.algo;
  cudnnMathType_t math = k.best.algo.math;
  size_t wsb = k.best.algo.workspace;
  if (!cx.timed) {
    const auto found = dnn::find(cx.dnn, d, Dir::Fwd, ops, cx.ws.get(cx.ws.bytes()), cx.ws.bytes());
    algo = found.front().algo, math = found.front().math, wsb = found.front().workspace;
  }
  CUDNN_CHECK(dnn::run(cx.dnn, d, Dir::Fwd, algo, math, ops, wsb ? cx.ws.get(wsb) : nullptr, wsb));
}

struct Entry {
  const Custom* c;
  timing::Stats t;
};

// The floors of a memory-bound case: the fewest bytes at the measured copy bandwidth, a cudaMemcpy
// of the same bytes (the same launch and drain costs, no arithmetic) and an empty kernel.
struct Floors {
  double floor_ms = NAN, memcpy_ms = NAN, launch_ms = NAN;
};
static Floors floors(Ctx& cx, const ContestCase& k) {
  Floors f;
  f.launch_ms = timing::time_gpu(
                    [&] {
                      empty_kernel<<<1, 32>>>();
                      LAUNCH_CHECK();
                    },
                    cx.topt)
                    .median_ms;
  f.floor_ms = k.s.min_bytes() / (cx.copy_peak * 1e9) * 1e3;
  f.memcpy_ms = timing::time_gpu(
                    [&] {
                      CUDA_CHECK(cudaMemcpyAsync(k.y.as(), k.x.as(), std::min(k.x.bytes(), k.y.bytes()),
                                                 cudaMemcpyDeviceToDevice, 0));
                    },
                    cx.topt)
                    .median_ms;
  return f;
}

// The timed report of one case: every row against cuDNN's best; the headline (our best against
// cuDNN's best) measured again as kRatioRepeats interleaved repeats, median and min-max.
static void contest_report(Ctx& cx, const ContestCase& k, dnn::ConvDesc& dbest, std::vector<Entry>& entries,
                           const std::vector<float>& ycudnn) {
  const ConvShape& s = k.s;
  const std::string& label = k.label;
  const Floors fl = k.memory_bound ? floors(cx, k) : Floors{};
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.t.median_ms < b.t.median_ms; });
  const Entry& win = entries.front();
  win.c->prepare(s, k.w.as<float>());  // per shape and filter; a later contender may have set its own (not timed)
  const timing::Interleaved r =
      timing::interleaved([&] { win.c->run(s, k.x.as<float>(), k.w.as<float>(), k.y.as<float>(), 0); },
                          [&] { run_cudnn_best(cx, k, dbest); }, cx.topt, kRatioRepeats);
  const verify::Check again =
      verify::compare("contest " + label + " " + win.c->name + " after the interleaved timing vs cuDNN",
                      to_host(k.y.as<float>(), k.dy.count()).data(), ycudnn.data(), k.dy.count(), k.tol);
  cx.res->add_quiet(again);
  if (!again.passed) verify::print(again);
  const std::string ref_name = "cuDNN best (" + config_name(k.best_cfg) + " " + k.best.algo.name + ")";
  auto bench_row = [&](const std::string& name, const timing::Stats& t, json::Value extra,
                       const timing::Interleaved* vs) {
    results::Bench b;
    b.name = "contest " + label + " " + name;
    b.dtype = "fp32";
    b.shape = shape_vec(s);
    b.ms = t.median_ms, b.min_ms = t.min_ms, b.max_ms = t.max_ms, b.reps = t.reps;
    if (k.memory_bound)
      b.gbps = s.min_bytes() / (t.median_ms * 1e-3) / 1e9, b.peak = cx.copy_peak,
      b.peak_name = "measured copy bandwidth";
    else
      b.tflops = s.flops() / (t.median_ms * 1e-3) / 1e12, b.peak = cx.fp32_peak,
      b.peak_name = "measured FP32 FMA ceiling";
    b.ref = ref_name;
    b.ref_ms = vs ? vs->ref.median_ms : k.best.t.median_ms;
    if (vs)
      b.ref_repeats = vs->repeats, b.pct_of_ref_median = vs->pct_median, b.pct_of_ref_min = vs->pct_min,
      b.pct_of_ref_max = vs->pct_max;
    b.extra = extra;
    cx.res->add(b);
    std::printf("  %-36s %10.1f %10.1f %9.2fx %9.1f%%", name.c_str(), b.ms * 1e3, b.rate(), b.pct_of_ref() / 100,
                b.pct_of_peak());
    if (vs) std::printf("  (%.2f-%.2f, %d interleaved)", vs->pct_min / 100, vs->pct_max / 100, vs->repeats);
    std::printf("\n");
  };
  std::printf("  %-36s %10s %10s %10s %10s\n", "", "time us", k.memory_bound ? "GB/s" : "TFLOP/s", "vs cuDNN",
              "% of peak");
  json::Value ce = json::Value::object();
  ce["algo"] = k.best.algo.name;
  ce["config"] = config_name(k.best_cfg);
  ce["workspace_bytes"] = (long long)k.best.algo.workspace;
  ce["all_retimed"] = k.cudnn_all;
  bench_row("cudnn_best [" + k.best.algo.name + ", " + dnn::layout_name(k.best_cfg.fmt) + "]", k.best.t, ce, nullptr);
  if (k.memory_bound) {
    timing::Stats tm{};
    tm.median_ms = tm.min_ms = tm.max_ms = fl.memcpy_ms;
    json::Value e = json::Value::object();
    e["note"] = "cudaMemcpy of x into y: the same bytes, nothing computed";
    bench_row("copy_floor [cudaMemcpy same bytes]", tm, e, nullptr);
    tm.median_ms = tm.min_ms = tm.max_ms = fl.launch_ms;
    e["note"] = "an empty kernel: the fixed cost of one launch, timed the same way";
    bench_row("launch_floor [empty kernel]", tm, e, nullptr);
  }
  for (const Entry& e : entries) {
    json::Value x = json::Value::object();
    if (&e == &win)
      x["headline"] = "our best against cuDNN's best: interleaved repeats, the ratio's median and min-max";
    bench_row(e.c->name, &e == &win ? r.ours : e.t, x, &e == &win ? &r : nullptr);
  }
  const double speedup = r.pct_median / 100;
  const char* winner = speedup > 1.0 ? "custom" : "cuDNN";
  std::printf("  => %s wins: our best (%s) %.1f us, cuDNN's best (%s) %.1f us: %.2fx (%.2f-%.2f over %d interleaved)\n",
              winner, win.c->name.c_str(), r.ours.median_ms * 1e3, k.best.algo.name.c_str(), r.ref.median_ms * 1e3,
              speedup > 1 ? speedup : 1 / speedup, r.pct_min / 100, r.pct_max / 100, r.repeats);
  json::Value j = json::Value::object();
  j["case"] = label;
  j["shape"] = s.str();
  j["custom"] = win.c->name;
  j["custom_ms"] = r.ours.median_ms;
  j["cudnn"] = k.best.algo.name + " (" + config_name(k.best_cfg) + ")";
  j["cudnn_ms"] = r.ref.median_ms;
  j["winner"] = winner;
  j["custom_speedup"] = speedup;  // cuDNN time / ours: the median of the interleaved repeats
  j["custom_speedup_min"] = r.pct_min / 100;
  j["custom_speedup_max"] = r.pct_max / 100;
  j["ratio_repeats"] = r.repeats;
  if (k.memory_bound) {
    j["floor_ms"] = fl.floor_ms;
    j["memcpy_same_bytes_ms"] = fl.memcpy_ms;
    j["empty_kernel_ms"] = fl.launch_ms;
    j["custom_pct_of_floor"] = 100.0 * fl.floor_ms / r.ours.median_ms;
    j["custom_pct_of_memcpy"] = 100.0 * fl.memcpy_ms / r.ours.median_ms;
    std::printf(
        "     memory floor (fewest bytes at the measured %.0f GB/s): %.1f us -> our best is at %.0f%% of it; "
        "a cudaMemcpy of the same bytes takes %.1f us (%.0f%%); an empty kernel %.1f us\n",
        cx.copy_peak, fl.floor_ms * 1e3, 100.0 * fl.floor_ms / r.ours.median_ms, fl.memcpy_ms * 1e3,
        100.0 * fl.memcpy_ms / r.ours.median_ms, fl.launch_ms * 1e3);
  }
  cx.contest.push(j);
  cx.table.push_back({label, s.str(), win.c->name, k.best.algo.name + " (" + dnn::layout_name(k.best_cfg.fmt) + ")",
                      winner, r.ours.median_ms, r.ref.median_ms, speedup, r.pct_min / 100, r.pct_max / 100});
}

// One contest case: every contender that supports the shape is checked against the CPU and
// against cuDNN's output (same inputs) before any timing; then cuDNN's best (every algorithm
// re-timed, both layouts where they hold the same bytes) and each contender are timed.
static void contest(Ctx& cx, const std::string& label, const ConvShape& s, std::vector<Custom>& cands) {
  std::printf("\n== contest %s: %s (%.2f GFLOP, at least %.1f MB moved)\n", label.c_str(), s.str().c_str(),
              s.flops() / 1e9, s.min_bytes() / 1e6);
  std::vector<float> hx(s.x_elems()), hw(s.w_elems());
  verify::fill_uniform(hx, *cx.rng);
  verify::fill_uniform(hw, *cx.rng);
  const Dims dy{s.N, s.K, s.P(), s.Q()};
  DeviceBuffer x = upload(hx, {s.N, s.C, s.H, s.W}, kFp32Fma), w = upload(hw, {s.K, s.C, s.R, s.S}, kFp32Fma),
               y(dy.count() * 4), yd(dy.count() * 4);
  const double macs = double(dy.count()) * s.C * s.R * s.S;
  const std::vector<size_t> idx = ref::sample_indices(dy.count(), macs <= 3e8 ? dy.count() : 4096, cx.rng->next());
  ContestCase k{label,
                s,
                s.C == 1 && s.K == 1,
                dy,
                x,
                w,
                y,
                yd,
                idx,
                reference(s, Dir::Fwd, hx, hw, idx),
                tol_for(kFp32Fma, double(s.C) * s.R * s.S)};
  cudnn_best(cx, k);
  // cuDNN's output (its best algorithm when timed, else Find's first) is the second reference.
  dnn::ConvDesc dbest(s, k.best_cfg.dt, k.best_cfg.fmt, k.best_cfg.math);
  poison(yd.as(), yd.bytes());
  run_cudnn_best(cx, k, dbest);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> ycudnn = download(yd, dy, kFp32Fma);

  // Each contender: supported? right (vs CPU and vs cuDNN)? then timed and re-checked.
  std::vector<Entry> entries;
  auto add = [&](const verify::Check& v) {
    cx.res->add_quiet(v);
    if (!v.passed) verify::print(v);
    return v.passed;
  };
  for (const Custom& c : cands) {
    std::string why;
    if (!c.supports(s, &why)) continue;
    c.prepare(s, w.as<float>());
    poison(y.as(), y.bytes());
    c.run(s, x.as<float>(), w.as<float>(), y.as<float>(), 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> out = to_host(y.as<float>(), dy.count());
    const bool ok1 = add(verify::compare_at("contest " + label + " " + c.name + " vs CPU", out, k.idx, k.want, k.tol));
    const bool ok2 = add(
        verify::compare("contest " + label + " " + c.name + " vs cuDNN", out.data(), ycudnn.data(), out.size(), k.tol));
    if (!ok1 || !ok2 || !cx.timed) continue;
    entries.push_back(
        {&c, timing::time_gpu([&] { c.run(s, x.as<float>(), w.as<float>(), y.as<float>(), 0); }, cx.topt)});
    add(verify::compare("contest " + label + " " + c.name + " after timing vs cuDNN",
                        to_host(y.as<float>(), dy.count()).data(), ycudnn.data(), dy.count(), k.tol));
  }
  std::printf(
      "  checked: %zu contenders and every cuDNN algorithm that ran, against the CPU (%zu outputs) and each other\n",
      entries.size(), k.idx.size());
  if (!cx.timed || entries.empty() || !std::isfinite(k.best.t.median_ms)) return;
  contest_report(cx, k, dbest, entries, ycudnn);
}
