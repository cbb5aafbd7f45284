// day50_gpt/checkpoint.h: save and resume a training run, atomically, with every way a file can be
// wrong caught by one clear error.
//
// A checkpoint holds what a resumed run needs to continue with the same losses as an uninterrupted
// one: the configuration, the step, the data position, the random generator's state, the weights
// and AdamW's two moment arrays. Layout (little-endian, as the machines here are):
//
//   "GPTCKPT1"  magic (8 bytes)        u32 version      u32 header bytes
//   i32 vocab, context, layers, heads, width           i64 step      u64 data position
//   u64 rng state                                       u64 n (parameters)
//   f32 params[n]   f32 m[n]   f32 v[n]                 u32 CRC-32 of every byte before it
//
// Writes go to PATH.tmp, are flushed to disk, and replace PATH with rename(), which is atomic on
// POSIX file systems: an interrupted save leaves the previous checkpoint intact.
// Host-only; tested by test_checkpoint.cpp.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "gpt_ref.h"

namespace ckpt {

constexpr char kMagic[8] = {'G', 'P', 'T', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kVersion = 1;

struct Checkpoint {
  gpt::Config config;
  int64_t step = 0;
  uint64_t data_pos = 0;
  uint64_t rng_state = 0;
  std::vector<float> params, m, v;
};

// CRC-32 (IEEE 802.3, reflected, as zlib computes it), table built once.
inline uint32_t crc32(const void* data, size_t n, uint32_t crc = 0) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  crc = ~crc;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

namespace detail {
struct Writer {
  std::vector<unsigned char> buf;
  template <class T>
  void put(const T& x) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&x);
    buf.insert(buf.end(), p, p + sizeof(T));
  }
  void put_floats(const std::vector<float>& v) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(v.data());
    buf.insert(buf.end(), p, p + v.size() * sizeof(float));
  }
};
struct Reader {
  const std::vector<unsigned char>& buf;
  size_t at = 0;
  const std::string& path;
  template <class T>
  T get() {
    if (at + sizeof(T) > buf.size()) throw std::runtime_error(path + ": truncated checkpoint (ends inside the header)");
    T x;
    std::memcpy(&x, &buf[at], sizeof(T));
    at += sizeof(T);
    return x;
  }
  void get_floats(std::vector<float>& v, size_t n) {
    v.resize(n);
    std::memcpy(v.data(), &buf[at], n * sizeof(float));
    at += n * sizeof(float);
  }
};
}  // namespace detail

inline constexpr uint32_t kHeaderBytes = 8 + 4 + 4 + 5 * 4 + 8 + 8 + 8 + 8;

// The largest model a checkpoint may describe: the CLI's ranges (gpt --layers/--heads/--width/--context),
// so that a damaged header is refused before it sizes anything. The model is byte-level: vocab is 256.
struct Limits {
  static constexpr int kVocab = 256;
  static constexpr int kMaxLayers = 96, kMaxHeads = 128, kMinWidth = 8, kMaxWidth = 8192;
  static constexpr int kMinContext = 2, kMaxContext = 8192;
  static constexpr int64_t kMaxStep = 100000000;       // gpt --steps' upper bound
  static constexpr uint64_t kMaxDataPos = 1ull << 48;  // a byte offset into the training text: 256 TiB
};

namespace detail {
// a*b+c in 64 bits; false on overflow.
inline bool mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t& out) {
  uint64_t p;
  return !__builtin_mul_overflow(a, b, &p) && !__builtin_add_overflow(p, c, &out);
}
// Parameters of `c` (as gpt::Layout counts them), computed without building the layout and
// overflow-checked: false if the count does not fit in 64 bits.
inline bool param_count(const gpt::Config& c, uint64_t& n) {
  const uint64_t C = uint64_t(c.width), V = uint64_t(c.vocab), T = uint64_t(c.context), L = uint64_t(c.layers);
  uint64_t per_layer, emb;  // a block: 12 C^2 weights (qkv 3, proj 1, fc 4, fc2 4) and 13 C gains and biases
  if (!mul_add(C, C, 0, per_layer) || !mul_add(per_layer, 12, 0, per_layer) || !mul_add(C, 13, per_layer, per_layer))
    return false;
  if (!mul_add(V + T, C, 2 * C, emb)) return false;  // token and position embeddings, the final LayerNorm
  return mul_add(L, per_layer, emb, n);
}
// Empty if every header field is within Limits, otherwise what is wrong.
inline std::string header_invalid(const gpt::Config& c, int64_t step, uint64_t data_pos) {
  auto in = [](int64_t x, int64_t lo, int64_t hi) { return x >= lo && x <= hi; };
  auto range = [](const char* what, int64_t x, int64_t lo, int64_t hi) {
    return std::string(what) + " " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]";
  };
  if (c.vocab != Limits::kVocab)
    return "vocabulary " + std::to_string(c.vocab) + ", this byte-level model has " + std::to_string(Limits::kVocab);
  if (!in(c.layers, 1, Limits::kMaxLayers)) return range("layers", c.layers, 1, Limits::kMaxLayers);
  if (!in(c.heads, 1, Limits::kMaxHeads)) return range("heads", c.heads, 1, Limits::kMaxHeads);
  if (!in(c.width, Limits::kMinWidth, Limits::kMaxWidth))
    return range("width", c.width, Limits::kMinWidth, Limits::kMaxWidth);
  if (!in(c.context, Limits::kMinContext, Limits::kMaxContext))
    return range("context", c.context, Limits::kMinContext, Limits::kMaxContext);
  if (c.width % c.heads)
    return "heads " + std::to_string(c.heads) + " do not divide the width " + std::to_string(c.width);
  if (!in(step, 0, Limits::kMaxStep)) return range("step", step, 0, Limits::kMaxStep);
  if (data_pos > Limits::kMaxDataPos)
    return "data position " + std::to_string(data_pos) + " is beyond " + std::to_string(Limits::kMaxDataPos);
  return "";
}
}  // namespace detail

// Writes `c` to `path` atomically. Throws std::runtime_error with the reason on failure.
inline void save(const std::string& path, const Checkpoint& c) {
  const size_t n = c.params.size();
  if (c.m.size() != n || c.v.size() != n)
    throw std::runtime_error("checkpoint: parameter and moment arrays differ in size");
  if (n != gpt::Layout(c.config).total)
    throw std::runtime_error("checkpoint: parameter count does not match the configuration");
  const std::string bad = detail::header_invalid(c.config, c.step, c.data_pos);  // load() would refuse it
  if (!bad.empty()) throw std::runtime_error("checkpoint: " + bad);
  detail::Writer w;
  w.buf.reserve(kHeaderBytes + 3 * n * sizeof(float) + 4);
  w.buf.insert(w.buf.end(), kMagic, kMagic + 8);
  w.put(kVersion);
  w.put(kHeaderBytes);
  for (int x : {c.config.vocab, c.config.context, c.config.layers, c.config.heads, c.config.width}) w.put(int32_t(x));
  w.put(c.step);
  w.put(c.data_pos);
  w.put(c.rng_state);
  w.put(uint64_t(n));
  w.put_floats(c.params);
  w.put_floats(c.m);
  w.put_floats(c.v);
  w.put(crc32(w.buf.data(), w.buf.size()));

  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error(path + ": cannot write (" + std::strerror(errno) + ")");
  const bool ok =
      std::fwrite(w.buf.data(), 1, w.buf.size(), f) == w.buf.size() && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  const int err = errno;
  std::fclose(f);
  if (!ok) {
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": write failed (" + std::strerror(err) + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot replace the checkpoint (" + std::strerror(e) + ")");
  }
}

// Reads a checkpoint. Every defect is one std::runtime_error naming the file and the defect:
// missing, not a regular file, not a checkpoint, another version, a header field out of bounds,
// truncated or too long, corrupt (CRC), or (with `expect`) a configuration other than the one this
// run was started with. The header is judged first, against Limits and against the file's size, so a
// damaged header costs nothing: the only allocation is the file itself, once its size is the size
// the header implies.
inline Checkpoint load(const std::string& path, const gpt::Config* expect = nullptr) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct Closer {
    FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) throw std::runtime_error(path + ": not a regular file");
  const uint64_t size = uint64_t(st.st_size);
  std::vector<unsigned char> buf(std::min<uint64_t>(size, kHeaderBytes));
  if (std::fread(buf.data(), 1, buf.size(), f) != buf.size()) throw std::runtime_error(path + ": read failed");
  if (buf.size() < 8 || std::memcmp(buf.data(), kMagic, 8) != 0)
    throw std::runtime_error(path + ": not a checkpoint of this program");
  detail::Reader r{buf, 8, path};
  const uint32_t version = r.get<uint32_t>(), header = r.get<uint32_t>();
  if (version != kVersion || header != kHeaderBytes)
    throw std::runtime_error(path + ": checkpoint version " + std::to_string(version) +
                             ", this program reads version " + std::to_string(kVersion));
  Checkpoint c;
  c.config.vocab = r.get<int32_t>(), c.config.context = r.get<int32_t>(), c.config.layers = r.get<int32_t>();
  c.config.heads = r.get<int32_t>(), c.config.width = r.get<int32_t>();
  c.step = r.get<int64_t>();
  c.data_pos = r.get<uint64_t>();
  c.rng_state = r.get<uint64_t>();
  const uint64_t n = r.get<uint64_t>();
  const std::string bad = detail::header_invalid(c.config, c.step, c.data_pos);
  if (!bad.empty()) throw std::runtime_error(path + ": corrupt checkpoint header (" + bad + ")");
  uint64_t count = 0, want = 0;
  if (!detail::param_count(c.config, count) || n != count)
    throw std::runtime_error(path + ": corrupt checkpoint (parameter count " + std::to_string(n) +
                             " does not match its configuration)");
  if (!detail::mul_add(n, 3 * sizeof(float), kHeaderBytes + 4, want))  // params, m, v, then the CRC
    throw std::runtime_error(path + ": corrupt checkpoint (its size overflows)");
  if (size < want)
    throw std::runtime_error(path + ": truncated checkpoint (" + std::to_string(size) + " bytes, expected " +
                             std::to_string(want) + ")");
  if (size > want)
    throw std::runtime_error(path + ": corrupt checkpoint (" + std::to_string(size - want) + " bytes too many)");
  buf.resize(size_t(want));
  const size_t rest = size_t(want) - kHeaderBytes;
  if (std::fread(buf.data() + kHeaderBytes, 1, rest, f) != rest)
    throw std::runtime_error(path + ": truncated checkpoint (the file shrank while it was read)");
  uint32_t stored;
  std::memcpy(&stored, &buf[want - 4], 4);
  if (crc32(buf.data(), want - 4) != stored) throw std::runtime_error(path + ": corrupt checkpoint (CRC mismatch)");
  r.get_floats(c.params, n);
  r.get_floats(c.m, n);
  r.get_floats(c.v, n);
  if (expect) {
    const gpt::Config& e = *expect;
    if (e.vocab != c.config.vocab || e.context != c.config.context || e.layers != c.config.layers ||
        e.heads != c.config.heads || e.width != c.config.width)
      throw std::runtime_error(path + ": the checkpoint is for " + std::to_string(c.config.layers) + " layers, " +
                               std::to_string(c.config.heads) + " heads, width " + std::to_string(c.config.width) +
                               ", context " + std::to_string(c.config.context) + "; this run asked for " +
                               std::to_string(e.layers) + ", " + std::to_string(e.heads) + ", " +
                               std::to_string(e.width) + ", " + std::to_string(e.context));
  }
  return c;
}

}  // namespace ckpt
