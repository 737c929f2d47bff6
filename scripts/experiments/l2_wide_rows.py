"""DRAM bytes of the validation's two FA-2 rows at N >= 65,536 (the L2-refetch regime), both
engines, as `iosim validate` counts bytes (Nsight Compute's protocol) on h200-calibrated.

    python scripts/experiments/l2_wide_rows.py [fast] [exact]

Measured (iosim/data/validation/measured_h200_wide.csv): 557.4 / 6323.2 MB read. With
scripts/experiments/l2_distance_curve.patch applied and IOSIM_L2_DISTANCE=1 set, exact mode's
L2 hits by LRU stack distance (the experiment in docs/validation.md, "DRAM bytes").
"""
from __future__ import annotations

import sys
import time

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.sim import simulate

ROWS = (("iosim-fa2-fwd-N65536-d128-H4-B1-fp16-full", 65536, 4, False),
        ("iosim-fa2-fwd-N131072-d128-H2-B1-fp16-causal", 131072, 2, True))


def main(modes) -> int:
    gpu = load_gpu("h200-calibrated")
    for rid, n, h, causal in ROWS:
        s = build_schedule(AttentionProblem(heads_q=h, heads_kv=h, seq_q=n, seq_kv=n,
                                            head_dim=128, causal=causal),
                           gpu, "fa2", block_q=128, block_kv=64, stages=2, warps=4)
        for m in modes:
            t0 = time.perf_counter()
            r = simulate(s, gpu, m, l2_protocol="ncu")
            print(f"{rid} {m:5s} read {r.dram_read_bytes / 1e6:8.1f} MB  write "
                  f"{r.dram_write_bytes / 1e6:6.1f} MB  ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or ["fast", "exact"]))
