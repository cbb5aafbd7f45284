// day50_gpt/test_fuzz.cpp: hostile checkpoints and argument lists, thousands of them, each in its own
// process (1 s, 256 MB): every one must load cleanly or be refused with one error (exit 2), never
// crash, hang or allocate what a damaged header claims.
//
//   ./build/test_fuzz                     the short run `make test` does
//   ./build/test_fuzz --cases 100000      the long run behind the top-level `make fuzz`
//   ./build/test_fuzz --seed S --first I --cases 1    one case again
//
// Checkpoints: a valid one (the smallest model the limits allow, so each case is cheap), then bit flips
// anywhere (caught by the CRC), header bits flipped and header fields set to extremes with the CRC
// recomputed (so the header checks themselves are what refuses them), a consistent but enormous
// model (the size check), truncations and extensions. Argument lists: gpt::parse_options
// (day50_gpt/options.h) on random lists built from gpt's own flags and hostile values, where the header
// exists.
#include <climits>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "tests/fuzz_harness.h"

#if __has_include("options.h")
#include "options.h"
#define FUZZ_HAVE_OPTIONS 1
#endif

namespace {

// The smallest model load() accepts (vocab 256, width 8, one layer, context 2): 2952 parameters.
ckpt::Checkpoint valid_checkpoint() {
  ckpt::Checkpoint c;
  c.config.vocab = 256, c.config.context = 2, c.config.layers = 1, c.config.heads = 2, c.config.width = 8;
  c.step = 7, c.data_pos = 12345, c.rng_state = 0xC0FFEE;
  const size_t n = gpt::Layout(c.config).total;
  for (size_t i = 0; i < n; ++i) {
    c.params.push_back(float(i % 97) * 0.01f);
    c.m.push_back(float(i % 13) * 1e-4f);
    c.v.push_back(float(i % 7) * 1e-6f);
  }
  return c;
}

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::vector<unsigned char> b;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return b;
  unsigned char chunk[4096];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) b.insert(b.end(), chunk, chunk + got);
  std::fclose(f);
  return b;
}

bool write_bytes(const std::string& path, const std::vector<unsigned char>& b) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}

void fix_crc(std::vector<unsigned char>& b) {
  if (b.size() < 4) return;
  const uint32_t crc = ckpt::crc32(b.data(), b.size() - 4);
  std::memcpy(&b[b.size() - 4], &crc, 4);
}

// Header fields after the magic: offset and width in bytes (see checkpoint.h's layout).
struct Field {
  size_t at, bytes;
};
constexpr Field kFields[] = {{8, 4},  {12, 4}, {16, 4}, {20, 4}, {24, 4}, {28, 4},
                             {32, 4}, {36, 8}, {44, 8}, {52, 8}, {60, 8}};

uint64_t extreme(fuzz::Rng& r, uint64_t old) {
  const uint64_t v[] = {0,
                        1,
                        2,
                        3,
                        255,
                        256,
                        257,
                        8192,
                        8193,
                        96,
                        97,
                        128,
                        129,
                        0x7fffffff,
                        0x80000000,
                        0xffffffff,
                        1ull << 32,
                        1ull << 40,
                        1ull << 48,
                        1ull << 62,
                        0x7fffffffffffffffull,
                        ~0ull,
                        old + 1,
                        old - 1,
                        old << 1,
                        old ^ (1ull << r.below(64)),
                        r.next()};
  return v[r.below(sizeof v / sizeof v[0])];
}

void put(std::vector<unsigned char>& b, Field f, uint64_t x) { std::memcpy(&b[f.at], &x, f.bytes); }

// One mutation of the valid file; returns what it did.
std::string mutate(const std::vector<unsigned char>& good, std::vector<unsigned char>& b, fuzz::Rng& r) {
  b = good;
  switch (r.below(8)) {
    case 0: {  // bit flips anywhere, CRC left as it was
      const int k = 1 + int(r.below(8));
      for (int i = 0; i < k; ++i) b[r.below(b.size())] ^= uint8_t(1u << r.below(8));
      return std::to_string(k) + " bit flips";
    }
    case 1: {  // header bit flips, CRC recomputed
      const int k = 1 + int(r.below(4));
      for (int i = 0; i < k; ++i) b[8 + r.below(ckpt::kHeaderBytes - 8)] ^= uint8_t(1u << r.below(8));
      fix_crc(b);
      return std::to_string(k) + " header bit flips, CRC recomputed";
    }
    case 2:
    case 3: {  // header fields set to extremes, CRC recomputed
      const int k = 1 + int(r.below(3));
      std::string d;
      for (int i = 0; i < k; ++i) {
        const Field f = kFields[r.below(sizeof kFields / sizeof kFields[0])];
        uint64_t old = 0;
        std::memcpy(&old, &b[f.at], f.bytes);
        const uint64_t x = extreme(r, old);
        put(b, f, x);
        d += "field@" + std::to_string(f.at) + "=" + std::to_string(x) + " ";
      }
      fix_crc(b);
      return d + "(CRC recomputed)";
    }
    case 4: {  // a consistent header for a model up to the limits: the count and size checks refuse it
      gpt::Config c;
      c.layers = 1 + int(r.below(ckpt::Limits::kMaxLayers));
      c.heads = 1 << r.below(8);
      c.width = c.heads * (1 + int(r.below(ckpt::Limits::kMaxWidth / c.heads)));
      c.context = ckpt::Limits::kMinContext + int(r.below(ckpt::Limits::kMaxContext - 1));
      uint64_t n = 0;
      ckpt::detail::param_count(c, n);
      put(b, kFields[3], uint64_t(c.context)), put(b, kFields[4], uint64_t(c.layers));
      put(b, kFields[5], uint64_t(c.heads)), put(b, kFields[6], uint64_t(c.width)), put(b, kFields[10], n);
      fix_crc(b);
      return "consistent header for " + std::to_string(n) + " parameters (CRC recomputed)";
    }
    case 5: {  // truncated
      const size_t n = size_t(r.chance(50) ? r.below(ckpt::kHeaderBytes + 1) : r.below(b.size()));
      b.resize(n);
      return "truncated to " + std::to_string(n) + " bytes";
    }
    case 6: {  // extended, sometimes with the CRC recomputed at the new end
      const size_t k = 1 + size_t(r.below(r.chance(50) ? 8 : 100000));
      for (size_t i = 0; i < k; ++i) b.push_back(uint8_t(r.next()));
      const bool crc = r.chance(50);
      if (crc) fix_crc(b);
      return std::to_string(k) + " bytes appended" + (crc ? ", CRC recomputed" : "");
    }
    default:  // unchanged: must load
      return "unchanged";
  }
}

int fuzz_checkpoints(const fuzz::Options& o, const std::string& path) {
  ckpt::save(path, valid_checkpoint());
  const std::vector<unsigned char> good = file_bytes(path);
  std::vector<unsigned char> b;
  const gpt::Config expect = valid_checkpoint().config;
  bool with_expect = false;
  auto prepare = [&](fuzz::Rng& r, long) {
    const std::string d = mutate(good, b, r);
    with_expect = r.chance(30);
    if (!write_bytes(path, b)) return "cannot write " + path;
    return d + (with_expect ? ", loaded with the expected configuration" : "");
  };
  auto body = [&] {
    try {
      const ckpt::Checkpoint c = ckpt::load(path, with_expect ? &expect : nullptr);
      if (c.params.size() != gpt::Layout(c.config).total) _exit(3);  // a load that returned nonsense
    } catch (const std::runtime_error&) { _exit(cli::kUsage); }
  };
  const int rc = fuzz::run(o, "checkpoint", prepare, body);
  std::remove(path.c_str());
  return rc;
}

#ifdef FUZZ_HAVE_OPTIONS
// gpt's flags (gpt --help) and values chosen to be hostile to them.
const char* const kFlags[] = {
    "--layers", "--heads", "--width", "--context", "--batch", "--steps", "--until", "--warmup", "--lr", "--val-every",
    "--log-every", "--fusion", "--precision", "--attention", "--data", "--save", "--resume", "--log", "--dump",
    "--sample", "--prompt", "--tokens", "--temperature", "--top-k", "--gpus", "--world", "--rank", "--device",
    "--id-file", "--bucket-mb", "--verify-only", "--bench-steps", "--verify", "--small", "--bench", "--seed", "--json",
    "--help", "--bogus", "-h",
    // flags added since: dropout and batches, the bench's parts, data parallelism, the step's switches
    "--dropout", "--batches", "--data-limit", "--bench-part", "--check-args", "--allreduce", "--zero",
    "--nccl-channels", "--first-bucket-mb", "--bucket-order", "--graph", "--fused-ln", "--lt-search", "--recompute"};
const char* const kValues[] = {"0",
                               "1",
                               "2",
                               "-1",
                               "5",
                               "64",
                               "96",
                               "97",
                               "8192",
                               "8193",
                               "65536",
                               "2147483647",
                               "2147483648",
                               "9223372036854775807",
                               "9223372036854775808",
                               "-9223372036854775809",
                               "1e309",
                               "nan",
                               "inf",
                               "-inf",
                               "0.5",
                               "1e-30",
                               "0x10",
                               " 1",
                               "1 ",
                               "",
                               "=",
                               "--",
                               "all",
                               "on",
                               "off",
                               "fp32",
                               "tf32",
                               "bf16",
                               "fp16",
                               "cudnn",
                               "naive",
                               "auto",
                               "0.2",
                               "0.99",
                               "1.0",
                               "random",
                               "sequential",
                               "quality,generate",
                               "train-bf16,",
                               "train-tf32",
                               "backward",
                               "/dev/full",
                               "/dev/zero",
                               "/tmp",
                               "/proc/no/such",
                               "data/corpus.txt",
                               "/no/such.txt",
                               "{gpu}",
                               "\xff\xfe",
                               "a\nb"};

int fuzz_options(const fuzz::Options& o, const std::string& ckpt_path, const std::string& dir) {
  ckpt::save(ckpt_path, valid_checkpoint());
  std::vector<std::string> args;
  auto pick_value = [&](fuzz::Rng& r) -> std::string {
    const uint64_t k = r.below(6);  // a valid checkpoint, an output path, any integer, or a hostile value
    if (k == 0) return ckpt_path;
    if (k == 1) return dir + "/out" + std::to_string(r.below(4)) + (r.chance(50) ? ".json" : "");
    return k == 2 ? fuzz::any_integer(r) : std::string(fuzz::pick(r, kValues));
  };
  auto prepare = [&](fuzz::Rng& r, long) { return fuzz::random_args(r, "gpt", kFlags, pick_value, args); };
  auto body = [&] {
    std::vector<char*> argv = fuzz::argv_of(args);
    (void)gpt::parse_options(int(args.size()), argv.data());
  };
  return fuzz::run(o, "gpt argument-list", prepare, body);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const fuzz::Options o = fuzz::options(argc, argv, "test_fuzz", 10000);
  const fuzz::Scratch scratch("day50_fuzz_");
  if (!scratch.ok) return 1;
  const std::string& dir = scratch.path;
#ifndef FUZZ_HAVE_OPTIONS
  std::printf("note: day50_gpt/options.h (gpt::parse_options) not present yet: gpt's argument lists not fuzzed\n");
#endif
  fuzz_checkpoints(o, dir + "/case.ckpt");
#ifdef FUZZ_HAVE_OPTIONS
  fuzz_options(o, dir + "/valid.ckpt", dir);
#endif
  return fuzz::summary("test_fuzz");
}
