"""The simulator's building blocks: FIFO servers, the tile LRU, the block scheduler."""
import pytest

from iosim.sim.dispatch import SlotPicker
from iosim.sim.memory import Server, TileLru


def test_server_serves_requests_in_arrival_order_at_its_rate():
    s = Server(100.0)                      # 100 units per second
    assert s.reserve(0.0, 50) == (0.0, 0.5)
    assert s.reserve(0.1, 50) == (0.5, 1.0)   # queued behind the first
    assert s.reserve(2.0, 10) == (2.0, 2.1)   # idle server starts at once
    assert s.busy_s == pytest.approx(1.1)


def test_lru_evicts_least_recently_used_and_reports_dirty_bytes():
    lru = TileLru(300)
    assert lru.insert("a", 100, True, 0.0) == 0
    lru.insert("b", 100, False, 0.0)
    lru.insert("c", 100, False, 0.0)
    lru.lookup("a")                        # a becomes most recent
    assert lru.insert("d", 100, False, 0.0) == 0      # evicts b (clean)
    assert lru.lookup("b") is None
    assert lru.insert("e", 100, False, 0.0) == 0      # evicts c
    assert lru.insert("f", 100, False, 0.0) == 100    # evicts a, dirty: written back
    assert lru.dirty_bytes() == 0


def test_block_scheduler_fills_breadth_first_then_reuses_freed_slots():
    p = SlotPicker(sm_count=3, ctas_per_sm=2)
    assert [p.pick() for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    assert p.pick() is None
    p.release(1)
    assert p.pick() == 1
