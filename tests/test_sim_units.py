"""The simulator's building blocks: FIFO servers, the tile LRU, the block scheduler."""
import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.sim import simulate
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


def test_slot_picker_counts_its_free_slots_and_finds_none_exactly_when_none_is_free():
    p = SlotPicker(sm_count=3, ctas_per_sm=2)
    assert p.free == 6
    for n in range(5, -1, -1):
        assert p.pick() is not None and p.free == n
    assert p.pick() is None and p.free == 0
    p.release(2)
    p.release(0)
    assert p.free == 2
    assert p.pick() == 0 and p.pick() == 2 and p.free == 0 and p.pick() is None


def test_l2_replay_counts_in_flight_groups_and_their_queue_position():
    """Four CTAs read one tile: the first misses, two arrive while it is in flight, the last
    after it landed. Closed forms: wait in units of one fetch (transfer + latency) and the
    expected place of a load in the burst its group releases, Σ g(g−1)/2 ÷ loads."""
    from iosim.sim.l2model import Stream, replay
    latency_s, bandwidth = 1.0, 100.0          # a 100-byte tile: transfer 1 s + latency 1 s
    key = ("K", 0, 0)
    accesses = [(0.0, key, 100, 0, 0), (0.5, key, 100, 0, 0), (1.5, key, 100, 0, 0),
                (3.0, key, 100, 0, 0)]
    result = replay(accesses, [Stream(0, "K", 0)], 1e6, 1, latency_s, "warm", bandwidth)
    k = result.kernels[0]
    assert k.loads["K"].miss_bytes == 100 and k.loads["K"].bytes == 400
    assert result.flush_bytes == 0
    # remaining fetch: 1 (miss), (2 − 0.5)/2, (2 − 1.5)/2, 0 (landed at 2 s)
    assert k.loads["K"].wait == pytest.approx(1.0 + 0.75 + 0.25 + 0.0)
    # one group of 3 (the miss and two merged hits), one load alone: (3·2/2 + 0) / 4
    assert k.l2_queue_position == pytest.approx(0.75)


def test_l2_replay_keeps_the_last_partial_waves_figures_apart():
    from iosim.sim.l2model import Stream, replay
    streams = [Stream(0, "Q", 0), Stream(0, "Q", 1)]
    accesses = [(0.0, ("Q", 0), 10, 0, 0), (1.0, ("Q", 0), 10, 0, 1), (2.0, ("Q", 1), 10, 0, 1)]
    k = replay(accesses, streams, 1e6, 1, 1e-9, "warm", 1e12).kernels[0]
    assert k.loads["Q"].bytes == 10 and k.loads["Q"].miss_bytes == 10
    tail = k.tail_loads["Q"]
    assert tail.bytes == 20 and tail.miss_bytes == 10 and tail.loads == 2


def test_l2_replay_counts_loads_only_inside_their_cohorts_window():
    """Loads outside the window still fill the LRU (the later load hits) but are not
    counted; warm-up loads (cohort 2) are never counted."""
    from iosim.sim.l2model import Stream, replay
    streams = [Stream(0, "K", 0), Stream(0, "K", 1), Stream(0, "K", 2)]
    accesses = [(0.0, ("K", 0), 10, 0, 2),      # warm-up: fills, not counted
                (1.0, ("K", 0), 10, 0, 1),      # tail, before its window: not counted
                (2.0, ("K", 1), 10, 0, 0),      # body, inside: a miss
                (3.0, ("K", 0), 10, 0, 1),      # tail, inside: a hit on the warm-up's line
                (4.0, ("K", 2), 10, 0, 0)]      # body, after its window: not counted
    windows = [{0: (float("-inf"), 3.5), 1: (2.5, float("inf"))}]
    k = replay(accesses, streams, 1e6, 1, 1e-9, "warm", 1e12, windows).kernels[0]
    assert (k.loads["K"].bytes, k.loads["K"].miss_bytes) == (10, 10)
    assert (k.tail_loads["K"].bytes, k.tail_loads["K"].miss_bytes) == (10, 0)


def test_expected_memory_charges_in_flight_hits_the_rest_of_a_tile_fetch():
    from iosim.sim.memory import ExpectedMemory
    # L2 at 1000 B/s, DRAM at 100 B/s, latencies 0.5 s (L2) and 1 s (DRAM); a 100-byte tile
    mem = ExpectedMemory(Server(1000.0), Server(100.0), 0.5, 1.0, {"K": (0.0, 0.5)})
    # no DRAM bytes (all hits), but half a fetch (1 s transfer + 1 s latency) of waiting
    assert mem.load(("K", 0), "K", 100, 0.0) == pytest.approx(max(0.1, 0.5 * 2.0) + 0.5)
    queued = ExpectedMemory(Server(1000.0), Server(100.0), 0.5, 1.0, {}, l2_queue_position=2.0)
    # three transfers' time: its own and two of CTAs released with it
    assert queued.load(("Q", 0), "Q", 100, 0.0) == pytest.approx(3 * 0.1 + 0.5)
    assert queued.store(("O", 0), "O", 100, False, 1.0) == pytest.approx(1.0 + 3 * 0.1)


def test_a_sampled_prefix_covers_eight_waves_at_a_ratio_the_l2_size_does_not_change():
    """FA-2, N = 65,536, 32 heads on H100 (2 CTAs per SM: 264 per wave): too many accesses
    for the budget, so a prefix of 8 waves = 2,112 CTAs (plus the budget's fraction) and the
    tail part, at the ratio that brings their accesses within the budget, whatever the L2
    size above 8 MiB."""
    from iosim.sim.fast import KernelInfo, SamplingPlan
    schedule = build_schedule(AttentionProblem(seq_q=65536), "h100", "fa2")
    gpu = load_gpu("h100")
    infos = [KernelInfo.of(k, gpu, "fp16") for k in schedule.kernels]
    plans = [SamplingPlan(schedule, gpu, infos, mib * 2**20 * 0.7, 50_000)
             for mib in (10, 20, 40, 80)]
    assert {p.ratio for p in plans} == {plans[0].ratio}
    assert {tuple(p.limits) for p in plans} == {tuple(plans[0].limits)}
    assert plans[0].limits[0] >= 8 * 264
    per_cta = (infos[0].totals.loads + infos[0].totals.stores) / 16384
    # and the last partial wave (from 62 x 264 = 16,368) after two uncounted full waves
    assert plans[0].suffix == [16368 - 2 * 264]
    assert plans[0].ratio == -(-int((8 * 264 + 16384 - 15840) * per_cta) // 50_000)


def test_fast_mode_dram_bytes_never_rise_when_the_l2_grows():
    """A fixed sampled trace through an LRU: a larger cache holds a superset of lines, so
    misses (and write-backs) cannot rise (the LRU stack property)."""
    gpu = load_gpu("h100")
    schedule = build_schedule(AttentionProblem(seq_q=8192), gpu, "fa2")
    dram = []
    for mib in (10, 20, 30, 40, 60, 80):
        g = gpu.with_(l2_capacity_bytes=mib * 2**20)
        r = simulate(schedule, g, l2_sample_budget=20_000)
        dram.append(r.dram_read_bytes + r.dram_write_bytes)
    assert all(b <= a for a, b in zip(dram, dram[1:])), dram


def test_store_fill_is_the_stored_bytes_before_the_first_write_back_times_the_ratio():
    """A replay that stored 40 sampled bytes before its first write-back, then 60 more with
    60 written back: fill 40 x R, 1 DRAM byte per stored byte after it (0 during it)."""
    from iosim.sim.fast import _store_figures
    from iosim.sim.l2model import KernelCounts
    k = KernelCounts(store_bytes=100, writeback_bytes=60, fill_store_bytes=40)
    after, fill = _store_figures(k, 8)
    assert after == pytest.approx(1.0)
    assert (fill.stored_bytes, fill.dram_per_stored_byte) == (320, 0.0)
    # a write-back at the kernel's first store (an L2 full of dirty lines): no fill
    assert _store_figures(KernelCounts(store_bytes=100, writeback_bytes=60,
                                       fill_store_bytes=0), 8) == (pytest.approx(0.6), None)


def test_the_replay_records_the_stores_before_the_first_dirty_eviction():
    """A 20-byte LRU: two 10-byte stores fill it, the third evicts the first dirty line."""
    from iosim.sim.l2model import Stream, replay
    streams = [Stream(0, "O", 0)]
    accesses = [(float(i), ("O", i), 10, 1, 0) for i in range(3)]
    k = replay(accesses, streams, 20, 1, 1e-9, "warm", 1e12).kernels[0]
    assert (k.store_bytes, k.writeback_bytes, k.fill_store_bytes) == (30, 10, 20)
