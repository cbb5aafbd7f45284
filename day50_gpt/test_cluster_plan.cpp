// day50_gpt/test_cluster_plan.cpp: the cluster decoder's layout (nn/cluster_plan.h) on the host, no GPU:
// every block's shared memory fits and nothing in it overlaps, every bulk copy's size is a whole number of
// 16-byte pieces, the rows of every matrix are all owned, which bundles overlap the one before (the notes'
// claims: none in bf16 on 16 SMs; fc2 and qkv in fp32 on 16 SMs and in bf16 on 8; fp32 on 8 SMs does not
// fit), and the two parts such a bundle lands in.
#include <string>
#include <utility>
#include <vector>

#include "minitest.h"
#include "nn/cluster_plan.h"

using k::dec::ClusterPlan;
using k::dec::make_cluster_plan;

// The bench's model: 6 layers, C = 384, 6 heads, 256 bytes; an H100's opt-in shared memory less the
// kernel's 48 bytes of static shared memory (its four mbarriers and the sampler's pick, aligned).
constexpr int kL = 6, kC = 384, kH = 6, kV = 256;
constexpr size_t kLimit = 232448 - 48;

static ClusterPlan plan(int S, int wsize) { return make_cluster_plan(kC, kH, kV, S, wsize, kLimit); }

// The copies that start only after the stage before (its bundle and the next do not fit together), as
// (kind, next kind) over one token's bundles: qkv, proj, fc, fc2 per layer, then the head.
static std::vector<std::pair<int, int>> late(const ClusterPlan& p) {
  std::vector<std::pair<int, int>> r;
  const int J = 4 * kL + 1;
  for (int j = 0; j < J; ++j) {
    const int kind = j == 4 * kL ? 4 : j % 4, jn = (j + 1) % J, kn = jn == 4 * kL ? 4 : jn % 4;
    if (p.bytes(kind) + p.bytes(kn) > p.cap) {
      bool seen = false;
      for (auto& x : r) seen = seen || (x.first == kind && x.second == kn);
      if (!seen) r.push_back({kind, kn});
    }
  }
  return r;
}

TEST(plan_regions_aligned_disjoint_and_within_the_limit) {
  for (int S : {16, 8})
    for (int w : {2, 4}) {
      const ClusterPlan p = plan(S, w);
      const unsigned offs[] = {p.xs,    p.xs1,    p.xn,   p.q,     p.q1,  p.h,   p.attp,
                               p.logits, p.outs, p.outs1, p.wpart, p.samp, p.wts};
      for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); ++i) {
        EXPECT(offs[i] % 16 == 0);
        if (i) EXPECT(offs[i] > offs[i - 1]);  // in order, each with room (take() pads to 16)
      }
      EXPECT(p.xs1 - p.xs >= unsigned(kC * 4) && p.xn - p.xs1 >= unsigned(kC * 4));
      EXPECT(p.q - p.xn >= unsigned(kC * 4) && p.q1 - p.q >= unsigned(kC * 4) && p.h - p.q1 >= unsigned(kC * 4));
      EXPECT(p.attp - p.h >= unsigned(4 * kC * 4));
      EXPECT(p.logits - p.attp >= unsigned(kH * p.G * p.wstride * 4));
      EXPECT(p.outs1 - p.outs >= unsigned(4 * std::max({p.Rq, p.Rp, p.Rf, p.R2, p.Rh})));
      EXPECT(p.wpart - p.outs1 >= unsigned(4 * std::max({p.Rq, p.Rp, p.Rf, p.R2, p.Rh})));
      EXPECT(p.samp - p.wpart >= unsigned((k::dec::kCWarps + 1) * p.wstride * 4));  // the partials, then the merge
      EXPECT(p.wts - p.samp >= unsigned(kV * 16));
      EXPECT(p.cap % 16 == 0 && p.total == p.wts + p.cap && p.total <= kLimit);
    }
}

TEST(plan_rows_owned_and_bundles_whole_pieces) {
  for (int S : {16, 8})
    for (int w : {2, 4}) {
      const ClusterPlan p = plan(S, w);
      for (int kind = 0; kind < 5; ++kind) {
        EXPECT(p.R(kind) % 4 == 0);                  // a bias slice starts 16-byte aligned
        EXPECT(p.S * p.R(kind) >= p.O(kind));        // every row has a block
        EXPECT((p.S - 1) * p.R(kind) < p.O(kind));   // and no block is left without rows
        EXPECT(p.bytes(kind) % 16 == 0 && p.w_bytes(kind) % 16 == 0);
        EXPECT(p.at(kind, 0) == p.wts);
        if (p.valid()) EXPECT(p.at(kind, 1) + p.bytes(kind) == p.wts + p.cap);  // the two ends of the area
      }
      EXPECT(p.O(0) == 3 * kC && p.O(2) == 4 * kC && p.O(4) == kV && p.I(3) == 4 * kC && p.I(0) == kC);
      EXPECT(p.wstride % 4 == 0 && p.wstride >= kC / kH + 2);
    }
}

TEST(plan_attention_parts) {
  EXPECT(plan(16, 2).G == 2);  // 6 heads x 2 halves: 12 of 16 blocks attend
  EXPECT(plan(8, 2).G == 1);
  EXPECT(make_cluster_plan(64, 4, kV, 16, 2, kLimit).G == 4);
  EXPECT(make_cluster_plan(256, 32, kV, 16, 2, kLimit).G == 1);  // more heads than blocks: blocks loop
}

TEST(plan_which_copies_start_late) {
  const ClusterPlan b16 = plan(16, 2), f16 = plan(16, 4), b8 = plan(8, 2), f8 = plan(8, 4);
  EXPECT(b16.valid() && f16.valid() && b8.valid());
  EXPECT(!f8.valid());  // fp32 on 8 SMs: fc's rows alone (192 x 384 x 4 bytes) exceed the weight area
  EXPECT(late(b16).empty());
  const std::vector<std::pair<int, int>> fc_fc2 = {{2, 3}, {3, 0}};  // fc -> fc2, fc2 -> next qkv
  EXPECT(late(f16) == fc_fc2);
  EXPECT(late(b8) == fc_fc2);
}

// The two parts of every bundle of two tokens (bundle g at end g & 1) as the next one is copied while the
// one before is read: together the whole bundle, the early part clear of the one before, the late part
// within it and empty where the two fit together.
TEST(plan_bundle_parts_cover_and_early_parts_clear_the_one_before) {
  for (int S : {16, 8})
    for (int w : {2, 4}) {
      const ClusterPlan p = plan(S, w);
      if (!p.valid()) continue;
      const int J = 4 * kL + 1;
      int split = 0;
      for (int g = 1; g < 2 * J; ++g) {
        const int kind = ClusterPlan::kind_of(g % J, kL), kp = ClusterPlan::kind_of((g - 1) % J, kL), e1 = g & 1;
        const unsigned B = unsigned(p.bytes(kind)), at = p.at(kind, e1);
        const ClusterPlan::Part e = p.part(kind, kp, e1, false), l = p.part(kind, kp, e1, true);
        EXPECT(e.len + l.len == B && e.off % 16 == 0 && l.off % 16 == 0 && e.len % 16 == 0);
        EXPECT((e.off == 0 && l.off == e.len) || (l.off == 0 && e.off == l.len));  // adjacent, in either order
        const unsigned P0 = p.at(kp, 1 - e1), P1 = P0 + unsigned(p.bytes(kp));
        EXPECT(at + e.off + e.len <= P0 || at + e.off >= P1 || e.len == 0);  // clear of the bundle before
        EXPECT(l.len == 0 || (at + l.off >= P0 && at + l.off + l.len <= P1));  // within it
        EXPECT((l.len > 0) == (p.bytes(kind) + p.bytes(kp) > p.cap));
        split += l.len > 0;
      }
      // where they overlap: each token's fc2s (L) and its qkvs after a fc2 (L - 1)
      EXPECT(split == (S == 16 && w == 2 ? 0 : 2 * (2 * kL - 1)));
    }
}

TEST(plan_one_block_is_invalid) {  // the pushes are st.async into other blocks
  EXPECT(make_cluster_plan(64, 4, 64, 2, 2, kLimit).valid());   // a small model fits on 2 blocks
  EXPECT(!make_cluster_plan(64, 4, 64, 1, 2, kLimit).valid());  // and would on 1, but a cluster of one is refused
}

TEST(plan_too_small_a_limit_is_invalid) {
  EXPECT(!make_cluster_plan(kC, kH, kV, 16, 2, 40 * 1024).valid());
  EXPECT(!make_cluster_plan(kC, kH, kV, 16, 2, 1024).valid());  // not even the vectors fit: cap 0
}

int main() { return minitest::run_all(); }
