"""Exact mode's memory front end, one request at a time, against times and byte counts worked
out by hand: L2→SM at 100 B/s with 0.5 s latency, DRAM at 10 B/s with 1 s latency, 100-byte
tiles (an L2 transfer takes 1 s, a DRAM transfer 10 s)."""
import pytest

from iosim.sim.memory import ExactMemory, Server, TileLru


def memory(capacity_bytes=1000):
    return ExactMemory(TileLru(capacity_bytes), Server(100.0), Server(10.0), 0.5, 1.0)


def test_a_miss_waits_for_dram_transfer_and_latency_then_the_l2_latency():
    mem = memory()
    # DRAM transfer 0..10 s, line in L2 at 11 s, in shared memory 0.5 s later
    assert mem.load(("K", 0), "K", 100, 0.0) == pytest.approx(11.5)
    c = mem.counters
    assert (c.l2_to_sm_bytes, c.load_miss_bytes, c.load_misses, c.dram_read_bytes) == (100, 100, 1, 100)


def test_a_hit_on_a_line_in_flight_waits_for_it_and_a_later_hit_only_for_l2():
    mem = memory()
    mem.load(("K", 0), "K", 100, 0.0)
    assert mem.load(("K", 0), "K", 100, 2.0) == pytest.approx(11.5)    # line lands at 11 s
    assert mem.load(("K", 0), "K", 100, 20.0) == pytest.approx(21.5)   # 1 s transfer + 0.5 s
    c = mem.counters
    assert (c.load_hits, c.load_hit_bytes, c.dram_read_bytes, c.l2_to_sm_bytes) == (2, 200, 100, 300)


def test_loads_queue_on_the_l2_to_sm_bandwidth():
    mem = memory()
    mem.load(("Q", 0), "Q", 100, 0.0)
    mem.load(("Q", 0), "Q", 100, 20.0)
    # the L2 server is busy 20..21 s: a hit issued at 20 s finishes its transfer at 22 s
    assert mem.load(("Q", 0), "Q", 100, 20.0) == pytest.approx(22.5)


def test_a_store_returns_when_l2_has_it_and_costs_dram_nothing_until_flushed():
    mem = memory()
    assert mem.store(("O", 0), "O", 100, False, 30.0) == pytest.approx(31.0)
    c = mem.counters
    assert (c.sm_to_l2_bytes, c.dram_read_bytes, c.dram_write_bytes) == (100, 0, 0)
    mem.flush()
    assert (c.dram_write_bytes, c.dram_write_flush_bytes) == (100, 100)


def test_an_atomic_store_that_misses_reads_the_line_from_dram_first():
    mem = memory()
    assert mem.store(("dQ", 0), "dQ", 100, True, 40.0) == pytest.approx(41.0)
    assert mem.counters.dram_read_bytes == 100
    assert mem.dram_server.free_s == pytest.approx(50.0)          # 10 s of DRAM transfer
    # a load of the line waits until the old value has arrived (50 s + 1 s latency)
    assert mem.load(("dQ", 0), "dQ", 100, 42.0) == pytest.approx(51.5)
    assert mem.store(("dQ", 0), "dQ", 100, True, 60.0) == pytest.approx(61.0)   # now a hit
    assert mem.counters.dram_read_bytes == 100


def test_a_dirty_line_evicted_is_written_to_dram():
    mem = memory(capacity_bytes=250)
    mem.store(("O", 0), "O", 100, False, 0.0)
    mem.store(("O", 1), "O", 100, False, 0.0)
    mem.load(("K", 0), "K", 100, 0.0)            # 300 B > 250 B: O_0, the oldest, goes
    c = mem.counters
    assert (c.dram_write_bytes, c.dram_write_flush_bytes) == (100, 0)
    assert mem.dram_server.busy_s == pytest.approx(20.0)        # K_0 read, O_0 written back
    mem.flush()
    assert (c.dram_write_bytes, c.dram_write_flush_bytes) == (200, 100)


def test_storing_to_a_clean_line_makes_it_dirty():
    mem = memory()
    mem.load(("P", 0), "P", 100, 0.0)
    mem.store(("P", 0), "P", 100, False, 20.0)
    mem.flush()
    assert mem.counters.dram_write_bytes == 100


def test_a_differently_sized_write_to_a_line_resizes_it():
    mem = memory()
    mem.store(("O", 0), "O", 100, False, 0.0)
    mem.store(("O", 0), "O", 60, False, 10.0)
    assert mem.l2.used_bytes == 60
    mem.flush()
    assert mem.counters.dram_write_bytes == 60


def test_lru_keeps_no_more_than_its_capacity_even_with_two_lines():
    lru = TileLru(100)
    lru.insert("a", 60, True, 0.0)
    assert lru.insert("b", 60, False, 0.0) == 60       # a (dirty) evicted
    assert lru.lookup("a") is None and lru.used_bytes == 60


def test_lru_holds_a_line_larger_than_itself_until_the_next_insert():
    # the line in use stays (a cache never evicts what it is filling); the next insert evicts it
    lru = TileLru(50)
    assert lru.insert("a", 100, True, 0.0) == 0
    assert lru.lookup("a") is not None and lru.used_bytes == 100
    assert lru.insert("b", 10, False, 0.0) == 100
    assert lru.lookup("a") is None and lru.used_bytes == 10


def test_ncu_invalidation_drops_dirty_lines_without_counting_them():
    mem = memory()
    mem.store(("O", 0), "O", 100, False, 0.0)
    assert mem.invalidate() == 100
    mem.flush()
    assert mem.counters.dram_write_bytes == 0
    assert mem.l2.used_bytes == 0


def test_expected_memory_queues_a_sms_misses_on_its_dram_share():
    from iosim.sim.memory import ExpectedMemory
    # L2 at 1000 B/s, DRAM at 100 B/s, latencies 0.5 s (L2) and 1 s (DRAM); every K byte misses
    mem = ExpectedMemory(Server(1000.0), Server(100.0), 0.5, 1.0, {"K": (1.0, 1.0)})
    # a fetch: 1 s transfer + 1 s latency; the L2 transfer (0.1 s) hides under it
    assert mem.load(("K", 0), "K", 100, 0.0) == pytest.approx(2.0 + 0.5)
    # the next miss queues 1 s behind the first one's DRAM transfer
    assert mem.load(("K", 1), "K", 100, 0.0) == pytest.approx(1.0 + 2.0 + 0.5)
    # a tensor with no misses never waits for DRAM, even while DRAM is busy
    assert mem.load(("Q", 0), "Q", 100, 0.0) == pytest.approx(0.3 + 0.5)
    assert mem.store(("O", 0), "O", 100, False, 0.0) == pytest.approx(0.4)


def test_expected_memory_takes_dram_bandwidth_for_the_missing_fraction_only():
    from iosim.sim.memory import ExpectedMemory
    # half of V's bytes miss: each 100-byte load waits half a fetch (1 s) and takes 0.5 s of
    # DRAM transfer, which the next load queues behind
    mem = ExpectedMemory(Server(1000.0), Server(100.0), 0.5, 1.0, {"V": (0.5, 0.5)})
    assert mem.load(("V", 0), "V", 100, 0.0) == pytest.approx(1.0 + 0.5)
    assert mem.load(("V", 1), "V", 100, 0.0) == pytest.approx(0.5 + 1.0 + 0.5)
