#!/usr/bin/env python3
"""Unit test for scripts/plot.py and scripts/plots/: tables between markers, summary, and PNGs when matplotlib
is there (the markers, check-notes, freshness and bad input: plots/test_notes.py, run from here).
Run: python3 scripts/test_plot.py   (scripts/run_all.sh runs it as part of `make test`)."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402
import ncu_lines  # noqa: E402
from plots import test_notes  # noqa: E402
from plots import day50_multi  # noqa: E402
from plots import day50_torch  # noqa: E402
from plots import day50_trace  # noqa: E402
from plots.text import env_line  # noqa: E402
from plots.draw import read_loss_log  # noqa: E402
from plots.load import InputError, folder_of, gpu_label  # noqa: E402


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
        os.makedirs(os.path.join(root, "day50_gpt"))
        ph = {"embedding": 1.0, "matmul (cuBLAS)": 3.0}
        d50 = fake("day50_gpt", [
            {"name": "train step bf16", "dtype": "bf16", "shape": [6, 6, 384, 256, 64], "ms": 4.0, "tokens_per_s": 4096000.0,
             "extra": {"attention": "cuDNN fused flash attention (x)", "peak_gpu_mib": 1800.0, "phase_ms": ph, "phase_total_ms": 4.0}},
            {"name": "attention fwd+bwd bf16 cuDNN", "dtype": "bf16", "shape": [64, 6, 256, 64], "ms": 0.2, "tflops": 100.0,
             "extra": {"forward_ms": 0.05}},
            {"name": "generate, batch 1, KV cache", "dtype": "fp32", "shape": [6, 6, 384, 256, 1], "ms": 1.0, "tokens_per_s": 1000.0}])
        d50["config"] = {"layers": 6, "heads": 6, "width": 384, "context": 256, "batch": 64, "quality_steps": 200,
                         "val_loss_after_steps": 2.5, "sample": "The GPU ran",
                         "loss_curve": {"precision": "bf16", "step": [1, 2], "train_loss": [5.5, 4.0], "val_step": [100, 200],
                                        "val_loss": [3.0, 2.5], "seconds": 1.0}}
        for name, d in (("day01_setup", d1), ("day10_matmul", d10), ("day50_gpt", d50)):
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
        t50 = open(os.path.join(root, "day50_gpt", "README.md")).read()
        expect("| bf16 | 4.00 | 4,096,000 | 1,800 MiB | cuDNN fused flash attention |" in t50, "day50 training row")
        expect("| matmul (cuBLAS) | 3.000 (75%) |" in t50 and "| validation loss | 3.000 | 2.500 |" in t50, "day50 phases and val curve")
        torch_env = {"env": {"gpu": "G", "sm_count": 2, "driver": "1", "cuda_runtime": "13.0", "cudnn_loaded": "91900",
                             "torch": "2.11", "date": "2026-11-22T00:00:00Z"}}
        expect(env_line(torch_env) == "G, 2 SMs, driver 1, CUDA 13.0, cuDNN 9.19.0, PyTorch 2.11, 2026-11-22",
               "a PyTorch-written environment: cuDNN's integer version spelled out, PyTorch named, no cuBLAS field invented")
        two = {"env": dict(torch_env["env"], driver="580.1\n580.1")}
        expect(env_line(two).startswith("G, 2 SMs, driver 580.1, CUDA"), "nvidia-smi's one driver line per GPU: said once")
        expect(folder_of("day50_gpt_multi") == "day50_gpt" and folder_of("day50_gpt-torch_peer") == "day50_gpt",
               "results files map to their lesson's folder")
        row = lambda name, ms, batch, ex: {"name": name, "dtype": "bf16", "shape": [1, 1, 8, 4, batch], "ms": ms,
                                           "tokens_per_s": batch * 4 / ms * 1e3, "extra": ex}
        multi = {"env": {"gpu": "G"}, "config": {"gpus": 2, "nccl": "2.28.9", "NCCL_NVLS_ENABLE": "0", "precision": "bf16"},
                 "bench": [row("train step m 1 GPU", 10.0, 8, {"gpus": 1, "config": "m"}),
                           row("train step m 1 GPU, one replica's share of the batch", 6.0, 4,
                               {"gpus": 1, "config": "m", "batch": 4, "ideal_scaling_pct": 83.3}),
                           row("train step m 2 GPUs one all-reduce", 6.5, 8,
                               {"gpus": 2, "config": "m", "mode": "one all-reduce", "scaling_efficiency_pct": 76.9, "weak_scaling_pct": 92.3,
                                "exposed_ms": 0.5, "comm_ms_in_training": 0.4, "bus_gbps_in_training": 100.0, "bucket_bytes": 0,
                                "default_bucket": True, "largest_bucket_bytes": 64})],
                 "goals": [{"goal": "g", "value": 76.9, "met": False}]}
        text = "\n".join(day50_multi.multi_block(multi))
        expect("| m | 8 | 2 | one all-reduce (default) | 6.50 | 4,923 | 76.9% | 92.3% | 0.50 | 0.40 ms, 100 GB/s bus |" in text
               and "**missed**" in text and gpu_label("g", multi) == "2 × G", "day50 multi-GPU table, goals and GPU count")
        expect("rounds" not in text and day50_multi.multi_headline(multi) == "scaling on 2 GPUs: m (batch 8) 76.9%; goals met: 0 of 1",
               "day50 multi-GPU: a file without interleaved rounds shows one run's scaling")
        multi["bench"].append(row("interleaved rounds m 2 GPUs one all-reduce", 6.5, 8,
                                  {"gpus": 2, "rounds": 3, "mode": "one all-reduce", "model": "m",
                                   "scaling_pct": [76.9, 75.0, None], "weak_scaling_pct": [92.3, 91.0, 93.0],
                                   "scaling_median_pct": 75.0, "scaling_min_pct": 75.0, "scaling_max_pct": 76.9,
                                   "weak_median_pct": 92.3, "weak_min_pct": 91.0, "weak_max_pct": 93.0}))
        text = "\n".join(day50_multi.multi_block(multi))
        expect("| m | 2 | one all-reduce | 76.9%, 75.0%, – | 92.3%, 91.0%, 93.0% | 75.0% (75.0–76.9) | 92.3% (91.0–93.0) |" in text
               and day50_multi.multi_headline(multi) == "scaling on 2 GPUs: m (batch 8) 75.0% (median of the rounds); goals met: 0 of 1"
               and "| m | 8 | 2 | one all-reduce (default) |" in text,
               "day50 multi-GPU: the interleaved rounds' table (a null value as '–') and the headline read from it")
        log = os.path.join(root, "train.log")
        open(log, "w").write("0 5.5\n1 5.0\n1 val 5.1\n")
        expect(read_loss_log(log) == ([1, 2], [5.5, 5.0], [2], [5.1]), "loss log parsed")
        open(log, "a").write("oops\n")
        try:
            read_loss_log(log)
            expect(False, "a bad loss-log line is refused")
        except InputError as e:
            expect("train.log:4" in str(e), "a bad loss-log line is refused with its line number")
        gen = {"env": {"torch": "2.11"}, "repeats": 3,
               "generation": {"tokens": 200, "prompt": "The GPU ",
                              "torch": {"compile reduce-overhead fp32": {"dtype": "fp32", "tokens_per_s": 4000.0, "min": 3000.0,
                                                                         "max": 5000.0, "rounds": [3000.0, 4000.0, 5000.0]},
                                        "eager fp32": {"dtype": "fp32", "error": "x"}},
                              "ours": {"tokens_per_s": 10000.0, "min": 9990.0, "max": 10010.0, "rounds": [9990.0, 10000.0, 10010.0]},
                              "ours_row": "generate fp32, cluster"},
               "ratios": {"generation_vs_best_torch": {"median": 2.5, "min": 2.0, "max": 3.33}},
               "goals": [{"goal": "batch-1 generation >= 3x", "value": 2.5, "met": False}]}
        text = "\n".join(day50_torch.day50_peer_generation_block(gen))
        expect("| PyTorch compile reduce-overhead fp32 | fp32 | 4,000 | 3,000–5,000 | 3,000, 4,000, 5,000 |" in text
               and "| ./build/gpt: generate fp32, cluster | fp32 | 10,000 |" in text
               and "| PyTorch eager fp32 | fp32 | not run | | |" in text
               and "| our fp32 generation against PyTorch's fastest fp32 decoder | 2.50× | 2.00–3.33× |" in text
               and "**missed**" in text and "bf16 generation" not in text,
               "day50 generation-only peer: every decoder's rounds, a failed variant shown, only the ratios measured")
        expect(day50_torch.day50_peer_generation_headline(gen) == "generation fp32 2.5× (2.0–3.3×) the compiled PyTorch decoder"
               and day50_torch.day50_peer_generation_headline({}) == "–", "day50 generation-only peer headline")
        # day50_trace.py: the kernels two runs of a trace do not share, listed by run; none, one sentence
        k = lambda *names: [{"name": n, "us_per_step": 1.0, "calls_per_step": 1.0} for n in names]  # noqa: E731
        tr = {"config": {"window": 60, "marker": "adamw"},
              "runs": [{"name": "a", "kernels": k("x", "y"), "kernels_all": k("x", "y")},
                       {"name": "b", "kernels": k("x", "z"), "kernels_all": k("x", "z")},
                       {"name": "c", "kernels": k("y", "x"), "kernels_all": k("y", "x")}]}
        text = "\n".join(day50_trace.day50_trace_block(tr))
        unshared = text[text.index("does not share with"):]
        expect("| b | `y` | `z` |" in unshared and "| c |" not in unshared, "day50 trace: the kernels a run does not share")
        tr["runs"] = tr["runs"][::2]
        text = "\n".join(day50_trace.day50_trace_block(tr))
        expect("Every run ran the same kernels as \"a\"" in text, "day50 trace: runs that share every kernel")
        # ncu_lines.py: what `ncu --page source --print-source cuda,sass --csv` prints, two files, a SASS row, a "-" row
        csv_path = os.path.join(root, "lines.csv")
        with open(csv_path, "w") as f:
            f.write('"File Path","/x/k.cuh"\n"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)",'
                    '"Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed","Thread Instructions Executed"\n'
                    '"10","a = b;","-","-","30","1","30","100","3200"\n"","","0x10","  FFMA R1","30","1","30","100","3200"\n'
                    '"11","// none","-","-","-","-","-","-","-"\n'
                    '"File Path","/y/h.cuh"\n"5","c = d;","-","-","10","0","10","300","9600"\n')
        rows = ncu_lines.load(csv_path)
        expect(rows == [("k.cuh", 10, "a = b;", 30.0, 100.0), ("h.cuh", 5, "c = d;", 10.0, 300.0)],
               "ncu_lines: source lines with counts, by file, SASS rows and lines without counts left out")
        top = open(os.path.join(root, "README.md")).read()
        expect("copy 4,000 GB/s, FP32 FMA 60.0 TFLOP/s" in top, "summary headline day01")
        expect("best FP32 SIMT 25.0 TFLOP/s = 50.0% of cuBLAS" in top, "summary headline day10")
        again = open(os.path.join(root, "README.md")).read()
        plot.main(["--root", root, "--no-png"])
        expect(open(os.path.join(root, "README.md")).read() == again, "regeneration is idempotent")
        if have_mpl:
            for name in ("day01_setup", "day10_matmul", "day50_gpt"):
                png = os.path.join(root, "results", "test-gpu", name + ".png")
                expect(os.path.exists(png) and os.path.getsize(png) > 1000, f"{name}.png drawn")
        else:
            print("note  matplotlib not installed: PNG drawing not tested")
    failures += test_notes.run_all()
    print(f"{'all' if not failures else failures} {'passed' if not failures else 'failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
