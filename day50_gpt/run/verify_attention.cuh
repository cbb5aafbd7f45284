// day50_gpt/run/verify_attention.cuh: one attention implementation alone against the CPU in double:
// its forward output and dq, dk, dv. Shared by gpt --verify and dev/attention.cu --verify.
#pragma once
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "../gpt_ref.h"
#include "../nn/model.cuh"
#include "results.h"
#include "verify.h"

// Attention alone at the default model's shape (head size 64, T = 256): the GPU's forward output and
// dq, dk, dv against the CPU in double, on the first heads.
// flash: with cuDNN's forward, our flash backward (nn/kernels/flash_bwd.cuh) where it applies, or cuDNN's;
// two_launches: ours as the first version's two kernels (dev/attention.cu times both); wgmma false: ours with its
// products on mma.sync (--flash-mma sync) where wgmma would run.
// " + our flash backward" and which kernel, where the model runs ours: nothing more for the default (one launch,
// on wgmma where it runs), ", two launches" or ", mma.sync" for the others, and " (mma.sync: no wgmma here)" for
// the default on a GPU or build without wgmma.
template <class T>
std::string flash_name(const Model<T>& m) {
  if (!m.ours_attn_bwd()) return "";
  if (m.flash_two_launches) return " + our flash backward, two launches";
  return m.flash_wgmma && !m.flash_on_wgmma() ? " + our flash backward (mma.sync: no wgmma here)"
         : m.flash_on_wgmma()               ? " + our flash backward"
                                            : " + our flash backward, mma.sync";
}
template <class T>
void verify_attention(results::Results& res, uint64_t seed, Attn attn, bool flash = true, bool two_launches = false,
                      bool wgmma = true) {
  gpt::Config c;  // default width, heads and context
  const int B = 2, Tq = c.context, C = c.width, H = c.heads;
  Model<T> m(c, B, attn, true, 0, Backend::kCustom, true, flash);
  m.flash_two_launches = two_launches, m.flash_wgmma = wgmma;
  const std::string tag = std::string("attention ") + Types<T>::name() + " " + attn_name(m.impl) + flash_name(m) +
                          " B=2 H=6 T=256 D=64";
  verify::Rng rng(seed ^ 0xA77E);
  const size_t N = size_t(B) * Tq;
  std::vector<float> qkv(N * 3 * C), dout(N * C);
  for (auto& x : qkv) x = rng.uniform(-2.f, 2.f);
  for (auto& x : dout) x = rng.uniform(-1.f, 1.f);
  std::vector<T> qkv_t(qkv.size()), dout_t(dout.size());
  for (size_t i = 0; i < qkv.size(); ++i)
    qkv_t[i] = T(qkv[i]), qkv[i] = float(qkv_t[i]);  // the CPU sees exactly what the GPU sees
  for (size_t i = 0; i < dout.size(); ++i) dout_t[i] = T(dout[i]), dout[i] = float(dout_t[i]);
  auto& L = m.layer[0];
  to_device(L.qkv.template as<T>(), qkv_t);
  to_device(m.datt.template as<T>(), dout_t);
  poison(L.att.as(), L.att.bytes());
  poison(m.dqkv.as(), m.dqkv.bytes());
  // The qkv bias gradient our flash backward adds up as it stores dqkv: into a buffer that starts at 1
  // (it adds to what is there, as into the zeroed gradients).
  float* dbias = nullptr;
  CUDA_CHECK(cudaMalloc(&dbias, size_t(3) * C * sizeof(float)));
  to_device(dbias, std::vector<float>(size_t(3) * C, 1.f));
  m.attention_fwd(L);
  const bool bias_done = m.attention_bwd(L, dbias);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<T> out_t = to_host(L.att.template as<T>(), N * C),
                       dqkv_t = to_host(m.dqkv.template as<T>(), N * 3 * C);
  const std::vector<float> dbias_got = to_host(dbias, size_t(3) * C);
  CUDA_CHECK(cudaFree(dbias));
  if (bias_done) {  // every column of dqkv as stored, all B * T rows, in double: the partials' plumbing
    std::vector<double> got(size_t(3) * C), want(size_t(3) * C, 1.0);
    double big = 0;
    for (size_t j = 0; j < got.size(); ++j) {
      double mag = 0;
      for (size_t r = 0; r < N; ++r) {
        const double v = double(float(dqkv_t[r * 3 * C + j]));
        want[j] += v, mag += std::fabs(v);
      }
      got[j] = dbias_got[j], big = std::max(big, mag);
    }
    res.add(verify::compare(tag + " qkv bias gradient (1 + column sums of dqkv)", got.data(), want.data(), got.size(),
                            verify::Tol{1e-5 * big, 1e-5, "fp32 sums"}));
  }
  // CPU reference for heads (b=0, h=0) and (b=1, h=H-1).
  std::vector<double> q64(qkv.begin(), qkv.end()), d64(dout.begin(), dout.end()), out_ref(N * C, 0.0),
      dqkv_ref(N * 3 * C, 0.0), Pm(size_t(Tq) * Tq);
  std::vector<double> got_o, ref_o, got_d, ref_d;
  const int hs = C / H;
  for (auto [b, h] : {std::pair<int, int>{0, 0}, {1, H - 1}}) {
    gpt::attention_head_fwd(q64.data(), Tq, size_t(C), size_t(H), b, size_t(h), Pm.data(), out_ref.data());
    gpt::attention_head_bwd(q64.data(), Pm.data(), d64.data(), Tq, size_t(C), size_t(H), b, size_t(h), dqkv_ref.data());
    for (int t = 0; t < Tq; ++t)
      for (int i = 0; i < hs; ++i) {
        const size_t o = (size_t(b) * Tq + t) * C + size_t(h) * hs + i;
        got_o.push_back(double(float(out_t[o]))), ref_o.push_back(out_ref[o]);
        for (int part = 0; part < 3; ++part) {
          const size_t d = (size_t(b) * Tq + t) * 3 * C + size_t(part) * C + size_t(h) * hs + i;
          got_d.push_back(double(float(dqkv_t[d]))), ref_d.push_back(dqkv_ref[d]);
        }
      }
  }
  double dmax = 0;
  for (double x : ref_d) dmax = std::max(dmax, std::fabs(x));
  const bool bf = std::is_same<T, bf16>::value;
  res.add(verify::compare(tag + " output vs CPU", got_o.data(), ref_o.data(), got_o.size(),
                          bf ? verify::Tol{1e-2, 2e-2, "bf16"} : verify::Tol{1e-5, 1e-4, "fp32"}));
  res.add(verify::compare(tag + " dq,dk,dv vs CPU", got_d.data(), ref_d.data(), got_d.size(),
                          bf ? verify::Tol{5e-3 * dmax, 3e-2, "bf16"} : verify::Tol{1e-5 * dmax, 1e-4, "fp32"}));
}

// A small model trained on the corpus: the loss must fall; then save at mid-run, load into a fresh
// trainer, and continue: the resumed losses must equal the uninterrupted run's (bit for bit on the
