"""TMA copies whose rows start off the 32-byte sector, against the H200 probe of
measurements/h200/tma_pitch/ (Nsight Compute): a box row reads every sector it touches, and a
sector two stores share costs what the model charges when its halves meet in L2."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from iosim.algorithms.common import ceil_div, rows_in_block, sector_bytes_read
from iosim.algorithms.standard import Operand
from iosim.hardware import load_gpu
from iosim.machine import dram_read_rate, partial_sector_write_cost_bytes

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "measurements/h200/tma_pitch"


def _script():
    """scripts/shared_sector_misses.py: the probes' Nsight Compute logs and shared-sector count."""
    spec = importlib.util.spec_from_file_location("shared_sector_misses",
                                                  ROOT / "scripts/shared_sector_misses.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SCRIPT = _script()


def ncu_rows() -> dict:
    """{(kind, n, tc, bc, hint, order): {metric: value}} from the probe's Nsight Compute log."""
    return {(kind, *map(int, nums)): v for (kind, *nums), v in
            SCRIPT.ncu_blocks(PROBE / "tma_pitch_ncu.txt").items()}


def z_for(n: int) -> int:
    return max(1, round(432_000_000 / (2 * n * n)))


def test_sector_bytes_read_closed_forms():
    # aligned rows of whole sectors read their bytes
    assert sector_bytes_read(0, 64, 0, 128, 6016) == 64 * 128
    # pitch ≡ 16 mod 32: every other row's 128-byte segment touches 5 sectors
    assert sector_bytes_read(0, 64, 0, 128, 6000) == 32 * 128 + 32 * 160
    assert sector_bytes_read(1, 1, 0, 128, 6000) == 160
    # a segment that ends inside a sector reads the whole last sector
    assert sector_bytes_read(0, 3, 0, 112, 4096) == 3 * 128
    # pitch ≡ 8 mod 32 (4-row period): offsets 0, 8, 16, 24
    assert sector_bytes_read(0, 4, 0, 128, 8 + 32 * 100) == 128 + 3 * 160


@pytest.mark.parametrize("n", [3000, 3008, 3016, 4000, 4008])
def test_tma_box_loads_cross_the_sectors_they_touch(n):
    """The probe's load kernel: a CTA per 128-row block, 64-column boxes across the row. The
    panels standard attention's GEMMs describe (Operand.panel with a TMA box) give Nsight
    Compute's L2→SM bytes: exactly on the sector grid, within 0.25% off it (one sector a
    misaligned row more than the rule counts); without the rule they would miss by 12.5%."""
    eb, rows, cols, z = 2, 128, 64, z_for(n)
    x = Operand("X", eb)
    total = 0
    for i in range(ceil_div(n, rows)):
        for kstep in range(ceil_div(n, cols)):
            load = x.panel((0,), i, kstep, rows_in_block(i, rows, n), rows_in_block(kstep, cols, n),
                           rows_along_k=False, box=(rows, cols), outer_index=i, pitch_bytes=n * eb)
            total += load.bytes + load.oob_bytes
    measured = ncu_rows()[("load", n, 64, 64, 0, 0)]["l1tex__m_xbar2l1tex_read_bytes.sum"]
    assert total * z == pytest.approx(measured, rel=3e-3)


shared_sectors = SCRIPT.shared_sectors


@pytest.mark.parametrize("n,tile", [(3000, 128), (3000, 256), (3008, 168)])
def test_a_shared_sector_whose_halves_meet_in_l2_costs_the_models_figure(n, tile):
    """TMA stores of tiles launched side by side (order 0): the time beyond the aligned pitch's,
    per shared sector, against two partial writes at machine.partial_sector_write_cost_bytes
    (solved from a plain-store probe, not from these rows), at the DRAM read rate."""
    gpu = load_gpu("h200-calibrated")
    rows = {(r["kind"], r["n"], r["tc"], r["bc"], r["hint"], r["order"]): r["us"]
            for r in json.loads((PROBE / "tma_store_h200.json").read_text())["rows"]}
    t = rows[("tma", n, tile, tile, 0, 0)]
    aligned = tile if n == 3000 else 128           # the same tile at N 3008, else 128 wide
    base = rows[("tma", 3008, aligned, aligned, 0, 0)]
    base *= (n * n * z_for(n)) / (3008 * 3008 * z_for(3008))      # the same time per byte
    per_sector_s = (t - base) * 1e-6 / shared_sectors(n, z_for(n), tile)
    model_s = 2 * partial_sector_write_cost_bytes(gpu) / dram_read_rate(gpu)
    assert per_sector_s == pytest.approx(model_s, rel=0.15)


def test_halves_that_miss_each_other_cost_a_read_modify_write():
    """Launched apart (order 1), each half is written back alone: two DRAM sector reads per
    shared sector (not modelled yet: docs/validation.md, DRAM bytes)."""
    m = ncu_rows()
    apart = m[("tma", 3000, 128, 128, 0, 1)]
    together = m[("tma", 3000, 128, 128, 0, 0)]
    sectors = shared_sectors(3000, z_for(3000), 128)
    extra_reads = (apart["dram__bytes_read.sum"] - together["dram__bytes_read.sum"]) / 32
    assert extra_reads / sectors == pytest.approx(2.0, rel=0.1)


def test_standard_attentions_pv_panels_cross_the_sectors_their_rows_touch():
    """O = P·V at N 3000 (P's pitch 6000 B ≡ 16 mod 32) on a given 128 × 64 tile: P's boxes
    (128 rows × 64 columns, 47 K steps) read 128 B a row on even rows and past the edge, 160 B on
    odd rows; V's boxes (64 rows × 64 columns, 128-byte rows on the sector grid) 128 B a row."""
    from iosim.algorithms import build_schedule
    from iosim.problem import AttentionProblem
    n, z = 3000, 2
    p = AttentionProblem(batch=1, heads_q=z, heads_kv=z, seq_q=n, seq_kv=n, head_dim=64)
    pv = build_schedule(p, "h200", "standard", gemm_tiles="std_fwd_pv=128x64x4").kernels[2]
    steps, blocks = ceil_div(n, 64), ceil_div(n, 128)
    p_bytes = z * steps * (blocks * 128 * 128 + (n // 2) * 32)
    v_bytes = z * blocks * steps * 64 * 128
    assert pv.totals().bytes_loaded == p_bytes + v_bytes


def test_the_merge_window_probe_misses_more_pairs_the_more_is_stored_between_them():
    """measurements/h200/tma_gap/: the missed share grows with the MiB stored between a pair's
    two writes, none side by side, all half the kernel apart, half near 33 MiB."""
    curve = SCRIPT.gap_curve()
    shares = [f for _g, _mib, _us, f in curve]
    assert shares[0] == 0 and shares[-1] == 1
    assert all(b >= a - 0.005 for a, b in zip(shares, shares[1:]))
    half = next(mib for _g, mib, _us, f in curve if f >= 0.5)
    assert 22 < half < 44
