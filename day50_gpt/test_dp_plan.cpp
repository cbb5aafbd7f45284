// day50_gpt/test_dp_plan.cpp: the data-parallel plan (dp_plan.h) on the host: the buckets cover every
// gradient exactly once, each starts only after the backward has finished every gradient in it, the
// ring arithmetic, and the rank meeting point's good and bad cases.
#include <cmath>
#include <set>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "dp_plan.h"
#include "dp_variants.h"
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

static void check_plan(const gpt::Config& c, size_t bucket_bytes, size_t first_bytes = 0,
                       dp::Order order = dp::Order::kBackward) {
  const gpt::Layout lay(c);
  const auto plan = dp::plan_buckets(c, bucket_bytes, first_bytes, order);
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
  // every bucket but the first (with first_bytes) and the two that close the backward (block 0's, the
  // embeddings') reaches the size
  if (order == dp::Order::kBackward)
    for (size_t i = first_bytes ? 1 : 0; i + 2 < plan.size(); ++i)
      EXPECT((plan[i].end - plan[i].begin) * sizeof(float) >= bucket_bytes);
}

TEST(buckets_cover_every_gradient_once_and_start_when_ready) {
  for (int layers : {1, 2, 6, 12})
    for (size_t mb : {size_t(1) << 10, size_t(1) << 20, size_t(25) << 20, size_t(1) << 40})
      check_plan(config(layers, 64), mb);
  check_plan(config(6, 384), size_t(25) << 20);
}

TEST(bucket_variants_cover_every_gradient_once_and_start_when_ready) {
  for (int layers : {1, 2, 6, 12})
    for (size_t mb : {size_t(1) << 20, size_t(25) << 20}) {
      check_plan(config(layers, 64), mb, 1);  // the first bucket: one block
      check_plan(config(layers, 64), mb, 0, dp::Order::kForward);
      check_plan(config(layers, 384), mb, size_t(1) << 20, dp::Order::kBackward);
    }
}

TEST(first_bucket_early_is_one_block_then_full_size) {
  // 6 x 384 (7.1 MB a block) with 25 MiB buckets: block 5 alone, then blocks 4..1 (4 blocks), then
  // block 0, then the embeddings. Without first_bytes the first bucket waits for 4 blocks.
  gpt::Config c;
  c.vocab = 256, c.context = 256, c.layers = 6, c.heads = 6, c.width = 384;
  const auto plan = dp::plan_buckets(c, size_t(25) << 20, 1);
  EXPECT(plan.size() == 4);
  EXPECT(plan[0].after_block == 5 && plan[1].after_block == 1 && plan[2].after_block == 0);
  EXPECT(plan[3].after_block == -1);
}

TEST(forward_order_waits_for_the_whole_backward) {
  const auto c = config(6, 64);
  const auto back = dp::plan_buckets(c, 1), fwd = dp::plan_buckets(c, 1, 0, dp::Order::kForward);
  EXPECT(back.size() == fwd.size());
  for (size_t i = 0; i < fwd.size(); ++i) {
    EXPECT(fwd[i].after_block == -1);
    EXPECT(fwd[i].begin == back[back.size() - 1 - i].begin && fwd[i].end == back[back.size() - 1 - i].end);
  }
  EXPECT(fwd[0].begin == 0);  // the embeddings first
}

// ZeRO-1's shards: every parameter in exactly one shard, the shards equal-sized (the padded array is
// n shards), each starting 16-byte aligned in fp32 and in bf16, and the padding below 8 elements a rank.
static void check_shards(size_t total, int n) {
  const dp::ShardPlan s = dp::plan_shards(total, n);
  EXPECT(s.padded == s.shard * size_t(n) && s.padded >= total);
  EXPECT(s.shard % dp::kShardAlign == 0);
  EXPECT((s.shard * sizeof(float)) % 16 == 0 && (s.shard * 2) % 16 == 0);
  const size_t per = (total + size_t(n) - 1) / size_t(n);
  EXPECT(s.shard >= per && s.shard < std::max(per, dp::kShardAlign) + dp::kShardAlign);
  std::vector<int> owned(total, 0);
  for (int r = 0; r < n; ++r) {
    EXPECT(s.begin(r) <= s.end(r) && s.end(r) <= total);
    EXPECT(s.end(r) - s.begin(r) <= s.shard);
    for (size_t i = s.begin(r); i < s.end(r); ++i) {
      ++owned[i];
      if (s.owner(i) != r) {
        EXPECT(s.owner(i) == r);
        return;
      }
    }
  }
  for (int k : owned)
    if (k != 1) {
      EXPECT(k == 1);
      return;
    }
}

TEST(shards_partition_the_parameters_for_1_2_3_4_8_ranks) {
  for (int n : {1, 2, 3, 4, 8}) {
    for (size_t total : {size_t(1), size_t(7), size_t(8), size_t(63), size_t(64), size_t(1000), size_t(4097)})
      check_shards(total, n);
    check_shards(gpt::Layout(config(6, 64)).total, n);
    check_shards(gpt::Layout(config(2, 384)).total, n);
  }
}

// Which buckets feed which shard: the pieces of every bucket cover it exactly, each lies inside its
// root's shard, and together they feed every rank exactly its own shard, for 1 to 8 ranks.
static void check_pieces(const gpt::Config& c, size_t bucket_bytes, int n) {
  const gpt::Layout lay(c);
  const dp::ShardPlan s = dp::plan_shards(lay.total, n);
  std::vector<int> fed(lay.total, 0);
  for (const auto& b : dp::plan_buckets(c, bucket_bytes)) {
    size_t at = b.begin;
    for (const auto& p : dp::bucket_pieces(b, s)) {
      EXPECT(p.begin == at && p.begin < p.end);
      EXPECT(p.root >= 0 && p.root < n);
      EXPECT(p.begin >= s.begin(p.root) && p.end <= s.end(p.root));
      for (size_t i = p.begin; i < p.end; ++i) ++fed[i];
      at = p.end;
    }
    EXPECT(at == b.end);
  }
  for (int k : fed)
    if (k != 1) {
      EXPECT(k == 1);
      return;
    }
}

TEST(bucket_pieces_feed_each_shard_once_for_1_to_8_ranks) {
  for (int n : {1, 2, 3, 4, 8})
    for (size_t mb : {size_t(0), size_t(1), size_t(1) << 20, size_t(25) << 20}) {
      check_pieces(config(6, 64), mb, n);
      check_pieces(config(3, 128), mb, n);
    }
}

TEST(a_bucket_inside_one_shard_is_one_reduce) {
  const dp::ShardPlan s = dp::plan_shards(1000, 4);  // shards of 256
  EXPECT(s.shard == 256 && s.padded == 1024);
  const auto one = dp::bucket_pieces(dp::Bucket{300, 500, 0}, s);
  EXPECT(one.size() == 1 && one[0].root == 1);
  const auto four = dp::bucket_pieces(dp::Bucket{200, 800, 0}, s);  // straddles three boundaries
  EXPECT(four.size() == 4 && four[0].root == 0 && four[1].root == 1 && four[2].root == 2 && four[3].root == 3);
  EXPECT(four[0].end == 256 && four[1].end == 512 && four[2].end == 768 && four[3].end == 800);
  const auto last = dp::bucket_pieces(dp::Bucket{900, 1000, -1}, s);  // the last shard, short of padding
  EXPECT(last.size() == 1 && last[0].root == 3 && s.end(3) == 1000);
}

TEST(zero1_memory_per_gpu) {
  const size_t total = 85'000'000;
  for (int n : {2, 4, 8}) {
    const dp::StateBytes plain = dp::state_bytes(total, n, false, true, false),
                         zero = dp::state_bytes(total, n, true, true, false);
    EXPECT(plain.adam == 8.0 * double(total));
    EXPECT(std::fabs(zero.adam - plain.adam / n) <= 8.0 * double(dp::kShardAlign));  // only the shard's m and v
    EXPECT(zero.params - plain.params < 4.0 * dp::kShardAlign * n);                  // plus the padding
    EXPECT(zero.total() < plain.total());
  }
  EXPECT(dp::state_bytes(total, 2, false, false, true).staging == 2.0 * double(total));
}

TEST(timeline_overlap_arithmetic) {
  // compute: busy 0-4, waiting 4-6, busy 6-7; comm: 3-5 and 5.5-6.5
  const std::vector<dp::Interval> compute = {{"bwd", 0, 4, true}, {"wait", 4, 6, false}, {"opt", 6, 7, true}};
  const std::vector<dp::Interval> comm = {{"b0", 3, 5, true}, {"b1", 5.5, 6.5, true}};
  EXPECT(std::fabs(dp::span_ms(comm) - 3.0) < 1e-12);
  EXPECT(std::fabs(dp::overlapped_ms(comm, compute) - 1.5) < 1e-12);  // 3-4 and 6-6.5
  EXPECT(std::fabs(dp::hidden_fraction(comm, compute) - 0.5) < 1e-12);
  EXPECT(dp::hidden_fraction({}, compute) == 1.0);
  // a collective that runs on past the step's end (ZeRO-1's gather beside the next forward): that part
  // is reported apart and left out of the fraction
  EXPECT(dp::after_step_ms(comm, compute) == 0.0);
  std::vector<dp::Interval> late = comm;
  late.push_back({"gather", 6.5, 9, true});  // after b1 (one stream), 0.5 ms of it inside the step
  EXPECT(std::fabs(dp::after_step_ms(late, compute) - 2.0) < 1e-12);
  EXPECT(std::fabs(dp::hidden_fraction(late, compute) - 2.0 / 3.5) < 1e-12);  // (1 + 0.5 + 0.5) / (2 + 1 + 0.5)
}

TEST(timeline_json_carries_both_streams_and_the_hidden_share) {
  const std::vector<dp::Interval> compute = {{"forward", 0, 2, true},
                                             {"block 0 backward", 2, 4, true},
                                             {"waiting for the gradient", 4, 5, false},
                                             {"optimizer", 5, 6, true}};
  const std::vector<dp::Interval> comm = {{"bucket 0", 3, 5, true}};
  const json::Value t = dp::timeline_json(compute, comm);
  EXPECT(t.find("step_ms") && t.find("step_ms")->number() == 6.0);
  EXPECT(t.find("comm_ms")->number() == 2.0 && t.find("overlapped_ms")->number() == 1.0);
  EXPECT(t.find("hidden_fraction")->number() == 0.5);
  const json::Value* streams = t.find("streams");
  EXPECT(streams && streams->find("compute") && streams->find("nccl"));
  const std::string text = t.dump();
  EXPECT(text.find("\"waiting\"") != std::string::npos && text.find("bucket 0") != std::string::npos);
}

// The benchmark's ways of running a configuration: exactly one headline row, and it runs what the
// command line asked for; the extra variants only where asked; every row's name different.
static void check_variants(const TrainOptions& to, bool more, bool copy_ok = true) {
  const auto v = dp::variants(to, more, copy_ok);
  int heads = 0;
  std::set<std::string> names;
  for (const auto& x : v) {
    names.insert(x.mode);
    if (!x.headline) continue;
    ++heads;
    EXPECT(x.o.bucket_bytes == to.bucket_bytes && x.o.zero == to.zero && x.o.allreduce_bf16 == to.allreduce_bf16);
    EXPECT(x.o.first_bucket_bytes == to.first_bucket_bytes && x.o.bucket_forward == to.bucket_forward);
    EXPECT(x.o.copy_collectives == to.copy_collectives);
    EXPECT(x.channels == to.nccl_channels);
  }
  EXPECT(heads == 1);
  EXPECT(names.size() == v.size());
  size_t zero = 0, ch = 0, copy = 0;
  for (const auto& x : v) {
    zero += x.o.zero > 0 && !x.o.copy_collectives && !x.headline, ch += x.channels > 0 && !x.headline;
    copy += x.o.copy_collectives && !x.headline;
    EXPECT(!(x.o.copy_collectives && x.channels));  // NCCL's channel limit means NCCL's kernels
  }
  EXPECT(more ? zero == 3 && ch == 4 : zero == 0 && ch == 0);
  // the copy engines' four rows (fp32 and bf16, plain and ZeRO-1) only where the GPUs allow them, and not
  // again the command line's own
  const bool cmd_is_copy_row = to.copy_collectives && to.bucket_bytes == (size_t(25) << 20) &&
                              !to.first_bucket_bytes && !to.bucket_forward && !to.nccl_channels;
  EXPECT(copy == (more && copy_ok ? (cmd_is_copy_row ? 3u : 4u) : 0u));
}

TEST(bench_variants_have_one_headline_that_runs_the_command_line) {
  for (bool more : {false, true}) {
    TrainOptions t;
    check_variants(t, more);
    t.bucket_bytes = 0;
    check_variants(t, more);
    t.bucket_bytes = size_t(10) << 20;
    check_variants(t, more);
    TrainOptions z;
    z.zero = 1;
    check_variants(z, more);
    z.allreduce_bf16 = true, z.nccl_channels = 4;
    check_variants(z, more);
    TrainOptions f;
    f.first_bucket_bytes = 1, f.bucket_forward = true;
    check_variants(f, more);
    TrainOptions c;
    c.nccl_channels = 8;
    check_variants(c, more);
    check_variants(c, more, false);
    TrainOptions e;  // --collectives copy on the command line: its own headline row
    e.copy_collectives = true;
    check_variants(e, more);
    e.allreduce_bf16 = true;
    check_variants(e, more);
    e.bucket_bytes = 0;  // --bucket-mb 0 --collectives copy: the 25 MiB copy rows are not the command line's
    check_variants(e, more);
    TrainOptions ez;  // --zero 1 with the copy engines: the ZeRO-1 copy row is the command line's
    ez.copy_collectives = true, ez.zero = 1;
    check_variants(ez, more);
    ez.allreduce_bf16 = true;  // ... in bf16: the ZeRO-1 bf16 copy row is
    check_variants(ez, more);
  }
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
