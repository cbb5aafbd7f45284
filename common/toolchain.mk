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

ifndef TOOLCHAIN_DONE
TOOLCHAIN_DONE := 1

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

SYSTEM_LIBDIRS := /usr/lib /usr/lib64 /lib /lib64 /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu
RPATH_DIRS := $(filter-out $(SYSTEM_LIBDIRS),$(sort $(CUDA_LIBDIR) $(CUDNN_LIBDIR) $(NCCL_LIBDIR)))

ifndef TOOLCHAIN_QUIET
  $(info ✓ nvcc: $(NVCC)   ARCH=$(ARCH) ($(ARCH_FROM)))
  $(info ✓ cuDNN $(CUDNN_VERSION) ($(CUDNN_FROM)): $(CUDNN_INC), $(CUDNN_LIB))
  $(info $(if $(NCCL_LIB),✓ NCCL: $(NCCL_LIB),- NCCL not found: day50's --gpus N > 1 is not built in))
endif

export TOOLCHAIN_DONE CUDA_HOME NVCC CUDA_LIBDIR ARCH ARCH_NUM ARCH_FROM CUDNN_INC CUDNN_LIB \
       CUDNN_LIBDIR CUDNN_LINK CUDNN_VERSION CUDNN_FROM RPATH_DIRS NCCL_INC NCCL_LIB NCCL_LIBDIR NCCL_FLAGS NCCL_LINK
export TOOLCHAIN_QUIET := 1
endif
