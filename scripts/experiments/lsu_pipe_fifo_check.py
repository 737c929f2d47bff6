"""A CPU experiment, not part of the model: cuBLAS's align1 P V kernel with its K steps' L1
data-pipe wavefronts served by a per-SM FIFO (scripts/experiments/lsu_pipe_fifo.patch: a
Barrier's `wavefronts` on SmUnits.lsu at one per clock) instead of the per-CTA copy issue.
The wavefronts per byte are the Nsight Compute count of measurements/h200/cublas_wavefronts/
(N 4097 d 128: 1626 per 16 KiB step), the step's private latency is solved so that the lone
CTAs of the residency probe (grid <= 132) come out right on average, and every residency row
and the align1 probe's P V rows are then simulated.

    git apply scripts/experiments/lsu_pipe_fifo.patch
    python scripts/experiments/lsu_pipe_fifo_check.py
    git apply -R scripts/experiments/lsu_pipe_fifo.patch
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import align2_costs as a            # noqa: E402

from iosim import load_gpu                       # noqa: E402
from iosim.algorithms import cublas_fallback as cf   # noqa: E402

WAVEFRONTS_PER_BYTE = 1626 / 16384   # cublas_wavefronts_table.py: pv 4097 128, per CTA-step
STORE = cf.REGIMES[1, True].store_issue_cycles_per_byte


def main() -> int:
    gpu = load_gpu("h200-calibrated")
    reg = cf.REGIMES[1, True]
    if not hasattr(reg, "wavefronts_per_byte"):
        print("apply scripts/experiments/lsu_pipe_fifo.patch first")
        return 2
    reg.wavefronts_per_byte = WAVEFRONTS_PER_BYTE
    res = [dict(r, measured_us=r["kernels"][0]["dur_us"])
           for r in json.loads(a.RESIDENCY.read_text())["rows"]
           if r["form"] == "pv" and len(r["kernels"]) == 1 and r["kernels"][0]["registers"] == 252]
    probe = [r for r in a.measured_rows("align1") if r["form"] == "pv"]

    def grid(r):
        g = r["kernels"][0]["grid"]
        return g[0] * g[1] * g[2]

    def errs(step, rows):
        return [a.simulated_us(r, gpu, (step, 0.0, STORE), "align1") / r["measured_us"] - 1
                for r in rows]
    lone = [r for r in res if grid(r) <= gpu.sm_count]
    lo, hi = 0.0, 3000.0
    for _ in range(14):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if np.mean(errs(mid, lone)) > 0 else (mid, hi)
    step = (lo + hi) / 2
    print(f"# FIFO L1 data pipe, {WAVEFRONTS_PER_BYTE:.4f} wavefronts/B, copy issue 0, "
          f"private step latency {step:.0f} cycles (solved on the lone rows)")
    for r, e in zip(res, errs(step, res)):
        print(f"residency N {r['n']:5d} z {r['z']:3d} grid {grid(r):4d} {e:+7.1%}")
    for r, e in zip(probe, errs(step, probe)):
        print(f"align1 probe N {r['n']:5d} d {r['d']:3d} z {r['z']:3d} {e:+7.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
