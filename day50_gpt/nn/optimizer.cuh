// day50_gpt/nn/optimizer.cuh: the optimizer step on the GPU (the global gradient norm in two
// atomics-free stages, the second inside AdamW with clipping, nn/kernels/adamw.cuh), its ZeRO-1 form over one shard,
// and the bf16 weight copy.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>

#include "model.cuh"

// The one AdamW launch (clipping included) behind the three optimizer steps below: n parameters, every
// pointer at the first of them (m and v too: ZeRO-1's shard holds its own), the gradient's norm from the
// nsq partial sums of squares in sumsq. norm_out (if not null) receives the norm; sv and uv, where given,
// replace lr and the bias corrections from device memory (a captured step; nn/kernels/adamw.cuh).
// At least one block, so that block 0 writes the norm even where n is 0 (a shard all padding).
template <class T>
void launch_adamw(cudaStream_t st, float* p, T* pt, const float* g, float* m, float* v, const unsigned char* decay,
                  size_t n, const train::AdamW& opt, double lr, int64_t t, double clip, const float* sumsq, int nsq,
                  float* norm_out, const k::StepVars* sv = nullptr, const k::UpdateVars* uv = nullptr) {
  k::adamw_clipped<T><<<std::max(1, grid_for(n)), 256, 0, st>>>(
      p, pt, g, m, v, decay, n, float(lr), float(opt.beta1), float(opt.beta2), float(opt.eps), float(opt.weight_decay),
      float(1 - std::pow(opt.beta1, double(t))), float(1 - std::pow(opt.beta2, double(t))), sumsq, nsq, float(clip),
      norm_out, sv, uv);
  LAUNCH_CHECK();
}

// The gradient norm and the AdamW update, all on the GPU; norm_out receives the norm.
template <class T>
void Model<T>::optimizer_step(const train::AdamW& opt, double lr, int64_t t, double clip, float* norm_out) {
  if (on_cudnn() && dnn_adamw(opt, lr, t, clip, norm_out)) return mark(kOptimizer);  // nn/backend_cudnn.cuh
  if (on_cudnn()) fell_back.insert("AdamW");
  hw("sum_squares_partial"), hw("adamw_clipped");
  k::sum_squares_partial<<<k::kNormBlocks, 256, 0, s>>>(grads.as<float>(), lay.total, norm_partial.as<float>());
  LAUNCH_CHECK();
  T* pt = nullptr;
  if constexpr (!std::is_same<T, float>::value) pt = params_t.as<T>();
  launch_adamw<T>(s, params.as<float>(), pt, grads.as<float>(), m.as<float>(), v.as<float>(), decay.as<unsigned char>(),
                  lay.total, opt, lr, t, clip, norm_partial.as<float>(), k::kNormBlocks, norm_out, sv);
  mark(kOptimizer);
}

// --adamw-overlap on: the end of a step, the gradient's norm only (its partial sums of squares stay in
// norm_partial for the update, which runs in the next step: Trainer). The norm written here has the same
// bits as the one AdamW computes from those partials (k::sum_256 in both).
template <class T>
void Model<T>::optimizer_norm(float* norm_out) {
  hw("sum_squares_partial"), hw("norm_of");
  k::sum_squares_partial<<<k::kNormBlocks, 256, 0, s>>>(grads.as<float>(), lay.total, norm_partial.as<float>());
  LAUNCH_CHECK();
  k::norm_of<<<1, 256, 0, s>>>(norm_partial.as<float>(), k::kNormBlocks, norm_out, sv);
  LAUNCH_CHECK();
  mark(kOptimizer);
}
// AdamW with clipping on parameters [begin, end), on stream st, from the partial sums of squares the last
// step left in norm_partial. uv: the learning rate, the bias corrections and whether to run, from device
// memory (a captured step); null: lr and t by argument (Trainer::settle_update). Element by element the same
// arithmetic as optimizer_step's launch over all parameters, so the same bits.
template <class T>
void Model<T>::adamw_range(cudaStream_t st, size_t begin, size_t end, const train::AdamW& opt, double lr, int64_t t,
                           double clip, const k::UpdateVars* uv) {
  hw("adamw_clipped");
  T* pt = nullptr;
  if constexpr (!std::is_same<T, float>::value) pt = params_t.as<T>() + begin;
  launch_adamw<T>(st, params.as<float>() + begin, pt, grads.as<float>() + begin, m.as<float>() + begin,
                  v.as<float>() + begin, decay.as<unsigned char>() + begin, end - begin, opt, lr, t, clip,
                  norm_partial.as<float>(), k::kNormBlocks, nullptr, nullptr, uv);
}

// ZeRO-1 (data parallelism with the optimizer state sharded): the step of this rank's shard, parameters
// [begin, end) of the flat array; md.m and md.v hold the shard only (their element 0 is parameter
// `begin`). Clipping needs the norm of the whole gradient: this rank's sum of squares over its shard
// (whose gradient is already the global mean), summed over the ranks by `sum_over_ranks` (an
// all-reduce) before AdamW reads it. NCCL's path refreshes the bf16 copy after its all-gather, for all
// parameters at once (sync_weights), so AdamW leaves it alone there (pt null); the copy engines' path
// gathers the bf16 copy too, so AdamW writes this shard's (pt: the copy's element `begin`).
template <class T>
void optimizer_step_shard(Model<T>& md, const train::AdamW& opt, double lr, int64_t t, double clip, float* norm_out,
                          size_t begin, size_t end, const std::function<void(float*)>& sum_over_ranks,
                          T* pt = nullptr) {
  const size_t n = end - begin;  // 0 only on a rank whose shard is all padding (a tiny model on many GPUs)
  float* g = md.grads.template as<float>() + begin;
  k::sum_squares_partial<<<k::kNormBlocks, 256, 0, md.s>>>(g, n, md.norm_partial.template as<float>());
  LAUNCH_CHECK();
  k::block_sum<<<1, 256, 0, md.s>>>(md.norm_partial.template as<float>(), k::kNormBlocks, md.sumsq.template as<float>(),
                                    false);
  LAUNCH_CHECK();
  sum_over_ranks(md.sumsq.template as<float>());
  launch_adamw<T>(md.s, md.params.template as<float>() + begin, pt, g, md.m.template as<float>(),
                  md.v.template as<float>(), md.decay.template as<unsigned char>() + begin, n, opt, lr, t, clip,
                  md.sumsq.template as<float>(), 1, norm_out);
  md.mark(kOptimizer);
}

// After the master weights change outside AdamW (initialization, a checkpoint): refresh the bf16 copy.
template <class T>
void Model<T>::sync_weights() {
  if constexpr (!std::is_same<T, float>::value) {
    k::convert<T><<<grid_for(lay.total), 256, 0, s>>>(params.as<float>(), params_t.as<T>(), lay.total);
    LAUNCH_CHECK();
  }
}
