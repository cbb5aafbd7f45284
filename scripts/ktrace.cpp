// scripts/ktrace.cpp: a kernel tracer for any CUDA program, loaded by the driver (CUDA_INJECTION64_PATH)
// without changing or rebuilding the program. scripts/trace_kernels.py runs it and reads what it writes.
//
// Why it exists. A CUDA graph replays a step's kernels with no host code between them, so events placed
// between phases cannot see inside it, and a phase timed alone runs without the other stream's kernels
// beside it. CUPTI's activity API (part of the CUDA toolkit) records, for every kernel the GPU ran, its
// start and end on the GPU's clock and its stream, graph launches included: that is the step as it ran.
//
// What it records: every kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: kernels are not serialised, so
// the trace sees two streams overlap), memset and memcpy, as CSV lines "start_ns,duration_ns,stream,
// graph,name" into the file KTRACE_OUT names (default ktrace.csv), written when the program exits. graph
// is the id of the CUDA graph a kernel was launched from (0: launched on its own). Names are as the
// compiler mangled them; trace_kernels.py demangles and groups them.
//
// Build (the top-level Makefile does): g++ -shared -fPIC -I$CUDA/include scripts/ktrace.cpp -lcupti
//
// The record layouts are those of the CUPTI it is compiled against (CUDA 13.0's: Kernel10, Memcpy6,
// Memset4); a CUPTI of another version at run time may lay records out otherwise, so the tracer then
// records nothing and says so rather than misread them.
#include <cupti.h>
#include <cupti_version.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#if !defined(CUPTI_API_VERSION) || CUPTI_API_VERSION < 130000
#error "scripts/ktrace.cpp reads CUPTI 13's activity records: build it with the CUDA 13 toolkit"
#endif

namespace {
struct Rec {
  unsigned long long start, end;
  unsigned stream, graph;
  std::string name;
};
// Never freed: the records are written by an atexit handler, and a function-local static built after
// that handler was registered would be destroyed before it runs.
std::vector<Rec>& recs() {
  static std::vector<Rec>* r = new std::vector<Rec>();
  return *r;
}
std::mutex& mu() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::atomic<bool> g_failed{false};  // CUPTI's buffer thread and the exit path both set it

void report(const char* what, CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "ktrace: %s failed: %s\n", what, s ? s : "?");
  g_failed = true;
}

constexpr size_t kBufferBytes = size_t(8) << 20;
void CUPTIAPI buffer_requested(uint8_t** buf, size_t* size, size_t* max_records) {
  *buf = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buf ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}
// A kernel's name as CUPTI holds it, checked: printable ASCII (mangled names are), else the record is
// counted as broken (the tracer then says "incomplete": a name read after its memory was freed).
std::string name_of(const char* p) {
  if (!p) return "?";
  std::string n(p);
  for (char c : n)
    if (c < 0x20 || c > 0x7e) return g_failed = true, std::string("?");
  return n;
}
void add(unsigned long long start, unsigned long long end, unsigned stream, unsigned graph, std::string name) {
  if (end < start) {  // CUPTI reports an end of 0 when it could not time a record
    g_failed = true;
    return;
  }
  recs().push_back({start, end, stream, graph, std::move(name)});
}
void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buf, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(mu());
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    // The record types of this toolkit's CUPTI (cupti_activity.h), which the driver fills in.
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      add(k->start, k->end, k->streamId, k->graphId, name_of(k->name));
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
      add(m->start, m->end, m->streamId, m->graphId, "[memset]");
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
      add(m->start, m->end, m->streamId, m->graphId, "[memcpy]");
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
    std::fprintf(stderr, "ktrace: %zu records dropped\n", dropped), g_failed = true;
  std::free(buf);
}

// The records still in CUPTI's buffers are copied out while the context lives: the kernels' names belong
// to it (a flush at exit, after the runtime has torn the context down, read freed names on the H200).
void CUPTIAPI on_resource(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void*) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    const CUptiResult r = cuptiActivityFlushAll(1);
    if (r != CUPTI_SUCCESS) report("cuptiActivityFlushAll", r);
  }
}

void write_out() {
  const CUptiResult r = cuptiActivityFlushAll(1);
  if (r != CUPTI_SUCCESS) report("cuptiActivityFlushAll", r);
  const char* path = std::getenv("KTRACE_OUT");
  if (!path || !*path) path = "ktrace.csv";
  std::lock_guard<std::mutex> lock(mu());
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "ktrace: cannot write %s\n", path);
    return;
  }
  std::fprintf(f, "start_ns,duration_ns,stream,graph,name\n");
  for (const Rec& x : recs()) {
    std::string n = x.name;
    for (char& c : n)
      if (c == ',' || c == '"' || c == '\n') c = ';';  // one field, whatever the name holds
    std::fprintf(f, "%llu,%llu,%u,%u,%s\n", x.start, x.end - x.start, x.stream, x.graph, n.c_str());
  }
  // The last line says whether every record arrived: the reader refuses a trace without it.
  std::fprintf(f, "# ktrace %s %zu records\n", g_failed.load() ? "incomplete" : "complete", recs().size());
  std::fclose(f);
}
}  // namespace

// The driver calls this once, when the program initialises CUDA.
extern "C" int InitializeInjection() {
  recs(), mu();  // built before the exit handler is registered (see recs)
  std::atexit(write_out);
  uint32_t version = 0;
  CUptiResult r = cuptiGetVersion(&version);
  if (r != CUPTI_SUCCESS || version / 100 != CUPTI_API_VERSION / 100) {
    std::fprintf(stderr, "ktrace: CUPTI's API version here is %u, the tracer was built for %d: not tracing\n",
                 unsigned(version), CUPTI_API_VERSION);
    g_failed = true;
    return 1;
  }
  r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) return report("cuptiActivityRegisterCallbacks", r), 1;
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET,
                               CUPTI_ACTIVITY_KIND_MEMCPY})
    if ((r = cuptiActivityEnable(k)) != CUPTI_SUCCESS) report("cuptiActivityEnable", r);
  CUpti_SubscriberHandle sub;
  if ((r = cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(on_resource), nullptr)) != CUPTI_SUCCESS ||
      (r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)) !=
          CUPTI_SUCCESS)
    report("cuptiSubscribe", r);
  // Buffers handed over every 100 ms as well, so that little is left for the last flush.
  if ((r = cuptiActivityFlushPeriod(100)) != CUPTI_SUCCESS) report("cuptiActivityFlushPeriod", r);
  return 1;
}
