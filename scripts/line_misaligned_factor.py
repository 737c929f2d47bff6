"""The H200's DRAM-time factor of a row stream whose rows start off the 128-byte line
(GpuSpec.dram_line_misaligned_stream_factor), from the softmax pitch probe
(measurements/h200/softmax_pitch/softmax_pitch_h200.json, scripts/experiments/softmax_pitch_h200.py):
the copy-only variant of the project's softmax kernel (S read, P written by plain loads and
stores, no arithmetic), grouped by N (~2000, ~3000, ~5000, ~7000: like CTAs per SM within a
group); per group the median rate of the pitches on the line over the median of those off it;
the factor is the median of the groups' ratios.

    python scripts/line_misaligned_factor.py [JSON]
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

JSON = (Path(__file__).resolve().parents[1]
        / "measurements/h200/softmax_pitch/softmax_pitch_h200.json")
GROUPS = ((1900, 2100), (2900, 3100), (4900, 5200), (6900, 7200))


def derive(path: Path = JSON) -> dict:
    rows = json.loads(Path(path).read_text())["softmax"]
    ratios = []
    for lo, hi in GROUPS:
        g = [r for r in rows if lo <= r["n"] < hi]
        rate = lambda r: r["bytes"] / r["v1_us"]  # noqa: E731
        on = statistics.median(rate(r) for r in g if r["pitch_mod_128"] == 0)
        off = statistics.median(rate(r) for r in g if r["pitch_mod_128"] != 0)
        ratios.append(on / off)
    return {"group_ratios": ratios, "factor": statistics.median(ratios)}


if __name__ == "__main__":
    r = derive(Path(sys.argv[1]) if len(sys.argv) > 1 else JSON)
    print("per group (N ~2000, ~3000, ~5000, ~7000):",
          " ".join(f"{x:.3f}" for x in r["group_ratios"]), f"-> factor {r['factor']:.3f}")
