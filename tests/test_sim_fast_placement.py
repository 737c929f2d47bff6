"""The fast mode's placement of the replay's walked CTAs in time (fast._group_times,
fast._placed, fast.KernelRows.marks_of): a repeated period's CTA takes the marks of the CTA
it copies shifted by whole periods, and a walked CTA without a sampled access is not looked
up at all while the sampled accesses' times stay those of placing every CTA."""
from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.sim.characterize import split_segments
from iosim.sim.fast import KernelRows, _group_times
from iosim.sim.fluid import Repeat
from iosim.sim.l2model import AccessSampler, group_times


def test_a_repeated_cta_takes_the_marks_of_the_cta_it_copies_shifted_by_whole_periods():
    # CTAs 0..3 emitted; rows 2..3 (CTAs 2, 3) repeat 5 more times, 2 CTAs and 0.25 s apart
    rows = [(0, c, 0, 0.0, 1.0, None, None) for c in range(4)]
    marks = {0: (0.0, (0.5, 1.0)), 1: (0.1, (0.6,)), 2: (1.0, (1.5, 2.0)),
             3: (1.125, (1.75, 2.5, 3.0))}
    kr = KernelRows(rows, marks, [Repeat(2, 4, 5, 2, 0.25)])
    assert kr.marks_of(1) == (0.1, (0.6,))                      # emitted: its own
    assert kr.marks_of(8) == (1.0 + 0.75, (1.5 + 0.75, 2.0 + 0.75))   # CTA 2, 3 periods on
    assert kr.marks_of(13) == (1.125 + 1.25, (1.75 + 1.25, 2.5 + 1.25, 3.0 + 1.25))


def test_a_cta_past_the_repeated_periods_is_unknown():
    kr = KernelRows([(0, 0, 0, 0.0, 1.0, None, None)], {0: (0.0, (1.0,))},
                    [Repeat(0, 1, 3, 1, 1.0)])
    try:
        kr.marks_of(4)                       # copies 1..3 only
    except KeyError:
        return
    raise AssertionError("CTA 4 lies past the repeats and was given marks")


class _CountingRows:
    """KernelRows-like: every CTA's marks from a closed form, and the CTAs asked."""

    def __init__(self, n_segments: dict):
        self.n_segments, self.asked = n_segments, []

    def marks_of(self, cta: int) -> tuple:
        self.asked.append(cta)
        start = 1e-6 * cta
        return start, tuple(start + 1e-7 * (s + 1) for s in range(self.n_segments[cta]))


def _walked(ratio: int):
    """An AccessSampler that walked every CTA of standard attention's QKᵀ kernel (N 2048,
    1 head: 128 CTAs) at a set-sampling ratio, and each CTA's segment count."""
    gpu = load_gpu("h100")
    kernel = build_schedule(AttentionProblem(seq_q=2048, heads_q=1), gpu,
                            "standard").kernels[0]
    sampler = AccessSampler(ratio)
    segs = {}
    for cta in range(kernel.num_ctas):
        segments = split_segments(kernel.program(cta))
        segs[cta] = len(segments)
        sampler.walk_cta(0, cta, segments, kernel.pipeline.stages, 0, kernel.class_of(cta))
    return sampler, segs


def test_walked_ctas_without_a_sampled_access_are_not_looked_up():
    sampler, segs = _walked(ratio=16)
    used = {run[0] for run in sampler.runs}
    g, sampling = 0, set()
    for _, cta, ticks in sampler.ctas:
        if any(x in used for x in range(g, g + len(ticks))):
            sampling.add(cta)
        g += len(ticks)
    rows = _CountingRows(segs)
    _group_times(sampler, [rows])
    assert 0 < len(sampling) < len(segs)          # the case the skip is for
    assert sorted(rows.asked) == sorted(sampling)


def test_skipping_them_leaves_every_sampled_access_at_its_time():
    sampler, segs = _walked(ratio=16)
    rows = _CountingRows(segs)
    everyone = _CountingRows(segs)
    t0s, dts = [], []                              # every walked CTA placed, as before
    group_times(((*everyone.marks_of(cta), ticks) for _, cta, ticks in sampler.ctas), t0s, dts)
    assert sampler.times(*_group_times(sampler, [rows])) == sampler.times(t0s, dts)
