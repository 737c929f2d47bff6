"""The model's S = Q Kᵀ kernel alone against the cuBLAS probe of inner dimensions 32 … 256
(measurements/h200/cublas_s_write_bound/, the same 128×256 tiles the probe's nvjet kernel ran,
given), on h200-calibrated, in the fast mode. K = 16 and 32 chose the epilogue's write figure
(GpuSpec.gemm_epilogue_write_bytes_per_s); K = 64 … 256 check it.

    python scripts/cublas_s_write_bound_check.py > benchmarks/results/cublas_s_write_bound_check.txt
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from iosim.algorithms import build_schedule
from iosim.hardware import load_gpu
from iosim.problem import AttentionProblem
from iosim.sim import simulate

PROBE = Path(__file__).resolve().parents[1] / \
    "measurements/h200/cublas_s_write_bound/cublas_s_write_bound_h200.json"


def main() -> None:
    gpu = load_gpu("h200-calibrated")
    measured = {(r["n"], r["k"]): r["median_s"] for r in json.loads(PROBE.read_text())["rows"]}
    print("N     K   model us  probe us   err   bound")
    for (n, k), t in sorted(measured.items()):
        if k < 32:      # the problem's smallest head dimension is 32
            continue
        p = AttentionProblem(batch=1, heads_q=32, heads_kv=32, seq_q=n, seq_kv=n, head_dim=k)
        s = build_schedule(p, gpu, "standard", gemm_tiles="std_fwd_qk=128x256x4")
        r = simulate(replace(s, kernels=s.kernels[:1]), gpu, "fast")
        print(f"{n:5d} {k:4d} {r.time_s * 1e6:9.1f} {t * 1e6:9.1f} {r.time_s / t - 1:+6.1%}   "
              f"{r.kernels[0].bound_by}")


if __name__ == "__main__":
    main()
