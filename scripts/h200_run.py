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
ncu     iosim.measure.sweep ncu  → measured_h200.csv, measured_h200_kernels.csv (+ ncu_raw.txt)
validation  sweep then ncu: the whole committed validation dataset (iosim/data/validation/)
l2probe ncu DRAM bytes of L2 capacity probes → l2_probe.csv (iosim/data/validation/README.md)
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
    sh(f"python3 -m iosim.measure.sweep ncu {RES}/measured_times.csv {RES}/measured_h200.csv "
       f"{RES}/ncu_raw.txt {RES}/measured_h200_kernels.csv")


def step_validation():
    """The validation dataset, every configuration, in one go (iosim/data/validation/README.md)."""
    step_sweep()
    step_ncu()


# ---- L2 capacity probes (what an LRU model's effective capacity should be) ---------------
L2_PROBE_SRC = r"""
extern "C" __global__ void l2probe_read(const int4* __restrict__ buf, long long n, int passes,
                                        int rotate, int* out) {
    // every pass reads the whole buffer once (16-byte ld.global.cg, L1 bypassed); with rotate,
    // pass p gives CTA c the chunk of CTA (c + 67 p) mod grid, so each line is read by SMs all
    // over the chip (as K/V tiles are), not by one SM only
    int acc = 0;
    long long nthreads = (long long)gridDim.x * blockDim.x;
    for (int p = 0; p < passes; ++p) {
        long long cta = rotate ? (blockIdx.x + 67LL * p) % gridDim.x : blockIdx.x;
        for (long long i = cta * blockDim.x + threadIdx.x; i < n; i += nthreads) {
            int4 v = __ldcg(buf + i);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    if (acc == 0x7f3a2b1c) out[0] = acc;
}
extern "C" __global__ void l2probe_write(int4* buf, long long n) {
    // each line written once: what stays dirty in L2 at the end is not in ncu's DRAM writes
    long long nthreads = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nthreads)
        buf[i] = make_int4((int)i, 1, 2, 3);
}
"""
L2_PROBE_MB = (8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60)
L2_PROBE_PASSES = 4


def step_l2probe_target():
    import cupy as cp
    mod = cp.RawModule(code=L2_PROBE_SRC)
    rd, wr = mod.get_function("l2probe_read"), mod.get_function("l2probe_write")
    big = cp.ones(1 << 28, dtype=cp.int32)              # 1 GiB, to evict between probes
    out = cp.zeros(1, dtype=cp.int32)
    grid, block = (132 * 4,), (512,)
    for mb in L2_PROBE_MB:
        buf = cp.random.randint(0, 1 << 30, size=mb * (1 << 20) // 4, dtype=cp.int32)
        n = buf.size // 4
        for rotate in (0, 1):
            big += 1
            cp.cuda.runtime.deviceSynchronize()
            rd(grid, block, (buf, cp.int64(n), cp.int32(L2_PROBE_PASSES), cp.int32(rotate), out))
        big += 1
        wr(grid, block, (buf, cp.int64(n)))
        cp.cuda.runtime.deviceSynchronize()
        del buf


def step_l2probe():
    """ncu (default cache control: L2 flushed before each kernel) over the probe kernels."""
    import csv as _csv
    from iosim.measure.ncu import parse_csv
    cmd = (f"ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,"
           f"gpu__time_duration.sum --csv --page raw --print-units base -k regex:l2probe "
           f"env IOSIM_NO_TAR=1 python3 {ROOT}/scripts/h200_run.py l2probe_target")
    res = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    (RES / "l2_probe_raw.txt").write_text(res.stdout + "\n#STDERR\n" + res.stderr)
    rows = parse_csv(res.stdout)
    out = []
    it = iter(rows)
    for mb in L2_PROBE_MB:
        for variant in ("read_same_sm", "read_rotating", "write_once"):
            r = next(it, None)
            if r is None:
                break
            out.append({"variant": variant, "buffer_bytes": mb * (1 << 20),
                        "passes": L2_PROBE_PASSES if variant != "write_once" else 1,
                        "dram_read_bytes": r.get("dram_read_bytes"),
                        "dram_write_bytes": r.get("dram_write_bytes"),
                        "ncu_time_s": r.get("ncu_time_s"), "kernel": r["kernel"]})
    with open(RES / "l2_probe.csv", "w", newline="") as f:
        w = _csv.DictWriter(f, fieldnames=["variant", "buffer_bytes", "passes", "dram_read_bytes",
                                           "dram_write_bytes", "ncu_time_s", "kernel"])
        w.writeheader()
        w.writerows(out)
    for r in out:
        print(r["variant"], r["buffer_bytes"] >> 20, "MiB read", r["dram_read_bytes"],
              "write", r["dram_write_bytes"], flush=True)


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
    if os.environ.get("IOSIM_NO_TAR") is None:
        sh(f"cd {OUT} && tar czf results.tgz res", timeout=60)


if __name__ == "__main__":
    main()
