// common/cudnn_graph.h: a small helper over cuDNN's backend (graph) API, called directly (no
// cudnn-frontend). Used by day40 (fusion) and day50 (attention).
//
// The backend API has one pattern for everything: create a descriptor of some type, set its
// attributes one by one (each with an exact attribute type: dimensions are INT64, a flag is a
// C++ bool), finalize. A computation is a graph of operation descriptors whose edges are tensor
// descriptors (by unique id); cuDNN's heuristics return engine configurations for the whole graph;
// an execution plan is one configuration finalized (this is where support is decided and where
// runtime-compiled engines are compiled: 0.1 s to 1 s); a variant pack binds device pointers to the
// tensors' ids; execute runs the plan.
//
//   cg::Graph g(handle, "sigmoid(a + b*c)");
//   g.tensor("a", dims, strides, CUDNN_DATA_FLOAT);  ... g.virt("t", dims, strides);
//   g.pointwise(CUDNN_POINTWISE_MUL, "b", "c", "t");  ...
//   std::string why = g.build();          // "" on success, else why no engine could run it
//   g.execute({{"a", a}, {"b", b}, {"c", c}, {"y", y}}, workspace, stream);
//
// Errors: setting an attribute wrongly is a bug in the program and exits with cuDNN's message;
// a graph that no engine supports is an answer (build() returns the reason) so a lesson can
// report it and go on.
#pragma once
#include <cudnn.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "check.cuh"

namespace cg {

inline std::string status_text(cudnnStatus_t st) {
  return std::string(cudnnGetErrorString(st)) + ": " + cudnn_last_error();
}

// Row-major ("packed") strides for dims, and the strides of an NHWC tensor whose dims are given
// in the N, C, H, W order cuDNN always uses.
inline std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = int(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}
inline std::vector<int64_t> nhwc_strides(int64_t n, int64_t c, int64_t h, int64_t w) {
  (void)n;
  return {h * w * c, 1, w * c, c};
}

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t type) { CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* value) {
    const cudnnStatus_t st = cudnnBackendSetAttribute(d_, name, type, count, value);
    if (st != CUDNN_STATUS_SUCCESS) {
      std::fprintf(stderr, "error: cudnnBackendSetAttribute(attribute %d, type %d) failed: %s\n", int(name), int(type),
                   status_text(st).c_str());
      std::exit(1);
    }
    return *this;
  }
  Desc& i64(cudnnBackendAttributeName_t n, int64_t v) { return set(n, CUDNN_TYPE_INT64, 1, &v); }
  Desc& i64s(cudnnBackendAttributeName_t n, const std::vector<int64_t>& v) {
    return set(n, CUDNN_TYPE_INT64, int64_t(v.size()), v.data());
  }
  Desc& dtype(cudnnBackendAttributeName_t n, cudnnDataType_t v) { return set(n, CUDNN_TYPE_DATA_TYPE, 1, &v); }
  Desc& boolean(cudnnBackendAttributeName_t n, bool v) { return set(n, CUDNN_TYPE_BOOLEAN, 1, &v); }
  Desc& f32(cudnnBackendAttributeName_t n, float v) { return set(n, CUDNN_TYPE_FLOAT, 1, &v); }
  Desc& desc(cudnnBackendAttributeName_t n, const Desc& v) {
    cudnnBackendDescriptor_t p = v.get();
    return set(n, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
  }
  Desc& handle(cudnnBackendAttributeName_t n, cudnnHandle_t h) { return set(n, CUDNN_TYPE_HANDLE, 1, &h); }

  cudnnStatus_t finalize() { return cudnnBackendFinalize(d_); }
  // For descriptors whose finalization can only fail through a bug (tensors, op descriptors).
  Desc& finalized(const std::string& what) {
    const cudnnStatus_t st = finalize();
    if (st != CUDNN_STATUS_SUCCESS) {
      std::fprintf(stderr, "error: finalizing %s failed: %s\n", what.c_str(), status_text(st).c_str());
      std::exit(1);
    }
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

inline const char* heur_mode_name(cudnnBackendHeurMode_t m) {
  return m == CUDNN_HEUR_MODE_A          ? "A"
         : m == CUDNN_HEUR_MODE_B        ? "B"
         : m == CUDNN_HEUR_MODE_FALLBACK ? "FALLBACK"
                                         : "other";
}

// What the heuristics offered, and what became of each offer.
struct Engine {
  int64_t global_index = -1;
  std::string heur_mode;
  int rank = -1;                  // position in that mode's list
  bool runtime_compiled = false;  // behaviour note RUNTIME_COMPILATION
  bool tensor_core = false, down_convert = false;
  std::vector<std::string> notes;  // numerical and behaviour notes, as text
  int knobs = 0;                   // knob choices in this configuration
  bool tried = false;
  std::string status;   // "" = the plan finalized
  double build_ms = 0;  // plan finalization time (includes runtime compilation)
  int64_t workspace = 0;
  bool chosen = false;
};

struct BuildOptions {
  std::vector<cudnnBackendHeurMode_t> modes = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  bool explore = false;  // finalize up to `explore_max` configurations per mode, to report them all
  int explore_max = 6;
  std::function<bool(const Engine&)> accept;  // optional: refuse some engines (e.g. TF32 for an fp32 lesson)
};

class Graph {
 public:
  struct Tensor {
    int64_t uid;
    std::string name;
    std::vector<int64_t> dims, strides;
    cudnnDataType_t type;
    bool is_virtual, by_value;
    Desc d;
  };

  Graph(cudnnHandle_t h, std::string name) : h_(h), name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  // A tensor in device memory (16-byte aligned, as our allocations are).
  const Tensor& tensor(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> strides,
                       cudnnDataType_t type) {
    return add_tensor(name, std::move(dims), std::move(strides), type, false, false);
  }
  // An intermediate that exists only inside the fused kernel: it never touches memory.
  const Tensor& virt(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> strides,
                     cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return add_tensor(name, std::move(dims), std::move(strides), type, true, false);
  }
  // A virtual tensor with a reordering mode: cuDNN's attention engines expect the probabilities
  // and the dQ accumulator marked CUDNN_TENSOR_REORDERING_F16x16 (the tensor-core fragment order).
  const Tensor& virt_reordered(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> strides,
                               cudnnDataType_t type, cudnnBackendTensorReordering_t reorder) {
    return add_tensor(name, std::move(dims), std::move(strides), type, true, false, reorder);
  }
  // Same for a tensor in device memory.
  const Tensor& tensor_reordered(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> strides,
                                 cudnnDataType_t type, cudnnBackendTensorReordering_t reorder) {
    return add_tensor(name, std::move(dims), std::move(strides), type, false, false, reorder);
  }
  // A scalar passed by value from the host at execution (all-ones dims and strides of the given rank).
  const Tensor& scalar(const std::string& name, int rank, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return add_tensor(name, std::vector<int64_t>(rank, 1), std::vector<int64_t>(rank, 1), type, false, true);
  }
  const Tensor& get(const std::string& name) const {
    for (const auto& t : tensors_)
      if (t.name == name) return t;
    std::fprintf(stderr, "error: graph '%s' has no tensor '%s'\n", name_.c_str(), name.c_str());
    std::exit(1);
  }

  // y = mode(x) or y = mode(x, b), computed in `prec`.
  void pointwise(cudnnPointwiseMode_t mode, const std::string& x, const std::string& b, const std::string& y,
                 cudnnDataType_t prec = CUDNN_DATA_FLOAT) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, prec)
        .finalized("pointwise");
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw).desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, get(x).d);
    if (!b.empty()) op.desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, get(b).d);
    op.desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, get(y).d).finalized("pointwise op");
    aux_.push_back(std::move(pw));
    ops_.push_back(std::move(op));
    op_names_.push_back("pointwise");
  }

  // y = the index of each element along `axis` (CUDNN_POINTWISE_GEN_INDEX): with two of these and
  // CMP_GE, a graph builds a causal mask without reading any memory.
  void gen_index(const std::string& x, const std::string& y, int64_t axis) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnPointwiseMode_t mode = CUDNN_POINTWISE_GEN_INDEX;
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT)
        .i64(CUDNN_ATTR_POINTWISE_AXIS, axis)
        .finalized("gen_index");
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, get(x).d)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, get(y).d)
        .finalized("gen_index op");
    aux_.push_back(std::move(pw));
    ops_.push_back(std::move(op));
    op_names_.push_back("gen_index");
  }
  // y = t ? x : b (CUDNN_POINTWISE_BINARY_SELECT; t is a boolean tensor).
  void select(const std::string& x, const std::string& b, const std::string& t, const std::string& y) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnPointwiseMode_t mode = CUDNN_POINTWISE_BINARY_SELECT;
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT)
        .finalized("select");
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, get(x).d)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, get(b).d)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, get(t).d)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, get(y).d)
        .finalized("select op");
    aux_.push_back(std::move(pw));
    ops_.push_back(std::move(op));
    op_names_.push_back("select");
  }
  // y = x viewed with y's dims and strides (a transpose when the strides are swapped); no copy
  // when both are virtual.
  void reshape(const std::string& x, const std::string& y) {
    Desc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, get(x).d)
        .desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, get(y).d)
        .finalized("reshape op");
    ops_.push_back(std::move(op));
    aux_.emplace_back();
    op_names_.push_back("reshape");
  }

  // 2-D cross-correlation y = conv(x, w), computed in `comp`.
  void conv_fwd(const std::string& x, const std::string& w, const std::string& y, int64_t pad, int64_t stride,
                int64_t dil, cudnnDataType_t comp = CUDNN_DATA_FLOAT) {
    Desc c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    c.i64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 2)
        .dtype(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, comp)
        .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
        .i64s(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {pad, pad})
        .i64s(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {pad, pad})
        .i64s(CUDNN_ATTR_CONVOLUTION_DILATIONS, {dil, dil})
        .i64s(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {stride, stride})
        .finalized("convolution");
    Desc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, get(x).d)
        .desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, get(w).d)
        .desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, get(y).d)
        .desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, c)
        .f32(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, 1.f)
        .f32(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, 0.f)
        .finalized("convolution op");
    aux_.push_back(std::move(c));
    ops_.push_back(std::move(op));
    op_names_.push_back("conv_fwd");
  }

  // c = a · b (batched: a [.., M, K], b [.., K, N], c [.., M, N]).
  void matmul(const std::string& a, const std::string& b, const std::string& c,
              cudnnDataType_t comp = CUDNN_DATA_FLOAT) {
    Desc m(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    m.dtype(CUDNN_ATTR_MATMUL_COMP_TYPE, comp).finalized("matmul");
    Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, get(a).d)
        .desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, get(b).d)
        .desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, get(c).d)
        .desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, m)
        .finalized("matmul op");
    aux_.push_back(std::move(m));
    ops_.push_back(std::move(op));
    op_names_.push_back("matmul");
  }

  // y = reduce(x) over the axes where y's dims are 1.
  void reduction(cudnnReduceTensorOp_t red, const std::string& x, const std::string& y,
                 cudnnDataType_t comp = CUDNN_DATA_FLOAT) {
    Desc r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red)
        .dtype(CUDNN_ATTR_REDUCTION_COMP_TYPE, comp)
        .finalized("reduction");
    Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, get(x).d)
        .desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, get(y).d)
        .desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r)
        .finalized("reduction op");
    aux_.push_back(std::move(r));
    ops_.push_back(std::move(op));
    op_names_.push_back("reduction");
  }

  // A raw operation descriptor built by the caller (for ops this helper does not wrap).
  void add_op(Desc op, Desc aux, const std::string& what) {
    ops_.push_back(std::move(op));
    aux_.push_back(std::move(aux));
    op_names_.push_back(what);
  }

  int op_count() const { return int(ops_.size()); }

  // The operation graph, the heuristics' configurations (per mode), and a plan from the first
  // configuration that finalizes and that `accept` allows. Returns "" or why nothing was built.
  std::string build(const BuildOptions& opt = BuildOptions()) {
    graph_ = Desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    std::vector<cudnnBackendDescriptor_t> ops;
    for (auto& o : ops_) ops.push_back(o.get());
    graph_.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops.size()), ops.data());
    // Without the handle, the heuristics may pick engines built for another GPU (seen: failures at
    // execute with NOT_SUPPORTED_ARCH_MISMATCH). The attribute is marked deprecated in 9.x headers.
    graph_.handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, h_);
    cudnnStatus_t st = graph_.finalize();
    if (st != CUDNN_STATUS_SUCCESS) return "the operation graph was refused: " + status_text(st);
    std::string last_refusal;
    int offered = 0, refused_by_rule = 0;
    for (cudnnBackendHeurMode_t mode : opt.modes) {
      std::vector<Desc> cfgs = heuristics(mode, &last_refusal);
      int tried_here = 0;
      for (size_t i = 0; i < cfgs.size(); ++i) {
        Engine e = describe(cfgs[i], mode, int(i));
        ++offered;
        const bool want_plan = !plan_ready_ || (opt.explore && tried_here < opt.explore_max);
        if (!want_plan) {
          engines_.push_back(e);
          continue;
        }
        if (opt.accept && !opt.accept(e)) {
          e.status = "refused by this program (see its accept rule)";
          ++refused_by_rule;
          engines_.push_back(e);
          continue;
        }
        ++tried_here;
        e.tried = true;
        Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        plan.handle(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, h_).desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[i]);
        const auto t0 = std::chrono::steady_clock::now();
        st = plan.finalize();
        e.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (st != CUDNN_STATUS_SUCCESS) {
          e.status = status_text(st);
          last_refusal = e.status;
        } else {
          int64_t ws = 0, got = 0;
          CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                               1, &got, &ws));
          e.workspace = ws;
          if (!plan_ready_) {
            plan_ = std::move(plan);
            plan_ready_ = true;
            e.chosen = true;
            chosen_ = int(engines_.size());
          }
        }
        engines_.push_back(e);
      }
    }
    if (plan_ready_) return "";
    if (offered > 0 && refused_by_rule == offered)
      return "all " + std::to_string(offered) + " configurations offered were refused by this program's rule";
    return engines_.empty() ? "no engine configuration offered (" + last_refusal + ")"
                            : "no offered configuration finalized (last: " + last_refusal + ")";
  }

  bool ready() const { return plan_ready_; }
  const std::vector<Engine>& engines() const { return engines_; }
  const Engine& chosen() const { return engines_.at(size_t(chosen_)); }
  int64_t workspace() const { return plan_ready_ ? chosen().workspace : 0; }

  // Binds device pointers (and host pointers for by-value scalars) to the non-virtual tensors
  // by name, and runs the plan. The variant pack for a pointer set is built once and reused, so
  // a timing loop measures the execution, not descriptor set-up.
  void execute(const std::vector<std::pair<std::string, void*>>& ptrs, void* workspace, cudaStream_t stream = 0) {
    if (!plan_ready_) {
      std::fprintf(stderr, "error: graph '%s' executed without a plan\n", name_.c_str());
      std::exit(1);
    }
    std::vector<int64_t> uids;
    std::vector<void*> data;
    for (const auto& p : ptrs) {
      const Tensor& t = get(p.first);
      if (t.is_virtual) {
        std::fprintf(stderr, "error: graph '%s': '%s' is virtual and takes no pointer\n", name_.c_str(),
                     p.first.c_str());
        std::exit(1);
      }
      uids.push_back(t.uid);
      data.push_back(p.second);
    }
    std::string key(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(void*));
    key.append(reinterpret_cast<const char*>(&workspace), sizeof workspace);
    auto it = packs_.find(key);
    if (it == packs_.end()) {
      Desc vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      vp.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
          .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(data.size()), data.data())
          .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
          .finalized("variant pack of " + name_);
      it = packs_.emplace(key, std::move(vp)).first;
    }
    CUDNN_CHECK(cudnnSetStream(h_, stream));
    const cudnnStatus_t st = cudnnBackendExecute(h_, plan_.get(), it->second.get());
    if (st != CUDNN_STATUS_SUCCESS) {
      std::fprintf(stderr, "error: executing graph '%s' failed: %s\n", name_.c_str(), status_text(st).c_str());
      std::exit(1);
    }
  }

  // One line per engine the heuristics offered (what day40 prints).
  void print_engines(FILE* f = stdout) const {
    std::fprintf(f, "  %-4s %-8s %5s %6s %-6s %-44s %9s %9s  %s\n", "", "mode", "rank", "engine", "kind", "notes",
                 "build ms", "ws KiB", "plan");
    for (const Engine& e : engines_) {
      std::string notes;
      for (const auto& n : e.notes) notes += (notes.empty() ? "" : ",") + n;
      std::fprintf(f, "  %-4s %-8s %5d %6lld %-6s %-44s %9s %9s  %s\n", e.chosen ? "=>" : "", e.heur_mode.c_str(),
                   e.rank, (long long)e.global_index, e.runtime_compiled ? "RTC" : "pre", notes.substr(0, 44).c_str(),
                   e.tried ? fmt(e.build_ms).c_str() : "-",
                   e.tried && e.status.empty() ? fmt(e.workspace / 1024.0).c_str() : "-",
                   !e.tried           ? (e.status.empty() ? "not tried" : e.status.c_str())
                   : e.status.empty() ? "finalized"
                                      : e.status.c_str());
    }
  }

 private:
  const Tensor& add_tensor(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> strides,
                           cudnnDataType_t type, bool is_virtual, bool by_value,
                           cudnnBackendTensorReordering_t reorder = CUDNN_TENSOR_REORDERING_NONE) {
    for (const auto& t : tensors_)
      if (t.name == name) {
        std::fprintf(stderr, "error: graph '%s' already has a tensor '%s'\n", name_.c_str(), name.c_str());
        std::exit(1);
      }
    // Every tensor gets its own id: cuDNN does not reject duplicates, it silently aliases them.
    const int64_t uid = int64_t(tensors_.size()) + 1;
    Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    d.dtype(CUDNN_ATTR_TENSOR_DATA_TYPE, type)
        .i64s(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
        .i64s(CUDNN_ATTR_TENSOR_STRIDES, strides)
        .i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
        .i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
        .boolean(CUDNN_ATTR_TENSOR_IS_VIRTUAL, is_virtual);
    if (by_value) d.boolean(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
    if (reorder != CUDNN_TENSOR_REORDERING_NONE)
      d.set(CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, &reorder);
    d.finalized("tensor " + name);
    tensors_.push_back(
        Tensor{uid, name, std::move(dims), std::move(strides), type, is_virtual, by_value, std::move(d)});
    return tensors_.back();
  }

  std::vector<Desc> heuristics(cudnnBackendHeurMode_t mode, std::string* why) {
    std::vector<Desc> cfgs;
    Desc h(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    h.desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph_)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    cudnnStatus_t st = h.finalize();
    if (st != CUDNN_STATUS_SUCCESS) {
      *why = std::string("heuristics mode ") + heur_mode_name(mode) + ": " + status_text(st);
      return cfgs;
    }
    int64_t count = 0;
    st = cudnnBackendGetAttribute(h.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                  nullptr);
    if (st != CUDNN_STATUS_SUCCESS || count == 0) {
      *why =
          std::string("heuristics mode ") + heur_mode_name(mode) + " offered no configuration: " + cudnn_last_error();
      return cfgs;
    }
    std::vector<cudnnBackendDescriptor_t> raw(size_t(count), nullptr);
    for (int64_t i = 0; i < count; ++i) {
      cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw[size_t(i)] = cfgs.back().get();
    }
    int64_t got = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(h.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                         &got, raw.data()));
    cfgs.resize(size_t(got));
    return cfgs;
  }

  static Engine describe(const Desc& cfg, cudnnBackendHeurMode_t mode, int rank) {
    Engine e;
    e.heur_mode = heur_mode_name(mode);
    e.rank = rank;
    Desc eng(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendDescriptor_t ep = eng.get();
    int64_t got = 0;
    if (cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &ep) !=
        CUDNN_STATUS_SUCCESS)
      return e;
    cudnnBackendGetAttribute(ep, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &e.global_index);
    cudnnBackendBehaviorNote_t beh[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    if (cudnnBackendGetAttribute(ep, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                 CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &got, beh) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < got; ++i) {
        if (beh[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
          e.runtime_compiled = true;
        else if (beh[i] == CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API)
          e.notes.push_back("cuda-graph");
        else if (beh[i] == CUDNN_BEHAVIOR_NOTE_CUBLASLT_DEPENDENCY)
          e.notes.push_back("cublasLt");
      }
    cudnnBackendNumericalNote_t num[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    if (cudnnBackendGetAttribute(ep, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &got, num) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < got; ++i) {
        static const char* names[] = {"tensor-core", "down-convert",     "reduced-prec-reduction",
                                      "fft",         "nondeterministic", "winograd",
                                      "wino4x4",     "wino6x6",          "wino13x13",
                                      "strict-nan"};
        if (num[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) e.tensor_core = true;
        if (num[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) e.down_convert = true;
        if (int(num[i]) >= 0 && int(num[i]) < 10) e.notes.push_back(names[int(num[i])]);
      }
    int64_t knobs = 0;
    if (cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &knobs,
                                 nullptr) == CUDNN_STATUS_SUCCESS)
      e.knobs = int(knobs);
    return e;
  }

  static std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
  }

  cudnnHandle_t h_;
  std::string name_;
  std::deque<Tensor> tensors_;  // a deque: references handed out stay valid
  std::vector<Desc> ops_, aux_;
  std::vector<std::string> op_names_;
  Desc graph_, plan_;
  bool plan_ready_ = false;
  int chosen_ = -1;
  std::vector<Engine> engines_;
  std::map<std::string, Desc> packs_;
};

// Plans are expensive to build (runtime compilation) and cheap to run: keep one per shape.
class PlanCache {
 public:
  // Returns the graph cached under `key`, building it with `make` the first time. A graph that
  // could not be built is cached too (with its reason), so the reason is not recomputed.
  Graph& get(const std::string& key, const std::function<std::unique_ptr<Graph>()>& make, std::string* why = nullptr) {
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      Entry e;
      e.g = make();
      e.why = e.g->build(opt);
      it = cache_.emplace(key, std::move(e)).first;
      ++builds_;
    }
    if (why) *why = it->second.why;
    return *it->second.g;
  }
  int builds() const { return builds_; }
  BuildOptions opt;

 private:
  struct Entry {
    std::unique_ptr<Graph> g;
    std::string why;
  };
  std::map<std::string, Entry> cache_;
  int builds_ = 0;
};

}  // namespace cg
