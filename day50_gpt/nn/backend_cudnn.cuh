// day50_gpt/nn/backend_cudnn.cuh: `--backend cudnn`: the model's layers as cached cuDNN graphs
// (nn/cudnn_layers.h) in place of our kernels and cuBLAS: LayerNorm forward and backward (cuDNN's
// normalization operations), the linear layers with their bias and GELU epilogues and their backward
// (matmul, the GELU's backward pointwise, the bias gradient), the residual adds and dropout (pointwise,
// with our mask), the tied head's matmuls (nn/head.cuh), the embedding (matmuls with one-hot rows in
// place of the gather and the scatter-add), the loss and AdamW. Attention is cuDNN's SDPA graph already
// (nn/sdpa_cudnn.h). The graph API offers no engine for a bare reduction (seen on cuDNN 9.14 and 9.19),
// so the bias gradients' column sums run as a matmul with a row of ones (the reduction graph is asked
// for first), and the log-softmax, the loss's row sums and the gradient's norm always go to cuDNN's
// legacy calls (dnnl::Legacy; no graph is tried for them). A legacy call cannot be refused at build
// time: where its workspace would not fit (the norm past 64 M parameters), dnn_setup says so once and
// the layer takes the custom path.
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
    if (!g->get(x.first).by_value && (reinterpret_cast<uintptr_t>(x.second) & 15)) {
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

// y = a + drop(b) at `site` (the residual add): fp32 stream plus the sublayer's bf16 output, through
// the site's mask when dropout is on.
template <class T>
bool Model<T>::dnn_add(float* y, const float* a, const T* b, uint32_t site) {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  const std::string shape = std::to_string(N) + "x" + std::to_string(c.width);
  if (drop.on) {
    cg::Graph* g = graphs->get("residual add through dropout " + shape,
                               [&](std::string*) { return dnnl::add_dropped(dnn, N, c.width); });
    if (!g) return false;
    drop_mask(site);
    return dnn_run(g, {{"a", a}, {"b", b}, {"mask", dnn_mask.as()}, {"scale", &drop.scale}, {"y", y}});
  }
  cg::Graph* g = graphs->get("residual add " + shape, [&](std::string*) {
    return dnnl::add(dnn, N, c.width, CUDNN_DATA_FLOAT, Types<T>::dnn, CUDNN_DATA_FLOAT);
  });
  return dnn_run(g, {{"a", a}, {"b", b}, {"y", y}});
}

// The constants the graphs below read, filled once (host copies, no kernel of ours), and the legacy
// reductions' descriptors.
template <class T>
void Model<T>::dnn_setup() {
  const size_t V = size_t(c.vocab), NN = size_t(N), TT = size_t(T_);
  std::vector<float> index(NN * V);
  for (size_t i = 0; i < index.size(); ++i) index[i] = float(i % V);
  to_device(dnn_index.as<float>(), index);
  std::vector<bf16> pos(NN * TT, __float2bfloat16(0.f)), ones(NN, __float2bfloat16(1.f));
  for (size_t n = 0; n < NN; ++n) pos[n * TT + n % TT] = __float2bfloat16(1.f);
  to_device(dnn_pos.as<bf16>(), pos);
  to_device(dnn_ones.as<bf16>(), ones);
  const std::vector<uint8_t> dm = train::decay_mask(c);
  std::vector<bf16> decay_bf(dm.size());
  for (size_t i = 0; i < dm.size(); ++i) decay_bf[i] = __float2bfloat16(dm[i] ? 1.f : 0.f);
  to_device(dnn_decay.as<bf16>(), decay_bf);
  legacy = std::make_unique<dnnl::Legacy>(dnn, N, c.vocab, lay.total);
  dnn_loss_ok = legacy->rows_fit(dnn_ws.bytes());
  dnn_norm_ok = legacy->norm_fits(dnn_ws.bytes());
  if (!dnn_loss_ok) std::printf("note: cuDNN's legacy row sums not used: their workspace exceeds the one kept\n");
  if (!dnn_norm_ok)
    std::printf("note: cuDNN's legacy 2-norm not used (AdamW takes the custom path): %zu parameters want %zu bytes "
                "of workspace, more than the %zu kept\n",
                lay.total, legacy->norm_workspace(), dnn_ws.bytes());
}

// `site`'s dropout mask into dnn_mask: the one kernel of ours dropout keeps (nn/kernels/bias_gelu_residual.cuh).
template <class T>
void Model<T>::drop_mask(uint32_t site) {
  hw("dropout_mask");
  const size_t NC = size_t(N) * c.width;
  k::dropout_mask<bf16><<<grid_for(NC), 256, 0, s>>>(dnn_mask.as<bf16>(), NC, drop, site, sv);
  LAUNCH_CHECK();
}
// The graph of y = drop(dx) into T, shared by dropout's backward and the embedding's.
template <class T>
cg::Graph* Model<T>::dropped_graph() {
  return graphs->get("through dropout " + std::to_string(N) + "x" + std::to_string(c.width),
                     [&](std::string*) { return dnnl::dropped(dnn, N, c.width, Types<T>::dnn); });
}
// y = drop(dx) at `site` (dropout's backward), in bf16 for the next matmul.
template <class T>
bool Model<T>::dnn_dropped(uint32_t site, T* y) {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  cg::Graph* g = dropped_graph();
  if (!g) return false;
  drop_mask(site);
  return dnn_run(g, {{"x", dx.as()}, {"mask", dnn_mask.as()}, {"scale", &drop.scale}, {"y", y}});
}

// The embedding: x = onehot(tok) . wte (a matmul: the gather by token id), then + wpe broadcast over
// the batch and through the embedding's dropout (a pointwise graph). wte is read in bf16 (the copy the
// matmuls read) where the custom kernel gathers the fp32 master: x differs by wte's bf16 rounding.
template <class T>
bool Model<T>::dnn_embed_fwd() {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  const int C = c.width, V = c.vocab;
  cg::Graph* oh = graphs->get("one-hot tokens " + std::to_string(N) + "x" + std::to_string(V),
                              [&](std::string*) { return dnnl::one_hot(dnn, N, V, CUDNN_DATA_BFLOAT16); });
  cg::Graph* mm = dnn_matmul("embedding (one-hot . wte)", N, V, C, false, false, CUDNN_DATA_FLOAT);
  cg::Graph* ap = graphs->get(
      "add positions " + std::to_string(N) + "x" + std::to_string(C) + (drop.on ? " through dropout" : ""),
      [&](std::string*) { return dnnl::add_positions(dnn, B, T_, C, drop.on); });
  if (!oh || !mm || !ap) return false;
  dnn_run(oh, {{"index", dnn_index.as()}, {"ids", tok.as()}, {"y", oh_tok.as()}});
  dnn_run(mm, {{"a", oh_tok.as()}, {"b", W(lay.wte)}, {"c", xs[0].as()}});
  std::vector<std::pair<std::string, const void*>> p = {{"xin", xs[0].as()}, {"pos", P(lay.wpe)}, {"x", xs[0].as()}};
  if (drop.on) {
    drop_mask(dropout::site_embed());
    p.push_back({"mask", dnn_mask.as()}), p.push_back({"scale", &drop.scale});
  }
  return dnn_run(ap, p);
}
// Its backward: d = drop(dx) in bf16 (dx_t already holds bf16(dx) without dropout), then
// wte's gradient += onehot(tok)^T . d (added to the head's, in the matmul's epilogue: the scatter-add)
// and wpe's = pos^T . d (the positions' one-hot rows: the sum over the batch). Only after the forward's
// graphs ran (dnn_embedded): they wrote the one-hot rows. The epilogue reads and writes the same buffer
// under two tensor ids, which cuDNN does not document; in-place and out-of-place results were the same
// bit for bit on an H100 (cuDNN 9.14, engines 4 and 7, up to 65,536 rows), and --verify covers it.
template <class T>
bool Model<T>::dnn_embed_back() {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  const int C = c.width, V = c.vocab;
  cg::Graph* gw = graphs->get("embedding dW (added) " + std::to_string(V) + "x" + std::to_string(N) + "x" +
                                  std::to_string(C),
                              [&](std::string* why) {
                                return dnnl::matmul(dnn, V, N, C, true, false, CUDNN_DATA_FLOAT, dnnl::Epi::kAccum,
                                                    why);
                              });
  cg::Graph* gp = dnn_matmul("position dW (pos^T . d)", T_, N, C, true, false, CUDNN_DATA_FLOAT);
  cg::Graph* gd = drop.on ? dropped_graph() : nullptr;
  if (!gw || !gp || (drop.on && !gd)) return false;
  if (drop.on) {
    drop_mask(dropout::site_embed());
    dnn_run(gd, {{"x", dx.as()}, {"mask", dnn_mask.as()}, {"scale", &drop.scale}, {"y", dxT()}});
  }
  dnn_run(gw, {{"a", oh_tok.as()}, {"b", dxT()}, {"cin", G(lay.wte)}, {"c", G(lay.wte)}});
  return dnn_run(gp, {{"a", dnn_pos.as()}, {"b", dxT()}, {"c", G(lay.wpe)}});
}

// The loss: logp = log-softmax(logits) (legacy), dlogits = (exp(logp) - onehot(tgt)) / N (a graph), and
// each row's loss = -sum(logp * onehot(tgt)) (a graph, then the legacy row sums).
template <class T>
bool Model<T>::dnn_loss() {
  if constexpr (!std::is_same<T, bf16>::value) return false;
  if (!dnn_loss_ok) return false;
  const int V = c.vocab;
  const std::string shape = std::to_string(N) + "x" + std::to_string(V);
  cg::Graph* oh = graphs->get("one-hot targets " + shape,
                              [&](std::string*) { return dnnl::one_hot(dnn, N, V, CUDNN_DATA_FLOAT); });
  cg::Graph* gd = graphs->get("loss gradient " + shape, [&](std::string*) { return dnnl::xent_grad(dnn, N, V); });
  cg::Graph* pk = graphs->get("loss pick " + shape, [&](std::string*) { return dnnl::xent_pick(dnn, N, V); });
  if (!oh || !gd || !pk) return false;
  dnn_run(oh, {{"index", dnn_index.as()}, {"ids", tgt.as()}, {"y", oh_tgt.as()}});
  legacy->log_softmax(logits.as<float>(), dnn_logp.as<float>(), s);
  dnn_run(gd, {{"logp", dnn_logp.as()}, {"onehot", oh_tgt.as()}, {"inv_n", &dnn_inv_n}, {"dl", dlogits.as()}});
  dnn_run(pk, {{"logp", dnn_logp.as()}, {"onehot", oh_tgt.as()}, {"prod", dnn_prod.as()}});
  legacy->neg_row_sums(dnn_prod.as<float>(), loss.as<float>(), dnn_ws.as(), dnn_ws.bytes(), s);
  return true;
}

// The optimizer: the gradient's 2-norm (legacy), AdamW's clip divisor max(norm / clip, 1) (a graph on
// one element) and AdamW itself (one pointwise graph over every parameter, the bf16 copy written with
// it); the norm then goes to the step's slot of the log (block_sum: the slot is a device-side index,
// which a cuDNN graph's fixed pointers cannot follow inside a captured step). The learning rate and
// the bias corrections come from the trainer's StepVars (sv), so lr and t are not read here; without
// sv (no trainer) the custom path takes the values by argument.
template <class T>
bool Model<T>::dnn_adamw(const train::AdamW& opt, double lr, int64_t t, double clip, float* norm_out) {
  (void)lr, (void)t;
  if constexpr (!std::is_same<T, bf16>::value) return false;
  if (!sv || !dnn_norm_ok) return false;
  cg::Graph* gc = graphs->get("clip divisor", [&](std::string*) { return dnnl::clip_divisor(dnn); });
  cg::Graph* ga =
      graphs->get("AdamW " + std::to_string(lay.total), [&](std::string*) { return dnnl::adamw(dnn, lay.total); });
  if (!gc || !ga) return false;
  float* sc = dnn_scal.as<float>();  // [0] the norm, [4] the clip divisor: 16 bytes apart
  const float *lr_p = &sv->lr, *bc1_p = &sv->bc1, *bc2_p = &sv->bc2;  // device addresses, not read here
  const float clip_f = float(clip), one = 1.f, b1 = float(opt.beta1), omb1 = 1 - b1, b2 = float(opt.beta2),
              omb2 = 1 - b2, eps = float(opt.eps), wd = float(opt.weight_decay);
  legacy->norm2(grads.as<float>(), sc, dnn_ws.as(), dnn_ws.bytes(), s);
  dnn_run(gc, {{"norm", sc}, {"clip", &clip_f}, {"one", &one}, {"w", sc + 4}});
  dnn_run(ga, {{"p", params.as()},   {"g", grads.as()},  {"m", m.as()},       {"v", v.as()},
               {"decay", dnn_decay.as()}, {"w", sc + 4},    {"lr", lr_p},       {"bc1", bc1_p},
               {"bc2", bc2_p},       {"b1", &b1},        {"omb1", &omb1},     {"b2", &b2},
               {"omb2", &omb2},      {"eps", &eps},      {"wd", &wd},         {"m_out", m.as()},
               {"v_out", v.as()},    {"p_out", params.as()}, {"pt", params_t.as()}});
  hw("block_sum");
  k::block_sum<<<1, 256, 0, s>>>(sc, 1, norm_out, false, sv);
  LAUNCH_CHECK();
  return true;
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
  // No engine for the bare reduction (this cuDNN): the same column sums as a matmul, ones[1][N] . dout.
  if (dnn_run(dnn_matmul("bias gradient (ones . dy)", 1, N, O, false, false, CUDNN_DATA_FLOAT),
              {{"a", dnn_ones.as()}, {"b", dout}, {"c", G(b)}}))
    return true;
  fell_back.insert("bias gradient (ours: cuDNN offered no engine for the reduction or the matmul)");
  bias_grad(dout, b, O);  // nn/linear.cuh
  return true;
}
