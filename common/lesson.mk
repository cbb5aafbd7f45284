# common/lesson.mk: the rules every lesson's Makefile shares.
#
# A lesson's Makefile sets a few variables and includes this file:
#   LESSON      := day01_setup          the folder name (also the results file's name)
#   PROGRAMS    := setup                CUDA programs, each built from <name>.cu
#   HOST_TESTS  := test_foo             optional: host-only unit tests, each from <name>.cpp (g++)
#   RUN_ARGS_<p>  / BENCH_ARGS_<p>      optional extra arguments for `make run` / `make bench`
#   OBJS_<p>                            optional extra objects linked into program <p>
#   RUN_AFTER     := ...                optional: a command `make run` runs after the programs
#   BAD_ARGS_<p> := --n -1 ; --n abc    optional: argument sets that must be refused with exit 2
#                                       (scripts/bad_input.sh adds --bogus and friends itself)
#   EXTRA_VERIFY := ./x.sh 2 ; ./y      optional: more verification commands (run in the lesson folder by
#                                       scripts/run_all.sh, judged by the same exit codes as the programs)
#
# Targets: all (default), run, verify, bench, clean, and print-VAR for the scripts.
# Exit codes of the programs: 0 pass, 1 a check failed, 2 usage/input error, 77 skipped.

COMMON_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
include $(COMMON_DIR)/toolchain.mk
ROOT := $(abspath $(COMMON_DIR)/..)
BUILD := build
comma := ,

# Plain sm_XX machine code plus PTX of the same level, so a newer GPU can JIT it.
GENCODE := -gencode arch=compute_$(ARCH_NUM),code=[sm_$(ARCH_NUM),compute_$(ARCH_NUM)]
# Files that use wgmma/TMA/setmaxnreg need the arch-specific sm_90a target. On any other
# ARCH they are built like the rest; their kernels compile to nothing and are skipped at
# run time (they test __CUDA_ARCH_FEAT_SM90_ALL).
GENCODE_SM90A := $(if $(filter 90,$(ARCH_NUM)),-gencode arch=compute_90a$(comma)code=sm_90a,$(GENCODE))

NVCC_COMMON := -std=c++17 -O3 -lineinfo -I$(ROOT)/common -I$(CUDNN_INC) \
               -Xcompiler -Wall -Xcompiler -Wno-unknown-pragmas -MMD -MP
NVCCFLAGS ?=
LDFLAGS := $(addprefix -L,$(sort $(CUDA_LIBDIR) $(CUDNN_LIBDIR))) \
           $(foreach d,$(RPATH_DIRS),-Xlinker -rpath -Xlinker $(d)) -Xlinker --disable-new-dtags
LDLIBS := -lcublasLt -lcublas $(CUDNN_LINK)

CXX := g++
HOST_CXXFLAGS := -std=c++17 -O2 -Wall -Wextra -pthread -I$(ROOT)/common -MMD -MP

.PHONY: all run verify bench clean FORCE
.SECONDEXPANSION:

all: $(addprefix $(BUILD)/,$(PROGRAMS) $(HOST_TESTS))

$(BUILD):
	@mkdir -p $@

# The code's commit (toolchain.mk) goes into one tiny object that every program links, so a new
# commit (or a tree turning dirty) relinks the programs instead of recompiling them: day10's and
# day50's kernels take minutes to compile. The stamp file is rewritten only when its content
# changes: its date is what tells make to relink.
FORCE:
$(BUILD)/repo-stamp: FORCE | $(BUILD)
	@[ "$$(cat $@ 2>/dev/null)" = "$(REPO_STAMP)" ] || echo "$(REPO_STAMP)" > $@
$(BUILD)/repo_stamp.o: $(BUILD)/repo-stamp
	printf '%s\n' 'extern "C" const char repo_stamp_commit[] = REPO_COMMIT;' \
	  'extern "C" const int repo_stamp_dirty = REPO_DIRTY;' | \
	  $(CXX) -DREPO_COMMIT='"$(REPO_COMMIT)"' -DREPO_DIRTY=$(if $(filter 0 1,$(REPO_DIRTY)),$(REPO_DIRTY),-1) \
	  -x c++ -c -o $@ -

# One executable per program: its own object (<name>.cu through the rule below), OBJS_<p> (more
# translation units, e.g. an sm_90a one) and the stamp. The objects are kept, not deleted as
# intermediates, so that a new stamp costs a link only.
$(BUILD)/%: $(BUILD)/%.o $$(OBJS_$$*) $(BUILD)/repo_stamp.o
	$(NVCC) $(NVCCFLAGS) -o $@ $< $(OBJS_$*) $(BUILD)/repo_stamp.o $(LDFLAGS) $(LDLIBS)
.SECONDARY: $(addprefix $(BUILD)/,$(addsuffix .o,$(PROGRAMS)))

$(BUILD)/%.o: %.cu | $(BUILD)
	$(NVCC) $(NVCC_COMMON) $(NVCCFLAGS) $(if $(filter $*,$(SM90A_UNITS)),$(GENCODE_SM90A),$(GENCODE)) -c -o $@ $<

$(BUILD)/%: %.cpp | $(BUILD)
	$(CXX) $(HOST_CXXFLAGS) -o $@ $<

-include $(wildcard $(BUILD)/*.d)

# `make run`: each program with its defaults. A skip (77, e.g. no GPU) is reported, not an error.
run: all
	@for p in $(PROGRAMS); do \
	  echo "== $(LESSON)/$$p $(RUN_ARGS_$$p)"; \
	  ./$(BUILD)/$$p $(RUN_ARGS_$$p); rc=$$?; \
	  if [ $$rc -eq 77 ]; then echo "   (skipped)"; elif [ $$rc -ne 0 ]; then exit $$rc; fi; \
	done
	$(RUN_AFTER)

# `make verify`: the quick verification mode that scripts/run_all.sh uses.
verify: all
	@for p in $(PROGRAMS); do ./$(BUILD)/$$p --verify; rc=$$?; \
	  if [ $$rc -ne 0 ] && [ $$rc -ne 77 ]; then exit $$rc; fi; done

# `make bench`: the full benchmark. The lesson's first program writes results/<gpu>/<lesson>.json,
# any other program results/<gpu>/<lesson>-<program>.json ({gpu} is filled in by the program
# from the GPU's name).
bench: all
	@for p in $(PROGRAMS); do \
	  if [ "$$p" = "$(firstword $(PROGRAMS))" ]; then json="$(ROOT)/results/{gpu}/$(LESSON).json"; \
	  else json="$(ROOT)/results/{gpu}/$(LESSON)-$$p.json"; fi; \
	  ./$(BUILD)/$$p --bench $(BENCH_ARGS_$$p) --json "$$json"; rc=$$?; \
	  if [ $$rc -eq 77 ]; then echo "   (skipped)"; elif [ $$rc -ne 0 ]; then exit $$rc; fi; \
	done

clean:
	rm -rf $(BUILD)

print-%:
	@echo '$($*)'
