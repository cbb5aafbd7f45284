// day50_gpt/nn/cudnn_layers.h: the GPT's layers as cuDNN graphs (the `--backend cudnn` step), built
// with common/cudnn_graph.h, and the cache that keeps one built plan per (layer kind, shape).
//
// Every builder describes one layer for one shape and returns the graph, or null with the reason when
// cuDNN refuses an operation descriptor (the plan itself is chosen later, by the cache). Shapes use
// cuDNN's 3-D matmul form [batch 1, rows, cols] with row-major strides; a transposed operand is the
// same buffer with its last two strides swapped (no copy). LayerNorm uses the 4-D form [N, C, 1, 1]
// of cuDNN's normalization operations.
#pragma once
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cudnn_graph.h"

namespace dnnl {

using GraphPtr = std::unique_ptr<cg::Graph>;

// Finalizes an operation descriptor built by hand; false (and why) where cuDNN refuses it.
inline bool finalize_op(cg::Desc& op, const std::string& what, std::string* why) {
  const cudnnStatus_t st = op.finalize();
  if (st == CUDNN_STATUS_SUCCESS) return true;
  *why = what + " refused: " + cg::status_text(st);
  return false;
}

// LayerNorm forward, training phase: y = (x - mean) * rstd * scale + bias over each row of x [N][C]
// (fp32, the residual stream), y in `yt` (bf16); mean and rstd [N] (fp32) kept for the backward.
inline GraphPtr layernorm_fwd(cudnnHandle_t h, int64_t N, int64_t C, cudnnDataType_t yt, std::string* why) {
  auto g = std::make_unique<cg::Graph>(h, "layernorm forward " + std::to_string(N) + "x" + std::to_string(C));
  const std::vector<int64_t> row{N, C, 1, 1}, rs{C, 1, C, C}, par{1, C, 1, 1}, ps{C, 1, C, C}, stat{N, 1, 1, 1},
      ss{1, 1, 1, 1};
  g->tensor("x", row, rs, CUDNN_DATA_FLOAT);
  g->tensor("scale", par, ps, CUDNN_DATA_FLOAT);
  g->tensor("bias", par, ps, CUDNN_DATA_FLOAT);
  g->tensor("mean", stat, ss, CUDNN_DATA_FLOAT);
  g->tensor("rstd", stat, ss, CUDNN_DATA_FLOAT);
  g->scalar("eps", 4);
  g->tensor("y", row, rs, yt);
  cg::Desc op(CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR);
  cudnnBackendNormMode_t mode = CUDNN_LAYER_NORM;
  cudnnBackendNormFwdPhase_t phase = CUDNN_NORM_FWD_TRAINING;
  op.set(CUDNN_ATTR_OPERATION_NORM_FWD_MODE, CUDNN_TYPE_NORM_MODE, 1, &mode)
      .set(CUDNN_ATTR_OPERATION_NORM_FWD_PHASE, CUDNN_TYPE_NORM_FWD_PHASE, 1, &phase)
      .desc(CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, g->get("x").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC, g->get("mean").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC, g->get("rstd").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, g->get("scale").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, g->get("bias").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, g->get("eps").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, g->get("y").d);
  if (!finalize_op(op, "the LayerNorm forward operation", why)) return nullptr;
  g->add_op(std::move(op), cg::Desc(), "norm_fwd");
  return g;
}

// LayerNorm backward: dx (fp32) from dy (bf16), x, scale, mean, rstd; dscale and dbias (fp32 [C]) are
// the column sums cuDNN computes with it. dx is written, not added: the caller adds it into the
// residual stream's gradient (an add graph below).
inline GraphPtr layernorm_bwd(cudnnHandle_t h, int64_t N, int64_t C, cudnnDataType_t dyt, std::string* why) {
  auto g = std::make_unique<cg::Graph>(h, "layernorm backward " + std::to_string(N) + "x" + std::to_string(C));
  const std::vector<int64_t> row{N, C, 1, 1}, rs{C, 1, C, C}, par{1, C, 1, 1}, ps{C, 1, C, C}, stat{N, 1, 1, 1},
      ss{1, 1, 1, 1};
  g->tensor("x", row, rs, CUDNN_DATA_FLOAT);
  g->tensor("dy", row, rs, dyt);
  g->tensor("scale", par, ps, CUDNN_DATA_FLOAT);
  g->tensor("mean", stat, ss, CUDNN_DATA_FLOAT);
  g->tensor("rstd", stat, ss, CUDNN_DATA_FLOAT);
  g->tensor("dscale", par, ps, CUDNN_DATA_FLOAT);
  g->tensor("dbias", par, ps, CUDNN_DATA_FLOAT);
  g->tensor("dx", row, rs, CUDNN_DATA_FLOAT);
  cg::Desc op(CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR);
  cudnnBackendNormMode_t mode = CUDNN_LAYER_NORM;
  // No epsilon: rstd already holds it (cuDNN before 8.9.6 required one; this is cuDNN 9).
  op.set(CUDNN_ATTR_OPERATION_NORM_BWD_MODE, CUDNN_TYPE_NORM_MODE, 1, &mode)
      .desc(CUDNN_ATTR_OPERATION_NORM_BWD_XDESC, g->get("x").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC, g->get("dy").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC, g->get("scale").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC, g->get("mean").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC, g->get("rstd").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC, g->get("dscale").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC, g->get("dbias").d)
      .desc(CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC, g->get("dx").d);
  if (!finalize_op(op, "the LayerNorm backward operation", why)) return nullptr;
  g->add_op(std::move(op), cg::Desc(), "norm_bwd");
  return g;
}

// y = a + b elementwise over [R][C] (the residual adds, and dx += LayerNorm's dx), in the given types.
inline GraphPtr add(cudnnHandle_t h, int64_t R, int64_t C, cudnnDataType_t ta, cudnnDataType_t tb, cudnnDataType_t ty) {
  auto g = std::make_unique<cg::Graph>(h, "add " + std::to_string(R) + "x" + std::to_string(C));
  const std::vector<int64_t> d{1, R, C}, s = cg::packed_strides(d);
  g->tensor("a", d, s, ta);
  g->tensor("b", d, s, tb);
  g->tensor("y", d, s, ty);
  g->pointwise(CUDNN_POINTWISE_ADD, "a", "b", "y");
  return g;
}

// What follows a matmul inside its graph.
enum class Epi {
  kNone,      // c = a . b
  kCopy,      // the same through a virtual fp32 tensor and an identity pointwise (the form of the fused
              // graphs, for a cuDNN that offers no engine for a bare matmul)
  kBias,      // c = a . b + bias (bias [1][1][cols], bf16)
  kBiasGelu,  // pre = a . b + bias, kept (the backward's GELU input); act = gelu(pre) (tanh form)
  kDGelu,     // c = (a . b) * gelu'(pre): the GELU's backward on the matmul's output
  kAccum,     // c = a . b + cin, cin the same buffer as c: a gradient added into one already there
};

// c [1][M][N] = a [1][M][K] . b [1][K][N] (bf16 in, fp32 accumulation). a_t: a's buffer holds its
// transpose ([K][M] row-major); b_t: b's holds [N][K] (a weight W [out][in] used as W^T).
inline GraphPtr matmul(cudnnHandle_t h, int64_t M, int64_t K, int64_t N, bool a_t, bool b_t, cudnnDataType_t ct,
                       Epi epi, std::string* why) {
  (void)why;
  auto g = std::make_unique<cg::Graph>(h, "matmul " + std::to_string(M) + "x" + std::to_string(K) + "x" +
                                              std::to_string(N) + " epilogue " + std::to_string(int(epi)));
  const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16;
  g->tensor("a", {1, M, K}, a_t ? std::vector<int64_t>{M * K, 1, M} : std::vector<int64_t>{M * K, K, 1}, bf);
  g->tensor("b", {1, K, N}, b_t ? std::vector<int64_t>{K * N, 1, K} : std::vector<int64_t>{K * N, N, 1}, bf);
  const std::vector<int64_t> cd{1, M, N}, cs = cg::packed_strides(cd);
  if (epi == Epi::kNone) {
    g->tensor("c", cd, cs, ct);
    g->matmul("a", "b", "c");
    return g;
  }
  g->virt("ab", cd, cs);  // the fp32 accumulator, never in memory
  g->matmul("a", "b", "ab");
  if (epi == Epi::kCopy) {
    g->tensor("c", cd, cs, ct);
    g->pointwise(CUDNN_POINTWISE_IDENTITY, "ab", "", "c");
    return g;
  }
  if (epi == Epi::kAccum) {
    g->tensor("cin", cd, cs, ct);
    g->tensor("c", cd, cs, ct);
    g->pointwise(CUDNN_POINTWISE_ADD, "ab", "cin", "c");
    return g;
  }
  if (epi == Epi::kDGelu) {
    g->tensor("pre", cd, cs, bf);
    g->tensor("c", cd, cs, ct);
    cg::Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnPointwiseMode_t mode = CUDNN_POINTWISE_GELU_APPROX_TANH_BWD;
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT)
        .finalized("GELU backward");
    cg::Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, g->get("ab").d)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, g->get("pre").d)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, g->get("c").d);
    if (!finalize_op(op, "the GELU backward operation", why)) return nullptr;
    g->add_op(std::move(op), std::move(pw), "gelu_bwd");
    return g;
  }
  g->tensor("bias", {1, 1, N}, {N, N, 1}, bf);
  if (epi == Epi::kBias) {
    g->tensor("c", cd, cs, ct);
    g->pointwise(CUDNN_POINTWISE_ADD, "ab", "bias", "c");
    return g;
  }
  // kBiasGelu: the pre-activation is both an output and the GELU's input.
  g->tensor("pre", cd, cs, ct);
  g->tensor("act", cd, cs, ct);
  g->pointwise(CUDNN_POINTWISE_ADD, "ab", "bias", "pre");
  g->pointwise(CUDNN_POINTWISE_GELU_APPROX_TANH_FWD, "pre", "", "act");
  return g;
}

// act = gelu(pre) alone (tanh form): the second half of the bias+GELU layer where cuDNN will not
// fuse a GELU after an output that is also written (kBiasGelu's graph).
inline GraphPtr gelu(cudnnHandle_t h, int64_t R, int64_t C) {
  auto g = std::make_unique<cg::Graph>(h, "gelu " + std::to_string(R) + "x" + std::to_string(C));
  const std::vector<int64_t> d{1, R, C}, s = cg::packed_strides(d);
  g->tensor("pre", d, s, CUDNN_DATA_BFLOAT16);
  g->tensor("act", d, s, CUDNN_DATA_BFLOAT16);
  g->pointwise(CUDNN_POINTWISE_GELU_APPROX_TANH_FWD, "pre", "", "act");
  return g;
}

// db [1][1][C] (fp32) = the column sums of dy [1][R][C] (bf16): a bias's gradient. via_identity: an
// identity pointwise into a virtual fp32 tensor first (the pointwise-then-reduction form that cuDNN's
// runtime fusion engines take, for a cuDNN that offers no engine for a bare reduction).
inline GraphPtr colsum(cudnnHandle_t h, int64_t R, int64_t C, bool via_identity) {
  auto g = std::make_unique<cg::Graph>(h, "column sums " + std::to_string(R) + "x" + std::to_string(C));
  const std::vector<int64_t> d{1, R, C}, s = cg::packed_strides(d);
  g->tensor("dy", d, s, CUDNN_DATA_BFLOAT16);
  g->tensor("db", {1, 1, C}, {C, C, 1}, CUDNN_DATA_FLOAT);
  if (!via_identity) {
    g->reduction(CUDNN_REDUCE_TENSOR_ADD, "dy", "db");
    return g;
  }
  g->virt("dyf", d, s);
  g->pointwise(CUDNN_POINTWISE_IDENTITY, "dy", "", "dyf");
  g->reduction(CUDNN_REDUCE_TENSOR_ADD, "dyf", "db");
  return g;
}

// ---- The layers around the blocks: the embedding, dropout, the loss and AdamW ---------------------
// Each is elementwise work cuDNN's pointwise operations express, in graphs cuDNN compiles at run time;
// the gathers and scatters they replace become matmuls with one-hot matrices (the embedding), and the
// reductions the graph API has no engine for here (a row's log-sum-exp, the gradient's norm) go to
// cuDNN's legacy calls (class Legacy below).

// y [1][R][V] = (index == ids): the one-hot rows of R token ids (int32 [1][R][1], broadcast along V),
// from `index`, a constant [1][R][V] fp32 tensor holding each element's column (0 ... V-1). As bf16 for
// the embedding's matmuls, as fp32 for the loss.
inline GraphPtr one_hot(cudnnHandle_t h, int64_t R, int64_t V, cudnnDataType_t yt) {
  auto g = std::make_unique<cg::Graph>(h, "one-hot " + std::to_string(R) + "x" + std::to_string(V));
  const std::vector<int64_t> d{1, R, V}, s = cg::packed_strides(d);
  g->tensor("index", d, s, CUDNN_DATA_FLOAT);
  g->tensor("ids", {1, R, 1}, {R, 1, 1}, CUDNN_DATA_INT32);
  g->tensor("y", d, s, yt);
  g->pointwise(CUDNN_POINTWISE_CMP_EQ, "index", "ids", "y");
  return g;
}

// Dropout through a mask (bf16 0 or 1, drawn by our Philox kernel: the same masks as the custom path
// and the CPU reference) and the by-value scale 1/(1-p): (x * mask) * scale is x * scale or 0, the
// custom path's factor exactly.
// y = a + (b * mask) * scale over [R][C]: the residual add through dropout (a, y fp32; b, mask bf16).
inline GraphPtr add_dropped(cudnnHandle_t h, int64_t R, int64_t C) {
  auto g = std::make_unique<cg::Graph>(h, "add through dropout " + std::to_string(R) + "x" + std::to_string(C));
  const std::vector<int64_t> d{1, R, C}, s = cg::packed_strides(d);
  g->tensor("a", d, s, CUDNN_DATA_FLOAT);
  g->tensor("b", d, s, CUDNN_DATA_BFLOAT16);
  g->tensor("mask", d, s, CUDNN_DATA_BFLOAT16);
  g->scalar("scale", 3);
  g->virt("bm", d, s);
  g->virt("bs", d, s);
  g->tensor("y", d, s, CUDNN_DATA_FLOAT);
  g->pointwise(CUDNN_POINTWISE_MUL, "b", "mask", "bm");
  g->pointwise(CUDNN_POINTWISE_MUL, "bm", "scale", "bs");
  g->pointwise(CUDNN_POINTWISE_ADD, "a", "bs", "y");
  return g;
}
// y = (x * mask) * scale over [R][C], x fp32, y in yt: dropout's backward (the mask regenerated).
inline GraphPtr dropped(cudnnHandle_t h, int64_t R, int64_t C, cudnnDataType_t yt) {
  auto g = std::make_unique<cg::Graph>(h, "through dropout " + std::to_string(R) + "x" + std::to_string(C));
  const std::vector<int64_t> d{1, R, C}, s = cg::packed_strides(d);
  g->tensor("x", d, s, CUDNN_DATA_FLOAT);
  g->tensor("mask", d, s, CUDNN_DATA_BFLOAT16);
  g->scalar("scale", 3);
  g->virt("xm", d, s);
  g->tensor("y", d, s, yt);
  g->pointwise(CUDNN_POINTWISE_MUL, "x", "mask", "xm");
  g->pointwise(CUDNN_POINTWISE_MUL, "xm", "scale", "y");
  return g;
}
// The embedding's second half, in place: x [B][T][C] (fp32, the one-hot matmul's output) += pos [T][C]
// (fp32, broadcast over the batch), then through dropout's mask when `dropout`.
inline GraphPtr add_positions(cudnnHandle_t h, int64_t B, int64_t T, int64_t C, bool dropout) {
  auto g = std::make_unique<cg::Graph>(h, "add positions " + std::to_string(B) + "x" + std::to_string(T) + "x" +
                                              std::to_string(C) + (dropout ? " through dropout" : ""));
  const std::vector<int64_t> d{B, T, C}, s = cg::packed_strides(d);
  g->tensor("xin", d, s, CUDNN_DATA_FLOAT);
  g->tensor("pos", {1, T, C}, {T * C, C, 1}, CUDNN_DATA_FLOAT);
  g->tensor("x", d, s, CUDNN_DATA_FLOAT);
  if (!dropout) {
    g->pointwise(CUDNN_POINTWISE_ADD, "xin", "pos", "x");
    return g;
  }
  g->tensor("mask", d, s, CUDNN_DATA_BFLOAT16);
  g->scalar("scale", 3);
  g->virt("sum", d, s);
  g->virt("sm", d, s);
  g->pointwise(CUDNN_POINTWISE_ADD, "xin", "pos", "sum");
  g->pointwise(CUDNN_POINTWISE_MUL, "sum", "mask", "sm");
  g->pointwise(CUDNN_POINTWISE_MUL, "sm", "scale", "x");
  return g;
}

// The loss's gradient from the log-softmax: dl [R][V] (bf16) = (exp(logp) - onehot) * inv_n, inv_n = 1/R
// by value (the custom kernel's (softmax - onehot) / N).
inline GraphPtr xent_grad(cudnnHandle_t h, int64_t R, int64_t V) {
  auto g = std::make_unique<cg::Graph>(h, "loss gradient " + std::to_string(R) + "x" + std::to_string(V));
  const std::vector<int64_t> d{1, R, V}, s = cg::packed_strides(d);
  g->tensor("logp", d, s, CUDNN_DATA_FLOAT);
  g->tensor("onehot", d, s, CUDNN_DATA_FLOAT);
  g->scalar("inv_n", 3);
  g->virt("p", d, s);
  g->virt("pd", d, s);
  g->tensor("dl", d, s, CUDNN_DATA_BFLOAT16);
  g->pointwise(CUDNN_POINTWISE_EXP, "logp", "", "p");
  g->pointwise(CUDNN_POINTWISE_SUB, "p", "onehot", "pd");
  g->pointwise(CUDNN_POINTWISE_MUL, "pd", "inv_n", "dl");
  return g;
}
// prod [R][V] = logp * onehot (fp32): each row's only non-zero is its target's log-probability, which
// the legacy reduction then sums into the row's loss.
inline GraphPtr xent_pick(cudnnHandle_t h, int64_t R, int64_t V) {
  auto g = std::make_unique<cg::Graph>(h, "loss pick " + std::to_string(R) + "x" + std::to_string(V));
  const std::vector<int64_t> d{1, R, V}, s = cg::packed_strides(d);
  g->tensor("logp", d, s, CUDNN_DATA_FLOAT);
  g->tensor("onehot", d, s, CUDNN_DATA_FLOAT);
  g->tensor("prod", d, s, CUDNN_DATA_FLOAT);
  g->pointwise(CUDNN_POINTWISE_MUL, "logp", "onehot", "prod");
  return g;
}

// w = max(norm / clip, 1): what AdamW divides the gradient by (norm > clip: g * clip / norm; else g).
inline GraphPtr clip_divisor(cudnnHandle_t h) {
  auto g = std::make_unique<cg::Graph>(h, "clip divisor");
  const std::vector<int64_t> one{1, 1, 1};
  g->tensor("norm", one, one, CUDNN_DATA_FLOAT);
  g->scalar("clip", 3);
  g->scalar("one", 3);
  g->virt("u", one, one);
  g->tensor("w", one, one, CUDNN_DATA_FLOAT);
  g->pointwise(CUDNN_POINTWISE_DIV, "norm", "clip", "u");
  g->pointwise(CUDNN_POINTWISE_MAX, "u", "one", "w");
  return g;
}

// AdamW over n parameters, in place, as nn/kernels/adamw.cuh's adamw_clipped computes it:
//   gi = g / w;  m = b1 m + (1-b1) gi;  v = b2 v + (1-b2) gi gi;
//   p -= lr ((m / bc1) / (sqrt(v / bc2) + eps) + wd decay p);  pt = bf16(p).
// p, g, m, v fp32 [1][1][n]; decay bf16 (1 where weight decay applies, else 0); w, lr, bc1, bc2 fp32
// [1][1][1] in device memory (they change every step: a captured step reads them there); b1, 1-b1, b2,
// 1-b2, eps and wd by value (constant for a run). The outputs m, v, p are their inputs' buffers.
// The n parameters are laid out as [1][n / w][w], w the largest power of two up to 1024 that divides n:
// as one row of n, the runtime-compiled kernel failed to launch at n = 10.8 M (CUDA's "invalid value",
// seen on the H100 with cuDNN 9.19), while the [rows][columns] graphs of the layers run at 25 M.
inline GraphPtr adamw(cudnnHandle_t h, int64_t n) {
  auto g = std::make_unique<cg::Graph>(h, "AdamW " + std::to_string(n));
  int64_t w = 1024;
  while (n % w) w /= 2;
  const std::vector<int64_t> d{1, n / w, w}, s = cg::packed_strides(d), one{1, 1, 1};
  for (const char* t : {"p", "g", "m", "v"}) g->tensor(t, d, s, CUDNN_DATA_FLOAT);
  g->tensor("decay", d, s, CUDNN_DATA_BFLOAT16);
  for (const char* t : {"w", "lr", "bc1", "bc2"}) g->tensor(t, one, one, CUDNN_DATA_FLOAT);
  for (const char* t : {"b1", "omb1", "b2", "omb2", "eps", "wd"}) g->scalar(t, 3);
  for (const char* t : {"gi", "m1", "m2", "v1", "v2", "v3", "mh", "vh", "sv", "den", "u", "pd", "dec", "sum", "step"})
    g->virt(t, d, s);
  for (const char* t : {"m_out", "v_out", "p_out"}) g->tensor(t, d, s, CUDNN_DATA_FLOAT);
  g->tensor("pt", d, s, CUDNN_DATA_BFLOAT16);
  using P = cudnnPointwiseMode_t;
  const P mul = CUDNN_POINTWISE_MUL, add = CUDNN_POINTWISE_ADD, dv = CUDNN_POINTWISE_DIV;
  g->pointwise(dv, "g", "w", "gi");
  g->pointwise(mul, "m", "b1", "m1");
  g->pointwise(mul, "gi", "omb1", "m2");
  g->pointwise(add, "m1", "m2", "m_out");
  g->pointwise(mul, "v", "b2", "v1");
  g->pointwise(mul, "gi", "omb2", "v2");
  g->pointwise(mul, "v2", "gi", "v3");
  g->pointwise(add, "v1", "v3", "v_out");
  g->pointwise(dv, "m_out", "bc1", "mh");
  g->pointwise(dv, "v_out", "bc2", "vh");
  g->pointwise(CUDNN_POINTWISE_SQRT, "vh", "", "sv");
  g->pointwise(add, "sv", "eps", "den");
  g->pointwise(dv, "mh", "den", "u");
  g->pointwise(mul, "p", "decay", "pd");
  g->pointwise(mul, "pd", "wd", "dec");
  g->pointwise(add, "u", "dec", "sum");
  g->pointwise(mul, "sum", "lr", "step");
  g->pointwise(CUDNN_POINTWISE_SUB, "p", "step", "p_out");
  g->pointwise(CUDNN_POINTWISE_IDENTITY, "p_out", "", "pt");
  return g;
}

// What the graph API offered no engine for on this GPU and version (a bare reduction: column sums,
// row sums, a norm; the build says "no engine configuration offered"), through cuDNN's legacy
// (pre-graph) calls, deprecated in cuDNN 9 but shipped and supported: the log-softmax of the logits,
// each row's sum (the loss, from the picked log-probabilities) and the gradient's 2-norm.
class Legacy {
 public:
  Legacy(cudnnHandle_t h, int R, int V, size_t n) : h_(h), norm_ok_(n <= size_t(INT_MAX)) {
    for (cudnnTensorDescriptor_t* t : {&rows_, &col_, &all_, &one_}) CUDNN_CHECK(cudnnCreateTensorDescriptor(t));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(rows_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, R, V, 1, 1));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(col_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, R, 1, 1, 1));
    // The legacy descriptors take int dimensions: past 2^31 parameters there is no norm here.
    if (norm_ok_) CUDNN_CHECK(cudnnSetTensor4dDescriptor(all_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, int(n), 1, 1));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(one_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, 1));
    for (auto* r : {&sum_, &norm_}) CUDNN_CHECK(cudnnCreateReduceTensorDescriptor(r));
    CUDNN_CHECK(cudnnSetReduceTensorDescriptor(sum_, CUDNN_REDUCE_TENSOR_ADD, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN,
                                               CUDNN_REDUCE_TENSOR_NO_INDICES, CUDNN_32BIT_INDICES));
    CUDNN_CHECK(cudnnSetReduceTensorDescriptor(norm_, CUDNN_REDUCE_TENSOR_NORM2, CUDNN_DATA_FLOAT,
                                               CUDNN_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES,
                                               CUDNN_32BIT_INDICES));
    CUDNN_CHECK(cudnnGetReductionWorkspaceSize(h_, sum_, rows_, col_, &ws_rows_));
    if (norm_ok_) CUDNN_CHECK(cudnnGetReductionWorkspaceSize(h_, norm_, all_, one_, &ws_norm_));
  }
  ~Legacy() {
    for (cudnnTensorDescriptor_t t : {rows_, col_, all_, one_}) cudnnDestroyTensorDescriptor(t);
    for (cudnnReduceTensorDescriptor_t r : {sum_, norm_}) cudnnDestroyReduceTensorDescriptor(r);
  }
  Legacy(const Legacy&) = delete;
  Legacy& operator=(const Legacy&) = delete;
  // Whether each call can run with `cap` bytes of workspace: the 2-norm wants 4 bytes per parameter
  // (seen: 4 n on cuDNN 9.14 and 9.19), so past 64 M parameters it does not fit the model's 256 MiB.
  bool rows_fit(size_t cap) const { return ws_rows_ <= cap; }
  bool norm_fits(size_t cap) const { return norm_ok_ && ws_norm_ <= cap; }
  size_t norm_workspace() const { return ws_norm_; }

  // logp [R][V] = log(softmax(z)) per row (fp32).
  void log_softmax(const float* z, float* logp, cudaStream_t s) {
    const float one = 1.f, zero = 0.f;
    CUDNN_CHECK(cudnnSetStream(h_, s));
    CUDNN_CHECK(cudnnSoftmaxForward(h_, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE, &one, rows_, z, &zero,
                                    rows_, logp));
  }
  // out [R] = -(the sum of each row of x [R][V]): the loss from the picked log-probabilities.
  void neg_row_sums(const float* x, float* out, void* ws, size_t ws_bytes, cudaStream_t s) {
    const float minus = -1.f, zero = 0.f;
    CUDNN_CHECK(cudnnSetStream(h_, s));
    CUDNN_CHECK(cudnnReduceTensor(h_, sum_, nullptr, 0, ws, ws_bytes, &minus, rows_, x, &zero, col_, out));
  }
  // out[0] = the 2-norm of x [n].
  void norm2(const float* x, float* out, void* ws, size_t ws_bytes, cudaStream_t s) {
    const float one = 1.f, zero = 0.f;
    CUDNN_CHECK(cudnnSetStream(h_, s));
    CUDNN_CHECK(cudnnReduceTensor(h_, norm_, nullptr, 0, ws, ws_bytes, &one, all_, x, &zero, one_, out));
  }

 private:
  cudnnHandle_t h_;
  cudnnTensorDescriptor_t rows_ = nullptr, col_ = nullptr, all_ = nullptr, one_ = nullptr;
  cudnnReduceTensorDescriptor_t sum_ = nullptr, norm_ = nullptr;
  bool norm_ok_;
  size_t ws_rows_ = 0, ws_norm_ = 0;
};

// One plan per (layer kind, shape), built on first use (outside any CUDA graph capture: the trainer's
// first step is eager) and kept; a graph cuDNN cannot run is kept too, with its reason, so the model
// falls back to its own path there every time without asking again.
class Cache {
 public:
  struct Entry {
    GraphPtr g;  // null: not buildable (see why)
    std::string why;
    double build_ms = 0;
  };
  explicit Cache(int64_t workspace_cap) : cap_(workspace_cap) {}

  // The graph under key, or null (with the reason printed once) where it cannot run here.
  cg::Graph* get(const std::string& key, const std::function<GraphPtr(std::string*)>& make) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      Entry e;
      const auto t0 = std::chrono::steady_clock::now();
      e.g = make(&e.why);
      if (!e.g && e.why.empty()) e.why = "not built";
      if (e.g) {
        // No engine that lowers its inputs' precision: the LayerNorms and adds read the fp32 residual
        // stream, which must stay fp32 (the custom path keeps it so; a silent down-convert would pass
        // the bf16 tolerances unseen). Where only such engines exist, the layer stays ours, named.
        cg::BuildOptions opt;
        opt.accept = [](const cg::Engine& en) { return !en.down_convert; };
        std::string w = e.g->build(opt);
        if (w.empty() && e.g->workspace() > cap_)
          w = "its plan needs " + std::to_string(e.g->workspace()) + " bytes of workspace, above the " +
              std::to_string(cap_) + " reserved";
        if (!w.empty()) e.why = w;
      }
      e.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!e.why.empty()) std::printf("note: cuDNN graph '%s' not used: %s\n", key.c_str(), e.why.c_str());
      it = entries_.emplace(key, std::move(e)).first;
    }
    return it->second.why.empty() ? it->second.g.get() : nullptr;
  }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  int built() const {
    int n = 0;
    for (const auto& e : entries_) n += e.second.why.empty();
    return n;
  }
  double build_ms() const {
    double t = 0;
    for (const auto& e : entries_) t += e.second.build_ms;
    return t;
  }
  // One line per graph: its chosen engine and how it was made (RTC: compiled at plan build).
  void print(FILE* f = stdout) const {
    for (const auto& kv : entries_) {
      const Entry& e = kv.second;
      if (!e.why.empty()) {
        std::fprintf(f, "  %-48s refused: %s\n", kv.first.c_str(), e.why.c_str());
        continue;
      }
      const cg::Engine& c = e.g->chosen();
      std::fprintf(f, "  %-48s engine %4lld %-4s build %8.1f ms  workspace %8lld B\n", kv.first.c_str(),
                   (long long)c.global_index, c.runtime_compiled ? "RTC" : "pre", e.build_ms,
                   (long long)e.g->workspace());
    }
  }

 private:
  std::map<std::string, Entry> entries_;
  int64_t cap_;
};

}  // namespace dnnl
