// day50_gpt/nn/heads_plan.h: the layout of the decoder with a cluster a head (nn/kernels/decode_heads.cuh),
// host-only arithmetic that the kernel and its launcher share and that test_heads_plan.cpp checks without a
// GPU: which rows of each matrix a block of which cluster owns, where every vector and the block's share of
// the KV cache live in its shared memory, how large each weight bundle is, and the ring they stream through.
#pragma once
#include <algorithm>
#include <cstddef>

#include "cluster_plan.h"  // pad16, kCThreads, CLUSTER_HD

namespace k {
namespace dec {

// H clusters of S blocks (one an SM); cluster c works for head c. Per layer and cluster (C wide, heads hs
// wide, F = 4C / H of the MLP's hidden units a cluster):
//   kind 0 qkv:  the head's 3 hs rows of the qkv matrix (q, then k, then v), inputs C (LayerNorm 1 folded)
//   kind 1 proj: all C output rows, inputs the head's hs columns: a partial sum of the projection
//   kind 2 fc:   the cluster's F rows of fc, inputs C (LayerNorm 2 folded)
//   kind 3 fc2:  all C output rows, inputs the cluster's F columns: a partial sum of fc2
//   kind 4 head: all V rows of the tied embedding, inputs C (the final LayerNorm folded), in every cluster
// The two partial sums meet through L2 (decode_heads.cuh); everything else stays inside a cluster.
// Each of a block's bundles: its R(kind) rows in W, then where a LayerNorm comes first its gain (C floats)
// and the rows' sums of weights times gain (R floats), then the rows' biases (R floats; for proj and fc2
// cluster 0's carry the bias, the others zeros, so that the bias is added once). Bundle g of a launch goes
// to slot g % kHRing of the ring; kHRing - 1 bundles are in flight ahead of the one in use.
#ifndef HEADS_RING
#define HEADS_RING 4
#endif
constexpr int kHRing = HEADS_RING;

struct HeadsPlan {
  int S = 0, K = 0;  // blocks a cluster; clusters (= heads)
  int C = 0, H = 0, V = 0, T = 0, L = 0, hs = 0, F = 0, wsize = 0;
  int P = 0;  // cached positions a block holds per layer: position s is block s % S's, slot s / S
  int Rq = 0, Rp = 0, Rf = 0, R2 = 0, Rh = 0;
  int wst = 0;  // floats in one attention partial (hs + 2: o, m, l), padded to 4
  // Every block of a cluster has rows in proj, fc, fc2 and the head, so that each of those stages sends from every
  // block to every block: then the stages' own mbarriers order the blocks (decode_heads.cuh's end_push) and no
  // cluster barrier is needed. False for a model so small that some block has no rows in one of them: the kernel
  // then ends every stage with the barrier.
  bool chained = false;
  CLUSTER_HD int R(int kind) const { return kind == 0 ? Rq : kind == 1 ? Rp : kind == 2 ? Rf : kind == 3 ? R2 : Rh; }
  CLUSTER_HD int O(int kind) const { return kind == 0 ? 3 * hs : kind == 2 ? F : kind == 4 ? V : C; }
  CLUSTER_HD int I(int kind) const { return kind == 1 ? hs : kind == 3 ? F : C; }
  CLUSTER_HD bool ln(int kind) const { return kind == 0 || kind == 2 || kind == 4; }
  CLUSTER_HD size_t w_bytes(int kind) const { return pad16(size_t(R(kind)) * size_t(I(kind)) * size_t(wsize)); }
  CLUSTER_HD size_t row_bytes(int kind) const { return pad16(size_t(R(kind)) * 4); }
  CLUSTER_HD size_t gain_bytes() const { return pad16(size_t(C) * 4); }
  CLUSTER_HD size_t bytes(int kind) const {
    return w_bytes(kind) + (ln(kind) ? gain_bytes() + row_bytes(kind) : 0) + row_bytes(kind);
  }
  CLUSTER_HD static int kind_of(int j, int L) { return j == 4 * L ? 4 : j % 4; }  // bundle j of a token
  // Shared memory (byte offsets): the residual stream before and after attention (x, x1: every block
  // computes both itself), q and the MLP's hidden units (two copies each, by layer parity: other blocks
  // write them), the attention partials of the S blocks (two copies), the merged head output y, the logits,
  // the staging of each stage's rows before they are sent (om: a meeting's sums, decode_heads.cuh's
  // meet_own), the scores, the sampler's scratch, this block's share of the KV cache ([L][P][k hs | v hs]),
  // then the ring of weight slots.
  unsigned x = 0, x1 = 0, q = 0, hb = 0, attp = 0, y = 0, logits = 0, oq = 0, oa = 0, of = 0, oh = 0, om = 0, sc = 0, samp = 0,
           kv = 0, ring = 0;
  unsigned slot = 0, total = 0;  // one ring slot's bytes; the dynamic shared memory a block takes
  // Bundle j of block b of cluster c at pack + ((j * K + c) * S + b) * stride (host-packed).
  const unsigned char* pack = nullptr;
  unsigned long long stride = 0;
  CLUSTER_HD unsigned kv_at(int l, int slot_i) const {
    return kv + unsigned((size_t(l) * size_t(P) + size_t(slot_i)) * size_t(2 * hs) * 4);
  }
  bool valid(size_t smem_limit) const {
    if (S < 2 || K < 1 || C % 4 != 0 || hs % 4 != 0 || F * H != 4 * C || F % 4 != 0) return false;
    if (hs + 2 > kCThreads || V > kCThreads || C > kCThreads) return false;  // a thread per number in the merges
    return total <= smem_limit;
  }
};

inline HeadsPlan make_heads_plan(int C, int H, int V, int T, int L, int S, int wsize) {
  HeadsPlan p;
  p.S = S, p.K = H, p.C = C, p.H = H, p.V = V, p.T = T, p.L = L, p.wsize = wsize;
  p.hs = C / H, p.F = 4 * C / H, p.P = (T + S - 1) / S;
  auto share = [&](int kind) { return (p.O(kind) + S - 1) / S; };
  p.Rq = share(0), p.Rp = share(1), p.Rf = share(2), p.R2 = share(3), p.Rh = share(4);
  p.wst = (p.hs + 2 + 3) / 4 * 4;
  p.chained = true;
  for (int kind = 1; kind < 5; ++kind) p.chained = p.chained && (S - 1) * p.R(kind) < p.O(kind);  // the last block has rows
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const unsigned here = unsigned(at);
    at += pad16(bytes);
    return here;
  };
  p.x = take(size_t(C) * 4), p.x1 = take(size_t(C) * 4), p.q = take(size_t(2) * p.hs * 4);
  p.hb = take(size_t(2) * p.F * 4), p.attp = take(size_t(2) * S * p.wst * 4), p.y = take(size_t(p.hs) * 4);
  p.logits = take(size_t(V) * 4);
  p.oq = take(size_t(p.Rq) * 4), p.oa = take(size_t(p.wst) * 4), p.of = take(size_t(p.Rf) * 4);
  p.oh = take(size_t(p.Rh) * 4), p.om = take(size_t(std::max(p.Rp, p.R2)) * 4);
  p.sc = take(size_t(p.P) * 4), p.samp = take(size_t(V) * 16);
  p.kv = take(size_t(L) * p.P * 2 * p.hs * 4);
  size_t slot = 0;
  for (int kk = 0; kk < 5; ++kk) slot = std::max(slot, p.bytes(kk));
  p.slot = unsigned(slot);
  p.ring = take(slot * kHRing);
  p.total = unsigned(at);
  return p;
}

}  // namespace dec
}  // namespace k
