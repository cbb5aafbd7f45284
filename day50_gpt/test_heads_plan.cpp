// day50_gpt/test_heads_plan.cpp: the layout of the decoder with a cluster a head (nn/heads_plan.h) on the host,
// no GPU: every block's shared memory fits and nothing in it overlaps, every bundle fits a ring slot and is
// a whole number of 16-byte pieces, each block of each cluster owns the rows FastDecoder::pack_heads gives
// it (every row of every matrix once per cluster where the clusters split it, every weight exactly once),
// and every cached position has a block and a slot.
#include <set>
#include <vector>

#include "minitest.h"
#include "nn/heads_plan.h"

using k::dec::HeadsPlan;
using k::dec::make_heads_plan;

// The bench's model: 6 layers, C = 384, 6 heads, 256 bytes, context 256; an H100's opt-in shared memory less
// the kernel's static shared memory (six mbarriers and the sampler's pick, aligned).
constexpr int kL = 6, kC = 384, kH = 6, kV = 256, kT = 256;
constexpr size_t kLimit = 232448 - 64;

TEST(heads_plan_regions_aligned_disjoint_and_within_the_limit) {
  for (int w : {2, 4}) {
    const HeadsPlan p = make_heads_plan(kC, kH, kV, kT, kL, 16, w);
    EXPECT(p.valid(kLimit));
    const unsigned offs[] = {p.x, p.x1, p.q, p.hb, p.attp, p.y, p.logits, p.oq, p.oa, p.of, p.oh, p.om, p.sc, p.samp, p.kv, p.ring};
    const size_t need[] = {size_t(kC) * 4, size_t(kC) * 4, size_t(2 * p.hs) * 4, size_t(2 * p.F) * 4,
                           size_t(2 * p.S * p.wst) * 4, size_t(p.hs) * 4, size_t(kV) * 4, size_t(p.Rq) * 4,
                           size_t(p.hs + 2) * 4, size_t(p.Rf) * 4, size_t(p.Rh) * 4,
                           size_t(std::max(p.Rp, p.R2)) * 4, size_t(p.P) * 4, size_t(kV) * 16,
                           size_t(kL) * p.P * 2 * p.hs * 4, size_t(p.slot) * k::dec::kHRing};
    const size_t n = sizeof(offs) / sizeof(offs[0]);
    for (size_t i = 0; i < n; ++i) {
      EXPECT(offs[i] % 16 == 0);
      const size_t end = i + 1 < n ? offs[i + 1] : p.total;
      EXPECT(end >= offs[i] + need[i]);  // in order, each with its room
    }
    EXPECT(p.total <= kLimit && p.slot % 16 == 0);
    for (int kind = 0; kind < 5; ++kind) EXPECT(p.bytes(kind) % 16 == 0 && p.bytes(kind) <= p.slot);
    EXPECT(p.kv_at(kL - 1, p.P - 1) + unsigned(2 * p.hs * 4) <= p.ring);
  }
}

TEST(heads_plan_the_bench_split) {  // the notes' numbers: 12, 24, 16, 24 and 16 rows a block
  const HeadsPlan p = make_heads_plan(kC, kH, kV, kT, kL, 16, 4);
  EXPECT(p.hs == 64 && p.F == 256 && p.P == 16);
  EXPECT(p.Rq == 12 && p.Rp == 24 && p.Rf == 16 && p.R2 == 24 && p.Rh == 16);
  EXPECT(p.I(0) == kC && p.I(1) == 64 && p.I(2) == kC && p.I(3) == 256 && p.I(4) == kC);
  EXPECT(p.chained);  // every block sends in proj, fc, fc2 and the head: no cluster barrier between stages
}

// chained is true exactly when every block of a cluster has rows in each stage after attention (then every one
// of those stages sends from every block to every block, which is what lets the kernel drop the cluster barrier).
TEST(heads_plan_chained_iff_every_block_has_rows) {
  for (int C : {384, 64, 32, 16})
    for (int H : {6, 4, 2, 1})
      for (int V : {256, 20, 16}) {
        if (C % H || (4 * C) % H) continue;
        const HeadsPlan p = make_heads_plan(C, H, V, kT, 2, 16, 4);
        bool every = true;
        for (int kind = 1; kind < 5; ++kind)
          for (int b = 0; b < p.S; ++b) every = every && std::min(p.R(kind), p.O(kind) - b * p.R(kind)) > 0;
        EXPECT(p.chained == every);
      }
  EXPECT(!make_heads_plan(384, 6, 20, kT, 2, 16, 4).chained);  // 20 logits over 16 blocks: 2 each, the last six idle
}

// Every weight of every matrix owned once: (row, column) of the source matrix as pack_heads maps a block's
// local row o of cluster c (qkv: head c's rows; proj: head c's columns; fc: hidden units cF..; fc2: those
// columns); the head's rows once in every cluster.
TEST(heads_plan_every_weight_owned_once) {
  for (int C : {384, 64, 96})
    for (int H : {6, 4, 2}) {
      if (C % H || (4 * C) % H) continue;
      const HeadsPlan p = make_heads_plan(C, H, kV, kT, 2, 16, 4);
      for (int kind = 0; kind < 4; ++kind) {
        const int Ofull = kind == 0 ? 3 * C : kind == 2 ? 4 * C : C, Ifull = kind == 3 ? 4 * C : C;
        std::vector<int> seen(size_t(Ofull) * Ifull, 0);
        for (int c = 0; c < p.K; ++c)
          for (int b = 0; b < p.S; ++b) {
            const int r0 = b * p.R(kind), rows = std::max(0, std::min(p.R(kind), p.O(kind) - r0));
            for (int r = 0; r < rows; ++r) {
              const int o = r0 + r;
              const int srow = kind == 0 ? (o / p.hs) * C + c * p.hs + o % p.hs : kind == 2 ? c * p.F + o : o;
              const int scol = kind == 1 ? c * p.hs : kind == 3 ? c * p.F : 0;
              for (int i = 0; i < p.I(kind); ++i) ++seen[size_t(srow) * Ifull + scol + i];
            }
          }
        bool once = true;
        for (int v : seen) once = once && v == 1;
        EXPECT(once);
      }
      std::vector<int> head(kV, 0);  // the head: every row once within one cluster
      for (int b = 0; b < p.S; ++b)
        for (int r = b * p.Rh; r < std::min(kV, (b + 1) * p.Rh); ++r) ++head[size_t(r)];
      bool once = true;
      for (int v : head) once = once && v == 1;
      EXPECT(once);
    }
}

TEST(heads_plan_every_position_has_a_slot) {
  for (int T : {1, 15, 16, 17, 256}) {
    const HeadsPlan p = make_heads_plan(kC, kH, kV, T, kL, 16, 4);
    std::set<std::pair<int, int>> where;
    for (int s = 0; s < T; ++s) {
      EXPECT(s / p.S < p.P);
      where.insert({s % p.S, s / p.S});
    }
    EXPECT(int(where.size()) == T);
  }
}

TEST(heads_plan_limits) {
  EXPECT(!make_heads_plan(kC, kH, kV, kT, kL, 16, 4).valid(64 * 1024));  // the ring alone needs more
  EXPECT(!make_heads_plan(kC, kH, kV, kT, kL, 1, 4).valid(kLimit));      // st.async into other blocks
  EXPECT(!make_heads_plan(45, 3, kV, 45, 2, 16, 4).valid(kLimit));       // C % 4: the GEMV's float4 loads
}

int main() { return minitest::run_all(); }
