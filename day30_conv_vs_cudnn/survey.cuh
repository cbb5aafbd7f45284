// day30_conv_vs_cudnn/survey.cuh: parts 1 and 2, descriptors read back, and the algorithm survey:
// every algorithm of one direction as cuDNN's heuristic ranks it and as Find measures it, each one
// that runs checked against the CPU and re-timed with our harness.
#pragma once

#include "conv_ctx.cuh"

// ---- 1. Descriptors, read back -------------------------------------------------------------------

// Builds the descriptors of one problem and prints what cuDNN stored: the element type, the
// sizes and the strides (which is all "layout" means: NHWC is NCHW with other strides).
static void show_descriptors(Ctx& cx, const ConvShape& s, const Config& c) {
  dnn::ConvDesc d(s, c.dt, c.fmt, c.math);
  std::printf("  %s, %s:\n", s.str().c_str(), config_name(c).c_str());
  if (!d.ok()) {
    std::printf("    cuDNN refused it: %s\n", d.error.c_str());
    return;
  }
  json::Value j = json::Value::object();
  j["shape"] = s.str();
  j["config"] = config_name(c);
  for (auto [name, desc] : {std::pair<const char*, cudnnTensorDescriptor_t>{"x", d.x}, {"y", d.y}}) {
    cudnnDataType_t t;
    int n, ch, h, w, sn, sc, sh, sw;
    CUDNN_CHECK(cudnnGetTensor4dDescriptor(desc, &t, &n, &ch, &h, &w, &sn, &sc, &sh, &sw));
    std::printf("    %s: %s  dims N=%d C=%d H=%d W=%d  strides %d,%d,%d,%d (elements)\n", name, dnn::dtype_name(t), n,
                ch, h, w, sn, sc, sh, sw);
    json::Value dims = json::Value::array();
    for (int v : {n, ch, h, w, sn, sc, sh, sw}) dims.push(v);
    j[name] = dims;
  }
  int pad_h, pad_w, u, v, dh, dw;
  cudnnConvolutionMode_t mode;
  cudnnDataType_t ct;
  CUDNN_CHECK(cudnnGetConvolution2dDescriptor(d.conv, &pad_h, &pad_w, &u, &v, &dh, &dw, &mode, &ct));
  std::printf(
      "    conv: pad %d,%d stride %d,%d dilation %d,%d %s, compute type %s; output from "
      "cudnnGetConvolution2dForwardOutputDim: %dx%dx%dx%d\n",
      pad_h, pad_w, u, v, dh, dw, mode == CUDNN_CROSS_CORRELATION ? "CROSS_CORRELATION" : "CONVOLUTION",
      dnn::dtype_name(ct), s.N, s.K, s.P(), s.Q());
  cx.descriptors.push(j);
}

// One algorithm's line of the survey table.
struct Line {
  std::string name;
  int heur_rank = -1, find_rank = -1;
  const dnn::AlgoPerf* f = nullptr;
  std::string status;
  verify::Check check;
  bool checked = false;
  timing::Stats t;
  bool timed = false;
};

// One survey case: the problem, its operands on the GPU and the CPU reference at `idx`.
struct SurveyCase {
  const ConvShape& s;
  const Config& c;
  Dir dir;
  dnn::ConvDesc& d;
  std::string title;
  DirTensors t;
  DeviceBuffer& out;
  dnn::Operands ops;
  const std::vector<size_t>& idx;
  const std::vector<double>& want;
  verify::Tol tol;
  size_t offer;
  void* wsp;
};

// Every algorithm Find or the heuristic named: each one that ran has its output checked against the CPU.
static std::vector<Line> survey_lines(Ctx& cx, const SurveyCase& k, const std::vector<dnn::AlgoPerf>& heur,
                                      const std::vector<dnn::AlgoPerf>& found) {
  const Config& c = k.c;
  const Dir dir = k.dir;
  dnn::ConvDesc& d = k.d;
  DeviceBuffer& out = k.out;
  const DirTensors& t = k.t;
  const size_t offer = k.offer;
  // One line per entry of Find's list (cuDNN may list an algorithm twice, once per math type),
  // then the algorithms only the heuristic mentioned.
  std::vector<Line> lines;
  auto heur_rank_of = [&](int algo, cudnnMathType_t math, bool match_math) {
    for (const auto& h : heur)
      if (h.algo == algo && (!match_math || h.math == math)) return h.rank;
    return -1;
  };
  for (const auto& f : found) {
    Line l;
    l.name = f.name;
    l.f = &f;
    l.find_rank = f.rank;
    l.heur_rank = heur_rank_of(f.algo, f.math, true);
    if (l.heur_rank < 0) l.heur_rank = heur_rank_of(f.algo, f.math, false);
    if (!f.ok()) {
      size_t need = 0;
      const bool sized = dnn::workspace_size(cx.dnn, d, dir, f.algo, &need) == CUDNN_STATUS_SUCCESS;
      l.status = std::string(cudnnGetErrorString(f.status)) +
                 (sized && need > offer ? " (needs " + std::to_string(need >> 20) + " MiB workspace, offered " +
                                              std::to_string(offer >> 20) + " MiB)"
                                        : "");
    } else {
      poison(out.as(), out.bytes());
      const cudnnStatus_t st = dnn::run(cx.dnn, d, dir, f.algo, f.math, k.ops, k.wsp, f.workspace);
      CUDA_CHECK(cudaDeviceSynchronize());
      if (st != CUDNN_STATUS_SUCCESS) {
        l.status = "run failed: " + dnn::status_text(st);
      } else {
        // Winograd and FFT compute in a transformed domain, where rounding grows with the tile:
        // they get the TF32-sized tolerance even in FMA math (their errors are in the table).
        const bool transform = l.name.find("WINOGRAD") != std::string::npos || l.name.find("FFT") != std::string::npos;
        verify::Tol tl = k.tol;
        if (transform && c.dt == CUDNN_DATA_FLOAT && c.math == CUDNN_FMA_MATH)
          tl = verify::kTf32.scaled(std::sqrt(t.reduction)), tl.precision = "fp32 transform-domain";
        l.check = verify::compare_at(k.title + " " + l.name + " " + dnn::math_name(f.math) + " vs CPU",
                                     download(out, t.out, c), k.idx, k.want, tl);
        l.checked = true;
        cx.res->add_quiet(l.check);
        if (!l.check.passed) verify::print(l.check);
      }
    }
    lines.push_back(l);
  }
  for (const auto& h : heur) {
    bool listed = false;
    for (const auto& f : found) listed = listed || f.algo == h.algo;
    if (listed) continue;
    Line l;
    l.name = h.name;
    l.heur_rank = h.rank;
    l.status = h.ok() ? "not run by Find" : cudnnGetErrorString(h.status);
    lines.push_back(l);
  }
  std::stable_sort(lines.begin(), lines.end(), [&](const Line& a, const Line& b) {
    const int ia = a.f ? a.f->algo : 99, ib = b.f ? b.f->algo : 99;
    return ia < ib;
  });

  return lines;
}

// The survey's table: printed, into the results (one bench row per timed algorithm); returns the per-algorithm json.
static json::Value survey_table(Ctx& cx, const SurveyCase& k, const std::vector<Line>& lines, double best_ms) {
  const ConvShape& s = k.s;
  const Config& c = k.c;
  const Dir dir = k.dir;
  std::string peak_name;
  const double peak = peak_for(cx, c, &peak_name);
  const double flops = s.flops();  // the same 2*N*K*P*Q*C*R*S for all three directions
  std::printf("  %-22s %5s %5s %10s %10s %9s %8s %-10s %s\n", "algorithm", "heur#", "find#", "Find us", "ours us",
              "TFLOP/s", "ws MiB", "math", "status / check against the CPU");
  json::Value algos = json::Value::array();
  for (const auto& l : lines) {
    const bool ran = l.f && l.f->ok();
    char find_us[32] = "-", our_us[32] = "-", rate[32] = "-", ws[32] = "-";
    if (ran) std::snprintf(find_us, sizeof find_us, "%.1f", l.f->ms * 1e3);
    if (l.timed) std::snprintf(our_us, sizeof our_us, "%.1f", l.t.median_ms * 1e3);
    if (l.timed) std::snprintf(rate, sizeof rate, "%.2f", flops / (l.t.median_ms * 1e-3) / 1e12);
    if (ran) std::snprintf(ws, sizeof ws, "%.1f", l.f->workspace / 1048576.0);
    std::string verdict = l.status;
    if (l.checked) {
      char b[96];
      std::snprintf(b, sizeof b, "%s rel_l2 %.1e max_abs %.1e", l.check.passed ? "PASS" : "FAIL", l.check.rel_l2,
                    l.check.max_abs_err);
      verdict = b;
    }
    std::printf("  %-22s %5s %5s %10s %10s %9s %8s %-10s %s\n", l.name.c_str(),
                l.heur_rank < 0 ? "-" : std::to_string(l.heur_rank).c_str(),
                l.find_rank < 0 ? "-" : std::to_string(l.find_rank).c_str(), find_us, our_us, rate, ws,
                ran ? dnn::math_name(l.f->math) : "-", verdict.c_str());
    json::Value j = json::Value::object();
    j["algo"] = l.name;
    j["heuristic_rank"] = l.heur_rank;
    j["find_rank"] = l.find_rank;
    j["find_ms"] = ran ? json::Value(double(l.f->ms)) : json::Value();
    j["ms"] = l.timed ? json::Value(l.t.median_ms) : json::Value();
    j["workspace_bytes"] = ran ? json::Value((long long)l.f->workspace) : json::Value();
    j["math"] = ran ? dnn::math_name(l.f->math) : "";
    j["status"] = l.checked ? (l.check.passed ? "PASS" : "FAIL") : l.status;
    if (l.checked) j["rel_l2"] = l.check.rel_l2, j["max_abs_err"] = l.check.max_abs_err;
    algos.push(j);
    if (l.timed) {
      results::Bench r;
      r.name = std::string(dir == Dir::Fwd       ? "fwd"
                           : dir == Dir::BwdData ? "bwd_data"
                                                 : "bwd_filter") +
               " " + config_name(c) + " " + l.name + " [" + dnn::math_name(l.f->math) + "]";
      r.dtype = dnn::dtype_name(c.dt);
      r.shape = shape_vec(s);
      r.ms = l.t.median_ms, r.min_ms = l.t.min_ms, r.max_ms = l.t.max_ms, r.reps = l.t.reps;
      r.tflops = flops / (l.t.median_ms * 1e-3) / 1e12;
      r.peak = peak, r.peak_name = peak_name;
      r.ref = "fastest cuDNN algorithm, same direction and config", r.ref_ms = best_ms;
      r.extra = j;
      cx.res->add(r);
    }
  }
  if (cx.timed && std::isfinite(best_ms))
    std::printf("  fastest: %.1f us = %.1f TFLOP/s = %.0f%% of the %s (%.1f TFLOP/s)\n", best_ms * 1e3,
                flops / (best_ms * 1e-3) / 1e12, 100.0 * flops / (best_ms * 1e-3) / 1e12 / peak, peak_name.c_str(),
                peak);
  return algos;
}

static void survey(Ctx& cx, const ConvShape& s, const Config& c, Dir dir) {
  const std::string title = std::string(dnn::dir_name(dir)) + " " + config_name(c) + " " + s.str();
  std::printf("\n== %s\n", title.c_str());
  dnn::ConvDesc d(s, c.dt, c.fmt, c.math);
  json::Value row = json::Value::object();
  row["direction"] = dnn::dir_name(dir);
  row["config"] = config_name(c);
  row["shape"] = s.str();
  // How many algorithms this direction has (CUDNN_CONVOLUTION_*_ALGO_COUNT), whatever this shape supports.
  row["algo_count"] = dnn::algo_count(dir);
  if (!d.ok()) {
    std::printf("  cuDNN refused the descriptors: %s (skipped; going on)\n", d.error.c_str());
    row["refused"] = d.error;
    cx.survey.push(row);
    return;
  }
  // Fresh random operands, rounded to the storage type; the reference at sampled indices.
  const DirTensors t = tensors_of(s, dir);
  std::vector<float> ha(t.a.count()), hb(t.b.count());
  verify::fill_uniform(ha, *cx.rng);
  verify::fill_uniform(hb, *cx.rng);
  round_to(ha, c.dt);
  round_to(hb, c.dt);
  const double cost = t.reduction;  // multiply-adds per result
  const size_t total = t.out.count();
  const size_t count =
      double(total) * cost <= 3e8 ? total : std::min<size_t>(4096, std::max<size_t>(512, size_t(3e8 / cost)));
  const std::vector<size_t> idx = ref::sample_indices(total, count, cx.rng->next());
  const std::vector<double> want = reference(s, dir, ha, hb, idx);
  const verify::Tol tol = tol_for(c, t.reduction);

  DeviceBuffer a = upload(ha, t.a, c), b = upload(hb, t.b, c), out(total * dnn::dtype_bytes(c.dt));
  const dnn::Operands ops{a.as(), b.as(), out.as()};

  // The heuristic's ranking (instant), then Find's (runs each algorithm once).
  const std::vector<dnn::AlgoPerf> heur = dnn::heuristic(cx.dnn, d, dir);
  size_t offer = 0;
  for (const auto& h : heur)
    if (h.ok() && h.workspace <= cx.ws_limit) offer = std::max(offer, h.workspace);
  void* wsp = offer ? cx.ws.get(offer) : nullptr;
  poison(out.as(), out.bytes());
  const std::vector<dnn::AlgoPerf> found = dnn::find(cx.dnn, d, dir, ops, wsp, offer);
  // The workspace cuDNN's GEMM algorithm asks for here (the one that materialises im2col would need
  // C*R*S*P*Q elements per image; the number says whether this one does).
  if (dir == Dir::Fwd) {
    size_t gemm_ws = 0;
    if (dnn::workspace_size(cx.dnn, d, dir, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &gemm_ws) == CUDNN_STATUS_SUCCESS)
      row["gemm_workspace_bytes"] = (long long)gemm_ws;
    else
      row["gemm_workspace_bytes"] = json::Value();  // GEMM not supported on this shape/config
    row["im2col_matrix_bytes"] = (long long)(double(s.N) * s.C * s.R * s.S * s.P() * s.Q() * dnn::dtype_bytes(c.dt));
  }

  const SurveyCase k{s, c, dir, d, title, t, out, ops, idx, want, tol, offer, wsp};
  std::vector<Line> lines = survey_lines(cx, k, heur, found);

  // Re-time every algorithm that ran (cuDNN's Find ran each only once).
  double best_ms = NAN;
  if (cx.timed) {
    const std::vector<dnn::Timed> timed = dnn::retime(cx.dnn, d, dir, found, ops, cx.ws, offer, cx.topt);
    for (auto& l : lines)
      for (const auto& tm : timed)
        if (l.f && tm.algo.rank == l.f->rank) l.t = tm.t, l.timed = true;
    if (!timed.empty()) best_ms = timed.front().t.median_ms;
    // The fastest, run once more and checked again (the timing loop reused its buffers).
    if (!timed.empty()) {
      poison(out.as(), out.bytes());
      const dnn::AlgoPerf& f = timed.front().algo;
      CUDNN_CHECK(dnn::run(cx.dnn, d, dir, f.algo, f.math, ops, wsp, f.workspace));
      cx.res->add_quiet(
          verify::compare_at(title + " fastest " + f.name + " after timing", download(out, t.out, c), idx, want, tol));
    }
  }

  row["algorithms"] = survey_table(cx, k, lines, best_ms);
  row["workspace_offered_bytes"] = (long long)offer;
  row["checked_elements"] = (long long)idx.size();
  cx.survey.push(row);
}
