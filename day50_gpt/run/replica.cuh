// day50_gpt/run/replica.cuh: what the trainer asks of data parallelism, in one place. With NCCL
// (GPT_HAVE_NCCL, defined by the toolchain where it found NCCL) these forward to dp::Replica
// (run/data_parallel.cuh); without it nothing can make a Replica, the pointer is always null, and
// every hook is the one-GPU answer.
#pragma once
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "../gpt_ref.h"
#include "../nn/model.cuh"
#include "../options.h"

#ifdef GPT_HAVE_NCCL
#include "data_parallel.cuh"
namespace dp {
inline int world_of(const Replica* r) { return r ? r->world : 1; }
inline int rank_of(const Replica* r) { return r ? r->rank : 0; }

inline Settings settings_of(const TrainOptions& o) {
  Settings s;
  s.bucket_bytes = o.bucket_bytes, s.first_bytes = o.first_bucket_bytes;
  s.order = o.bucket_forward ? Order::kForward : Order::kBackward;
  s.bf16 = o.allreduce_bf16, s.zero = o.zero, s.copy = o.copy_collectives;
  s.gather_delay = o.test_gather_delay_ns, s.skip_range_wait = o.test_skip_range_wait;
  return s;
}

// A buffer of `elems` floats holding the first `keep` of `b` (zeros after): ZeRO-1's padded arrays.
inline void resize_floats(DeviceBuffer& b, size_t elems, size_t keep) {
  DeviceBuffer n(elems * sizeof(float));
  CUDA_CHECK(cudaMemset(n.as(), 0, n.bytes()));
  if (keep) CUDA_CHECK(cudaMemcpy(n.as(), b.as(), keep * sizeof(float), cudaMemcpyDeviceToDevice));
  b = std::move(n);
}

// Plan the buckets over the model's gradient and start each bucket's collective as the backward
// finishes its blocks. With ZeRO-1 the model's arrays change size here: the parameters and the
// gradient are padded to the shard plan (NCCL's reduce-scatter and all-gather take n equal shards),
// and m and v shrink to this rank's shard: the full-size ones the model allocated are freed.
template <class M>
inline void attach(Replica* r, const gpt::Config& c, const TrainOptions& o, M& model) {
  if (!r) return;
  r->plan(c, settings_of(o));
  if (r->zero()) {
    const ShardPlan& s = r->shards();
    resize_floats(model.params, s.padded, s.total);
    resize_floats(model.grads, s.padded, 0);
    resize_floats(model.m, s.shard, 0);
    resize_floats(model.v, s.shard, 0);
  }
  r->set_grads(model.grads.template as<float>());
  r->set_params(model.params.template as<float>(), model.params_t.bytes() ? model.params_t.as() : nullptr,
                model.params_t.bytes() / std::max<size_t>(1, model.lay.total));
  model.on_block_grads = [r](int l) { r->block_done(l); };
  // ZeRO-1 on the copy engines: the forward waits for each range of the others' shards as it reaches it
  if (r->copy_zero()) model.on_range_read = [r](int i) { r->block_forward(i); };
}
// Before the host reads or overwrites the weights (ZeRO-1 on the copy engines: the last gather has landed).
inline void settle(Replica* r) {
  if (r) r->settle();
}
// Before a replica's model is freed early (collective: every rank stops at the same step).
inline void quiesce(Replica* r) {
  if (r) r->quiesce();
}
// The step's first event and the end of its forward, for the timeline.
inline void step_begin(Replica* r) {
  if (r) r->step_begin();
}
inline void mark(Replica* r, const char* label) {
  if (r) r->mark(label);
}
// The rest of the step's collectives; the compute stream then waits for the mean gradient.
inline void finish_step(Replica* r, float* loss) {
  if (r) r->finish(loss);
}
// The optimizer step: the whole model's (one GPU, plain data parallelism), or with ZeRO-1 this rank's
// shard, then the all-gather of every rank's updated shard and the bf16 copy of all of them.
template <class T>
inline void optimizer_step(Replica* r, Model<T>& m, const train::AdamW& opt, double lr, int64_t t, double clip,
                           float* norm_out) {
  if (!r || !r->zero()) {
    m.optimizer_step(opt, lr, t, clip, norm_out);
    if (r) r->mark("optimizer");
    return;
  }
  const ShardPlan& s = r->shards();
  if (r->copy_zero()) {  // the copy engines: AdamW writes this shard's bf16 copy too; the gather runs beside the next forward
    T* pt = nullptr;
    if constexpr (!std::is_same<T, float>::value) pt = m.params_t.template as<T>() + s.begin(r->rank);
    r->before_update();
    optimizer_step_shard(m, opt, lr, t, clip, norm_out, s.begin(r->rank), s.end(r->rank),
                         [r](float* x) { r->sum_over_ranks(x); }, pt);
    r->gather();
    return;
  }
  optimizer_step_shard(m, opt, lr, t, clip, norm_out, s.begin(r->rank), s.end(r->rank),
                       [r](float* x) { r->sum_over_ranks(x); });
  r->mark("AdamW on this rank's shard");
  r->gather_params(m.params.template as<float>());
  m.sync_weights();
  r->mark("bf16 copy of the weights");
}
// AdamW's m and v for a checkpoint (all parameters). Collective with ZeRO-1: every rank must call it.
template <class T>
inline void optimizer_state(Replica* r, Model<T>& md, std::vector<float>& m, std::vector<float>& v) {
  if (r && r->zero()) {
    m = r->gather_shards(md.m.template as<float>()), v = r->gather_shards(md.v.template as<float>());
    return;
  }
  m = to_host(md.m.template as<float>(), md.lay.total), v = to_host(md.v.template as<float>(), md.lay.total);
}
// From a checkpoint: all of m and v, or with ZeRO-1 this rank's shard of them.
template <class T>
inline void restore_optimizer_state(Replica* r, Model<T>& md, const std::vector<float>& m,
                                    const std::vector<float>& v) {
  if (r && r->zero()) {
    const ShardPlan& s = r->shards();
    const size_t b = s.begin(r->rank), n = s.end(r->rank) - b;
    CUDA_CHECK(cudaMemset(md.m.as(), 0, md.m.bytes()));
    CUDA_CHECK(cudaMemset(md.v.as(), 0, md.v.bytes()));
    CUDA_CHECK(cudaMemcpy(md.m.as(), m.data() + b, n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(md.v.as(), v.data() + b, n * sizeof(float), cudaMemcpyHostToDevice));
    return;
  }
  to_device(md.m.template as<float>(), m), to_device(md.v.template as<float>(), v);
}
inline double global_mean(Replica* r, double x) { return r ? r->mean(x) : x; }
inline bool same_everywhere(Replica* r, const float* value) { return r ? r->same_everywhere(value).first : true; }
}  // namespace dp
#else
namespace dp {
class Replica;
inline int world_of(const Replica*) { return 1; }
inline int rank_of(const Replica*) { return 0; }
template <class M>
inline void attach(Replica*, const gpt::Config&, const TrainOptions&, M&) {}
inline void settle(Replica*) {}
inline void quiesce(Replica*) {}
inline void step_begin(Replica*) {}
inline void mark(Replica*, const char*) {}
inline void finish_step(Replica*, float*) {}
template <class T>
inline void optimizer_step(Replica*, Model<T>& m, const train::AdamW& opt, double lr, int64_t t, double clip,
                           float* norm_out) {
  m.optimizer_step(opt, lr, t, clip, norm_out);
}
template <class T>
inline void optimizer_state(Replica*, Model<T>& md, std::vector<float>& m, std::vector<float>& v) {
  m = to_host(md.m.template as<float>(), md.lay.total), v = to_host(md.v.template as<float>(), md.lay.total);
}
template <class T>
inline void restore_optimizer_state(Replica*, Model<T>& md, const std::vector<float>& m, const std::vector<float>& v) {
  to_device(md.m.template as<float>(), m), to_device(md.v.template as<float>(), v);
}
inline double global_mean(Replica*, double x) { return x; }
inline bool same_everywhere(Replica*, const float*) { return true; }
}  // namespace dp
#endif
