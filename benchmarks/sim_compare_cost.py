"""`iosim compare` against one `iosim run`, whole processes, measured in one run.

Issue 11 asks that `iosim compare --gpu h100 --seq 32768` (standard, fa1, fa2, fa3) take at
most 6x the wall time of `iosim run --gpu h100 --seq 32768` (fa2). Both commands run as
subprocesses, alternated `--repeats` times so that the load of a shared machine falls on both
alike; the ratio of the medians is printed, with the wall of each algorithm run alone.

    python benchmarks/sim_compare_cost.py [--seq 32768] [--gpu h100] [--repeats 3]

Its output is committed in benchmarks/results/sim_compare_cost.txt.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from iosim.options import DEFAULT_ALGORITHMS


def wall_s(args: list) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "iosim", *args], check=True, capture_output=True,
                   env={**os.environ, "TQDM_DISABLE": "1"})
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=32768)
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    common = ["--gpu", a.gpu, "--seq", str(a.seq)]
    runs, compares = [], []
    for _ in range(a.repeats):
        runs.append(wall_s(["run", *common]))
        compares.append(wall_s(["compare", *common]))
    alone = {algo: wall_s(["run", "--algo", algo, *common]) for algo in DEFAULT_ALGORITHMS}
    r, c = statistics.median(runs), statistics.median(compares)
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"run (fa2)  walls {', '.join(f'{w:.2f}' for w in runs)} s, median {r:.2f} s")
    print(f"compare    walls {', '.join(f'{w:.2f}' for w in compares)} s, median {c:.2f} s")
    print("alone      " + ", ".join(f"{k} {w:.2f} s" for k, w in alone.items()))
    print(f"compare / run = {c / r:.1f}x (target <= 6x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
