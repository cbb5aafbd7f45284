"""day01_setup: the copy and FMA ceilings (the generic table and plot serve the rest)."""
from .text import fmt


def day01_headline(data):
    by = {b["name"]: b for b in data.get("bench", [])}
    cp = max((by[k]["gbps"] for k in ("copy_cudaMemcpy_d2d", "copy_kernel_float4") if k in by), default=None)
    fp = by.get("fp32_fma_chains", {}).get("tflops")
    return f"copy {fmt(cp)} GB/s, FP32 FMA {fmt(fp)} TFLOP/s"


VIEWS = {"day01_setup": dict(headline=day01_headline)}
