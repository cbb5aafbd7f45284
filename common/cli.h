// common/cli.h: command-line parsing with clear errors, and the exit codes every program uses.
//
// Host-only (plain C++17): builds with g++ and is unit-tested in common/tests.
//
//   0  pass                 every check passed
//   1  a check failed       (or a CUDA/cuBLAS/cuDNN call failed at run time)
//   2  usage/input error    unknown flag, bad value, a size the GPU cannot hold, a missing file
//   77 skipped              no GPU, or the GPU/cuDNN lacks a needed feature
//
// Arguments are parsed and validated *before* the GPU is touched, so bad input is
// reported the same way on a machine without one. Usage:
//
//   cli::Args args(argc, argv, "setup", "Describe the GPU and measure its ceilings.");
//   bool verify = args.flag("verify", "quick verification mode (what `make test` runs)");
//   long n      = args.integer("n", 1000003, 1, 1L << 31, "vector length");
//   args.finish();            // --help, unknown flags, leftovers -> exit here
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace cli {

enum Exit : int { kPass = 0, kFail = 1, kUsage = 2, kSkip = 77 };

// Print "prog: error: <msg>" as one line on stderr and exit 2.
[[noreturn]] inline void usage_error(const std::string& prog, const std::string& msg) {
  std::fprintf(stderr, "%s: error: %s (see --help)\n", prog.c_str(), msg.c_str());
  std::exit(kUsage);
}

// Print "SKIP: prog: <why>" as one line on stdout and exit 77. The run-all script
// shows this line as the reason.
[[noreturn]] inline void skip(const std::string& prog, const std::string& why) {
  std::printf("SKIP: %s: %s\n", prog.c_str(), why.c_str());
  std::fflush(stdout);
  std::exit(kSkip);
}

// Strict number parsing: the whole token must be a number, in range, no overflow.
inline bool parse_int(const std::string& s, long long& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || end == s.c_str() || *end != '\0') return false;
  out = v;
  return true;
}

inline bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno == ERANGE || end == s.c_str() || *end != '\0' || v != v) return false;
  out = v;
  return true;
}

class Args {
 public:
  Args(int argc, char** argv, std::string prog, std::string about) : prog_(std::move(prog)), about_(std::move(about)) {
    for (int i = 1; i < argc; ++i) tokens_.push_back(argv[i]);
    used_.assign(tokens_.size(), false);
  }

  const std::string& prog() const { return prog_; }

  // A boolean flag: present or not. "--flag=x" is an error.
  bool flag(const std::string& name, const std::string& help) {
    add_help("--" + name, help);
    bool seen = false;
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (used_[i]) continue;
      if (tokens_[i] == "--" + name) {
        used_[i] = true;
        seen = true;
      } else if (tokens_[i].rfind("--" + name + "=", 0) == 0)
        usage_error(prog_, "--" + name + " takes no value");
    }
    return seen;
  }

  // An option with a string value: "--name value" or "--name=value". An empty value ("--json=",
  // "--json ''") is an error unless the option allows it: for a path it would mean "here", silently.
  std::string str(const std::string& name, const std::string& def, const std::string& help, bool allow_empty = false) {
    add_help("--" + name + " S", help + (def.empty() ? "" : " (default " + def + ")"));
    std::string v;
    if (!take(name, v)) return def;
    if (v.empty() && !allow_empty) usage_error(prog_, "--" + name + " needs a non-empty value");
    return v;
  }

  // An integer option, checked against [lo, hi].
  long long integer(const std::string& name, long long def, long long lo, long long hi, const std::string& help) {
    add_help("--" + name + " N", help + " (default " + std::to_string(def) + ")");
    std::string v;
    if (!take(name, v)) return def;
    long long x;
    if (!parse_int(v, x)) usage_error(prog_, "--" + name + " expects an integer, got '" + v + "'");
    if (x < lo || x > hi)
      usage_error(prog_,
                  "--" + name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v);
    return x;
  }

  double real(const std::string& name, double def, double lo, double hi, const std::string& help) {
    add_help("--" + name + " X", help + " (default " + fmt(def) + ")");
    std::string v;
    if (!take(name, v)) return def;
    double x;
    if (!parse_double(v, x)) usage_error(prog_, "--" + name + " expects a number, got '" + v + "'");
    if (!(x >= lo && x <= hi))
      usage_error(prog_, "--" + name + " must be in [" + fmt(lo) + ", " + fmt(hi) + "], got " + v);
    return x;
  }

  // A comma-separated list of integers, each in [lo, hi]: "--sizes 256,512,1000".
  std::vector<long long> int_list(const std::string& name, const std::vector<long long>& def, long long lo,
                                  long long hi, const std::string& help) {
    add_help("--" + name + " N,N,..", help);
    std::string v;
    if (!take(name, v)) return def;
    std::vector<long long> out;
    size_t start = 0;
    while (true) {
      size_t comma = v.find(',', start);
      std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      long long x;
      if (!parse_int(item, x))
        usage_error(prog_, "--" + name + " expects integers separated by commas, got '" + v + "'");
      if (x < lo || x > hi)
        usage_error(prog_, "--" + name + " values must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                               "], got " + item);
      out.push_back(x);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }

  // Call after declaring every option: handles --help, then refuses anything unknown.
  void finish() {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (used_[i]) continue;
      if (tokens_[i] == "--help" || tokens_[i] == "-h") {
        print_help();
        std::exit(kPass);
      }
    }
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (used_[i]) continue;
      const std::string& t = tokens_[i];
      if (t.rfind("-", 0) == 0) usage_error(prog_, "unknown option '" + t + "'");
      usage_error(prog_, "unexpected argument '" + t + "'");
    }
  }

  void print_help() const {
    std::printf("%s: %s\n\nOptions:\n", prog_.c_str(), about_.c_str());
    for (const auto& h : help_) std::printf("  %-22s %s\n", h.first.c_str(), h.second.c_str());
    std::printf("  %-22s %s\n", "--help", "this text");
    std::printf("\nExit codes: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped.\n");
  }

 private:
  // Finds "--name value" or "--name=value"; the option may appear once.
  bool take(const std::string& name, std::string& value) {
    const std::string key = "--" + name;
    bool found = false;
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (used_[i]) continue;
      std::string v;
      if (tokens_[i] == key) {
        if (i + 1 >= tokens_.size() || tokens_[i + 1].rfind("--", 0) == 0) usage_error(prog_, key + " needs a value");
        used_[i] = used_[i + 1] = true;
        v = tokens_[i + 1];
      } else if (tokens_[i].rfind(key + "=", 0) == 0) {
        used_[i] = true;
        v = tokens_[i].substr(key.size() + 1);
      } else {
        continue;
      }
      if (found) usage_error(prog_, key + " given more than once");
      found = true;
      value = v;
    }
    return found;
  }

  void add_help(const std::string& key, const std::string& text) { help_.push_back({key, text}); }

  static std::string fmt(double x) {
    char b[64];
    std::snprintf(b, sizeof b, "%g", x);
    return b;
  }

  std::string prog_, about_;
  std::vector<std::string> tokens_;
  std::vector<bool> used_;
  std::vector<std::pair<std::string, std::string>> help_;
};

// The flags every lesson program shares, declared in one place so that their names, help
// texts and rules are the same everywhere:
//   --verify   the quick checks that `make test` runs (no timing)
//   --small    with --verify: the smallest shapes only (for compute-sanitizer)
//   --bench    the full benchmark (what `make bench` runs, with --json)
//   --seed N   the random seed (printed, so a run can be reproduced)
//   --json P   the results file ({gpu} is replaced by the GPU's slug)
//   --save-npy D  (only where the program offers it) inputs and outputs as .npy files
// Declare the lesson's own options, call Args::finish(), then Standard::validate().
struct Standard {
  bool verify = false, small = false, bench = false;
  long long seed = 0;
  std::string json, npy_dir;
  const char* mode() const { return verify ? "verify" : bench ? "bench" : "run"; }
  // The rules between the flags (call after Args::finish, before any GPU work).
  void validate(const std::string& prog) const {
    if (verify && bench) usage_error(prog, "--verify and --bench are exclusive");
    if (small && !verify) usage_error(prog, "--small goes with --verify");
  }
};

inline Standard standard_flags(Args& a, long long default_seed, const std::string& npy_help = "") {
  Standard s;
  s.verify = a.flag("verify", "quick checks on odd and small shapes; no timing (what `make test` runs)");
  s.small = a.flag("small", "with --verify: only the smallest cases (for compute-sanitizer)");
  s.bench = a.flag("bench", "the full benchmark (what `make bench` runs, with --json)");
  s.seed = a.integer("seed", default_seed, 0, 1LL << 62, "random seed (inputs are fresh for every check)");
  s.json = a.str("json", "", "write the results file here ({gpu} = the GPU's slug)");
  if (!npy_help.empty()) s.npy_dir = a.str("save-npy", "", npy_help);
  return s;
}

}  // namespace cli
