// day50_gpt/dp_plan.h: the host-side arithmetic of data parallelism, with no GPU and no NCCL in it
// (test_dp_plan.cpp tests it on any machine):
//   - which gradient ranges are all-reduced together (buckets), and when each may start;
//   - the ring all-reduce's traffic (what NCCL's "bus bandwidth" counts);
//   - how the ranks of a multi-process run meet: rank 0 publishes NCCL's unique id in a file.
//
// Why buckets. The backward runs from the last block to the first, and a block's weight gradients are
// final as soon as its backward is done: they can be summed across the GPUs while the GPU computes
// the earlier blocks. One all-reduce per tensor would be many small, slow messages; one for the whole
// model could only start after the backward. A bucket is a run of consecutive blocks of at least
// `bucket_bytes` (PyTorch's DistributedDataParallel groups gradients the same way, 25 MiB by default).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gpt_ref.h"

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
inline std::vector<Bucket> plan_buckets(const gpt::Config& c, size_t bucket_bytes) {
  const gpt::Layout lay(c);
  std::vector<Bucket> out;
  if (bucket_bytes == 0) return {Bucket{0, lay.total, -1}};
  const auto block_begin = [&](int l) { return lay.layer[size_t(l)].ln1_w; };
  size_t end = lay.total;  // the open bucket is [block_begin(l), end)
  for (int l = c.layers - 1; l >= 0; --l) {
    const size_t begin = block_begin(l);
    if ((end - begin) * sizeof(float) >= bucket_bytes || l == 0) {
      out.push_back(Bucket{begin, end, l});
      end = begin;
    }
  }
  out.push_back(Bucket{0, end, -1});  // wte + wpe
  return out;
}

// Bytes each GPU sends (and receives) in a ring all-reduce of `bytes` over n GPUs: a reduce-scatter
// and an all-gather, each passing n-1 chunks of bytes/n around the ring. NCCL's "bus bandwidth" is
// this traffic over the time, so it can be compared with the link's speed whatever n is.
inline double ring_bytes_per_gpu(double bytes, int n) { return n > 1 ? 2.0 * (n - 1) / n * bytes : 0.0; }
inline double bus_gbps(double bytes, double ms, int n) {
  return ms > 0 ? ring_bytes_per_gpu(bytes, n) / (ms * 1e-3) / 1e9 : 0.0;
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
