"""`iosim sweep` on a local Dask cluster against the same grid run serially in one process.

A 200-point grid (2 GPUs × 4 algorithms × 5 sequence lengths × 5 L2 sizes, simulated, fast
mode) is run serially (workers=0: every point in this process, one after another) and on a
local Dask cluster of `--workers` processes (wall time including the cluster's start-up and
the workers' first imports), alternately, `--repeat` times each. Every table must equal the
first; each pair's ratio of wall times is printed, with the machine's load average around it.

    python benchmarks/sweep_speed.py [--workers 2] [--repeat 2]

The ratio is bounded by the cores free while it runs: with 2 cores and other work keeping the
load average above 2, two workers cannot have two cores, and the ratio says more about the
neighbours than about the engine (with Linux's autogroup scheduling, all processes of one
session share one session's CPU share, so extra workers get no extra CPU at all). The CPU
seconds used by this process and by the workers are printed too, and from them the ratio the
same run would have with a free core per worker (an estimate, labelled as such). The output in benchmarks/results/sweep_speed.txt was produced
with `--repeat 1` (its first line says so); read it with its load averages.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import time

import pandas as pd

from iosim.sweep.engine import sweep

GRID = {"gpu": ["h100", "h200"], "algo": ["standard", "fa1", "fa2", "fa3"],
        "seq": [256, 512, 1024, 2048, 4096], "heads": 8,
        "l2_capacity_scale": [0.25, 0.5, 1, 2, 4]}
COLUMNS = ["point_id", "predicted_time_s", "dram_read_bytes", "counters.l2_to_smem_bytes",
           "error"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of its finished children (the Dask workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def timed(label: str, **kw) -> tuple[pd.DataFrame, float, tuple]:
    before = os.getloadavg()[0]
    c0 = cpu()
    t0 = time.perf_counter()
    df = sweep(GRID, **kw)
    t = time.perf_counter() - t0
    c1 = cpu()
    used = (c1[0] - c0[0], c1[1] - c0[1])
    print(f"{label:>22}: {t:7.1f} s wall, CPU {used[0]:6.1f} s here + {used[1]:6.1f} s in "
          f"workers  (1-min load average {before:.2f} at start, {os.getloadavg()[0]:.2f} at end)",
          flush=True)
    return df, t, used


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
    reference, ratios, cpu_ratios = None, [], []
    for r in range(args.repeat):
        s_df, s_t, s_cpu = timed(f"serial #{r + 1}", workers=0)
        d_df, d_t, d_cpu = timed(f"{args.workers} Dask workers #{r + 1}", workers=args.workers)
        reference = s_df if reference is None else reference
        for df in (s_df, d_df):
            pd.testing.assert_frame_equal(df[COLUMNS], reference[COLUMNS])
        ratios.append(s_t / d_t)
        # with a free core per worker: the workers' CPU split over them, plus what the client
        # and scheduler used (an estimate from CPU time, not a measurement of wall time)
        cpu_ratios.append(s_cpu[0] / (d_cpu[1] / args.workers + d_cpu[0]))
    print(f"tables equal ({len(reference)} rows); load average after: {load()}")
    print(f"speed-up (wall), {args.workers} workers vs serial, per pair: "
          + ", ".join(f"{x:.2f}x" for x in ratios) + f"; best {max(ratios):.2f}x")
    print(f"speed-up estimated from CPU time (a free core per worker), per pair: "
          + ", ".join(f"{x:.2f}x" for x in cpu_ratios))


if __name__ == "__main__":
    main()
