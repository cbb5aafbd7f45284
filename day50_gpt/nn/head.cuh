// day50_gpt/nn/head.cuh: the tied head (the output projection that shares the token embedding wte):
// logits = lnf . wte^T forward, and its two matmuls backward. One cuBLAS call each on the custom path; with
// --backend cudnn, cached cuDNN matmul graphs (nn/backend_cudnn.cuh's dnn_matmul) where cuDNN builds them.
#pragma once
#include "model.cuh"

// The tied head: logits (fp32) = lnf . wte^T.
template <class T>
void Model<T>::head_fwd() {
  const int C = c.width, V = c.vocab;
  if constexpr (std::is_same<T, bf16>::value) {
    if (on_cudnn()) {
      cg::Graph* g = dnn_matmul("head logits", N, C, V, false, true, CUDNN_DATA_FLOAT);
      if (dnn_run(g, {{"a", lnf.as()}, {"b", W(lay.wte)}, {"c", logits.as()}})) return mark(kMatmul);
    }
  }
  if (on_cudnn()) fell_back.insert("head forward (cuBLAS)");
  matmul_fwd<T, float>(blas, lnf.as<T>(), W(lay.wte), logits.as<float>(), N, C, V);
  mark(kMatmul);
}

// The batch's mean loss into out (at out[sv->slot] with sv), for the log only. In a captured step it goes on
// the side stream (nn/dw_stream.h), beside the backward: a one-block kernel, which on the chain held
// everything after it; the backward's join waits for it.
template <class T>
void Model<T>::loss_mean(float* out) {
  const bool beside = dw_side();
  if (beside) dws.fork(s);
  hw("block_sum");
  k::block_sum<<<1, 256, 0, beside ? dws.side() : s>>>(loss.as<float>(), N, out, true, sv);
  LAUNCH_CHECK();
  if (beside) dws.reads(loss.as(), nullptr);
}

// Its backward: dln = dlogits . wte, and wte's gradient = dlogits^T . lnf (written first: the
// embedding's gradient is added to it at the end of the backward).
template <class T>
void Model<T>::head_back() {
  const int C = c.width, V = c.vocab;
  if constexpr (std::is_same<T, bf16>::value) {
    if (on_cudnn()) {
      cg::Graph* gi = dnn_matmul("head din", N, V, C, false, false, Types<T>::dnn);
      cg::Graph* gw = dnn_matmul("head dW", V, N, C, true, false, CUDNN_DATA_FLOAT);
      if (gi && gw && dnn_run(gi, {{"a", dlogits.as()}, {"b", W(lay.wte)}, {"c", dln.as()}}) &&
          dnn_run(gw, {{"a", dlogits.as()}, {"b", lnf.as()}, {"c", G(lay.wte)}}))
        return mark(kMatmul);
    }
  }
  if (on_cudnn()) fell_back.insert("head backward (cuBLAS)");
  matmul_bwd_in<T>(blas, dlogits.as<T>(), W(lay.wte), dln.as<T>(), N, C, V);
  matmul_bwd_w<T>(blas, lnf.as<T>(), dlogits.as<T>(), G(lay.wte), N, C, V);
  mark(kMatmul);
}
