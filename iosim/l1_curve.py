"""The SM's L1 beside a kernel's shared memory, and how likely a line it touched is still there.

What work costs needs it below the simulator: the schedules of cuBLAS's fallback GEMMs count
the sectors their 4-byte copies fetch again (algorithms/standard.py), and the simulator's L1
(sim/l1.py) models the loads that look it up. Both read the capacity (the carve-out the driver
gives a launch) and the H200 L1 probe's measured hit curve from here; sim/l1.py explains the
model and the probe.
"""
from __future__ import annotations

import csv
from bisect import bisect_left
from functools import lru_cache

from .paths import VALIDATION_DIR

KIB = 1024
# Hopper's shared-memory carve-outs per SM (Hopper Tuning Guide, CUDA C++ Programming Guide
# "Shared Memory" for compute capability 9.0: 0, 8, 16, 32, 64, 100, 132, 164, 196, 228 KB)
CARVEOUTS_KIB = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
# the driver's reserve per resident CTA (CUDA C++ Programming Guide, CC 8.x / 9.x: 1 KB;
# machine.occupancy counts it too)
RESERVED_SMEM_PER_CTA_BYTES = 1024
PROBE_CSV = VALIDATION_DIR / "l1_probe.csv"
# the probe rows the curve is read from: FA-1's O-tile size (8 KB) and store layout (mode 0)
PROBE_FILL_BYTES = 8192
PROBE_MODE = 0


@lru_cache(maxsize=1)
def probe_curves() -> tuple:
    """((capacity_bytes, ((stack_distance_bytes, hit_fraction), ...)), ...) from the L1
    probe's table, capacities ascending, distances ascending."""
    by_cap: dict = {}
    with open(PROBE_CSV, newline="") as f:
        for r in csv.DictReader(f):
            if int(r["mode"]) != PROBE_MODE or int(r["fill"]) != PROBE_FILL_BYTES:
                continue
            by_cap.setdefault(int(r["l1_bytes"]), []).append(
                (int(r["stack_distance_bytes"]), float(r["hit_fraction"])))
    return tuple((c, tuple(sorted(pts))) for c, pts in sorted(by_cap.items()))


def _interpolate(points: tuple, x: float) -> float:
    """Piecewise-linear through `points`, flat beyond the first and last."""
    xs = [p[0] for p in points]
    i = bisect_left(xs, x)
    if i == 0:
        return points[0][1]
    if i == len(points):
        return points[-1][1]
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def hit_probability(distance_bytes: float, capacity_bytes: float) -> float:
    """The measured probability that an L1 load whose line was last touched `distance_bytes`
    of other tiles ago hits, in an L1 of `capacity_bytes`."""
    if capacity_bytes <= 0:
        return 0.0
    curves = probe_curves()
    caps = [c for c, _ in curves]
    x = distance_bytes / capacity_bytes          # the distance in capacities
    j = bisect_left(caps, capacity_bytes)
    if j < len(caps) and caps[j] == capacity_bytes:
        return _interpolate(curves[j][1], distance_bytes)
    if j == 0 or j == len(caps):                 # outside the measured capacities: its shape
        c, pts = curves[0] if j == 0 else curves[-1]
        return _interpolate(pts, x * c)
    (c0, p0), (c1, p1) = curves[j - 1], curves[j]
    w = (capacity_bytes - c0) / (c1 - c0)
    return (1 - w) * _interpolate(p0, x * c0) + w * _interpolate(p1, x * c1)


def carveout_bytes(gpu, launch, ctas_per_sm: int) -> int | None:
    """The shared-memory carve-out the driver gives a kernel with `ctas_per_sm` resident CTAs:
    the smallest configuration that holds their shared memory (dynamic + static + 1 KB
    each). None where the GPU has no L1 model or its shared memory is not Hopper's."""
    if gpu.l1_shared_memory_bytes_per_sm is None or \
            gpu.shared_memory_per_sm_bytes != CARVEOUTS_KIB[-1] * KIB:
        return None
    need = ctas_per_sm * (launch.smem_bytes_per_cta + launch.static_smem_bytes
                          + RESERVED_SMEM_PER_CTA_BYTES)
    for kib in CARVEOUTS_KIB:
        if kib * KIB >= need:
            return kib * KIB
    return None


def l1_capacity_bytes(gpu, launch, ctas_per_sm: int) -> int:
    """The SM's L1 bytes beside the kernel's carve-out (0: no L1 model)."""
    carve = carveout_bytes(gpu, launch, ctas_per_sm)
    return 0 if carve is None else gpu.l1_shared_memory_bytes_per_sm - carve
