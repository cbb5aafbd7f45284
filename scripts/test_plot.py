#!/usr/bin/env python3
"""Unit test for scripts/plot.py: tables between markers, summary, and PNGs when matplotlib is there.
Run: python3 scripts/test_plot.py   (scripts/run_all.sh runs it as part of `make test`)."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402


def fake(lesson, bench):
    return {"lesson": lesson, "program": "p", "mode": "bench",
            "env": {"gpu": "Test GPU", "gpu_slug": "test-gpu", "sm_count": 2, "driver": "1", "cuda_runtime": "13.0",
                    "cublas": "13", "cudnn_loaded": "9.19.0", "date": "2026-11-22T00:00:00Z"},
            "checks": [{"name": "c", "passed": True}, {"name": "d", "passed": False}], "bench": bench, "passed": False}


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "results", "test-gpu"))
        os.makedirs(os.path.join(root, "day01_setup"))
        os.makedirs(os.path.join(root, "day10_matmul"))
        d1 = fake("day01_setup", [
            {"name": "copy_cudaMemcpy_d2d", "dtype": "bytes", "shape": [1024], "ms": 0.5, "gbps": 4000.0,
             "peak": 4800.0, "pct_of_peak": 83.3},
            {"name": "fp32_fma_chains", "dtype": "fp32", "shape": [1, 2, 3], "ms": 4.0, "tflops": 60.0}])
        d10 = fake("day10_matmul", [
            {"name": "cublas_sgemm", "dtype": "fp32", "shape": [n, n, n], "ms": 1.0, "tflops": 50.0 * n / 4096}
            for n in (1024, 4096)] + [
            {"name": "05_2d_blocktiling", "dtype": "fp32", "shape": [n, n, n], "ms": 2.0, "tflops": 25.0 * n / 4096,
             "ref": "cublas_sgemm", "pct_of_ref": 50.0, "pct_of_peak": 37.0} for n in (1024, 4096)])
        for name, d in (("day01_setup", d1), ("day10_matmul", d10)):
            json.dump(d, open(os.path.join(root, "results", "test-gpu", name + ".json"), "w"))
            open(os.path.join(root, name, "README.md"), "w").write(
                f"# {name}\nbefore\n<!-- results:{name} -->\nold table\n<!-- /results:{name} -->\nafter\n")
        open(os.path.join(root, "README.md"), "w").write("top\n<!-- results:summary -->\n<!-- /results:summary -->\n")

        try:
            import matplotlib  # noqa: F401
            have_mpl = True
        except ImportError:
            have_mpl = False
        plot.main(["--root", root] + ([] if have_mpl else ["--no-png"]))

        def expect(cond, what):
            nonlocal failures
            print(("ok    " if cond else "FAIL  ") + what)
            failures += not cond

        t1 = open(os.path.join(root, "day01_setup", "README.md")).read()
        expect("old table" not in t1 and "before" in t1 and "after" in t1, "day01 block replaced, text around kept")
        expect("| copy_cudaMemcpy_d2d | bytes | 1024 | 0.5 | 4,000 GB/s | – | 83.3% |" in t1, "day01 generic row")
        expect("1/2 checks passed" in t1, "checks counted honestly (a failed check shows)")
        t10 = open(os.path.join(root, "day10_matmul", "README.md")).read()
        expect("At M = N = K = 4096" in t10 and "| 05_2d_blocktiling | fp32 | 2 | 25.0 | 50.0% (cublas_sgemm) | 37.0% |" in t10,
               "day10 table at n = 4096")
        top = open(os.path.join(root, "README.md")).read()
        expect("copy 4,000 GB/s, FP32 FMA 60.0 TFLOP/s" in top, "summary headline day01")
        expect("best FP32 SIMT 25.0 TFLOP/s = 50.0% of cuBLAS" in top, "summary headline day10")
        again = open(os.path.join(root, "README.md")).read()
        plot.main(["--root", root, "--no-png"])
        expect(open(os.path.join(root, "README.md")).read() == again, "regeneration is idempotent")
        if have_mpl:
            for name in ("day01_setup", "day10_matmul"):
                png = os.path.join(root, "results", "test-gpu", name + ".png")
                expect(os.path.exists(png) and os.path.getsize(png) > 1000, f"{name}.png drawn")
        else:
            print("note  matplotlib not installed: PNG drawing not tested")
    print(f"{'all' if not failures else failures} {'passed' if not failures else 'failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
