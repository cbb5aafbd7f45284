// day50_gpt/test_gpt_ref.cpp: host tests of the CPU reference GPT (no GPU).
//
// The backward is checked against central finite differences of the forward's loss for every
// parameter of a tiny model: a missing term (LayerNorm's mean and variance, the tied head's second
// path into wte, the attention softmax) or a wrong index shows as an O(1) relative error.
#include <cmath>
#include <cstdio>
#include <vector>

#include "gpt_ref.h"
#include "minitest.h"
#include "verify.h"

TEST(config_validation_and_size) {
  gpt::Config c;  // the default: 6 layers, 6 heads, 384 wide, context 256, bytes
  EXPECT(c.invalid().empty());
  // GPT-2 layout at this size: 10,844,160 parameters (about 10.8 M, as the issue says).
  EXPECT(gpt::Layout(c).total == 10844160u);
  gpt::Config bad = c;
  bad.heads = 5;
  EXPECT(!bad.invalid().empty());
}

// The forward's ranges (nn/optimizer.cuh's AdamW beside the next forward, ZeRO-1's gather): one for the
// embeddings, one a block, in order, with no gap and no overlap, the last block's holding the final LayerNorm.
TEST(forward_ranges_tile_the_parameters) {
  for (int layers : {1, 2, 6}) {
    gpt::Config c;
    c.layers = layers;
    const gpt::Layout lay(c);
    const auto r = lay.forward_ranges();
    EXPECT(r.size() == size_t(layers) + 1);
    EXPECT(r.front().first == 0 && r.back().second == lay.total);
    EXPECT(r[0].second == lay.layer[0].ln1_w);  // wte and wpe
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT(r[i].first < r[i].second);
      if (i + 1 < r.size()) EXPECT(r[i].second == r[i + 1].first);
    }
    EXPECT(r.back().first <= lay.lnf_w && lay.lnf_b < r.back().second);
    EXPECT(r.back().first == lay.layer.back().ln1_w);
  }
}

static gpt::Config tiny() {
  gpt::Config c;
  c.vocab = 13, c.context = 6, c.layers = 2, c.heads = 2, c.width = 8;
  return c;
}

// Random O(1) parameters (not GPT-2's tiny init, so that every gradient is large enough to test).
static std::vector<float> random_params(const gpt::Config& c, verify::Rng& rng) {
  std::vector<float> p(gpt::Layout(c).total);
  for (auto& v : p) v = rng.uniform(-0.5f, 0.5f);
  const gpt::Layout lay(c);
  for (const auto& L : lay.layer)
    for (int i = 0; i < c.width; ++i) p[L.ln1_w + i] += 1.f, p[L.ln2_w + i] += 1.f;
  for (int i = 0; i < c.width; ++i) p[lay.lnf_w + i] += 1.f;
  return p;
}

// The worst relative error of the backward against central differences of the loss, every parameter;
// with dropout the mask is a fixed function of (seed, step), so the loss is still a smooth function.
static double worst_fd_error(const dropout::Params& drop) {
  const gpt::Config c = tiny();
  verify::Rng rng(11);
  std::vector<float> p = random_params(c, rng);
  const int B = 2, T = 5;
  std::vector<int> tok(B * T), tgt(B * T);
  for (auto& t : tok) t = int(rng.next() % c.vocab);
  for (auto& t : tgt) t = int(rng.next() % c.vocab);
  gpt::Activations a;
  gpt::forward(c, p, tok, tgt, B, T, a, drop);
  const std::vector<double> g = gpt::backward(c, p, tok, tgt, B, T, a);
  double worst = 0, gmax = 0;
  for (double v : g) gmax = std::fmax(gmax, std::fabs(v));
  for (size_t i = 0; i < p.size(); ++i) {
    const float keep = p[i];
    const float h = 1e-3f;  // the error falls as h^2 (measured: 5e-3 at 1e-2, 5e-5 at 1e-3): truncation, not a bug
    p[i] = keep + h;
    const double hp = double(p[i]) - keep;
    const double lp = gpt::forward(c, p, tok, tgt, B, T, a, drop);
    p[i] = keep - h;
    const double hm = keep - double(p[i]);
    const double lm = gpt::forward(c, p, tok, tgt, B, T, a, drop);
    p[i] = keep;
    const double fd = (lp - lm) / (hp + hm);
    worst = std::fmax(worst, std::fabs(fd - g[i]) / (1e-3 * gmax + std::fabs(g[i])));
  }
  std::printf("  %zu parameters, max |grad| %.3g, worst relative error %.2e\n", p.size(), gmax, worst);
  return worst;
}

TEST(backward_matches_finite_differences_for_every_parameter) { EXPECT(worst_fd_error(dropout::Params()) < 1e-3); }

TEST(dropout_backward_matches_finite_differences_for_every_parameter) {
  EXPECT(worst_fd_error(dropout::make(0.3, 1234, 7)) < 1e-3);
}

// Random123's known-answer vectors for Philox4x32-10 (kat_vectors: counter[4], key[2] -> output[4]).
TEST(dropout_philox_known_answers) {
  const uint32_t kat[3][10] = {{0, 0, 0, 0, 0, 0, 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
                               {~0u, ~0u, ~0u, ~0u, ~0u, ~0u, 0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
                               {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u,
                                0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
  for (const auto& k : kat) {
    const dropout::U4 r = dropout::philox4x32_10(k[0], k[1], k[2], k[3], k[4], k[5]);
    for (int i = 0; i < 4; ++i) EXPECT(r.v[i] == k[6 + i]);
  }
}

// The keep rate is 1 - p within sampling error (5 standard deviations), steps and sites draw different
// masks (two independent masks differ in a fraction 2p(1-p) of the elements), and p = 0 keeps all.
TEST(dropout_mask_keep_rate_and_independence) {
  const size_t n = 1 << 20;
  for (double p : {0.1, 0.2, 0.5}) {
    const dropout::Params d = dropout::make(p, 99, 3), d2 = dropout::make(p, 99, 4);
    size_t kept = 0, differ_step = 0, differ_site = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool k = dropout::keep(d, 1, i);
      kept += k, differ_step += k != dropout::keep(d2, 1, i), differ_site += k != dropout::keep(d, 2, i);
    }
    const double sd = std::sqrt(p * (1 - p) / double(n)), q = 2 * p * (1 - p), sdq = std::sqrt(q * (1 - q) / double(n));
    EXPECT(std::fabs(double(kept) / double(n) - (1 - p)) < 5 * sd);
    EXPECT(std::fabs(double(differ_step) / double(n) - q) < 5 * sdq);
    EXPECT(std::fabs(double(differ_site) / double(n) - q) < 5 * sdq);
  }
  const dropout::Params off = dropout::make(0.0, 99, 3);
  EXPECT(!off.on && dropout::factor(off, 0, 12345) == 1.f);
  EXPECT(dropout::factor(dropout::make(0.2, 99, 3), 0, 0) == 0.f ||
         dropout::factor(dropout::make(0.2, 99, 3), 0, 0) == 1.25f);
}

// The GPU kernels draw four factors per Philox call (factors4); the CPU one at a time (factor): the same.
TEST(dropout_factors4_equals_factor) {
  const dropout::Params d = dropout::make(0.3, 0x123456789abcdefull, 42);
  bool same = true;
  for (uint64_t g = 0; g < 4096; ++g) {
    float f[4];
    dropout::factors4(d, 5, g, f);
    for (int j = 0; j < 4; ++j) same = same && f[j] == dropout::factor(d, 5, 4 * g + uint64_t(j));
  }
  EXPECT(same);
}

// A data-parallel replica's slice (first = its first element) draws the same mask as the whole batch.
TEST(dropout_mask_of_a_slice_is_the_whole_batch_mask) {
  dropout::Params whole = dropout::make(0.25, 7, 11), half = whole;
  half.first = 1000;
  bool same = true;
  for (uint64_t i = 0; i < 5000; ++i) same = same && dropout::keep(half, 3, i) == dropout::keep(whole, 3, 1000 + i);
  EXPECT(same);
}

TEST(attention_is_causal) {
  // Changing the last token may change only the last position's logits.
  const gpt::Config c = tiny();
  verify::Rng rng(12);
  const std::vector<float> p = random_params(c, rng);
  std::vector<int> tok = {1, 2, 3, 4, 5};
  gpt::Activations a1, a2;
  gpt::forward(c, p, tok, {}, 1, 5, a1);
  tok[4] = 9;
  gpt::forward(c, p, tok, {}, 1, 5, a2);
  bool earlier_same = true, last_differs = false;
  for (int t = 0; t < 5; ++t)
    for (int v = 0; v < c.vocab; ++v) {
      const double d = std::fabs(a1.logits[t * c.vocab + v] - a2.logits[t * c.vocab + v]);
      if (t < 4)
        earlier_same = earlier_same && d == 0;
      else
        last_differs = last_differs || d > 1e-9;
    }
  EXPECT(earlier_same && last_differs);
}

TEST(initial_loss_is_uniform_guess) {
  // With GPT-2's small initialization the logits are near zero, so the loss is near ln(vocab).
  gpt::Config c = tiny();
  c.vocab = 256;
  verify::Rng rng(13);
  const std::vector<float> p = gpt::init_params(c, rng);
  std::vector<int> tok(12), tgt(12);
  for (auto& t : tok) t = int(rng.next() % 256);
  for (auto& t : tgt) t = int(rng.next() % 256);
  gpt::Activations a;
  const double loss = gpt::forward(c, p, tok, tgt, 2, 6, a);
  EXPECT(std::fabs(loss - std::log(256.0)) < 0.05);
}

TEST(kv_cache_decoding_equals_the_full_forward) {
  const gpt::Config c = tiny();
  verify::Rng rng(14);
  const std::vector<float> p = random_params(c, rng);
  const std::vector<int> tok = {3, 1, 4, 1, 5, 9};
  gpt::Activations a;
  gpt::forward(c, p, tok, {}, 1, 6, a);
  gpt::KVCache cache(c);
  double worst = 0;
  for (int t = 0; t < 6; ++t) {
    const std::vector<double> l = gpt::decode_step(c, p, cache, tok[size_t(t)], t);
    for (int v = 0; v < c.vocab; ++v)
      worst = std::fmax(worst, std::fabs(l[size_t(v)] - a.logits[size_t(t) * c.vocab + v]));
  }
  EXPECT(worst < 1e-12);
}

TEST(top_k_sampling) {
  const std::vector<float> logits = {0.f, 3.f, 1.f, 2.9f, -5.f};
  EXPECT(gpt::sample_top_k(logits, 1.0, 1, 0.99) == 1);  // k = 1 is argmax, whatever the draw
  verify::Rng rng(15);
  int counts[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < 20000; ++i)
    ++counts[gpt::sample_top_k(logits, 1.0, 2, double(rng.next() >> 11) / 9007199254740992.0)];
  EXPECT(counts[0] == 0 && counts[2] == 0 && counts[4] == 0);         // outside the top 2: never
  const double p1 = std::exp(3.0) / (std::exp(3.0) + std::exp(2.9));  // 0.525
  EXPECT(std::fabs(counts[1] / 20000.0 - p1) < 0.02);
}

// Equal logits rank by index (the GPU's sampling kernel ranks the same way, and --verify compares the
// two byte for byte): with k = 2 among three equal logits, only the first two indices can come out,
// and the draw u picks between them in index order.
TEST(top_k_ties_rank_by_index) {
  const std::vector<float> logits = {-1.f, 2.f, 2.f, 2.f};
  EXPECT(gpt::sample_top_k(logits, 1.0, 2, 0.25) == 1);
  EXPECT(gpt::sample_top_k(logits, 1.0, 2, 0.75) == 2);
  EXPECT(gpt::sample_top_k(logits, 1.0, 1, 0.999) == 1);
}

int main() { return minitest::run_all(); }
