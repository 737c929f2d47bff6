"""`iosim sweep` on a local Dask cluster against the same grid run serially in one process.

A 200-point grid (2 GPUs × 4 algorithms × 5 sequence lengths × 5 L2 sizes, simulated, fast
mode) is run twice, in one invocation: serially (workers=0: every point in this process, one
after another) and on a local Dask cluster of `--workers` processes, wall time including the
cluster's start-up and the workers' first imports. Both tables must be equal; the ratio of the
wall times is printed last.

    python benchmarks/sweep_speed.py [--workers 2] [--order dask-first|serial-first]

The ratio is bounded by the cores free while it runs: on a machine whose cores other work also
uses, it is lower than on an idle one. The output in benchmarks/results/sweep_speed.txt was
produced by running it with no options; that file says what else the machine was doing.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import pandas as pd

from iosim.sweep.engine import sweep

GRID = {"gpu": ["h100", "h200"], "algo": ["standard", "fa1", "fa2", "fa3"],
        "seq": [256, 512, 1024, 2048, 4096], "heads": 16,
        "l2_capacity_scale": [0.25, 0.5, 1, 2, 4]}


def timed(**kw) -> tuple[pd.DataFrame, float]:
    t0 = time.perf_counter()
    df = sweep(GRID, **kw)
    return df, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--order", choices=["dask-first", "serial-first"], default="serial-first")
    args = ap.parse_args()
    n_points = 1
    for v in GRID.values():
        n_points *= len(v) if isinstance(v, list) else 1
    print(f"grid: {n_points} points {GRID}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    runs = {}
    for which in (["serial", "dask"] if args.order == "serial-first" else ["dask", "serial"]):
        kw = {"workers": 0} if which == "serial" else {"workers": args.workers}
        load = os.getloadavg()[0]
        runs[which] = timed(**kw)
        print(f"{which:>6}: {runs[which][1]:7.1f} s  "
              f"({'in this process' if which == 'serial' else f'{args.workers} local Dask workers'}; "
              f"1-min load average {load:.2f} at its start, {os.getloadavg()[0]:.2f} at its end)")
    (s_df, s_t), (d_df, d_t) = runs["serial"], runs["dask"]
    cols = ["point_id", "predicted_time_s", "dram_read_bytes", "counters.l2_to_smem_bytes",
            "error"]
    pd.testing.assert_frame_equal(s_df[cols], d_df[cols])
    refused = int(s_df["error"].notna().sum())
    print(f"tables equal ({len(s_df)} rows, {refused} refused); "
          f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"speed-up, {args.workers} workers vs serial: {s_t / d_t:.2f}x")


if __name__ == "__main__":
    main()
