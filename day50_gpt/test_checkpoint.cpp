// day50_gpt/test_checkpoint.cpp: checkpoints round-trip exactly, and every defect is caught.
#include <cstdio>
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
