// day50_gpt/nn/cluster_plan.h: the cluster decoder's layout (nn/kernels/decode_cluster.cuh), host-only
// arithmetic that the kernel and its launcher share and that test_cluster_plan.cpp checks without a GPU:
// how many rows of each matrix a block owns, where every vector lives in a block's shared memory, how
// large each stage's weight bundle is, and at which end of the weight area it lands.
#pragma once
#include <algorithm>
#include <cstddef>

#ifdef __CUDACC__
#define CLUSTER_HD __host__ __device__
#else
#define CLUSTER_HD
#endif

namespace k {
namespace dec {

constexpr int kCThreads = 512, kCWarps = kCThreads / 32;  // a cluster block: 16 warps

CLUSTER_HD constexpr size_t pad16(size_t b) { return (b + 15) / 16 * 16; }

// The cluster's shape and each block's shared memory (byte offsets). The five weight "bundles" a token
// walks through (kind 0 qkv, 1 proj, 2 fc, 3 fc2, 4 head): a block's R(kind) rows of the matrix in W,
// then, where a LayerNorm comes before the matrix (qkv, fc, head), its gain (C floats) and the rows' sums
// of their weights times the gain (R floats: decode_cluster.cuh's folded LayerNorm), then the rows' biases
// (R floats; after a LayerNorm they carry its bias through the matrix, and the head has only that).
// Bundle j of the token (j = 4 l + kind, the head j = 4L) goes to one end of the weight area
// when the block has started an even number of bundles in this launch, to the other end when odd: the
// next bundle is copied while this one is read, as long as both fit (bytes(a) + bytes(b) <= cap); when
// they do not, the copy waits until this one's GEMV is done.
struct ClusterPlan {
  int S = 0;  // blocks in the cluster (one an SM)
  int G = 1;  // attention: parts of the cached positions per head
  int C = 0, H = 0, V = 0, wsize = 0;
  // Rows a block owns of qkv, proj, fc, fc2, head (the last block may own fewer). Named, not an array: a
  // kernel argument indexed by a run-time value is copied to local memory first.
  int Rq = 0, Rp = 0, Rf = 0, R2 = 0, Rh = 0;
  CLUSTER_HD int R(int kind) const { return kind == 0 ? Rq : kind == 1 ? Rp : kind == 2 ? Rf : kind == 3 ? R2 : Rh; }
  int wstride = 0;  // floats between two attention partials (hs + 2, padded to 4)
  // Two copies of the residual stream and of q (x0 written by fc2 and the embedding, read by qkv and the
  // head; x1 written by proj, read by fc; q0 / q1 for even / odd layers): no relaxed barrier then stands
  // between a block's read of a vector and another block's next write into it (decode_cluster.cuh).
  // outs / outs1: where a weight stage stages its rows before sending them, by the parity of its bundle (the
  // stage before read the other one while sending: decode_cluster.cuh, View::outs).
  unsigned xs = 0, xs1 = 0, xn = 0, q = 0, q1 = 0, h = 0, attp = 0, logits = 0, outs = 0, outs1 = 0, wpart = 0,
           samp = 0, wts = 0;
  unsigned cap = 0, total = 0;  // the weight area's bytes; the dynamic shared memory a block takes
  // Every bundle as the block will hold it, packed on the host (FastDecoder::pack_bundles): bundle j of
  // block b at pack + (j * S + b) * stride, so that one bulk copy moves it (rows past a matrix's end and the
  // paddings are zeros).
  const unsigned char* pack = nullptr;
  unsigned long long stride = 0;
  CLUSTER_HD int O(int kind) const { return kind == 0 ? 3 * C : kind == 2 ? 4 * C : kind == 4 ? V : C; }
  CLUSTER_HD int I(int kind) const { return kind == 3 ? 4 * C : C; }
  CLUSTER_HD bool ln(int kind) const { return kind == 0 || kind == 2 || kind == 4; }
  CLUSTER_HD size_t w_bytes(int kind) const { return pad16(size_t(R(kind)) * size_t(I(kind)) * size_t(wsize)); }
  CLUSTER_HD size_t row_bytes(int kind) const { return pad16(size_t(R(kind)) * 4); }  // one float a row
  CLUSTER_HD size_t gain_bytes() const { return pad16(size_t(C) * 4); }
  CLUSTER_HD size_t bytes(int kind) const {
    return w_bytes(kind) + (ln(kind) ? gain_bytes() + row_bytes(kind) : 0) + row_bytes(kind);
  }
  CLUSTER_HD unsigned at(int kind, int parity) const {
    return parity == 0 ? wts : unsigned(size_t(wts) + cap - bytes(kind));
  }
  // Two consecutive bundles sit at opposite ends of the weight area, so that the next one lands while
  // this one is read. Where the two do not fit together (fp32 on 16 SMs: fc and fc2 are 147 KB each in a
  // ~200 KB area), the next one overlaps this one by ov bytes: its other bytes ("early") can land while
  // this one is read, those ov ("late") only once this one's GEMV is done. Part: bytes [off, off + len) of
  // the next bundle (kind `kind`, at end `parity`) for the part asked for, `prev` being this one's kind.
  struct Part {
    unsigned off, len;
  };
  CLUSTER_HD static int kind_of(int j, int L) { return j == 4 * L ? 4 : j % 4; }  // bundle j of a token
  CLUSTER_HD unsigned overlap(int kind, int prev) const {
    const unsigned B = unsigned(bytes(kind)), P = unsigned(bytes(prev));
    return B + P > cap ? B + P - cap : 0u;  // a multiple of 16, as every size and the cap
  }
  CLUSTER_HD Part part(int kind, int prev, int parity, bool late) const {
    const unsigned B = unsigned(bytes(kind)), ov = overlap(kind, prev);
    // At end 0 the bundle starts at the area's start, and its overlap with the one before (at end 1) is its
    // last ov bytes; at end 1 it ends at the area's end, and the overlap is its first ov bytes.
    if (parity) return late ? Part{0u, ov} : Part{ov, B - ov};
    return late ? Part{B - ov, ov} : Part{0u, B - ov};
  }
  bool valid() const {
    if (S < 2) return false;  // st.async into another block: a cluster of one has none
    for (int kk = 0; kk < 5; ++kk)
      if (bytes(kk) > cap) return false;
    return true;
  }
};
// The plan for S blocks, weights of `wsize` bytes, at most `smem_limit` bytes of dynamic shared memory a block.
inline ClusterPlan make_cluster_plan(int C, int H, int V, int S, int wsize, size_t smem_limit) {
  ClusterPlan p;
  p.S = S, p.C = C, p.H = H, p.V = V, p.wsize = wsize;
  p.G = std::max(1, S / H);
  const int hs = C / H;
  auto share = [&](int kind) { return ((p.O(kind) + S - 1) / S + 3) / 4 * 4; };
  p.Rq = share(0), p.Rp = share(1), p.Rf = share(2), p.R2 = share(3), p.Rh = share(4);
  p.wstride = (hs + 2 + 3) / 4 * 4;
  int rmax = 0;
  for (int kk = 0; kk < 5; ++kk) rmax = std::max(rmax, p.R(kk));
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const unsigned here = unsigned(at);
    at += pad16(bytes);
    return here;
  };
  p.xs = take(size_t(C) * 4), p.xs1 = take(size_t(C) * 4), p.xn = take(size_t(C) * 4);
  p.q = take(size_t(C) * 4), p.q1 = take(size_t(C) * 4), p.h = take(size_t(4) * C * 4);
  p.attp = take(size_t(H) * p.G * p.wstride * 4), p.logits = take(size_t(V) * 4), p.outs = take(size_t(rmax) * 4);
  p.outs1 = take(size_t(rmax) * 4);
  p.wpart = take(size_t(kCWarps + 1) * p.wstride * 4);  // the warps' attention partials, then the block's merge
  p.samp = take(size_t(V) * 16);  // sample_block's scratch: V doubles, V floats, V ints
  p.wts = unsigned(at);
  p.cap = smem_limit > at ? unsigned((smem_limit - at) / 16 * 16) : 0;
  p.total = p.wts + p.cap;
  return p;
}

}  // namespace dec
}  // namespace k
