# common/toolchain.mk: find nvcc, the GPU architecture, cuBLAS and cuDNN, once.
#
# Included by the top-level Makefile and by every lesson's Makefile (through
# common/lesson.mk). The top level exports what it found, so a lesson built from
# the top does not search again and the ✓/✗ lines print once.
#
# Overrides (all optional):
#   CUDA_HOME=/path     (or CUDA_PATH)   the CUDA toolkit; default: where nvcc is, else /usr/local/cuda
#   CUDNN_HOME=/path    (or CUDNN_PATH)  a cuDNN with include/ and lib/ (or lib64/)
#   ARCH=sm_90                           the GPU architecture; default: detected, else sm_90
#
# cuDNN is searched in this order: CUDNN_HOME/CUDNN_PATH, a pip-installed
# nvidia-cudnn (python3 -c 'import nvidia.cudnn'), the CUDA toolkit, the system
# paths. A pip cuDNN ships only libcudnn.so.9 (no libcudnn.so link), so we link it
# by its full name (-l:libcudnn.so.9) instead of asking for a symlink, and put its
# folder in the executable's rpath so it is found at run time without LD_LIBRARY_PATH.
#
# The code's commit (REPO_COMMIT, full hash) and whether the tree is dirty (REPO_DIRTY 0/1: a
# tracked file other than results/ and *.md differs from it) come from git where the repository
# root has .git, otherwise from the file .repo-commit at the root: one line "<hash> <0|1>", written
# before the tree is copied to a machine without .git, e.g.
#   TOOLCHAIN_QUIET=1 make -s -C day01_setup print-REPO_STAMP > .repo-commit
# Neither: "unknown". lesson.mk links them into every program; results files record them.

ifndef TOOLCHAIN_DONE
TOOLCHAIN_DONE := 1
# Taken first, while this file is the last one make has read.
REPO_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

# ---- CUDA toolkit --------------------------------------------------------------
CUDA_HOME ?= $(CUDA_PATH)
ifeq ($(strip $(CUDA_HOME)),)
  NVCC_ON_PATH := $(shell command -v nvcc 2>/dev/null)
  CUDA_HOME := $(if $(NVCC_ON_PATH),$(patsubst %/bin/nvcc,%,$(NVCC_ON_PATH)),/usr/local/cuda)
endif
NVCC := $(CUDA_HOME)/bin/nvcc
ifeq ($(wildcard $(NVCC)),)
  $(error ✗ nvcc not found at $(NVCC). Install the CUDA Toolkit (12.x or 13.x) and put its bin/ on PATH, or run: make CUDA_HOME=/path/to/cuda)
endif
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib $(CUDA_HOME)/targets/x86_64-linux/lib))

# ---- GPU architecture ----------------------------------------------------------
# `nvidia-smi --query-gpu=compute_cap` prints e.g. "9.0"; no GPU (CI) -> sm_90, the
# documented default, built with PTX as well so that newer GPUs can JIT it.
ifeq ($(strip $(ARCH)),)
  GPU_CC := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. \r')
  ARCH := $(if $(GPU_CC),sm_$(GPU_CC),sm_90)
  ARCH_FROM := $(if $(GPU_CC),detected with nvidia-smi,default: no GPU detected)
else
  ARCH_FROM := set by ARCH=
endif
# "sm_90a" and "sm_90" share the base number 90; the "a" features are added per file.
ARCH_NUM := $(patsubst sm_%,%,$(patsubst %a,%,$(ARCH)))

# ---- cuDNN ---------------------------------------------------------------------
CUDNN_HOME ?= $(CUDNN_PATH)
CUDNN_FROM :=
ifneq ($(strip $(CUDNN_HOME)),)
  CUDNN_INC := $(CUDNN_HOME)/include
  CUDNN_LIB := $(firstword $(wildcard $(CUDNN_HOME)/lib64/libcudnn.so* $(CUDNN_HOME)/lib/libcudnn.so*))
  CUDNN_FROM := CUDNN_HOME
else
  PIP_CUDNN := $(shell python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
  ifneq ($(and $(PIP_CUDNN),$(wildcard $(PIP_CUDNN)/include/cudnn.h)),)
    CUDNN_INC := $(PIP_CUDNN)/include
    CUDNN_LIB := $(firstword $(wildcard $(PIP_CUDNN)/lib/libcudnn.so*))
    CUDNN_FROM := pip package nvidia-cudnn
  else ifneq ($(wildcard $(CUDA_HOME)/include/cudnn.h),)
    CUDNN_INC := $(CUDA_HOME)/include
    CUDNN_LIB := $(firstword $(wildcard $(CUDA_LIBDIR)/libcudnn.so*))
    CUDNN_FROM := CUDA toolkit
  else
    SYS_CUDNN_H := $(firstword $(wildcard /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h /usr/include/aarch64-linux-gnu/cudnn.h))
    ifneq ($(SYS_CUDNN_H),)
      CUDNN_INC := $(patsubst %/cudnn.h,%,$(SYS_CUDNN_H))
      CUDNN_LIB := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libcudnn.so* /usr/lib/aarch64-linux-gnu/libcudnn.so* /usr/lib64/libcudnn.so* /usr/lib/libcudnn.so*))
      CUDNN_FROM := system package
    endif
  endif
endif
ifeq ($(and $(wildcard $(CUDNN_INC)/cudnn.h),$(CUDNN_LIB)),)
  $(error ✗ cuDNN not found (looked in CUDNN_HOME/CUDNN_PATH, pip nvidia-cudnn, $(CUDA_HOME), /usr). Get it with `pip install nvidia-cudnn-cu13` (or -cu12 for CUDA 12), or the cudnn9-cuda-13 system package, or point make at an unpacked archive: make CUDNN_HOME=/path/to/cudnn)
endif
CUDNN_LIBDIR := $(patsubst %/,%,$(dir $(CUDNN_LIB)))
# Prefer the plain link name; a pip wheel has only the versioned file.
ifneq ($(wildcard $(CUDNN_LIBDIR)/libcudnn.so),)
  CUDNN_LINK := -lcudnn
else
  CUDNN_LINK := -l:$(notdir $(CUDNN_LIB))
endif
CUDNN_VERSION := $(shell awk '/define CUDNN_MAJOR/{a=$$3} /define CUDNN_MINOR/{b=$$3} /define CUDNN_PATCHLEVEL/{c=$$3} END{print a"."b"."c}' $(CUDNN_INC)/cudnn_version.h 2>/dev/null)

# ---- NCCL (optional: only day50's --gpus uses it) -------------------------------------------------
# Searched in the CUDA toolkit, a pip-installed nvidia-nccl, the system paths. Without it the programs
# build anyway and --gpus N > 1 says that this build has no NCCL.
ifneq ($(and $(wildcard $(CUDA_HOME)/include/nccl.h),$(wildcard $(CUDA_LIBDIR)/libnccl.so*)),)
  NCCL_INC := $(CUDA_HOME)/include
  NCCL_LIB := $(firstword $(wildcard $(CUDA_LIBDIR)/libnccl.so*))
else
  PIP_NCCL := $(shell python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
  ifneq ($(and $(PIP_NCCL),$(wildcard $(PIP_NCCL)/include/nccl.h)),)
    NCCL_INC := $(PIP_NCCL)/include
    NCCL_LIB := $(firstword $(wildcard $(PIP_NCCL)/lib/libnccl.so*))
  else ifneq ($(wildcard /usr/include/nccl.h),)
    NCCL_INC := /usr/include
    NCCL_LIB := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libnccl.so* /usr/lib/aarch64-linux-gnu/libnccl.so*))
  endif
endif
ifneq ($(NCCL_LIB),)
  NCCL_LIBDIR := $(patsubst %/,%,$(dir $(NCCL_LIB)))
  NCCL_FLAGS := -DGPT_HAVE_NCCL -I$(NCCL_INC)
  NCCL_LINK := -L$(NCCL_LIBDIR) -l:$(notdir $(NCCL_LIB))
endif

# ---- the commit of the code --------------------------------------------------------------
# A .repo-commit file at the root ("<hash> <0|1>", accepted only as a hex hash of 40+ digits and a 0/1
# flag) wins: it is written just before a tree is shipped to a GPU machine, whose copy may carry no
# .git, or a stale one (seen: a copy whose .git still named the commit of the session's start).
# Delete it to let git answer again. Otherwise git: `git diff --quiet` exits 0 (clean), 1 (differs)
# or 128 (error: then unknown).
REPO_LINE := $(shell awk 'NR == 1 && $$1 ~ /^[0-9a-f]+$$/ && length($$1) >= 40 && $$2 ~ /^[01]$$/ \
               { print $$1, $$2 }' '$(REPO_ROOT)/.repo-commit' 2>/dev/null)
REPO_COMMIT := $(word 1,$(REPO_LINE))
REPO_DIRTY := $(word 2,$(REPO_LINE))
REPO_FROM := $(if $(REPO_COMMIT),.repo-commit)
ifeq ($(REPO_COMMIT),)
  ifneq ($(wildcard $(REPO_ROOT)/.git),)
    REPO_COMMIT := $(shell git -C '$(REPO_ROOT)' rev-parse --verify -q HEAD 2>/dev/null)
    ifneq ($(REPO_COMMIT),)
      REPO_DIRTY := $(shell git -C '$(REPO_ROOT)' diff --quiet HEAD -- . ':(exclude)results' ':(exclude,glob)**/*.md' \
                      2>/dev/null; rc=$$?; [ $$rc -le 1 ] && echo $$rc || echo unknown)
      REPO_FROM := git
    endif
  endif
endif
REPO_COMMIT := $(or $(REPO_COMMIT),unknown)
REPO_DIRTY := $(or $(REPO_DIRTY),unknown)
REPO_STAMP := $(REPO_COMMIT) $(REPO_DIRTY)

SYSTEM_LIBDIRS := /usr/lib /usr/lib64 /lib /lib64 /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu
RPATH_DIRS := $(filter-out $(SYSTEM_LIBDIRS),$(sort $(CUDA_LIBDIR) $(CUDNN_LIBDIR) $(NCCL_LIBDIR)))

ifndef TOOLCHAIN_QUIET
  $(info ✓ nvcc: $(NVCC)   ARCH=$(ARCH) ($(ARCH_FROM)))
  $(info ✓ cuDNN $(CUDNN_VERSION) ($(CUDNN_FROM)): $(CUDNN_INC), $(CUDNN_LIB))
  $(info $(if $(NCCL_LIB),✓ NCCL: $(NCCL_LIB),- NCCL not found: day50's --gpus N > 1 is not built in))
  $(info $(if $(REPO_FROM),✓ code: $(REPO_COMMIT)$(if $(filter 1,$(REPO_DIRTY)), (dirty)) (from $(REPO_FROM)),- code: commit unknown (no .git and no valid .repo-commit): results files say "unknown"))
endif

export TOOLCHAIN_DONE CUDA_HOME NVCC CUDA_LIBDIR ARCH ARCH_NUM ARCH_FROM CUDNN_INC CUDNN_LIB \
       CUDNN_LIBDIR CUDNN_LINK CUDNN_VERSION CUDNN_FROM RPATH_DIRS NCCL_INC NCCL_LIB NCCL_LIBDIR NCCL_FLAGS NCCL_LINK \
       REPO_ROOT REPO_COMMIT REPO_DIRTY REPO_STAMP REPO_FROM
export TOOLCHAIN_QUIET := 1
endif
