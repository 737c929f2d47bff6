"""In which order cuBLAS's persistent S = Q Kᵀ kernels write their tiles, seen through the
halves of shared sectors that miss each other (measurements/h200/tma_gap/: a pair misses once
~33 MiB of other dirty data was stored between its two writes, and each miss reads its sector
back from DRAM). torch.matmul in fp16 at N 3000 (row pitch ≡ 16 mod 32 bytes: every odd row's
tile edges fall mid-sector) and N 3008 (on the sector grid), d 64, over z = 1..48 matrices:
if the column tiles are visited outermost, the two writers of a column edge are z × (row
tiles) tiles apart, and the misses (DRAM reads beyond the operands') grow with z.

    python3 scripts/experiments/cublas_rmw_h200.py names OUT.json     # kernel names, grids
    python3 scripts/experiments/cublas_rmw_h200.py one N z            # one call, for ncu
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cublas_tiles_h200 import kernels_of  # noqa: E402

SHAPES = [(n, z) for n in (3000, 3008) for z in (1, 2, 4, 8, 16, 24, 32, 48)]
D = 64


def qk(n: int, z: int):
    import torch
    q = torch.randn(1, z, n, D, device="cuda", dtype=torch.float16)
    k = torch.randn(1, z, n, D, device="cuda", dtype=torch.float16)
    return lambda: torch.matmul(q, k.transpose(-1, -2))


if __name__ == "__main__":
    if sys.argv[1] == "one":
        import torch
        fn = qk(int(sys.argv[2]), int(sys.argv[3]))
        fn()
        torch.cuda.synchronize()
    else:
        rows = [{"n": n, "z": z, "kernels": kernels_of(qk(n, z))} for n, z in SHAPES]
        for r in rows:
            k = r["kernels"][0]
            print(r["n"], r["z"], k["name"][:60], k["grid"], k["dur_us"], flush=True)
        Path(sys.argv[2]).write_text(json.dumps({"rows": rows}, indent=1))
