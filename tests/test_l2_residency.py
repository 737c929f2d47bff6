"""The L2 whose re-reads hit by the measured residency curve (sim/l2_residency.py): its curve
against the committed probe, its stack distances against a brute-force LRU stack, and what
leaves it when."""
import random
import sys
from pathlib import Path

import pytest

from iosim.hardware import load_gpu
from iosim.sim.l2_residency import ResidencyLru
from iosim.sim.memory import L2_EFFECTIVE_FRACTION, TileLru, l2_cache

ROOT = Path(__file__).resolve().parents[1]


def _curve_script():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import l2_residency_curve
    finally:
        sys.path.pop(0)
    return l2_residency_curve


def test_the_configs_carry_the_curve_the_probe_gives():
    script = _curve_script()
    h100 = load_gpu("h100")
    curve = script.residency_curve(script.DEFAULT, h100.l2_capacity_bytes)
    for name in ("h100", "h200", "h200-calibrated"):
        assert [tuple(p) for p in load_gpu(name).l2_residency_miss_curve] == curve
    assert load_gpu("a100").l2_residency_miss_curve is None     # no probe there: the LRU


def test_the_probe_curve_is_a_soft_step_near_the_lrus_capacity():
    """No misses to 0.49 of the L2, half at 0.72 (an LRU of L2_EFFECTIVE_FRACTION = 0.70
    misses them all from there), every re-read missing only past 1.05."""
    curve = load_gpu("h100").l2_residency_miss_curve
    assert all(m < 0.005 for x, m in curve if x < 0.49)
    assert 0.05 < dict(curve)[0.5773] < 0.1
    half = min(x for x, m in curve if m >= 0.5)
    assert 0.7 < half < 0.75
    assert min(x for x, m in curve if m >= 1.0) > 1.05


def test_the_factory_picks_the_cache_by_the_config():
    assert type(l2_cache(load_gpu("a100"), 1e6)) is TileLru
    cache = l2_cache(load_gpu("h100"), 0.7 * 50 * 2**20 / 4, ratio=4)
    assert isinstance(cache, ResidencyLru)
    assert cache.nominal_bytes == 50 * 2**20 / 4


class _Recorder(ResidencyLru):
    """Every line past the recent zone hits; records the distances it was looked up at."""

    def _miss_fraction(self, x):
        self.seen.append(x * self.nominal_bytes)
        return 0.0


def test_stack_distances_are_those_of_an_lru_stack():
    rng = random.Random(7)
    sizes = {k: rng.choice((64, 128, 256)) for k in range(300)}
    cache = _Recorder(capacity_bytes=1e9, nominal_bytes=10_000,
                      curve=[(0.0, 0.0), (0.5, 0.0), (0.6, 0.5), (100.0, 1.0)])
    cache.seen = []
    stack: list = []                # brute force: keys, most recent last
    expected = []
    for _ in range(5000):
        key = rng.randrange(300)
        if key in stack:
            i = stack.index(key)
            d = sum(sizes[k] for k in stack[i + 1:])
            if key not in cache.lines:
                expected.append(d)
            stack.pop(i)
            assert cache.lookup(key) is not None
        else:
            cache.insert(key, sizes[key], False, 0.0)
        stack.append(key)
    assert len(expected) > 1000
    assert cache.seen == pytest.approx(expected)


def test_reads_past_the_recent_zone_hit_at_the_curves_rate():
    # miss fraction 0.25 at every distance past 0.1 of the nominal size: one in four lookups
    # of an older line misses (error diffusion: exactly, over a multiple of four)
    cache = ResidencyLru(capacity_bytes=10_000, nominal_bytes=1_000,
                         curve=[(0.0, 0.0), (0.1, 0.0), (0.1001, 0.25), (50.0, 0.25)])
    for k in range(40):
        cache.insert(k, 100, False, 0.0)
    hits = sum(cache.lookup(k) is not None for k in range(20))   # all past the recent zone
    assert hits == 15


def test_a_dirty_line_leaves_at_the_lru_capacity_and_a_clean_one_stays():
    curve = [(0.0, 0.0), (0.2, 0.0), (0.2001, 0.0049), (5.0, 0.0049), (6.0, 1.0)]
    cache = ResidencyLru(capacity_bytes=1_000, nominal_bytes=1_000, curve=curve)
    assert cache.insert("dirty", 100, True, 0.0) == 0
    cache.insert("clean", 100, False, 0.0)
    written_back = sum(cache.insert(k, 100, False, 0.0) for k in range(12))
    assert written_back == 100 and cache.dirty_bytes() == 0
    assert not cache.contains("dirty") and cache.contains("clean")
    assert cache.lookup("clean") is not None
    # past the curve's end (6 x nominal) nothing is left
    for k in range(100, 200):
        cache.insert(k, 100, False, 0.0)
    assert not any(cache.contains(k) for k in range(12))


def test_without_a_curve_past_the_floor_it_is_the_lru():
    """A curve that misses everything past the LRU's capacity: the same hits as TileLru."""
    rng = random.Random(3)
    lru = TileLru(2_000)
    # a re-read hits an LRU of 2,000 bytes iff at most 1,900 other bytes came after it
    res = ResidencyLru(2_000, 2_000, [(0.0, 0.0), (0.95, 0.0), (0.9501, 1.0), (2.0, 1.0)])
    for _ in range(3000):
        key = rng.randrange(60)
        a, b = lru.lookup(key), res.lookup(key)
        assert (a is None) == (b is None)
        if a is None:
            lru.insert(key, 100, False, 0.0)
            res.insert(key, 100, False, 0.0)


def test_the_probes_step_distances_are_its_lru_stacks():
    script = _curve_script()
    for k in (1, 3, 12):
        exact = script.probe_distances(k, 132, 8192)
        means = [sum(exact[i * 132:(i + 1) * 132]) / 132 for i in range(script.MEASURED_STEPS)]
        assert means == pytest.approx(script.step_distances(k, 132, 8192), rel=0.006)


def test_the_curve_gives_the_probes_fractions_over_its_own_steps():
    """Solved from the probe: averaged over each configuration's 48 re-read steps it gives the
    measured fraction, within 0.2 points where the fraction is below 0.76 (k <= 24)."""
    script = _curve_script()
    h100 = load_gpu("h100")
    curve = h100.l2_residency_miss_curve
    g, tile, rows = script.measured_fractions(script.DEFAULT)
    pred = script.predicted_fractions([x for x, _ in curve], [m for _, m in curve],
                                      [script.step_distances(k, g, tile) for k, _, _ in rows],
                                      h100.l2_capacity_bytes)
    for (k, _, want), got in zip(rows, pred):
        assert got == pytest.approx(want, abs=0.002 if k <= 24 else 0.05)


def test_the_h100_reuse_probe_replayed_through_the_cache_misses_as_measured():
    """The probe's own pattern (tiles of 8 KiB read once, each re-read k steps later by the
    next CTA, 48 steps of re-reads) through the H100's cache: the re-read misses are the
    probe's measured fractions (the mean of its two re-readers)."""
    script = _curve_script()
    h100 = load_gpu("h100")
    g, tile, rows = script.measured_fractions(script.DEFAULT)
    measured = {k: m for k, _, m in rows}
    for k in (12, 16, 19, 22):
        cache = l2_cache(h100, L2_EFFECTIVE_FRACTION * h100.l2_capacity_bytes)
        misses = rereads = 0
        for t in range(k + script.MEASURED_STEPS):
            for c in range(g):
                cache.insert((t, c), tile, False, 0.0)
                if t >= k:
                    rereads += 1
                    if cache.lookup((t - k, (c + 1) % g)) is None:
                        misses += 1
                        cache.insert((t - k, (c + 1) % g), tile, False, 0.0)
        assert misses / rereads == pytest.approx(measured[k], abs=0.01)
