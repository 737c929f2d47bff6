"""The fast mode's fluid dispatch (sim/fluid.py) against closed forms, and its steady-state
skipping against walking every CTA."""
import pytest

from iosim.sim.fluid import ClassCosts, FluidMachine, run_kernel
from iosim.sim.timeline import Timeline


def one_segment(duration_s: float, l2_bytes: float = 0.0, occ: int = 1) -> ClassCosts:
    return ClassCosts(tuple(((duration_s, 0.0, 0.0, 0.0, 0.0),) for _ in range(occ)),
                      (l2_bytes,), (0.0,), (0.0,), False)


def run(n, costs, machine, class_of=lambda c: 0, period=1, skip=True):
    rows = []

    def emit(cta, cls, sm, s, e, stall, marks):
        rows.append((0, cta, sm, s, e, stall, (0.0, 0.0, 0.0)))
    result = run_kernel(n, class_of, costs, machine, 0.0, emit, False, None,
                        period if skip else 0, n)
    timeline = Timeline()
    timeline.add_kernel(rows, result.repeats)
    return result, timeline


def test_identical_ctas_run_in_waves_of_one_per_sm():
    d = 1e-6
    machine = FluidMachine(2, 1, 1e12, 1e12, 0.0)
    result, timeline = run(1000, [one_segment(d)], machine)
    assert result.end_s == pytest.approx(500 * d, rel=1e-9)
    assert len(timeline) == 1000
    assert result.repeats, "a steady state of identical waves is skipped, not walked"
    df = timeline.to_dataframe()
    assert list(df["cta"]) == list(range(1000))
    assert df["start_s"].to_numpy() == pytest.approx([(c // 2) * d for c in range(1000)],
                                                     abs=1e-15)


def test_a_saturated_l2_stretches_every_cta_to_its_share_of_the_bandwidth():
    # 2 CTAs at once, each wanting 1000 B in 1 µs; 1e9 B/s shared: each takes 2 µs
    machine = FluidMachine(2, 1, 1e9, 1e12, 0.0)
    result, timeline = run(100, [one_segment(1e-6, 1000.0)], machine)
    assert result.end_s == pytest.approx(50 * 2e-6, rel=1e-9)
    assert timeline.column_sum("memory_stall_s") == pytest.approx(100 * 1e-6, rel=1e-9)


def test_skipping_the_steady_state_gives_what_walking_every_cta_gives():
    costs = [one_segment(1e-6, 3000.0, occ=2), one_segment(1.7e-6, 500.0, occ=2),
             one_segment(0.4e-6, 9000.0, occ=2)]
    machine = FluidMachine(5, 2, 4e9, 1e12, 0.0)

    def class_of(c):
        return (0, 1, 0, 2, 1, 1, 0)[c % 7]
    fast, fast_tl = run(7 * 400, costs, machine, class_of, 7)
    slow, slow_tl = run(7 * 400, costs, machine, class_of, 7, skip=False)
    assert fast.repeats and not slow.repeats
    assert fast.end_s == pytest.approx(slow.end_s, rel=1e-9)
    assert len(fast_tl) == len(slow_tl)
    a, b = fast_tl.to_dataframe(), slow_tl.to_dataframe()
    assert list(a["cta"]) == list(b["cta"]) and list(a["sm"]) == list(b["sm"])
    for col in ("start_s", "end_s", "memory_stall_s"):
        assert a[col].to_numpy() == pytest.approx(b[col].to_numpy(), rel=1e-9, abs=1e-18)
        assert fast_tl.column_sum(col) == pytest.approx(slow_tl.column_sum(col), rel=1e-9)


def test_stores_cost_dram_only_after_they_have_filled_the_l2():
    """One slot, DRAM at 1 B/s; each CTA runs 1 s, stores 1 B and, once write-backs begin,
    moves 2 B of DRAM (a demand of 2 B/s: it takes 2 s). The first CTA's store fills the
    L2 (fill_bytes = 1): it runs in 1 s, the second in 2 s; without a fill both take 2 s."""
    costs = [ClassCosts((((1.0, 0.0, 0.0, 0.0, 0.0),),), (0.0,), (2.0,), (0.0,), False,
                        (0.0,), (1.0,))]
    machine = FluidMachine(1, 1, 1e12, 1.0, 0.0)

    def end(fill):
        return run_kernel(2, lambda c: 0, costs, machine, 0.0, lambda *a: None, False, None,
                          0, 2, fill).end_s
    assert end(1.0) == pytest.approx(3.0)
    assert end(None) == pytest.approx(4.0)


def test_a_first_wave_burst_pays_the_write_backs_of_its_stores_past_the_fill():
    """Four SMs, one slot each, DRAM at 1 B/s; each CTA's one (burst) segment runs 1 s,
    stores 1 B, reads 1 B of DRAM and, once write-backs begin, writes 1 B back. The L2's fill
    takes 2 B: the first wave's burst queues the four CTAs' DRAM bytes in launch order, the
    first two without a write-back (1 B each), the last two with it (2 B each): the last CTA
    waits 1 + 1 + 2 = 4 s for its turn and ends at 5 s. Before the fill was weighed in the
    burst, every CTA of the wave was charged its fill figure (the last would wait 3 s)."""
    costs = [ClassCosts((((1.0, 0.0, 0.0, 0.0, 0.0),),), (0.0,), (2.0,), (1.0,), True,
                        (1.0,), (1.0,))]
    machine = FluidMachine(4, 1, 1e12, 1.0, 0.0)
    ends = []
    run_kernel(4, lambda c: 0, costs, machine, 0.0,
               lambda cta, cls, sm, s, e, *rest: ends.append(e), False, None, 0, 4, 2.0)
    assert sorted(ends) == pytest.approx([1.0, 2.0, 3.0, 5.0])
