// day50_gpt/dp_plan.h: the host-side arithmetic of data parallelism, with no GPU and no NCCL in it
// (test_dp_plan.cpp tests it on any machine):
//   - which gradient ranges are all-reduced together (buckets), and when each may start;
//   - ZeRO-1's shards, which bucket pieces feed which shard, and the memory each GPU holds;
//   - one step's timeline as intervals: how much communication ran beside computation;
//   - the ring all-reduce's traffic (what NCCL's "bus bandwidth" counts);
//   - how the ranks of a multi-process run meet: rank 0 publishes NCCL's unique id in a file.
//
// Why buckets. The backward runs from the last block to the first, and a block's weight gradients are
// final as soon as its backward is done: they can be summed across the GPUs while the GPU computes
// the earlier blocks. One all-reduce per tensor would be many small, slow messages; one for the whole
// model could only start after the backward. A bucket is a run of consecutive blocks of at least
// `bucket_bytes` (PyTorch's DistributedDataParallel groups gradients the same way, 25 MiB by default).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gpt_ref.h"
#include "json.h"

namespace dp {

// One all-reduce: parameters [begin, end) of the flat array, launched once the backward of block
// `after_block` is done (-1: after the whole backward, embeddings included).
struct Bucket {
  size_t begin = 0, end = 0;
  int after_block = -1;
};

// The buckets in launch order. The parameter layout is [wte, wpe, block 0, ..., block L-1, lnf]
// (gpt::Layout), so consecutive blocks are one contiguous range; the final LayerNorm's gradient is
// ready before block L-1's backward starts and rides with the last block. The embeddings come last:
// the token embedding also collects the output head's gradient at the start of the backward, but its
// input-side gradient is only known at the very end. bucket_bytes == 0: one all-reduce of everything
// after the backward (no overlap), the baseline the benchmark compares against.
//
// Two variants, for the benchmark to measure what the order and the first bucket are worth:
//   - first_bytes > 0: the first bucket closes as soon as it holds first_bytes (one block, for any
//     first_bytes below a block), so NCCL starts one block into the backward instead of waiting for
//     bucket_bytes of gradient; the later buckets keep bucket_bytes;
//   - Order::kForward: the same buckets in parameter order (embeddings first), the order a naive
//     implementation walks the parameters in. The first of them (the embeddings) is final only after
//     the whole backward, and an all-reduce may not start before the one ahead of it (NCCL runs a
//     stream's collectives in order), so every bucket waits for the end of the backward: the overlap
//     is lost although the buckets are the same.
enum class Order { kBackward, kForward };
inline std::vector<Bucket> plan_buckets(const gpt::Config& c, size_t bucket_bytes, size_t first_bytes = 0,
                                        Order order = Order::kBackward) {
  const gpt::Layout lay(c);
  std::vector<Bucket> out;
  if (bucket_bytes == 0) return {Bucket{0, lay.total, -1}};
  const auto block_begin = [&](int l) { return lay.layer[size_t(l)].ln1_w; };
  size_t end = lay.total;  // the open bucket is [block_begin(l), end)
  for (int l = c.layers - 1; l >= 0; --l) {
    const size_t begin = block_begin(l);
    const size_t want = out.empty() && first_bytes > 0 ? first_bytes : bucket_bytes;
    if ((end - begin) * sizeof(float) >= want || l == 0) {
      out.push_back(Bucket{begin, end, l});
      end = begin;
    }
  }
  out.push_back(Bucket{0, end, -1});  // wte + wpe
  if (order == Order::kForward) {
    std::reverse(out.begin(), out.end());
    for (Bucket& b : out) b.after_block = -1;
  }
  return out;
}

// ---- ZeRO-1: the optimizer state sharded over the ranks ---------------------------------------------
// Each rank owns one contiguous shard of the flat parameter array: it alone keeps AdamW's m and v for
// it and updates it, then every rank's shard is gathered so that all hold the whole model again.
// NCCL's reduce-scatter and all-gather take equal counts per rank, so the array is padded to
// `shard * n` elements. `shard` is a multiple of 8 elements: 32 bytes of fp32 and 16 of bf16, so every
// shard of the fp32 array and of its bf16 copy starts 16-byte aligned (vector loads, and the alignment
// NCCL's fast copy paths want). The padding (fewer than 8n elements) holds zeros: its gradient is zero,
// and AdamW never touches it (a rank updates [begin(r), end(r)), clamped to the real parameters).
struct ShardPlan {
  size_t total = 0, shard = 0, padded = 0;
  int n = 1;
  size_t begin(int r) const { return std::min(total, size_t(r) * shard); }
  size_t end(int r) const { return std::min(total, size_t(r + 1) * shard); }  // real parameters only
  int owner(size_t i) const { return int(i / shard); }
};
constexpr size_t kShardAlign = 8;  // elements: 16 bytes of bf16, 32 of fp32
inline ShardPlan plan_shards(size_t total, int n) {
  ShardPlan s;
  s.total = total, s.n = n;
  const size_t per = (total + size_t(n) - 1) / size_t(n);
  s.shard = std::max(kShardAlign, (per + kShardAlign - 1) / kShardAlign * kShardAlign);
  s.padded = s.shard * size_t(n);
  return s;
}

// With ZeRO-1 a bucket is not all-reduced: each of its parts goes only to the rank that owns it (a
// reduce to that rank). A bucket that straddles a shard boundary feeds two (or more) shards. A ring
// reduce sends each element once per hop, so the reduces of one bucket to its owners move the same
// bytes as a reduce-scatter of it: half an all-reduce's.
struct Piece {
  int root = 0;
  size_t begin = 0, end = 0;
};
inline std::vector<Piece> bucket_pieces(const Bucket& b, const ShardPlan& s) {
  std::vector<Piece> out;
  for (size_t at = b.begin; at < b.end;) {
    const int r = s.owner(at);
    const size_t stop = std::min(b.end, size_t(r + 1) * s.shard);
    out.push_back(Piece{r, at, stop});
    at = stop;
  }
  return out;
}

// The bytes one GPU holds for the model's state (parameters, their bf16 copy, gradients, AdamW's m
// and v, the bf16 staging buffer of a bf16 all-reduce): plain data parallelism keeps all of it on every
// GPU; ZeRO-1 keeps m and v for one shard (2 x 4 bytes x total / n instead of 2 x 4 bytes x total).
struct StateBytes {
  double params = 0, params_bf16 = 0, grads = 0, adam = 0, staging = 0;
  double total() const { return params + params_bf16 + grads + adam + staging; }
};
inline StateBytes state_bytes(size_t total, int n, bool zero, bool bf16_weights, bool bf16_allreduce) {
  const ShardPlan s = plan_shards(total, n);
  const double elems = zero ? double(s.padded) : double(total);
  StateBytes b;
  b.params = 4 * elems, b.grads = 4 * elems;
  b.params_bf16 = bf16_weights ? 2.0 * double(total) : 0;
  b.adam = 2 * 4 * (zero ? double(s.shard) : double(total));
  b.staging = bf16_allreduce ? 2 * elems : 0;
  return b;
}

// ---- One step's timeline ---------------------------------------------------------------------------
// Labelled intervals (ms from the step's start) on the compute stream and on the NCCL stream, from
// CUDA events. Communication is hidden where the compute stream is busy at the same time; the rest is
// exposed. `busy` excludes the compute stream's waits (its "waiting for the all-reduce" interval).
struct Interval {
  std::string label;
  double start = 0, end = 0;
  bool busy = true;
};
// Milliseconds of `comm` (its intervals may not overlap each other: one stream runs one collective at
// a time) during which some busy `compute` interval runs too.
inline double overlapped_ms(const std::vector<Interval>& comm, const std::vector<Interval>& compute) {
  double s = 0;
  for (const Interval& a : comm)
    for (const Interval& b : compute)
      if (b.busy) s += std::max(0.0, std::min(a.end, b.end) - std::max(a.start, b.start));
  return s;
}
inline double span_ms(const std::vector<Interval>& v) {
  double s = 0;
  for (const Interval& a : v) s += std::max(0.0, a.end - a.start);
  return s;
}
// Milliseconds of `comm` after the compute stream's last interval ends: work the step left running
// into the next one (ZeRO-1 on the copy engines gathers the others' shards beside the next forward).
// One step's log cannot see what ran beside it, so it is reported apart and left out of the fraction.
inline double after_step_ms(const std::vector<Interval>& comm, const std::vector<Interval>& compute) {
  if (compute.empty()) return 0.0;
  const double end = compute.back().end;
  double s = 0;
  for (const Interval& a : comm) s += std::max(0.0, a.end - std::max(a.start, end));
  return s;
}
// The share of the communication time inside the step that ran beside computation (1: all hidden; 1
// with no communication at all).
inline double hidden_fraction(const std::vector<Interval>& comm, const std::vector<Interval>& compute) {
  const double c = span_ms(comm) - after_step_ms(comm, compute);
  return c > 0 ? std::min(1.0, overlapped_ms(comm, compute) / c) : 1.0;
}

// Bytes each GPU sends (and receives) in a ring all-reduce of `bytes` over n GPUs: a reduce-scatter
// and an all-gather, each passing n-1 chunks of bytes/n around the ring. NCCL's "bus bandwidth" is
// this traffic over the time, so it can be compared with the link's speed whatever n is.
inline double ring_bytes_per_gpu(double bytes, int n) { return n > 1 ? 2.0 * (n - 1) / n * bytes : 0.0; }
inline double bus_gbps(double bytes, double ms, int n) {
  return ms > 0 ? ring_bytes_per_gpu(bytes, n) / (ms * 1e-3) / 1e9 : 0.0;
}

// The results file's `timeline` object: per stream, labelled intervals in ms from the step's start;
// `comm_ms` the collectives' time, `after_step_ms` the part of it after the step's end (beside the next
// step), `overlapped_ms` the part that ran beside computation and `hidden_fraction` its share of the
// time inside the step.
inline json::Value timeline_json(const std::vector<Interval>& compute, const std::vector<Interval>& comm) {
  const auto list = [](const std::vector<Interval>& v) {
    json::Value a = json::Value::array();
    for (const Interval& i : v) {
      json::Value x = json::Value::object();
      x["label"] = i.label, x["start_ms"] = i.start, x["end_ms"] = i.end;
      if (!i.busy) x["waiting"] = true;
      a.push(x);
    }
    return a;
  };
  json::Value t = json::Value::object(), streams = json::Value::object();
  streams["compute"] = list(compute), streams["nccl"] = list(comm);
  t["streams"] = streams;
  t["step_ms"] = compute.empty() ? 0.0 : compute.back().end;
  t["comm_ms"] = span_ms(comm);
  t["after_step_ms"] = after_step_ms(comm, compute);
  t["overlapped_ms"] = overlapped_ms(comm, compute);
  t["hidden_fraction"] = hidden_fraction(comm, compute);
  return t;
}

// ---- Meeting point of a multi-process run --------------------------------------------------------
// Rank 0 writes the id to PATH.tmp and renames it to PATH: rename is atomic, so a reader sees either
// no file or the whole id, never half of it. Returns an error message ("" on success).
inline std::string publish_id(const std::string& path, const void* id, size_t n) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return "cannot write " + tmp;
  const bool ok = std::fwrite(id, 1, n, f) == n;
  if (std::fclose(f) != 0 || !ok) return "cannot write " + tmp;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return "cannot rename " + tmp + " to " + path;
  return "";
}

// The other ranks poll for the file; a file of the wrong size is an error (not NCCL's id), and no
// file within `timeout_s` means rank 0 never started or wrote elsewhere.
inline std::string wait_for_id(const std::string& path, void* id, size_t n, double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      const size_t got = std::fread(id, 1, n, f);
      const bool extra = std::fgetc(f) != EOF;
      std::fclose(f);
      if (got == n && !extra) return "";
      return path + " is not an NCCL id (" + std::to_string(got) + (extra ? "+" : "") + " bytes, expected " +
             std::to_string(n) + ")";
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s)
      return "no id appeared in " + path + " within " + std::to_string(int(timeout_s)) +
             " s (is rank 0 running, with the same --id-file?)";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace dp
