// day20_conv_slow_fast/variants.cuh: the list of variants conv.cu checks and times, with what
// each needs (workspace, a prepared table or filter) and how loose its check may be.
#pragma once
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "conv_shape.h"
#include "json.h"
#include "kernels/2_naive.cuh"
#include "kernels/3_tiled_single.cuh"
#include "kernels/3b_single_register.cuh"
#include "kernels/4_direct_multi.cuh"
#include "kernels/5_im2col_gemm.cuh"
#include "kernels/6_implicit_gemm.cuh"
#include "kernels/7_winograd.cuh"
#include "kernels/8_winograd_4x4.cuh"
#include "kernels/9_batched_sgemm.cuh"
#include "kernels/10_winograd_l2_slices.cuh"
#include "kernels/11_winograd_splitk.cuh"

// Device buffers of one shape.
struct Bufs {
  float *x = nullptr, *w = nullptr, *y = nullptr, *yref = nullptr, *ws = nullptr;
  size_t ws_bytes = 0;
  cublasHandle_t blas = nullptr;
};

struct Variant {
  int id;
  std::string name;
  std::function<bool(const ConvShape&, const Bufs&, std::string*)> supports;
  std::function<void(const ConvShape&, const Bufs&)> prepare;  // once per shape and filter, untimed
  std::function<void(const ConvShape&, const Bufs&, cudaStream_t)> run;
  // Winograd F(4x4) rounds differently from the direct method: its check's atol comes from the
  // error model in kernels/8_winograd_4x4.h instead of the direct method's.
  bool wino4_tol = false;
  // The device memory it needs beyond x, w and y (reported beside cuDNN's workspace).
  std::function<size_t(const ConvShape&)> workspace = [](const ConvShape&) { return size_t(0); };
  // What explains its time beyond the kernels' speed (launches, blocks), for the results file.
  std::function<void(const ConvShape&, json::Value&)> describe = [](const ConvShape&, json::Value&) {};
};

constexpr int kMaxSplits = 4;  // variant 11's largest split (its workspace holds that many M)

static size_t workspace_needed(const ConvShape& s) {
  size_t b = im2col_bytes(s);
  std::string why;
  if (supports_07(s, &why))
    b = std::max(
        {b, wino::workspace_bytes(s), wino4::workspace_bytes(s), wino4::splitk_workspace_bytes(s, kMaxSplits)});
  return b;
}

// Launch and block counts of the Winograd F(4x4) variants: a GEMM of few blocks leaves SMs idle.
static void describe_wino4(json::Value& e, long long launches, long long gemm_blocks, int gemm_threads) {
  e["launches"] = launches;
  e["gemm_blocks"] = gemm_blocks;
  e["gemm_threads_per_block"] = gemm_threads;
}

static std::vector<Variant> make_variants() {
  auto always = [](const ConvShape&, const Bufs&, std::string*) { return true; };
  auto none = [](const ConvShape&, const Bufs&) {};
  auto ws_ok = [](size_t need, const Bufs& b, std::string* why) {
    if (need <= b.ws_bytes) return true;
    *why = "needs a " + std::to_string(need >> 20) + " MiB workspace, more than this GPU has free";
    return false;
  };
  std::vector<Variant> v;
  v.push_back({2, "02_naive", always, none,
               [](const ConvShape& s, const Bufs& b, cudaStream_t st) { run_02_naive(s, b.x, b.w, b.y, st); }});
  // Variant 3 at several tile shapes (output tile = TW x TH*PY): the tile-size trade-off.
  auto tiled = [&](std::string cfg, void (*fn)(const ConvShape&, const float*, float*, cudaStream_t)) {
    v.push_back({3, "03_tiled_single " + cfg,
                 [](const ConvShape& s, const Bufs&, std::string* why) { return supports_03(s, why); },
                 [](const ConvShape& s, const Bufs& b) { set_03_filter(s, b.w); },
                 [fn](const ConvShape& s, const Bufs& b, cudaStream_t st) { fn(s, b.x, b.y, st); }});
  };
  tiled("16x16", run_03_tiled<16, 16, 1>);
  tiled("32x8", run_03_tiled<32, 8, 1>);
  tiled("32x32 (32x8 thr, 4 rows each)", run_03_tiled<32, 8, 4>);
  tiled("64x32 (64x4 thr, 8 rows each)", run_03_tiled<64, 4, 8>);
  tiled("128x16 (128x2 thr, 8 rows each)", run_03_tiled<128, 2, 8>);
  // The step past the textbook: no shared memory, a sliding window of rows in registers.
  auto strip = [&](std::string cfg, void (*fn)(const ConvShape&, const float*, float*, cudaStream_t)) {
    v.push_back({3, "03b_register_strip " + cfg,
                 [](const ConvShape& s, const Bufs&, std::string* why) { return supports_03b(s, why); },
                 [](const ConvShape& s, const Bufs& b) { set_03_filter(s, b.w); },
                 [fn](const ConvShape& s, const Bufs& b, cudaStream_t st) { fn(s, b.x, b.y, st); }});
  };
  strip("4 cols x 2 rows/thread", run_03b_strip<2>);
  strip("4 cols x 4 rows/thread", run_03b_strip<4>);
  strip("4 cols x 8 rows/thread", run_03b_strip<8>);
  strip("4 cols x 16 rows/thread", run_03b_strip<16>);
  v.push_back({4, "04_direct_multichannel",
               [](const ConvShape& s, const Bufs&, std::string* why) { return supports_04(s, why); }, none,
               [](const ConvShape& s, const Bufs& b, cudaStream_t st) { run_04_direct(s, b.x, b.w, b.y, st); }});
  v.push_back(
      {5, "05_im2col_cublas",
       [ws_ok](const ConvShape& s, const Bufs& b, std::string* why) { return ws_ok(im2col_bytes(s), b, why); }, none,
       [](const ConvShape& s, const Bufs& b, cudaStream_t st) { run_05_im2col(b.blas, s, b.x, b.w, b.y, b.ws, st); },
       false, im2col_bytes});
  v.push_back({6, "06_implicit_gemm",
               [](const ConvShape& s, const Bufs&, std::string* why) { return supports_06(s, why); },
               [](const ConvShape& s, const Bufs&) { set_06_table(s); },
               [](const ConvShape& s, const Bufs& b, cudaStream_t st) { run_06_implicit_gemm(s, b.x, b.w, b.y, st); }});
  v.push_back(
      {7, "07_winograd_2x2_3x3",
       [ws_ok](const ConvShape& s, const Bufs& b, std::string* why) {
         return supports_07(s, why) && ws_ok(wino::workspace_bytes(s), b, why);
       },
       none,
       [](const ConvShape& s, const Bufs& b, cudaStream_t st) { run_07_winograd(b.blas, s, b.x, b.w, b.y, b.ws, st); },
       false, wino::workspace_bytes});
  auto supports_wino4 = [ws_ok](const ConvShape& s, const Bufs& b, std::string* why) {
    return supports_08(s, why) && ws_ok(wino4::workspace_bytes(s), b, why);
  };
  v.push_back({8, "08_winograd_4x4_cublas", supports_wino4, none,
               [](const ConvShape& s, const Bufs& b, cudaStream_t st) {
                 run_08_winograd4_cublas(b.blas, s, b.x, b.w, b.y, b.ws, st);
               },
               true, wino4::workspace_bytes, [](const ConvShape&, json::Value& e) { e["launches"] = 4; }});
  // Variant 9 at several block tiles: the fastest stands for the variant in the headline.
  auto own = [&](std::string cfg,
                 void (*fn)(const ConvShape&, const float*, const float*, float*, float*, cudaStream_t),
                 long long (*blocks)(const ConvShape&), int threads) {
    v.push_back({9, "09_winograd_4x4_own_gemm " + cfg, supports_wino4, none,
                 [fn](const ConvShape& s, const Bufs& b, cudaStream_t st) { fn(s, b.x, b.w, b.y, b.ws, st); }, true,
                 wino4::workspace_bytes,
                 [blocks, threads](const ConvShape& s, json::Value& e) { describe_wino4(e, 4, blocks(s), threads); }});
  };
  own("128x128", run_09_winograd4_own<128, 128, 2>, gemm_blocks<128, 128>, 256);
  own("64x128", run_09_winograd4_own<64, 128, 4>, gemm_blocks<64, 128>, 128);
  own("128x64", run_09_winograd4_own<128, 64, 4>, gemm_blocks<128, 64>, 128);
  own("64x64", run_09_winograd4_own<64, 64, 8>, gemm_blocks<64, 64>, 64);
  // Variant 10: variant 9 a slice of images at a time, V + M within an L2 budget. Two budgets at
  // the 64x64 tile; the results record the slices and launches that explain its time.
  auto sliced = [&](size_t mib, std::string cfg,
                    void (*fn)(const ConvShape&, const float*, const float*, float*, float*, size_t, cudaStream_t),
                    long long (*blocks)(const ConvShape&), int threads) {
    const size_t budget = mib << 20;
    auto ws = [budget](const ConvShape& s) { return wino4::sliced_workspace_bytes(s, budget); };
    v.push_back(
        {10, "10_winograd_4x4_l2_slices " + std::to_string(mib) + "MiB " + cfg,
         [ws_ok, ws](const ConvShape& s, const Bufs& b, std::string* why) {
           return supports_08(s, why) && ws_ok(ws(s), b, why);
         },
         none,
         [fn, budget](const ConvShape& s, const Bufs& b, cudaStream_t st) { fn(s, b.x, b.w, b.y, b.ws, budget, st); },
         true, ws,
         [budget, blocks, threads](const ConvShape& s, json::Value& e) {
           ConvShape c = s;
           c.N = wino4::slice_images(s, budget);
           const int slices = (s.N + c.N - 1) / c.N;
           e["images_per_slice"] = c.N;
           e["slices"] = slices;
           describe_wino4(e, 1 + 3LL * slices, blocks(c), threads);  // gemm_blocks: per slice
         }});
  };
  sliced(16, "64x64", run_10_winograd4_sliced<64, 64, 8>, gemm_blocks<64, 64>, 64);
  sliced(32, "64x64", run_10_winograd4_sliced<64, 64, 8>, gemm_blocks<64, 64>, 64);
  // Variant 11: variant 9 with the channel sum split over 2 or 4 blocks per output tile, at three
  // block tiles. Fewer blocks per SM than variant 9's (6 and 3): the split kernel needs more
  // registers (9_batched_sgemm.cuh).
  auto split = [&](int splits, std::string cfg,
                   void (*fn)(const ConvShape&, const float*, const float*, float*, float*, int, cudaStream_t),
                   long long (*blocks)(const ConvShape&), int threads) {
    auto ws = [splits](const ConvShape& s) { return wino4::splitk_workspace_bytes(s, splits); };
    v.push_back(
        {11, "11_winograd_4x4_splitk " + std::to_string(splits) + "x " + cfg,
         [ws_ok, ws](const ConvShape& s, const Bufs& b, std::string* why) {
           return supports_08(s, why) && ws_ok(ws(s), b, why);
         },
         none,
         [fn, splits](const ConvShape& s, const Bufs& b, cudaStream_t st) { fn(s, b.x, b.w, b.y, b.ws, splits, st); },
         true, ws,
         [splits, blocks, threads](const ConvShape& s, json::Value& e) {
           e["splits"] = splits;
           e["channels_per_split"] = wino4::split_chunk(s, splits);
           describe_wino4(e, 4, splits * blocks(s), threads);
         }});
  };
  static_assert(kMaxSplits == 4, "the largest split below sizes the workspace");
  split(2, "64x64", run_11_winograd4_splitk<64, 64, 6>, gemm_blocks<64, 64>, 64);
  split(4, "64x64", run_11_winograd4_splitk<64, 64, 6>, gemm_blocks<64, 64>, 64);
  split(2, "64x128", run_11_winograd4_splitk<64, 128, 3>, gemm_blocks<64, 128>, 128);
  split(4, "64x128", run_11_winograd4_splitk<64, 128, 3>, gemm_blocks<64, 128>, 128);
  split(2, "128x64", run_11_winograd4_splitk<128, 64, 3>, gemm_blocks<128, 64>, 128);
  split(4, "128x64", run_11_winograd4_splitk<128, 64, 3>, gemm_blocks<128, 64>, 128);
  return v;
}
