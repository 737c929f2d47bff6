"""Captured H200 traces (tests/data/traces/*.json) equal the generated Schedules, operation for
operation (CPU only: the traces were captured once on the GPU; see tests/data/traces/README.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

from iosim import AttentionProblem, build_schedule
from iosim.kernels.trace import (Event, KernelTrace, Trace, compare_trace, hoist_depths,
                                 schedule_events)

TRACE_DIR = Path(__file__).parent / "data" / "traces"
TRACES = sorted(TRACE_DIR.glob("*.json"))


def schedule_of(trace: Trace):
    problem = AttentionProblem(**trace.problem)
    over = {}
    for key, pas in (("", "fwd"), ("bwd_", "bwd")):
        t = trace.tiling.get(pas)
        if t:
            over.update({key + k: t[k] for k in ("block_q", "block_kv", "stages", "warps")})
            if pas == "fwd" and "splits" in t:     # flash-decoding traces record their splits
                over["splits"] = t["splits"]
    return build_schedule(problem, "h200", trace.algorithm, **over)


def test_traces_are_committed():
    assert len(TRACES) >= 6


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_captured_trace_equals_generated_schedule(path):
    trace = Trace.load(path)
    sched = schedule_of(trace)
    assert compare_trace(sched, trace) == []
    traced = [k.name for k in sched.kernels if k.name not in trace.untraced]
    assert traced, "a trace must cover at least one kernel"
    for name in traced:   # every CTA of every traced kernel has events
        assert all(trace.kernel(name).ctas), name


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_captured_trace_survives_a_json_round_trip(path, tmp_path):
    trace = Trace.load(path)
    trace.save(tmp_path / "t.json")
    again = Trace.load(tmp_path / "t.json")
    assert again.kernels[0].ctas == trace.kernels[0].ctas


# ---- compare_trace on synthetic traces (the rules themselves) ----------------------------
def _fake(sched, mutate=None) -> Trace:
    ks = []
    for k in sched.kernels:
        ctas = [schedule_events(k, c) for c in range(k.num_ctas)]
        if mutate:
            ctas = [mutate(c, evs) for c, evs in enumerate(ctas)]
        ks.append(KernelTrace(k.name, k.launch.grid, k.launch.threads_per_cta,
                              k.launch.smem_bytes_per_cta, ctas))
    return Trace("fa2", {}, {}, ks)


@pytest.fixture
def fa2_sched():
    p = AttentionProblem(batch=1, heads_q=2, seq_q=300, head_dim=64, causal=True)
    return build_schedule(p, "h200", "fa2")


def test_identical_events_compare_equal(fa2_sched):
    assert compare_trace(fa2_sched, _fake(fa2_sched)) == []


def _hoist_second_kv(c, evs):
    """Move the K,V loads of the second KV step before the first step's compute (prefetch)."""
    evs = list(evs)
    loads = [n for n, e in enumerate(evs) if e.kind == "load" and e.name in ("K", "V")]
    if len(loads) < 4:
        return evs
    k1, v1 = evs[loads[2]], evs[loads[3]]
    rest = [e for n, e in enumerate(evs) if n not in (loads[2], loads[3])]
    at = rest.index(next(e for e in rest if e.kind == "mma"))
    return rest[:at] + [k1, v1] + rest[at:]


def test_a_prefetched_load_is_accepted_and_measured(fa2_sched):
    fake = _fake(fa2_sched, _hoist_second_kv)
    assert compare_trace(fa2_sched, fake) == []
    k = fa2_sched.kernels[0]
    last = k.num_ctas - 1
    assert hoist_depths(schedule_events(k, last), fake.kernels[0].ctas[last]) == 3


def test_a_late_load_is_reported(fa2_sched):
    def delay_q(c, evs):
        return evs[1:3] + evs[:1] + evs[3:] if evs[0].name == "Q" else evs
    out = compare_trace(fa2_sched, _fake(fa2_sched, delay_q))
    assert any("late" in m for m in out) or any("differ" in m for m in out)


def test_wrong_bytes_are_reported(fa2_sched):
    def shrink(c, evs):
        e = evs[0]
        return [Event(e.kind, e.name, e.coord, e.bytes - 2)] + evs[1:]
    out = compare_trace(fa2_sched, _fake(fa2_sched, shrink))
    assert out and "loads differ at #0" in out[0]


def test_reordered_compute_is_reported(fa2_sched):
    def swap(c, evs):
        idx = [n for n, e in enumerate(evs) if e.kind in ("mma", "exp")]
        if len(idx) < 2:
            return evs
        evs = list(evs)
        evs[idx[0]], evs[idx[1]] = evs[idx[1]], evs[idx[0]]
        return evs
    out = compare_trace(fa2_sched, _fake(fa2_sched, swap))
    assert out and "compute/stores differ" in out[0]
