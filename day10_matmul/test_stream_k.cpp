// day10_matmul/test_stream_k.cpp: host unit tests for step 14's division of the work
// (kernels/14_stream_k_plan.h, no GPU). The kernel is correct only if, for every shape and
// grid size: every k-step of every tile is computed exactly once; a block hands over at most
// one partial sum (it has one workspace slot), from the first piece of its stream-K range; the
// blocks an owner waits for are exactly the ones that hand it a partial sum (a missing one is a
// wrong tile, an extra one a hang); and an owner's piece is the last of its range, so that
// owners wait only for first pieces, which wait for nothing.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "kernels/14_stream_k_plan.h"
#include "minitest.h"

using namespace skplan;

struct Walk {
  bool ok = true;
  int min_steps = 1 << 30, max_steps = 0;  // stream-K k-steps per block
};

static Walk walk(int tiles_m, int tiles_n, int ktiles, int G, int extra, bool sk_first) {
  const Plan p = make_plan(tiles_m, tiles_n, ktiles, G, extra, sk_first);
  const int tiles = tiles_m * tiles_n;
  Walk w;
  std::vector<int> covered(size_t(tiles) * ktiles, 0);
  std::map<int, std::set<int>> sharers, waited;  // tile -> blocks
  for (int b = 0; b < G; ++b) {
    std::vector<Piece> sk;  // this block's stream-K pieces, in order
    Piece pc;
    int dp_seen = 0;
    for (Cursor c = first_piece(p, b); next_piece(p, c, pc);) {
      if (pc.tile < 0 || pc.tile >= tiles || pc.k0 < 0 || pc.k1 > ktiles || pc.k0 >= pc.k1) return w.ok = false, w;
      for (int k = pc.k0; k < pc.k1; ++k) ++covered[size_t(pc.tile) * ktiles + k];
      if (pc.tile < p.dp_tiles) {
        if (pc.k0 != 0 || pc.k1 != ktiles) w.ok = false;
        if (sk_first && p.start(b + 1) > p.start(b) && sk.empty()) w.ok = false;  // stream-K first: range done
        ++dp_seen;
        continue;
      }
      if (!sk_first && dp_seen * G + b < p.dp_tiles) w.ok = false;  // whole tiles first: none may be left
      sk.push_back(pc);
    }
    int steps = 0;
    for (size_t i = 0; i < sk.size(); ++i) {
      const Piece& q = sk[i];
      steps += q.k1 - q.k0;
      if (q.k0 > 0) {
        if (i != 0) w.ok = false;  // a partial sum only from the first piece: one slot per block
        sharers[q.tile].insert(b);
      } else if (q.k1 < ktiles) {
        if (i + 1 != sk.size()) w.ok = false;  // the owner's piece is its last one
        for (int x = next_sharer(p, q.tile, b); x >= 0; x = next_sharer(p, q.tile, x)) waited[q.tile].insert(x);
        if (!waited.count(q.tile)) w.ok = false;  // a split tile has at least one sharer
      }
    }
    if (p.sk_iters > 0) {
      w.min_steps = std::min(w.min_steps, steps);
      w.max_steps = std::max(w.max_steps, steps);
    }
  }
  for (int v : covered)
    if (v != 1) w.ok = false;
  if (sharers != waited) w.ok = false;
  return w;
}

TEST(every_k_step_once_and_owners_wait_for_exactly_their_sharers) {
  const int shapes[][3] = {// tiles_m, tiles_n, ktiles: the check shapes of matmul.cu and the timed sizes
                           {1, 1, 1},    {8, 6, 13},    {1, 1, 65},  {2, 1, 4},  {16, 8, 32}, {24, 17, 17},
                           {32, 16, 64}, {64, 32, 128}, {128, 6, 6}, {1, 1, 17}, {3, 5, 7},   {11, 13, 2}};
  bool all = true;
  for (auto& s : shapes)
    for (int G : {1, 2, 7, 65, 132})
      for (int extra : {0, 1})
        for (bool first : {false, true}) {
          const long long work = (long long)s[0] * s[1] * s[2];
          const int g = int(work < G ? work : G);  // as the host launches: never more blocks than k-steps
          const Walk w = walk(s[0], s[1], s[2], g, extra, first);
          if (!w.ok) {
            std::printf("  plan fails: %dx%d tiles, %d k-steps, G %d, extra %d, sk_first %d\n", s[0], s[1], s[2], g,
                        extra, int(first));
            all = false;
          }
          if (w.max_steps - w.min_steps > 1) {
            std::printf("  unbalanced: %dx%d tiles, %d k-steps, G %d: %d..%d stream-K k-steps per block\n", s[0], s[1],
                        s[2], g, w.min_steps, w.max_steps);
            all = false;
          }
        }
  EXPECT(all);
}

TEST(whole_waves_are_not_split_and_4096_splits_its_partial_wave) {
  // 4096: 16 x 16 tiles of 128x256 = 512 on 132 blocks: 3 whole waves (396 tiles) + 116 shared.
  const Plan p = make_plan(32, 16, 64, 132, 0, false);
  EXPECT(p.dp_tiles == 396 && p.sk_iters == 116LL * 64);
  const Plan q = make_plan(32, 16, 64, 132, 1, false);  // one whole wave more
  EXPECT(q.dp_tiles == 264 && q.sk_iters == 248LL * 64);
  const Plan r = make_plan(33, 4, 64, 132, 0, false);  // exactly one wave: nothing to share
  EXPECT(r.dp_tiles == 132 && r.sk_iters == 0);
}

int main() { return minitest::run_all(); }
