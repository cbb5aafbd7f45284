// common/tests/test_common.cpp: unit tests for the host-only parts of common/.
// Build and run: make -C common/tests && common/tests/build/test_common
// (scripts/run_all.sh does this as part of `make test`; no GPU needed.)
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli.h"
#include "clocks.h"
#include "json.h"
#include "minitest.h"
#include "npy.h"
#include "results.h"
#include "verify.h"

namespace fs = std::filesystem;

// Runs fn in a child process and returns its exit code; the child's stdout/stderr go to
// /dev/null (usage errors print a line we do not want in the test log).
template <class F>
static int exit_code_of(F fn) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) _exit(99);
    fn();
    std::exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int parse(std::vector<std::string> argv_s) {
  std::vector<char*> argv;
  static char prog[] = "prog";
  argv.push_back(prog);
  for (auto& s : argv_s) argv.push_back(&s[0]);
  return exit_code_of([&] {
    cli::Args a(int(argv.size()), argv.data(), "prog", "test");
    a.flag("verify", "v");
    a.integer("n", 10, 1, 1000, "n");
    a.real("x", 0.5, 0.0, 1.0, "x");
    a.int_list("sizes", {1}, 1, 100, "s");
    a.str("json", "", "j");
    a.finish();
  });
}

TEST(parse_int_strict) {
  long long v = 0;
  EXPECT(cli::parse_int("12", v) && v == 12);
  EXPECT(cli::parse_int("-5", v) && v == -5);
  EXPECT(!cli::parse_int("12x", v));
  EXPECT(!cli::parse_int("", v));
  EXPECT(!cli::parse_int("1.5", v));
  EXPECT(!cli::parse_int("99999999999999999999999", v));
}

TEST(parse_double_strict) {
  double d = 0;
  EXPECT(cli::parse_double("1e-3", d) && d == 1e-3);
  EXPECT(!cli::parse_double("nan", d));
  EXPECT(!cli::parse_double("abc", d));
  EXPECT(!cli::parse_double("2.5q", d));
}

TEST(args_values) {
  std::string s1 = "--n", s2 = "7", s3 = "--verify", s4 = "--sizes=3,4,5", s5 = "--x=0.25";
  char prog[] = "prog";
  char* argv[] = {prog, &s1[0], &s2[0], &s3[0], &s4[0], &s5[0]};
  cli::Args a(6, argv, "prog", "t");
  EXPECT(a.flag("verify", "v"));
  EXPECT(!a.flag("bench", "b"));
  EXPECT(a.integer("n", 1, 1, 100, "n") == 7);
  EXPECT(a.integer("m", 42, 1, 100, "m") == 42);
  EXPECT(a.real("x", 0.5, 0, 1, "x") == 0.25);
  auto l = a.int_list("sizes", {}, 1, 10, "s");
  EXPECT(l.size() == 3 && l[0] == 3 && l[2] == 5);
  EXPECT(exit_code_of([&] { a.finish(); }) == 0);
}

TEST(args_exit_codes) {
  EXPECT(parse({}) == cli::kPass);
  EXPECT(parse({"--n", "5", "--verify"}) == cli::kPass);
  EXPECT(parse({"--help"}) == cli::kPass);
  EXPECT(parse({"--bogus"}) == cli::kUsage);
  EXPECT(parse({"stray"}) == cli::kUsage);
  EXPECT(parse({"--n"}) == cli::kUsage);              // missing value
  EXPECT(parse({"--n", "--verify"}) == cli::kUsage);  // value missing before next flag
  EXPECT(parse({"--n", "abc"}) == cli::kUsage);
  EXPECT(parse({"--n", "-3"}) == cli::kUsage);
  EXPECT(parse({"--n", "0"}) == cli::kUsage);
  EXPECT(parse({"--n", "1000000000000"}) == cli::kUsage);
  EXPECT(parse({"--n", "5", "--n", "6"}) == cli::kUsage);
  EXPECT(parse({"--x", "2"}) == cli::kUsage);
  EXPECT(parse({"--x", "nan"}) == cli::kUsage);
  EXPECT(parse({"--sizes", "3,,4"}) == cli::kUsage);
  EXPECT(parse({"--sizes", "3,400"}) == cli::kUsage);
  EXPECT(parse({"--verify=1"}) == cli::kUsage);
  EXPECT(parse({"--json"}) == cli::kUsage);
}

TEST(compare_passes_within_tolerance) {
  std::vector<float> out = {1.0f, 2.0f, -3.0f};
  std::vector<double> ref = {1.0, 2.00001, -3.0};
  auto c = verify::compare("t", out.data(), ref.data(), 3, verify::kFp32);
  EXPECT(c.passed && c.n_bad == 0 && c.max_abs_err > 0 && c.max_abs_err < 2e-5);
}

TEST(compare_catches_nan_inf_and_errors) {
  std::vector<double> ref = {1.0, 2.0, 3.0, 4.0};
  std::vector<float> nan_out = {1.0f, NAN, 3.0f, 4.0f};
  auto c = verify::compare("nan", nan_out.data(), ref.data(), 4, verify::kFp32);
  EXPECT(!c.passed && c.n_bad == 1 && c.first_bad == 1 && std::isnan(c.max_abs_err));
  std::vector<float> inf_out = {1.0f, 2.0f, INFINITY, 4.0f};
  c = verify::compare("inf", inf_out.data(), ref.data(), 4, verify::kFp32);
  EXPECT(!c.passed && c.first_bad == 2);
  std::vector<float> off = {1.0f, 2.0f, 3.0f, 4.01f};
  c = verify::compare("off", off.data(), ref.data(), 4, verify::kFp32);
  EXPECT(!c.passed && c.first_bad == 3 && c.n_bad == 1);
  std::vector<double> nan_ref = {NAN, 2.0, 3.0, 4.0};
  std::vector<float> ok = {1.0f, 2.0f, 3.0f, 4.0f};
  c = verify::compare("nanref", ok.data(), nan_ref.data(), 4, verify::kFp32);
  EXPECT(!c.passed);
  c = verify::compare("empty", ok.data(), ref.data(), 0, verify::kFp32);
  EXPECT(!c.passed);  // nothing compared proves nothing
}

TEST(compare_tolerance_boundary_and_scaling) {
  // err <= atol + rtol*|ref| exactly at the edge passes, just past it fails.
  verify::Tol t{0.5, 0.0, "x"};
  double ref = 0.0, in = 0.5, out = 0.5000001;
  EXPECT(verify::compare("edge", &in, &ref, 1, t).passed);
  EXPECT(!verify::compare("past", &out, &ref, 1, t).passed);
  EXPECT(verify::kFp32.scaled(10).atol == verify::kFp32.atol * 10);
}

TEST(rng_reproducible_and_in_range) {
  verify::Rng a(42), b(42), c(43);
  bool same = true, differs = false, in_range = true;
  for (int i = 0; i < 1000; ++i) {
    float x = a.uniform(), y = b.uniform(), z = c.uniform();
    same = same && x == y;
    differs = differs || x != z;
    in_range = in_range && x >= -1.f && x < 1.f;
    float k = a.small_int(3);
    b.small_int(3);
    c.small_int(3);
    in_range = in_range && k >= -3 && k <= 3 && k == std::floor(k);
  }
  EXPECT(same && differs && in_range);
}

TEST(json_output) {
  json::Value v = json::Value::object();
  v["s"] = "a\"b\\c\n";
  v["nan"] = NAN;
  v["int"] = 3;
  v["big"] = 123456789012LL;
  v["x"] = 0.25;
  json::Value arr = json::Value::array();
  arr.push(1);
  arr.push(2);
  v["arr"] = arr;
  std::string d = v.dump();
  EXPECT(d.find("\"s\": \"a\\\"b\\\\c\\n\"") != std::string::npos);
  EXPECT(d.find("\"nan\": null") != std::string::npos);
  EXPECT(d.find("\"int\": 3") != std::string::npos);
  EXPECT(d.find("\"big\": 123456789012") != std::string::npos);
  EXPECT(d.find("\"x\": 0.25") != std::string::npos);
  EXPECT(d.find("\"arr\": [1, 2]") != std::string::npos);
  EXPECT(v.find("int") && v.find("int")->number() == 3 && !v.find("missing"));
}

// A sampled byte string may be any bytes; the results file must stay UTF-8 (Python reads it strictly).
TEST(json_utf8) {
  const std::string ok = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";  // é, €, an emoji: kept as written
  EXPECT(json::Value::escape(ok) == "\"" + ok + "\"");
  EXPECT(json::Value::escape("a\xFF"
                             "b") == "\"a\\ufffdb\"");                         // never valid
  EXPECT(json::Value::escape("\x80") == "\"\\ufffd\"");                        // a stray continuation byte
  EXPECT(json::Value::escape("\xC3") == "\"\\ufffd\"");                        // cut short at the end
  EXPECT(json::Value::escape("\xC0\xAF") == "\"\\ufffd\\ufffd\"");             // overlong '/'
  EXPECT(json::Value::escape("\xED\xA0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
  EXPECT(json::Value::escape("\xE2\x82x") == "\"\\ufffd\\ufffdx\"");           // broken inside
}

TEST(npy_round_trip) {
  fs::path dir = fs::temp_directory_path() / ("npytest_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<float> f = {1.5f, -2.f, 3.25f, 0.f, 5.f, 6.f};
  npy::save((dir / "f.npy").string(), f.data(), {2, 3});
  auto a = npy::load<float>((dir / "f.npy").string());
  EXPECT(a.shape.size() == 2 && a.shape[0] == 2 && a.shape[1] == 3 && a.data == f);
  std::vector<int32_t> iv = {7, -8, 9, 10, 11};
  npy::save((dir / "i.npy").string(), iv.data(), {5});
  auto b = npy::load<int32_t>((dir / "i.npy").string());
  EXPECT(b.shape.size() == 1 && b.shape[0] == 5 && b.data == iv);
  // The header is padded so that the data starts at a multiple of 64 bytes.
  EXPECT((fs::file_size(dir / "i.npy") - 5 * 4) % 64 == 0);
  bool threw = false;
  try {
    npy::load<double>((dir / "f.npy").string());
  } catch (const std::runtime_error&) { threw = true; }
  EXPECT(threw);  // wrong dtype is refused, not converted
  {
    std::ofstream o(dir / "bad.npy");
    o << "not a numpy file";
  }
  threw = false;
  try {
    npy::load<float>((dir / "bad.npy").string());
  } catch (const std::runtime_error&) { threw = true; }
  EXPECT(threw);
  {
    std::ofstream o(dir / "short.npy", std::ios::binary);
    std::ifstream in(dir / "f.npy", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    o << all.substr(0, all.size() - 4);
  }
  threw = false;
  try {
    npy::load<float>((dir / "short.npy").string());
  } catch (const std::runtime_error&) { threw = true; }
  EXPECT(threw);
  threw = false;
  try {
    npy::load<float>((dir / "missing.npy").string());
  } catch (const std::runtime_error&) { threw = true; }
  EXPECT(threw);
  fs::remove_all(dir);
}

TEST(results_file) {
  EXPECT(results::slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3");
  EXPECT(results::slug("NVIDIA H200") == "nvidia-h200");
  EXPECT(results::slug("") == "unknown-gpu");
  results::Bench b;
  b.ms = 2.0;
  b.ref_ms = 1.0;
  b.tflops = 10;
  b.peak = 50;
  EXPECT(std::fabs(b.pct_of_ref() - 50.0) < 1e-12 && std::fabs(b.pct_of_peak() - 20.0) < 1e-12);
  results::Results r("dayXX", "prog");
  EXPECT(!r.passed());  // no checks: not a pass
  std::vector<float> o = {1.f};
  std::vector<double> ref = {1.0};
  r.add(verify::compare("one", o.data(), ref.data(), 1, verify::kFp32));
  EXPECT(r.passed() && r.exit_code() == 0);
  r.env["gpu_slug"] = "test-gpu";
  b.name = "k";
  b.ref = "lib";
  r.add(b);
  fs::path dir = fs::temp_directory_path() / ("restest_" + std::to_string(getpid()));
  std::string path = r.write((dir / "{gpu}" / "dayXX.json").string());
  EXPECT(path == (dir / "test-gpu" / "dayXX.json").string());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT(ss.str().find("\"pct_of_ref\": 50") != std::string::npos);
  EXPECT(ss.str().find("\"passed\": true") != std::string::npos);
  std::vector<float> bad = {2.f};
  r.add(verify::compare("two", bad.data(), ref.data(), 1, verify::kFp32));
  EXPECT(!r.passed() && r.exit_code() == 1 && r.failed() == 1);
  fs::remove_all(dir);
}

TEST(output_paths_checked_up_front) {
  fs::path dir = fs::temp_directory_path() / ("outtest_" + std::to_string(getpid()));
  EXPECT(exit_code_of([&] { results::require_writable_json("p", (dir / "{gpu}" / "x.json").string()); }) == 0);
  EXPECT(fs::is_directory(dir));  // the part before {gpu} was created
  EXPECT(exit_code_of([&] { results::require_writable_dir("p", "--save-npy", (dir / "npy").string()); }) == 0);
  EXPECT(exit_code_of([&] { results::require_writable_json("p", ""); }) == 0);
  EXPECT(exit_code_of([&] { results::require_writable_dir("p", "--save-npy", "/proc/no-such-dir"); }) == cli::kUsage);
  EXPECT(exit_code_of([&] { results::require_writable_json("p", "/proc/no-such-dir/{gpu}/x.json"); }) == cli::kUsage);
  fs::remove_all(dir);
}

// --json judges the file itself, not only its folder (issue 19): a folder, a device, a name that is
// no file, and an empty value are refused; a new file in a folder that can be created is fine.
TEST(json_path_judged_as_a_file) {
  const fs::path dir = fs::temp_directory_path() / ("jsontest_" + std::to_string(getpid()));
  auto json = [](const std::string& p) { return exit_code_of([&] { results::require_writable_json("p", p); }); };
  EXPECT(json(dir.string()) == 0);  // a new name (the folder does not exist yet): creatable, fine
  EXPECT(json((dir / "new" / "x.json").string()) == 0);
  EXPECT(fs::is_directory(dir / "new") && !fs::exists(dir / "new" / "x.json"));  // nothing written
  EXPECT(json((dir / "new").string()) == cli::kUsage);                           // now a folder
  EXPECT(json("/dev/full") == cli::kUsage);
  EXPECT(json("/dev/null") == cli::kUsage);
  EXPECT(json((dir / "{gpu}" / "").string()) == cli::kUsage);  // no file name after {gpu}
  EXPECT(json((dir / "{gpu}" / "..").string()) == cli::kUsage);
  EXPECT(json((dir / "run-{gpu}.json").string()) == 0);
  EXPECT(parse({"--json="}) == cli::kUsage);
  EXPECT(parse({"--json", ""}) == cli::kUsage);
  EXPECT(exit_code_of([] {
           static char prog[] = "prog", opt[] = "--prompt=";
           char* argv[] = {prog, opt};
           cli::Args a(2, argv, "prog", "test");
           a.str("prompt", "x", "may be empty", true);
           a.finish();
         }) == 0);
  fs::remove_all(dir);
}

// compare_at: only the listed indices are compared, and a wrong one among them fails.
TEST(compare_at_checks_the_sampled_indices) {
  const std::vector<float> out = {1.f, 99.f, 3.f, NAN, 5.f};
  const std::vector<size_t> idx = {0, 2, 4};
  const std::vector<double> want = {1.0, 3.0, 5.0};
  const verify::Check ok = verify::compare_at("sampled", out, idx, want, verify::kFp32);
  EXPECT(ok.passed && ok.n == 3 && ok.name.find("3 sampled") != std::string::npos);
  const verify::Check bad =
      verify::compare_at("sampled", out, std::vector<size_t>{0, 3}, std::vector<double>{1.0, 4.0}, verify::kFp32);
  EXPECT(!bad.passed && bad.n_bad == 1 && bad.first_bad == 1);  // the NaN at index 3
}

// NVML's clocks event (throttle) reasons: names, and which ones make a timing meaningless. SW power
// cap is the normal state under load and SW thermal is recorded only; the HW causes are flagged.
TEST(clock_reason_bits_decoded) {
  using V = std::vector<std::string>;
  EXPECT(clocks::reason_names(0).empty());
  EXPECT(clocks::reason_names(0x4) == V{"SW power cap"});
  EXPECT(clocks::reason_names(0x88) == (V{"HW slowdown", "HW power brake"}));
  EXPECT(clocks::reason_names(0x1 | 0x200) == (V{"GPU idle", "unknown reason 0x200"}));
  EXPECT(clocks::unreliable(0) == "" && clocks::unreliable(0x4) == "" && clocks::unreliable(0x20) == "");
  EXPECT(clocks::unreliable(0x1 | 0x2 | 0x10 | 0x100) == "");
  EXPECT(clocks::unreliable(0x8) == "HW slowdown active");
  EXPECT(clocks::unreliable(0x88) == "HW power brake active");
  EXPECT(clocks::unreliable(0x48) == "HW thermal slowdown active");
  EXPECT(clocks::unreliable(0xC8 | 0x4) == "HW power brake and HW thermal slowdown active");
  clocks::Sample s;
  s.sm_mhz = 1980, s.mem_mhz = 2619, s.power_w = 412.5, s.reasons_known = true, s.reasons = 0x84;
  const std::string d = clocks::to_json(s).dump(0);
  EXPECT(d.find("\"sm_mhz\": 1980") != std::string::npos && d.find("\"power_w\": 412.5") != std::string::npos);
  EXPECT(d.find("\"reasons\": [\"SW power cap\", \"HW power brake\"]") != std::string::npos);
  EXPECT(d.find("\"hw_power_brake\": true") != std::string::npos &&
         d.find("\"sw_power_cap\": true") != std::string::npos);
  EXPECT(d.find("\"hw_slowdown\": false") != std::string::npos && d.find("\"thermal\": false") != std::string::npos);
  EXPECT(d.find("\"unreliable\": \"HW power brake active\"") != std::string::npos);
  const json::Value unknown = clocks::to_json(clocks::Sample{});  // NVML could say nothing
  EXPECT(unknown.size() == 0 && !unknown.find("unreliable"));
}

// Runs fn with stdout going to a file, and returns what it printed.
template <class F>
static std::string stdout_of(F fn) {
  const fs::path tmp = fs::temp_directory_path() / ("stdout_" + std::to_string(getpid()));
  std::fflush(stdout);
  const int saved = dup(1);
  FILE* f = std::fopen(tmp.c_str(), "w");
  dup2(fileno(f), 1);
  fn();
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  std::fclose(f);
  std::ifstream in(tmp);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(tmp);
  return ss.str();
}

// A bench row timed while the GPU braked is marked, the file says so at the top, the summary too;
// clean rows and SW power cap are left alone; without readings nothing is claimed either way.
TEST(throttled_rows_flagged) {
  results::Results none("dayXX", "prog");
  results::Bench b;
  b.name = "k", b.ms = 1.0;
  none.add(b);
  EXPECT(none.throttled() == "unknown" && !none.to_json().find("throttled"));
  EXPECT(!none.bench()[0].extra.find("unreliable"));

  std::vector<uint64_t> bits = {0x4, 0x4, 0x8C, 0x4, 0x4};  // begin, row, row (brake), row, end
  size_t next = 0;
  results::Results r("dayXX", "prog");
  r.set_clock_sampler([&] {
    clocks::Sample s;
    s.reasons_known = true, s.reasons = bits[std::min(next++, bits.size() - 1)];
    return clocks::to_json(s);
  });
  r.env["clocks_begin"] = r.sample_clocks();
  EXPECT(r.throttled() == "");  // SW power cap alone is fine
  std::vector<float> o = {1.f};
  std::vector<double> ref = {1.0};
  r.add(verify::compare("one", o.data(), ref.data(), 1, verify::kFp32));
  r.add(b);
  b.extra = json::Value::object();
  b.extra["algo"] = "x";
  r.add(b);
  b.extra = json::Value();
  r.add(b);
  EXPECT(!r.bench()[0].extra.find("unreliable") && !r.bench()[2].extra.find("unreliable"));
  const json::Value* why = r.bench()[1].extra.find("unreliable");
  EXPECT(why && why->str() == "HW power brake active" && r.bench()[1].extra.find("algo"));
  EXPECT(r.throttled() == "HW power brake active");
  r.env["gpu_slug"] = "test-gpu";
  const fs::path dir = fs::temp_directory_path() / ("throttle_" + std::to_string(getpid()));
  fs::create_directories(dir);
  int rc = -1;
  const std::string out = stdout_of([&] { rc = r.finish("prog", (dir / "x.json").string()); });
  EXPECT(rc == 0 && out.find("timings unreliable: HW power brake active\nRESULT: PASS") != std::string::npos);
  std::ifstream in(dir / "x.json");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT(ss.str().find("\"throttled\": \"HW power brake active\"") != std::string::npos);
  EXPECT(ss.str().find("\"clocks_begin\"") != std::string::npos &&
         ss.str().find("\"clocks_end\"") != std::string::npos);
  EXPECT(next == bits.size());  // begin, three rows, end: one reading each
  fs::remove_all(dir);

  results::Results clean("dayXX", "prog");
  clean.set_clock_sampler([] {
    clocks::Sample s;
    s.reasons_known = true, s.reasons = 0x4;
    return clocks::to_json(s);
  });
  clean.add(b);
  const json::Value* t = clean.to_json().find("throttled");
  EXPECT(t && t->str() == "" && stdout_of([&] { clean.print_summary(); }).find("unreliable") == std::string::npos);
}

int main() { return minitest::run_all(); }
