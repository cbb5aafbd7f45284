# CUDA & cuDNN, day by day: the top-level Makefile.
#
#   make            build every lesson
#   make run        build and run every lesson with its defaults (each prints its table)
#   make test       verify everything: host unit tests, every program's checks, bad-input handling
#   make bench      full benchmarks; each program writes results/<gpu>/<lesson>.json
#   make plots      draw results/<gpu>/*.png and regenerate the README results tables and figures
#   make check-notes  fail if a number in the notes differs from the committed results files (no GPU, no nvcc)
#   make sanitize   compute-sanitizer (memcheck, racecheck, initcheck) over every --verify (GPU machine)
#   make test-asan  the host tests again under AddressSanitizer + UndefinedBehaviorSanitizer (no GPU needed)
#   make fuzz       the long fuzz run: FUZZ_CASES (default 100000) hostile inputs per kind, log in build/fuzz.log
#   make trace      day50's training step traced kernel by kernel inside its CUDA graph (GPU machine):
#                   results/<gpu>/day50_gpt-trace.json (scripts/trace_kernels.py, scripts/ktrace.cpp)
#   make trace-peer the same for day50's PyTorch peer (torch_peer.py, needs torch): its compiled steps,
#                   results/<gpu>/day50_gpt-trace_torch_{reduce_overhead,max_autotune}.json
#   make dayNN_x    build one lesson (same as make -C dayNN_x)
#   make clean
# Options: ARCH=sm_90, CUDA_HOME=..., CUDNN_HOME=... (see common/toolchain.mk)
# plots and check-notes need only Python: asked for alone, they do not look for nvcc (toolchain.mk stops
# the build with an error when it finds none).
PYTHON_ONLY_GOALS := plots check-notes
ifeq ($(MAKECMDGOALS),)
include common/toolchain.mk
else ifneq ($(filter-out $(PYTHON_ONLY_GOALS),$(MAKECMDGOALS)),)
include common/toolchain.mk
endif

LESSONS := $(patsubst %/Makefile,%,$(sort $(wildcard day*/Makefile)))

.PHONY: all run test bench plots check-notes sanitize clean $(LESSONS) common-tests test-asan fuzz tools trace trace-peer

all: $(LESSONS) common-tests tools

$(LESSONS):
	@$(MAKE) --no-print-directory -C $@

common-tests:
	@$(MAKE) --no-print-directory -C common/tests

# A lesson that skips (no GPU: exit 77) does not stop the others.
run: all
	@for d in $(LESSONS); do $(MAKE) --no-print-directory -C $$d run || exit $$?; done

test:
	@bash scripts/run_all.sh

bench: all
	@for d in $(LESSONS); do $(MAKE) --no-print-directory -C $$d bench || exit $$?; done

plots:
	python3 scripts/plot.py

check-notes:
	@python3 scripts/plot.py --check-notes

sanitize:
	@bash scripts/sanitize.sh

# The kernel tracer (scripts/ktrace.cpp): a library the driver loads into a program (CUDA_INJECTION64_PATH)
# to record every kernel's start and end through CUPTI, which comes with the CUDA toolkit (lib64/ or
# extras/CUPTI/). Where CUPTI is missing the tracer is left out, with a note: nothing else needs it.
CUPTI_LIB := $(firstword $(wildcard $(CUDA_LIBDIR)/libcupti.so $(CUDA_HOME)/extras/CUPTI/lib64/libcupti.so))
CUPTI_INC := $(firstword $(dir $(wildcard $(CUDA_HOME)/include/cupti.h $(CUDA_HOME)/extras/CUPTI/include/cupti.h)))
ifneq ($(and $(CUPTI_LIB),$(CUPTI_INC)),)
tools: build/libktrace.so
# A toolkit whose CUPTI the tracer cannot read (before CUDA 13) leaves it out with a note, not an error.
build/libktrace.so: scripts/ktrace.cpp
	@mkdir -p build
	@g++ -O2 -std=c++17 -Wall -Wextra -shared -fPIC -I$(CUPTI_INC) -o $@ $< -L$(dir $(CUPTI_LIB)) -lcupti \
	  -Wl,-rpath,$(dir $(CUPTI_LIB)) 2>build/libktrace.log || \
	  { rm -f $@; echo "note: the kernel tracer did not build here (make trace needs it; build/libktrace.log says why)"; }
else
tools:
	@echo "note: CUPTI not found under $(CUDA_HOME): the kernel tracer (make trace) is not built"
endif

# day50's default training step, the same step on one stream (AdamW too), with the chain at the side stream's
# priority, with the chain at the highest, with fc keeping the GELU's input, with the layers' cuBLASLt weight
# gradients asked for algorithms that add their split-K parts in place (a request: the variant's run shows
# whether splitKreduce_kernel calls remain; the head's and the embeddings' are cuBLAS's: unchanged), with those sized for every SM (the
# default sizes them for half), and with AdamW at the step's end instead of beside the next forward: 200 steps
# each, the last 60 summarised. The marker, once a step on the step's own stream whichever way AdamW runs: the
# gradient norm's first kernel (with --adamw-overlap on, AdamW itself runs once per range of parameters).
# The default chooses its chain priority by timing its first 16 graph steps (--chain-priority auto), so its run
# may trace either setting, and the trace keeps no record of which: the two settings are the runs pinned to
# them, "chain at default priority" (--chain-priority off) and "chain at high priority" (on), which the notes
# compare with each other.
trace: day50_gpt tools
	python3 scripts/trace_kernels.py --lesson day50_gpt --marker sum_squares_partial --window 60 \
	  --json "results/{gpu}/day50_gpt-trace.json" \
	  --variant "default=" --variant "one stream=--dw-stream off --adamw-overlap off" \
	  --variant "chain at default priority=--chain-priority off" \
	  --variant "chain at high priority=--chain-priority on" \
	  --variant "GELU input kept=--gelu-deriv off" \
	  --variant "dW asked to reduce in place=--dw-reduce-kernel off" \
	  --variant "dW sized for every SM=--dw-sm-share 1" \
	  --variant "AdamW at the step's end=--adamw-overlap off" \
	  -- day50_gpt/build/gpt --steps 5000 --until 200 --val-every 1000 --log-every 100

# Every folder's HOST_TESTS rebuilt into its build/asan/ with both sanitizers (any report ends the
# test with an error) and run; the fuzz tests with fewer cases (ASan makes each case slower).
# Logs: build/test-asan-logs/. The last line counts the tests.
ASAN_CXX := g++ -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g
ASAN_FUZZ_CASES ?= 1000
test-asan:
	@rm -rf build/test-asan-logs; mkdir -p build/test-asan-logs; pass=0; fail=0; \
	for d in common/tests $(LESSONS); do \
	  tests=$$(TOOLCHAIN_QUIET=1 $(MAKE) -s --no-print-directory -C $$d print-HOST_TESTS); [ -n "$$tests" ] || continue; \
	  TOOLCHAIN_QUIET=1 $(MAKE) --no-print-directory -s -C $$d BUILD=build/asan CXX="$(ASAN_CXX)" \
	    $$(for t in $$tests; do printf 'build/asan/%s ' $$t; done) || exit 1; \
	  for t in $$tests; do \
	    log=build/test-asan-logs/$$(echo $$d | tr / _)_$$t.log; args=""; \
	    case $$t in test_fuzz*) args="--cases $(ASAN_FUZZ_CASES)";; esac; \
	    if (cd $$d && ./build/asan/$$t $$args) >$$log 2>&1; then pass=$$((pass+1)); echo "PASS  $$d/$$t (asan+ubsan): $$(tail -n1 $$log)"; \
	    else fail=$$((fail+1)); echo "FAIL  $$d/$$t (asan+ubsan): see $$log"; grep -m3 -E 'ERROR|runtime error|FAIL' $$log; fi; \
	  done; \
	done; \
	echo "test-asan: $$pass host tests passed under ASan+UBSan, $$fail failed"; [ $$fail -eq 0 ]

# The fuzz tests' long run (make test runs their short default). The counts are in build/fuzz.log.
FUZZ_CASES ?= 100000
fuzz:
	@TOOLCHAIN_QUIET=1 $(MAKE) -s --no-print-directory -C common/tests build/test_fuzz_cli
	@TOOLCHAIN_QUIET=1 $(MAKE) -s --no-print-directory -C day50_gpt build/test_fuzz
	@mkdir -p build; start=$$(date +%s); \
	{ common/tests/build/test_fuzz_cli --cases $(FUZZ_CASES) && (cd day50_gpt && ./build/test_fuzz --cases $(FUZZ_CASES)); } \
	  >build/fuzz.log 2>&1; rc=$$?; cat build/fuzz.log; echo "make fuzz: $$(( $$(date +%s) - start )) s" | tee -a build/fuzz.log; exit $$rc

clean:
	@for d in $(LESSONS) common/tests; do $(MAKE) --no-print-directory -C $$d clean; done
	rm -rf build

# The PyTorch peer's training step (day50_gpt/torch_peer.py, PyTorch only, one round) traced the same way, for
# its two CUDA-graph variants, one results file each. The marker is the loss's forward, once a step inside the
# forward's graph (Inductor names its kernels after the operations they fuse; backward kernels name
# nll_loss_forward too, so the forward's reduction is named in full). torch_peer.py always runs eager first:
# its losses are the others' reference. A cold max-autotune compile takes minutes.
TRACE_PEER := python3 scripts/trace_kernels.py --lesson day50_gpt-torch --window 60 \
	  --marker "^triton_red_fused__log_softmax__to_copy_nll_loss_forward"
trace-peer: tools
	$(TRACE_PEER) --json "results/{gpu}/day50_gpt-trace_torch_reduce_overhead.json" \
	  --variant "reduce-overhead=--train-variants eager,reduce-overhead" \
	  -- python3 day50_gpt/torch_peer.py --skip-ours --gen-variants "" --rounds 1
	$(TRACE_PEER) --json "results/{gpu}/day50_gpt-trace_torch_max_autotune.json" \
	  --variant "max-autotune=--train-variants eager,max-autotune" \
	  -- python3 day50_gpt/torch_peer.py --skip-ours --gen-variants "" --rounds 1
