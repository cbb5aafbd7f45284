// day50_gpt/run/bench_step.cuh: what --bench reports about one training step beyond its time: the model
// FLOPs and the MFU they give, and the LayerNorm alone against the copy bandwidth it could reach.
#pragma once
#include <cstdio>
#include <stdexcept>
#include <string>

#include "json.h"
#include "results.h"
#include "timing.cuh"
#include "trainer.cuh"

// Model FLOPs of one training step (PaLM's accounting, appendix B of Chowdhery et al. 2022): per token,
// 6 FLOPs per weight of a matmul (forward 2, backward 4) and 12 * layers * context * width for
// attention's QK^T and PV (forward and backward, the causal mask not subtracted). The weights of the
// matmuls: 12 C^2 per block (qkv 3 C^2, projection C^2, MLP 8 C^2) and the tied head's C * V.
// Recomputation, LayerNorm, softmax and the optimizer are not counted: MFU counts the model's work.
inline double model_flops_per_step(const gpt::Config& c, int batch) {
  const double C = c.width, L = c.layers, T = c.context, V = c.vocab;
  const double per_token = 6 * (12 * L * C * C + C * V) + 12 * L * T * C;
  return per_token * double(batch) * T;
}
// Dense peaks (no sparsity) from NVIDIA's H100 / H200 SXM data sheets (the two share the SM): bf16
// tensor cores, and fp32 without tensor cores (the fp32 path keeps TF32 off). On another GPU the MFU
// is still against these figures: say so where it is reported.
constexpr double kPeakBf16Tflops = 989.4, kPeakFp32Tflops = 66.9;

// The LayerNorm of one block alone, forward (x_mid = x + drop(proj output), then ln2) and backward
// (ln2's: dx += ..., the gains' gradients, the attention's dropout into the next matmul's input), on
// the trainer's own buffers (the model is left with garbage in them: call last), fused and unfused,
// L2 flushed before each repeat; and a device-to-device copy of the residual stream, the bandwidth the
// LayerNorm could reach. Bytes: what the fused kernels must read and write at least.
template <class T>
json::Value bench_layernorm(results::Results& res, Trainer<T>& tr, const std::string& name, bool goals = true) {
  Model<T>& m = tr.m;
  Layer& L = m.layer[0];
  const auto& W = m.lay.layer[0];
  const double NC = double(m.N) * m.c.width, E = sizeof(T), rows = m.N;
  const bool drop = m.drop.on;
  auto fwd = [&] {
    m.residual_then_ln(L.x_mid.template as<float>(), m.xs[0].template as<float>(), dropout::site_attn(0), W.ln2_w,
                       W.ln2_b, L.ln2.template as<T>(), L.ln2_mean.template as<float>(),
                       L.ln2_rstd.template as<float>());
  };
  auto bwd = [&] {
    m.ln_back_to(L.x_mid.template as<float>(), W.ln2_w, W.ln2_b, L.ln2_mean.template as<float>(),
                 L.ln2_rstd.template as<float>(), m.dln.template as<T>(), true, dropout::site_attn(0));
  };
  // forward: a and x_out in the residual stream's type (RB bytes: fp32, or bf16 with --residual bf16), y and ln
  // in T, mean and rstd; backward: x, dx (read and written) in RB, dy and the next input in T (the next input
  // is dx itself where the stream is in T and no dropout follows), mean and rstd.
  const double RB = double(m.res_bytes()), next_in = m.res16 && !drop ? 0 : E;
  const double fwd_bytes = NC * (RB + E + RB + E) + rows * 8, bwd_bytes = NC * (RB + RB + RB + E + next_in) + rows * 8;
  timing::Options to = timing::flushed(30, 300);
  to.stream = m.s;
  const bool was = m.fused_ln;
  m.fused_ln = true;
  const timing::Stats f = timing::time_gpu(fwd, to), b = timing::time_gpu(bwd, to);
  timing::Stats fu{}, bu{};  // (a bf16 stream has no unfused kernels: neither timed nor written)
  if (!m.res16) {
    m.fused_ln = false;
    fu = timing::time_gpu(fwd, to), bu = timing::time_gpu(bwd, to);
  }
  m.fused_ln = was;
  const size_t cb = size_t(NC) * m.res_bytes();  // the residual stream as stored
  const timing::Stats cp = timing::time_gpu(
      [&] { CUDA_CHECK(cudaMemcpyAsync(m.xs[1].as(), m.xs[0].as(), cb, cudaMemcpyDeviceToDevice, m.s)); }, to);
  // A bf16 stream's copy moves half the bytes, and a shorter copy reaches less of the bandwidth (its start and
  // tail weigh more): beside it, a copy of the fp32 stream's size, 4 N C bytes (the first half of the big
  // scratch buffer, 8 N C bytes in bf16, into its second half), so that both streams' kernels can be set
  // against one yardstick too.
  double copy32_gbs = 0;
  if (m.res16) {
    char* half = m.scratch_big.template as<char>();
    if (m.scratch_big.bytes() < 4 * cb) throw std::logic_error("bench_layernorm: the scratch buffer is too small");
    const timing::Stats c32 = timing::time_gpu(
        [&] { CUDA_CHECK(cudaMemcpyAsync(half + 2 * cb, half, 2 * cb, cudaMemcpyDeviceToDevice, m.s)); }, to);
    copy32_gbs = 2.0 * 2 * cb / (c32.median_ms * 1e6);
  }
  const double copy_gbs = 2.0 * cb / (cp.median_ms * 1e6), fg = fwd_bytes / (f.median_ms * 1e6),
               bg = bwd_bytes / (b.median_ms * 1e6);
  const char* stream = m.res16 ? "bf16 residual stream" : "fp32 residual stream";
  std::printf("  LayerNorm alone (%s, %s, %d x %d%s, L2 flushed): fused forward %.1f us = %.0f GB/s (%.0f%% of copy), "
              "backward %.1f us = %.0f GB/s (%.0f%%)",
              Types<T>::name(), stream, m.N, m.c.width, drop ? ", dropout" : "", 1e3 * f.median_ms, fg,
              100 * fg / copy_gbs, 1e3 * b.median_ms, bg, 100 * bg / copy_gbs);
  if (!m.res16) std::printf("; unfused forward %.1f us, backward %.1f us", 1e3 * fu.median_ms, 1e3 * bu.median_ms);
  std::printf("; copy %.0f GB/s", copy_gbs);
  if (m.res16) std::printf(" (a copy of the fp32 stream's size: %.0f GB/s)", copy32_gbs);
  std::printf("\n");
  json::Value j = json::Value::object();
  j["stream"] = stream;
  j["fused_fwd_us"] = 1e3 * f.median_ms, j["fused_bwd_us"] = 1e3 * b.median_ms;
  if (!m.res16) j["unfused_fwd_us"] = 1e3 * fu.median_ms, j["unfused_bwd_us"] = 1e3 * bu.median_ms;
  j["fwd_gbs"] = fg, j["bwd_gbs"] = bg, j["copy_gbs"] = copy_gbs;
  if (m.res16) j["copy_fp32_stream_gbs"] = copy32_gbs;
  j["fwd_pct_of_copy"] = 100 * fg / copy_gbs, j["bwd_pct_of_copy"] = 100 * bg / copy_gbs;
  j["bytes_note"] =
      "the fused kernels' minimum traffic: forward reads x, y and writes x_out, ln; backward reads x, dy, dx "
      "and writes dx and the next matmul's input (the residual stream in fp32, or bf16 with --residual bf16, "
      "activations in the step's type)";
  j["residual_bytes"] = m.res_bytes();
  if (goals) {  // (the issue's goal is the default step's; other streams' figures are recorded only)
    res.add_goal(name + ": fused LayerNorm forward >= 80% of copy bandwidth (%)", 100 * fg / copy_gbs,
                 fg >= 0.8 * copy_gbs);
    res.add_goal(name + ": fused LayerNorm backward >= 80% of copy bandwidth (%)", 100 * bg / copy_gbs,
                 bg >= 0.8 * copy_gbs);
  }
  return j;
}
