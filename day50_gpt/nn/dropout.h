// day50_gpt/nn/dropout.h: the dropout mask, one counter-based random number per element, written once
// for the GPU kernels and the CPU reference (host-only code includes it too: no CUDA headers needed).
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the generator
// behind cuRAND's Philox4_32_10 and PyTorch's CUDA dropout) maps a 128-bit counter and a 64-bit key to
// 128 random bits with no state. So element i of dropout site s at training step t asks for
// philox(key = the run's seed, counter = (i / 4, s, t)) and takes word i % 4: no mask is stored, the
// backward regenerates it, the CPU draws the same one, and a step is a function of (seed, step), which
// is what keeps a resumed run bit-exact. test_gpt_ref.cpp checks the Random123 known-answer vectors.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define DROPOUT_HD __host__ __device__ __forceinline__
#else
#define DROPOUT_HD inline
#endif

namespace dropout {

struct U4 {
  uint32_t v[4];
};

DROPOUT_HD uint32_t mulhi32(uint32_t a, uint32_t b) { return uint32_t((uint64_t(a) * b) >> 32); }

// Philox4x32 with 10 rounds: counter c[0..3], key k[0..1].
DROPOUT_HD U4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    if (r > 0) k0 += W0, k1 += W1;  // the key schedule: bumped before rounds 2..10
    const uint32_t hi0 = mulhi32(M0, c0), lo0 = M0 * c0, hi1 = mulhi32(M1, c2), lo1 = M1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
  }
  return U4{{c0, c1, c2, c3}};
}

// Where the mask is drawn: the embedding's output is site 0, block l's attention projection 1 + 2l,
// its MLP output 2 + 2l (each before its residual add).
DROPOUT_HD uint32_t site_embed() { return 0; }
DROPOUT_HD uint32_t site_attn(int layer) { return 1u + 2u * uint32_t(layer); }
DROPOUT_HD uint32_t site_mlp(int layer) { return 2u + 2u * uint32_t(layer); }

// One run's dropout: probability p of zeroing an element, kept ones scaled by 1/(1-p). `on` is false
// for p = 0 and for the forwards that do not train (validation, generation).
struct Params {
  bool on = false;
  uint64_t key = 0;         // the run's seed (the checkpoint's rng_state)
  uint32_t step = 0;        // the training step
  uint32_t drop_below = 0;  // an element is dropped where its 32 random bits are below this
  float scale = 1.f;        // 1 / (1 - p)
  uint64_t first = 0;       // element index of this batch's first element (data parallel: the replica's slice)
};

// p in [0, 1): dropped where u32 < p * 2^32, so the keep probability is 1 - p to within 2^-32.
inline Params make(double p, uint64_t key, int64_t step) {
  Params d;
  d.on = p > 0;
  d.key = key, d.step = uint32_t(step);
  const double t = p * 4294967296.0;
  d.drop_below = t >= 4294967295.0 ? 4294967295u : uint32_t(t);
  d.scale = float(1.0 / (1.0 - p));
  return d;
}

// Random batches (--batches random, the default): sequence b of the global batch at training step t
// starts at a Philox draw for counter (b, kBatchSite, t) modulo n - T, so that the sequence and its
// targets (one byte further) lie inside the text. Like the masks, a batch is a function of
// (seed, step): a resumed run draws the same batches, and N data-parallel replicas draw the global
// batch's sequences exactly as one GPU does.
constexpr uint32_t kBatchSite = 0xBA7C4u;  // a counter word no dropout site uses (those are 0 .. 2L)
DROPOUT_HD uint64_t sequence_start(uint64_t key, int64_t step, uint64_t b, uint64_t n, int T) {
  const U4 r =
      philox4x32_10(uint32_t(b), uint32_t(b >> 32), kBatchSite, uint32_t(step), uint32_t(key), uint32_t(key >> 32));
  return ((uint64_t(r.v[0]) << 32) | r.v[1]) % (n - uint64_t(T));
}

// Whether element i (counted from the batch's first element of the whole global batch) of `site` is kept.
DROPOUT_HD bool keep(const Params& d, uint32_t site, uint64_t i) {
  const uint64_t e = d.first + i, g = e >> 2;
  const U4 r = philox4x32_10(uint32_t(g), uint32_t(g >> 32), site, d.step, uint32_t(d.key), uint32_t(d.key >> 32));
  return r.v[e & 3] >= d.drop_below;
}
// The factors of the four elements 4g .. 4g+3 (global indices, `first` included): one Philox call
// gives all four, which is how the GPU kernels draw them (keep() gives each one alone).
DROPOUT_HD void factors4(const Params& d, uint32_t site, uint64_t g, float f[4]) {
  const U4 r = philox4x32_10(uint32_t(g), uint32_t(g >> 32), site, d.step, uint32_t(d.key), uint32_t(d.key >> 32));
  for (int j = 0; j < 4; ++j) f[j] = r.v[j] >= d.drop_below ? d.scale : 0.f;
}
// The factor element i is multiplied by: 0 or 1/(1-p) (1 when dropout is off).
DROPOUT_HD float factor(const Params& d, uint32_t site, uint64_t i) {
  return !d.on ? 1.f : keep(d, site, i) ? d.scale : 0.f;
}

}  // namespace dropout
