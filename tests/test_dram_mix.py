"""DRAM time by the mix of directions (machine.dram_byte_cost / dram_write_cost_at,
memory.MixedDramServer, the fast mode's per-kernel write cost): a stream's DRAM time is the
measured stream's at its read share, interpolated between the measured mixes; a read byte
costs 1, a written one carries the mix's cost. Checked against the committed H200 measurement
(measurements/h200/dram_stream_h200*.json) and closed forms worked out from small figures."""
import json
import math
from pathlib import Path

import pytest

from iosim.hardware import load_gpu
from iosim.machine import (dram_busy_s, dram_byte_cost, dram_mix_points, dram_write_cost,
                           dram_write_cost_at)
from iosim.sim.fast import kernel_write_cost
from iosim.sim.memory import ExactMemory, MixedDramServer, Server, TileLru, dram_server

ROOT = Path(__file__).resolve().parents[1]


class Gpu:   # the figures the functions read: read-only 5, 3:1 4, 1:1 2, 1:3 4, write-only 4 (B/s)
    dram_bandwidth_bytes_per_s = 4.0
    dram_read_bandwidth_bytes_per_s = 5.0
    dram_mixed_3r1w_bandwidth_bytes_per_s = 4.0
    dram_mixed_1r1w_bandwidth_bytes_per_s = 2.0
    dram_mixed_1r3w_bandwidth_bytes_per_s = 4.0
    dram_write_bandwidth_bytes_per_s = 4.0
    dram_latency_s = 1.0


def _measured_rows():
    runs = [json.loads((ROOT / "measurements/h200" / f).read_text())
            for f in ("dram_stream_h200.json", "dram_stream_h200_repeat.json")]
    by_share = {}
    for run in runs:
        for r in run["rows"]:
            share = r["read_bytes"] / (r["read_bytes"] + r["write_bytes"])
            by_share.setdefault(share, []).append(r["bytes_per_s"])
    return {s: sum(v) / len(v) for s, v in by_share.items()}


def test_the_calibrated_h200_carries_every_measured_mix():
    gpu = load_gpu("h200-calibrated")
    pts = dict(dram_mix_points(gpu))
    measured = _measured_rows()
    assert sorted(pts) == sorted(measured) == [0.0, 0.25, 0.5, 0.75, 1.0]
    for share, rate in measured.items():
        assert pts[share] == pytest.approx(rate, rel=1e-3)


def test_a_stream_at_a_measured_mix_takes_that_rows_time():
    gpu = load_gpu("h200-calibrated")
    for share, rate in _measured_rows().items():
        r, w = 4e9 * share, 4e9 * (1 - share)
        assert dram_busy_s(gpu, r, w) == pytest.approx(4e9 / rate, rel=2e-3)
    # the 1:1 mix is 12% slower than R/read + W/write, the model this replaces kept a copy's
    # 4.17 TB/s: a 1:1 stream now runs at the mixed row's 3.85
    assert 4e9 / dram_busy_s(gpu, 2e9, 2e9) == pytest.approx(3.852e9 * 1e3, rel=1e-3)


def test_between_measured_mixes_the_time_per_byte_is_interpolated():
    g = Gpu()
    # share 0.625: half-way between 1:1 (0.5 s/B) and 3:1 (0.25 s/B) = 0.375 s/B, i.e.
    # 0.375 * 5 read-rate bytes
    assert dram_byte_cost(g, 0.625) == pytest.approx(0.375 * 5.0)
    assert dram_byte_cost(g, 1.0) == pytest.approx(1.0)
    assert dram_byte_cost(g, 0.0) == pytest.approx(5.0 / 4.0)
    assert dram_busy_s(g, 5.0, 3.0) == pytest.approx(8 * 0.375)


def test_without_the_mixes_a_byte_costs_the_two_anchor_line():
    gpu = load_gpu("h100")
    assert dram_mix_points(gpu) is None
    c = dram_write_cost(gpu)
    assert dram_byte_cost(gpu, 0.25) == pytest.approx(0.25 + 0.75 * c)
    assert isinstance(dram_server(gpu), Server) and not isinstance(dram_server(gpu), MixedDramServer)
    assert kernel_write_cost(gpu, 0.5) == c


def test_a_written_byte_carries_the_mixs_cost():
    g = Gpu()
    # 1:1: (R + W·w) = (R + W)·2.5 → w = 2·2.5 − 1 = 4; write-only: 5/4; 3:1 and above:
    # (1.25 − 0.75) / 0.25 = 2 (the time per byte is linear up to read-only)
    assert dram_write_cost_at(g, 0.5) == pytest.approx(4.0)
    assert dram_write_cost_at(g, 0.0) == pytest.approx(1.25)
    assert dram_write_cost_at(g, 0.9) == pytest.approx(2.0)
    assert dram_write_cost_at(g, 1.0) == pytest.approx(2.0)
    for share in (0.1, 0.3, 0.5, 0.7, 0.9):
        r, w = share, 1 - share
        assert (r + w * dram_write_cost_at(g, share)) / 5.0 == pytest.approx(dram_busy_s(g, r, w))


def test_the_fast_mode_charges_a_kernels_writes_at_its_mix():
    assert kernel_write_cost(Gpu(), 0.5) == pytest.approx(4.0)
    assert kernel_write_cost(Gpu(), None) == dram_write_cost(Gpu())


def test_the_exact_server_charges_the_mix_in_flight():
    # 1-byte reads and writes alternating every 1e-6 s (far inside the 1 s window): once
    # a thousand have passed the decayed mix is 1:1 within 1e-3; a read costs 1 read-rate
    # byte, a write 4: a pair 5, the 1:1 row's 2 B/s
    s = MixedDramServer(5.0, lambda share: dram_write_cost_at(Gpu(), share), 1.0)
    n = 2000
    for i in range(n):
        if i == n // 2:
            warm = s.busy_s
        (s.reserve_write if i % 2 else s.reserve)(i * 1e-6, 1.0)
    assert s.busy_s - warm == pytest.approx(n / 2 / 2.0, rel=1e-3)


def test_the_exact_servers_mix_forgets_with_the_dram_latency():
    s = MixedDramServer(5.0, lambda share: dram_write_cost_at(Gpu(), share), 1.0)
    s.reserve(0.0, 100.0)                     # a read costs its bytes: 20 s
    assert s.busy_s == pytest.approx(20.0)
    # a write 30 windows later: the reads' weight is e^-30 of theirs, the write alone
    s.reserve_write(30.0, 1.0)
    share = 100 * math.exp(-30) / (100 * math.exp(-30) + 1)
    assert s.busy_s - 20.0 == pytest.approx(dram_write_cost_at(Gpu(), share) / 5.0)
    assert s.busy_s - 20.0 == pytest.approx(1 / 4.0, rel=1e-9)


def test_the_exact_servers_mix_decays_by_e_per_window():
    # window 2 s: a write 2 s after 100 read bytes sees them at weight 100/e (one window)
    s = MixedDramServer(5.0, lambda share: dram_write_cost_at(Gpu(), share), 2.0)
    s.reserve(0.0, 100.0)
    s.reserve_write(2.0, 1.0)
    share = 100 / math.e / (100 / math.e + 1)
    assert s.busy_s - 20.0 == pytest.approx(dram_write_cost_at(Gpu(), share) / 5.0, rel=1e-9)


def test_exact_memory_sends_writebacks_to_the_mixed_servers_write_side():
    # a 100-byte dirty tile evicted by a 100-byte load into a 100-byte L2, at t = 0: the
    # load's read (reserved first) costs its bytes, 20 s; the write-back then sees a 1:1 mix
    # and costs 4 read-rate bytes per byte, 80 s (ExactMemory's own write cost, 99, unused)
    dram = MixedDramServer(5.0, lambda share: dram_write_cost_at(Gpu(), share), 1.0)
    mem = ExactMemory(TileLru(100), Server(1e9), dram, 0.0, 0.0, None, 99.0)
    mem.store(("O", 0), "O", 100, None, 0.0)
    mem.load(("K", 0), "K", 100, 0.0)
    assert dram.busy_s == pytest.approx(20.0 + 80.0)
    assert (mem.counters.dram_read_bytes, mem.counters.dram_write_bytes) == (100, 100)
