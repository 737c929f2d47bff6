"""gcpause.full_collections_deferred: no full (generation-2) collection starts inside it,
younger collections still run and free cycles, and the caller's thresholds come back."""
import gc
import weakref

import pytest

from iosim.gcpause import DEFERRED_THRESHOLD, full_collections_deferred


def _full_collections_while(work) -> int:
    started = []

    def note(phase, info):
        if phase == "start" and info["generation"] == 2:
            started.append(1)
    gc.callbacks.append(note)
    try:
        work()
    finally:
        gc.callbacks.remove(note)
    return len(started)


def _hold_many_containers():
    """Keeps 300,000 small lists alive: enough survivors to start full collections."""
    held = [[i] for i in range(300_000)]
    return len(held)


@pytest.fixture
def default_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    gc.collect()
    yield
    gc.set_threshold(*before)


def test_holding_many_objects_starts_full_collections_without_it(default_thresholds):
    assert _full_collections_while(_hold_many_containers) >= 1     # the control


def test_no_full_collection_starts_inside_it(default_thresholds):
    def deferred():
        with full_collections_deferred():
            _hold_many_containers()
    assert _full_collections_while(deferred) == 0


def test_young_cycles_are_still_collected_inside_it(default_thresholds):
    class Node:
        pass
    with full_collections_deferred():
        a = Node()
        a.self = a                      # a cycle only the collector frees
        gone = weakref.ref(a)
        del a
        _hold_many_containers()         # allocations: younger collections run
        assert gone() is None


def test_the_callers_thresholds_come_back_after_it(default_thresholds):
    gc.set_threshold(500, 7, 3)
    with full_collections_deferred():
        assert gc.get_threshold() == (500, 7, DEFERRED_THRESHOLD)
    assert gc.get_threshold() == (500, 7, 3)


def test_the_thresholds_come_back_after_an_exception(default_thresholds):
    with pytest.raises(ZeroDivisionError):
        with full_collections_deferred():
            1 / 0
    assert gc.get_threshold() == (700, 10, 10)


def test_the_fast_mode_simulates_with_full_collections_deferred(default_thresholds, monkeypatch):
    from iosim import AttentionProblem, build_schedule, load_gpu
    from iosim.sim import fast
    seen = []
    real = fast._dispatch_all

    def recording(*a, **k):
        seen.append(gc.get_threshold()[2])
        return real(*a, **k)
    monkeypatch.setattr(fast, "_dispatch_all", recording)
    gpu = load_gpu("h100")
    fast.simulate_fast(build_schedule(AttentionProblem(seq_q=1024, heads_q=2), gpu, "fa2"),
                       gpu, 0.7)
    assert seen == [DEFERRED_THRESHOLD, DEFERRED_THRESHOLD]      # both dispatch passes
    assert gc.get_threshold() == (700, 10, 10)
