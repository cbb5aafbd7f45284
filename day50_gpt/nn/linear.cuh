// day50_gpt/nn/linear.cuh: the model's linear layers, forward and backward: a cuBLAS matmul with its
// bias (and, for the MLP's first layer, the GELU), fused into one cuBLASLt call where cuBLASLt offers
// the epilogue (common/cublaslt.h), or into our own Hopper GEMM (nn/gemm_sm90.h), else the plain matmul
// (nn/matmul.cuh) and our elementwise kernels (nn/kernels/bias_gelu_residual.cuh); in bf16 with
// --lt-search, which of these runs where is timed once per shape.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "model.cuh"
#include "verify.h"

// The cuBLASLt matmul for one (shape, epilogue), built on first use; null where cuBLASLt refuses it.
// --precision tf32: built with CUBLAS_COMPUTE_32F_FAST_TF32 (fp32 inputs rounded to TF32 on the tensor
// cores), under its own key, so it never shares an algorithm choice with fp32's.
template <class T>
lt::Tuned* Model<T>::lt_get(const lt::Spec& sp, cudaDataType_t out_type) {
  if (!fuse) return nullptr;
  const std::string key =
      std::to_string(sp.ta) + std::to_string(sp.tb) + "," + std::to_string(sp.m) + "," + std::to_string(sp.n) + "," +
      std::to_string(sp.k) + "," + std::to_string(int(sp.epilogue)) + "," + std::to_string(int(out_type)) +
      (tf32 ? ",tf32" : "") +
      (sp.reductions != CUBLASLT_REDUCTION_SCHEME_MASK ? ",r" + std::to_string(sp.reductions) : "") +
      (sp.sm_target > 0 ? ",sm" + std::to_string(sp.sm_target) : "");
  auto it = lt_cache.find(key);
  if (it == lt_cache.end()) {
    lt::Spec s2 = sp;
    s2.ab = Types<T>::blas, s2.cd = out_type;
    s2.compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const bool search = lt_search && std::is_same<T, bf16>::value;  // fp32: the heuristic's pick (see lt_tuned.cuh)
    it = lt_cache.emplace(key, std::make_unique<lt::Tuned>(blas_lt, s2, kLtWorkspace, key, search)).first;
    if (!it->second->ok())
      std::printf("note: %s (epilogue %d, %dx%dx%d); using the unfused path there\n", it->second->why().c_str(),
                  int(sp.epilogue), sp.m, sp.n, sp.k);
  }
  return it->second->ok() ? it->second.get() : nullptr;
}

// out[N][O] = in[N][I] . W^T + b; with gelu_out: gelu_out = gelu(out), and out keeps the pre-activation z
// (or, --gelu-deriv, gelu'(z): deriv_fwd).
template <class T>
void Model<T>::linear(const T* in, size_t w, size_t b, T* out, int I, int O, T* gelu_out) {
  if (on_cudnn() && dnn_linear(in, w, b, out, I, O, gelu_out)) return mark(kMatmul);  // nn/backend_cudnn.cuh
  if (on_cudnn()) fell_back.insert("linear forward (cuBLAS/cuBLASLt and ours)");
  if (gelu_out) fc_holds_deriv = gelu_deriv_applies();
  if (gelu_out && fc_holds_deriv) return deriv_fwd(in, w, b, out, gelu_out, I, O);  // out keeps gelu'
  lt::Spec sp;
  sp.ta = CUBLAS_OP_T, sp.tb = CUBLAS_OP_N, sp.m = O, sp.n = N, sp.k = I, sp.lda = I, sp.ldb = I, sp.ldd = O;
  sp.epilogue = gelu_out ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS, sp.aux_ld = gelu_out ? O : 0;
  if (lt::Tuned* mm = lt_get(sp, Types<T>::blas)) {
    fwd_run(fwd_path(mm, in, w, b, out, gelu_out, I, O), mm, in, w, b, out, gelu_out, I, O, true);
    return;
  }
  matmul_fwd<T, T>(blas, in, W(w), out, N, I, O);
  mark(kMatmul);
  hw("add_bias");
  k::add_bias<T><<<grid_for(size_t(N) * O), 256, 0, s>>>(out, P(b), N, O);
  LAUNCH_CHECK();
  mark(kResidual);
  if (gelu_out) {
    hw("gelu_fwd");
    k::gelu_fwd<T><<<grid_for(size_t(N) * O), 256, 0, s>>>(out, gelu_out, size_t(N) * O);
    LAUNCH_CHECK();
    mark(kGelu);
  }
}
// The weight gradient's matmul with the bias gradient in its epilogue (BGRADB), or cuBLAS's plain
// matmul and the column sums apart (bias_partials + colsum_finish)? The epilogue saves a pass over dout,
// but it may also keep cuBLASLt from splitting the long reduction (K = N rows) over more blocks, which
// this thin output (I x O, a few dozen tiles on 132 SMs) needs. So in the searching mode (bf16,
// --lt-search) both are timed once per shape, into scratch, and the faster is kept for the process
// (nn/lt_tuned.cuh's reasons: one choice for every model of the run). Otherwise: the epilogue.
template <class T>
bool Model<T>::bgrad_in_epilogue(lt::Tuned* mm, const T* in, const T* dout, int I, int O) {
  if (!lt_search || !std::is_same<T, bf16>::value) return true;
  const std::string key = "bgrad " + std::to_string(I) + "x" + std::to_string(O) + "x" + std::to_string(N);
  const int known = lt::recall(key);
  if (known >= 0) return known == 1;
  if (lt::capturing(s)) return true;  // no timing inside a capture
  float *dw = nullptr, *db = nullptr;
  CUDA_CHECK(cudaMalloc(&dw, size_t(I) * O * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&db, size_t(O) * sizeof(float)));
  CUDA_CHECK(cudaMemsetAsync(dw, 0, size_t(I) * O * sizeof(float), s));
  CUDA_CHECK(cudaMemsetAsync(db, 0, size_t(O) * sizeof(float), s));
  const int chunks = k::col_chunks(N);
  auto epilogue = [&] { mm->run(in, dout, dw, 1.f, db, nullptr, lt_ws.as(), s); };
  auto apart = [&] {
    matmul_bwd_w<T>(blas, in, dout, dw, N, I, O);
    float* part = partials_now();
    k::bias_partials<T><<<dim3((O + 31) / 32, chunks), dim3(32, 8), 0, s>>>(dout, part, N, O);
    LAUNCH_CHECK();
    k::colsum_finish<<<grid_for(size_t(O)), 256, 0, s>>>(part, chunks, 1, O, db, nullptr);
    LAUNCH_CHECK();
  };
  float best[2];
  lt::time_two(s, epilogue, apart, best);
  CUDA_CHECK(cudaFree(dw));
  CUDA_CHECK(cudaFree(db));
  const bool epi = best[0] <= best[1];
  char note[160];
  std::snprintf(note, sizeof note, "in the epilogue %.1f us, apart %.1f us: %s", 1e3 * best[0], 1e3 * best[1],
                epi ? "epilogue" : "apart");
  lt::remember(key, epi ? 1 : 0, note);
  std::printf("bias gradient %s: %s\n", key.c_str(), note);
  return epi;
}

// Where an epilogue would run there are up to three ways (bf16, --lt-search):
//   Path::kEpilogue  cuBLASLt's matmul with the epilogue fused;
//   Path::kApart     cuBLAS's plain matmul and one pass of ours (nn/kernels/bias_gelu_residual.cuh);
//   Path::kFused     our Hopper GEMM with the epilogue fused (nn/gemm_sm90.h), where it runs.
// The epilogue saves a pass over the output, but at these thin shapes cuBLASLt's kernels with it are
// slower than its plain ones, and our GEMM's epilogue costs less again. So each place is timed once per
// shape, into poisoned scratch; each other path's output is compared with the epilogue's on the same
// inputs (to bf16 rounding, scaled to the output's size: they round at different places, and GELU's
// derivative may be computed another way; a wrong kernel differs by O(1)), and the fastest that matches
// is kept for the process (lt::remember). --verify forces a path (force_ours, force_fused) so that the
// CPU comparison covers it whatever the timing would choose.
// `otherwise`: the warning's words where they differ (which path stays).
template <class T>
bool matches_path(const T* ours, const T* ref, size_t n, const std::string& what,
                  const char* otherwise = "ours differs from the cuBLASLt epilogue's; the epilogue stays") {
  const std::vector<T> a = to_host(ours, n), e = to_host(ref, n);
  double big = 0;
  for (const T& v : e) big = std::max(big, std::fabs(verify::to_double(v)));
  const verify::Check c = verify::compare(what, a.data(), e.data(), n, verify::Tol{0.02, 0.02, "bf16"}.scaled(big));
  if (!c.passed) {
    std::printf("warning: %s: %s\n", what.c_str(), otherwise);
    verify::print(c);
  }
  return c.passed;
}
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Times the available paths (run(p) launches path p into its scratch; same(p) compares its output with
// the epilogue's), keeps the fastest that matches, remembers and prints the verdict.
template <class Run, class Same>
Path pick_path(cudaStream_t s, const char* pass, const std::string& key, const bool avail[3], Run&& run, Same&& same) {
  std::vector<int> paths;
  for (int p = 0; p < 3; ++p)
    if (avail[p]) paths.push_back(p);
  std::vector<float> t(paths.size());
  lt::time_each(s, int(paths.size()), t.data(), [&](int i) { run(Path(paths[size_t(i)])); });
  CUDA_CHECK(cudaStreamSynchronize(s));
  float ms[3] = {0, 0, 0};
  bool ok[3] = {true, false, false};
  for (size_t i = 0; i < paths.size(); ++i) ms[paths[i]] = t[i];
  for (int p = 1; p < 3; ++p) ok[p] = avail[p] && same(Path(p));
  int best = 0;
  for (int p = 1; p < 3; ++p)
    if (ok[p] && ms[p] < ms[best]) best = p;
  static const char* names[3] = {"epilogue", "ours", "our fused GEMM"};
  char note[240];
  int len = std::snprintf(note, sizeof note, "in the epilogue %.1f us", 1e3 * ms[0]);
  if (avail[1])
    len += std::snprintf(note + len, sizeof note - size_t(len), ", plain matmul + ours %.1f us%s", 1e3 * ms[1],
                         ok[1] ? "" : " (ours differs)");
  if (avail[2])
    len += std::snprintf(note + len, sizeof note - size_t(len), ", our fused GEMM %.1f us%s", 1e3 * ms[2],
                         ok[2] ? "" : " (it differs)");
  std::snprintf(note + len, sizeof note - size_t(len), ": %s", names[best]);
  std::map<std::string, double> us = {{"epilogue", 1e3 * ms[0]}, {"pick", double(best)}};
  if (avail[1]) us["apart"] = 1e3 * ms[1];
  if (avail[2]) us["fused"] = 1e3 * ms[2];
  lt::remember_times(key, us);
  lt::remember(key, best, note);
  std::printf("%s %s: %s\n", pass, key.c_str(), note);
  return Path(best);
}

// Our fused GEMM can run here: bf16, --lt-search (the timed mode), TMA's 16-byte rows, an sm_90 GPU with
// the sm_90a build.
template <class T>
bool Model<T>::fused_fits(int M, int Nn, int K, const void* a, const void* bt, const void* c, const void* aux) const {
  return std::is_same<T, bf16>::value && lt_search && sm90::fits(M, Nn, K, a, bt, c, aux) && sm90::available();
}

// The forward's bias (and GELU, the pre-activation kept in out) at (in, w, b) -> out, gelu_out. marks: the
// step's phase marks (not while timing): the matmul, then our pass apart, for the phase table.
template <class T>
void Model<T>::fwd_run(Path p, lt::Tuned* mm, const T* in, size_t w, size_t b, T* out, T* gelu_out, int I, int O,
                       bool marks) {
  if (p == Path::kFused) {
    if constexpr (std::is_same<T, bf16>::value) {
      hw("sm90::gemm (fused epilogue)");
      if (gelu_out)  // aux = out keeps the pre-activation, C = gelu_out
        sm90::gemm(sm90::Epi::kBiasGeluAux, N, O, I, in, W(w), gelu_out, W(b), out, s, nullptr, keep_a, 0, pdl, store_slots);
      else
        sm90::gemm(sm90::Epi::kBias, N, O, I, in, W(w), out, W(b), nullptr, s, nullptr, keep_a, 0, pdl, store_slots);
      ++fused_launches;
    }
  } else if (p == Path::kApart) {
    matmul_fwd<T, T>(blas, in, W(w), out, N, I, O);
    if (marks) mark(kMatmul);
    hw("bias_gelu_vec");
    k::bias_gelu_vec<T><<<grid_for(size_t(N) * O / (16 / sizeof(T))), 256, 0, s>>>(out, P(b), gelu_out, N, O);
    LAUNCH_CHECK();
    ++ours_launches;
    if (marks) mark(gelu_out ? kGelu : kResidual);
    return;
  } else {  // the bias in the output's type: the fp32 master in fp32 mode, its bf16 copy in bf16 mode
    mm->run(W(w), in, gelu_out ? gelu_out : out, 0.f, W(b), gelu_out ? out : nullptr, lt_ws.as(), s);
  }
  if (marks) mark(kMatmul);
}
template <class T>
Path Model<T>::fwd_path(lt::Tuned* mm, const T* in, size_t w, size_t b, T* out, T* gelu_out, int I, int O) {
  constexpr int V = 16 / sizeof(T);
  const bool apart = lt_search && std::is_same<T, bf16>::value && O % V == 0 && aligned16(out) &&
                     (!gelu_out || aligned16(gelu_out));
  const bool fused = fused_fits(N, O, I, in, W(w), out, gelu_out);
  if (force_ours) return apart ? Path::kApart : Path::kEpilogue;
  if (force_fused && fused) return Path::kFused;
  if (!apart && !fused) return Path::kEpilogue;
  const bool gelu = gelu_out != nullptr;
  const std::string key = std::string(gelu ? "bias+GELU " : "bias ") + std::to_string(I) + "x" + std::to_string(O) +
                          "x" + std::to_string(N);
  // The process's choice, where this model can take it (the choice was timed on the first model that
  // asked: another may have other alignments, or sit on another GPU); else cuBLASLt's epilogue.
  const int known = lt::recall(key);
  if (known >= 0) return (known == 1 && !apart) || (known == 2 && !fused) ? Path::kEpilogue : Path(known);
  if (lt::capturing(s)) return Path::kEpilogue;
  const size_t n = size_t(N) * O;
  // Poisoned (all bits set: NaN in bf16), so that a part a path leaves unwritten fails the comparison
  // instead of matching by chance. It also keeps compute-sanitizer's initcheck quiet: the tool does not
  // see cuBLAS's stores, so our bias pass reading a fresh buffer that only cuBLAS wrote was reported as
  // ~500,000 uninitialized reads (dev/initcheck_probe.cu shows the blind spot on its own).
  T* pre[3] = {};
  T* act[3] = {};
  const bool avail[3] = {true, apart, fused};
  for (int p = 0; p < 3; ++p)
    if (avail[p])
      for (T** q : {&pre[p], &act[p]}) {
        CUDA_CHECK(cudaMalloc(q, n * sizeof(T)));
        poison(*q, n * sizeof(T), s);
      }
  auto run = [&](Path p) { fwd_run(p, mm, in, w, b, pre[int(p)], gelu ? act[int(p)] : nullptr, I, O, false); };
  auto same = [&](Path p) {
    bool ok = matches_path(pre[int(p)], pre[0], n, key + " pre-activation");
    if (gelu) ok = matches_path(act[int(p)], act[0], n, key + " GELU") && ok;
    return ok;
  };
  const Path pick = pick_path(s, "forward", key, avail, run, same);
  for (int p = 0; p < 3; ++p)
    for (T* q : {pre[p], act[p]})
      if (q) CUDA_CHECK(cudaFree(q));
  return pick;
}

// --gelu-deriv on: the GELU's derivative kept instead of its input. The backward of y = gelu(z) needs
// gelu'(z) at every element of fc's output; kept as z, the dGELU GEMM recomputes the tanh of z (ten
// instructions and a tanh an element, in an epilogue whose instruction issue sets the GEMM's pace: "Where
// our GEMM's time goes" in the notes); kept as gelu'(z), written by fc's forward from the tanh it computes
// for gelu(z) anyway (four more instructions), the backward only multiplies. The same bytes either way (one
// bf16 per element); in our fused GEMM the derivative comes from the fp32 sum, not from a rounded z (the pass
// path adds the bias to the plain matmul's bf16 output). Two ways each, both ours:
// our fused GEMM (Epi::kBiasGeluDeriv, Epi::kMulAux) where it runs, and the plain matmul with a pass of ours
// (bias_gelu_vec<T, true>, gelu_bwd_vec<T, true>); cuBLASLt's epilogues take z only. deriv_path times them once per shape, into
// poisoned scratch, checks the fused output against the pass's (to bf16 rounding, as pick_path does against
// cuBLASLt's), and keeps the faster for the process; --verify forces either (force_ours, force_fused).
// run(p, out, second) launches path p into out (and second: the forward's gelu(z)); before_timing, if given,
// runs just before the timing (the backward hands its column sums' buffer over there).
template <class T>
Path Model<T>::deriv_path(bool fwd, int I, int O, const void* a, const void* bt, const void* cc, const void* aux,
                          const std::function<void(Path, T*, T*)>& run, size_t n, bool two,
                          const std::function<void()>& before_timing) {
  const bool fused = fwd ? fused_fits(N, O, I, a, bt, cc, aux) : fused_fits(N, I, O, a, bt, cc, aux);
  const bool apart = aligned16(cc) && aligned16(aux);  // (16-byte Packs; the width is gelu_deriv_applies')
  if (!fused && !apart)
    throw std::logic_error("Model::deriv_path: neither our fused GEMM nor our passes take these buffers");
  if (force_ours) return apart ? Path::kApart : Path::kFused;
  if (force_fused || !apart) return fused ? Path::kFused : Path::kApart;
  if (!fused) return Path::kApart;
  const std::string key = std::string(fwd ? "bias+GELU derivative kept " : "dGELU derivative kept ") +
                          std::to_string(I) + "x" + std::to_string(O) + "x" + std::to_string(N);
  const int known = lt::recall(key);
  if (known >= 0) return Path(known);
  if (lt::capturing(s)) return Path::kApart;  // untimed, unchecked: the pass (a trainer's first step is eager)
  if (before_timing) before_timing();
  T* out[3][2] = {};
  for (int p = 1; p < 3; ++p)
    for (int o = 0; o < (two ? 2 : 1); ++o) {
      CUDA_CHECK(cudaMalloc(&out[p][o], n * sizeof(T)));
      poison(out[p][o], n * sizeof(T), s);  // as in fwd_path
    }
  float t[2] = {0, 0};
  lt::time_each(s, 2, t, [&](int i) { run(Path(i + 1), out[i + 1][0], out[i + 1][1]); });
  CUDA_CHECK(cudaStreamSynchronize(s));
  bool same = true;
  for (int o = 0; o < (two ? 2 : 1); ++o)
    same = matches_path(out[2][o], out[1][o], n, key,
                        "our fused GEMM differs from the plain matmul and our pass; the pass stays") &&
           same;
  for (auto& pair : out)
    for (T* q : pair)
      if (q) CUDA_CHECK(cudaFree(q));
  const Path pick = same && t[1] < t[0] ? Path::kFused : Path::kApart;
  char note[200];
  std::snprintf(note, sizeof note, "plain matmul + ours %.1f us, our fused GEMM %.1f us%s: %s", 1e3 * t[0], 1e3 * t[1],
                same ? "" : " (it differs)", pick == Path::kFused ? "our fused GEMM" : "ours");
  lt::remember_times(key, {{"apart", 1e3 * t[0]}, {"fused", 1e3 * t[1]}, {"pick", double(int(pick))}});
  lt::remember(key, int(pick), note);
  std::printf("%s %s: %s\n", fwd ? "forward" : "backward", key.c_str(), note);
  return pick;
}
// fc's forward with the derivative kept: out = gelu'(z), gelu_out = gelu(z), z = in . W^T + b.
template <class T>
void Model<T>::deriv_fwd(const T* in, size_t w, size_t b, T* out, T* gelu_out, int I, int O) {
  bool marks = false;  // the step's phase marks, not while timing
  auto run = [&](Path p, T* deriv, T* act) {
    if (p == Path::kFused) {
      if constexpr (std::is_same<T, bf16>::value) {
        hw("sm90::gemm (fused epilogue)");
        sm90::gemm(sm90::Epi::kBiasGeluDeriv, N, O, I, in, W(w), act, W(b), deriv, s, nullptr, keep_a, 0, pdl, store_slots);
        ++fused_launches;
      }
      if (marks) mark(kMatmul);
      return;
    }
    matmul_fwd<T, T>(blas, in, W(w), deriv, N, I, O);
    if (marks) mark(kMatmul);
    hw("bias_gelu_vec (derivative kept)");
    k::bias_gelu_vec<T, true><<<grid_for(size_t(N) * O / (16 / sizeof(T))), 256, 0, s>>>(deriv, P(b), act, N, O);
    LAUNCH_CHECK();
    ++ours_launches;
    if (marks) mark(kGelu);
  };
  const Path p = deriv_path(true, I, O, in, W(w), gelu_out, out, run, size_t(N) * O, true);
  marks = true;
  run(p, out, gelu_out);
}

// The plain input gradient (din = dout . W, no epilogue): cublasGemmEx or cuBLASLt's matmul with its
// algorithm chosen by timing (lt::Tuned)? The two libraries pick their kernels differently for the thin
// shapes (N = 384 outputs), so in the searching mode (bf16, --lt-search) both are timed once per shape,
// into scratch, and the faster is kept for the process, as the bias gradient above.
template <class T>
bool Model<T>::din_in_lt(lt::Tuned* mm, const T* dout, size_t w, int I, int O) {
  const std::string key = "din " + std::to_string(I) + "x" + std::to_string(O) + "x" + std::to_string(N);
  const int known = lt::recall(key);
  if (known >= 0) return known == 1;
  if (lt::capturing(s)) return false;  // no timing inside a capture: cuBLAS's
  T* scratch = nullptr;
  CUDA_CHECK(cudaMalloc(&scratch, size_t(N) * I * sizeof(T)));
  float best[2];
  lt::time_two(
      s, [&] { matmul_bwd_in<T>(blas, dout, W(w), scratch, N, I, O); },
      [&] { mm->run(W(w), dout, scratch, 0.f, nullptr, nullptr, lt_ws.as(), s); }, best);
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaFree(scratch));
  const bool use_lt = best[1] < best[0];
  char note[160];
  std::snprintf(note, sizeof note, "cuBLAS %.1f us, cuBLASLt searched %.1f us: %s", 1e3 * best[0], 1e3 * best[1],
                use_lt ? "cuBLASLt" : "cuBLAS");
  lt::remember(key, use_lt ? 1 : 0, note);
  lt::remember_times(key, {{"cublas", 1e3 * best[0]}, {"cublaslt", 1e3 * best[1]}, {"pick", use_lt ? 1.0 : 0.0}});
  std::printf("input gradient %s: %s\n", key.c_str(), note);
  return use_lt;
}

// The GELU's backward: din = (dout . W) * gelu'(pre) (or, --gelu-deriv, times the kept derivative itself: then
// "gelu_pre" holds gelu'(z), fc_holds_deriv). Ours apart runs k::gelu_bwd_vec (KEPT: the multiply) in place after the
// plain matmul (in linear_back, with the other elementwise work); the fused GEMM takes W transposed
// (transposed(): the weights change every step).
// colsum (the fused path only): din's column sums per 128 rows, [ceil(N / 128)][I], for linear_back to add up.
// The weight at w (O x I) transposed, as our fused dGELU GEMM reads it. Inside backward() the first call
// transposes every layer's fc2 weight in one launch (the grid's z the layer; the weights do not change during
// a backward), each into its own slot of w_t, and each later call finds its own: one launch of a few us for
// the step instead of one a layer. Outside (a check, a timing), or a weight that is no fc2: this one alone,
// into the first slot.
template <class T>
const T* Model<T>::transposed(size_t w, int I, int O) {
  hw("transpose");
  size_t l = 0;
  while (l < lay.layer.size() && lay.layer[l].fc2_w != w) ++l;
  const bool all = in_backward && l < lay.layer.size() && I == 4 * c.width && O == c.width;
  if (all && wt_ready) return w_t.as<T>() + l * wt_stride();
  const size_t in_stride = lay.layer.size() > 1 ? lay.layer[1].fc2_w - lay.layer[0].fc2_w : 0;
  for (size_t i = 1; all && i < lay.layer.size(); ++i)
    if (lay.layer[i].fc2_w - lay.layer[i - 1].fc2_w != in_stride)
      throw std::logic_error("Model::transposed: the layers' fc2 weights are not evenly spaced");
  const unsigned z = all ? unsigned(lay.layer.size()) : 1u;
  const T* from = all ? W(lay.layer[0].fc2_w) : W(w);
  k::transpose<T><<<dim3((I + 31) / 32, (O + 31) / 32, z), dim3(32, 8), 0, s>>>(from, w_t.as<T>(), O, I, in_stride,
                                                                              wt_stride());
  LAUNCH_CHECK();
  if (!all) {
    wt_ready = false;  // (the first slot held layer 0's)
    return w_t.as<T>();
  }
  wt_ready = true;
  return w_t.as<T>() + l * wt_stride();
}
// din *= gelu'(pre) in place (or, --gelu-deriv: din *= the kept derivative), after the plain matmul.
template <class T>
void Model<T>::dgelu_pass(const T* gelu_pre, T* din, int I) {
  const size_t packs = size_t(N) * I / (16 / sizeof(T));
  hw("gelu_bwd_vec");
  if (fc_holds_deriv)
    k::gelu_bwd_vec<T, true><<<grid_for(packs), 256, 0, s>>>(gelu_pre, din, packs);
  else
    k::gelu_bwd_vec<T><<<grid_for(packs), 256, 0, s>>>(gelu_pre, din, packs);
  LAUNCH_CHECK();
  ++ours_launches;
}
template <class T>
void Model<T>::dgelu_run(Path p, lt::Tuned* mm, const T* dout, size_t w, const T* gelu_pre, T* din, int I, int O,
                         float* colsum) {
  if (p == Path::kFused) {
    if constexpr (std::is_same<T, bf16>::value) {
      hw("sm90::gemm (fused epilogue)");
      sm90::gemm(fc_holds_deriv ? sm90::Epi::kMulAux : sm90::Epi::kDGelu, N, I, O, dout, transposed(w, I, O),
                 din, nullptr, const_cast<T*>(gelu_pre), s, colsum, keep_a, 0, pdl, store_slots);
      ++fused_launches;
    }
  } else if (p == Path::kApart) {
    matmul_bwd_in<T>(blas, dout, W(w), din, N, I, O);
    dgelu_pass(gelu_pre, din, I);
  } else {
    if (!mm) throw std::logic_error("Model::dgelu_run: cuBLASLt's DGELU epilogue without its matmul");
    mm->run(W(w), dout, din, 0.f, nullptr, const_cast<T*>(gelu_pre), lt_ws.as(), s);
  }
}
template <class T>
Path Model<T>::dgelu_path(lt::Tuned* mm, const T* dout, size_t w, const T* gelu_pre, T* din, int I, int O) {
  constexpr int V = 16 / sizeof(T);
  const bool apart =
      lt_search && std::is_same<T, bf16>::value && I % V == 0 && aligned16(din) && aligned16(gelu_pre);
  const bool fused = fused_fits(N, I, O, dout, w_t.as(), din, gelu_pre);
  if (force_ours) return apart ? Path::kApart : Path::kEpilogue;
  if (force_fused && fused) return Path::kFused;
  if (!apart && !fused) return Path::kEpilogue;
  const std::string key = "dGELU " + std::to_string(I) + "x" + std::to_string(O) + "x" + std::to_string(N);
  const int known = lt::recall(key);  // as in fwd_path
  if (known >= 0) return (known == 1 && !apart) || (known == 2 && !fused) ? Path::kEpilogue : Path(known);
  if (lt::capturing(s)) return Path::kEpilogue;
  const size_t n = size_t(N) * I;
  T* out[3] = {};
  const bool avail[3] = {true, apart, fused};
  for (int p = 0; p < 3; ++p)
    if (avail[p]) {
      CUDA_CHECK(cudaMalloc(&out[p], n * sizeof(T)));
      poison(out[p], n * sizeof(T), s);  // as in fwd_path
    }
  // The fused path is timed with the column sums it hands back in the step (into the partials buffer, what
  // was queued there finished first).
  float* part = partials_now();
  auto run = [&](Path p) { dgelu_run(p, mm, dout, w, gelu_pre, out[int(p)], I, O, part); };
  auto same = [&](Path p) { return matches_path(out[int(p)], out[0], n, key); };
  const Path pick = pick_path(s, "backward", key, avail, run, same);
  for (T* q : out)
    if (q) CUDA_CHECK(cudaFree(q));
  return pick;
}

// The bias gradient: db += dout's column sums (db zeroed with the gradients), in two passes: per-chunk
// partial sums of 32 columns each, then one sum per column over the chunks (no atomics: the same bits
// every run).
template <class T>
void Model<T>::bias_grad(const T* dout, size_t b, int O) {
  const int chunks = k::col_chunks(N);
  hw("bias_partials"), hw("colsum_finish");
  float* part = partials_now();
  k::bias_partials<T><<<dim3((O + 31) / 32, chunks), dim3(32, 8), 0, s>>>(dout, part, N, O);
  LAUNCH_CHECK();
  k::colsum_finish<<<grid_for(size_t(O)), 256, 0, s>>>(part, chunks, 1, O, G(b), nullptr);
  LAUNCH_CHECK();
}

// din = dout . W (with gelu_pre: times gelu'(gelu_pre), the backward of the GELU that fed this
// layer), dW += dout^T . in, db = column sums of dout (unless bias_done: the LayerNorm backward that
// wrote dout added them up as it went, or our fused dGELU GEMM of the layer after this one did, through
// din_bias below; dW is then a plain matmul, cuBLASLt's without an epilogue).
// din_bias: where our fused dGELU GEMM computes din, its column sums are added into din_bias too (the
// previous layer's bias gradient, so that its weight gradient can skip the BGRADB epilogue); returns
// whether they were.
template <class T>
bool Model<T>::linear_back(const T* in, size_t w, size_t b, const T* dout, T* din, int I, int O, const T* gelu_pre,
                           bool bias_done, float* din_bias) {
  if (on_cudnn() && dnn_linear_back(in, w, b, dout, din, I, O, gelu_pre)) {  // nn/backend_cudnn.cuh
    mark(kMatmul);
    return false;
  }
  if (on_cudnn()) fell_back.insert("linear backward (cuBLAS/cuBLASLt and ours)");
  bool din_done = false, dw_done = false, dgelu_ours = false, din_bias_done = false;
  // The weight gradient's cuBLASLt matmul (null: cuBLAS's plain one and the bias apart, below), chosen
  // first: in a captured step (--dw-stream on, nn/dw_stream.h) it forks to the side stream here, before
  // din is enqueued, so that the two run side by side.
  lt::Tuned* mw = nullptr;
  {
    lt::Spec sp;
    sp.ta = CUBLAS_OP_N, sp.tb = CUBLAS_OP_T, sp.m = I, sp.n = O, sp.k = N, sp.lda = I, sp.ldb = O, sp.ldd = I;
    sp.epilogue = bias_done ? CUBLASLT_EPILOGUE_DEFAULT : CUBLASLT_EPILOGUE_BGRADB;
    // A preference on the algorithms' own CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME: the H200 trace of 763c323
    // still had 26 splitKreduce_kernel calls a step with it, after the nvjet kernels it let through.
    if (!dw_reduce_kernel) sp.reductions = CUBLASLT_REDUCTION_SCHEME_INPLACE;
    sp.sm_target = dw_sm_target();
    mw = lt_get(sp, CUDA_R_32F);
    // With --dw-reduce-kernel off or --dw-sm-share below 1 the weight gradient stays cuBLASLt's, its bias
    // gradient in the epilogue, untimed against the bias apart: that path's matmul is cuBLAS's plain one,
    // which takes neither the reduction preference nor the SM target, so there the flags would do nothing.
    const bool dw_default = dw_reduce_kernel && sp.sm_target == 0;
    if (mw && !bias_done && dw_default && !bgrad_in_epilogue(mw, in, dout, I, O)) mw = nullptr;  // apart is faster
  }
  const bool side = mw && dw_side();
  if (side) dws.fork(s);
  before_write(din);  // din's buffer held an earlier d(out) that a dW on the side stream may still read
  if (gelu_pre) {
    lt::Tuned* mm = nullptr;
    Path p = Path::kEpilogue;
    bool have = false;
    if (fc_holds_deriv) {     // the kept derivative (fc's forward wrote it): our two ways (deriv_path)
      float* part = nullptr;  // (timed with the column sums, into the partials buffer, as dgelu_path does)
      auto run = [&](Path q, T* o, T*) { dgelu_run(q, nullptr, dout, w, gelu_pre, o, I, O, part); };
      p = deriv_path(false, I, O, dout, w_t.as(), din, gelu_pre, run, size_t(N) * I, false,
                     [&] { part = partials_now(); }),
      have = true;
    } else {
      lt::Spec sp;
      sp.ta = CUBLAS_OP_N, sp.tb = CUBLAS_OP_N, sp.m = I, sp.n = N, sp.k = O, sp.lda = I, sp.ldb = O, sp.ldd = I;
      sp.epilogue = CUBLASLT_EPILOGUE_DGELU, sp.aux_ld = I;
      if ((mm = lt_get(sp, Types<T>::blas))) p = dgelu_path(mm, dout, w, gelu_pre, din, I, O), have = true;
    }
    if (have) {
      if (p == Path::kApart) {  // the GELU's backward in our pass (dgelu_pass), below, after the weight gradient
        matmul_bwd_in<T>(blas, dout, W(w), din, N, I, O), dgelu_ours = true;
      } else if (p == Path::kFused && din_bias) {  // with din's column sums: din_bias += their partials' sums
        const int chunks = (N + sm90::kColsumRows - 1) / sm90::kColsumRows;  // (queued inside backward())
        float* part = finishing_later ? finish_slice(size_t(chunks) * I) : partial.as<float>();
        dgelu_run(p, mm, dout, w, gelu_pre, din, I, O, part);
        if (finishing_later) {
          finishes.push(part, chunks, I, 1, din_bias);
        } else {
          hw("ln_partials_finish");
          k::ln_partials_finish<<<(I + 31) / 32, dim3(32, k::kLnFinishRows), 0, s>>>(part, chunks, I, 1, din_bias,
                                                                                     nullptr, nullptr);
          LAUNCH_CHECK();
        }
        din_bias_done = true;
      } else {
        dgelu_run(p, mm, dout, w, gelu_pre, din, I, O);
      }
      din_done = true;
    }
  }
  if (!din_done) {  // the plain input gradient: cuBLAS's, or (bf16, --lt-search) cuBLASLt's where timed faster
    lt::Spec sp;
    sp.ta = CUBLAS_OP_N, sp.tb = CUBLAS_OP_N, sp.m = I, sp.n = N, sp.k = O, sp.lda = I, sp.ldb = O, sp.ldd = I;
    lt::Tuned* mm = lt_search && std::is_same<T, bf16>::value ? lt_get(sp, Types<T>::blas) : nullptr;
    if (mm && din_in_lt(mm, dout, w, I, O))
      mm->run(W(w), dout, din, 0.f, nullptr, nullptr, lt_ws.as(), s);
    else
      matmul_bwd_in<T>(blas, dout, W(w), din, N, I, O);
  }
  if (mw) {
    // dW accumulates (beta 1) into the zeroed gradients; the bias gradient is written (each bias
    // belongs to exactly one layer, so nothing else adds to it).
    if (side) {
      mw->run(in, dout, G(w), 1.f, bias_done ? nullptr : G(b), nullptr, lt_ws_dw.as(), dws.side());
      dws.reads(in, dout);
      ++dws.launches;
    } else {
      mw->run(in, dout, G(w), 1.f, bias_done ? nullptr : G(b), nullptr, lt_ws.as(), s);
    }
    dw_done = true;
  }
  if (!dw_done) matmul_bwd_w<T>(blas, in, dout, G(w), N, I, O);
  mark(kMatmul);
  if (dgelu_ours) {
    dgelu_pass(gelu_pre, din, I);
    mark(kGelu);
  }
  if (gelu_pre && !din_done) {
    hw("gelu_bwd");
    k::gelu_bwd<T><<<grid_for(size_t(N) * I), 256, 0, s>>>(gelu_pre, din, din, size_t(N) * I);
    LAUNCH_CHECK();
    mark(kGelu);
  }
  if (!dw_done && !bias_done) {
    bias_grad(dout, b, O);
    mark(kResidual);
  }
  return din_bias_done;
}
