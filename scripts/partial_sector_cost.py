"""The H200's cost of a partial-sector write (GpuSpec.dram_partial_sector_write_cost_bytes),
from the store probe of measurements/h200/gemm_pitch/gemm_pitch.log (part B of
scripts/experiments/gemm_pitch_h200.py): the extra time of the one pitch whose rows start
mid-sector (N 3000), over the median rate of the pitches on the sector grid, as DRAM time at
the read rate, per partial-sector write the probe's tiles make
(algorithms.common.partial_sector_writes).

    python scripts/partial_sector_cost.py [LOG]
"""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

from iosim.algorithms.common import ceil_div, partial_sector_writes, rows_in_block
from iosim.hardware import load_gpu

LOG = Path(__file__).resolve().parents[1] / "measurements/h200/gemm_pitch/gemm_pitch.log"
TILE_ROWS, TILE_COLS, EB = 128, 256, 2      # the probe's tile_store kernel, fp16
LINE = re.compile(r"^store N(\d+) z(\d+)\s+([\d.]+) us\s+([\d.]+) TB/s\s+pitch mod 32 B = (\d+)")


def probe_rows(log: Path) -> list[dict]:
    rows = []
    for line in log.read_text().splitlines():
        m = LINE.match(line)
        if m:
            n, z, us, _tbs, mod = m.groups()
            rows.append({"n": int(n), "z": int(z), "s": float(us) * 1e-6, "mod": int(mod)})
    return rows


def probe_partial_writes(n: int, z: int) -> int:
    per = 0
    for i in range(ceil_div(n, TILE_ROWS)):
        for j in range(ceil_div(n, TILE_COLS)):
            per += partial_sector_writes(i * TILE_ROWS, rows_in_block(i, TILE_ROWS, n),
                                         j * TILE_COLS * EB,
                                         rows_in_block(j, TILE_COLS, n) * EB, n * EB)
    return per * z


def derive(log: Path = LOG, gpu: str = "h200-calibrated") -> dict:
    rows = probe_rows(log)
    aligned = [r for r in rows if r["mod"] == 0 and 2944 <= r["n"] <= 3072]
    rate = statistics.median(r["z"] * r["n"] ** 2 * EB / r["s"] for r in aligned)
    (odd,) = [r for r in rows if r["mod"] != 0]
    nbytes = odd["z"] * odd["n"] ** 2 * EB
    extra_s = odd["s"] - nbytes / rate
    writes = probe_partial_writes(odd["n"], odd["z"])
    read_rate = load_gpu(gpu).dram_read_bandwidth_bytes_per_s
    return {"aligned_rate_bytes_per_s": rate, "extra_s": extra_s, "partial_writes": writes,
            "cost_bytes": extra_s * read_rate / writes}


if __name__ == "__main__":
    r = derive(Path(sys.argv[1]) if len(sys.argv) > 1 else LOG)
    print(f"aligned pitches: median {r['aligned_rate_bytes_per_s'] / 1e12:.2f} TB/s; N 3000: "
          f"{r['extra_s'] * 1e6:.1f} us more for {r['partial_writes']:,} partial-sector writes; "
          f"cost {r['cost_bytes']:.1f} B of DRAM time at the read rate each")
