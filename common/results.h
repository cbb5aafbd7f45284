// common/results.h: the results file every program can write with `--json PATH`.
//
// Host-only. Layout (one file per program run, results/<gpu>/<lesson>.json):
//   {
//     "lesson": "day10_matmul", "program": "matmul", "mode": "bench", "args": "...",
//     "env":    { gpu, compute capability, SMs, clocks, driver, CUDA, cuBLAS, cuDNN, date },
//     "checks": [ { name, passed, max_abs_err, max_rel_err, rel_l2, atol, rtol, precision, n } ],
//     "bench":  [ { name, dtype, shape, ms, tflops | gbps | tokens_per_s,
//                   ref, ref_ms, pct_of_ref, peak, peak_name, pct_of_peak } ],
//     "passed": true
//   }
// pct_of_ref = 100 * baseline time / this time (above 100: faster than the baseline).
// pct_of_peak = achieved rate / ceiling * 100, the ceiling named by peak_name.
// "{gpu}" in PATH is replaced by the GPU's slug, e.g. "nvidia-h200".
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "json.h"
#include "verify.h"

namespace results {

struct Bench {
  std::string name;              // "05_2d_blocktiling"
  std::string dtype;             // "fp32", "bf16", ...
  std::vector<long long> shape;  // e.g. {M, N, K}
  double ms = NAN;               // median time
  double min_ms = NAN, max_ms = NAN;
  int reps = 0;
  double tflops = NAN, gbps = NAN, tokens_per_s = NAN;
  std::string ref;        // the baseline's name ("cuBLAS SGEMM")
  double ref_ms = NAN;    // the baseline's median time on the same shape
  double peak = NAN;      // ceiling, same unit as the rate (TFLOP/s or GB/s)
  std::string peak_name;  // where the ceiling comes from
  json::Value extra;      // anything lesson-specific (algorithm picked, workspace, ...)

  double rate() const { return std::isfinite(tflops) ? tflops : gbps; }
  // A headline ratio measured as `ref_repeats` interleaved repeats (timing::interleaved): its median
  // is pct_of_ref, and the spread min..max is kept. Zero repeats: one measurement of each side.
  int ref_repeats = 0;
  double pct_of_ref_min = NAN, pct_of_ref_max = NAN, pct_of_ref_median = NAN;
  double pct_of_ref() const { return ref_repeats > 0 ? pct_of_ref_median : 100.0 * ref_ms / ms; }
  double pct_of_peak() const { return 100.0 * rate() / peak; }
};

inline json::Value to_json(const verify::Check& c) {
  json::Value v = json::Value::object();
  v["name"] = c.name;
  v["passed"] = c.passed;
  v["n"] = (long long)c.n;
  v["n_bad"] = (long long)c.n_bad;
  v["max_abs_err"] = c.max_abs_err;
  v["max_rel_err"] = c.max_rel_err;
  v["rel_l2"] = c.rel_l2;
  v["atol"] = c.tol.atol;
  v["rtol"] = c.tol.rtol;
  v["tol"] = c.tol.precision;
  if (!c.note.empty()) v["note"] = c.note;
  return v;
}

inline json::Value to_json(const Bench& b) {
  json::Value v = json::Value::object();
  v["name"] = b.name;
  v["dtype"] = b.dtype;
  json::Value shape = json::Value::array();
  for (auto d : b.shape) shape.push(d);
  v["shape"] = shape;
  v["ms"] = b.ms;
  v["min_ms"] = b.min_ms;
  v["max_ms"] = b.max_ms;
  v["reps"] = b.reps;
  if (std::isfinite(b.tflops)) v["tflops"] = b.tflops;
  if (std::isfinite(b.gbps)) v["gbps"] = b.gbps;
  if (std::isfinite(b.tokens_per_s)) v["tokens_per_s"] = b.tokens_per_s;
  if (!b.ref.empty()) {
    v["ref"] = b.ref;
    v["ref_ms"] = b.ref_ms;
    v["pct_of_ref"] = b.pct_of_ref();
    if (b.ref_repeats > 0) {
      v["pct_of_ref_min"] = b.pct_of_ref_min;
      v["pct_of_ref_max"] = b.pct_of_ref_max;
      v["ref_repeats"] = b.ref_repeats;
    }
  }
  if (std::isfinite(b.peak)) {
    v["peak"] = b.peak;
    v["peak_name"] = b.peak_name;
    v["pct_of_peak"] = b.pct_of_peak();
  }
  if (b.extra.kind() != json::Value::Null) v["extra"] = b.extra;
  return v;
}

// GPU name -> path-friendly slug: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3".
inline std::string slug(const std::string& name) {
  std::string s;
  for (char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
      s += c;
    else if (c >= 'A' && c <= 'Z')
      s += char(c - 'A' + 'a');
    else if (!s.empty() && s.back() != '-')
      s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "unknown-gpu" : s;
}

// Output folders are checked before any GPU work, so a bad path costs one line, not a whole
// benchmark: `--json` (its folder up to the "{gpu}" part) and `--save-npy` must be creatable
// and writable. Anything else: one line and exit 2.
inline void require_writable_dir(const std::string& prog, const std::string& flag, const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path d = dir.empty() ? std::filesystem::path(".") : std::filesystem::path(dir);
  std::filesystem::create_directories(d, ec);
  if (!std::filesystem::is_directory(d, ec))
    cli::usage_error(prog, flag + ": cannot create folder '" + d.string() + "'");
  const std::filesystem::path probe = d / (".write_test_" + std::to_string(uint64_t(std::hash<std::string>{}(prog))));
  FILE* f = std::fopen(probe.string().c_str(), "w");
  if (!f) cli::usage_error(prog, flag + ": folder '" + d.string() + "' is not writable");
  std::fclose(f);
  std::filesystem::remove(probe, ec);
}

// An output file, checked before any GPU work so that a bad path costs one line, not a training
// run: an existing regular file that can be opened for writing, or a new name in an existing,
// writable folder (created first when create_dirs). A folder, a device such as /dev/full or
// /proc/x, or a missing or unwritable folder: one line and exit 2. Nothing is truncated.
inline void require_writable_file(const std::string& prog, const std::string& flag, const std::string& path,
                                  bool create_dirs = false) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) cli::usage_error(prog, flag + " needs a file name");
  const fs::path p(path);
  if (fs::exists(p, ec)) {
    if (fs::is_directory(p, ec)) cli::usage_error(prog, flag + ": '" + path + "' is a folder, not a file");
    if (!fs::is_regular_file(p, ec)) cli::usage_error(prog, flag + ": '" + path + "' is not a regular file");
    FILE* f = std::fopen(path.c_str(), "a");  // "a": opens for writing without truncating
    if (!f) cli::usage_error(prog, flag + ": '" + path + "' is not writable");
    std::fclose(f);
    return;
  }
  if (!p.has_filename() || p.filename() == "." || p.filename() == "..")
    cli::usage_error(prog, flag + ": '" + path + "' names no file");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!create_dirs && !fs::is_directory(dir, ec))
    cli::usage_error(prog, flag + ": folder '" + dir.string() + "' does not exist");
  require_writable_dir(prog, flag, dir.string());
}

// An input file: it must exist, be a regular file (not a folder or a device such as /dev/zero),
// be readable, and hold at most max_bytes. Returns its size.
inline uint64_t require_readable_file(const std::string& prog, const std::string& flag, const std::string& path,
                                      uint64_t max_bytes = UINT64_MAX) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) cli::usage_error(prog, flag + " needs a file name");
  if (!fs::exists(path, ec)) cli::usage_error(prog, flag + ": '" + path + "' does not exist");
  if (fs::is_directory(path, ec)) cli::usage_error(prog, flag + ": '" + path + "' is a folder, not a file");
  if (!fs::is_regular_file(path, ec)) cli::usage_error(prog, flag + ": '" + path + "' is not a regular file");
  const uint64_t size = fs::file_size(path, ec);
  if (ec) cli::usage_error(prog, flag + ": cannot read the size of '" + path + "'");
  if (size > max_bytes)
    cli::usage_error(prog, flag + ": '" + path + "' holds " + std::to_string(size) + " bytes, more than the " +
                               std::to_string(max_bytes) + " this program reads");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) cli::usage_error(prog, flag + ": '" + path + "' is not readable");
  std::fclose(f);
  return size;
}

// For `--json PATH`: the file itself is judged now (a folder, /dev/full or another non-regular file is
// refused; a new name in a creatable, writable folder is fine). With "{gpu}" in PATH, only the part
// before it can be judged before the GPU's name is known: its folder must be creatable and writable,
// and the name after the last '/' must be a plain file name.
inline void require_writable_json(const std::string& prog, const std::string& path_template) {
  if (path_template.empty()) return;
  const size_t g = path_template.find("{gpu}");
  if (g == std::string::npos) return require_writable_file(prog, "--json", path_template, true);
  const size_t slash = path_template.rfind('/');
  const std::string name = slash == std::string::npos ? path_template : path_template.substr(slash + 1);
  if (name.empty() || name == "." || name == "..")
    cli::usage_error(prog, "--json: '" + path_template + "' names no file");
  // The folder up to "{gpu}": "results/{gpu}/x.json" -> "results", "out/run-{gpu}.json" -> "out".
  require_writable_dir(prog, "--json", std::filesystem::path(path_template.substr(0, g) + "x").parent_path().string());
}

// The standard flags' output paths (--json, --save-npy), checked before any GPU work.
inline void require_outputs(const std::string& prog, const cli::Standard& st) {
  if (!st.npy_dir.empty()) require_writable_dir(prog, "--save-npy", st.npy_dir);
  require_writable_json(prog, st.json);
}

class Results {
 public:
  Results(std::string lesson, std::string program) : lesson_(std::move(lesson)), program_(std::move(program)) {}
  const std::string& program() const { return program_; }

  json::Value env = json::Value::object();     // common/env.cuh: collect_env()
  json::Value config = json::Value::object();  // the arguments this run used
  // Top-level objects a lesson adds to its results file beside env/config/checks/bench (e.g. day50's
  // "quality": the default training run's outcome), written in the order added.
  std::vector<std::pair<std::string, json::Value>> top;
  // Performance goals a benchmark sets itself (not checks: a missed goal is reported, not failed):
  // entries {goal, value, met}, written only when there are some.
  json::Value goals = json::Value::array();
  void add_goal(const std::string& goal, double value, bool met) {
    json::Value g = json::Value::object();
    g["goal"] = goal, g["value"] = value, g["met"] = met;
    goals.push(g);
    std::printf("  %-7s %s: %.3g\n", met ? "met" : "MISSED", goal.c_str(), value);
  }
  std::string mode = "run";

  // Records a check and prints its line.
  const verify::Check& add(const verify::Check& c) {
    verify::print(c);
    checks_.push_back(c);
    return checks_.back();
  }
  // Records a check without printing (for checks whose passes would flood a table).
  void add_quiet(const verify::Check& c) { checks_.push_back(c); }
  // Records a benchmark row, with a clock reading taken as it arrives: a row measured while the GPU
  // protected itself (HW slowdown, HW thermal, HW power brake) carries extra.unreliable = the cause.
  void add(const Bench& b) {
    bench_.push_back(b);
    const std::string why = unreliable_in(sample_clocks());
    if (why.empty()) return;
    json::Value& extra = bench_.back().extra;
    if (extra.kind() != json::Value::Null && extra.kind() != json::Value::Object) {
      json::Value wrapped = json::Value::object();
      wrapped["value"] = extra;
      extra = wrapped;
    }
    extra["unreliable"] = why;
  }

  // The GPU's clocks and throttle state (common/clocks.h). env::begin installs a sampler that reads
  // NVML and returns one reading as clocks::to_json does (Null where there is no NVML), so this file
  // stays host-only. Readings are taken at env::begin (env.clocks_begin), at every add(Bench) and at
  // finish (env.clocks_end); any that shows a throttle makes throttled() say which.
  void set_clock_sampler(std::function<json::Value()> sampler) { sampler_ = std::move(sampler); }
  json::Value sample_clocks() {
    if (!sampler_) return json::Value();
    json::Value s = sampler_();
    const json::Value* why = s.find("unreliable");
    if (why && why->kind() == json::Value::String) {
      clocks_known_ = true;
      const std::string& w = why->str();
      if (!w.empty() && throttled_.find(w) == std::string::npos) throttled_ += (throttled_.empty() ? "" : "; ") + w;
    }
    return s;
  }
  // "" when every reading was clean, e.g. "HW power brake active" when one was not; "unknown" when
  // no reading could say (no sampler, no NVML, or a GPU that does not report its throttle reasons).
  std::string throttled() const { return clocks_known_ ? throttled_ : "unknown"; }

  const std::vector<verify::Check>& checks() const { return checks_; }
  const std::vector<Bench>& bench() const { return bench_; }
  int failed() const {
    int f = 0;
    for (auto& c : checks_) f += !c.passed;
    return f;
  }
  // Pass only if something was checked and nothing failed: a run with no checks proves nothing.
  bool passed() const { return !checks_.empty() && failed() == 0; }
  int exit_code() const { return passed() ? 0 : 1; }

  json::Value to_json() const {
    json::Value v = json::Value::object();
    v["lesson"] = lesson_;
    v["program"] = program_;
    v["mode"] = mode;
    v["config"] = config;
    v["env"] = env;
    json::Value cs = json::Value::array();
    for (auto& c : checks_) cs.push(results::to_json(c));
    v["checks"] = cs;
    json::Value bs = json::Value::array();
    for (auto& b : bench_) bs.push(results::to_json(b));
    v["bench"] = bs;
    if (goals.size()) v["goals"] = goals;
    for (const auto& kv : top) v[kv.first] = kv.second;
    if (clocks_known_) v["throttled"] = throttled_;
    v["passed"] = passed();
    return v;
  }

  // Writes the file (creating folders); returns the final path. Throws on I/O failure.
  std::string write(const std::string& path_template) const {
    std::string path = path_template;
    const json::Value* s = env.find("gpu_slug");
    const std::string gpu = s ? s->str() : "unknown-gpu";
    for (size_t p; (p = path.find("{gpu}")) != std::string::npos;) path.replace(p, 5, gpu);
    std::filesystem::path fp(path);
    if (fp.has_parent_path()) std::filesystem::create_directories(fp.parent_path());
    const std::string text = to_json().dump();
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write results file '" + path + "'");
    bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) throw std::runtime_error("write failed for '" + path + "'");
    return path;
  }

  // The end of every program: a last clock reading (env.clocks_end), write the results file if asked
  // (an unwritable path is a usage error), print the summary line, and return the exit code (0 pass,
  // 1 a check failed).
  int finish(const std::string& prog, const std::string& json_path) {
    if (sampler_) env["clocks_end"] = sample_clocks();
    std::printf("\n");
    if (!json_path.empty()) {
      try {
        std::printf("wrote %s\n", write(json_path).c_str());
      } catch (const std::exception& e) { cli::usage_error(prog, std::string("--json: ") + e.what()); }
    }
    print_summary();
    return exit_code();
  }

  // The closing summary every program prints: "RESULT: PASS (12 checks)".
  void print_summary() const {
    if (clocks_known_ && !throttled_.empty()) std::printf("timings unreliable: %s\n", throttled_.c_str());
    if (checks_.empty())
      std::printf("RESULT: FAIL (no checks ran)\n");
    else if (failed())
      std::printf("RESULT: FAIL (%d of %zu checks failed)\n", failed(), checks_.size());
    else
      std::printf("RESULT: PASS (%zu checks)\n", checks_.size());
  }

 private:
  static std::string unreliable_in(const json::Value& sample) {
    const json::Value* why = sample.find("unreliable");
    return why && why->kind() == json::Value::String ? why->str() : std::string();
  }

  std::string lesson_, program_;
  std::vector<verify::Check> checks_;
  std::vector<Bench> bench_;
  std::function<json::Value()> sampler_;
  bool clocks_known_ = false;  // some reading reported the throttle reasons
  std::string throttled_;      // the distinct causes seen, "; "-separated
};

}  // namespace results
