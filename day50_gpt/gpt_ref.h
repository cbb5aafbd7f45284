// day50_gpt/gpt_ref.h: a GPT-2-style model on the CPU, forward and backward, in double precision.
//
// The reference the GPU program is checked against (logits, loss, every parameter gradient) and
// the thing the host tests check by finite differences. Host-only C++17, no dependencies.
//
// Layout (GPT-2): token + learned position embeddings; L pre-LayerNorm blocks, each
//   x += proj(causal_attention(LN1(x)))      attention: H heads of size C/H, scale 1/sqrt(C/H)
//   x += fc2(GELU_tanh(fc1(LN2(x))))         MLP 4x wide
// then a final LayerNorm and the output head tied to the token embedding (logits = LNf(x) . wte^T),
// and the mean cross-entropy over all B*T positions. Linear weights are stored [out][in] (as llm.c
// and PyTorch's nn.Linear do): y = x W^T + b.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "nn/dropout.h"

namespace gpt {

struct Config {
  int vocab = 256;    // byte-level: every byte is a token
  int context = 256;  // T, the longest sequence
  int layers = 6;     // L
  int heads = 6;      // H
  int width = 384;    // C
  // Empty if the configuration makes sense, otherwise why not.
  std::string invalid() const {
    if (vocab < 2 || context < 1 || layers < 1 || heads < 1 || width < 1)
      return "all sizes must be positive (vocab >= 2)";
    if (width % heads)
      return "heads (" + std::to_string(heads) + ") must divide the width (" + std::to_string(width) + ")";
    return "";
  }
};

// Every parameter tensor, in one flat array (one allocation, one optimizer loop, one checkpoint
// record). `Layout` gives each tensor's offset and size.
struct Layout {
  size_t wte, wpe, lnf_w, lnf_b, total;
  struct Layer {
    size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b;
  };
  std::vector<Layer> layer;

  explicit Layout(const Config& c) {
    const size_t C = size_t(c.width);
    size_t o = 0;
    auto take = [&](size_t n) {
      const size_t at = o;
      o += n;
      return at;
    };
    wte = take(size_t(c.vocab) * C);
    wpe = take(size_t(c.context) * C);
    for (int l = 0; l < c.layers; ++l) {
      Layer L;
      L.ln1_w = take(C), L.ln1_b = take(C);
      L.qkv_w = take(3 * C * C), L.qkv_b = take(3 * C);
      L.proj_w = take(C * C), L.proj_b = take(C);
      L.ln2_w = take(C), L.ln2_b = take(C);
      L.fc_w = take(4 * C * C), L.fc_b = take(4 * C);
      L.fc2_w = take(4 * C * C), L.fc2_b = take(C);
      layer.push_back(L);
    }
    lnf_w = take(C), lnf_b = take(C);
    total = o;
  }
  // The parameters as [begin, end) ranges in the order the forward first reads them: the embeddings
  // (range 0), then block l (range 1 + l), the last block's range running on over the final LayerNorm.
  // They tile [0, total) in order. Work done range by range (AdamW beside the next forward, ZeRO-1's
  // gather on the copy engines) lets the forward wait for each range as it reaches it.
  std::vector<std::pair<size_t, size_t>> forward_ranges() const {
    std::vector<std::pair<size_t, size_t>> r{{0, layer.empty() ? total : layer[0].ln1_w}};
    for (size_t l = 0; l < layer.size(); ++l)
      r.push_back({layer[l].ln1_w, l + 1 < layer.size() ? layer[l + 1].ln1_w : total});
    return r;
  }
};

// GPT-2's initialization: N(0, 0.02) for weights and embeddings, N(0, 0.02/sqrt(2L)) for the two
// projections that write into the residual stream, zeros for biases, ones for LayerNorm gains.
template <class Rng>
std::vector<float> init_params(const Config& c, Rng& rng) {
  const Layout lay(c);
  std::vector<float> p(lay.total, 0.f);
  auto normal = [&](size_t at, size_t n, double std) {
    for (size_t i = 0; i < n; i += 2) {  // Box-Muller, two at a time
      const double u1 = (double(rng.next() >> 11) + 1.0) / 9007199254740993.0,
                   u2 = double(rng.next() >> 11) / 9007199254740992.0;
      const double r = std::sqrt(-2.0 * std::log(u1));
      p[at + i] = float(std * r * std::cos(6.283185307179586 * u2));
      if (i + 1 < n) p[at + i + 1] = float(std * r * std::sin(6.283185307179586 * u2));
    }
  };
  auto ones = [&](size_t at, size_t n) {
    for (size_t i = 0; i < n; ++i) p[at + i] = 1.f;
  };
  const size_t C = size_t(c.width);
  const double resid = 0.02 / std::sqrt(2.0 * c.layers);
  normal(lay.wte, size_t(c.vocab) * C, 0.02);
  normal(lay.wpe, size_t(c.context) * C, 0.02);
  for (const auto& L : lay.layer) {
    ones(L.ln1_w, C), ones(L.ln2_w, C);
    normal(L.qkv_w, 3 * C * C, 0.02);
    normal(L.proj_w, C * C, resid);
    normal(L.fc_w, 4 * C * C, 0.02);
    normal(L.fc2_w, 4 * C * C, resid);
  }
  ones(lay.lnf_w, C);
  return p;
}

namespace detail {

constexpr double kEps = 1e-5;  // LayerNorm epsilon (GPT-2's)

inline double gelu(double x) {
  const double k = 0.7978845608028654;  // sqrt(2/pi)
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double gelu_grad(double x) {
  const double k = 0.7978845608028654, u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x * x);
}

// out[n][o] = sum_i in[n][i] * w[o][i] + b[o]
inline void linear(const double* in, const float* w, const float* b, double* out, size_t N, size_t I, size_t O) {
  for (size_t n = 0; n < N; ++n)
    for (size_t o = 0; o < O; ++o) {
      double a = b ? b[o] : 0.0;
      for (size_t i = 0; i < I; ++i) a += in[n * I + i] * double(w[o * I + i]);
      out[n * O + o] = a;
    }
}
// Given dout: din += dout W, dw += dout^T in, db += sum dout.
inline void linear_back(const double* in, const float* w, const double* dout, double* din, double* dw, double* db,
                        size_t N, size_t I, size_t O) {
  for (size_t n = 0; n < N; ++n)
    for (size_t o = 0; o < O; ++o) {
      const double g = dout[n * O + o];
      if (db) db[o] += g;
      for (size_t i = 0; i < I; ++i) {
        din[n * I + i] += g * double(w[o * I + i]);
        dw[o * I + i] += g * in[n * I + i];
      }
    }
}

// LayerNorm over the last dimension; keeps mean and 1/std for the backward.
inline void layernorm(const double* x, const float* g, const float* b, double* y, double* mean, double* rstd, size_t N,
                      size_t C) {
  for (size_t n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (size_t i = 0; i < C; ++i) m += x[n * C + i];
    m /= double(C);
    for (size_t i = 0; i < C; ++i) v += (x[n * C + i] - m) * (x[n * C + i] - m);
    v /= double(C);
    const double r = 1.0 / std::sqrt(v + kEps);
    mean[n] = m, rstd[n] = r;
    for (size_t i = 0; i < C; ++i) y[n * C + i] = (x[n * C + i] - m) * r * double(g[i]) + double(b[i]);
  }
}
inline void layernorm_back(const double* x, const float* g, const double* mean, const double* rstd, const double* dy,
                           double* dx, double* dg, double* db, size_t N, size_t C) {
  for (size_t n = 0; n < N; ++n) {
    double s1 = 0, s2 = 0;  // mean of dxhat and of dxhat * xhat
    for (size_t i = 0; i < C; ++i) {
      const double xh = (x[n * C + i] - mean[n]) * rstd[n], dxh = dy[n * C + i] * double(g[i]);
      dg[i] += dy[n * C + i] * xh;
      db[i] += dy[n * C + i];
      s1 += dxh, s2 += dxh * xh;
    }
    s1 /= double(C), s2 /= double(C);
    for (size_t i = 0; i < C; ++i) {
      const double xh = (x[n * C + i] - mean[n]) * rstd[n], dxh = dy[n * C + i] * double(g[i]);
      dx[n * C + i] += rstd[n] * (dxh - s1 - xh * s2);
    }
  }
}

}  // namespace detail

// Causal attention of one (batch b, head h): q, k, v are the slices [0, C), [C, 2C), [2C, 3C) of
// each row of qkv ([B*T][3C]); P ([T][T], row t valid for s <= t) keeps the probabilities for the
// backward; the head's output goes to out[b*T + t][h*hs ...]. Also the reference of the GPU's
// attention check at the model's real shape.
inline void attention_head_fwd(const double* qkv, int T, size_t C, size_t H, int b, size_t h, double* P, double* out) {
  const size_t hs = C / H;
  const double scale = 1.0 / std::sqrt(double(hs));
  for (int t = 0; t < T; ++t) {
    const double* q = &qkv[(size_t(b) * T + t) * 3 * C + h * hs];
    double* Pt = P + size_t(t) * T;
    double mx = -1e300;
    for (int s = 0; s <= t; ++s) {
      const double* k = &qkv[(size_t(b) * T + s) * 3 * C + C + h * hs];
      double d = 0;
      for (size_t i = 0; i < hs; ++i) d += q[i] * k[i];
      Pt[s] = d * scale;
      mx = std::max(mx, Pt[s]);
    }
    double sum = 0;
    for (int s = 0; s <= t; ++s) sum += (Pt[s] = std::exp(Pt[s] - mx));
    for (int s = 0; s <= t; ++s) Pt[s] /= sum;
    double* o = &out[(size_t(b) * T + t) * C + h * hs];
    for (size_t i = 0; i < hs; ++i) o[i] = 0;
    for (int s = 0; s <= t; ++s) {
      const double* v = &qkv[(size_t(b) * T + s) * 3 * C + 2 * C + h * hs];
      for (size_t i = 0; i < hs; ++i) o[i] += Pt[s] * v[i];
    }
  }
}
// Its backward: dout ([B*T][C]) -> dqkv ([B*T][3C], accumulated).
inline void attention_head_bwd(const double* qkv, const double* P, const double* datt, int T, size_t C, size_t H, int b,
                               size_t h, double* dqkv) {
  const size_t hs = C / H;
  const double scale = 1.0 / std::sqrt(double(hs));
  for (int t = 0; t < T; ++t) {
    const double* Pt = P + size_t(t) * T;
    const double* dout = &datt[(size_t(b) * T + t) * C + h * hs];
    // dP[s] = dout . v_s ; dv_s += P[s] dout
    std::vector<double> dP(size_t(t) + 1);
    for (int s = 0; s <= t; ++s) {
      const double* v = &qkv[(size_t(b) * T + s) * 3 * C + 2 * C + h * hs];
      double* dv = &dqkv[(size_t(b) * T + s) * 3 * C + 2 * C + h * hs];
      double d = 0;
      for (size_t i = 0; i < hs; ++i) d += dout[i] * v[i], dv[i] += Pt[s] * dout[i];
      dP[size_t(s)] = d;
    }
    // softmax backward: dscore[s] = P[s] (dP[s] - sum_u P[u] dP[u]); score = scale q.k
    double dot = 0;
    for (int s = 0; s <= t; ++s) dot += Pt[s] * dP[size_t(s)];
    const double* q = &qkv[(size_t(b) * T + t) * 3 * C + h * hs];
    double* dq = &dqkv[(size_t(b) * T + t) * 3 * C + h * hs];
    for (int s = 0; s <= t; ++s) {
      const double ds = Pt[s] * (dP[size_t(s)] - dot) * scale;
      const double* k = &qkv[(size_t(b) * T + s) * 3 * C + C + h * hs];
      double* dk = &dqkv[(size_t(b) * T + s) * 3 * C + C + h * hs];
      for (size_t i = 0; i < hs; ++i) dq[i] += ds * k[i], dk[i] += ds * q[i];
    }
  }
}

// Everything the forward keeps for the backward, per layer.
struct Activations {
  dropout::Params drop;    // the forward's dropout (the backward regenerates its masks from it)
  std::vector<double> x0;  // embeddings after dropout, [B*T][C]
  struct Layer {
    std::vector<double> x_in, ln1, ln1_mean, ln1_rstd, qkv, att /* [B][H][T][T] probabilities */, att_out, x_mid, ln2,
        ln2_mean, ln2_rstd, fc, gelu;
  };
  std::vector<Layer> layer;
  std::vector<double> x_out, lnf, lnf_mean, lnf_rstd, logits, probs;
};

// x[i] *= 0 or 1/(1-p), element i of `site`'s mask (nothing when dropout is off).
inline void apply_dropout(const dropout::Params& d, uint32_t site, double* x, size_t n) {
  if (!d.on) return;
  for (size_t i = 0; i < n; ++i) x[i] *= double(dropout::factor(d, site, i));
}

// Forward over tokens [B][T] (and targets [B][T], for the loss). Returns the mean cross-entropy;
// `acts` keeps what the backward needs; logits are in acts.logits ([B*T][V]). Dropout `drop` (off by
// default) at nanoGPT's three sites: the embedding's output, and each sublayer's output before its
// residual add; the element index is row * C + column (nn/dropout.h).
inline double forward(const Config& c, const std::vector<float>& p, const std::vector<int>& tokens,
                      const std::vector<int>& targets, int B, int T, Activations& a,
                      const dropout::Params& drop = dropout::Params()) {
  using namespace detail;
  if (T > c.context) throw std::invalid_argument("sequence longer than the context");
  const Layout lay(c);
  const size_t C = size_t(c.width), N = size_t(B) * T, V = size_t(c.vocab), H = size_t(c.heads);
  a.x0.assign(N * C, 0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const int tok = tokens[size_t(b) * T + t];
      if (tok < 0 || tok >= c.vocab) throw std::invalid_argument("token out of range");
      for (size_t i = 0; i < C; ++i)
        a.x0[(size_t(b) * T + t) * C + i] =
            double(p[lay.wte + size_t(tok) * C + i]) + double(p[lay.wpe + size_t(t) * C + i]);
    }
  a.drop = drop;
  apply_dropout(drop, dropout::site_embed(), a.x0.data(), N * C);
  std::vector<double> x = a.x0;
  a.layer.assign(size_t(c.layers), {});
  for (int l = 0; l < c.layers; ++l) {
    const auto& L = lay.layer[size_t(l)];
    auto& A = a.layer[size_t(l)];
    A.x_in = x;
    A.ln1.assign(N * C, 0), A.ln1_mean.assign(N, 0), A.ln1_rstd.assign(N, 0);
    layernorm(x.data(), &p[L.ln1_w], &p[L.ln1_b], A.ln1.data(), A.ln1_mean.data(), A.ln1_rstd.data(), N, C);
    A.qkv.assign(N * 3 * C, 0);
    linear(A.ln1.data(), &p[L.qkv_w], &p[L.qkv_b], A.qkv.data(), N, C, 3 * C);
    A.att.assign(size_t(B) * H * T * T, 0);
    A.att_out.assign(N * C, 0);
    for (int b = 0; b < B; ++b)
      for (size_t h = 0; h < H; ++h)
        attention_head_fwd(A.qkv.data(), T, C, H, b, h, &A.att[(size_t(b) * H + h) * T * T], A.att_out.data());
    std::vector<double> y(N * C);
    linear(A.att_out.data(), &p[L.proj_w], &p[L.proj_b], y.data(), N, C, C);
    apply_dropout(drop, dropout::site_attn(l), y.data(), N * C);
    for (size_t i = 0; i < N * C; ++i) x[i] += y[i];
    A.x_mid = x;
    A.ln2.assign(N * C, 0), A.ln2_mean.assign(N, 0), A.ln2_rstd.assign(N, 0);
    layernorm(x.data(), &p[L.ln2_w], &p[L.ln2_b], A.ln2.data(), A.ln2_mean.data(), A.ln2_rstd.data(), N, C);
    A.fc.assign(N * 4 * C, 0);
    linear(A.ln2.data(), &p[L.fc_w], &p[L.fc_b], A.fc.data(), N, C, 4 * C);
    A.gelu.resize(N * 4 * C);
    for (size_t i = 0; i < N * 4 * C; ++i) A.gelu[i] = gelu(A.fc[i]);
    linear(A.gelu.data(), &p[L.fc2_w], &p[L.fc2_b], y.data(), N, 4 * C, C);
    apply_dropout(drop, dropout::site_mlp(l), y.data(), N * C);
    for (size_t i = 0; i < N * C; ++i) x[i] += y[i];
  }
  a.x_out = x;
  a.lnf.assign(N * C, 0), a.lnf_mean.assign(N, 0), a.lnf_rstd.assign(N, 0);
  layernorm(x.data(), &p[lay.lnf_w], &p[lay.lnf_b], a.lnf.data(), a.lnf_mean.data(), a.lnf_rstd.data(), N, C);
  a.logits.assign(N * V, 0);
  linear(a.lnf.data(), &p[lay.wte], nullptr, a.logits.data(), N, C, V);  // the tied head
  a.probs.assign(N * V, 0);
  double loss = 0;
  for (size_t n = 0; n < N; ++n) {
    const double* z = &a.logits[n * V];
    double mx = -1e300, sum = 0;
    for (size_t v = 0; v < V; ++v) mx = std::max(mx, z[v]);
    for (size_t v = 0; v < V; ++v) sum += (a.probs[n * V + v] = std::exp(z[v] - mx));
    for (size_t v = 0; v < V; ++v) a.probs[n * V + v] /= sum;
    if (!targets.empty()) {
      const int tg = targets[n];
      if (tg < 0 || tg >= c.vocab) throw std::invalid_argument("target out of range");
      loss += -std::log(a.probs[n * V + size_t(tg)]);
    }
  }
  return targets.empty() ? 0.0 : loss / double(N);
}

// The gradient of the mean cross-entropy with respect to every parameter (same layout as p).
inline std::vector<double> backward(const Config& c, const std::vector<float>& p, const std::vector<int>& tokens,
                                    const std::vector<int>& targets, int B, int T, const Activations& a) {
  using namespace detail;
  const Layout lay(c);
  const size_t C = size_t(c.width), N = size_t(B) * T, V = size_t(c.vocab), H = size_t(c.heads);
  std::vector<double> g(lay.total, 0.0);
  // d loss / d logits = (softmax - onehot) / N
  std::vector<double> dlogits(N * V);
  for (size_t n = 0; n < N; ++n)
    for (size_t v = 0; v < V; ++v)
      dlogits[n * V + v] = (a.probs[n * V + v] - (int(v) == targets[n] ? 1.0 : 0.0)) / double(N);
  std::vector<double> dlnf(N * C, 0.0), dx(N * C, 0.0);
  linear_back(a.lnf.data(), &p[lay.wte], dlogits.data(), dlnf.data(), &g[lay.wte], nullptr, N, C, V);
  layernorm_back(a.x_out.data(), &p[lay.lnf_w], a.lnf_mean.data(), a.lnf_rstd.data(), dlnf.data(), dx.data(),
                 &g[lay.lnf_w], &g[lay.lnf_b], N, C);
  for (int l = c.layers - 1; l >= 0; --l) {
    const auto& L = lay.layer[size_t(l)];
    const auto& A = a.layer[size_t(l)];
    // MLP: x_out = x_mid + drop(fc2(gelu(fc(ln2(x_mid))))); dy = the mask times dx
    std::vector<double> dgelu(N * 4 * C, 0.0), dln2(N * C, 0.0), dy = dx;
    apply_dropout(a.drop, dropout::site_mlp(l), dy.data(), N * C);
    linear_back(A.gelu.data(), &p[L.fc2_w], dy.data(), dgelu.data(), &g[L.fc2_w], &g[L.fc2_b], N, 4 * C, C);
    for (size_t i = 0; i < N * 4 * C; ++i) dgelu[i] *= gelu_grad(A.fc[i]);
    linear_back(A.ln2.data(), &p[L.fc_w], dgelu.data(), dln2.data(), &g[L.fc_w], &g[L.fc_b], N, C, 4 * C);
    layernorm_back(A.x_mid.data(), &p[L.ln2_w], A.ln2_mean.data(), A.ln2_rstd.data(), dln2.data(), dx.data(),
                   &g[L.ln2_w], &g[L.ln2_b], N, C);
    // Attention: x_mid = x_in + drop(proj(attention(qkv(ln1(x_in)))))
    std::vector<double> datt_out(N * C, 0.0), dqkv(N * 3 * C, 0.0), dln1(N * C, 0.0);
    dy = dx;
    apply_dropout(a.drop, dropout::site_attn(l), dy.data(), N * C);
    linear_back(A.att_out.data(), &p[L.proj_w], dy.data(), datt_out.data(), &g[L.proj_w], &g[L.proj_b], N, C, C);
    for (int b = 0; b < B; ++b)
      for (size_t h = 0; h < H; ++h)
        attention_head_bwd(A.qkv.data(), &A.att[(size_t(b) * H + h) * T * T], datt_out.data(), T, C, H, b, h,
                           dqkv.data());
    linear_back(A.ln1.data(), &p[L.qkv_w], dqkv.data(), dln1.data(), &g[L.qkv_w], &g[L.qkv_b], N, C, 3 * C);
    layernorm_back(A.x_in.data(), &p[L.ln1_w], A.ln1_mean.data(), A.ln1_rstd.data(), dln1.data(), dx.data(),
                   &g[L.ln1_w], &g[L.ln1_b], N, C);
  }
  // Embeddings (through their dropout): the token embedding gets this too (tied with the head).
  apply_dropout(a.drop, dropout::site_embed(), dx.data(), N * C);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const int tok = tokens[size_t(b) * T + t];
      for (size_t i = 0; i < C; ++i) {
        const double d = dx[(size_t(b) * T + t) * C + i];
        g[lay.wte + size_t(tok) * C + i] += d;
        g[lay.wpe + size_t(t) * C + i] += d;
      }
    }
  return g;
}

// ---- Generation with a KV cache (the reference for the GPU's --sample path) --------------------
// One position at a time: the new token's key and value are appended to each layer's cache and
// its query attends to positions 0..pos. The logits must equal the full forward's at that position
// (test_gpt_ref.cpp checks it): the cache is an optimization, not an approximation.
struct KVCache {
  std::vector<std::vector<double>> k, v;  // per layer: [context][C]
  explicit KVCache(const Config& c)
      : k(size_t(c.layers), std::vector<double>(size_t(c.context) * c.width)),
        v(size_t(c.layers), std::vector<double>(size_t(c.context) * c.width)) {}
};

inline std::vector<double> decode_step(const Config& c, const std::vector<float>& p, KVCache& cache, int token,
                                       int pos) {
  using namespace detail;
  if (pos >= c.context) throw std::invalid_argument("position beyond the context");
  const Layout lay(c);
  const size_t C = size_t(c.width), H = size_t(c.heads), hs = C / H, V = size_t(c.vocab);
  std::vector<double> x(C), ln(C), qkv(3 * C), att(C), y(C), fc(4 * C);
  double mean, rstd;
  for (size_t i = 0; i < C; ++i)
    x[i] = double(p[lay.wte + size_t(token) * C + i]) + double(p[lay.wpe + size_t(pos) * C + i]);
  for (int l = 0; l < c.layers; ++l) {
    const auto& L = lay.layer[size_t(l)];
    layernorm(x.data(), &p[L.ln1_w], &p[L.ln1_b], ln.data(), &mean, &rstd, 1, C);
    linear(ln.data(), &p[L.qkv_w], &p[L.qkv_b], qkv.data(), 1, C, 3 * C);
    for (size_t i = 0; i < C; ++i)
      cache.k[size_t(l)][size_t(pos) * C + i] = qkv[C + i], cache.v[size_t(l)][size_t(pos) * C + i] = qkv[2 * C + i];
    for (size_t h = 0; h < H; ++h) {
      std::vector<double> w(size_t(pos) + 1);
      double mx = -1e300, sum = 0;
      for (int s = 0; s <= pos; ++s) {
        double d = 0;
        for (size_t i = 0; i < hs; ++i) d += qkv[h * hs + i] * cache.k[size_t(l)][size_t(s) * C + h * hs + i];
        w[size_t(s)] = d / std::sqrt(double(hs));
        mx = std::max(mx, w[size_t(s)]);
      }
      for (auto& e : w) sum += (e = std::exp(e - mx));
      for (size_t i = 0; i < hs; ++i) {
        double a = 0;
        for (int s = 0; s <= pos; ++s) a += w[size_t(s)] / sum * cache.v[size_t(l)][size_t(s) * C + h * hs + i];
        att[h * hs + i] = a;
      }
    }
    linear(att.data(), &p[L.proj_w], &p[L.proj_b], y.data(), 1, C, C);
    for (size_t i = 0; i < C; ++i) x[i] += y[i];
    layernorm(x.data(), &p[L.ln2_w], &p[L.ln2_b], ln.data(), &mean, &rstd, 1, C);
    linear(ln.data(), &p[L.fc_w], &p[L.fc_b], fc.data(), 1, C, 4 * C);
    for (auto& e : fc) e = gelu(e);
    linear(fc.data(), &p[L.fc2_w], &p[L.fc2_b], y.data(), 1, 4 * C, C);
    for (size_t i = 0; i < C; ++i) x[i] += y[i];
  }
  layernorm(x.data(), &p[lay.lnf_w], &p[lay.lnf_b], ln.data(), &mean, &rstd, 1, C);
  std::vector<double> logits(V);
  linear(ln.data(), &p[lay.wte], nullptr, logits.data(), 1, C, V);
  return logits;
}

// Temperature and top-k sampling: keep the k largest logits, softmax(logit / temperature), and
// draw with `u` uniform in [0, 1). Shared by the GPU program's --sample and the host tests.
inline int sample_top_k(const std::vector<float>& logits, double temperature, int top_k, double u) {
  std::vector<int> idx(logits.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int(i);
  const int k = std::max(1, std::min<int>(top_k, int(idx.size())));
  // Larger logit first; equal logits by smaller index (the GPU's sampling kernel ranks the same way).
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  auto w = std::vector<double>(size_t(k));
  double sum = 0;
  // The difference in double, as the GPU's samplers take it (k::sample_top_k, sample_block): two floats
  // subtracted in float round first, and a pick near a boundary could then differ from theirs.
  for (int i = 0; i < k; ++i)
    sum += (w[size_t(i)] =
                std::exp((double(logits[size_t(idx[size_t(i)])]) - double(logits[size_t(idx[0])])) / temperature));
  double r = u * sum;
  for (int i = 0; i < k; ++i)
    if ((r -= w[size_t(i)]) < 0) return idx[size_t(i)];
  return idx[size_t(k - 1)];
}

}  // namespace gpt
