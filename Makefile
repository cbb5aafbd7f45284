# CUDA & cuDNN, day by day: the top-level Makefile.
#
#   make            build every lesson
#   make run        build and run every lesson with its defaults (each prints its table)
#   make test       verify everything: host unit tests, every program's checks, bad-input handling
#   make bench      full benchmarks; each program writes results/<gpu>/<lesson>.json
#   make plots      draw results/<gpu>/*.png and regenerate the README results tables
#   make sanitize   compute-sanitizer (memcheck, racecheck, initcheck) over every --verify (GPU machine)
#   make dayNN_x    build one lesson (same as make -C dayNN_x)
#   make clean
# Options: ARCH=sm_90, CUDA_HOME=..., CUDNN_HOME=... (see common/toolchain.mk)
include common/toolchain.mk

LESSONS := $(patsubst %/Makefile,%,$(sort $(wildcard day*/Makefile)))

.PHONY: all run test bench plots sanitize clean $(LESSONS) common-tests

all: $(LESSONS) common-tests

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

sanitize:
	@bash scripts/sanitize.sh

clean:
	@for d in $(LESSONS) common/tests; do $(MAKE) --no-print-directory -C $$d clean; done
	rm -rf build
