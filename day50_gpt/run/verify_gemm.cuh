// day50_gpt/run/verify_gemm.cuh: our fused GEMM's two loops (nn/gemm_sm90.h) on the same inputs. Keeping
// A's row panel (--keep-a on) changes where A's boxes come from and which block computes which tile, not the
// k order of a tile or its epilogue: so its C, its aux and its column sums must equal the streamed loop's to
// the bit. The shapes have edges in M, N and K, one k-step and several, a column box past N skipped whole,
// and caps on the grid that make each block take several row blocks in turn (the panel handed from one row
// block to the next, up to five times), with rows of one, two and nine tiles. The dGELU GEMM also runs
// without its column sums (in place with A kept, its other ending). Every shape but the step's is checked
// against the CPU in double as well (C, aux, and the column sums against the sums of C as stored), so that
// the two loops cannot agree on a wrong answer. The same for the two epilogues of --gelu-deriv: bias+GELU
// keeping gelu'(z) in aux, and the multiply by a kept derivative (with the column sums as dGELU's).
// The streamed loop's two-output epilogues also run with four staging slots a consumer (--store-slots 4):
// only where each box waits to be staged changes, so C and aux must be the bits of two slots'.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

#include "../gpt_ref.h"
#include "../nn/gemm_sm90.h"
#include "check.cuh"
#include "results.h"
#include "verify.h"

namespace verify_gemm {
using bf16 = __nv_bfloat16;

struct Out {
  std::vector<bf16> c, aux;
  std::vector<float> colsum;
};

// One call of sm90::gemm, its outputs poisoned first. dGELU and the multiply read aux (given) and, with sums,
// write colsum; the two bias+GELU epilogues write aux.
inline Out run(sm90::Epi e, int M, int N, int K, const DeviceBuffer& A, const DeviceBuffer& Bt,
               const DeviceBuffer& bias, const DeviceBuffer& aux_in, bool keep_a, int max_blocks, bool sums = true,
               int store_slots = 2) {
  const size_t nc = size_t(M) * N, ncs = size_t((M + sm90::kColsumRows - 1) / sm90::kColsumRows) * N;
  DeviceBuffer C(nc * sizeof(bf16)), aux(nc * sizeof(bf16)), colsum(ncs * sizeof(float));
  poison(C.as(), C.bytes());
  poison(colsum.as(), colsum.bytes());
  const bool dg = sm90::reads_aux(e);
  if (dg)
    CUDA_CHECK(cudaMemcpy(aux.as(), aux_in.as(), aux.bytes(), cudaMemcpyDeviceToDevice));
  else
    poison(aux.as(), aux.bytes());
  sm90::gemm(e, M, N, K, A.as<bf16>(), Bt.as<bf16>(), C.as<bf16>(), dg ? nullptr : bias.as<bf16>(),
             e == sm90::Epi::kBias ? nullptr : aux.as<bf16>(), 0, dg && sums ? colsum.as<float>() : nullptr, keep_a,
             max_blocks, false, store_slots);
  CUDA_CHECK(cudaDeviceSynchronize());
  Out o;
  o.c = to_host(C.as<bf16>(), nc);
  if (sm90::writes_aux(e)) o.aux = to_host(aux.as<bf16>(), nc);
  if (dg && sums) o.colsum = to_host(colsum.as<float>(), ncs);
  return o;
}

// Bitwise equality of two arrays (a poisoned NaN left in either counts as a difference).
template <class T>
size_t differing(const std::vector<T>& a, const std::vector<T>& b) {
  size_t bad = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    bad += std::memcmp(&a[i], &b[i], sizeof(T)) != 0 || !std::isfinite(verify::to_double(a[i]));
  return bad;
}

inline const char* epi_name(sm90::Epi e) {
  return e == sm90::Epi::kBias          ? "bias"
         : e == sm90::Epi::kBiasGeluAux  ? "bias+GELU"
         : e == sm90::Epi::kDGelu        ? "dGELU"
         : e == sm90::Epi::kBiasGeluDeriv ? "bias+GELU derivative kept"
                                         : "times the kept derivative";
}
}  // namespace verify_gemm

// Where this GPU runs our fused GEMM (sm_90): the kept-A loop against the streamed one, bitwise, and each
// small shape against the CPU.
// step_shape false: the small shapes only (fc at the step's shape takes minutes under racecheck).
inline void verify_gemm_keep_a(results::Results& res, uint64_t seed, bool step_shape = true) {
  using namespace verify_gemm;
  struct Shape {
    int M, N, K, max_blocks;
  };
  // 300 x 200 x 72 on one block: three row blocks (the last 44 rows, its second row box skipped), rows of two
  // tiles (the second 72 wide), two k-steps (the second 8 deep). 520 x 1152 x 384 on two blocks: rows of
  // nine tiles, so the consumers' turns cross row blocks. 260 x 120 x 384 on one block: rows of one tile
  // (one consumer a row block, the panel's release counting one). 1100 x 136 x 64 on two blocks: five and
  // four row blocks a block, one k-step, and each row's second tile 8 columns wide (its second column box
  // skipped whole). 16384 x 1536 x 384: fc at the step's shape, one row block a block (not on the CPU).
  const Shape shapes[] = {
      {300, 200, 72, 1}, {520, 1152, 384, 2}, {260, 120, 384, 1}, {1100, 136, 64, 2}, {16384, 1536, 384, 0}};
  verify::Rng rng(seed ^ 0x6E33);
  for (const Shape& sh : shapes) {
    if (!step_shape && sh.M == 16384) continue;
    const size_t na = size_t(sh.M) * sh.K, nb = size_t(sh.N) * sh.K, nc = size_t(sh.M) * sh.N;
    std::vector<bf16> a(na), b(nb), bias(size_t(sh.N)), pre(nc);
    for (auto& x : a) x = bf16(rng.uniform(-1.f, 1.f));
    for (auto& x : b) x = bf16(rng.uniform(-1.f, 1.f) / std::sqrt(float(sh.K)));
    for (auto& x : bias) x = bf16(rng.uniform(-0.5f, 0.5f));
    for (auto& x : pre) x = bf16(rng.uniform(-3.f, 3.f));
    DeviceBuffer dA(na * sizeof(bf16)), dB(nb * sizeof(bf16)), dBias(bias.size() * sizeof(bf16)),
        dPre(nc * sizeof(bf16));
    to_device(dA.as<bf16>(), a), to_device(dB.as<bf16>(), b), to_device(dBias.as<bf16>(), bias),
        to_device(dPre.as<bf16>(), pre);
    const bool on_cpu = nc <= size_t(1) << 20;
    std::vector<double> acc;  // A . Bt^T in double from the same bf16 inputs
    if (on_cpu) {
      acc.assign(nc, 0.0);
      for (int i = 0; i < sh.M; ++i)
        for (int j = 0; j < sh.N; ++j) {
          double v = 0;
          for (int k = 0; k < sh.K; ++k)
            v += double(float(a[size_t(i) * sh.K + k])) * double(float(b[size_t(j) * sh.K + k]));
          acc[size_t(i) * sh.N + j] = v;
        }
    }
    char shape[96];
    std::snprintf(shape, sizeof shape, "%dx%dx%d%s", sh.M, sh.N, sh.K,
                  sh.max_blocks ? (" on " + std::to_string(sh.max_blocks) + " block(s)").c_str() : "");
    for (sm90::Epi e : {sm90::Epi::kBias, sm90::Epi::kBiasGeluAux, sm90::Epi::kDGelu, sm90::Epi::kBiasGeluDeriv,
                        sm90::Epi::kMulAux}) {
      const bool reads = sm90::reads_aux(e), writes = sm90::writes_aux(e);
      const std::string tag = std::string("our fused GEMM ") + epi_name(e) + " " + shape + ": A kept";
      const Out kept = run(e, sh.M, sh.N, sh.K, dA, dB, dBias, dPre, true, sh.max_blocks);
      const Out streamed = run(e, sh.M, sh.N, sh.K, dA, dB, dBias, dPre, false, sh.max_blocks);
      size_t bad = differing(kept.c, streamed.c), n = kept.c.size();
      if (writes) bad += differing(kept.aux, streamed.aux), n += kept.aux.size();
      if (reads) bad += differing(kept.colsum, streamed.colsum), n += kept.colsum.size();
      res.add(verify::fact(tag + " == A streamed, bitwise (C" + (writes ? ", aux" : reads ? ", column sums" : "") + ")",
                           bad == 0, "exact", std::to_string(bad) + " of " + std::to_string(n) + " differ", n, bad));
      if (writes) {  // four staging slots a consumer (--store-slots 4): the same stores through other slots
        const Out four = run(e, sh.M, sh.N, sh.K, dA, dB, dBias, dPre, false, sh.max_blocks, true, 4);
        const size_t b4 = differing(four.c, streamed.c) + differing(four.aux, streamed.aux), n4 = 2 * nc;
        res.add(verify::fact(std::string("our fused GEMM ") + epi_name(e) + " " + shape +
                                 ": four staging slots == two, bitwise (C, aux)",
                             b4 == 0, "exact", std::to_string(b4) + " of " + std::to_string(n4) + " differ", n4, b4));
      }
      if (reads) {  // without the sums: in place, the tile handed back without being scratch
        const Out bare = run(e, sh.M, sh.N, sh.K, dA, dB, dBias, dPre, true, sh.max_blocks, false);
        const size_t nd = differing(bare.c, streamed.c);
        res.add(verify::fact(tag + ", no column sums: C == A streamed with them, bitwise", nd == 0, "exact",
                             std::to_string(nd) + " of " + std::to_string(nc) + " differ", nc, nd));
      }
      if (!on_cpu) continue;
      // The CPU in double: the epilogue on acc; stored in bf16. A K-long dot product of O(1) values, GELU by
      // tanh.approx (2^-11): bf16's tolerance.
      std::vector<double> ref(nc), ref_aux(nc);
      for (int i = 0; i < sh.M; ++i)
        for (int j = 0; j < sh.N; ++j) {
          const size_t o = size_t(i) * sh.N + j;
          const double z = acc[o] + double(float(bias[size_t(j)]));
          ref_aux[o] = e == sm90::Epi::kBiasGeluDeriv ? gpt::detail::gelu_grad(z) : z;
          const double aux_in = double(float(pre[o]));  // (the multiply reads it as the derivative itself)
          ref[o] = e == sm90::Epi::kBias                                              ? z
                   : e == sm90::Epi::kBiasGeluAux || e == sm90::Epi::kBiasGeluDeriv ? gpt::detail::gelu(z)
                   : e == sm90::Epi::kDGelu ? acc[o] * gpt::detail::gelu_grad(aux_in)
                                            : acc[o] * aux_in;
        }
      std::vector<float> got(nc);
      for (size_t i = 0; i < nc; ++i) got[i] = float(kept.c[i]);
      res.add(verify::compare(tag + " vs CPU", got.data(), ref.data(), nc, verify::kBf16));
      if (writes) {
        for (size_t i = 0; i < nc; ++i) got[i] = float(kept.aux[i]);
        res.add(verify::compare(tag + (e == sm90::Epi::kBiasGeluAux ? ", aux (the pre-activation) vs CPU"
                                                                     : ", aux (the GELU's derivative) vs CPU"),
                                got.data(), ref_aux.data(), nc, verify::kBf16));
      }
      if (reads) {
        // The sums of C as the GPU stored it (bf16), per 128-row tile, in double: what colsum must hold up to
        // fp32's rounding of at most 128 terms (at most ~128 x 2^-24 of the largest sum of magnitudes).
        const int tr = (sh.M + sm90::kColsumRows - 1) / sm90::kColsumRows;
        std::vector<double> sums(size_t(tr) * sh.N, 0.0);
        double mag = 0;
        for (int r = 0; r < tr; ++r)
          for (int j = 0; j < sh.N; ++j) {
            double sv = 0, sa = 0;
            for (int i = r * sm90::kColsumRows; i < std::min(sh.M, (r + 1) * sm90::kColsumRows); ++i) {
              const double v = double(float(kept.c[size_t(i) * sh.N + j]));
              sv += v, sa += std::fabs(v);
            }
            sums[size_t(r) * sh.N + j] = sv, mag = std::max(mag, sa);
          }
        res.add(verify::compare(tag + ", column sums vs the sums of its C (double)", kept.colsum.data(), sums.data(),
                                sums.size(), verify::Tol{1e-5, 1e-5, "fp32"}.scaled(std::max(mag, 1.0))));
      }
    }
  }
}
