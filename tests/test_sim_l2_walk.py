"""The L2 replay's walk of a CTA class's program shape (l2model.compile_shape, computed once
per class) places exactly the accesses that walking each CTA's program alone places: same
times, keys, bytes, op codes and streams, in the same order. The reference below is the walk
as it was before the per-class shapes (every CTA's loops measured and planned anew)."""
import pytest

from iosim import AttentionProblem, build_schedule
from iosim.schedule import Loop
from iosim.sim.characterize import split_segments
from iosim.sim.l2model import AccessSampler, _op_code, _ticks
from iosim.sim.pipeline import issue_lead

PROBLEMS = [
    ("fa2", dict(seq_q=700, seq_kv=900, heads_q=4, heads_kv=2, causal=True, direction="fwd+bwd")),
    ("fa1", dict(seq_q=600, heads_q=2, heads_kv=1, causal=True, direction="fwd+bwd")),
    ("fa3", dict(seq_q=1000, heads_q=2, batch=2, causal=True)),
    ("square", dict(seq_q=1500, heads_q=2, causal=True)),
    ("square", dict(seq_q=1000, seq_kv=1300, heads_q=2, heads_kv=1)),
    ("standard", dict(seq_q=300, seq_kv=200, heads_q=2, heads_kv=1, direction="fwd+bwd")),
    ("standard", dict(seq_q=1000, heads_q=4, heads_kv=2, causal=True)),
    ("flash-decoding", dict(seq_q=3, seq_kv_list=(3000, 700, 3000), batch=3, heads_q=8,
                            heads_kv=2, page_size=64, page_layout="shuffled")),
    ("flash-decoding-cascade", dict(seq_q=1, seq_kv=2500, prefix_len=1024, batch=5, heads_q=4,
                                    heads_kv=1)),
]


class ReferenceSampler(AccessSampler):
    """The walk before per-class shapes, verbatim: every CTA's loops measured (memoised by
    identity) and its innermost loops planned anew, placed accesses appended to its own list."""

    out = None          # AccessSampler.out is computed from the walk; the reference keeps one

    def __init__(self, ratio: int):
        super().__init__(ratio)
        self._plans: dict = {}
        self.out = []

    def cta(self, ki: int, segments: list, start_s: float, seg_ends: tuple, stages: int,
            cohort: int = 0, cls=None) -> None:
        """Place one CTA's accesses: segment s runs from the end of segment s−1 (or start_s)
        to seg_ends[s]; inside a segment, ops are spread evenly over its expanded ops."""
        self.kernel, self.cohort = ki, cohort
        t0 = start_s
        for seg, t1 in zip(segments, seg_ends):
            ticks = _ticks(seg, self.ticks_memo)
            self._walk(seg, 0, {}, t0, (t1 - t0) / max(ticks, 1), stages)
            t0 = t1

    def _walk(self, items, pos, env, t0, dt, stages):
        for item in items:
            if not isinstance(item, Loop):
                if item.kind in ("load", "store"):
                    key = (item.tensor,) + tuple(env[c] if isinstance(c, str) else c
                                                 for c in item.coord)
                    if self.sampled(key):
                        self.out.append((t0 + dt * pos, key, item.bytes, _op_code(item),
                                         self.stream(item.tensor)))
                pos += 1
                continue
            body_ticks = _ticks(item.body, self.ticks_memo)
            if any(isinstance(b, Loop) for b in item.body):
                for v in range(item.start, item.start + item.count):
                    env[item.var] = v
                    self._walk(item.body, pos + (v - item.start) * body_ticks, env, t0, dt,
                               stages)
                env.pop(item.var, None)
            else:
                self._innermost(item, pos, env, t0, dt, stages, body_ticks)
            pos += item.count * body_ticks

    def _plan(self, item, stages: int) -> list:
        """An innermost loop body's memory ops, once per body (memoised by identity): (index,
        op, op code, iterations issued early, whether the tile moves along its last
        coordinate with the loop variable)."""
        key = (id(item.body), item.var, stages)
        hit = self._plans.get(key)
        if hit is not None and hit[0] is item.body:
            return hit[1]
        lead = issue_lead(stages)
        var = item.var
        plan = [(idx, op, _op_code(op), lead if op.kind == "load" else 0,
                 bool(op.coord) and op.coord[-1] == var and var not in op.coord[:-1])
                for idx, op in enumerate(item.body) if op.kind in ("load", "store")]
        self._plans[key] = (item.body, plan)
        return plan

    def _innermost(self, item, pos, env, t0, dt, stages, body_ticks):
        """An innermost loop's memory ops; loads issued as the pipeline issues them
        (pipeline.issue_lead iterations early)."""
        var, start, count = item.var, item.start, item.count
        R = self.ratio
        out = self.out
        for idx, op, code, ahead, moves_last in self._plan(item, stages):
            coord = op.coord
            nbytes, sid = op.bytes, self.stream(op.tensor)
            if moves_last:
                # the tile moves with the loop: its sampled iterations, arithmetically
                head = (op.tensor,) + tuple(env[c] if isinstance(c, str) else c
                                            for c in coord[:-1])
                first = start + ((-self.salt[head] - start) % R if R > 1 else 0)
                base = t0 + dt * (pos + idx)
                step = dt * body_ticks
                for v in range(first, start + count, R):
                    j = v - start - ahead
                    out.append((base + step * (j if j > 0 else 0), head + (v,), nbytes, code, sid))
            elif coord and coord.count(var) == 1:
                # the tile moves with the loop along another coordinate than the last: the
                # key's prefix changes with v, its last coordinate does not
                at = coord.index(var)
                bound = tuple(env[c] if isinstance(c, str) else c for c in coord[:at])
                after = tuple(env[c] if isinstance(c, str) else c for c in coord[at + 1:])
                pre, mid, last = (op.tensor,) + bound, after[:-1], after[-1]
                salt = self.salt
                for v in range(start, start + count):
                    prefix = pre + (v,) + mid
                    if R == 1 or (last + salt[prefix]) % R == 0:
                        j = v - start - ahead
                        out.append((t0 + dt * (pos + (j if j > 0 else 0) * body_ticks + idx),
                                    prefix + (last,), nbytes, code, sid))
            else:
                for v in range(start, start + count):
                    env[var] = v
                    key = (op.tensor,) + tuple(env[c] if isinstance(c, str) else c
                                               for c in coord)
                    if self.sampled(key):
                        j = v - start - ahead
                        out.append((t0 + dt * (pos + (j if j > 0 else 0) * body_ticks + idx),
                                    key, nbytes, code, sid))
                env.pop(var, None)


def _walk_all(sampler, schedule):
    """Every CTA of every kernel, at made-up but distinct times (1 µs apart, segments 0.1 µs)."""
    for ki, k in enumerate(schedule.kernels):
        stages = max(1, k.pipeline.stages)
        for cta in range(k.num_ctas):
            segments = split_segments(k.program(cta))
            start = ki + cta * 1e-6
            ends = tuple(start + 1e-7 * (s + 1) for s in range(len(segments)))
            sampler.cta(ki, segments, start, ends, stages, int(cta % 5 == 4), k.class_of(cta))
    return sampler


def _named(sampler):
    """Accesses in sampling order, streams as (kernel, tensor, cohort)."""
    return [(t, key, b, code, sampler.streams[sid]) for t, key, b, code, sid in sampler.out]


@pytest.mark.parametrize("ratio", [1, 3, 7])
@pytest.mark.parametrize("algo,shape", PROBLEMS, ids=lambda v: str(v))
def test_class_shape_walk_places_the_same_accesses_as_walking_each_program(algo, shape, ratio):
    schedule = build_schedule(AttentionProblem(**shape), "h100", algo)
    new = _walk_all(AccessSampler(ratio), schedule)
    ref = _walk_all(ReferenceSampler(ratio), schedule)
    assert len(new.out) == len(ref.out) > 0
    assert _named(new) == _named(ref)
    # the walk registers a stream at its first sampled access (the reference at its op's
    # first visit): the same streams, each once, but none that no sampled access counts for
    assert len(set(new.streams)) == len(new.streams)
    assert set(new.streams) == {ref.streams[sid] for *_, sid in ref.out}


def test_a_cta_whose_segment_differs_from_its_class_shape_is_refused():
    """walk_cta walks a class's plain segments by the positions of its loads and stores: a CTA
    given as of that class with a segment of another length is an error, not a silent walk."""
    from iosim.schedule import Alu, Load, Store
    sampler = AccessSampler(1)
    sampler.walk_cta(0, 0, [(Load("Q", (0, 0), 64, 64, 8192), Alu("x", 64),
                             Store("O", (0, 0), 64, 64, 8192))], 1, cls=0)
    assert sampler.keys == [("Q", 0, 0), ("O", 0, 0)]
    with pytest.raises(ValueError, match="a segment of 2 items where its class has 3"):
        sampler.walk_cta(0, 1, [(Load("Q", (0, 1), 64, 64, 8192),
                                 Store("O", (0, 1), 64, 64, 8192))], 1, cls=0)


def test_the_replay_walk_refuses_a_class_whose_programs_differ_in_length():
    """fast._walk_replayed slices a class's segments at the positions found on its first CTA:
    a later CTA of the class with a program of another length is an error, not a wrong slice."""
    import dataclasses
    from types import SimpleNamespace
    from iosim.schedule import Alu
    from iosim.sim.fast import _walk_replayed
    schedule = build_schedule(AttentionProblem(seq_q=512, heads_q=2), "h100", "fa2")
    k = schedule.kernels[0]
    longer = dataclasses.replace(
        k, program=lambda cta: k.program(cta) + ((Alu("extra", 1),) if cta == 3 else ()))
    plan = SimpleNamespace(ratio=1, limits=[k.num_ctas], suffix=[None],
                           replayed=lambda ki, n: range(n))
    assert len(_walk_replayed(dataclasses.replace(schedule, kernels=(k,)), plan, [None]).ctas) \
        == k.num_ctas
    with pytest.raises(ValueError, match="CTA 3: a program of .* items where its class has"):
        _walk_replayed(dataclasses.replace(schedule, kernels=(longer,)), plan, [None])
