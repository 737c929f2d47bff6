"""The fast mode's wait cohorts: the replay counts a synchronous kernel's loads per CTA
(l2model: Stream.cta, KernelCounts.cta_loads, LoadCounts.first), wait_cohorts.wait_cohorts groups the
CTAs by the tensors their first loads waited for DRAM on, WaitCohorts.by_wave splits them by
launch wave, and the wave simulation gives each (cohort, wave) its wait points."""
import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.sim.wait_cohorts import WaitCohorts, counted_per_cta, wait_cohorts
from iosim.sim.l2model import LoadCounts, Stream, replay
from iosim.sim.wave_queue import WaitPoints

H100 = load_gpu("h100")


def test_the_replay_counts_each_ctas_loads_and_its_first_loads_wait():
    """Three CTAs read one tile: CTA 0 misses at 0 s, CTA 1 asks at 0.5 s while it is in
    flight (fetch: 1 s transfer + 1 s latency, lands at 2 s), CTA 2 at 3 s hits; then CTA 2
    reads a second tile, a miss. Waits in tile fetches: 1, (2 − 0.5)/2 = 0.75, 0 then 1."""
    streams = [Stream(0, "K", 0, cta) for cta in range(3)]
    accesses = [(0.0, ("K", 0), 100, 0, 0), (0.5, ("K", 0), 100, 0, 1),
                (3.0, ("K", 0), 100, 0, 2), (4.0, ("K", 1), 100, 0, 2)]
    k = replay(accesses, streams, 1e6, 1, 1.0, "warm", 100.0).kernels[0]
    per = {cta: loads["K"] for cta, loads in k.cta_loads.items()}
    assert per[0].first() == pytest.approx(1.0)
    assert per[1].first() == pytest.approx(0.75)
    assert per[2].first() == pytest.approx(0.0)         # its first load hit, its second missed
    assert per[2].wait == pytest.approx(1.0) and per[2].loads == 2
    # the kernel's figures are the sum of the CTAs'
    assert k.loads["K"].wait == pytest.approx(2.75) and k.loads["K"].loads == 4


def _counts(loads: int, wait: float, first: float, nbytes: int = 100, miss: int = 0):
    c = LoadCounts(bytes=loads * nbytes, loads=loads, miss_bytes=miss, wait=wait)
    c.first_wait = first
    return c


def test_ctas_are_grouped_by_the_tensors_their_first_loads_waited_on():
    # CTAs 0, 1 wait on K (a lockstep group's first readers), CTA 2 finds K in L2; every CTA
    # whose Q was sampled waited on it (its own tile, read first by it): Q splits nobody
    cta_loads = {0: {"K": _counts(4, 4.0, 1.0, miss=100), "Q": _counts(4, 1.0, 1.0)},
                 1: {"K": _counts(4, 3.0, 0.8)},
                 2: {"K": _counts(4, 0.0, 0.0), "Q": _counts(4, 1.0, 1.0)}}
    body = {"K": (0.1, 0.5), "Q": (0.25, 0.25)}
    split = wait_cohorts(cta_loads, ("K", "Q"), body)
    assert split.waits == ((), ("K",))
    assert split.of == {0: 2, 1: 2, 2: 1}
    warm, cold = split.miss
    # each cohort's own counts: K wait per load 0 and (4 + 3) / 8, miss ratio 0 and 100 / 800
    assert warm["K"] == (0.0, 0.0) and cold["K"] == pytest.approx((100 / 800, 7 / 8))
    # Q: sampled in both cohorts here, its figures theirs (1 / 4 per load)
    assert cold["Q"] == pytest.approx((0.0, 0.25))


def test_no_cohorts_where_every_cta_waits_alike():
    cta_loads = {c: {"K": _counts(4, 4.0, 1.0)} for c in range(3)}
    assert wait_cohorts(cta_loads, ("K",), {"K": (1.0, 1.0)}) is None
    assert wait_cohorts({}, ("K",), {"K": (1.0, 1.0)}) is None


def test_a_cohort_without_samples_of_a_tensor_takes_the_kernels_figures():
    cta_loads = {0: {"K": _counts(4, 4.0, 1.0)}, 1: {"K": _counts(4, 0.0, 0.0)},
                 2: {"K": _counts(4, 0.0, 0.0), "V": _counts(2, 0.0, 0.0)}}
    split = wait_cohorts(cta_loads, ("K", "V"), {"K": (0.3, 0.3), "V": (0.2, 0.4)})
    assert split.miss[split.of[0] - 1]["V"] == (0.2, 0.4)


def test_cohorts_split_by_launch_wave_keep_their_figures_and_point_keys():
    split = WaitCohorts({0: 1, 1: 2, 2: 1, 3: 2, 4: 2}, ({"K": (0.0, 0.0)}, {"K": (0.1, 1.0)}),
                        ((), ("K",)))
    waved = split.by_wave(slots=2, waves=2)          # CTAs 0-1 wave 0, 2-3 wave 1, 4 later
    keys = {cta: waved.key(ix) for cta, ix in waved.of.items()}
    assert keys == {0: (1, 0), 1: (2, 0), 2: (1, 1), 3: (2, 1), 4: 2}
    assert all(waved.miss[ix - 1] == split.miss[(k[0] if isinstance(k, tuple) else k) - 1]
               for ix, k in ((waved.of[c], keys[c]) for c in keys))
    assert waved.key(0) == 0
    # and each split cohort keeps the tensors its CTAs wait on
    assert all(waved.waits[ix - 1] == split.waits[(k[0] if isinstance(k, tuple) else k) - 1]
               for ix, k in ((waved.of[c], keys[c]) for c in keys))


def test_a_first_load_that_waited_exactly_half_a_fetch_counts_as_waiting():
    # COLD_WAIT is "at least half a tile fetch"
    from iosim.sim.wait_cohorts import COLD_WAIT
    cta_loads = {0: {"K": _counts(2, 1.0, COLD_WAIT)}, 1: {"K": _counts(2, 0.0, 0.0)}}
    split = wait_cohorts(cta_loads, ("K",), {"K": (0.5, 0.5)})
    assert split.waits == ((), ("K",)) and split.of == {0: 2, 1: 1}


def test_wait_points_of_a_cohort_fall_back_to_its_cohort_then_the_kernels():
    wp = WaitPoints(((("Q", "K"), 1e-7),), 0.5, (),
                    ((2, ((("Q", "K"), 5e-7),)), ((2, 1), ((("Q", "K"), 6e-7),))))
    assert dict(wp.cohort((2, 1)).points)["Q", "K"] == 6e-7
    assert dict(wp.cohort((2, 3)).points)["Q", "K"] == 5e-7      # no such wave: the cohort's
    assert dict(wp.cohort(1).points)["Q", "K"] == 1e-7           # no such cohort: the kernel's
    # a kernel without points of its own (not in lockstep): the replay's queue position
    assert WaitPoints((), 0.5, (), ((2, ((("Q", "K"), 5e-7),)),)).cohort(1) == 0.5


@pytest.mark.parametrize("algorithm,seq,expected", [("square", 4096, True), ("fa2", 4096, False),
                                                    ("square", 4000, True)])
def test_only_synchronous_kernels_are_counted_per_cta(algorithm, seq, expected):
    schedule = build_schedule(AttentionProblem(seq_q=seq, heads_q=8), H100, algorithm)
    assert counted_per_cta(schedule.kernels[0]) is expected


def test_a_kernel_of_one_class_is_counted_per_cta_too():
    # FA-1 (synchronous; N 4096: every CTA one class)
    k = build_schedule(AttentionProblem(seq_q=4096, heads_q=8), H100, "fa1").kernels[0]
    assert len(k.representatives) == 1
    assert counted_per_cta(k) is True


def test_the_wave_simulation_gives_each_cohort_and_wave_its_points():
    """A saturated lockstep probe (test_sim_wave_queue's): 3 waves of 10 CTAs, all of one
    cohort. The cohort's points are the kernel's (the same CTAs of the counted waves); each
    wave's are its own CTAs', and the counted waves' mean is their mean."""
    from iosim.machine import SmRates
    from iosim.schedule import Kernel, Launch, Load, Pipeline, loop
    from iosim.sim.launch import kernel_mma_cost
    from iosim.sim.wave_queue import wave_queue
    sms = 10
    gpu = H100.with_(sm_count=sms, cta_turnover_cycles=None)
    nbytes = int(round(gpu.l2_bandwidth_bytes_per_s * 100e-9))
    body = (Load("A", (0,), 1, nbytes, nbytes),)
    kernel = Kernel(name="probe", launch=Launch((3 * sms, 1, 1), 128, 200_000, 32),
                    program=lambda cta: tuple(loop("j", 0, 40, body)),
                    classes=((0, 3 * sms),), cta_coord=lambda cta: (cta,),
                    pipeline=Pipeline(stages=1))
    problem = AttentionProblem(batch=1, heads_q=1, seq_q=128, head_dim=64)
    q = wave_queue(kernel, gpu, SmRates.of(gpu, "fp16"), kernel_mma_cost(gpu, problem, kernel),
                   1, gpu.l2_capacity_bytes, None, {c: 1 for c in range(3 * sms)},
                   wave_slots=sms)
    by = dict(q.cohort_points)
    assert set(by) == {1, (1, 0), (1, 1), (1, 2)}
    assert by[1] == q.points
    lat = {w: dict(by[1, w])["A",] for w in range(3)}
    assert dict(q.points)["A",] == pytest.approx((lat[1] + lat[2]) / 2)


def test_a_program_counts_as_cut_once_a_loop_reaches_the_waves_iterations():
    from iosim.schedule import Alu, loop
    from iosim.sim.wave_queue import WAVE_ITERATIONS, _cut, truncated
    short = tuple(loop("j", 0, WAVE_ITERATIONS - 2, (Alu("x", 1),)))
    nested = tuple(loop("j", 0, 3, tuple(loop("c", 0, 40, (Alu("x", 1),)))))
    assert not _cut(truncated(short, WAVE_ITERATIONS))
    assert _cut(truncated(tuple(loop("j", 0, 40, (Alu("x", 1),))), WAVE_ITERATIONS))
    assert _cut(truncated(nested, WAVE_ITERATIONS))          # an inner loop was cut


def test_occupancy_integrates_the_running_ctas():
    """Two CTAs run [0, 4] and [1, 2]: over [0, 3] 3 + 1 CTA-seconds, over [2, 10] 2."""
    from iosim.sim.fast import _Occupancy
    occ = _Occupancy([(0.0, 4.0), (1.0, 2.0)])
    assert occ.between(0.0, 3.0) == pytest.approx(4.0)
    assert occ.between(2.0, 10.0) == pytest.approx(2.0)
    assert occ.between(5.0, 6.0) == pytest.approx(0.0)


def test_outsiders_take_the_trains_waits_by_the_share_still_running():
    """A first wave of two waiting CTAs (slots 2) running [0, 10] and [0, 5], and a cohort
    of one CTA that waits on nothing, running [5, 15]: over its 10 s, 5 CTA-seconds of the
    train of two, a share of 0.25 of the outsiders' wait."""
    from iosim.sim.fast import _outsider_queues
    split = WaitCohorts({0: 1, 1: 1, 2: 2}, ({}, {}), (("K",), ()))
    rows = [(0, 0, 0, 0.0, 10.0), (0, 1, 1, 0.0, 5.0), (0, 2, 1, 5.0, 15.0)]
    waits = ((("load", "Q"), 4e-7),)
    assert _outsider_queues(split, waits, rows, 2) == ((2, ((("load", "Q"), 1e-7),)),)
    # a train's cohort keeps its own wait points
    q = WaitPoints((), 3.0, (), ((1, ((("Q", "K"), 5e-7),)),), ((2, waits),))
    assert q.cohort(2).as_dict() == dict(waits)
    assert isinstance(q.cohort(1), WaitPoints)
