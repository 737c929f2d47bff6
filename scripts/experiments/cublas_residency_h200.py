"""cuBLAS's align1 fallback kernels (odd N: cutlass_75 128x128 tiles, two CTAs per SM by
registers) at one and at two CTAs per SM: the same GEMM shape with z = 1, 2, ... matrices, so
the grid grows by a fixed number of tiles while every CTA's work stays the same. While the grid
fits the SMs one CTA each (<= 132), each SM runs one CTA alone; up to 264 some SMs hold two;
beyond, waves. The time per CTA-slot against the grid tells how much two co-resident CTAs
slow each other (1x: independent, 2x: fully serialized on a shared unit).

Shapes (none is a validation row): pv O[z, N, d] = P[z, N, N] V[z, N, d] at N 2049 and 4097,
d 128 (K loop N long); qk S[z, N, N] = Q Kᵀ at N 513 d 128 and N 1025 d 64 (K loop d long).
Per shape: the kernels cuBLAS ran (torch profiler: names, grids, the median of 5 calls' kernel
durations) and the call's CUDA-event time (median of 15 after 3 warm-ups).

    python3 scripts/experiments/cublas_residency_h200.py OUT.json
    python3 scripts/experiments/cublas_residency_h200.py --one pv 4097 128 4   # one call (ncu)
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

from cublas_align2_h200 import event_us, tensors

SWEEPS = {("pv", 2049, 128): (1, 2, 4, 6, 7, 8, 9, 10, 12, 14, 15, 16, 18, 20, 24, 28, 32, 36),
          ("pv", 4097, 128): (1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16),
          ("qk", 513, 128): (1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 14, 16, 18, 20, 22, 24),
          ("qk", 1025, 64): (1, 2, 3, 4, 5, 6, 7, 8)}


def kernel_durations(fn, calls: int = 5) -> list:
    """Per kernel one call of fn runs: name, grid, block, registers per thread, the median of
    `calls` calls' durations (us)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        ev = [e for e in json.load(open(f.name))["traceEvents"] if e.get("cat") == "kernel"]
    per = len(ev) // calls
    out = []
    for i in range(per):
        runs = ev[i::per]
        a = runs[0].get("args", {})
        out.append({"name": runs[0]["name"], "grid": a.get("grid"), "block": a.get("block"),
                    "registers": a.get("registers per thread"),
                    "dur_us": statistics.median(e["dur"] for e in runs)})
    return out


def main(out: Path) -> None:
    import torch
    rows = []
    for (form, n, d), zs in SWEEPS.items():
        for z in zs:
            fn = tensors(form, n, d, z)
            row = {"form": form, "n": n, "d": d, "z": z, "kernels": kernel_durations(fn),
                   "event_us": event_us(fn)}
            rows.append(row)
            k = row["kernels"]
            print(form, n, d, z, f"{row['event_us']:.1f} us",
                  [(x["name"][:60], x["grid"], x["dur_us"]) for x in k], flush=True)
            del fn
            torch.cuda.empty_cache()
    out.write_text(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                               "device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        import torch
        fn = tensors(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        fn()
        torch.cuda.synchronize()
    else:
        main(Path(sys.argv[1]))
