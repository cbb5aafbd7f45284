// common/tests/test_fuzz_cli.cpp: random argument lists against common/cli.h's parsing and the
// standard flags' path checks (results.h), each in its own process (1 s, 256 MB): every list must be
// accepted (exit 0) or refused with one line (exit 2), never crash or hang.
//
//   ./build/test_fuzz_cli                  the short run `make test` does
//   ./build/test_fuzz_cli --cases 100000   the long run behind the top-level `make fuzz`
//
// The parser declares one option of every kind (flag, string, string allowed empty, integer, real,
// integer list) plus the standard flags, as a lesson program does; the lists mix those names, their
// "--name=value" forms, unknown options and values chosen to break a careless parser (overflowing
// integers, NaN, empty strings, paths to devices and folders).
#include <string>
#include <vector>

#include "cli.h"
#include "fuzz_harness.h"
#include "results.h"

namespace {

const char* const kNames[] = {"--verify", "--small", "--bench", "--seed",  "--json",      "--save-npy", "--n",
                              "--x",      "--sizes", "--name",  "--label", "--help",      "-h",         "--bogus",
                              "--",       "-",       "--n=",    "--=",     "--verify=yes"};
const char* const kValues[] = {"0",
                               "1",
                               "-1",
                               "1000",
                               "1001",
                               "9223372036854775807",
                               "9223372036854775808",
                               "-9223372036854775809",
                               "4611686018427387904",
                               "1e308",
                               "1e309",
                               "-1e-320",
                               "nan",
                               "inf",
                               "0x1p3",
                               " 5",
                               "5 ",
                               "",
                               ",",
                               "1,,2",
                               "1,2,3",
                               "1,999999999999999999999",
                               "/dev/full",
                               "/dev/null",
                               "/tmp",
                               "/proc/no/such/x.json",
                               "{gpu}",
                               "\xff\xfe",
                               "a b"};

}  // namespace

int main(int argc, char** argv) {
  const fuzz::Options o = fuzz::options(argc, argv, "test_fuzz_cli", 5000);
  const fuzz::Scratch scratch("cli_fuzz_");
  if (!scratch.ok) return 1;
  const std::string& dir = scratch.path;
  std::vector<std::string> args;
  auto value = [&](fuzz::Rng& r) -> std::string {
    const uint64_t k = r.below(5);  // 1 in 5 a path in the scratch folder, 1 in 5 any integer
    if (k == 0) return dir + "/" + (r.chance(50) ? "{gpu}/" : "") + "f" + std::to_string(r.below(3)) + ".json";
    return k == 1 ? fuzz::any_integer(r) : std::string(fuzz::pick(r, kValues));
  };
  auto prepare = [&](fuzz::Rng& r, long) { return fuzz::random_args(r, "prog", kNames, value, args); };
  auto body = [&] {
    std::vector<char*> argv = fuzz::argv_of(args);
    cli::Args a(int(args.size()), argv.data(), "prog", "fuzzed");
    const cli::Standard st = cli::standard_flags(a, 1, "inputs and outputs as .npy");
    a.integer("n", 10, 1, 1000, "n");
    a.real("x", 0.5, 0.0, 1.0, "x");
    a.int_list("sizes", {1}, 1, 100, "sizes");
    a.str("name", "a", "a string");
    a.str("label", "", "a string that may be empty", true);
    a.finish();
    st.validate("prog");
    results::require_outputs("prog", st);
  };
  fuzz::run(o, "argument-list", prepare, body);
  return fuzz::summary("test_fuzz_cli");
}
