"""Everything iosim does on the H200, in one process per step, results under $OUT.

    python3 scripts/h200_run.py STEP[,STEP...]   (steps: env, attrs, tests, traces, bench,
                                                  sweep, ncu)

env     device, versions, whether pydantic/simpy import
attrs   compile every kernel at its default tilings; registers, local (spill) bytes; SASS
        register/spill summary of the timed fa2 kernels (cuobjdump)
tests   python3 -m pytest -m gpu tests/test_kernels_gpu.py
traces  capture the traces committed under tests/data/traces/ and check them
bench   benchmarks/kernels_vs_torch.py → kernels_vs_torch_h200.txt
sweep   iosim.measure.sweep time → measured_times.csv
ncu     iosim.measure.sweep ncu  → measured_h200.csv (+ ncu_raw.txt)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT", "out"))
RES = OUT / "res"

TRACE_CASES = [  # (file stem, algorithm, problem kwargs)
    ("fa2_fwd_n200_d64_causal", "fa2", dict(batch=1, heads_q=2, seq_q=200, head_dim=64, causal=True)),
    ("fa2_fwd_n256_d128", "fa2", dict(batch=1, heads_q=2, seq_q=256, head_dim=128)),
    ("fa2_fwd_q130_kv300_gqa_d128_causal", "fa2",
     dict(batch=1, heads_q=4, heads_kv=2, seq_q=130, seq_kv=300, head_dim=128, causal=True)),
    ("fa2_bwd_n200_d64_causal", "fa2", dict(batch=1, heads_q=2, seq_q=200, head_dim=64, causal=True, direction="bwd")),
    ("fa2_bwd_n256_d128", "fa2", dict(batch=1, heads_q=2, seq_q=256, head_dim=128, direction="bwd")),
    ("fa2_bwd_q130_kv300_gqa_d128_causal", "fa2",
     dict(batch=1, heads_q=4, heads_kv=2, seq_q=130, seq_kv=300, head_dim=128, causal=True, direction="bwd")),
    ("fa1_fwd_n200_d64_causal", "fa1", dict(batch=1, heads_q=2, seq_q=200, head_dim=64, causal=True)),
    ("fa1_fwd_n256_d128", "fa1", dict(batch=1, heads_q=2, seq_q=256, head_dim=128)),
    ("fa1_fwd_q130_kv300_gqa_d128_causal", "fa1",
     dict(batch=1, heads_q=4, heads_kv=2, seq_q=130, seq_kv=300, head_dim=128, causal=True)),
    ("standard_fwd_n200_d64_causal", "standard", dict(batch=1, heads_q=2, seq_q=200, head_dim=64, causal=True)),
    ("standard_fwd_q130_kv300_gqa_d128", "standard",
     dict(batch=1, heads_q=4, heads_kv=2, seq_q=130, seq_kv=300, head_dim=128)),
]


def sh(cmd, log=None, timeout=None) -> int:
    print(f"$ {cmd}", flush=True)
    t = time.time()
    r = subprocess.run(cmd, shell=True, timeout=timeout)
    print(f"  (rc {r.returncode}, {time.time() - t:.1f}s)", flush=True)
    return r.returncode


def step_env():
    sh("nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv")
    sh("python3 -c 'import cupy, torch, numpy; print(cupy.__version__, torch.__version__, numpy.__version__)'")
    sh("python3 -c 'import pydantic; print(\"pydantic\", pydantic.VERSION)'")
    sh("which ncu nvcc cuobjdump")


def _compile_one(args):
    src, fn, defs, dtype, trace = args
    from iosim.kernels.build import get_kernel
    t = time.time()
    try:
        get_kernel(src, fn, defs, dtype, trace)
        return f"{src} {fn} {defs} {dtype} trace={trace}: {time.time() - t:.1f}s"
    except Exception as exc:
        return f"{src} {fn} {defs} {dtype} trace={trace}: FAILED {exc}"


def step_compile():
    """Fill CuPy's on-disk kernel cache in parallel (NVRTC is slow on unrolled MMA loops)."""
    from multiprocessing import Pool
    from iosim import AttentionProblem, build_schedule
    from iosim.algorithms.standard import SOFTMAX_CHUNK
    jobs = []
    for d in (64, 128):
        p = AttentionProblem(batch=1, heads_q=1, seq_q=1024, head_dim=d, direction="fwd+bwd")
        s = build_schedule(p, "h200", "fa2")
        for pas, src, fn in (("fwd", "fa2_fwd.cu", "fa2_fwd"), ("bwd", "fa2_bwd.cu", "fa2_bwd")):
            t = s.tiling[pas]
            defs = {"IOSIM_D": d, "IOSIM_BQ": t.block_q, "IOSIM_BKV": t.block_kv,
                    "IOSIM_WARPS": t.warps, "IOSIM_STAGES": t.stages}
            for dtype, trace in (("fp16", False), ("bf16", False), ("fp16", True)):
                jobs.append((src, fn, defs, dtype, trace))
        t = build_schedule(p.with_(direction="fwd"), "h200", "fa1").tiling["fwd"]
        defs = {"IOSIM_D": d, "IOSIM_BQ": t.block_q, "IOSIM_BKV": t.block_kv,
                "IOSIM_WARPS": t.warps, "IOSIM_STAGES": t.stages}
        for trace in (False, True):
            jobs.append(("fa1_fwd.cu", "fa1_fwd", defs, "fp16", trace))
            jobs.append(("softmax.cu", "std_softmax", {"IOSIM_D": d, "IOSIM_CHUNK": SOFTMAX_CHUNK}, "fp16", trace))
    with Pool(min(16, len(jobs))) as pool:
        for line in pool.imap_unordered(_compile_one, jobs):
            print("compiled", line, flush=True)


def step_attrs():
    from iosim import AttentionProblem, build_schedule
    from iosim.kernels.build import get_kernel, kernel_attributes, source_text
    info = {}
    for d in (64, 128):
        for direction in ("fwd", "bwd"):
            p = AttentionProblem(batch=1, heads_q=1, seq_q=4096, head_dim=d, direction=direction)
            s = build_schedule(p, "h200", "fa2")
            t = s.tiling[direction]
            defs = {"IOSIM_D": d, "IOSIM_BQ": t.block_q, "IOSIM_BKV": t.block_kv,
                    "IOSIM_WARPS": t.warps, "IOSIM_STAGES": t.stages}
            fn = "fa2_fwd" if direction == "fwd" else "fa2_bwd"
            src = "fa2_fwd.cu" if direction == "fwd" else "fa2_bwd.cu"
            for trace in (False, True):
                k = get_kernel(src, fn, defs, "fp16", trace, s.kernels[0 if direction == "fwd" else 1].launch.smem_bytes_per_cta)
                info[f"{fn} d={d} {t.describe()} trace={trace}"] = kernel_attributes(k)
            if not Path(RES / f"{fn}_d{d}.sass").exists():
                cu = RES / f"{fn}_d{d}.cu"
                cu.write_text(source_text(src))
                flags = " ".join(f"-D{k}={v}" for k, v in defs.items())
                sh(f"nvcc -arch=sm_90 -std=c++17 -cubin {flags} -Xptxas -v -o {RES}/{fn}_d{d}.cubin {cu} "
                   f"> {RES}/{fn}_d{d}.ptxas.txt 2>&1; cuobjdump -sass {RES}/{fn}_d{d}.cubin > {RES}/{fn}_d{d}.sass; "
                   f"grep -c -E 'HMMA' {RES}/{fn}_d{d}.sass; grep -c -E 'LDL|STL' {RES}/{fn}_d{d}.sass; "
                   f"rm -f {RES}/{fn}_d{d}.cubin {cu}")
    for k, v in info.items():
        print(k, v, flush=True)
    (RES / "kernel_attributes.json").write_text(json.dumps(info, indent=1))


def step_tests():
    sh(f"python3 -m pytest -m gpu -q --timeout 120 --tb=short -p no:cacheprovider tests/test_kernels_gpu.py "
       f"2>&1 | tee {RES}/pytest_gpu.txt")


def step_traces():
    from iosim import AttentionProblem, build_schedule
    from iosim.kernels.run import capture
    from iosim.kernels.trace import compare_trace, trace_stats
    tdir = RES / "traces"
    tdir.mkdir(parents=True, exist_ok=True)
    for stem, algo, kw in TRACE_CASES:
        p = AttentionProblem(**kw)
        try:
            tr = capture(p, algo)
            tr.device = "NVIDIA H200 (lent), cupy NVRTC sm_90"
            tr.command = "OUT=<dir> python3 scripts/h200_run.py traces"
            tr.save(tdir / f"{stem}.json")
            sched = build_schedule(p, "h200", algo)
            mism = compare_trace(sched, tr)
            print(f"trace {stem}: {'EQUAL' if not mism else 'MISMATCH'} {trace_stats(sched, tr)}", flush=True)
            for m in mism[:8]:
                print("   ", m, flush=True)
        except Exception as exc:
            import traceback
            traceback.print_exc()
            print(f"trace {stem}: FAILED {type(exc).__name__}: {exc}", flush=True)


def step_bench():
    sh(f"python3 benchmarks/kernels_vs_torch.py --out {RES}/kernels_vs_torch_h200.txt")


def step_sweep():
    sh(f"python3 -m iosim.measure.sweep time {RES}/measured_times.csv")


def step_sweep_standard():
    """Re-measure only the standard-attention rows (times and ncu bytes)."""
    sh(f"python3 -m iosim.measure.sweep time {RES}/measured_times_standard.csv standard")
    sh(f"python3 -m iosim.measure.sweep ncu {RES}/measured_times_standard.csv {RES}/measured_standard.csv {RES}/ncu_raw_standard.txt")


def step_ncu():
    sh(f"python3 -m iosim.measure.sweep ncu {RES}/measured_times.csv {RES}/measured_h200.csv {RES}/ncu_raw.txt")


def main():
    RES.mkdir(parents=True, exist_ok=True)
    steps = sys.argv[1].split(",") if len(sys.argv) > 1 else ["env", "attrs", "tests", "traces", "bench"]
    for s in steps:
        t = time.time()
        print(f"===== step {s}", flush=True)
        try:
            globals()[f"step_{s}"]()
        except Exception as exc:
            import traceback
            traceback.print_exc()
            print(f"step {s} failed: {exc}", flush=True)
        print(f"===== step {s} done in {time.time() - t:.1f}s", flush=True)
    sh(f"cd {OUT} && tar czf results.tgz res", timeout=60)


if __name__ == "__main__":
    main()
