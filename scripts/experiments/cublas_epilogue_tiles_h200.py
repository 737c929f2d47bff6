"""How fast does a cuBLAS sm90 epilogue write its C tile, tile shape by tile shape? The S = Q Kᵀ
batched GEMM (fp16, z matrices of N × N, torch.matmul as the standard attention calls it) at an
inner dimension K small enough that the kernel is bound by writing S (K = 16: the first probe,
measurements/h200/cublas_s_write_bound/, found the kernel's time nearly flat from K = 16 to 64),
and at K = 64 / 128 beside it, at the sequence lengths whose kernels cuBLAS runs with other tiles
and clusters. No validation shape: K = 16 is no head dimension the datasets have; the K = 64 /
128 points use z = 16, where the validation rows of those N have other z (except where noted in
the README). CUDA events, median of 9 after 3 warm-ups; kernel names from torch's profiler.
`--ncu`: two launches per point, for Nsight Compute's gpu__time_duration (the validation's
time protocol) beside the events.

    python3 scripts/experiments/cublas_epilogue_tiles_h200.py OUT.json [--ncu]
"""
from __future__ import annotations

import json
import statistics
import sys

SHAPES = (2000, 2200, 2600, 2944, 3000, 3200, 3400, 4096, 4200, 4800, 5000, 5600, 6200, 7000,
          8192)
KS = (16, 64, 128)
Z = 16


def main(out_path: str, ncu: bool) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    rows = []
    iters, warm = (2, 0) if ncu else (12, 3)
    for n in SHAPES:
        for k in KS:
            q = torch.randn(Z, n, k, device="cuda", dtype=torch.float16)
            kk = torch.randn(Z, n, k, device="cuda", dtype=torch.float16)
            s = torch.empty(Z, n, n, device="cuda", dtype=torch.float16)
            times = []
            for it in range(iters):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                torch.matmul(q, kk.transpose(1, 2), out=s)
                b.record()
                b.synchronize()
                if it >= warm:
                    times.append(a.elapsed_time(b) * 1e-3)
            names = []
            if not ncu:
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    torch.matmul(q, kk.transpose(1, 2), out=s)
                    torch.cuda.synchronize()
                names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
            t = statistics.median(times)
            sbytes = Z * n * n * 2
            rows.append({"n": n, "z": Z, "k": k, "median_s": t, "min_s": min(times),
                         "s_bytes": sbytes, "s_write_tb_per_s": sbytes / t / 1e12,
                         "kernels": names})
            print(f"N {n} K {k:3d}: {t*1e6:9.1f} us  S {sbytes/t/1e12:5.2f} TB/s  {names}",
                  flush=True)
            del q, kk, s
            torch.cuda.empty_cache()
    json.dump({"probe": "cublas_epilogue_tiles", "torch": torch.__version__, "z": Z,
               "rows": rows}, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], "--ncu" in sys.argv[2:])
