// day50_gpt/train_ref.h: the training loop's host-side pieces: the byte corpus and its batches,
// AdamW with decoupled weight decay, gradient-norm clipping, and the warm-up + cosine schedule.
//
// The GPU program does the same arithmetic in kernels; these are the definitions it is checked
// against, and a CPU training loop the host tests run end to end (loss must fall; a resumed run
// must reproduce an uninterrupted one exactly). Host-only; tested by test_train_ref.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpt_ref.h"

namespace train {

// ---- Data: any file, read as bytes (the vocabulary is the 256 byte values) ----------------------
struct Corpus {
  std::vector<int> train, val;  // tokens
};

// The last `val_fraction` of the file is held out for validation (contiguous, so no sequence
// straddles the two). Both parts must hold at least one full sequence of `context` + 1 bytes.
inline Corpus split_bytes(const std::string& bytes, int context, double val_fraction = 0.1) {
  const size_t need = size_t(context) + 1;
  const size_t nval = size_t(double(bytes.size()) * val_fraction);
  if (bytes.size() < 2 * need || nval < need || bytes.size() - nval < need)
    throw std::runtime_error("the text has " + std::to_string(bytes.size()) + " bytes; with context " +
                             std::to_string(context) + " it needs at least " +
                             std::to_string(std::max(2 * need, size_t(double(need) / val_fraction) + need)));
  Corpus c;
  for (size_t i = 0; i < bytes.size(); ++i)
    (i < bytes.size() - nval ? c.train : c.val).push_back(int(static_cast<unsigned char>(bytes[i])));
  return c;
}

inline std::string read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(path + ": cannot open the data file");
  std::string s;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

// B sequences of T tokens starting at `pos`, consecutive and wrapping at the end; targets are the
// next bytes. Returns the position after the batch (what a checkpoint stores).
inline uint64_t batch(const std::vector<int>& data, uint64_t pos, int B, int T, std::vector<int>& tokens,
                      std::vector<int>& targets) {
  const size_t n = data.size();
  tokens.resize(size_t(B) * T), targets.resize(size_t(B) * T);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const size_t i = size_t((pos + uint64_t(b) * T + t) % n);
      tokens[size_t(b) * T + t] = data[i];
      targets[size_t(b) * T + t] = data[(i + 1) % n];
    }
  return (pos + uint64_t(B) * T) % n;
}

// Random batches (the default): B sequences of T tokens, sequence b (b0 + b in the global batch)
// starting at dropout::sequence_start(key, step, b0 + b, n, T); targets are the next bytes. Unlike
// batch(), every part of the text is equally likely at every step, so the model never trains on the
// plays in file order (which made the validation loss rise and fall with the play it had last seen).
inline void batch_random(const std::vector<int>& data, uint64_t key, int64_t step, uint64_t b0, int B, int T,
                         std::vector<int>& tokens, std::vector<int>& targets) {
  tokens.resize(size_t(B) * T), targets.resize(size_t(B) * T);
  for (int b = 0; b < B; ++b) {
    const uint64_t s = dropout::sequence_start(key, step, b0 + uint64_t(b), data.size(), T);
    for (int t = 0; t < T; ++t) {
      tokens[size_t(b) * T + t] = data[size_t(s) + size_t(t)];
      targets[size_t(b) * T + t] = data[size_t(s) + size_t(t) + 1];
    }
  }
}

// ---- Optimizer ----------------------------------------------------------------------------------
struct AdamW {
  double lr = 6e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

// Which parameters decay: the matrices and embeddings (2-D), not the biases and LayerNorm gains.
inline std::vector<uint8_t> decay_mask(const gpt::Config& c) {
  const gpt::Layout lay(c);
  std::vector<uint8_t> m(lay.total, 0);
  const size_t C = size_t(c.width);
  auto on = [&](size_t at, size_t n) {
    for (size_t i = 0; i < n; ++i) m[at + i] = 1;
  };
  on(lay.wte, size_t(c.vocab) * C);
  on(lay.wpe, size_t(c.context) * C);
  for (const auto& L : lay.layer)
    on(L.qkv_w, 3 * C * C), on(L.proj_w, C * C), on(L.fc_w, 4 * C * C), on(L.fc2_w, 4 * C * C);
  return m;
}

// One AdamW step t (1-based) with learning rate lr: p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p).
inline void adamw_step(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m, std::vector<float>& v,
                       const std::vector<uint8_t>& decay, const AdamW& o, double lr, int64_t t) {
  const double bc1 = 1.0 - std::pow(o.beta1, double(t)), bc2 = 1.0 - std::pow(o.beta2, double(t));
  for (size_t i = 0; i < p.size(); ++i) {
    const float gi = g[i];
    m[i] = float(o.beta1 * m[i] + (1 - o.beta1) * gi);
    v[i] = float(o.beta2 * v[i] + (1 - o.beta2) * double(gi) * gi);
    const double mh = m[i] / bc1, vh = v[i] / bc2;
    p[i] = float(p[i] - lr * (mh / (std::sqrt(vh) + o.eps) + (decay[i] ? o.weight_decay * p[i] : 0.0)));
  }
}

// Scales g so that its L2 norm is at most max_norm; returns the norm before clipping.
inline double clip_grad_norm(std::vector<float>& g, double max_norm) {
  double s = 0;
  for (float x : g) s += double(x) * x;
  const double norm = std::sqrt(s);
  if (norm > max_norm && norm > 0) {
    const double k = max_norm / norm;
    for (auto& x : g) x = float(x * k);
  }
  return norm;
}

// Linear warm-up to lr_max over `warmup` steps, then cosine decay to lr_min at step `total`.
inline double lr_at(int64_t step, int64_t warmup, int64_t total, double lr_max, double lr_min) {
  if (step < warmup) return lr_max * double(step + 1) / double(warmup);
  if (step >= total) return lr_min;
  const double r = double(step - warmup) / double(std::max<int64_t>(1, total - warmup));
  return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + std::cos(3.141592653589793 * r));
}

}  // namespace train
