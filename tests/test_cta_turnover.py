"""CTA turnover: an SM slot is free for the next CTA `cta_turnover_cycles` after its CTA's last
instruction (retirement + launch), measured on the H200 (measurements/h200/cta_turnover_h200.json,
scripts/cta_turnover_h200.py), in both engines."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from iosim import AttentionProblem
from iosim.hardware import load_gpu
from iosim.machine import SmRates, cta_turnover_s
from iosim.schedule import Alu, Kernel, Launch, Schedule
from iosim.sim import simulate

MEASURED = Path(__file__).parent.parent / "measurements" / "h200" / "cta_turnover_h200.json"


def test_h200_figure_is_the_measured_median_without_stores():
    rows = json.loads(MEASURED.read_text())["rows"]
    plain = [r["gap_cycles_median"] for r in rows if r["store_bytes"] == 0]
    assert len(plain) == 8
    assert load_gpu("h200").cta_turnover_cycles == pytest.approx(statistics.median(plain), rel=0.03)
    assert load_gpu("h200-calibrated").cta_turnover_cycles == load_gpu("h200").cta_turnover_cycles


def test_coalesced_stores_before_exit_leave_the_turnover_unchanged():
    rows = json.loads(MEASURED.read_text())["rows"]
    plain = statistics.median(r["gap_cycles_median"] for r in rows if r["store_bytes"] == 0)
    coal = [r["gap_cycles_median"] for r in rows if r["store_bytes"] and r["layout"] == "coalesced"]
    assert coal and all(abs(g - plain) / plain < 0.05 for g in coal)


def test_turnover_is_cycles_at_the_clock_and_absent_where_not_measured():
    g = load_gpu("h200")
    assert cta_turnover_s(g) == pytest.approx(420 / g.clock_hz)
    assert cta_turnover_s(load_gpu("a100")) == 0.0


def _alu_schedule(gpu, waves: int, ops: int) -> Schedule:
    """waves x sm_count CTAs of one Alu op each, one CTA per SM (shared memory)."""
    n = waves * gpu.sm_count
    k = Kernel("alu", Launch((n, 1, 1), 128, gpu.shared_memory_per_block_bytes - 2048, 32),
               lambda c: (Alu("x", ops),), ((0, n),), lambda c: (c, 0, 0))
    return Schedule("test", AttentionProblem(seq_q=128), None, (k,))


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_each_wave_pays_the_turnover_once(mode):
    """No memory, identical CTAs: the kernel takes waves x (op time + turnover)."""
    g = load_gpu("h200")
    ops = 1_000_000
    op_s = ops / SmRates.of(g, "fp16").alu_ops_per_s
    r = simulate(_alu_schedule(g, 3, ops), g, mode=mode, exact_below_events=0)
    assert r.time_s == pytest.approx(3 * (op_s + 420 / g.clock_hz), rel=1e-9)
    off = g.model_copy(update={"cta_turnover_cycles": None})
    assert simulate(_alu_schedule(off, 3, ops), off, mode=mode,
                    exact_below_events=0).time_s == pytest.approx(3 * op_s, rel=1e-9)
