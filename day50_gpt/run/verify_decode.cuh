// day50_gpt/run/verify_decode.cuh: gpt --verify's "decode" checks: each faster generator (FastDecoder in
// run/generate.cuh: the fused stages as a CUDA graph, the persistent kernel; weights in fp32 and bf16)
// against the current one (Generator, fp32, itself checked against the CPU by verify_generate):
//   - teacher-forced: a few fixed random byte sequences, the whole context each; the logits at every
//     position within fp32's tolerance. The bf16 decoders are compared with the current generator run on
//     the same weights rounded to bf16 (and back to fp32), so that the only difference left is the order
//     of the fp32 sums, as for the fp32 decoders. Against the unrounded weights no tight tolerance holds:
//     at these weights (3x GPT-2's initialization, sharp attention) the network amplifies the rounding
//     through its layers, and the exact CPU model in double, fed the rounded weights, moves by as much
//     as the bf16 decoders do (a bug could hide in that slack, so that comparison is not made);
//   - greedy: at every position where no near-tie decides, the same argmax byte. A near-tie: the
//     current generator's top-2 logit gap is at most twice the tolerance at its top logit (errors
//     within the tolerance could then swap the two); those positions are skipped and counted, and at
//     least 200 decided positions are required (a quarter of them on the small models);
//   - sampling (fp32 weights): the same bytes as the current generator from the same draws,
//     temperature and top-k, one launch per token and one for all of them.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../gpt_ref.h"
#include "generate.cuh"
#include "results.h"
#include "verify.h"

// The logits after every byte of every sequence ([S][T][V]) from the current generator.
inline std::vector<double> decode_reference(const gpt::Config& c, const std::vector<float>& p,
                                            const std::vector<std::vector<int>>& seqs) {
  std::vector<double> ref;
  for (const auto& s : seqs) {
    Generator g(c, p, c.context, 0);  // history room for T fed bytes; no sliding window
    for (int t : s) {
      g.feed(t);
      const std::vector<float> l = g.logits_now();
      ref.insert(ref.end(), l.begin(), l.end());
    }
  }
  return ref;
}

// Greedy agreement: positions decided (no near-tie) and those among them whose argmax differs.
struct Greedy {
  size_t decided = 0, ties = 0, differ = 0;
};
inline Greedy greedy_agreement(const std::vector<float>& got, const std::vector<double>& ref, int V,
                               const verify::Tol& tol) {
  Greedy r;
  for (size_t at = 0; at + size_t(V) <= ref.size(); at += size_t(V)) {
    int a = 0, b = -1, mine = 0;
    for (int v = 1; v < V; ++v) {
      if (ref[at + size_t(v)] > ref[at + size_t(a)])
        b = a, a = v;
      else if (b < 0 || ref[at + size_t(v)] > ref[at + size_t(b)])
        b = v;
      if (got[at + size_t(v)] > got[at + size_t(mine)]) mine = v;
    }
    const double top = ref[at + size_t(a)], gap = top - ref[at + size_t(b)];
    if (!(gap > 2 * (tol.atol + tol.rtol * std::fabs(top)))) {
      ++r.ties;
      continue;
    }
    ++r.decided;
    r.differ += mine != a;
  }
  return r;
}

// The parameters with every matrix FastDecoder<bf16> keeps in bf16 (the four per layer and the tied
// embedding: what FastDecoder::pack converts) rounded to bf16 and back: the weights it really computes with.
inline std::vector<float> bf16_rounded(const gpt::Config& c, const std::vector<float>& p) {
  const gpt::Layout lay(c);
  const size_t C = size_t(c.width), CC = C * C;
  std::vector<float> r = p;
  auto round = [&](size_t at, size_t n) {
    for (size_t i = at; i < at + n; ++i) r[i] = __bfloat162float(__float2bfloat16(r[i]));
  };
  for (const auto& Y : lay.layer)
    round(Y.qkv_w, 3 * CC), round(Y.proj_w, CC), round(Y.fc_w, 4 * CC), round(Y.fc2_w, 4 * CC);
  round(lay.wte, size_t(c.vocab) * C);
  return r;
}

// A way to run FastDecoder: the path and the persistent kernel's options.
struct DecodeWay {
  DecodePath path;
  bool merge, own_barrier;
  int blocks;  // persistent: at most this many blocks (0: one per SM); cluster: its size (16 or 8)
  int chunk;   // persistent: cached positions per attention work item (k::dec::kChunk, 16 or 8)
  const char* name;
  bool count_barrier = false;  // with own_barrier: the counting kind
  bool resident = false;       // persistent: the weights in shared memory (where they fit)
  bool late_epilogue = false;  // persistent: the GEMVs' residual and bias loaded after the sums
};

// One weight type and way against the current generator's logits (ref: on the weights W rounds to),
// teacher-forced.
template <class W>
void verify_decode_forced(results::Results& res, const std::string& tag, const gpt::Config& c,
                          const std::vector<float>& p, const std::vector<std::vector<int>>& seqs,
                          const std::vector<double>& ref, const DecodeWay& way) {
  const bool bf = std::is_same<W, bf16>::value;
  double zmax = 0;
  for (double z : ref) zmax = std::max(zmax, std::fabs(z));
  // Both weight types: summation order only (the GEMVs and the attention add in another order than
  // gemv_bias and attention_decode; the reference has the same, rounded weights).
  const verify::Tol tol = verify::Tol{1e-4, 1e-4, bf ? "fp32 sums, same bf16 weights" : "fp32"}.scaled(zmax);
  const std::string name = "decode " + std::string(Types<W>::name()) + " " + way.name + " (" + tag + ")";
  const std::string against = bf ? "vs the current generator on the same bf16-rounded weights (teacher-forced)"
                                 : "vs the current generator (teacher-forced)";
  std::vector<float> got;
  {
    FastDecoder<W> d(c, p, 1, way.path, 1, true);
    d.merge = way.merge, d.own_barrier = way.own_barrier, d.count_barrier = way.count_barrier;
    if (way.blocks > 0) d.use_blocks(way.blocks);
    d.net.chunk = way.chunk;  // (the CUDA-graph path keeps the chunk it was captured with: kChunk)
    d.net.late_epilogue = way.late_epilogue;
    if (way.resident && !d.set_resident()) {
      std::printf("  (%s: the weights do not fit in shared memory at this size: not checked)\n", name.c_str());
      return;
    }
    if ((way.path == DecodePath::kCluster && !d.use_cluster(way.blocks)) || (way.path == DecodePath::kHeads && !d.heads_ok)) {
      std::printf("  (%s: no such cluster on this GPU, build or shape, or --clusters off: not checked)\n", name.c_str());
      return;
    }
    bool gave_up = false;
    for (const auto& s : seqs) {
      d.reset();
      d.feed(s);
      const std::vector<float> l = d.logits_at(c.context);
      got.insert(got.end(), l.begin(), l.end());
      gave_up = gave_up || d.gave_up();
    }
    if (way.path == DecodePath::kHeads)
      res.add(verify::fact(name + ": every meeting's wait ended by its tags, none gave up", !gave_up));
    if (way.merge || way.own_barrier)
      res.add(verify::fact(name + ": every wait (" + (way.merge ? "for a head's qkv rows" : "") +
                               (way.merge && way.own_barrier ? ", " : "") + (way.own_barrier ? "at the barrier" : "") +
                               ") ended by its count, none gave up",
                           !gave_up));
  }
  res.add(verify::compare(name + ": logits at every position " + against, got.data(), ref.data(), ref.size(), tol));
  const Greedy g = greedy_agreement(got, ref, c.vocab, tol);
  const size_t positions = ref.size() / size_t(c.vocab), need = std::min<size_t>(200, positions / 4);
  res.add(verify::fact(name + ": greedy bytes == the current generator's" + (bf ? " (same bf16 weights)" : "") +
                           " where no near-tie decides",
                       g.differ == 0 && g.decided >= need, "exact",
                       std::to_string(g.decided) + " positions decided (at least " + std::to_string(need) +
                           " needed), " + std::to_string(g.ties) + " near-ties skipped, " + std::to_string(g.differ) +
                           " differ",
                       g.decided, g.differ));
}

// fp32 weights: the bytes sampled from the same draws equal the current generator's.
inline void verify_decode_sampling(results::Results& res, const std::string& tag, const gpt::Config& c,
                                   const std::vector<float>& p, uint64_t seed) {
  verify::Rng rng(seed);
  const std::vector<int> prompt = {int(rng.next() % 256), int(rng.next() % 256), int(rng.next() % 256)};
  const int n = std::min(200, c.context - int(prompt.size()));
  std::vector<double> u(static_cast<size_t>(n));
  for (auto& x : u) x = double(rng.next() >> 11) / 9007199254740992.0;
  const double temperature = 0.8;
  const int top_k = 40;
  Generator g(c, p, n, int(prompt.size()));
  for (int t : prompt) g.feed(t);
  g.prepare(u, temperature, top_k);
  const std::vector<int> want = g.generate();
  struct Way {
    DecodePath path;
    bool per_token, merge, own_barrier;
    int blocks;
    const char* name;
    int chunk = k::dec::kChunk;
    bool count_barrier = false;
    bool resident = false;
  };
  for (const Way w :
       {Way{DecodePath::kStages, false, false, false, 0, "fused stages (CUDA graph)"},
        Way{DecodePath::kPersistent, false, false, false, 0, "persistent kernel, one launch"},
        Way{DecodePath::kPersistent, true, false, false, 0, "persistent kernel, one launch per token"},
        Way{DecodePath::kPersistent, true, true, false, 0, "persistent kernel, merged, one launch per token"},
        Way{DecodePath::kPersistent, false, false, true, 0, "persistent kernel, hand-written barrier, one launch"},
        Way{DecodePath::kPersistent, false, true, true, 33,
            "persistent kernel, hand-written barrier, merged, 33 blocks"},
        Way{DecodePath::kPersistent, false, false, true, 0,
            "persistent kernel, hand-written barrier, attention chunks of 8", 8},
        Way{DecodePath::kPersistent, false, false, true, 0,
            "persistent kernel, counting barrier, attention chunks of 8", 8, true},
        Way{DecodePath::kPersistent, true, true, true, 33, "persistent kernel, counting barrier, merged, 33 blocks",
            k::dec::kChunk, true},
        Way{DecodePath::kPersistent, false, false, true, 0,
            "persistent kernel, counting barrier, attention chunks of 8, weights in shared memory", 8, true, true},
        Way{DecodePath::kPersistent, true, false, false, 33, "persistent kernel, one launch per token, 33 blocks, "
            "weights in shared memory", k::dec::kChunk, false, true},
        Way{DecodePath::kCluster, false, false, false, 16, "cluster of 16 SMs, one launch"},
        Way{DecodePath::kCluster, true, false, false, 16, "cluster of 16 SMs, one launch per token"},
        Way{DecodePath::kHeads, false, false, false, 0, "a cluster of 16 SMs a head, one launch"},
        Way{DecodePath::kHeads, true, false, false, 0, "a cluster of 16 SMs a head, one launch per token"}}) {
    FastDecoder<float> d(c, p, n, w.path);
    d.per_token = w.per_token, d.merge = w.merge, d.own_barrier = w.own_barrier, d.count_barrier = w.count_barrier;
    if (w.blocks > 0) d.use_blocks(w.blocks);
    d.net.chunk = w.chunk;
    if (w.resident && !d.set_resident()) {
      std::printf("  (decode fp32 %s (%s): the weights do not fit in shared memory at this size: not checked)\n",
                  w.name, tag.c_str());
      continue;
    }
    if ((w.path == DecodePath::kCluster && !d.use_cluster(w.blocks)) || (w.path == DecodePath::kHeads && !d.heads_ok)) {
      std::printf("  (decode fp32 %s (%s): no such cluster on this GPU, build or shape, or --clusters off: not checked)\n", w.name,
                  tag.c_str());
      continue;
    }
    d.feed(prompt);
    d.prepare(u, temperature, top_k);
    d.generate(n);
    const std::vector<int> got = d.bytes(n);
    if (w.path == DecodePath::kHeads)
      res.add(verify::fact("decode fp32 " + std::string(w.name) + " (" + tag + "): every meeting's wait ended by its tags",
                           !d.gave_up()));
    size_t differ = 0;
    for (int i = 0; i < n; ++i) differ += got[size_t(i)] != want[size_t(i)];
    res.add(verify::fact("decode fp32 " + std::string(w.name) + " (" + tag + "): " + std::to_string(n) +
                             " sampled bytes == the current generator's (same draws, top-k 40)",
                         differ == 0, "exact", "", size_t(n), differ));
  }
  // The helper a --sample flag would call: the same text as generate() from the same seed.
  std::string text;
  for (int t : prompt) text.push_back(char(t));
  const Sampled a = generate(c, p, text, n, temperature, top_k, seed),
                b = generate_fast<float>(c, p, text, n, temperature, top_k, seed, DecodePath::kPersistent);
  res.add(verify::fact("decode fp32 generate_fast (persistent kernel) (" + tag + ") == generate(), same seed",
                       a.text == b.text && b.made == n, "exact"));
}

// Every check above on one configuration: weights at 3x GPT-2's initialization (the probabilities
// spread, so that greedy and sampled bytes are real choices), `nseq` random byte sequences.
inline void verify_decode_config(results::Results& res, uint64_t seed, const gpt::Config& c, int nseq) {
  const std::string tag = std::to_string(c.layers) + "L C=" + std::to_string(c.width) +
                          " H=" + std::to_string(c.heads) + " T=" + std::to_string(c.context);
  if (!FastDecoder<float>::supported(c)) {
    std::printf("  (decode checks not run for %s: head or width beyond the fused decoder's limits)\n", tag.c_str());
    return;
  }
  verify::Rng rng(seed);
  std::vector<float> p = gpt::init_params(c, rng);
  for (auto& w : p) w *= 3.f;
  std::vector<std::vector<int>> seqs(static_cast<size_t>(nseq), std::vector<int>(size_t(c.context)));
  for (auto& s : seqs)
    for (auto& t : s) t = int(rng.next() % 256);
  const std::vector<double> ref = decode_reference(c, p, seqs), ref_bf = decode_reference(c, bf16_rounded(c, p), seqs);
  // Odd block counts too (33, 7): every stage spreads its rows and attention items by gridDim.
  const int K = k::dec::kChunk;
  for (const DecodeWay& w :
       {DecodeWay{DecodePath::kStages, false, false, 0, K, "fused stages (CUDA graph)"},
        DecodeWay{DecodePath::kPersistent, false, false, 0, K, "persistent kernel"},
        DecodeWay{DecodePath::kPersistent, true, false, 0, K, "persistent kernel, qkv + attention merged"},
        DecodeWay{DecodePath::kPersistent, false, true, 0, K, "persistent kernel, hand-written barrier"},
        DecodeWay{DecodePath::kPersistent, true, true, 33, K,
                  "persistent kernel, hand-written barrier, merged, 33 blocks"},
        DecodeWay{DecodePath::kPersistent, false, true, 7, K, "persistent kernel, hand-written barrier, 7 blocks"},
        DecodeWay{DecodePath::kPersistent, false, true, 0, 16,
                  "persistent kernel, hand-written barrier, attention chunks of 16"},
        DecodeWay{DecodePath::kPersistent, true, true, 0, 8,
                  "persistent kernel, hand-written barrier, merged, attention chunks of 8"},
        DecodeWay{DecodePath::kPersistent, false, false, 7, 8, "persistent kernel, 7 blocks, attention chunks of 8"},
        DecodeWay{DecodePath::kPersistent, false, true, 0, 8,
                  "persistent kernel, counting barrier, attention chunks of 8", true},
        DecodeWay{DecodePath::kPersistent, true, true, 7, 16,
                  "persistent kernel, counting barrier, merged, 7 blocks, attention chunks of 16", true},
        // The weights in shared memory: at the bench's size only bf16 fits (one block per SM); with 33 blocks
        // (4x the rows a block) only the odd size does.
        DecodeWay{DecodePath::kPersistent, false, true, 0, 8,
                  "persistent kernel, counting barrier, attention chunks of 8, weights in shared memory", true, true},
        DecodeWay{DecodePath::kPersistent, true, false, 0, K, "persistent kernel, merged, weights in shared memory",
                  false, true},
        DecodeWay{DecodePath::kPersistent, false, true, 33, 16,
                  "persistent kernel, hand-written barrier, 33 blocks, attention chunks of 16, weights in shared memory",
                  false, true},
        DecodeWay{DecodePath::kPersistent, false, false, 0, 8,
                  "persistent kernel, attention chunks of 8, epilogue loads after the sum", false, false, true},
        // One cluster (decode_cluster.cuh): 16 SMs (in bf16 every pair of consecutive bundles fits together: each
        // lands whole while the one before is read; in fp32 fc2 and the next qkv overlap the bundle before
        // and land in two parts), and 8 (twice the rows a block: in bf16 the same two land in two parts; in
        // fp32 the largest stage does not fit, so it is not run). Both ways of copying are checked.
        DecodeWay{DecodePath::kCluster, false, false, 16, K, "cluster of 16 SMs"},
        DecodeWay{DecodePath::kCluster, false, false, 8, K, "cluster of 8 SMs"},
        // A cluster of 16 SMs a head (decode_heads.cuh): each sequence fed in one launch.
        DecodeWay{DecodePath::kHeads, false, false, 0, K, "a cluster of 16 SMs a head"}}) {
    verify_decode_forced<float>(res, tag, c, p, seqs, ref, w);
    verify_decode_forced<bf16>(res, tag, c, p, seqs, ref_bf, w);
  }
  verify_decode_sampling(res, tag, c, p, seed + 1);
}

// Called by verify_generate for each of its configurations (heads 16 and 256 wide); the first call also
// checks the benchmark's size (6 layers, 384 wide, 6 heads, T = 256: 8 attention chunks, 200 sampled
// bytes) and an odd one (width 45, heads 15 wide, T = 45: the scalar GEMV and attention loops, a partial
// second chunk).
inline void verify_decode(results::Results& res, uint64_t seed, const gpt::Config& c) {
  static bool first = true;
  if (first) {
    first = false;
    gpt::Config full, odd;
    full.vocab = odd.vocab = 256;
    full.layers = 6, full.heads = 6, full.width = 384, full.context = 256;
    odd.layers = 2, odd.heads = 3, odd.width = 45, odd.context = 45;
    verify_decode_config(res, seed + 100, full, 4);
    verify_decode_config(res, seed + 101, odd, 4);
  }
  verify_decode_config(res, seed + 102, c, 4);
}
