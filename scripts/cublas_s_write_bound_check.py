"""The model's S = Q Kᵀ kernel alone against the first cuBLAS probe of inner dimensions 32 … 256
(measurements/h200/cublas_s_write_bound/: nvjet_sm90_hsh_256x128_64x4_1x2, i.e. 128×256 tiles,
4 stages, clusters of 2 tile rows, given as `std_fwd_qk=128x256x4/2x1`; z 32, CUDA events), on
h200-calibrated at the clock `iosim run` simulates at, with the SM's GEMM epilogue path of the
config (machine.tma_epilogue_cost; its figures come from the second probe,
measurements/h200/cublas_epilogue_tiles/, by Nsight Compute) and without it. The events include
a Memset and the launch, and read this kernel ~7% longer than Nsight Compute's duration (that
probe's README), so the path's figures are checked here, not chosen.

    python scripts/cublas_s_write_bound_check.py > benchmarks/results/cublas_s_write_bound_check.txt
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from iosim.algorithms import build_schedule
from iosim.clock import sustained_simulation
from iosim.hardware import load_gpu
from iosim.problem import AttentionProblem

PROBE = Path(__file__).resolve().parents[1] / \
    "measurements/h200/cublas_s_write_bound/cublas_s_write_bound_h200.json"
TILES = "std_fwd_qk=128x256x4/2x1"


def predict(gpu, n: int, k: int):
    p = AttentionProblem(batch=1, heads_q=32, heads_kv=32, seq_q=n, seq_kv=n, head_dim=k)
    s = build_schedule(p, gpu, "standard", gemm_tiles=TILES)
    r, _at = sustained_simulation(replace(s, kernels=s.kernels[:1]), gpu,
                                  l2_protocol="ncu", time_protocol="warm")
    return r


def main() -> None:
    path = load_gpu("h200-calibrated")
    base = path.model_copy(update={"tma_epilogue_bytes_per_clock_per_sm": None,
                                   "tma_epilogue_serial_fraction": None})
    rows = json.loads(PROBE.read_text())["rows"]
    print(f"epilogue path: {path.tma_epilogue_bytes_per_clock_per_sm} B/clk/SM, serial fraction "
          f"{path.tma_epilogue_serial_fraction}; model / events - 1")
    print("N     K  probe us   no path (bound)      path (bound)")
    for r in sorted(rows, key=lambda r: (r["n"], r["k"])):
        if r["k"] < 32:      # the problem's smallest head dimension is 32
            continue
        a, b = predict(base, r["n"], r["k"]), predict(path, r["n"], r["k"])
        t = r["median_s"]
        print(f"{r['n']:5d} {r['k']:4d} {t * 1e6:9.1f}   {a.time_s / t - 1:+6.1%} "
              f"({a.kernels[0].bound_by:>6s})   {b.time_s / t - 1:+6.1%} ({b.kernels[0].bound_by:>6s})",
              flush=True)


if __name__ == "__main__":
    main()
