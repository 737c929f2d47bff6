"""`iosim sweep` on a local Dask cluster against the same grid run serially in one process.

The default grid has 200 points: 2 GPUs (h100, h200) × 4 algorithms (standard, fa1, fa2, fa3)
× 5 sequence lengths (256 ... 4096) × 5 L2 capacities (0.25× ... 4× the GPU's), 8 heads,
simulated in fast mode; `--gpus --algos --seqs --l2-scales --heads` choose another grid of the
same kind. It is run serially (workers=0: every point in this process, one after another) and
on a local Dask cluster of `--workers` processes (wall time including the cluster's start-up,
the scheduling of the points and the cluster's shutdown), alternately, `--repeat` times each.
Every table must equal the first.

    python benchmarks/sweep_speed.py [--workers 2] [--repeat 2] [--seqs 256,512,1024] [--corun]

Per pair it prints the ratio of wall times, the CPU seconds of the serial run and of the
parallel one (the workers', and this process's: client, scheduler and nannies), and
N × serial CPU / parallel CPU, an upper bound on the wall speed-up of N workers on N cores,
whatever else runs on the machine. The wall ratio is bounded by the cores free while it runs:
with 2 cores and other work keeping the load average above 2, two workers cannot have two
cores, and the ratio says more about the neighbours than about the engine (with Linux's
autogroup scheduling, all processes of one session share one session's CPU share). The output
in benchmarks/results/sweep_speed.txt was produced with the command on its first line; read
it with its load averages. `--corun` adds the same grid's two halves (split on the GPU axis)
swept serially in two processes at once, without Dask, against one at a time: the extra CPU
two simulators need when they run together, which bounds any engine's speed-up below N.
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


def _list(kind):
    return lambda text: [kind(x) for x in text.split(",") if x]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of its finished children (the Dask workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def timed(label: str, grid: dict, **kw) -> tuple[pd.DataFrame, float, tuple]:
    before = os.getloadavg()[0]
    c0 = cpu()
    t0 = time.perf_counter()
    df = sweep(grid, **kw)
    t = time.perf_counter() - t0
    c1 = cpu()
    used = (c1[0] - c0[0], c1[1] - c0[1])
    print(f"{label:>22}: {t:7.1f} s wall, CPU {used[0]:6.1f} s here + {used[1]:6.1f} s in "
          f"workers  (1-min load average {before:.2f} at start, {os.getloadavg()[0]:.2f} at end)",
          flush=True)
    return df, t, used


def _half_cpu(grid: dict) -> float:
    t = time.process_time()
    sweep(grid)
    return time.process_time() - t


def corun(grid: dict) -> None:
    """The hardware's share of the parallel CPU, without Dask: the grid split in two on its GPU
    axis, each half swept serially in a forked process, first one after the other, then both
    at once; CPU-seconds of each. Two processes at once on the machine's cores use more CPU
    for the same points than one at a time (shared caches and memory bandwidth, and, where the
    cores are hyperthreads of one physical core, the core itself); no engine removes that."""
    import multiprocessing as mp
    gpus = grid["gpu"]
    if len(gpus) < 2:
        print("corun: needs at least two GPUs in the grid")
        return
    halves = [{**grid, "gpu": gpus[:len(gpus) // 2]}, {**grid, "gpu": gpus[len(gpus) // 2:]}]
    ctx = mp.get_context("fork")
    alone = []
    for h in halves:
        with ctx.Pool(1) as pool:
            alone.append(pool.apply(_half_cpu, (h,)))
    with ctx.Pool(2) as pool:
        together = pool.map(_half_cpu, halves, chunksize=1)
    print(f"corun (no Dask): halves one at a time {alone[0]:.1f} + {alone[1]:.1f} = "
          f"{sum(alone):.1f} CPU-s, both at once {together[0]:.1f} + {together[1]:.1f} = "
          f"{sum(together):.1f} CPU-s: x{sum(together) / sum(alone):.3f} for running two at "
          f"once (load average {load()})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2, help="serial/Dask pairs [2]")
    ap.add_argument("--gpus", type=_list(str), default=GRID["gpu"], help="comma-separated")
    ap.add_argument("--algos", type=_list(str), default=GRID["algo"], help="comma-separated")
    ap.add_argument("--seqs", type=_list(int), default=GRID["seq"], help="comma-separated")
    ap.add_argument("--l2-scales", type=_list(float), default=GRID["l2_capacity_scale"],
                    help="comma-separated L2 capacity factors")
    ap.add_argument("--heads", type=int, default=GRID["heads"])
    ap.add_argument("--corun", action="store_true",
                    help="also time the grid's two halves swept at once without Dask")
    args = ap.parse_args()
    grid = {"gpu": args.gpus, "algo": args.algos, "seq": args.seqs, "heads": args.heads,
            "l2_capacity_scale": args.l2_scales}
    n_points = 1
    for v in grid.values():
        n_points *= len(v) if isinstance(v, list) else 1
    print(f"grid: {n_points} points (gpus x algos x seq x L2 scale, simulated, fast mode) {grid}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load()}")
    reference, ratios, cpu_ratios, bounds = None, [], [], []
    for r in range(args.repeat):
        s_df, s_t, s_cpu = timed(f"serial #{r + 1}", grid, workers=0)
        d_df, d_t, d_cpu = timed(f"{args.workers} Dask workers #{r + 1}", grid,
                                 workers=args.workers)
        reference = s_df if reference is None else reference
        for df in (s_df, d_df):
            pd.testing.assert_frame_equal(df[COLUMNS], reference[COLUMNS])
        ratios.append(s_t / d_t)
        serial_cpu, parallel_cpu = s_cpu[0] + s_cpu[1], d_cpu[0] + d_cpu[1]
        # N cores can do N x the serial work per second at best: N x serial CPU over the CPU
        # the parallel run spent (workers + this process: client, scheduler, nannies) bounds
        # the wall speed-up from above, whatever the neighbours do
        bounds.append(args.workers * serial_cpu / parallel_cpu)
        # with a free core per worker and the client's work not overlapping theirs: the
        # workers' CPU split over them, plus what this process used (an estimate from CPU
        # time, not a measurement of wall time)
        cpu_ratios.append(serial_cpu / (d_cpu[1] / args.workers + d_cpu[0]))
        print(f"   pair #{r + 1}: serial CPU {serial_cpu:.1f} s, parallel CPU {parallel_cpu:.1f} s "
              f"({d_cpu[1]:.1f} s workers + {d_cpu[0]:.1f} s client); wall ratio "
              f"{ratios[-1]:.2f}x; CPU bound {args.workers} x serial / parallel = "
              f"{bounds[-1]:.2f}x", flush=True)
    print(f"tables equal ({len(reference)} rows); load average after: {load()}")
    print(f"speed-up (wall), {args.workers} workers vs serial, per pair: "
          + ", ".join(f"{x:.2f}x" for x in ratios) + f"; best {max(ratios):.2f}x")
    print(f"upper bound from CPU time ({args.workers} x serial CPU / parallel CPU), per pair: "
          + ", ".join(f"{x:.2f}x" for x in bounds))
    print("speed-up estimated from CPU time (a free core per worker), per pair: "
          + ", ".join(f"{x:.2f}x" for x in cpu_ratios))
    if args.corun:
        corun(grid)


if __name__ == "__main__":
    main()
