// common/minitest.h: a minimal unit-test harness for the host-only code (no GPU needed).
//
//   TEST(parse_int_rejects_garbage) { EXPECT(!cli::parse_int("12x", v)); }
//   int main() { return minitest::run_all(); }
//
// Prints one line per failed expectation and closes with "N passed, N failed".
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace minitest {

struct Case {
  const char* name;
  std::function<void()> fn;
};
inline std::vector<Case>& registry() {
  static std::vector<Case> r;
  return r;
}
inline int& failures_in_case() {
  static int f = 0;
  return f;
}

struct Register {
  Register(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};

inline int run_all() {
  int passed = 0, failed = 0;
  for (auto& c : registry()) {
    failures_in_case() = 0;
    c.fn();
    if (failures_in_case()) {
      ++failed;
      std::printf("FAIL  %s\n", c.name);
    } else {
      ++passed;
      std::printf("ok    %s\n", c.name);
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

}  // namespace minitest

#define TEST(name)                                          \
  static void test_##name();                                \
  static minitest::Register reg_##name(#name, test_##name); \
  static void test_##name()

#define EXPECT(cond)                                                    \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::printf("  %s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++minitest::failures_in_case();                                   \
    }                                                                   \
  } while (0)
