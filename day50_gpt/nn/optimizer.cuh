// day50_gpt/nn/optimizer.cuh: the optimizer step on the GPU (the global gradient norm in two
// atomics-free stages, then AdamW with clipping, nn/kernels/adamw.cuh), and the bf16 weight copy.
#pragma once
#include <cmath>

#include "model.cuh"

// The gradient norm and the AdamW update, all on the GPU; norm_out receives the norm.
template <class T>
void Model<T>::optimizer_step(const train::AdamW& opt, double lr, int64_t t, double clip, float* norm_out) {
  k::sum_squares_partial<<<k::kNormBlocks, 256>>>(grads.as<float>(), lay.total, norm_partial.as<float>());
  LAUNCH_CHECK();
  k::block_sum<<<1, 256>>>(norm_partial.as<float>(), k::kNormBlocks, sumsq.as<float>(), false);
  LAUNCH_CHECK();
  T* pt = nullptr;
  if constexpr (!std::is_same<T, float>::value) pt = params_t.as<T>();
  k::adamw_clipped<T><<<grid_for(lay.total), 256>>>(
      params.as<float>(), pt, grads.as<float>(), m.as<float>(), v.as<float>(), decay.as<unsigned char>(), lay.total,
      float(lr), float(opt.beta1), float(opt.beta2), float(opt.eps), float(opt.weight_decay),
      float(1 - std::pow(opt.beta1, double(t))), float(1 - std::pow(opt.beta2, double(t))), sumsq.as<float>(),
      float(clip), norm_out);
  LAUNCH_CHECK();
  mark(kOptimizer);
}

// After the master weights change outside AdamW (initialization, a checkpoint): refresh the bf16 copy.
template <class T>
void Model<T>::sync_weights() {
  if constexpr (!std::is_same<T, float>::value) {
    k::convert<T><<<grid_for(lay.total), 256>>>(params.as<float>(), params_t.as<T>(), lay.total);
    LAUNCH_CHECK();
  }
}
