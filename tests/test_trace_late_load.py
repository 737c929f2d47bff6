"""The trace comparison's third rule on its own: a kernel whose loads and compute/stores are
each in the schedule's order, but which issues one load after more compute than the schedule
allows, is reported as a late load (and only that)."""
from iosim import AttentionProblem, build_schedule
from iosim.kernels.trace import KernelTrace, Trace, compare_cta, compare_trace, schedule_events

# FA-2 forward, one head, N = 256 with 64×64 tiles, not causal: 4 CTAs (Q blocks), each
# loads Q_i then, per KV step j = 0..3, K_j and V_j followed by S=QKᵀ, exp and O+=PV
SCHED = build_schedule(AttentionProblem(heads_q=1, seq_q=256, head_dim=64), "h200", "fa2",
                       block_q=64, block_kv=64, stages=2, warps=4)
KERNEL = SCHED.kernels[0]


def late_second_kv(events):
    """K_1 and V_1 issued after step 1's S=QKᵀ instead of before it."""
    evs = list(events)
    k1 = next(n for n, e in enumerate(evs) if e.kind == "load" and e.name == "K" and e.coord[-1] == 1)
    pair = evs[k1:k1 + 2]
    assert [e.name for e in pair] == ["K", "V"]
    rest = evs[:k1] + evs[k1 + 2:]
    s1 = k1 + [e.kind for e in rest[k1:]].index("mma") + 1     # just after step 1's S=QKᵀ
    return rest[:s1] + pair + rest[s1:]


def test_the_probe_schedule_is_what_the_comment_says():
    evs = schedule_events(KERNEL, 0)
    assert [(e.kind, e.name) for e in evs[:6]] == [
        ("load", "Q"), ("load", "K"), ("load", "V"), ("mma", "S=QK^T"), ("exp", "exp"),
        ("mma", "O+=PV")]
    assert KERNEL.num_ctas == 4


def test_a_load_issued_after_more_compute_than_scheduled_is_late():
    expected = schedule_events(KERNEL, 0)
    got = late_second_kv(expected)
    # same loads in the same order, same compute/stores in the same order
    assert [e for e in got if e.kind == "load"] == [e for e in expected if e.kind == "load"]
    assert [e for e in got if e.kind != "load"] == [e for e in expected if e.kind != "load"]
    # loads #0..#2 are Q_0, K_0, V_0; K_1 is load #3, scheduled after step 0's three compute
    # ops (S=QKᵀ, exp, O+=PV), issued after four
    assert compare_cta(expected, got) == [
        "load #3 issued after 4 compute/store ops; the schedule issues it after 3: "
        "a load came late"]


def test_a_late_load_in_one_cta_is_reported_for_that_cta_only():
    ctas = [schedule_events(KERNEL, c) for c in range(KERNEL.num_ctas)]
    ctas[2] = late_second_kv(ctas[2])
    la = KERNEL.launch
    trace = Trace("fa2", {}, {}, [KernelTrace(KERNEL.name, la.grid, la.threads_per_cta,
                                              la.smem_bytes_per_cta, ctas)])
    out = compare_trace(SCHED, trace)
    assert len(out) == 1
    assert out[0].startswith("fa2_fwd CTA 2 ") and out[0].endswith("a load came late")
