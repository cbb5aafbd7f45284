// day50_gpt/test_dp_plan.cpp: the data-parallel plan (dp_plan.h) on the host: the buckets cover every
// gradient exactly once, each starts only after the backward has finished every gradient in it, the
// ring arithmetic, and the rank meeting point's good and bad cases.
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "dp_plan.h"
#include "minitest.h"

static gpt::Config config(int layers, int width) {
  gpt::Config c;
  c.vocab = 256, c.context = 64, c.layers = layers, c.heads = 2, c.width = width;
  return c;
}

// The first block whose backward must be done before parameter i's gradient is final: a block's own
// parameters after its backward; the final LayerNorm before any block (-> L-1 is the latest safe
// point); the embeddings only after everything (-1).
static int ready_after(const gpt::Config& c, const gpt::Layout& lay, size_t i) {
  if (i < lay.layer[0].ln1_w) return -1;
  if (i >= lay.lnf_w) return c.layers - 1;
  for (int l = c.layers - 1; l >= 0; --l)
    if (i >= lay.layer[size_t(l)].ln1_w) return l;
  return -1;
}

// Order of events in the backward: block L-1 finishes first, block 0 last, then the embeddings (-1).
static int event_index(const gpt::Config& c, int after_block) {
  return after_block < 0 ? c.layers : c.layers - 1 - after_block;
}

static void check_plan(const gpt::Config& c, size_t bucket_bytes) {
  const gpt::Layout lay(c);
  const auto plan = dp::plan_buckets(c, bucket_bytes);
  std::vector<int> covered(lay.total, 0);
  int last_event = -1;
  for (const auto& b : plan) {
    EXPECT(b.begin < b.end && b.end <= lay.total);
    const int ev = event_index(c, b.after_block);
    EXPECT(ev >= last_event);  // launched in the backward's order
    last_event = ev;
    for (size_t i = b.begin; i < b.end; ++i) {
      ++covered[i];
      // every gradient in the bucket is final when the bucket starts
      if (event_index(c, ready_after(c, lay, i)) > ev) {
        EXPECT(false);
        return;
      }
    }
  }
  for (int k : covered)
    if (k != 1) {
      EXPECT(k == 1);
      return;
    }
  // every bucket but the two that close the backward (block 0's, the embeddings') reaches the size
  for (size_t i = 0; i + 2 < plan.size(); ++i) EXPECT((plan[i].end - plan[i].begin) * sizeof(float) >= bucket_bytes);
}

TEST(buckets_cover_every_gradient_once_and_start_when_ready) {
  for (int layers : {1, 2, 6, 12})
    for (size_t mb : {size_t(1) << 10, size_t(1) << 20, size_t(25) << 20, size_t(1) << 40})
      check_plan(config(layers, 64), mb);
  check_plan(config(6, 384), size_t(25) << 20);
}

TEST(one_bucket_when_overlap_is_off) {
  const auto c = config(6, 64);
  const auto plan = dp::plan_buckets(c, 0);
  EXPECT(plan.size() == 1 && plan[0].begin == 0 && plan[0].end == gpt::Layout(c).total && plan[0].after_block == -1);
}

TEST(small_buckets_are_one_block_each) {
  const auto c = config(4, 64);
  const auto plan = dp::plan_buckets(c, 1);  // any block exceeds one byte
  EXPECT(plan.size() == 5);
  for (int i = 0; i < 4; ++i) EXPECT(plan[size_t(i)].after_block == 3 - i);
  EXPECT(plan.back().after_block == -1 && plan.back().begin == 0);
}

TEST(default_model_buckets) {
  // 6 x 384: a block holds 12 C^2 + 13 C = 1,774,464 parameters (7.1 MB); 25 MiB closes after 4 blocks.
  gpt::Config c;
  c.vocab = 256, c.context = 256, c.layers = 6, c.heads = 6, c.width = 384;
  const auto plan = dp::plan_buckets(c, size_t(25) << 20);
  EXPECT(plan.size() == 3);
  EXPECT(plan[0].after_block == 2 && plan[1].after_block == 0 && plan[2].after_block == -1);
}

TEST(ring_arithmetic) {
  EXPECT(dp::ring_bytes_per_gpu(100, 1) == 0);
  EXPECT(dp::ring_bytes_per_gpu(100, 2) == 100);
  EXPECT(std::fabs(dp::ring_bytes_per_gpu(100, 4) - 150) < 1e-12);
  EXPECT(std::fabs(dp::ring_bytes_per_gpu(100, 8) - 175) < 1e-12);
  EXPECT(std::fabs(dp::bus_gbps(1e9, 10, 2) - 100) < 1e-9);  // 1 GB in 10 ms on 2 GPUs: 100 GB/s
}

TEST(id_file_round_trip) {
  const std::string p = "/tmp/day50_test_dp_id";
  std::remove(p.c_str());
  unsigned char id[128], got[128] = {};
  for (int i = 0; i < 128; ++i) id[i] = static_cast<unsigned char>(i * 7 + 3);
  // a reader that starts before the writer: it waits, then sees the whole id
  std::string err = "unset";
  std::thread reader([&] { err = dp::wait_for_id(p, got, sizeof got, 10); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT(dp::publish_id(p, id, sizeof id).empty());
  reader.join();
  EXPECT(err.empty());
  bool same = true;
  for (int i = 0; i < 128; ++i) same = same && got[i] == id[i];
  EXPECT(same);
  std::remove(p.c_str());
}

TEST(id_file_errors) {
  const std::string p = "/tmp/day50_test_dp_id_bad";
  unsigned char id[128];
  std::remove(p.c_str());
  EXPECT(dp::wait_for_id(p, id, sizeof id, 0.2).find("within") != std::string::npos);  // nobody wrote it
  FILE* f = std::fopen(p.c_str(), "wb");
  std::fputs("short", f);
  std::fclose(f);
  EXPECT(dp::wait_for_id(p, id, sizeof id, 1).find("not an NCCL id") != std::string::npos);  // wrong size
  std::remove(p.c_str());
  EXPECT(!dp::publish_id("/proc/no-such-dir/id", id, sizeof id).empty());
}

int main() { return minitest::run_all(); }
