"""DRAM time by direction (machine.dram_read_rate / dram_write_cost / dram_busy_s): a written
byte costs more than a read one so that a copy takes exactly the copy's measured time, and a
read-only stream runs at the read-only stream's measured rate. Checked against closed forms
worked out from the two rates, and against the committed H200 measurement."""
import json
from pathlib import Path

import pytest

from iosim.hardware import load_gpu
from iosim.machine import dram_busy_s, dram_read_rate, dram_write_cost
from iosim.sim.memory import ExactMemory, Server, TileLru

ROOT = Path(__file__).resolve().parents[1]


class Gpu:   # the two figures the functions read
    def __init__(self, copy, read=None):
        self.dram_bandwidth_bytes_per_s, self.dram_read_bandwidth_bytes_per_s = copy, read


def test_a_copy_takes_the_copy_rate_and_a_read_stream_the_read_rate():
    g = Gpu(copy=4.0e12, read=5.0e12)
    # c = 2 * 5/4 - 1 = 1.5: R + 1.5 W at 5 TB/s
    assert dram_write_cost(g) == pytest.approx(1.5)
    assert dram_busy_s(g, 1e12, 1e12) == pytest.approx(2e12 / 4.0e12)      # copy
    assert dram_busy_s(g, 1e12, 0) == pytest.approx(1e12 / 5.0e12)         # read-only
    assert dram_busy_s(g, 0, 1e12) == pytest.approx(1.5e12 / 5.0e12)       # write-only


def test_without_a_read_figure_every_byte_costs_the_copy_rate():
    g = Gpu(copy=4.0e12)
    assert (dram_read_rate(g), dram_write_cost(g)) == (4.0e12, 1.0)
    assert dram_busy_s(g, 3e12, 1e12) == pytest.approx(1.0)


def test_the_calibrated_h200_carries_the_measured_read_only_rate():
    runs = [json.loads((ROOT / "measurements/h200" / f).read_text())
            for f in ("dram_stream_h200.json", "dram_stream_h200_repeat.json")]
    mean = sum(r["dram_read_bandwidth_bytes_per_s"] for r in runs) / len(runs)
    gpu = load_gpu("h200-calibrated")
    assert gpu.dram_read_bandwidth_bytes_per_s == pytest.approx(mean, rel=1e-3)
    # every measured read-only row beats the copy the config's DRAM figure times
    assert all(r["dram_read_bandwidth_bytes_per_s"] > r["cupy_copyto_bandwidth_bytes_per_s"]
               for r in runs)
    assert 1.1 < dram_write_cost(gpu) < 1.25


def test_exact_memory_holds_the_dram_server_for_a_writeback_times_the_write_cost():
    # DRAM server at 10 B/s; a 100-byte dirty tile evicted by a 100-byte load into a
    # 100-byte L2: the writeback (cost 2) holds the server 20 s, then the load's read 10 s
    mem = ExactMemory(TileLru(100), Server(1e9), Server(10.0), 0.0, 0.0, None, 2.0)
    mem.store(("O", 0), "O", 100, None, 0.0)
    ready = mem.load(("K", 0), "K", 100, 0.0)
    assert mem.dram_server.free_s == pytest.approx(30.0)
    assert ready == pytest.approx(10.0)     # the read was reserved before the writeback
    assert (mem.counters.dram_read_bytes, mem.counters.dram_write_bytes) == (100, 100)
