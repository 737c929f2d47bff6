"""The standard softmax's scalar-path copies at 2, 4 and its own CTAs per SM: Nsight Compute's
L2 -> SM bytes against the model's (softmax_code.rows_read_bytes with and without the L1's
keeping of trip-boundary sectors, copy_kept).

    python scripts/softmax_scalar_sectors.py     # output: benchmarks/results/softmax_scalar_sectors.txt

Data: measurements/h100/l1_l2_reuse/softmax_scalar_sectors_ncu.csv (the kernel alone, odd N,
B 1 H 16, launched at its own occupancy and padded to 2 and 4 CTAs per SM; no validation
shape; not used to build the model). The L1 beside each launch's carve-out is Nsight Compute's
(256 KB less launch__shared_mem_config_size); warps per SM = CTAs per SM x 4 rows.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path

from iosim.algorithms import softmax_code
from iosim.measure.ncu import raw_rows

DATA = (Path(__file__).resolve().parents[1] / "measurements" / "h100" / "l1_l2_reuse"
        / "softmax_scalar_sectors_ncu.csv")
HEADS, ROWS_PER_CTA, L1_AND_SHARED_BYTES = 16, 4, 256 * 1024


def points() -> list:
    """(N, CTAs per SM, L1 bytes, measured L2 -> SM bytes, model nothing kept, model)."""
    txt = DATA.read_text()
    launches = re.findall(r"ncu launch N (\d+) v(\d+) ctas (\d+) per_sm (\d+)", txt)
    rows = raw_rows(txt[txt.index('"ID"'):])
    if len(launches) != len(rows):
        raise SystemExit(f"{len(launches)} launches, {len(rows)} profiled kernels")
    out = []
    for (n, _v, _c, per_sm), r in zip(launches, rows):
        num = lambda k: float(str(r[k]).replace(",", ""))   # noqa: E731
        n, per_sm = int(n), int(per_sm)
        l1 = int(L1_AND_SHARED_BYTES - num("launch__shared_mem_config_size"))
        kept = softmax_code.copy_kept(n * 2, per_sm * ROWS_PER_CTA, l1)
        out.append((n, per_sm, l1, num("l1tex__m_xbar2l1tex_read_bytes.sum"),
                    softmax_code.rows_read_bytes(0, HEADS * n, n * 2, ()),
                    softmax_code.rows_read_bytes(0, HEADS * n, n * 2, kept)))
    return out


def main() -> int:
    pts = points()
    print(f"# standard softmax, scalar path, L2 -> SM bytes: Nsight Compute ({DATA.name}) "
          f"against the model")
    print(f"{'N':>6s} {'CTA/SM':>6s} {'L1_KB':>6s} {'ncu_MB':>9s} {'nothing_kept':>12s} {'model':>7s}")
    e0, e1 = [], []
    for n, per_sm, l1, meas, none, model in pts:
        e0.append(none / meas - 1)
        e1.append(model / meas - 1)
        print(f"{n:6d} {per_sm:6d} {l1 / 1024:6.0f} {meas / 1e6:9.2f} {e0[-1]:+12.2%} "
              f"{e1[-1]:+7.2%}")
    print(f"# {len(pts)} launches: mean |err| nothing kept {statistics.mean(map(abs, e0)):.2%} "
          f"(max {max(map(abs, e0)):.2%}), model {statistics.mean(map(abs, e1)):.2%} "
          f"(max {max(map(abs, e1)):.2%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
