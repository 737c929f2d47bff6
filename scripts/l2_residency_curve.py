"""The L2 residency curve a GPU config carries (`l2_residency_miss_curve`), from the L2 reuse probe.

    python scripts/l2_residency_curve.py [measurements/h100/l1_l2_reuse/l2_reuse_probe.csv] [--gpu h100]

The probe (scripts/experiments/l2_reuse_probe.py) reads each 8 KiB tile once and re-reads it k
steps later; Nsight Compute's DRAM bytes give the fraction of its 48 steps of re-reads that
missed. An attention kernel's tiles are re-read by CTAs on any SM, so the measured fraction is
the mean of the probe's two re-readers that differ: the first reader's neighbour (r = 1; r = 0,
the same SM, is within 1.5 points of it) and a CTA half the grid away (r = 66), which misses
earlier. A configuration's re-reads do not all come at its nominal distance (2k - 1) x G tiles:
in its first k steps of re-reads fewer older tiles have been re-read in between, so the t-th
step's re-reads come at about (k + t) x G, and from then on at 2k x G - 1 (`step_distances`,
the probe's access order through an LRU stack). The curve at those steady distances is
solved so that, averaged over each configuration's own re-read steps, it gives the measured
fraction (a fixed-point iteration, kept non-decreasing and within [0, 1]).
Distances are in units of the GPU's L2 capacity (the config's l2_capacity_bytes) and the curve
starts at (0, 0). Prints the YAML line for the config.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

from iosim import load_gpu

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "measurements" / "h100" / "l1_l2_reuse" / "l2_reuse_probe.csv"
READERS = (1, 66)
MEASURED_STEPS = 48          # l2_reuse_probe.MEASURED_STEPS
ITERATIONS = 400


def step_distances(k: int, g: int, tile_bytes: int) -> list:
    """The mean stack distance (bytes) of each of the probe's 48 re-read steps of
    configuration k: k·G + (G − 1)/2 tiles at the first, G more at each step after, until
    2k·G − 1 (the LRU stack of the probe's access order; tests/test_l2_residency.py checks it
    against `probe_distances`)."""
    return [min(k * g + (g - 1) / 2 + t * g, 2 * k * g - 1) * tile_bytes
            for t in range(MEASURED_STEPS)]


def probe_distances(k: int, g: int, tile_bytes: int, r: int = 1) -> list:
    """Stack distances (bytes of other distinct tiles since its last access) of every re-read
    of the probe's configuration k, in its access order (step by step; in a step, CTA by CTA,
    its fresh tile then its re-read), through a Fenwick tree over access stamps."""
    n = (k + MEASURED_STEPS) * g * 2 + 1
    tree = [0] * (n + 1)
    last: dict = {}
    stamp = total = 0
    out = []

    def add(i, v):
        while i <= n:
            tree[i] += v
            i += i & -i

    def prefix(i):
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    def touch(key, reread):
        nonlocal stamp, total
        old = last.get(key)
        if old is not None:
            if reread:
                out.append((total - prefix(old)) * tile_bytes)
            add(old, -1)
            total -= 1
        stamp += 1
        add(stamp, 1)
        total += 1
        last[key] = stamp

    for t in range(k + MEASURED_STEPS):
        for c in range(g):
            touch((t, c), False)
            if t >= k:
                touch((t - k, (c + r) % g), True)
    return out


def interpolate(xs: list, ms: list, x: float) -> float:
    if x <= xs[0]:
        return ms[0]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            return ms[i - 1] + (ms[i] - ms[i - 1]) * (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ms[-1]


def predicted_fractions(xs: list, ms: list, distances: list, capacity_bytes: float) -> list:
    """Each configuration's mean miss fraction over its re-reads under the curve (xs, ms)."""
    return [sum(interpolate(xs, ms, d / capacity_bytes) for d in ds) / len(ds)
            for ds in distances]


def measured_fractions(path: Path) -> tuple:
    """(sm count, tile bytes, [(k, nominal distance bytes, mean miss fraction over READERS)])."""
    by_k: dict = {}
    g = tile = None
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            g, tile = int(r["sm_count"]), int(r["tile_bytes"])
            if int(r["r"]) in READERS:
                by_k.setdefault(int(r["k"]), []).append(
                    (float(r["reuse_distance_bytes"]), float(r["reread_miss_fraction"])))
    rows = []
    for k in sorted(by_k):
        got = by_k[k]
        if len(got) != len(READERS):
            raise SystemExit(f"k {k}: expected {len(READERS)} readers, got {len(got)}")
        rows.append((k, got[0][0], min(1.0, max(0.0, sum(m for _, m in got) / len(got)))))
    return g, tile, rows


def residency_curve(path: Path, capacity_bytes: float) -> list:
    """[(distance / capacity, miss fraction)]: the curve whose mean over each probe
    configuration's re-read distances is the measured fraction."""
    g, tile, rows = measured_fractions(path)
    distances = [step_distances(k, g, tile) for k, _, _ in rows]
    xs = [0.0] + [ds[-1] / capacity_bytes for ds in distances]
    want = [m for _, _, m in rows]
    ms = [0.0] + list(want)
    for _ in range(ITERATIONS):
        pred = predicted_fractions(xs, ms, distances, capacity_bytes)
        ms = [0.0] + [min(1.0, max(0.0, m + w - p)) for m, w, p in zip(ms[1:], want, pred)]
        for i in range(1, len(ms)):
            ms[i] = max(ms[i], ms[i - 1])
    return [(round(x, 4), round(m, 4)) for x, m in zip(xs, ms)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--gpu", default="h100")
    args = ap.parse_args(argv)
    curve = residency_curve(args.csv, load_gpu(args.gpu).l2_capacity_bytes)
    print("l2_residency_miss_curve: [" + ", ".join(f"[{x}, {m}]" for x, m in curve) + "]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
