"""cuBLAS's Ampere fallback on the H200: the GEMMs of standard attention whose S / P row pitch
(N x 2 bytes, fp16) is not a multiple of 16 bytes, which no TMA descriptor describes, so
torch.matmul runs cutlass_80 mma.sync kernels with 2-element (4-byte) copies ("align2").

For each shape: the kernels cuBLAS ran (names and grids from the torch profiler), and the
GEMM's time by CUDA events (median of 15 after 3 warm-ups). Shapes (none is a validation row):
  qk  S[z, N, N] = Q[z, N, d] Kᵀ, N in {2996, 4002, 5006} (pitch mod 16 = 8, 4, 12 B),
      d = K-loop length 32 / 64 / 128 / 256 (the per-k-step cost is the slope in d),
      and the aligned neighbours N 3000 / 4000 / 5000 at d 64, 128 for comparison;
  pv  O[z, N, d] = P[z, N, N] V[z, N, d], N in {1498, 2996, 4002, 6006}, d 64 and 128;
  pt  dV = Pᵀ dO (the backward's dV and dK), N 2996 and 4002, d 128 (its dP = dO Vᵀ is the
      qk form, dQ = dS K the pv form).
z = round(2e8 / N²) matrices (S about 400 MB).

    python3 scripts/experiments/cublas_align2_h200.py OUT.json          # the table
    python3 scripts/experiments/cublas_align2_h200.py --odd OUT.json    # the align1 table (N+1)
    python3 scripts/experiments/cublas_align2_h200.py --one qk 2996 128  # one call (for ncu)
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from cublas_tiles_h200 import kernels_of


def tensors(form: str, n: int, d: int, z: int):
    import torch
    r = lambda *s: torch.randn(*s, device="cuda", dtype=torch.float16)  # noqa: E731
    if form == "qk":
        q, k = r(z, n, d), r(z, n, d)
        return lambda: torch.matmul(q, k.transpose(-1, -2))
    if form == "pv":
        p, v = r(z, n, n), r(z, n, d)
        return lambda: torch.matmul(p, v)
    p, do = r(z, n, n), r(z, n, d)          # "pt": dV = Pᵀ dO (and dK = dSᵀ Q)
    return lambda: torch.matmul(p.transpose(-1, -2), do)


def event_us(fn, reps: int = 15) -> float:
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)


def shapes(odd: bool = False):
    """The align2 set (N·2 bytes off 16, even N) or, odd, the align1 set (odd N: N·2 bytes off
    4 too, where cuBLAS runs cutlass_75 kernels with 2-byte accesses): N + 1 for each N."""
    if odd:
        for form, n, d in shapes():
            if n % 8:
                yield form, n + 1, d
        return
    for n in (2996, 4002, 5006):
        for d in (32, 64, 128, 256):
            yield "qk", n, d
    for n in (3000, 4000, 5000):
        for d in (64, 128):
            yield "qk", n, d
    for n in (1498, 2996, 4002, 6006):
        for d in (64, 128):
            yield "pv", n, d
    for n in (2996, 4002):
        yield "pt", n, 128


def main(out: Path, odd: bool = False) -> None:
    import torch
    rows = []
    for form, n, d in shapes(odd):
        z = max(1, round(2e8 / n ** 2))
        fn = tensors(form, n, d, z)
        row = {"form": form, "n": n, "d": d, "z": z, "kernels": kernels_of(fn),
               "event_us": event_us(fn)}
        rows.append(row)
        print(form, n, d, z, f"{row['event_us']:.1f} us",
              [(k["name"][:70], k["grid"], k["dur_us"]) for k in row["kernels"]], flush=True)
        del fn
        torch.cuda.empty_cache()
    out.write_text(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                               "device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        form, n, d = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        f = tensors(form, n, d, max(1, round(2e8 / n ** 2)))
        f()
        import torch
        torch.cuda.synchronize()
    elif sys.argv[1] == "--odd":
        main(Path(sys.argv[2]), odd=True)
    else:
        main(Path(sys.argv[1]))
