// day50_gpt/nn/backend_cudnn.cuh: `--backend cudnn`: the model's layers as cached cuDNN graphs
// (nn/cudnn_layers.h) in place of our kernels and cuBLAS: LayerNorm forward and backward (cuDNN's
// normalization operations), the linear layers with their bias and GELU epilogues and their backward
// (matmul, the GELU's backward pointwise, the bias gradient as a reduction), the residual adds and the
// tied head's matmuls (nn/head.cuh). Attention is cuDNN's SDPA graph already (nn/sdpa_cudnn.h).
//
// Each function returns false where its graph cannot run here (cuDNN refused it, printed once at
// build); the caller then takes the custom path for that layer, and the kernels of ours it launches
// land in hand_written, the census the bench reports. So the backend is correct wherever cuDNN is
// not, and the census says what cuDNN did not cover on this GPU and version.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "cudnn_layers.h"
#include "model.cuh"

// Runs g on the model's stream with its workspace; false only where g is null (cuDNN refused it). Every
// tensor is declared 16-byte aligned to cuDNN (common/cudnn_graph.h), and with the width a multiple of 8
// (options.h) every pointer is: a misaligned one is a bug, and it stops the program. (Falling back instead
// would be wrong: a layer's earlier graphs may already have written gradients the custom path then adds
// again.)
template <class T>
bool Model<T>::dnn_run(cg::Graph* g, const std::vector<std::pair<std::string, const void*>>& ptrs) {
  if (!g) return false;
  std::vector<std::pair<std::string, void*>> p;
  for (const auto& x : ptrs) {
    if (x.first != "eps" && (reinterpret_cast<uintptr_t>(x.second) & 15)) {
      std::fprintf(stderr, "error: cuDNN graph '%s': '%s' is not 16-byte aligned\n", g->name().c_str(),
                   x.first.c_str());
      std::exit(1);
    }
    p.emplace_back(x.first, const_cast<void*>(x.second));
  }
  g->execute(p, dnn_ws.as(), s);
  ++dnn_runs;
  return true;
}

// A plain matmul c [M][Nn] = a . b (dnnl::matmul's a_t, b_t), bare or, where cuDNN has no engine for
// that, through an identity pointwise; null where neither builds.
template <class T>
cg::Graph* Model<T>::dnn_matmul(const std::string& what, int64_t M, int64_t K, int64_t Nn, bool a_t, bool b_t,
                                cudnnDataType_t ct) {
  const std::string shape = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(Nn);
  for (dnnl::Epi e : {dnnl::Epi::kNone, dnnl::Epi::kCopy}) {
    const std::string key = what + (e == dnnl::Epi::kCopy ? " (via identity) " : " ") + shape;
    if (cg::Graph* g =
            graphs->get(key, [&](std::string* why) { return dnnl::matmul(dnn, M, K, Nn, a_t, b_t, ct, e, why); }))
      return g;
  }
  return nullptr;
}
// A bias gradient (column sums), bare reduction or after an identity pointwise.
template <class T>
cg::Graph* Model<T>::dnn_colsum(int64_t R, int64_t C) {
  const std::string shape = std::to_string(R) + "x" + std::to_string(C);
  for (bool via : {false, true})
    if (cg::Graph* g = graphs->get(std::string("bias gradient") + (via ? " (via identity) " : " ") + shape,
                                   [&](std::string*) { return dnnl::colsum(dnn, R, C, via); }))
      return g;
  return nullptr;
}

template <class T>
bool Model<T>::dnn_ln_fwd(const float* x, size_t w, size_t b, T* y, float* mean, float* rstd) {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  const std::string key = "layernorm forward " + std::to_string(N) + "x" + std::to_string(c.width);
  cg::Graph* g =
      graphs->get(key, [&](std::string* why) { return dnnl::layernorm_fwd(dnn, N, c.width, Types<T>::dnn, why); });
  return dnn_run(
      g, {{"x", x}, {"scale", P(w)}, {"bias", P(b)}, {"mean", mean}, {"rstd", rstd}, {"eps", &dnn_eps}, {"y", y}});
}

// y = a + b (the residual add, no dropout): fp32 stream plus the sublayer's bf16 output.
template <class T>
bool Model<T>::dnn_add(float* y, const float* a, const T* b) {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  const std::string key = "residual add " + std::to_string(N) + "x" + std::to_string(c.width);
  cg::Graph* g = graphs->get(
      key, [&](std::string*) { return dnnl::add(dnn, N, c.width, CUDNN_DATA_FLOAT, Types<T>::dnn, CUDNN_DATA_FLOAT); });
  return dnn_run(g, {{"a", a}, {"b", b}, {"y", y}});
}

// The LayerNorm backward: its dx into dnn_dx, then dx_t = bf16(dx + dnn_dx) (what the next linear
// backward reads) and dx += dnn_dx, in that order. Without `accumulate`, dx is zeroed first. The
// gains' and biases' gradients are written by the norm operation (each belongs to one LayerNorm, and
// the gradients were zeroed).
template <class T>
bool Model<T>::dnn_ln_back(const float* x, size_t w, size_t b, const float* mean, const float* rstd, const T* dy,
                           bool accumulate) {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  const int C = c.width;
  const std::string shape = std::to_string(N) + "x" + std::to_string(C);
  cg::Graph* nb = graphs->get("layernorm backward " + shape,
                              [&](std::string* why) { return dnnl::layernorm_bwd(dnn, N, C, Types<T>::dnn, why); });
  cg::Graph* to_t = graphs->get("dx add to bf16 " + shape, [&](std::string*) {
    return dnnl::add(dnn, N, C, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, Types<T>::dnn);
  });
  cg::Graph* to_f = graphs->get("dx add in place " + shape, [&](std::string*) {
    return dnnl::add(dnn, N, C, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
  });
  if (!nb || !to_t || !to_f) return false;
  float* d = dnn_dx.as<float>();
  if (!dnn_run(nb, {{"x", x},
                    {"dy", dy},
                    {"scale", P(w)},
                    {"mean", mean},
                    {"rstd", rstd},
                    {"dscale", G(w)},
                    {"dbias", G(b)},
                    {"dx", d}}))
    return false;
  if (!accumulate) CUDA_CHECK(cudaMemsetAsync(dx.as(), 0, dx.bytes(), s));
  return dnn_run(to_t, {{"a", dx.as()}, {"b", d}, {"y", dxT()}}) &&
         dnn_run(to_f, {{"a", dx.as()}, {"b", d}, {"y", dx.as()}});  // in place: elementwise, one read per write
}

// out = in . W^T + b, or with gelu_out: out = the pre-activation, gelu_out = gelu(out). The GELU in the
// matmul's graph where cuDNN fuses it after a written output; else a second, pointwise graph.
template <class T>
bool Model<T>::dnn_linear(const T* in, size_t w, size_t b, T* out, int I, int O, T* gelu_out) {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  const std::string shape = std::to_string(N) + "x" + std::to_string(I) + "x" + std::to_string(O);
  auto mm = [&](dnnl::Epi e, const char* what) {
    return graphs->get(std::string(what) + shape, [&](std::string* why) {
      return dnnl::matmul(dnn, N, I, O, false, true, Types<T>::dnn, e, why);
    });
  };
  if (!gelu_out)
    return dnn_run(mm(dnnl::Epi::kBias, "linear+bias "), {{"a", in}, {"b", W(w)}, {"bias", W(b)}, {"c", out}});
  if (cg::Graph* g = mm(dnnl::Epi::kBiasGelu, "linear+bias+GELU "))
    return dnn_run(g, {{"a", in}, {"b", W(w)}, {"bias", W(b)}, {"pre", out}, {"act", gelu_out}});
  cg::Graph* g1 = mm(dnnl::Epi::kBias, "linear+bias ");
  if (!g1 || !gelu_graph(O)) return false;
  return dnn_run(g1, {{"a", in}, {"b", W(w)}, {"bias", W(b)}, {"c", out}}) && dnn_gelu(out, gelu_out, O);
}
// act = gelu(pre) over N x O: a pointwise graph (the forward's second graph where cuDNN does not fuse
// the GELU, and --recompute's pass in the backward).
template <class T>
cg::Graph* Model<T>::gelu_graph(int O) {
  return graphs->get("gelu " + std::to_string(N) + "x" + std::to_string(O),
                     [&](std::string*) { return dnnl::gelu(dnn, N, O); });
}
template <class T>
bool Model<T>::dnn_gelu(const T* pre, T* act, int O) {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  cg::Graph* g = gelu_graph(O);
  return g && dnn_run(g, {{"pre", pre}, {"act", act}});
}

// din = dout . W (times gelu'(gelu_pre) in the same graph), dW = dout^T . in (written: each weight
// belongs to one layer and the gradients were zeroed), db = dout's column sums. The two matmuls are
// cuDNN's or the whole layer is ours; the bias gradient is a reduction graph where cuDNN offers an engine
// for it, else our two column-sum kernels (added into the zeroed gradient), named in the census.
template <class T>
bool Model<T>::dnn_linear_back(const T* in, size_t w, size_t b, const T* dout, T* din, int I, int O,
                               const T* gelu_pre) {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  const std::string shape = std::to_string(N) + "x" + std::to_string(I) + "x" + std::to_string(O);
  cg::Graph* gi =
      gelu_pre ? graphs->get("linear din*GELU' " + shape,
                             [&](std::string* why) {
                               return dnnl::matmul(dnn, N, O, I, false, false, Types<T>::dnn, dnnl::Epi::kDGelu, why);
                             })
               : dnn_matmul("linear din", N, O, I, false, false, Types<T>::dnn);
  cg::Graph* gw = dnn_matmul("linear dW", O, N, I, true, false, CUDNN_DATA_FLOAT);
  if (!gi || !gw) return false;
  std::vector<std::pair<std::string, const void*>> pi = {{"a", dout}, {"b", W(w)}, {"c", din}};
  if (gelu_pre) pi.push_back({"pre", gelu_pre});
  dnn_run(gi, pi), dnn_run(gw, {{"a", dout}, {"b", in}, {"c", G(w)}});
  if (dnn_run(dnn_colsum(N, O), {{"dy", dout}, {"db", G(b)}})) return true;
  fell_back.insert("bias gradient (ours: cuDNN offered no engine for the reduction)");
  bias_grad(dout, b, O);  // nn/linear.cuh
  return true;
}
