"""The project's FA-3 kernel's O-store issue figure (fa3.O_STORE_ISSUE_CYCLES_PER_BYTE) from its
consumers' untraced stamps (measurements/h200/o_store/cta_phases_h200_consumers.json,
scripts/experiments/cta_phases_h200.py): per head dim, the mean over the shapes of the time
from the last consumer's loop end to its last store; less the model's normalise op (its ALU
unit time at the counted clock); over the CTA's O bytes, in cycles at the counted clock. The
figure is the mean over the two head dims.

    python scripts/fa3_o_store_from_stamps.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from iosim import load_gpu  # noqa: E402
from iosim.machine import SmRates  # noqa: E402

STAMPS = ROOT / "measurements/h200/o_store/cta_phases_h200_consumers.json"
TILES = {128: 128, 64: 192}      # block_q of the fa3 schedule's tiling at each head dim


def per_head_dim() -> dict:
    """{d: (mean epilogue ns, normalise ns, cycles per O byte)}."""
    gpu = load_gpu("h200-calibrated")
    clock = gpu.sm_clock_counted_max_hz
    alu_per_s = SmRates.of(gpu, "fp16").alu_ops_per_s * clock / gpu.clock_hz
    rows = json.loads(STAMPS.read_text())
    out = {}
    for d, bq in TILES.items():
        eps = [v["phases"]["last_consumer_epilogue"]["median_ns"] for k, v in rows.items()
               if k.startswith(f"fa3-d{d}-")]
        epilogue_ns = sum(eps) / len(eps)
        normalise_ns = bq * d / alu_per_s * 1e9
        out[d] = (epilogue_ns, normalise_ns, (epilogue_ns - normalise_ns) * 1e-9 * clock / (bq * d * 2))
    return out


def figure() -> float:
    vals = [v[2] for v in per_head_dim().values()]
    return round(sum(vals) / len(vals), 3)


if __name__ == "__main__":
    for d, (ep, nz, cpb) in per_head_dim().items():
        print(f"d {d}: epilogue {ep:.0f} ns, normalise {nz:.1f} ns -> {cpb:.4f} cycles per O byte")
    print(f"O_STORE_ISSUE_CYCLES_PER_BYTE = {figure()}")
