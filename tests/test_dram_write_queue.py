"""The DRAM write queue's bound (GpuSpec.dram_write_queue_s): exact mode holds an access whose
write-back would leave more than that much DRAM work queued, and the H200 figure is the
resolution of the committed probe that found no queued work carried across a kernel boundary
(measurements/h200/dram_carryover/)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from iosim import load_gpu
from iosim.sim.memory import ExactMemory, Server, TileLru

PROBE = (Path(__file__).resolve().parents[1]
         / "measurements/h200/dram_carryover/dram_carryover_h200.json")

RATE = 1e12          # DRAM bytes per second
LINE = 1_000_000     # bytes per tile: 1 µs of DRAM time each


def _memory(queue_s):
    # room for two tiles, all of them may be dirty: a third stored tile evicts a dirty one
    lru = TileLru(2 * LINE, None)
    return ExactMemory(lru, Server(1e15), Server(RATE), 0.0, 0.0, write_queue_s=queue_s)


@pytest.mark.parametrize("queue_s", [None, 0.0, 0.5e-6, 5e-6])
def test_a_store_that_evicts_a_dirty_line_waits_for_room_in_the_queue(queue_s):
    mem = _memory(queue_s)
    accepted = [mem.store(("S", i), "S", LINE, None, 0.0) for i in range(2)]   # no eviction
    assert accepted == [pytest.approx(LINE / 1e15), pytest.approx(2 * LINE / 1e15)]
    done = mem.store(("S", 2), "S", LINE, None, 0.0)       # evicts ("S", 0): 1 µs write-back
    port = 3 * LINE / 1e15
    if queue_s is None:                                    # fire and forget
        assert done == pytest.approx(port)
    else:                                                  # held until the queue has room
        assert done == pytest.approx(max(port, LINE / RATE - queue_s))
    assert mem.dram_server.free_s == pytest.approx(LINE / RATE)   # the write-back's time


def test_a_miss_that_evicts_a_dirty_line_lands_after_the_queue_has_room():
    mem = _memory(0.0)
    for i in range(2):
        mem.store(("S", i), "S", LINE, None, 0.0)
    ready = mem.load(("K", 0), "K", LINE, 0.0)     # read 1 µs, then evicts a dirty line: 1 µs
    assert ready == pytest.approx(2 * LINE / RATE)
    unbounded = _memory(None)
    for i in range(2):
        unbounded.store(("S", i), "S", LINE, None, 0.0)
    assert unbounded.load(("K", 0), "K", LINE, 0.0) == pytest.approx(LINE / RATE)


def test_the_h200_queue_is_the_probes_resolution():
    """The read kernel after the copy (b2b) is no slower than after the copy and 2 ms of idle
    DRAM (spin) by more than the figure, at every size; the figure is the largest gap."""
    rows = json.loads(PROBE.read_text())["rows"]
    gaps_us = [r["b2b_us"] - r["spin_us"] for r in rows]
    assert len(rows) == 3 and all(g <= 0.0 for g in gaps_us)
    figure = round(max(abs(g) for g in gaps_us), 2) * 1e-6
    for name in ("h200", "h200-calibrated", "h100"):
        assert load_gpu(name).dram_write_queue_s == pytest.approx(figure)
    assert load_gpu("a100").dram_write_queue_s is None       # not measured on an Ampere part
