// day50_gpt/test_finish_plan.cpp: the queue of column-sum finishes (nn/finish_plan.h) on the host, no GPU:
// one backward's producers at the bench's shape queued the way Model::backward queues them, into an arena of
// the model's partials buffer's size. Every slice is aligned, inside the arena and apart from the others
// queued with it; the kernel's block-to-job mapping (k::finish_job_of) gives every column of every job to
// exactly one thread; the queue flushes when the arena or the job table is full, and not otherwise. The
// notes' claim that about two layers' partials fit at the bench's shape is counted here.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "minitest.h"
#include "nn/finish_plan.h"

// A model's shape as the queue sees it: N rows, width C, L layers, the LayerNorm backward's rows a warp
// (8 warps a block), and whether our fused dGELU GEMM runs (bf16 with --lt-search on). Our flash backward's
// partials are per 64 rows, the dGELU GEMM's per 128 (sm90::kColsumRows).
struct Shape {
  int N, C, L, rows;
  bool dgelu;
};
static int ln_blocks(const Shape& m, int rows_per_warp) { return (m.N + 8 * rows_per_warp - 1) / (8 * rows_per_warp); }
// The arena: the model's partials buffer, the widest of its uses (Model::buffers; 256 rows a chunk for the
// column sums apart, k::kColChunk).
static size_t arena_of(const Shape& m) {
  return std::max({size_t((m.N + 255) / 256) * 4 * m.C, size_t(ln_blocks(m, 1)) * 3 * m.C, size_t(m.N / 64) * 3 * m.C,
                   size_t((m.N + 127) / 128) * 4 * m.C});
}
// The bench's model (64 x 256 rows, C = 384, 6 layers) at its timed 8 rows a warp; and the model of --verify's
// comparison with --lt-search off (16 x 64 rows, C = 128, 2 layers, the fixed 4 rows a warp, no dGELU GEMM).
constexpr Shape kBench{16384, 384, 6, 8, true}, kVerify{1024, 128, 2, 4, false};
constexpr int kL = kBench.L;
static const size_t kArena = arena_of(kBench);

struct Producer {
  int chunks, C, sums;
};
// One backward's finishes in the order Model::backward queues them: the final LayerNorm's (with fc2's bias
// of the last layer), then per layer from the top: fc's bias (dGELU GEMM), LayerNorm 2 (with proj's bias),
// qkv's bias (flash backward), LayerNorm 1 (with the fc2 bias of the layer below; layer 0's has none).
static std::vector<Producer> one_backward(const Shape& m = kBench) {
  const int ln = ln_blocks(m, m.rows);
  std::vector<Producer> p = {{ln, m.C, 3}};
  for (int l = m.L - 1; l >= 0; --l) {
    if (m.dgelu) p.push_back({(m.N + 127) / 128, 4 * m.C, 1});
    p.push_back({ln, m.C, 3});
    p.push_back({m.N / 64, 3 * m.C, 1});
    p.push_back({ln, m.C, l > 0 ? 3 : 2});
  }
  return p;
}

struct Queued {
  size_t offset, floats;
};

// Queue `ps` as Model::finish_slice does (flush first when it does not fit); each launch's jobs checked.
static int run_queue(const std::vector<Producer>& ps, size_t arena_floats, int* jobs_checked) {
  std::vector<float> arena(arena_floats);  // (only its addresses are used)
  float* base = arena.data();
  FinishPlan q;
  q.bind(base, arena_floats);
  int flushes = 0;
  std::vector<Queued> slices;
  auto check_and_flush = [&] {
    if (q.empty()) return;
    const k::FinishJobs& js = q.jobs();
    // slices aligned, inside the arena, apart
    for (size_t a = 0; a < slices.size(); ++a) {
      EXPECT(slices[a].offset % 32 == 0);
      EXPECT(slices[a].offset + slices[a].floats <= arena_floats);
      for (size_t b = a + 1; b < slices.size(); ++b)
        EXPECT(slices[a].offset + slices[a].floats <= slices[b].offset ||
               slices[b].offset + slices[b].floats <= slices[a].offset);
    }
    // every column of every job owned by exactly one thread of the grid
    std::vector<std::vector<int>> seen(size_t(js.n));
    for (int j = 0; j < js.n; ++j) seen[size_t(j)].assign(size_t(js.job[j].sums) * js.job[j].C, 0);
    for (int b = 0; b < q.blocks(); ++b) {
      const int j = k::finish_job_of(js, b);
      const k::FinishJob& f = js.job[j];
      EXPECT(b >= f.first && b < k::finish_end_block(f));
      for (int t = 0; t < 32; ++t) {
        const int i = (b - f.first) * 32 + t;
        if (i < f.sums * f.C) ++seen[size_t(j)][size_t(i)];
      }
    }
    for (auto& v : seen)
      for (int c : v) EXPECT(c == 1);
    *jobs_checked += js.n;
    slices.clear();
    q.clear();
    ++flushes;
  };
  for (const Producer& p : ps) {
    const size_t floats = size_t(p.chunks) * p.sums * p.C;
    if (!q.fits(floats)) check_and_flush();
    float* part = q.take(floats);
    slices.push_back({size_t(part - base), floats});
    q.push(part, p.chunks, p.C, p.sums, nullptr);
  }
  check_and_flush();  // the backward's end
  return flushes;
}

TEST(bench_shape_slices_apart_and_every_column_once) {
  int jobs = 0;
  const int flushes = run_queue(one_backward(), kArena, &jobs);
  EXPECT(jobs == 4 * kL + 1);
  // about two layers' partials a launch: 6 layers in 3 launches (the trace's one-stream step counts 3)
  EXPECT(flushes == 3);
}

// --verify's comparison of --batch-finish on and off with --lt-search off (run/verify_step.cuh) expects at
// least two finishes a launch: 7 a backward in 2 launches.
TEST(verify_shape_two_launches_a_backward) {
  int jobs = 0;
  EXPECT(run_queue(one_backward(kVerify), arena_of(kVerify), &jobs) == 2);
  EXPECT(jobs == 3 * kVerify.L + 1);
}

TEST(an_arena_as_large_as_one_backward_flushes_once) {
  size_t total = 0;
  for (const Producer& p : one_backward()) total += (size_t(p.chunks) * p.sums * p.C + 31) / 32 * 32;
  int jobs = 0;
  EXPECT(run_queue(one_backward(), total, &jobs) == 1);
  EXPECT(run_queue(one_backward(), total - 32, &jobs) == 2);
}

TEST(a_full_job_table_flushes_before_the_arena_does) {
  std::vector<Producer> many(size_t(k::kFinishJobsMax) + 5, Producer{1, 7, 1});  // 7 columns: one block each
  int jobs = 0;
  EXPECT(run_queue(many, kArena, &jobs) == 2);
  EXPECT(jobs == k::kFinishJobsMax + 5);
}

TEST(take_refuses_what_does_not_fit) {
  FinishPlan q;
  std::vector<float> arena(1000);
  float* base = arena.data();
  q.bind(base, arena.size());
  bool threw = false;
  try {
    q.take(1001);
  } catch (const std::logic_error&) {
    threw = true;
  }
  EXPECT(threw);
  float* a = q.take(900);
  EXPECT(a == base);
  EXPECT(!q.fits(100));  // 900 rounds up to 928: 72 left
  threw = false;
  try {
    q.take(100);
  } catch (const std::logic_error&) {
    threw = true;
  }
  EXPECT(threw);
  q.clear();
  EXPECT(q.fits(1000) && q.take(1000) == base);
}

TEST(blocks_cover_odd_widths) {
  FinishPlan q;
  std::vector<float> arena(size_t(1) << 20);
  q.bind(arena.data(), arena.size());
  const int widths[] = {1, 31, 33, 384, 1000};
  int want = 0;
  for (int w : widths) {
    q.push(q.take(size_t(w) * 3), 1, w, 3, nullptr, nullptr, nullptr);
    want += (3 * w + 31) / 32;
  }
  EXPECT(q.blocks() == want);
  const k::FinishJobs& js = q.jobs();
  for (int j = 0; j < js.n; ++j) {
    EXPECT(k::finish_job_of(js, js.job[j].first) == j);
    EXPECT(k::finish_job_of(js, k::finish_end_block(js.job[j]) - 1) == j);
  }
}

int main() { return minitest::run_all(); }
