"""The L2 reuse probe's re-read misses by reuse distance, against what the model's L2 says.

    python scripts/l2_reuse_table.py measurements/<gpu>/l2_reuse/l2_reuse_probe.csv [--gpu h200]

For each reuse distance the probe measured (scripts/experiments/l2_reuse_probe.py: a tile read
once, then again after about (2k - 1) x SMs tiles of other reads; r = which CTA re-reads it),
the measured fraction of re-read bytes that came from DRAM, beside:
  - lru:    the model's L2, an LRU of l2_effective_fraction (0.70) x the config's capacity: a
            re-read misses iff its distance exceeds that capacity;
  - cyclic: the cyclic probe's re-read misses (iosim/data/validation/l2_probe.csv,
            read_rotating) for a buffer as large as the distance (H200 only: that probe ran
            there).
"""
from __future__ import annotations

import argparse
import csv
from bisect import bisect_left
from pathlib import Path

from iosim import load_gpu
from iosim.paths import VALIDATION_DIR
from iosim.sim.memory import L2_EFFECTIVE_FRACTION

MIB = 1 << 20


def probe_rows(path) -> list:
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def cyclic_curve() -> list:
    """(buffer bytes, re-read miss fraction) of the cyclic probe's rotating rows: of its 4
    passes the first misses whole, so re-read misses = (DRAM / (bytes x passes) - 1/4) / (3/4)."""
    out = []
    with open(VALIDATION_DIR / "l2_probe.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["variant"] == "read_rotating":
                b, p = float(r["buffer_bytes"]), float(r["passes"])
                x = float(r["dram_read_bytes"]) / (b * p)
                out.append((b, max(0.0, (x - 1 / p) / (1 - 1 / p))))
    return sorted(out)


def interpolate(points: list, x: float) -> float | None:
    xs = [p[0] for p in points]
    i = bisect_left(xs, x)
    if i == 0 or i == len(points):
        return None
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--gpu", default="h200")
    args = ap.parse_args(argv)
    gpu = load_gpu(args.gpu)
    lru_bytes = L2_EFFECTIVE_FRACTION * gpu.l2_capacity_bytes
    cyc = cyclic_curve() if "H200" in gpu.name else []
    rows = probe_rows(args.csv)
    rs = sorted({int(r["r"]) for r in rows})
    print(f"# L2 re-read misses by reuse distance ({args.csv}); model: {gpu.name}, LRU of "
          f"{lru_bytes / MIB:.1f} MiB")
    print(f"{'k':>3s} {'dist_MiB':>8s} " + " ".join(f"{'r=' + str(r):>8s}" for r in rs)
          + f" {'lru':>6s} {'cyclic':>7s}")
    for k in sorted({int(r["k"]) for r in rows}):
        here = {int(r["r"]): r for r in rows if int(r["k"]) == k}
        dist = next(iter(here.values()))["reuse_distance_bytes"]
        c = interpolate(cyc, dist) if cyc else None
        print(f"{k:3d} {dist / MIB:8.1f} "
              + " ".join(f"{here[r]['reread_miss_fraction']:8.1%}" if r in here else f"{'':8s}"
                         for r in rs)
              + f" {1.0 if dist > lru_bytes else 0.0:6.0%} "
              + (f"{c:7.1%}" if c is not None else f"{'':>7s}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
