// common/json.h: a tiny JSON value and writer, enough for results files.
//
// Host-only. Non-finite numbers are written as null (JSON has no NaN), so a
// results file never claims a number that was not measured.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace json {

class Value {
 public:
  enum Kind { Null, Bool, Number, String, Array, Object };

  Value() : kind_(Null) {}
  Value(std::nullptr_t) : kind_(Null) {}
  Value(bool b) : kind_(Bool), b_(b) {}
  Value(int x) : kind_(Number), n_(x), is_int_(true), i_(x) {}
  Value(long x) : kind_(Number), n_(double(x)), is_int_(true), i_(x) {}
  Value(long long x) : kind_(Number), n_(double(x)), is_int_(true), i_(x) {}
  Value(unsigned long x) : kind_(Number), n_(double(x)), is_int_(true), i_((long long)x) {}
  Value(unsigned long long x) : kind_(Number), n_(double(x)), is_int_(true), i_((long long)x) {}
  Value(double x) : kind_(Number), n_(x) {}
  Value(const char* s) : kind_(String), s_(s) {}
  Value(std::string s) : kind_(String), s_(std::move(s)) {}

  static Value array() {
    Value v;
    v.kind_ = Array;
    return v;
  }
  static Value object() {
    Value v;
    v.kind_ = Object;
    return v;
  }

  Kind kind() const { return kind_; }

  // Object access: inserts a key if missing and keeps insertion order for output.
  Value& operator[](const std::string& key) {
    if (kind_ == Null) kind_ = Object;
    for (auto& kv : obj_)
      if (kv.first == key) return kv.second;
    obj_.emplace_back(key, Value());
    return obj_.back().second;
  }
  const Value* find(const std::string& key) const {
    for (auto& kv : obj_)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  void push(Value v) {
    if (kind_ == Null) kind_ = Array;
    arr_.push_back(std::move(v));
  }
  size_t size() const { return kind_ == Array ? arr_.size() : obj_.size(); }
  double number() const { return n_; }
  const std::string& str() const { return s_; }

  std::string dump(int indent = 2) const {
    std::string out;
    write(out, indent, 0);
    out += '\n';
    return out;
  }

  // The length of the well-formed UTF-8 sequence at s[i] (1 to 4), or 0 where the bytes are not one
  // (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
  static size_t utf8_length(const std::string& s, size_t i) {
    const unsigned char c = s[i];
    if (c < 0x80) return 1;
    size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
    const unsigned char d = s[i + 1];
    if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d >= 0xA0) || (c == 0xF0 && d < 0x90) || (c == 0xF4 && d >= 0x90))
      return 0;
    return n;
  }

  // A JSON string literal. JSON text is UTF-8, so a byte that is not part of a well-formed sequence
  // (a model's sample may hold any byte) becomes U+FFFD, as Python's errors="replace" reads it;
  // otherwise one such byte would make the whole results file unreadable.
  static std::string escape(const std::string& s) {
    std::string o = "\"";
    for (size_t i = 0; i < s.size(); ++i) {
      const unsigned char c = s[i];
      if (c >= 0x80) {
        const size_t n = utf8_length(s, i);
        if (n == 0) {
          o += "\\ufffd";
        } else {
          o.append(s, i, n);
          i += n - 1;
        }
        continue;
      }
      switch (c) {
        case '"':
          o += "\\\"";
          break;
        case '\\':
          o += "\\\\";
          break;
        case '\n':
          o += "\\n";
          break;
        case '\t':
          o += "\\t";
          break;
        case '\r':
          o += "\\r";
          break;
        default:
          if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
          } else
            o += char(c);
      }
    }
    return o + "\"";
  }

 private:
  void write(std::string& o, int indent, int depth) const {
    const std::string pad(size_t(indent) * (depth + 1), ' '), pad0(size_t(indent) * depth, ' ');
    switch (kind_) {
      case Null:
        o += "null";
        break;
      case Bool:
        o += b_ ? "true" : "false";
        break;
      case Number: {
        if (!std::isfinite(n_)) {
          o += "null";
          break;
        }
        char b[40];
        if (is_int_)
          std::snprintf(b, sizeof b, "%lld", i_);
        else if (n_ == std::floor(n_) && std::fabs(n_) < 1e15)
          std::snprintf(b, sizeof b, "%.0f", n_);
        else
          std::snprintf(b, sizeof b, "%.6g", n_);
        o += b;
        break;
      }
      case String:
        o += escape(s_);
        break;
      case Array: {
        if (arr_.empty()) {
          o += "[]";
          break;
        }
        // Arrays of scalars stay on one line: shapes and size lists read better that way.
        bool flat = true;
        for (auto& v : arr_) flat = flat && v.kind_ != Array && v.kind_ != Object;
        o += "[";
        for (size_t i = 0; i < arr_.size(); ++i) {
          if (i) o += flat ? ", " : ",";
          if (!flat) o += "\n" + pad;
          arr_[i].write(o, indent, depth + 1);
        }
        if (!flat) o += "\n" + pad0;
        o += "]";
        break;
      }
      case Object: {
        if (obj_.empty()) {
          o += "{}";
          break;
        }
        o += "{";
        for (size_t i = 0; i < obj_.size(); ++i) {
          o += i ? ",\n" : "\n";
          o += pad + escape(obj_[i].first) + ": ";
          obj_[i].second.write(o, indent, depth + 1);
        }
        o += "\n" + pad0 + "}";
        break;
      }
    }
  }

  Kind kind_;
  bool b_ = false;
  double n_ = 0;
  bool is_int_ = false;
  long long i_ = 0;
  std::string s_;
  std::vector<Value> arr_;
  std::vector<std::pair<std::string, Value>> obj_;
};

}  // namespace json
