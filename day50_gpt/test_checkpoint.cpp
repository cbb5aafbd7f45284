// day50_gpt/test_checkpoint.cpp: checkpoints round-trip exactly, and every defect is caught.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "minitest.h"
#include "verify.h"

static ckpt::Checkpoint sample(verify::Rng& rng) {
  ckpt::Checkpoint c;
  c.config.vocab = 256, c.config.context = 8, c.config.layers = 2, c.config.heads = 2, c.config.width = 16;
  c.step = 1234, c.data_pos = 98765, c.rng_state = 0x0123456789ABCDEFull;
  const size_t n = gpt::Layout(c.config).total;
  c.params.resize(n), c.m.resize(n), c.v.resize(n);
  verify::fill_uniform(c.params, rng), verify::fill_uniform(c.m, rng), verify::fill_uniform(c.v, rng, 0.f, 1.f);
  return c;
}

static std::string tmp_path(const char* name) { return std::string("/tmp/day50_test_") + name + ".ckpt"; }

static bool throws_with(const std::string& path, const std::string& needle, const gpt::Config* expect = nullptr) {
  try {
    ckpt::load(path, expect);
  } catch (const std::runtime_error& e) { return std::string(e.what()).find(needle) != std::string::npos; }
  return false;
}

static std::vector<char> read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
static void write_all(const std::string& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(b.data(), std::streamsize(b.size()));
}

TEST(crc32_known_value) { EXPECT(ckpt::crc32("123456789", 9) == 0xCBF43926u); }  // the standard check value

TEST(round_trip_is_exact) {
  verify::Rng rng(1);
  const ckpt::Checkpoint c = sample(rng);
  const std::string p = tmp_path("rt");
  ckpt::save(p, c);
  const ckpt::Checkpoint d = ckpt::load(p, &c.config);
  EXPECT(d.step == c.step && d.data_pos == c.data_pos && d.rng_state == c.rng_state);
  EXPECT(d.params == c.params && d.m == c.m && d.v == c.v);
  EXPECT(!std::ifstream(p + ".tmp").good());  // no temporary left behind
  std::remove(p.c_str());
}

TEST(every_defect_is_one_clear_error) {
  verify::Rng rng(2);
  const ckpt::Checkpoint c = sample(rng);
  const std::string p = tmp_path("bad");
  ckpt::save(p, c);
  const std::vector<char> good = read_all(p);
  EXPECT(throws_with("/tmp/day50_no_such_file.ckpt", "cannot open"));
  std::vector<char> b = good;
  b.resize(b.size() / 2);  // truncated
  write_all(p, b);
  EXPECT(throws_with(p, "truncated"));
  b = good;
  b[b.size() / 2] ^= 0x10;  // one flipped bit in the weights
  write_all(p, b);
  EXPECT(throws_with(p, "CRC mismatch"));
  b = good;
  b[0] = 'X';  // not ours
  write_all(p, b);
  EXPECT(throws_with(p, "not a checkpoint"));
  b = good;
  b[8] = 9;  // another version
  write_all(p, b);
  EXPECT(throws_with(p, "version"));
  write_all(p, good);
  gpt::Config other = c.config;
  other.layers = 3;
  EXPECT(throws_with(p, "this run asked for", &other));
  std::remove(p.c_str());
}

// Header field offsets (see the layout in checkpoint.h).
enum : size_t {
  kVocabAt = 16,
  kContextAt = 20,
  kLayersAt = 24,
  kHeadsAt = 28,
  kWidthAt = 32,
  kStepAt = 36,
  kPosAt = 44,
  kCountAt = 60
};

// Writes `x` at `at` and recomputes the CRC, so that only the header checks can catch the change.
template <class T>
static void set_field(std::vector<char>& b, size_t at, T x) {
  std::memcpy(&b[at], &x, sizeof x);
  const uint32_t crc = ckpt::crc32(b.data(), b.size() - 4);
  std::memcpy(&b[b.size() - 4], &crc, 4);
}

TEST(param_count_matches_the_layout) {
  for (int L : {1, 2, 7})
    for (int C : {8, 64, 384}) {
      gpt::Config c;
      c.layers = L, c.width = C, c.heads = 1, c.context = 2 + C;
      uint64_t n = 0;
      EXPECT(ckpt::detail::param_count(c, n) && n == gpt::Layout(c).total);
    }
}

// A damaged header with a valid CRC: every field out of bounds is one clear error, before anything
// the header sizes is allocated (a flipped layer count once cost 12.7 GB and 42 s, then bad_alloc).
TEST(a_hostile_header_is_refused_before_any_allocation) {
  verify::Rng rng(4);
  const ckpt::Checkpoint c = sample(rng);
  const std::string p = tmp_path("hostile");
  ckpt::save(p, c);
  const std::vector<char> good = read_all(p);
  struct Case {
    size_t at;
    int64_t value;
    int bytes;
    const char* needle;
  };
  const Case cases[] = {
      {kVocabAt, 2, 4, "vocabulary 2"},
      {kVocabAt, 100000, 4, "vocabulary 100000"},
      {kLayersAt, 2 | (1 << 24), 4, "layers"},
      {kLayersAt, 0, 4, "layers"},
      {kLayersAt, -1, 4, "layers"},
      {kHeadsAt, 3, 4, "do not divide"},
      {kHeadsAt, 1 << 30, 4, "heads"},
      {kWidthAt, 16 | (1 << 16), 4, "width"},
      {kContextAt, 1, 4, "context"},
      {kContextAt, 0x7fffffff, 4, "context"},
      {kStepAt, -1, 8, "step"},
      {kStepAt, INT64_MAX, 8, "step"},
      {kPosAt, -1, 8, "data position"},
      {kCountAt, -1, 8, "parameter count"},
      {kLayersAt, 96, 4, "parameter count"},
  };
  for (const Case& k : cases) {
    std::vector<char> b = good;
    if (k.bytes == 4)
      set_field(b, k.at, int32_t(k.value));
    else
      set_field(b, k.at, k.value);
    write_all(p, b);
    const bool ok = throws_with(p, k.needle);
    if (!ok) std::printf("  field at %zu = %lld: expected an error with '%s'\n", k.at, (long long)k.value, k.needle);
    EXPECT(ok);
  }
  std::vector<char> b = good;  // 96 layers and their parameter count: in bounds, but the file is too short
  gpt::Config big = c.config;
  big.layers = 96;
  set_field(b, kLayersAt, int32_t(96));
  set_field(b, kCountAt, uint64_t(gpt::Layout(big).total));
  write_all(p, b);
  EXPECT(throws_with(p, "truncated"));
  b = good;  // a longer file than the header implies
  b.push_back(0);
  write_all(p, b);
  EXPECT(throws_with(p, "bytes too many"));
  b.resize(20);  // ends inside the header
  write_all(p, b);
  EXPECT(throws_with(p, "truncated"));
  EXPECT(throws_with("/tmp", "not a regular file"));
  std::remove(p.c_str());
}

TEST(save_refuses_what_load_would_refuse) {
  verify::Rng rng(5);
  ckpt::Checkpoint c = sample(rng);
  c.step = -5;
  bool threw = false;
  try {
    ckpt::save(tmp_path("neg"), c);
  } catch (const std::runtime_error& e) { threw = std::string(e.what()).find("step") != std::string::npos; }
  EXPECT(threw);
}

TEST(an_interrupted_save_leaves_the_previous_checkpoint) {
  verify::Rng rng(3);
  ckpt::Checkpoint c = sample(rng);
  const std::string p = tmp_path("atomic");
  ckpt::save(p, c);
  // A save that died half-way leaves only a partial PATH.tmp; PATH is untouched and still loads.
  std::vector<char> half = read_all(p);
  half.resize(half.size() / 3);
  write_all(p + ".tmp", half);
  const ckpt::Checkpoint d = ckpt::load(p, &c.config);
  EXPECT(d.params == c.params);
  // The next successful save replaces both.
  c.step = 2000;
  ckpt::save(p, c);
  EXPECT(ckpt::load(p).step == 2000);
  EXPECT(!std::ifstream(p + ".tmp").good());
  std::remove(p.c_str());
}

int main() { return minitest::run_all(); }
