// common/tests/fuzz_harness.h: run many seeded random inputs, each in its own process with a time
// and memory limit, and require every one to end in a clean accept (exit 0) or refusal (exit 2).
//
// Used by common/tests/test_fuzz_cli.cpp (argument lists) and day50_gpt/test_fuzz.cpp (checkpoints and
// gpt's options). A case that crashes, throws something uncaught (std::bad_alloc from a size read out
// of a damaged header), runs past the time limit or exits with any other code is a failure, printed
// with the seed and case number that reproduce it (`--seed S --first I --cases 1`).
//
//   fuzz::Options o = fuzz::options(argc, argv, "test_fuzz_cli", 2000);
//   return fuzz::run(o, "argument lists", [&](uint64_t seed, long i) { ...; return "what it tried"; },
//                    [&](uint64_t seed, long i) { ... });  // the second runs in the child
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_UNDER_ASAN 1
#endif
#endif

namespace fuzz {

struct Options {
  long cases = 0, first = 0;
  uint64_t seed = 0;
  int seconds = 1;       // per case
  long memory_mb = 256;  // per case (address space)
};

inline Options options(int argc, char** argv, const char* prog, long default_cases) {
  cli::Args a(argc, argv, prog, "seeded random inputs, each must be accepted (exit 0) or refused (exit 2)");
  Options o;
  o.cases = long(a.integer("cases", default_cases, 1, 100000000, "how many cases"));
  o.first = long(a.integer("first", 0, 0, 100000000, "the first case's number (to reproduce one)"));
  o.seed = uint64_t(a.integer("seed", 20261119, 0, 1LL << 62, "random seed"));
  o.seconds = int(a.integer("seconds", 1, 1, 60, "time limit per case"));
  o.memory_mb = long(a.integer("memory-mb", 256, 16, 1 << 20, "address-space limit per case"));
  a.finish();
  return o;
}

// splitmix64: the case's random stream is a function of (seed, case number) alone.
struct Rng {
  uint64_t z;
  Rng(uint64_t seed, long i) : z(seed * 0x9E3779B97F4A7C15ull + uint64_t(i) * 0xD1B54A32D192ED03ull + 1) {}
  uint64_t next() {
    uint64_t m = (z += 0x9E3779B97F4A7C15ull);
    m = (m ^ (m >> 30)) * 0xBF58476D1CE4E5B9ull;
    m = (m ^ (m >> 27)) * 0x94D049BB133111EBull;
    return m ^ (m >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool chance(int percent) { return below(100) < uint64_t(percent); }
};

// A scratch folder for one run's files (/tmp/<prefix><pid>), removed with its contents at the end.
// The run works inside it: a fuzzed relative path ("--json 5", "--dump ,") that a parser creates
// as a folder lands here, not in the folder the test was started from (it once left ~100 empty
// folders named "-1e-320", "5", "," in the repository).
struct Scratch {
  std::string path, home;
  bool ok;
  explicit Scratch(const std::string& prefix) : path("/tmp/" + prefix + std::to_string(getpid())) {
    std::error_code ec;
    home = std::filesystem::current_path(ec).string();
    ok = mkdir(path.c_str(), 0700) == 0 && chdir(path.c_str()) == 0;
    if (!ok) std::printf("FAIL: cannot create or enter %s\n", path.c_str());
  }
  ~Scratch() {
    std::error_code ec;
    if (!home.empty() && chdir(home.c_str()) != 0) {}
    std::filesystem::remove_all(path, ec);
  }
};

// One of `a`, uniformly.
template <size_t N>
const char* pick(Rng& r, const char* const (&a)[N]) {
  return a[r.below(N)];
}
// An integer of any magnitude (a random 64-bit value shifted right by 0..63), as text.
inline std::string any_integer(Rng& r) { return std::to_string(int64_t(r.next()) >> r.below(64)); }

// A random argument list for `prog`: up to 8 of `names`, each sometimes written "--name=value" and
// often followed by a value; `value` draws the values. Returns a one-line description of it.
template <size_t N, class Value>
std::string random_args(Rng& r, const char* prog, const char* const (&names)[N], Value value,
                        std::vector<std::string>& args) {
  args.assign(1, prog);
  const int n = int(r.below(9));
  for (int i = 0; i < n; ++i) {
    const std::string f = pick(r, names);
    args.push_back(r.chance(20) ? f + "=" + value(r) : f);
    if (r.chance(60)) args.push_back(value(r));
  }
  std::string d = prog;
  for (size_t i = 1; i < args.size(); ++i) d += " '" + args[i] + "'";
  return d;
}

// argv for a parser (null-terminated, as main's is); `args` must outlive it.
inline std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  return argv;
}

// Every case run by this process, for the closing line.
struct Tally {
  long cases = 0, accepted = 0, refused = 0, failed = 0;
};
inline Tally& tally() {
  static Tally t;
  return t;
}
// The last line a fuzz program prints (what `make test` shows): the totals over all its runs.
inline int summary(const char* prog) {
  const Tally& t = tally();
  std::printf("%s: %ld cases: %ld accepted, %ld refused with exit 2, %ld failed\n", prog, t.cases, t.accepted,
              t.refused, t.failed);
  return t.failed ? 1 : 0;
}

// The child: limits, silence, run, exit 0 if `body` returns (exit 2 comes from the body itself).
[[noreturn]] inline void child(const Options& o, const std::function<void()>& body) {
  if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) _exit(99);
#ifndef FUZZ_UNDER_ASAN  // ASan reserves terabytes of address space: an RLIMIT_AS would stop it at start
  const rlim_t bytes = rlim_t(o.memory_mb) << 20;
  const rlimit lim{bytes, bytes};
  if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(98);
#endif
  alarm(unsigned(o.seconds));  // SIGALRM's default action ends the child: reported as a failure
  body();
  std::fflush(stdout);
  _exit(0);
}

// Runs cases first .. first+cases-1: `prepare(rng, i)` in the parent (returns a description of the
// case for the failure message), then `body()` in a forked child. Prints one line per failure (the
// first 20) and ends with the count line `make test` shows. Returns the exit code (0: no failure).
inline int run(const Options& o, const std::string& what, const std::function<std::string(Rng&, long)>& prepare,
               const std::function<void()>& body) {
  long accepted = 0, refused = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = o.first; i < o.first + o.cases; ++i) {
    Rng rng(o.seed, i);
    const std::string desc = prepare(rng, i);
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
      std::printf("FAIL: fork failed at case %ld\n", i);
      return 1;
    }
    if (pid == 0) child(o, body);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {}
    if (WIFEXITED(status) && WEXITSTATUS(status) == cli::kPass) {
      ++accepted;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == cli::kUsage) {
      ++refused;
    } else {
      if (++failed <= 20) {
        const std::string how = WIFEXITED(status)             ? "exit " + std::to_string(WEXITSTATUS(status))
                                : WTERMSIG(status) == SIGALRM ? "over the " + std::to_string(o.seconds) + " s limit"
                                                              : "signal " + std::to_string(WTERMSIG(status)) + " (" +
                                                                    strsignal(WTERMSIG(status)) + ")";
        std::printf("FAIL: case %ld (--seed %llu --first %ld --cases 1): %s: %s\n", i, (unsigned long long)o.seed, i,
                    how.c_str(), desc.c_str());
      }
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#ifdef FUZZ_UNDER_ASAN
  const char* limits = "time limit only (ASan: no address-space limit)";
#else
  const std::string lim = std::to_string(o.memory_mb) + " MB";
  const char* limits = lim.c_str();
#endif
  std::printf("fuzz %s: seed %llu, %.1f s, %d s and %s per case\n", what.c_str(), (unsigned long long)o.seed, s,
              o.seconds, limits);
  std::printf("%ld %s cases: %ld accepted, %ld refused with exit 2, %ld failed\n", o.cases, what.c_str(), accepted,
              refused, failed);
  Tally& t = tally();
  t.cases += o.cases, t.accepted += accepted, t.refused += refused, t.failed += failed;
  return failed ? 1 : 0;
}

}  // namespace fuzz
