// day50_gpt/nn/sdpa_cudnn.h: causal scaled-dot-product attention, forward and backward, as cuDNN
// backend graphs (flash attention: the T x T scores never reach memory).
//
// cuDNN 9 has no single "causal attention" operation before 9.21 in its backend API, so the graph is
// written out op by op, and cuDNN's heuristics recognise the pattern and offer their fused
// attention engine for it (the recipe below; the README's "Attention three ways" says what was checked on the GPU):
//
//   forward   S = Q.K^T (K^T is K's own buffer with the last two strides swapped: no copy)
//             S' = S * scale ; masked = (row >= col) ? S' : -1e10 (GEN_INDEX, CMP_GE, BINARY_SELECT)
//             m = rowmax ; E = exp(masked - m) ; l = rowsum(E) ; P = E / l ; O = P.V
//             Stats = m + log(l) (fp32, kept for the backward: P = exp(masked - Stats))
//   backward  P recomputed from Q, K and Stats ; dV = P^T.dO ; dP = dO.V^T ;
//             Dsum = rowsum(dO * O) ; dS = P * (dP - Dsum) * scale ; dQ = dS.K ; dK = dS^T.Q
//             (dQ is accumulated in an fp32 buffer that must start at zero, then converted).
//
// Q, K and V are read in place from the model's fused qkv buffer ([B*T][3C], q | k | v per row, head h
// at columns h*D ...): as 4-D tensors [B, H, T, D] they have strides (T*3C, D, 3C, 1). dQ, dK, dV are
// written with the same strides into dqkv, and O / dO are [B*T][C]: strides (T*C, D, C, 1).
//
// A few details of the pattern (the data type of the virtual probabilities, their reordering, how the
// transposed P is produced) are not pinned down by the documentation; build() tries the variants
// below in order and keeps the first that cuDNN accepts, and the program prints which one it was.
#pragma once
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cudnn_graph.h"

namespace sdpa {

struct Shape {
  int64_t B, H, T, D;
};

// What cuDNN is asked for, per attempt.
struct Variant {
  int p_form;                // forward P: 0 io type, 1 fp32 reordered F16x16, 2 io type reordered F16x16
  int pt_form;               // backward P^T: 0 reshape fp32 -> io, 1 identity to io then reshape, 2 reshape kept fp32
  bool dq_reordered;         // dQ accumulator marked F16x16
  cudnnDataType_t cmp_prec;  // math precision of the CMP_GE of the mask
  std::string describe() const {
    static const char* pf[] = {"P io", "P fp32/F16x16", "P io/F16x16"};
    static const char* tf[] = {"P^T reshape-cast", "P^T identity+reshape", "P^T fp32"};
    return std::string(pf[p_form]) + ", " + tf[pt_form] + (dq_reordered ? ", dQacc F16x16" : ", dQacc plain") +
           (cmp_prec == CUDNN_DATA_BOOLEAN ? ", cmp bool" : "");
  }
};

class Attention {
 public:
  Attention(cudnnHandle_t h, Shape s, cudnnDataType_t io)
      : h_(h), s_(s), io_(io), scale_(1.f / std::sqrt(float(s.D))) {}

  // "" when both graphs have a plan; otherwise why not (then use the hand-written attention).
  std::string build() {
    if (io_ != CUDNN_DATA_BFLOAT16 && io_ != CUDNN_DATA_HALF)
      return "cuDNN's fused attention takes fp16/bf16 inputs only";
    if (s_.D % 8 != 0 || s_.D > 256) return "head size " + std::to_string(s_.D) + " is not a multiple of 8 up to 256";
    std::string why_f, why_b;
    for (const cudnnDataType_t cmp : {CUDNN_DATA_FLOAT, CUDNN_DATA_BOOLEAN}) {
      for (int pf = 0; pf < 3 && !fwd_; ++pf) {
        Variant v{pf, 0, true, cmp};
        auto g = make_fwd(v);
        const std::string why = g->build();
        if (why.empty())
          fwd_ = std::move(g), fwd_variant_ = v.describe();
        else
          why_f = why;
      }
      for (int pt = 0; pt < 3 && !bwd_; ++pt)
        for (const bool dqr : {true, false}) {
          if (bwd_) break;
          Variant v{0, pt, dqr, cmp};
          auto g = make_bwd(v);
          const std::string why = g->build();
          if (why.empty())
            bwd_ = std::move(g), bwd_variant_ = v.describe();
          else
            why_b = why;
        }
      if (fwd_ && bwd_) return "";
    }
    if (!fwd_) return "forward graph: " + why_f;
    return "backward graph: " + why_b;
  }
  bool ready() const { return fwd_ && bwd_; }
  const std::string& fwd_variant() const { return fwd_variant_; }
  const std::string& bwd_variant() const { return bwd_variant_; }
  cg::Graph& fwd_graph() { return *fwd_; }
  cg::Graph& bwd_graph() { return *bwd_; }
  size_t workspace() const { return size_t(std::max(fwd_ ? fwd_->workspace() : 0, bwd_ ? bwd_->workspace() : 0)); }
  // fp32 scratch the backward needs: Dsum [B*H*T] and the dQ accumulator [B*T*H*D].
  size_t dsum_elems() const { return size_t(s_.B * s_.H * s_.T); }
  size_t dq_acc_elems() const { return size_t(s_.B * s_.T * s_.H * s_.D); }

  // qkv: [B*T][3C] in the io type; out: [B*T][C]; stats: [B][H][T] fp32.
  void forward(const void* qkv, void* out, float* stats, void* ws, cudaStream_t st = 0) {
    fwd_->execute({{"Q", off(qkv, 0)},
                   {"Kt", off(qkv, 1)},
                   {"V", off(qkv, 2)},
                   {"O", out},
                   {"Stats", stats},
                   {"scale", &scale_},
                   {"neg", &neg_}},
                  ws, st);
  }
  void backward(const void* qkv, const void* out, const void* dout, const float* stats, void* dqkv, float* dsum,
                float* dq_acc, void* ws, cudaStream_t st = 0) {
    CUDA_CHECK(cudaMemsetAsync(dq_acc, 0, dq_acc_elems() * sizeof(float), st));
    bwd_->execute({{"Q", off(qkv, 0)},
                   {"Kt", off(qkv, 1)},
                   {"Vt", off(qkv, 2)},
                   {"O", const_cast<void*>(out)},
                   {"dO", const_cast<void*>(dout)},
                   {"Stats", const_cast<float*>(stats)},
                   {"Dsum", dsum},
                   {"dQacc", dq_acc},
                   {"dQ", off(dqkv, 0)},
                   {"dK", off(dqkv, 1)},
                   {"dV", off(dqkv, 2)},
                   {"scale", &scale_},
                   {"neg", &neg_},
                   {"one", &one_}},
                  ws, st);
  }

 private:
  // The start of q (0), k (1) or v (2) in a qkv-shaped buffer.
  void* off(const void* base, int which) const {
    const size_t esize = io_ == CUDNN_DATA_FLOAT ? 4 : 2;
    return const_cast<char*>(static_cast<const char*>(base)) + size_t(which) * size_t(s_.H * s_.D) * esize;
  }
  std::vector<int64_t> sd() const { return {s_.B, s_.H, s_.T, s_.T}; }
  std::vector<int64_t> ss() const { return {s_.H * s_.T * s_.T, s_.T * s_.T, s_.T, 1}; }
  std::vector<int64_t> sst() const { return {s_.H * s_.T * s_.T, s_.T * s_.T, 1, s_.T}; }  // the transpose's strides
  std::vector<int64_t> rd() const { return {s_.B, s_.H, s_.T, 1}; }
  std::vector<int64_t> rs() const { return {s_.H * s_.T, s_.T, 1, 1}; }
  std::vector<int64_t> qd() const { return {s_.B, s_.H, s_.T, s_.D}; }
  std::vector<int64_t> qkv_strides() const {
    const int64_t C3 = 3 * s_.H * s_.D;
    return {s_.T * C3, s_.D, C3, 1};
  }
  std::vector<int64_t> qkv_t_strides() const {  // K^T / V^T: dims [B, H, D, T]
    const int64_t C3 = 3 * s_.H * s_.D;
    return {s_.T * C3, s_.D, 1, C3};
  }
  std::vector<int64_t> o_strides() const {
    const int64_t C = s_.H * s_.D;
    return {s_.T * C, s_.D, C, 1};
  }

  // S' = (Q.K^T) * scale, then the causal mask: leaves the masked scores in "Sm".
  void scores(cg::Graph& g, const Variant& v) {
    g.tensor("Q", qd(), qkv_strides(), io_);
    g.tensor("Kt", {s_.B, s_.H, s_.D, s_.T}, qkv_t_strides(), io_);
    g.virt("S", sd(), ss());
    g.matmul("Q", "Kt", "S");
    g.scalar("scale", 4);
    g.virt("Ss", sd(), ss());
    g.pointwise(CUDNN_POINTWISE_MUL, "S", "scale", "Ss");
    g.virt("row", sd(), ss());
    g.virt("col", sd(), ss());
    g.gen_index("Ss", "row", 2);
    g.gen_index("Ss", "col", 3);
    g.virt("causal", sd(), ss(), CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, "row", "col", "causal", v.cmp_prec);
    g.scalar("neg", 4);
    g.virt("Sm", sd(), ss());
    g.select("Ss", "neg", "causal", "Sm");
  }

  std::unique_ptr<cg::Graph> make_fwd(const Variant& v) {
    auto g = std::make_unique<cg::Graph>(h_, "causal attention forward");
    scores(*g, v);
    g->tensor("V", qd(), qkv_strides(), io_);
    g->virt("mx", rd(), rs());
    g->reduction(CUDNN_REDUCE_TENSOR_MAX, "Sm", "mx");
    g->virt("Sd", sd(), ss());
    g->pointwise(CUDNN_POINTWISE_SUB, "Sm", "mx", "Sd");
    g->virt("E", sd(), ss());
    g->pointwise(CUDNN_POINTWISE_EXP, "Sd", "", "E");
    g->virt("sum", rd(), rs());
    g->reduction(CUDNN_REDUCE_TENSOR_ADD, "E", "sum");
    g->virt("lg", rd(), rs());
    g->pointwise(CUDNN_POINTWISE_LOG, "sum", "", "lg");
    g->tensor("Stats", rd(), rs(), CUDNN_DATA_FLOAT);
    g->pointwise(CUDNN_POINTWISE_ADD, "mx", "lg", "Stats");
    if (v.p_form == 0)
      g->virt("P", sd(), ss(), io_);
    else
      g->virt_reordered("P", sd(), ss(), v.p_form == 1 ? CUDNN_DATA_FLOAT : io_, CUDNN_TENSOR_REORDERING_F16x16);
    g->pointwise(CUDNN_POINTWISE_DIV, "E", "sum", "P");
    g->tensor("O", qd(), o_strides(), io_);
    g->matmul("P", "V", "O");
    return g;
  }

  std::unique_ptr<cg::Graph> make_bwd(const Variant& v) {
    auto g = std::make_unique<cg::Graph>(h_, "causal attention backward");
    // Dsum = rowsum(dO * O), written to an fp32 buffer.
    g->tensor("O", qd(), o_strides(), io_);
    g->tensor("dO", qd(), o_strides(), io_);
    g->virt("dOO", qd(), o_strides());
    g->pointwise(CUDNN_POINTWISE_MUL, "dO", "O", "dOO");
    g->virt("rsum", rd(), rs());
    g->reduction(CUDNN_REDUCE_TENSOR_ADD, "dOO", "rsum");
    g->scalar("one", 4);
    g->tensor("Dsum", rd(), rs(), CUDNN_DATA_FLOAT);
    g->pointwise(CUDNN_POINTWISE_MUL, "rsum", "one", "Dsum");
    // P recomputed from the saved softmax statistics.
    scores(*g, v);
    g->tensor("Stats", rd(), rs(), CUDNN_DATA_FLOAT);
    g->virt("Sd", sd(), ss());
    g->pointwise(CUDNN_POINTWISE_SUB, "Sm", "Stats", "Sd");
    g->virt("P", sd(), ss());
    g->pointwise(CUDNN_POINTWISE_EXP, "Sd", "", "P");
    // dV = P^T . dO
    if (v.pt_form == 1) {
      g->virt("Pio", sd(), ss(), io_);
      g->pointwise(CUDNN_POINTWISE_IDENTITY, "P", "", "Pio");
      g->virt("Pt", {s_.B, s_.H, s_.T, s_.T}, sst(), io_);
      g->reshape("Pio", "Pt");
    } else {
      g->virt("Pt", {s_.B, s_.H, s_.T, s_.T}, sst(), v.pt_form == 0 ? io_ : CUDNN_DATA_FLOAT);
      g->reshape("P", "Pt");
    }
    g->tensor("dV", qd(), qkv_strides(), io_);
    g->matmul("Pt", "dO", "dV");
    // dS = P * (dO.V^T - Dsum) * scale
    g->tensor("Vt", {s_.B, s_.H, s_.D, s_.T}, qkv_t_strides(), io_);
    g->virt("dP", sd(), ss());
    g->matmul("dO", "Vt", "dP");
    g->virt("dPm", sd(), ss());
    g->pointwise(CUDNN_POINTWISE_SUB, "dP", "Dsum", "dPm");
    g->virt("dS0", sd(), ss());
    g->pointwise(CUDNN_POINTWISE_MUL, "dPm", "P", "dS0");
    g->virt("dS", sd(), ss());
    g->pointwise(CUDNN_POINTWISE_MUL, "dS0", "scale", "dS");
    // dQ = dS . K (K is K^T reshaped back), through the fp32 accumulator
    g->virt("K", qd(), qkv_strides(), io_);
    g->reshape("Kt", "K");
    if (v.dq_reordered)
      g->tensor_reordered("dQacc", qd(), o_strides(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_REORDERING_F16x16);
    else
      g->tensor("dQacc", qd(), o_strides(), CUDNN_DATA_FLOAT);
    g->matmul("dS", "K", "dQacc");
    g->tensor("dQ", qd(), qkv_strides(), io_);
    g->pointwise(CUDNN_POINTWISE_IDENTITY, "dQacc", "", "dQ");
    // dK = dS^T . Q
    g->virt("dSt", {s_.B, s_.H, s_.T, s_.T}, sst());
    g->reshape("dS", "dSt");
    g->tensor("dK", qd(), qkv_strides(), io_);
    g->matmul("dSt", "Q", "dK");
    return g;
  }

  cudnnHandle_t h_;
  Shape s_;
  cudnnDataType_t io_;
  std::unique_ptr<cg::Graph> fwd_, bwd_;
  std::string fwd_variant_, bwd_variant_;
  float scale_, neg_ = -1e10f, one_ = 1.f;
};

}  // namespace sdpa
