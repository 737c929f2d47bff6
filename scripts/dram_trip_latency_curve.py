"""The DRAM's loaded-latency curves from the probe (measurements/h100/dram_loaded_latency/):
a dependent 2-KB warp trip's latency against the DRAM's utilization by a background stream,
read-only and 1:1 read:write, and the unloaded latencies of a line and of an L2 hit.

    python scripts/dram_trip_latency_curve.py [files ...]

Per background intensity (warps per SM, read-only or 1:1): the median over the runs and
repeats of the trip probe's ns per step and of the background's bytes per second. The
utilization of a point is its rate over the highest rate of the same mix in the same files
(the stream saturated: 3.08 TB/s read-only, 2.86 TB/s 1:1 on the H100 probed). The unloaded
figures come from the first repeat with no background (later repeats find the chain in L2:
they are the L2 hit latency). `dram_trip_latency` in the h100 config is this output.

The H200 (not probed: the device tool lent H100s) takes the H100's curves scaled by one
measured H200 figure: the softmax probe's load-only launches at one CTA per SM
(measurements/h200/softmax_scalar/: a warp's dependent trips over its row of S, the DRAM
lightly loaded), each trip's latency over the H100's read-only curve at that launch's own
utilization (its bytes over its time over the H200's read-only stream rate); the median ratio.
`dram_trip_latency` in the h200 configs is that output (--h200). tests/test_dram_trip_latency.py
recomputes both.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = sorted((ROOT / "measurements/h100/dram_loaded_latency").glob("*.json"))


def load_rows(paths) -> list:
    rows = []
    for p in paths:
        rows += json.loads(Path(p).read_text())["rows"]
    return rows


def unloaded(rows: list) -> dict:
    """ns per step with no background: `dram_*` the cold first repeat, `l2_*` the later ones."""
    out = {}
    for probe, name in (("256MiB", "line"), ("trip", "trip")):
        sel = [r for r in rows if r["bg_warps_per_sm"] == 0 and r["probe"] == probe]
        out[f"dram_{name}_ns"] = statistics.median(r["ns_per_step"] for r in sel
                                                   if r["repeat"] == 0)
        out[f"l2_{name}_ns"] = statistics.median(r["ns_per_step"] for r in sel
                                                 if r["repeat"] > 0)
    return out


def curve(rows: list, write: int) -> list:
    """[(utilization, trip latency in s)] of one mix, the unloaded trip first."""
    base = unloaded(rows)["dram_trip_ns"]
    loaded = [r for r in rows if r["bg_warps_per_sm"] > 0 and r["bg_write"] == write]
    peak = max(r["bg_bytes_per_s"] for r in loaded)
    points = [(0.0, base * 1e-9)]
    for w in sorted({r["bg_warps_per_sm"] for r in loaded}):
        sel = [r for r in loaded if r["bg_warps_per_sm"] == w]
        u = statistics.median(r["bg_bytes_per_s"] for r in sel) / peak
        ns = statistics.median(r["ns_per_step"] for r in sel if r["probe"] == "trip")
        points.append((round(u, 3), round(ns * 1e-9, 11)))
    # a monotone curve in utilization: a point at no higher utilization than the one before
    # (the saturated stream with more warps) keeps the larger latency at the last utilization
    out = [points[0]]
    for u, s in points[1:]:
        if u <= out[-1][0]:
            out[-1] = (out[-1][0], max(out[-1][1], s))
        else:
            out.append((u, s))
    return out


def at(points: list, u: float) -> float:
    """The curve's latency at utilization u (linear between points)."""
    from iosim.machine import _interpolate
    return _interpolate(points, u)


def h200_lone_trips() -> list:
    """(utilization, trip latency in s) of the H200 softmax probe's load-only launches at one
    CTA per SM: the load's time per row a warp copies, less the CTA turnover, over its trips."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from softmax_scalar_check import probe_rows
    from iosim.algorithms import softmax_code
    from iosim.hardware import load_gpu
    from iosim.machine import dram_read_rate
    gpu = load_gpu("h200-calibrated")
    turnover_s = gpu.cta_turnover_cycles / gpu.sm_clock_counted_max_hz
    out = []
    for r in probe_rows():
        if r["ctas_per_sm"] != 1:
            continue
        rows_per_warp = 16 * r["n"] / (gpu.sm_count * 4)
        trip_s = ((r["load_s"] / rows_per_warp - turnover_s)
                  / softmax_code.row_load_trips(2 * r["n"]))
        u = 16 * r["n"] * r["n"] * 2 / r["load_s"] / dram_read_rate(gpu)
        out.append((u, trip_s))
    return out


def h200_scale(rows: list) -> float:
    """The H200's trip latency over the H100's at the same utilization (h200_lone_trips)."""
    read = curve(rows, 0)
    return statistics.median(s / at(read, u) for u, s in h200_lone_trips())


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    h200 = "--h200" in args
    paths = [a for a in args if a != "--h200"] or DEFAULT
    rows = load_rows(paths)
    for k, v in unloaded(rows).items():
        print(f"{k}: {v:.1f}")
    scale = h200_scale(rows) if h200 else 1.0
    if h200:
        for u, s in h200_lone_trips():
            print(f"h200 lone trip: utilization {u:.3f}, {s * 1e9:.1f} ns")
        print(f"h200 scale: {scale:.4f}")
    for write, name in ((0, "read_only"), (1, "read_write_1to1")):
        pts = [[u, round(s * scale, 11)] for u, s in curve(rows, write)]
        print(f"{name}: {pts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
