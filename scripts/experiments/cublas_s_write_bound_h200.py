"""Is cuBLAS's S = Q Kᵀ bound by its epilogue's writes? The same batched GEMM (fp16, z
matrices of N × N, torch.matmul as the standard attention calls it) at inner dimensions K = 16
… 256: if its time stays flat while K (its reads and FLOPs) grows, the kernel is bound by
writing S, and the write rate it reaches is the figure. Kernel names from torch's profiler (the
tile cuBLAS picks may change with K). CUDA events, median of 9 after 3 warm-ups. No
validation shape (z 32, N 8192 and 4096; the dataset's N 8192 row has z 32, d 128: only the
K = 128 point coincides with it).

    python3 scripts/experiments/cublas_s_write_bound_h200.py OUT.json
"""
from __future__ import annotations

import json
import statistics
import sys


def main(out_path: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    rows = []
    for n, z in ((8192, 32), (4096, 32)):
        for k in (16, 32, 64, 128, 256):
            q = torch.randn(z, n, k, device="cuda", dtype=torch.float16)
            kk = torch.randn(z, n, k, device="cuda", dtype=torch.float16)
            s = torch.empty(z, n, n, device="cuda", dtype=torch.float16)
            times = []
            for it in range(12):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                torch.matmul(q, kk.transpose(1, 2), out=s)
                b.record()
                b.synchronize()
                if it >= 3:
                    times.append(a.elapsed_time(b) * 1e-3)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                torch.matmul(q, kk.transpose(1, 2), out=s)
                torch.cuda.synchronize()
            names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
            t = statistics.median(times)
            sbytes = z * n * n * 2
            row = {"n": n, "z": z, "k": k, "median_s": t, "min_s": min(times),
                   "s_bytes": sbytes, "s_write_tb_per_s": sbytes / t / 1e12,
                   "tflops": 2 * z * n * n * k / t / 1e12, "kernels": names}
            rows.append(row)
            print(f"N {n} z {z} K {k:3d}: {t*1e6:9.1f} us  S {sbytes/t/1e12:5.2f} TB/s  "
                  f"{row['tflops']:6.1f} TFLOP/s  {names}", flush=True)
            del q, kk, s
            torch.cuda.empty_cache()
    json.dump({"probe": "cublas_s_write_bound", "torch": torch.__version__, "rows": rows},
              open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
