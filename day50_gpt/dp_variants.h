// day50_gpt/dp_variants.h: the ways the multi-GPU benchmark runs one model configuration (host-only,
// tested by test_dp_plan.cpp): the gradient in one all-reduce or in buckets of several sizes; then the
// variants that aim at less exposed communication (the first bucket early, bf16 collectives, the copy
// engines instead of NCCL's kernels, fewer NCCL channels), ZeRO-1, and the forward bucket order; and the command line's own combination. Exactly
// one row is the headline (the command line's settings), which the goals read.
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "options.h"

namespace dp {

// One way of running the N-GPU step: the bucket plan, the collectives' type, ZeRO-1, NCCL's channels.
struct Variant {
  std::string mode;  // the row's name after the configuration and the GPU count
  TrainOptions o;
  int channels = 0;       // NCCL channels at most (0: NCCL's choice)
  bool headline = false;  // the row with the command line's settings: the goals read it
};

// The ways to run one configuration: the gradient in one all-reduce after the backward, then in
// buckets of several sizes during it; with `more`, the variants that aim at less exposed communication
// (the first bucket early, bf16, fewer NCCL channels), ZeRO-1, and the forward bucket order (the
// overlap lost: what the backward order is worth).
// copy_ok: the GPUs have peer access, so the copy-engine all-reduce (--collectives copy) can run: with
// `more`, four rows of it (fp32 and bf16 collectives, plain and with ZeRO-1).
inline std::vector<Variant> variants(const TrainOptions& to, bool more, bool copy_ok = false) {
  std::vector<Variant> v;
  const auto mib = [](size_t b) {
    char t[32];
    std::snprintf(t, sizeof t, "%g MiB", double(b) / (1 << 20));
    return std::string(t);
  };
  std::vector<size_t> sizes = {0, size_t(8) << 20, size_t(25) << 20, size_t(100) << 20};
  if (std::find(sizes.begin(), sizes.end(), to.bucket_bytes) == sizes.end())
    sizes.push_back(to.bucket_bytes);  // --bucket-mb's own
  const bool plain =
      !to.zero && !to.allreduce_bf16 && !to.first_bucket_bytes && !to.bucket_forward && !to.copy_collectives;
  for (size_t bucket : sizes) {
    TrainOptions o = to;
    o.bucket_bytes = bucket, o.zero = 0, o.allreduce_bf16 = false, o.first_bucket_bytes = 0, o.bucket_forward = false,
    o.copy_collectives = false;
    v.push_back({bucket ? "buckets of " + mib(bucket) : "one all-reduce", o, 0,
                 plain && bucket == to.bucket_bytes && !to.nccl_channels});
  }
  // The variants' buckets: --bucket-mb's, or 25 MiB where it asked for one all-reduce.
  const size_t base = to.bucket_bytes ? to.bucket_bytes : size_t(25) << 20;
  const std::string b = "buckets of " + mib(base);
  // The command line's own combination, where it is none of the above: the headline row.
  if (!plain || to.nccl_channels) {
    const std::string m = (to.bucket_bytes ? "buckets of " + mib(to.bucket_bytes) : std::string("one all-reduce")) +
                          " (command line: " + (to.allreduce_bf16 ? "bf16" : "fp32") + (to.zero ? ", ZeRO-1" : "") +
                          (to.first_bucket_bytes ? ", first bucket early" : "") +
                          (to.bucket_forward ? ", forward order" : "") +
                          (to.copy_collectives ? ", copy engines" : "") +
                          (to.nccl_channels ? ", channels " + std::to_string(to.nccl_channels) : "") + ")";
    v.push_back({m, to, to.nccl_channels, true});
  }
  if (!more) return v;
  TrainOptions o = v.front().o;  // plain: fp32, no ZeRO, backward order
  o.bucket_bytes = base;
  TrainOptions first = o, fwd = o, half = o, z = o, zh = o, zone = o, copy = o, copy_half = o, copy_z = o, copy_zh = o;
  first.first_bucket_bytes = 1, fwd.bucket_forward = true, half.allreduce_bf16 = true;
  copy.copy_collectives = true, copy_half.copy_collectives = true, copy_half.allreduce_bf16 = true;
  copy_z.copy_collectives = true, copy_z.zero = 1;
  copy_zh.copy_collectives = true, copy_zh.zero = 1, copy_zh.allreduce_bf16 = true;
  z.zero = 1, zh.zero = 1, zh.allreduce_bf16 = true, zone.zero = 1, zone.bucket_bytes = 0;
  v.push_back({b + ", first bucket one block", first, 0, false});
  v.push_back({b + " in forward order", fwd, 0, false});
  v.push_back({b + ", bf16 all-reduce", half, 0, false});
  // --collectives copy: peer access between the GPUs (run/copy_allreduce.cuh); a row that would run
  // exactly the command line's settings is its headline row already.
  const auto same = [&](const TrainOptions& a) {
    return a.bucket_bytes == to.bucket_bytes && a.first_bucket_bytes == to.first_bucket_bytes &&
           a.bucket_forward == to.bucket_forward && a.allreduce_bf16 == to.allreduce_bf16 && a.zero == to.zero &&
           a.copy_collectives == to.copy_collectives && !to.nccl_channels;
  };
  if (copy_ok) {
    if (!same(copy)) v.push_back({b + ", copy engines", copy, 0, false});
    if (!same(copy_half)) v.push_back({b + ", bf16 all-reduce, copy engines", copy_half, 0, false});
    if (!same(copy_z)) v.push_back({"ZeRO-1, " + b + ", copy engines", copy_z, 0, false});
    if (!same(copy_zh)) v.push_back({"ZeRO-1, " + b + ", bf16, copy engines", copy_zh, 0, false});
  }
  v.push_back({"ZeRO-1, one reduce-scatter", zone, 0, false});
  v.push_back({"ZeRO-1, " + b, z, 0, false});
  v.push_back({"ZeRO-1, " + b + ", bf16", zh, 0, false});
  for (int ch : {2, 4, 8, 16}) v.push_back({b + ", NCCL channels " + std::to_string(ch), o, ch, false});
  return v;
}

}  // namespace dp
