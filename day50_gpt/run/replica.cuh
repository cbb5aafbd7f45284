// day50_gpt/run/replica.cuh: what the trainer asks of data parallelism, in one place. With NCCL
// (GPT_HAVE_NCCL, defined by the toolchain where it found NCCL) these forward to dp::Replica
// (run/data_parallel.cuh); without it nothing can make a Replica, the pointer is always null, and
// every hook is the one-GPU answer.
#pragma once
#include <utility>

#include "../gpt_ref.h"

#ifdef GPT_HAVE_NCCL
#include "data_parallel.cuh"
namespace dp {
inline int world_of(const Replica* r) { return r ? r->world : 1; }
inline int rank_of(const Replica* r) { return r ? r->rank : 0; }
// Plan the buckets over `grads` and start each bucket's all-reduce as the backward finishes its blocks.
template <class M>
inline void attach(Replica* r, const gpt::Config& c, size_t bucket_bytes, M& model) {
  if (!r) return;
  r->plan(c, bucket_bytes, model.grads.template as<float>());
  model.on_block_grads = [r](int l) { r->block_done(l); };
}
// The rest of the step's all-reduces; the compute stream then waits for the mean gradient.
inline void finish_step(Replica* r, float* loss) {
  if (r) r->finish(loss);
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
inline void attach(Replica*, const gpt::Config&, size_t, M&) {}
inline void finish_step(Replica*, float*) {}
inline double global_mean(Replica*, double x) { return x; }
inline bool same_everywhere(Replica*, const float*) { return true; }
}  // namespace dp
#endif
