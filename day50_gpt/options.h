// day50_gpt/options.h: gpt's command line: every flag into one Options struct, and every rule between
// the flags, judged before any GPU work (host-only C++: builds with g++, no CUDA headers, so a fuzz
// test can call gpt::parse_options in a child process). Bad input: one line on stderr, exit 2.
//
// Paths are judged here too: outputs (--save, --log, --dump, --id-file's folder, --json) must be
// writable, inputs (--data, --resume, --sample) readable regular files; a checkpoint is loaded here,
// so a bad header costs one line, not a GPU start. What needs the GPU (how many there are) is judged
// in main.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "cli.h"
#include "gpt_ref.h"
#include "nn/attn_kind.h"
#include "nn/backend.h"
#include "results.h"

// Dropout's default probability (--dropout): the one place to change it. Chosen from a sweep on the
// default run (see the notes, "Dropout").
constexpr double kDefaultDropout = 0.2;
// The 1.1 MB cut (--bench's quality-cut) is a quarter of the plays, so the same model overfits it
// sooner: it gets its own dropout and a shorter schedule, both chosen from the same sweep
// (--dropout and --bench-steps override them, as they do for the default run).
constexpr double kCutDropout = 0.3;
constexpr int kCutSteps = 2000;
// --dw-sm-share's default where it applies (bf16, the one-GPU graph with --dw-stream on): cuBLASLt sizes each
// weight gradient's algorithm for half the SMs, leaving the rest to the chain of data gradients beside it.
// Measured as the bench's row "dW sized for 50% of the SMs" against every SM: the step was faster in every
// build timed from fcb025f to 4dbff6d (7 to 134 us a step, H200), so it became the default; the bench keeps
// the row "dW sized for every SM" beside the ladder to show what it saves (the notes' "Also tried").
constexpr double kDwSmShareDefault = 0.5;
// --chain-priority (run/trainer.cuh): the one-GPU graph's chain of data gradients at the highest stream priority
// and the side streams at the lowest, the graph instantiated so that each kernel keeps its stream's (kOn); every
// stream at the lowest, the graph at its launch stream's (kOff); or the step captured once, instantiated both
// ways, and the faster kept by timing (kAuto, the default). Why auto: in six runs of --bench --bench-part
// train-bf16 at one build (H200, ms a step, median of 20, with the priorities / at one priority) the order
// changed from process to process: 3.394 / 3.495, 3.458 / 3.471, then about 3.47 / 3.39 four times, and
// `make bench` 3.467 / 3.361. 13 to 106 us either way; 74 to 106 in six of the seven (2 to 3% of the step,
// which at 35% MFU is about 3.38 ms). Each process also times its own cuBLASLt algorithms (nn/lt_tuned.cuh), which differ from process
// to process, and the two streams share the SMs differently around them; so each process times the whole
// step both ways, as it times its matmuls.
enum class ChainPriority { kOff, kOn, kAuto };
inline const char* chain_priority_name(ChainPriority p) {  // as the command line spells it
  return p == ChainPriority::kAuto ? "auto" : p == ChainPriority::kOn ? "on" : "off";
}
// kAuto: graph steps timed per setting, launched alternately (on, level, on, ...) before the choice. 8 each:
// the step's own spread within one process was 70 to 90 us over 20 steps (make bench's default row: 3.421 to
// 3.490 ms at 25798c8, 3.432 to 3.523 at a2163d9), so a median of 8 moves by much less than the 74 to 106 us
// that separated the settings in six of the seven runs above; the 16
// steps take about 55 ms, and the half at the slower setting lose about 0.1 ms each (under 1 ms, against the
// default run's 5,000 steps of about 3.4 ms).
constexpr int kPriorityTimedSteps = 8;

struct TrainOptions {
  int batch = 64, steps = 5000, until = 0, warmup = 100, val_every = 100, val_batches = 0,
      log_every = 50;  // val_batches 0: the whole validation text
  double lr = 1e-3, lr_min_frac = 0.1, clip = 1.0, weight_decay = 0.1;
  double dropout = kDefaultDropout;        // at the embedding's and each sublayer's output (nn/dropout.h)
  bool random_batches = true;              // --batches random (Philox offsets) | sequential (the text in order)
  bool fusion = true;                      // cuBLASLt epilogues
  bool fused_ln = true;                    // residual add + LayerNorm in one kernel, fused LayerNorm backward
  bool residual_bf16 = false;              // --residual bf16: the residual stream and its gradient in bf16
  bool graph = true;                       // one GPU: the training step captured once as a CUDA graph
  bool lt_search = true;                   // bf16: cuBLASLt's algorithms (and bias gradients) chosen by timing
  bool recompute = false;                  // on: the MLP's GELU output recomputed in the backward, not kept per layer
  bool flash_bwd = true;                   // bf16 with cuDNN's attention: our flash backward (head size 64)
  bool flash_wgmma = true;                 // --flash-mma wgmma: its block products on wgmma (sm_90a), else mma.sync
  bool dw_stream = true;                   // the graph's weight gradients on a second stream (nn/dw_stream.h)
  bool keep_a = false;                     // our fused GEMM keeps A's row panel in shared memory at K <= 384
  int store_slots = 4;                     // our fused GEMM's two-output epilogue: staging slots a consumer (2 or 4)
  bool gelu_deriv = true;                  // bf16: fc's forward keeps gelu'(z), not z; the backward multiplies by it
  bool batch_finish = true;                // the backward's column-sum finishes many to a launch (nn/finish_queue.cuh)
  ChainPriority chain_priority = ChainPriority::kAuto;  // the graph's chain and side streams' priorities (above)
  bool dw_reduce_kernel = true;            // a weight gradient's split-K parts may be added in a kernel of their own
  bool adamw_overlap = true;               // one-GPU graph: a step's AdamW beside the next step's forward (trainer.cuh)
  bool pdl = false;                        // our chains' kernels as programmatic dependent launches (nn/pdl.cuh)
  double dw_sm_share = 1;                  // the share of the SMs cuBLASLt sizes a weight gradient's algorithm for
                                           // (1 here; the command line's default is kDwSmShareDefault where it applies)
  size_t bucket_bytes = size_t(25) << 20;  // data parallel: gradient all-reduce buckets (0: one, after the backward)
  size_t first_bucket_bytes = 0;           // data parallel: the first bucket's size (0: bucket_bytes)
  bool bucket_forward = false;             // data parallel: buckets in parameter order (the overlap lost)
  bool allreduce_bf16 = false;             // data parallel: the gradient's collectives in bf16
  int zero = 0;                            // data parallel: 1 = ZeRO-1 (optimizer state sharded)
  int nccl_channels = 0;                   // data parallel: NCCL channels at most (0: NCCL's choice)
  bool copy_collectives = false;           // data parallel: the gradient summed through the copy engines, not NCCL
                                           // (--collectives auto picks them in gpt.cu's main where they can run)
  // ZeRO-1 on the copy engines, for the checks only (no flag): hold the side stream this many nanoseconds
  // before each range of the gather, so the next forward finds every range late; and skip the forward's
  // wait for one range (-1: none; the check that shows one skipped wait changes the losses).
  unsigned long long test_gather_delay_ns = 0;
  int test_skip_range_wait = -1;
  // --adamw-overlap on, for the checks only: hold the update's stream this long before each range's AdamW, so
  // that the forward finds every range late (a wait missing anywhere then reads weights not yet updated); and
  // skip the forward's wait for one range (-1: none; the check that shows one skipped wait changes the losses).
  unsigned long long test_update_delay_ns = 0;
  int test_skip_update_wait = -1;
  Backend backend = Backend::kCustom;      // --backend: who runs the layers (nn/backend.h)
  bool tf32 = false;                       // --precision tf32: the fp32 model, its matmuls on TF32 tensor cores
};

// The files of a training run (empty: not used).
struct RunFiles {
  std::string data_name, save, resume, log, dump;
  std::shared_ptr<const ckpt::Checkpoint> resume_ckpt;  // --resume, loaded by parse_options
};

namespace gpt {

// --bench's parts: `all` is every one but the last; `generate` times generation on fresh weights alone.
inline const std::vector<std::string> kBenchParts = {"train-fp32", "train-tf32",  "train-bf16", "train-cudnn",
                                                     "quality",    "quality-cut", "generate"};

struct Options {
  cli::Standard st;
  Config cfg;
  TrainOptions train;
  std::string prec = "bf16", attn_s = "auto", backend_s = "custom";
  Attn attn = Attn::kAuto;
  std::string data_path;     // the file read (the default resolved next to the executable)
  long long data_limit = 0;  // --data-limit: read only the file's first bytes (0: all)
  RunFiles files;
  std::string sample, prompt;
  ckpt::Checkpoint sample_ckpt;  // --sample, loaded
  int ntok = 200, top_k = 40;
  double temperature = 0.8;
  std::string gpus_s = "1";
  long long gpus_req = 0;  // --gpus N (0: 'all')
  int world = 1, rank = 0, device = -1;
  std::string id_file, verify_only = "all";
  std::string allreduce = "fp32", bucket_order = "backward", collectives = "auto", zero = "auto";
  int bench_steps = 0;
  double cut_dropout = kCutDropout;  // --bench's quality-cut run: --dropout when given
  int cut_steps = kCutSteps;         // and --bench-steps when given
  std::set<std::string> bench_parts;
  bool check_args = false;
  bool clusters = true;  // --clusters: the one-cluster decoder may be used (and checked, and timed)
  bool multi() const { return gpus_s != "1" || world > 1; }
  bool bench_part(const std::string& p) const { return bench_parts.count(p) > 0; }
};

// Whether `--name` appears on the command line (as "--name V" or "--name=V"): the rules between flags
// judge what the user wrote, not the defaults.
inline bool given(int argc, char** argv, const std::string& name) {
  const std::string f = "--" + name;
  for (int i = 1; i < argc; ++i)
    if (argv[i] == f || std::string(argv[i]).rfind(f + "=", 0) == 0) return true;
  return false;
}

// <lesson>/data/shakespeare.txt, found from the executable (<lesson>/build/gpt), so that gpt runs from
// any folder; "data/shakespeare.txt" where /proc/self/exe cannot be read.
inline std::string default_data_path() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return "data/shakespeare.txt";
  return (exe.parent_path().parent_path() / "data" / "shakespeare.txt").string();
}

// The data-parallel flags beyond --gpus / --world (run/data_parallel.cuh).
inline void declare_dp(cli::Args& args, Options& o, double& first_mb) {
  o.allreduce = args.str("allreduce", "fp32", "data parallel: fp32 | bf16, the type the gradient is summed in");
  o.zero = args.str("zero", "auto",
                    "data parallel: auto | 0 | 1. 1 = ZeRO-1 (each GPU keeps AdamW's state for its shard of the "
                    "parameters; reduce-scatter, sharded AdamW, all-gather). auto: 1 where the copy engines carry the "
                    "collectives (there the all-gather runs beside the next forward: the faster step), else 0");
  o.train.nccl_channels = int(args.integer("nccl-channels", 0, 0, 64,
                                           "data parallel: at most this many NCCL channels (SMs) (0: NCCL's choice)"));
  first_mb =
      args.real("first-bucket-mb", 0, 0, 1 << 20,
                "data parallel: the first bucket closes at this many MiB (one block if smaller; 0: --bucket-mb)");
  o.bucket_order = args.str("bucket-order", "backward",
                            "data parallel: backward | forward (forward: parameter order, each bucket waits for the "
                            "whole backward; for measuring)");
  o.collectives = args.str("collectives", "auto",
                           "data parallel: auto | nccl | copy, who sums the gradient's buckets. nccl: NCCL's "
                           "all-reduce, whose kernels hold SMs while the backward runs. copy: each GPU pulls its shard "
                           "of a bucket from the others with the copy engines, averages it in one short kernel and "
                           "pulls the other shards back (with --zero 1: its owner pulls each piece, and after AdamW "
                           "each GPU pulls the others' updated shards beside the next forward), no SM held (--gpus "
                           "N, GPUs with peer access). auto: copy where it can run, else nccl");
}

// --residual bf16's widths: the fused LayerNorm's (4 numbers a lane, one row a warp).
constexpr bool residual_bf16_width(int width) { return width % 4 == 0 && width <= 1024; }

// The training step's own fusions (run/trainer.cuh, nn/kernels/layernorm.cuh): on | off each, as given.
struct StepFlags {
  std::string fused_ln, graph, search, recompute, flash, flash_mma, dw, keep, finish, priority, deriv, reduce, residual,
      overlap, pdl, slots;
  double dw_share = kDwSmShareDefault;
};
inline void declare_step(cli::Args& args, StepFlags& f) {
  f.fused_ln = args.str("fused-ln", "on",
                        "on | off: the residual add and the LayerNorm after it in one kernel, the LayerNorm backward "
                        "with its parameter gradients and the dropout after it");
  f.residual = args.str("residual", "fp32",
                        "fp32 | bf16: the residual stream x and its gradient dx in fp32 (each block's add kept to "
                        "fp32), or in bf16 (half the LayerNorms' bytes of x and dx; each add rounded to bf16 as it is "
                        "stored); bf16 needs --precision bf16, --fused-ln on and our layers (not --backend cudnn), trains on one "
                        "GPU, and is refused by --bench and --verify (they measure and check the bf16 stream themselves)");
  f.graph = args.str("graph", "on", "on | off: the whole training step as one CUDA graph, replayed (one GPU)");
  f.search = args.str("lt-search", "on",
                      "on | off: bf16 times cuBLASLt's candidate algorithms, and the bias gradient in the matmul's "
                      "epilogue against apart, once per shape, and keeps the fastest");
  f.recompute = args.str("recompute", "off",
                         "on | off: on: the MLP's GELU output is not kept per layer but recomputed in the backward "
                         "from its pre-activation (less memory, one more elementwise pass per layer); off: kept (faster)");
  f.flash = args.str("flash-bwd", "on",
                     "on | off: with cuDNN's fused attention (bf16), its backward by our two flash kernels where the "
                     "head size is 64 and the context a multiple of 64; off: cuDNN's backward");
  f.flash_mma = args.str("flash-mma", "wgmma",
                         "wgmma | sync: our flash backward's 64 x 64 block products on Hopper's warpgroup instruction "
                         "(wgmma, sm_90a: nn/flash_sm90.cu) or on mma.sync (nn/kernels/flash_bwd.cuh), the same "
                         "passes and tiles; elsewhere mma.sync");
  f.dw = args.str("dw-stream", "on",
                  "on | off: in the CUDA graph, the weight gradients' matmuls on a second stream beside the chain of "
                  "data gradients (the same kernels and results); off: all on one stream");
  f.keep = args.str("keep-a", "off",
                    "on | off: on: our fused GEMM (nn/gemm_sm90.cu) at K <= 384 keeps each 128-row panel of A in "
                    "shared memory for a whole row of C's tiles, streaming only B; off: A and B streamed every tile");
  f.slots = args.str("store-slots", "4",
                     "2 | 4: staging slots a consumer warpgroup of our fused GEMM stores fc's forward through (its two "
                     "outputs, gelu'(z) and gelu(z), or z and gelu(z)): 4 beside five k-stages, so that a box's store "
                     "waits for the one four stores back to have left its slot; 2 beside six, as day10's loop (the same "
                     "results). --keep-a on's loop has 2 either way");
  f.deriv = args.str("gelu-deriv", "on",
                     "on | off: on: in bf16 with our layers (not --backend cudnn), the epilogues, --lt-search on and "
                     "--recompute off, on an sm_90 GPU at a width that is a multiple of 8, fc's forward keeps the "
                     "GELU's derivative gelu'(z) beside gelu(z), from one tanh, and the backward only multiplies by "
                     "it; off (and elsewhere): fc keeps its pre-activation z and the backward computes gelu'(z)");
  f.reduce = args.str("dw-reduce-kernel", "on",
                      "on | off: on: a layer's weight gradient may be any algorithm cuBLASLt's heuristic offers, "
                      "among them those that split K and add the parts in a reduce kernel of their own; off: only "
                      "those whose configuration reports an in-place reduction or none (a request: an H200 trace "
                      "showed cuBLASLt's split-K kernels still followed by their reduce kernel)");
  f.dw_share = args.real("dw-sm-share", kDwSmShareDefault, 0.05, 1,
                         "the share of the GPU's SMs (0.05 to 1) cuBLASLt's heuristic sizes a layer's weight-gradient "
                         "algorithm for (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), leaving the rest to the chain beside "
                         "it; 1: every SM. 0.5 by default in bf16 in the one-GPU graph with --dw-stream on (where it was "
                         "measured), 1 elsewhere");
  f.finish = args.str("batch-finish", "on",
                      "on | off: the backward's column-sum finishes (LayerNorm parameters, qkv and fc biases) "
                      "queued and run many to a launch (nn/finish_queue.cuh; the same sums); off: each in a launch "
                      "of its own");
  f.overlap = args.str("adamw-overlap", "on",
                       "on | off: in the one-GPU CUDA graph, a step ends with its gradient's norm, and its AdamW update "
                       "runs at the start of the next step on a stream of its own, one range of parameters at a time "
                       "(the embeddings, then each block), each range's forward waiting only for its own update (the "
                       "same arithmetic and results); off: AdamW at the end of its own step");
  f.pdl = args.str("pdl", "off",
                   "on | off: the LayerNorms', our fused GEMM's and our flash backward's kernels launched as "
                   "programmatic dependent launches (sm_90): each may be placed on the SMs while the kernel before it "
                   "in its stream finishes, and waits for that kernel's results before it reads (the same results)");
  f.priority = args.str("chain-priority", "auto",
                        "auto | on | off: in the one-GPU CUDA graph (its side streams: the weight gradients with "
                        "--dw-stream on, AdamW with --adamw-overlap on), on: the chain of data gradients on a stream "
                        "of the highest priority and the side streams on the lowest, so that a free SM takes the "
                        "chain's next block first; off: all at one priority; auto: the step captured once and "
                        "instantiated both ways, the first " +
                            std::to_string(2 * kPriorityTimedSteps) +
                            " graph steps alternating the two, and the faster by its median step time kept (which "
                            "is faster changes from process to process; a graph with neither side stream is not "
                            "timed). The same kernels and results either way");
}
inline bool on_off(const std::string& flag, const std::string& v) {
  if (v != "on" && v != "off") cli::usage_error(kProg, "--" + flag + " must be on or off, got '" + v + "'");
  return v == "on";
}
inline void check_step(int argc, char** argv, Options& o, const StepFlags& f) {
  o.train.fused_ln = on_off("fused-ln", f.fused_ln), o.train.graph = on_off("graph", f.graph);
  o.train.lt_search = on_off("lt-search", f.search), o.train.recompute = on_off("recompute", f.recompute);
  o.train.flash_bwd = on_off("flash-bwd", f.flash), o.train.dw_stream = on_off("dw-stream", f.dw);
  if (f.flash_mma != "wgmma" && f.flash_mma != "sync")
    cli::usage_error(kProg, "--flash-mma must be wgmma or sync, got '" + f.flash_mma + "'");
  o.train.flash_wgmma = f.flash_mma == "wgmma";
  o.train.keep_a = on_off("keep-a", f.keep), o.train.batch_finish = on_off("batch-finish", f.finish);
  if (f.slots != "2" && f.slots != "4") cli::usage_error(kProg, "--store-slots must be 2 or 4, got '" + f.slots + "'");
  o.train.store_slots = f.slots == "4" ? 4 : 2;
  if (given(argc, argv, "store-slots") && o.st.bench)
    cli::usage_error(kProg, "--store-slots is a training run's: --bench times two staging slots in a row of its own "
                            "(leave the flag out)");
  if (f.priority != "auto" && f.priority != "on" && f.priority != "off")
    cli::usage_error(kProg, "--chain-priority must be auto, on or off, got '" + f.priority + "'");
  for (const ChainPriority p : {ChainPriority::kOff, ChainPriority::kOn, ChainPriority::kAuto})
    if (f.priority == chain_priority_name(p)) o.train.chain_priority = p;
  o.train.gelu_deriv = on_off("gelu-deriv", f.deriv);
  o.train.dw_reduce_kernel = on_off("dw-reduce-kernel", f.reduce), o.train.dw_sm_share = f.dw_share;
  if (f.residual != "fp32" && f.residual != "bf16")
    cli::usage_error(kProg, "--residual must be fp32 or bf16, got '" + f.residual + "'");
  o.train.residual_bf16 = f.residual == "bf16";
  // The bf16 stream lives in the fused LayerNorm kernels and the embedding's (Model::res16): the unfused
  // LayerNorm, the residual add and cuDNN's graphs read and write fp32 x.
  if (o.train.residual_bf16 && (o.prec != "bf16" || !o.train.fused_ln || o.train.backend == Backend::kCudnn ||
                                !residual_bf16_width(o.cfg.width)))
    cli::usage_error(kProg, "--residual bf16 needs --precision bf16, --fused-ln on, our layers (not --backend cudnn) "
                            "and a width that is a multiple of 4, at most 1024 (the fused LayerNorm's)");
  // Where the flag would change what a run reports without saying so: --bench's rows each set their own stream
  // (the step row "residual stream in bf16" and the quality run quality_residual_bf16 are the flag's), --verify
  // checks the bf16 stream against the fp32 one itself, and data parallelism's steps have no check with it.
  if (o.train.residual_bf16 && (o.st.bench || o.st.verify))
    cli::usage_error(kProg, o.st.bench ? "--residual bf16 is a training run's: --bench times the bf16 stream in rows of "
                                         "its own (leave the flag out)"
                                       : "--residual bf16 is a training run's: --verify checks the bf16 stream in "
                                         "checks of its own (leave the flag out)");
  if (o.train.residual_bf16 && o.multi())
    cli::usage_error(kProg, "--residual bf16 runs on one GPU (no data-parallel check covers it): leave out --gpus / "
                            "--world");
  // Not given: the default share where it was measured (bf16, the one-GPU graph, weight gradients on the side
  // stream); elsewhere every SM: with --graph off or --dw-stream off a dW runs on the chain's own stream, with
  // nothing beside it to take the SMs it would leave; data parallelism's steps run eagerly; fp32 was not timed.
  if (!given(argc, argv, "dw-sm-share") &&
      (o.multi() || !o.train.graph || !o.train.dw_stream || o.prec != "bf16"))
    o.train.dw_sm_share = 1;
  if (given(argc, argv, "graph") && o.multi())
    cli::usage_error(kProg, "--graph is the one-GPU step's; data parallelism (--gpus N, --world N) runs eagerly");
  if (given(argc, argv, "dw-sm-share") && f.dw_share < 1 && (o.multi() || !o.train.graph || !o.train.dw_stream))
    cli::usage_error(kProg, "--dw-sm-share sizes the weight gradients for the SMs the chain beside them leaves: it "
                            "needs the one-GPU graph with --dw-stream on (no --gpus N, --world N, --graph off or "
                            "--dw-stream off)");
  o.train.adamw_overlap = on_off("adamw-overlap", f.overlap);
  o.train.pdl = on_off("pdl", f.pdl);
  if (given(argc, argv, "pdl") && (o.st.bench || o.st.verify))
    cli::usage_error(kProg, "--pdl is a training run's: --bench times the programmatic launches in a row of its own and "
                            "--verify checks them against the plain ones (leave the flag out)");
  if (o.train.pdl && o.train.backend == Backend::kCudnn)
    cli::usage_error(kProg, "--pdl on launches our own kernels programmatically; --backend cudnn runs cuDNN's graphs");
  if (given(argc, argv, "flash-mma") && (o.st.bench || o.st.verify))
    cli::usage_error(kProg, "--flash-mma is a training run's: --bench times our flash backward on mma.sync in a row of "
                            "its own and --verify checks both kernels (leave the flag out)");
  if (given(argc, argv, "adamw-overlap") && o.st.bench)
    cli::usage_error(kProg, "--adamw-overlap is a training run's: --bench times AdamW at the step's end in a row of its "
                            "own (leave the flag out)");
  if (given(argc, argv, "adamw-overlap") && o.train.adamw_overlap &&
      (o.multi() || !o.train.graph || o.train.backend == Backend::kCudnn))
    cli::usage_error(kProg, "--adamw-overlap on is the one-GPU graph's on our layers: data parallelism, --graph off and "
                            "--backend cudnn run AdamW at the end of the step");
  if (given(argc, argv, "chain-priority") && o.st.bench)
    cli::usage_error(kProg, "--chain-priority is a training run's: --bench times auto, on and off in rows of their own "
                            "(leave the flag out)");
  if (given(argc, argv, "chain-priority") && o.st.verify)
    cli::usage_error(kProg, "--chain-priority is a training run's: --verify checks auto against on and off itself "
                            "(leave the flag out)");
  if (given(argc, argv, "chain-priority") && o.multi())
    cli::usage_error(kProg, "--chain-priority is the one-GPU graph's; data parallelism (--gpus N, --world N) runs "
                            "eagerly, its all-reduce stream already at the highest priority");
}

inline void declare(cli::Args& args, Options& o, std::string& fusion_s, double& bucket_mb, std::string& parts) {
  o.st = cli::standard_flags(args, 20261150);
  Config& cfg = o.cfg;
  cfg.layers = int(args.integer("layers", 6, 1, 96, "transformer blocks"));
  cfg.heads = int(args.integer("heads", 6, 1, 128, "attention heads (must divide the width)"));
  cfg.width = int(args.integer("width", 384, 8, 8192, "model width C"));
  cfg.context = int(args.integer("context", 256, 2, 8192, "context length T"));
  TrainOptions& t = o.train;
  t.batch = int(args.integer("batch", 64, 1, 4096, "sequences per step"));
  t.steps = int(args.integer("steps", t.steps, 1, 100000000, "training steps (the schedule's length)"));
  t.until = int(
      args.integer("until", 0, 0, 100000000, "stop after this step (0: at --steps); the schedule still spans --steps"));
  t.warmup = int(args.integer("warmup", 100, 1, 100000000, "warm-up steps"));
  t.lr = args.real("lr", 1e-3, 1e-7, 1.0, "peak learning rate");
  t.dropout = args.real("dropout", kDefaultDropout, 0, 1,
                        "dropout probability at the embedding's and each sublayer's output, in [0, 1)");
  const std::string batches_s =
      args.str("batches", "random",
               "random | sequential: each step's sequences drawn anywhere in the text (a function of seed and "
               "step), or the text read in order, batch after batch (what torch_oracle.py compares)");
  if (batches_s != "random" && batches_s != "sequential")
    cli::usage_error(kProg, "--batches must be random or sequential, got '" + batches_s + "'");
  t.random_batches = batches_s == "random";
  t.val_every = int(args.integer("val-every", 100, 1, 100000000, "steps between validation losses"));
  t.log_every = int(args.integer("log-every", 50, 1, 100000, "steps between progress lines"));
  fusion_s =
      args.str("fusion", "on", "on | off: bias, GELU and bias gradients fused into the matmuls (cuBLASLt epilogues)");
  o.prec = args.str(
      "precision", "bf16",
      "fp32 | tf32 | bf16 (tf32: fp32, but the model's matmuls (training, validation) round their inputs to TF32 on "
      "the tensor cores; generation stays fp32. bf16: bf16 activations and matmuls, fp32 master "
      "weights and optimizer)");
  o.attn_s = args.str("attention", "auto",
                      "auto | cudnn | matmul | naive (auto: cuDNN's fused attention in bf16, matmul otherwise)");
  o.backend_s = args.str("backend", "custom",
                         "custom | cudnn (cudnn: every layer cuDNN's graph API expresses as a cached cuDNN graph; "
                         "bf16, one GPU)");
  o.files.data_name = args.str("data", "data/shakespeare.txt",
                               "the text to train on (any file up to 1 GiB: bytes are the vocabulary; the default is "
                               "found next to the executable)");
  o.data_limit = args.integer("data-limit", 0, 0, 1LL << 30, "use only the first N bytes of --data (0: all of it)");
  o.files.save = args.str("save", "", "write a checkpoint here at the end");
  o.files.resume = args.str("resume", "", "continue from this checkpoint");
  o.files.log = args.str("log", "", "write the loss log here (lines: step loss / step val loss)");
  o.files.dump =
      args.str("dump", "",
               "write the initial weights and the first step's batch, loss and gradients here (for torch_oracle.py)");
  o.sample = args.str("sample", "", "generate from this checkpoint instead of training");
  o.prompt = args.str("prompt", "The ", "with --sample: the text to continue");
  o.ntok = int(args.integer("tokens", 200, 1, 1 << 20, "with --sample: bytes to generate"));
  o.temperature = args.real("temperature", 0.8, 0.01, 10.0, "with --sample: softmax temperature");
  o.top_k = int(args.integer("top-k", 40, 1, 256, "with --sample: sample among the k likeliest bytes"));
  o.gpus_s = args.str("gpus", "1", "GPUs to train on, one thread each (data parallel through NCCL): a number or 'all'");
  o.world = int(args.integer("world", 1, 1, 4096,
                             "processes of a multi-process data-parallel run, one GPU each (with --rank, --id-file)"));
  o.rank = int(args.integer("rank", 0, 0, 4095, "this process's rank in a multi-process run"));
  o.device =
      int(args.integer("device", -1, -1, 1023, "the GPU this rank uses (default: rank modulo the GPUs visible)"));
  o.id_file =
      args.str("id-file", "", "multi-process run: where rank 0 publishes NCCL's unique id and the others read it");
  bucket_mb = args.real(
      "bucket-mb", 25, 0, 1 << 20,
      "data parallel: all-reduce the gradient in buckets of this many MiB during the backward (0: all of it after)");
  o.verify_only = args.str("verify-only", "all",
                           "with --verify: all | fp32 (skip the bf16 and tf32 checks) | fp32+ours (those, and our "
                           "bf16 kernels that run without cuBLAS: our fused GEMM's own checks at small shapes, and our "
                           "flash backward alone behind cuDNN's forward: what racecheck can run, see the Makefile) | tf32 (only the --precision tf32 checks) | cudnn (only the "
                           "--backend cudnn checks) | dp (only the data-parallel checks: two GPUs or more)");
  o.bench_steps = int(args.integer("bench-steps", o.train.steps, 10, 1000000,
                                   "with --bench: steps of the quality runs (default: --steps for the plays, " +
                                       std::to_string(kCutSteps) + " for the 1.1 MB cut)"));
  parts = args.str("bench-part", "all",
                   "with --bench: which parts, comma-separated: train-fp32, train-tf32 (its step against fp32's, "
                   "and both trained side by side), train-bf16, train-cudnn (the bf16 step with --backend cudnn "
                   "beside the custom one), quality (the default run on the plays), quality-cut (its first 1,115,394 "
                   "bytes), all (these six), generate (generation alone, on fresh weights)");
  o.check_args = args.flag("check-args", "parse and judge the arguments (and the files they name), then exit 0");
}

// The data-parallel values and the flags they go with.
inline void check_dp(int argc, char** argv, Options& o, double first_mb) {
  if (o.allreduce != "fp32" && o.allreduce != "bf16")
    cli::usage_error(kProg, "--allreduce must be fp32 or bf16, got '" + o.allreduce + "'");
  if (o.bucket_order != "backward" && o.bucket_order != "forward")
    cli::usage_error(kProg, "--bucket-order must be backward or forward, got '" + o.bucket_order + "'");
  if (o.collectives != "auto" && o.collectives != "nccl" && o.collectives != "copy")
    cli::usage_error(kProg, "--collectives must be auto, nccl or copy, got '" + o.collectives + "'");
  if (o.zero != "auto" && o.zero != "0" && o.zero != "1")
    cli::usage_error(kProg, "--zero must be auto, 0 or 1, got '" + o.zero + "'");
  o.train.zero = o.zero == "1";  // auto: decided with --collectives auto in gpt.cu's main
  o.train.allreduce_bf16 = o.allreduce == "bf16";
  o.train.copy_collectives = o.collectives == "copy";
  if (o.train.copy_collectives && o.world > 1)
    cli::usage_error(kProg, "--collectives copy needs the GPUs in one process (--gpus N): with --world each process has one GPU");
  if (o.train.copy_collectives && o.train.nccl_channels)
    cli::usage_error(kProg, "--nccl-channels limits NCCL's kernels: --collectives copy does not use them");
  o.train.bucket_forward = o.bucket_order == "forward";
  o.train.first_bucket_bytes = size_t(first_mb * (1 << 20));
  for (const char* f : {"allreduce", "zero", "nccl-channels", "first-bucket-mb", "bucket-order", "collectives"})
    if (given(argc, argv, f) && !o.multi())
      cli::usage_error(kProg, std::string("--") + f + " goes with --gpus N or --world N (data parallel)");
}

// The rules between flags that say "X goes only with Y" or "X and Y exclude each other".
inline void check_combinations(int argc, char** argv, const Options& o) {
  const bool sampling = !o.sample.empty();
  if (sampling)
    for (const char* f :
         {"verify", "bench", "resume", "save", "json", "dump", "log", "data", "data-limit", "dropout", "gpus", "world"})
      if (given(argc, argv, f))
        cli::usage_error(
            kProg, std::string("--sample generates from a checkpoint on one GPU: --") + f + " does not go with it");
  if (!sampling)
    for (const char* f : {"prompt", "tokens", "temperature", "top-k"})
      if (given(argc, argv, f)) cli::usage_error(kProg, std::string("--") + f + " goes with --sample");
  if (!o.st.bench)
    for (const char* f : {"bench-part", "bench-steps"})
      if (given(argc, argv, f)) cli::usage_error(kProg, std::string("--") + f + " goes with --bench");
  if (o.multi() && given(argc, argv, "bench-part"))
    cli::usage_error(kProg, "--bench-part picks parts of the one-GPU bench; --bench --gpus N runs the multi-GPU one");
  if (!o.st.verify && given(argc, argv, "verify-only")) cli::usage_error(kProg, "--verify-only goes with --verify");
  if (given(argc, argv, "warmup") && o.train.warmup >= o.train.steps)
    cli::usage_error(kProg, "--warmup " + std::to_string(o.train.warmup) + " must be below --steps " +
                                std::to_string(o.train.steps));
  if (o.world > 1 && o.gpus_s != "1")
    cli::usage_error(kProg, "--world (one process per GPU) and --gpus (one process, several GPUs) exclude each other");
  if (o.world > 1 && o.id_file.empty())
    cli::usage_error(kProg, "--world needs --id-file (the file where the ranks meet)");
  if (o.rank >= o.world) cli::usage_error(kProg, "--rank must be below --world");
  if (o.world > 1 && (o.st.verify || o.st.bench))
    cli::usage_error(kProg, "--world runs training; --verify and --bench take --gpus N (one process)");
  if (o.world > 1 && o.train.batch % o.world)
    cli::usage_error(kProg, "--batch " + std::to_string(o.train.batch) + " does not split evenly over " +
                                std::to_string(o.world) + " ranks");
  if (o.gpus_req > 1 && o.train.batch % o.gpus_req)
    cli::usage_error(kProg, "--batch " + std::to_string(o.train.batch) + " does not split evenly over " +
                                std::to_string(o.gpus_req) + " GPUs");
  if (o.multi() && !o.files.dump.empty())
    cli::usage_error(kProg, "--dump captures one GPU's step: leave out --gpus / --world");
  // The data-parallel checks (--verify on N GPUs) and the multi-GPU bench cover fp32 and bf16 only.
  if (o.multi() && o.train.tf32)
    cli::usage_error(kProg, "--precision tf32 runs on one GPU (leave out --gpus / --world)");
}

// --backend cudnn: its graphs are built for bf16 activations around cuDNN's attention, on one GPU.
inline void check_backend(Options& o) {
  if (o.backend_s != "custom" && o.backend_s != "cudnn")
    cli::usage_error(kProg, "--backend must be custom or cudnn, got '" + o.backend_s + "'");
  if (o.backend_s == "custom") return;
  o.train.backend = Backend::kCudnn;
  if (o.prec != "bf16")
    cli::usage_error(kProg, "--backend cudnn needs --precision bf16 (its graphs are built for bf16 activations)");
  if (o.attn == Attn::kMatmul || o.attn == Attn::kNaive)
    cli::usage_error(kProg, "--backend cudnn runs cuDNN's attention: leave out --attention or give cudnn");
  if (o.gpus_s != "1" || o.world > 1)
    cli::usage_error(kProg, "--backend cudnn runs on one GPU (leave out --gpus / --world)");
  // Every parameter then starts at a multiple of 8 elements: 16-byte aligned in bf16, as the graphs
  // declare their tensors (and a layer's graphs never stop half-way on a misaligned pointer).
  if (o.cfg.width % 8)
    cli::usage_error(kProg, "--backend cudnn needs --width a multiple of 8, got " + std::to_string(o.cfg.width));
}

// The values that are more than a number: one of a list, a list, a count or 'all'.
inline void check_values(Options& o, const std::string& fusion_s, double bucket_mb, const std::string& parts) {
  if (o.gpus_s != "all" && (!cli::parse_int(o.gpus_s, o.gpus_req) || o.gpus_req < 1))
    cli::usage_error(kProg, "--gpus must be a positive number or 'all', got '" + o.gpus_s + "'");
  o.train.bucket_bytes = size_t(bucket_mb * (1 << 20));
  if (o.verify_only != "all" && o.verify_only != "fp32" && o.verify_only != "fp32+ours" && o.verify_only != "tf32" &&
      o.verify_only != "cudnn" && o.verify_only != "dp")
    cli::usage_error(kProg,
                     "--verify-only must be all, fp32, fp32+ours, tf32, cudnn or dp, got '" + o.verify_only + "'");
  if (fusion_s != "on" && fusion_s != "off")
    cli::usage_error(kProg, "--fusion must be on or off, got '" + fusion_s + "'");
  o.train.fusion = fusion_s == "on";
  if (!(o.train.dropout < 1)) cli::usage_error(kProg, "--dropout must be in [0, 1), got 1 (every element dropped)");
  if (o.prec != "fp32" && o.prec != "tf32" && o.prec != "bf16")
    cli::usage_error(kProg, "--precision must be fp32, tf32 or bf16, got '" + o.prec + "'");
  o.train.tf32 = o.prec == "tf32";
  if (o.attn_s == "cudnn")
    o.attn = Attn::kCudnn;
  else if (o.attn_s == "matmul")
    o.attn = Attn::kMatmul;
  else if (o.attn_s == "naive")
    o.attn = Attn::kNaive;
  else if (o.attn_s != "auto")
    cli::usage_error(kProg, "--attention must be auto, cudnn, matmul or naive, got '" + o.attn_s + "'");
  if (o.attn == Attn::kCudnn && o.prec != "bf16")
    cli::usage_error(kProg, "--attention cudnn needs --precision bf16 (cuDNN's fused attention takes fp16/bf16)");
  check_backend(o);
  const std::string bad = o.cfg.invalid();
  if (!bad.empty()) cli::usage_error(kProg, bad);
  if (o.cfg.width > 32 * 256) cli::usage_error(kProg, "--width above 8192 is not supported");
  size_t start = 0;
  while (true) {
    const size_t comma = parts.find(',', start);
    const std::string p = parts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (p == "all")
      o.bench_parts.insert(kBenchParts.begin(), kBenchParts.end() - 1);
    else if (std::find(kBenchParts.begin(), kBenchParts.end(), p) != kBenchParts.end())
      o.bench_parts.insert(p);
    else {
      std::string known = "all";
      for (const std::string& k : kBenchParts) known += ", " + k;
      cli::usage_error(kProg, "--bench-part: '" + p + "' is not one of " + known);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

// A checkpoint named on the command line, loaded now (a missing file or a bad header: one line, exit 2).
inline ckpt::Checkpoint load_checkpoint(const std::string& flag, const std::string& path, const Config* expect) {
  results::require_readable_file(kProg, flag, path);
  try {
    return ckpt::load(path, expect);
  } catch (const std::exception& e) { cli::usage_error(kProg, flag + ": " + e.what()); }
}

// Every file the run reads or writes, judged before the GPU is touched.
inline void check_files(Options& o) {
  results::require_outputs(kProg, o.st);
  RunFiles& f = o.files;
  if (!o.sample.empty()) {
    o.sample_ckpt = load_checkpoint("--sample", o.sample, nullptr);
    if (o.prompt.empty()) cli::usage_error(kProg, "--prompt must not be empty");
    if (int(o.prompt.size()) >= o.sample_ckpt.config.context)
      cli::usage_error(kProg, "--prompt is longer than the model's context");
    return;  // sampling reads nothing else and writes nothing
  }
  // The default text lives beside the executable; a path the user gives is the user's (cwd-relative).
  o.data_path = f.data_name == "data/shakespeare.txt" ? default_data_path() : f.data_name;
  results::require_readable_file(kProg, "--data", o.data_path, uint64_t(1) << 30);
  if (!f.save.empty()) results::require_writable_file(kProg, "--save", f.save);
  if (!f.log.empty()) results::require_writable_file(kProg, "--log", f.log);
  if (!f.dump.empty()) results::require_writable_dir(kProg, "--dump", f.dump);
  if (!o.id_file.empty()) {
    const std::filesystem::path p(o.id_file);
    results::require_writable_dir(kProg, "--id-file", p.has_parent_path() ? p.parent_path().string() : ".");
  }
  if (!f.resume.empty()) {
    f.resume_ckpt = std::make_shared<const ckpt::Checkpoint>(load_checkpoint("--resume", f.resume, &o.cfg));
    const int64_t stop = o.train.until > 0 ? std::min<int64_t>(o.train.until, o.train.steps) : o.train.steps;
    if (f.resume_ckpt->step >= stop)
      cli::usage_error(kProg, f.resume + " is at step " + std::to_string(f.resume_ckpt->step) +
                                  ": nothing to do before step " + std::to_string(stop) +
                                  " (raise --steps or --until)");
  }
}

// Parse and judge the whole command line; exits 2 (one line) on anything wrong, 0 on --help.
inline Options parse_options(int argc, char** argv) {
  cli::Args args(
      argc, argv, kProg,
      "a small GPT trained on any text, then sampled (fp32, tf32 or bf16; cuBLAS, cuDNN and hand-written kernels)");
  Options o;
  std::string fusion_s, parts;
  StepFlags step_flags;
  double bucket_mb = 0, first_mb = 0;
  declare(args, o, fusion_s, bucket_mb, parts);
  declare_dp(args, o, first_mb);
  declare_step(args, step_flags);
  const std::string clusters_s =
      args.str("clusters", "on",
               "on | off: generation may run on one thread-block cluster (sm_90, nn/kernels/decode_cluster.cuh); off "
               "leaves that decoder out of --verify and --bench (for tools that cannot run it: see the Makefile's "
               "racecheck line)");
  args.finish();
  o.st.validate(kProg);
  check_values(o, fusion_s, bucket_mb, parts);
  check_combinations(argc, argv, o);
  if (given(argc, argv, "dropout")) o.cut_dropout = o.train.dropout;
  if (given(argc, argv, "bench-steps")) o.cut_steps = o.bench_steps;
  check_dp(argc, argv, o, first_mb);
  check_step(argc, argv, o, step_flags);
  if (clusters_s != "on" && clusters_s != "off")
    cli::usage_error(kProg, "--clusters must be on or off, got '" + clusters_s + "'");
  o.clusters = clusters_s == "on";
  check_files(o);
  return o;
}

}  // namespace gpt
