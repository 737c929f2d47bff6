"""The SM clock a GPU holds under sustained load, per kind of work (a microbenchmark).

    python3 -m iosim.measure.clocks OUT.json

Each workload runs back to back for `seconds` while `nvidia-smi` samples the SM clock and the
power draw every 50 ms; samples of the first 0.5 s (ramp) are dropped; the median is reported
with the workload's throughput. Workloads: cuBLAS fp16 GEMM 8192³ (torch.matmul), the project's
FA-2 forward kernel (mma.sync), torch SDPA's flash (mma.sync) and cuDNN (wgmma) forward, and an
exp-bound kernel (ex2.approx, the calibrate microbenchmark's loop). Why: clocked rates (exp per
clock, shared-memory bytes per clock, issue slots) run at the clock the chip holds under the
work, which a tensor-heavy kernel pulls below the idle or reported maximum clock.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time


def _sample(fn, seconds: float) -> dict:
    cmd = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
           "-lms", "50"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        fn()
        n += 1
    elapsed = time.time() - t0
    proc.terminate()
    out, _ = proc.communicate(timeout=5)
    rows = []
    for line in out.strip().splitlines():
        try:
            mhz, watts = (float(x) for x in line.split(","))
            rows.append((mhz, watts))
        except ValueError:
            continue
    keep = rows[10:] if len(rows) > 20 else rows          # drop the first 0.5 s
    return {"sm_clock_mhz_median": statistics.median(r[0] for r in keep) if keep else None,
            "sm_clock_mhz_min": min(r[0] for r in keep) if keep else None,
            "power_w_median": statistics.median(r[1] for r in keep) if keep else None,
            "samples": len(keep), "calls": n, "seconds": elapsed}


def run(seconds: float = 3.0) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    out = {}

    def timed(fn, flops, reps=20):
        fn(); torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record(); torch.cuda.synchronize()
        return flops * reps / (a.elapsed_time(b) / 1e3)

    def loop(fn, k=10):
        def f():
            for _ in range(k):
                fn()
            torch.cuda.synchronize()
        return f

    n = 8192
    x = torch.randn(n, n, device="cuda", dtype=torch.float16)
    y = torch.randn(n, n, device="cuda", dtype=torch.float16)
    g = lambda: torch.matmul(x, y)  # noqa: E731
    out["cublas_gemm_fp16_8192"] = {"flops_per_s": timed(g, 2 * n ** 3), **_sample(loop(g), seconds)}
    del x, y

    for name, be, d, h in (("sdpa_flash_d128", "FLASH_ATTENTION", 128, 16),
                           ("sdpa_cudnn_d128", "CUDNN_ATTENTION", 128, 16),
                           ("sdpa_cudnn_d64", "CUDNN_ATTENTION", 64, 32)):
        b, s = 2, 8192
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
        backend = getattr(SDPBackend, be)

        def f(q=q, k=k, v=v, backend=backend):
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(q, k, v)
        try:
            out[name] = {"flops_per_s": timed(f, 4 * b * h * s * s * d), **_sample(loop(f), seconds)}
        except RuntimeError as exc:
            out[name] = {"error": str(exc)[:200]}
        del q, k, v

    try:
        from ..problem import AttentionProblem
        from .sweep import make_op
        c = dict(batch=2, heads_q=16, heads_kv=16, seq_q=8192, seq_kv=8192, head_dim=128,
                 dtype="fp16", causal=False, direction="fwd", config=0, runner="fa2",
                 impl="iosim", algorithm="fa2")
        op, _ = make_op(c, 1)
        p = AttentionProblem(batch=2, heads_q=16, seq_q=8192, head_dim=128)
        f = lambda: op(0)  # noqa: E731
        out["iosim_fa2_fwd_d128"] = {"flops_per_s": timed(f, p.useful_flops()),
                                     **_sample(loop(f), seconds)}
    except Exception as exc:   # a failing workload must not lose the others
        out["iosim_fa2_fwd_d128"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}

    try:
        import cupy as cp
        from .microbench import _SRC, exp_throughput, mma_sync_rate
        mod = cp.RawModule(code=_SRC, options=("--use_fast_math",))
        sm = torch.cuda.get_device_properties(0).multi_processor_count
        clk = torch.cuda.get_device_properties(0).clock_rate * 1e3 if hasattr(
            torch.cuda.get_device_properties(0), "clock_rate") else 1.98e9
        out["exp_bound"] = {**exp_throughput(mod, sm, clk),
                            **_sample(lambda: exp_throughput(mod, sm, clk), seconds)}
        out["mma_sync_bound"] = {**mma_sync_rate(mod, sm),
                                 **_sample(lambda: mma_sync_rate(mod, sm), seconds)}
    except Exception as exc:
        out["exp_bound"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    out["method"] = ("nvidia-smi clocks.sm and power.draw every 50 ms while the workload runs back "
                     "to back; median after the first 0.5 s")
    return out


if __name__ == "__main__":
    res = run(float(sys.argv[2]) if len(sys.argv) > 2 else 3.0)
    text = json.dumps(res, indent=2, sort_keys=True)
    open(sys.argv[1], "w").write(text)
    print(text)
