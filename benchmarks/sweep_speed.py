"""`iosim sweep` on a local Dask cluster against the same grid run serially in one process.

A 200-point grid (2 GPUs × 4 algorithms × 5 sequence lengths × 5 L2 sizes, simulated, fast
mode) is run serially (workers=0: every point in this process, one after another) and on a
local Dask cluster of `--workers` processes (wall time including the cluster's start-up and
the workers' first imports), alternately, `--repeat` times each. Every table must equal the
first; each pair's ratio of wall times is printed, with the machine's load average around it.

    python benchmarks/sweep_speed.py [--workers 2] [--repeat 2]

The ratio is bounded by the cores free while it runs: with 2 cores and other work keeping the
load average above 2, two workers cannot have two cores, and the ratio says more about the
neighbours than about the engine. The output in benchmarks/results/sweep_speed.txt was produced
by running it with no options; read it with its load averages.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import pandas as pd

from iosim.sweep.engine import sweep

GRID = {"gpu": ["h100", "h200"], "algo": ["standard", "fa1", "fa2", "fa3"],
        "seq": [256, 512, 1024, 2048, 4096], "heads": 4,
        "l2_capacity_scale": [0.25, 0.5, 1, 2, 4]}
COLUMNS = ["point_id", "predicted_time_s", "dram_read_bytes", "counters.l2_to_smem_bytes",
           "error"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(label: str, **kw) -> tuple[pd.DataFrame, float]:
    before = os.getloadavg()[0]
    t0 = time.perf_counter()
    df = sweep(GRID, **kw)
    t = time.perf_counter() - t0
    print(f"{label:>22}: {t:7.1f} s  (1-min load average {before:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at end)", flush=True)
    return df, t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    n_points = 1
    for v in GRID.values():
        n_points *= len(v) if isinstance(v, list) else 1
    print(f"grid: {n_points} points {GRID}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load()}")
    reference, ratios = None, []
    for r in range(args.repeat):
        s_df, s_t = timed(f"serial #{r + 1}", workers=0)
        d_df, d_t = timed(f"{args.workers} Dask workers #{r + 1}", workers=args.workers)
        reference = s_df if reference is None else reference
        for df in (s_df, d_df):
            pd.testing.assert_frame_equal(df[COLUMNS], reference[COLUMNS])
        ratios.append(s_t / d_t)
    print(f"tables equal ({len(reference)} rows); load average after: {load()}")
    print(f"speed-up, {args.workers} workers vs serial, per pair: "
          + ", ".join(f"{x:.2f}x" for x in ratios) + f"; best {max(ratios):.2f}x")


if __name__ == "__main__":
    main()
