// common/npy.h: read and write NumPy .npy files (format version 1.0, C order, little-endian).
//
// Host-only. `--save-npy DIR` in a lesson writes the inputs and outputs of its main
// operation with these, so a learner can inspect them in Python:
//     import numpy as np; a = np.load("out/A.npy")
// Supported dtypes: float32 (<f4), float64 (<f8), int32 (<i4), uint8 (|u1), uint16 (<u2).
// bf16 has no NumPy dtype: convert to float32 before saving.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace npy {

template <class T>
struct Dtype;
template <>
struct Dtype<float> {
  static constexpr const char* str = "<f4";
};
template <>
struct Dtype<double> {
  static constexpr const char* str = "<f8";
};
template <>
struct Dtype<int32_t> {
  static constexpr const char* str = "<i4";
};
template <>
struct Dtype<uint8_t> {
  static constexpr const char* str = "|u1";
};
template <>
struct Dtype<uint16_t> {
  static constexpr const char* str = "<u2";
};

inline std::string shape_str(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  return s + ")";
}

// Throws std::runtime_error with the path in the message on any failure.
template <class T>
void save(const std::string& path, const T* data, const std::vector<size_t>& shape) {
  size_t count = 1;
  for (size_t d : shape) count *= d;
  std::string header =
      std::string("{'descr': '") + Dtype<T>::str + "', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  // Magic(6) + version(2) + header length(2) + header, padded with spaces to a multiple of
  // 64 bytes and ended by '\n', as the format specification asks.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot open '" + path + "' for writing");
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint16_t hlen = uint16_t(header.size());
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(&hlen, 2, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            (count == 0 || std::fwrite(data, sizeof(T), count, f) == count);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw std::runtime_error("write failed for '" + path + "'");
}

template <class T>
struct Array {
  std::vector<size_t> shape;
  std::vector<T> data;
};

// Loads a .npy whose dtype must be exactly T's (no silent conversion).
template <class T>
Array<T> load(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open '" + path + "'");
  auto fail = [&](const std::string& why) {
    std::fclose(f);
    throw std::runtime_error("'" + path + "' is not a supported .npy file: " + why);
  };
  unsigned char magic[8];
  if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail("bad magic");
  uint32_t hlen = 0;
  if (magic[6] == 1) {
    uint16_t h;
    if (std::fread(&h, 2, 1, f) != 1) fail("truncated header");
    hlen = h;
  } else if (magic[6] == 2 || magic[6] == 3) {
    if (std::fread(&hlen, 4, 1, f) != 1) fail("truncated header");
  } else {
    fail("unknown version");
  }
  if (hlen > 65536) fail("header too long");
  std::string header(hlen, '\0');
  if (std::fread(&header[0], 1, hlen, f) != hlen) fail("truncated header");
  auto value_of = [&](const std::string& key) -> std::string {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos) fail("missing '" + key + "'");
    size_t colon = header.find(':', k);
    if (colon == std::string::npos) fail("malformed header");
    size_t s = header.find_first_not_of(' ', colon + 1);
    if (s == std::string::npos) fail("malformed header");
    size_t e = header[s] == '(' ? header.find(')', s) + 1 : header.find_first_of(",}", s);
    if (e == std::string::npos || e == 0) fail("malformed header");
    return header.substr(s, e - s);
  };
  std::string descr = value_of("descr");
  if (descr != std::string("'") + Dtype<T>::str + "'") fail("dtype " + descr + ", expected '" + Dtype<T>::str + "'");
  if (value_of("fortran_order") != "False") fail("Fortran order is not supported");
  std::string sh = value_of("shape");  // "(2, 3)" or "(5,)" or "()"
  Array<T> a;
  size_t count = 1;
  for (size_t i = 1; i + 1 < sh.size();) {
    size_t j = sh.find_first_of(",)", i);
    std::string tok = sh.substr(i, j - i);
    size_t b = tok.find_first_not_of(' ');
    if (b != std::string::npos) {
      tok = tok.substr(b);
      char* end = nullptr;
      unsigned long long d = std::strtoull(tok.c_str(), &end, 10);
      if (end == tok.c_str()) fail("bad shape " + sh);
      a.shape.push_back(size_t(d));
      count *= size_t(d);
    }
    if (j == std::string::npos) break;
    i = j + 1;
  }
  a.data.resize(count);
  if (count && std::fread(a.data.data(), sizeof(T), count, f) != count) fail("data shorter than its shape");
  std::fclose(f);
  return a;
}

}  // namespace npy
