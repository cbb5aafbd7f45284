// day50_gpt/test_train_ref.cpp: the training pieces, and a whole CPU training run.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "gpt_ref.h"
#include "minitest.h"
#include "train_ref.h"
#include "verify.h"

TEST(schedule_and_clipping) {
  // Warm-up: step 0 of 10 gets a tenth; the end of the cosine reaches lr_min; halfway is the mean.
  EXPECT(std::fabs(train::lr_at(0, 10, 110, 1.0, 0.1) - 0.1) < 1e-12);
  EXPECT(std::fabs(train::lr_at(9, 10, 110, 1.0, 0.1) - 1.0) < 1e-12);
  EXPECT(std::fabs(train::lr_at(60, 10, 110, 1.0, 0.1) - 0.55) < 1e-12);
  EXPECT(train::lr_at(500, 10, 110, 1.0, 0.1) == 0.1);
  std::vector<float> g = {3, 4};  // norm 5
  EXPECT(train::clip_grad_norm(g, 1.0) == 5.0);
  EXPECT(std::fabs(g[0] - 0.6f) < 1e-7 && std::fabs(g[1] - 0.8f) < 1e-7);
}

TEST(adamw_first_step_moves_by_lr) {
  // At t = 1 the bias-corrected ratio mhat/sqrt(vhat) is sign(g): every weight moves by lr (plus decay).
  std::vector<float> p = {1.f, -2.f}, g = {0.5f, -3.f}, m(2, 0.f), v(2, 0.f);
  train::AdamW o;
  o.weight_decay = 0.1;
  train::adamw_step(p, g, m, v, {1, 0}, o, 0.01, 1);
  EXPECT(std::fabs(p[0] - (1.f - 0.01f * (1.f + 0.1f * 1.f))) < 1e-6);  // decayed
  EXPECT(std::fabs(p[1] - (-2.f + 0.01f)) < 1e-6);                      // not decayed
}

TEST(data_split_and_batches) {
  std::string text(1000, 'a');
  for (size_t i = 0; i < text.size(); ++i) text[i] = char('a' + i % 26);
  const train::Corpus c = train::split_bytes(text, 16);
  EXPECT(c.train.size() == 900 && c.val.size() == 100);
  std::vector<int> tok, tgt;
  const uint64_t next = train::batch(c.train, 895, 2, 4, tok, tgt);  // wraps at the end
  EXPECT(next == (895 + 8) % 900);
  EXPECT(tok[0] == c.train[895] && tgt[0] == c.train[896] && tok[7] == c.train[2] && tgt[7] == c.train[3]);
  bool threw = false;
  try {
    train::split_bytes("too short", 16);
  } catch (const std::runtime_error&) { threw = true; }
  EXPECT(threw);
}

// A tiny model on a repetitive text: the CPU training loop must drive the loss down, and a run
// resumed from a checkpoint must reproduce the uninterrupted run's losses exactly, with dropout too:
// its masks are a function of (key, step), and the checkpoint holds both (rng_state, step).
struct Run {
  gpt::Config c;
  std::vector<float> p, m, v;
  std::vector<uint8_t> decay;
  uint64_t pos = 0, key = 0;
  int64_t step = 0;
  double dropout = 0;
};

static std::vector<double> train_steps(Run& r, const train::Corpus& data, int steps) {
  std::vector<double> losses;
  std::vector<int> tok, tgt;
  train::AdamW o;
  for (int i = 0; i < steps; ++i, ++r.step) {
    r.pos = train::batch(data.train, r.pos, 4, 8, tok, tgt);
    gpt::Activations a;
    losses.push_back(gpt::forward(r.c, r.p, tok, tgt, 4, 8, a, dropout::make(r.dropout, r.key, r.step)));
    const std::vector<double> gd = gpt::backward(r.c, r.p, tok, tgt, 4, 8, a);
    std::vector<float> g(gd.begin(), gd.end());
    train::clip_grad_norm(g, 1.0);
    train::adamw_step(r.p, g, r.m, r.v, r.decay, o, train::lr_at(r.step, 5, 60, 1e-2, 1e-3), r.step + 1);
  }
  return losses;
}

// Random batches: a function of (key, step, place in the global batch); every sequence and its
// targets inside the text; a replica's slice (b0) is the same as the whole batch's rows; steps differ.
TEST(random_batches) {
  std::vector<int> text(5000);
  for (size_t i = 0; i < text.size(); ++i) text[i] = int(i % 251);
  std::vector<int> tok, tgt, tok2, tgt2, part, ptgt, other, otgt;
  train::batch_random(text, 42, 7, 0, 8, 33, tok, tgt);
  train::batch_random(text, 42, 7, 0, 8, 33, tok2, tgt2);
  EXPECT(tok == tok2 && tgt == tgt2);
  bool shifted = true;
  for (int b = 0; b < 8; ++b) {
    const size_t s = size_t(dropout::sequence_start(42, 7, uint64_t(b), text.size(), 33));
    shifted = shifted && s + 33 < text.size() && tok[size_t(b) * 33] == text[s];
    for (int t = 0; t < 33; ++t) shifted = shifted && tgt[size_t(b) * 33 + t] == text[s + size_t(t) + 1];
  }
  EXPECT(shifted);
  train::batch_random(text, 42, 7, 5, 3, 33, part, ptgt);  // rows 5..7 of the same global batch
  EXPECT(std::equal(part.begin(), part.end(), tok.begin() + 5 * 33));
  train::batch_random(text, 42, 8, 0, 8, 33, other, otgt);
  EXPECT(other != tok);
}

static void loss_falls_and_resume_is_exact(double dropout) {
  std::string text;
  while (text.size() < 4000) text += "the quick brown fox jumps over the lazy dog. ";
  const train::Corpus data = train::split_bytes(text, 8);
  Run r;
  r.c.vocab = 256, r.c.context = 8, r.c.layers = 1, r.c.heads = 2, r.c.width = 16;
  verify::Rng rng(5);
  r.p = gpt::init_params(r.c, rng);
  r.key = rng.next(), r.dropout = dropout;
  r.m.assign(r.p.size(), 0.f), r.v.assign(r.p.size(), 0.f);
  r.decay = train::decay_mask(r.c);
  Run copy = r;
  const std::vector<double> first = train_steps(r, data, 30);
  std::printf("  loss %.3f -> %.3f over 30 steps\n", first.front(), first.back());
  EXPECT(first.front() > 5.0 && first.back() < 0.6 * first.front());
  // Uninterrupted: 30 steps. Interrupted: 20 steps, checkpoint, load, 10 more.
  ckpt::Checkpoint k;
  const std::vector<double> a = train_steps(copy, data, 20);
  k.config = copy.c, k.step = copy.step, k.data_pos = copy.pos, k.params = copy.p, k.m = copy.m, k.v = copy.v;
  k.rng_state = copy.key;
  ckpt::save("/tmp/day50_resume.ckpt", k);
  const ckpt::Checkpoint l = ckpt::load("/tmp/day50_resume.ckpt", &copy.c);
  Run resumed;
  resumed.c = l.config, resumed.p = l.params, resumed.m = l.m, resumed.v = l.v, resumed.pos = l.data_pos,
  resumed.step = l.step, resumed.key = l.rng_state, resumed.dropout = dropout;
  resumed.decay = train::decay_mask(resumed.c);
  const std::vector<double> b = train_steps(resumed, data, 10);
  bool same = true;
  for (int i = 0; i < 10; ++i) same = same && b[i] == first[20 + i];
  EXPECT(same);
  std::remove("/tmp/day50_resume.ckpt");
}

TEST(cpu_training_loss_falls_and_resume_is_exact) { loss_falls_and_resume_is_exact(0.0); }
TEST(cpu_training_with_dropout_loss_falls_and_resume_is_exact) { loss_falls_and_resume_is_exact(0.1); }

int main() { return minitest::run_all(); }
