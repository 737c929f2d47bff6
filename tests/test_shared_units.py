"""The SM's processor-sharing units (compute.SharedServer), against closed-form processor-sharing
times, and the consumer warpgroups' softmax on them (pipeline._shared_elementwise)."""
import pytest
import simpy

from iosim.sim.compute import SharedServer


def finish_times(arrivals: list, rate: float = 10.0) -> list:
    """[(arrival_s, amount)] on one SharedServer: each request's completion time."""
    env = simpy.Environment()
    srv = SharedServer(env, rate)
    done = [None] * len(arrivals)

    def job(i, t, amount):
        yield env.timeout(t)
        yield srv.request(amount)
        done[i] = env.now
    for i, (t, a) in enumerate(arrivals):
        env.process(job(i, t, a))
    env.run()
    return done, srv


def test_one_request_alone_runs_at_the_full_rate():
    done, srv = finish_times([(0.0, 50.0)])
    assert done == [pytest.approx(5.0)]
    assert srv.busy_s == pytest.approx(5.0)


def test_equal_requests_arriving_together_finish_together():
    # FIFO would finish them at 5 and 10; shared, both progress at 5 per second
    done, _ = finish_times([(0.0, 50.0), (0.0, 50.0)])
    assert done == [pytest.approx(10.0), pytest.approx(10.0)]


def test_a_late_arrival_slows_the_request_in_service():
    # A (100) alone for 2 s (20 done), then A and B (20) share: B's 20 take 4 s (done at 6),
    # A has 60 left at 6 and runs alone: 6 more seconds, done at 12
    done, srv = finish_times([(0.0, 100.0), (2.0, 20.0)])
    assert done == [pytest.approx(12.0), pytest.approx(6.0)]
    assert srv.busy_s == pytest.approx(12.0)


def test_three_unequal_requests_leave_in_order_of_their_work():
    # 10, 20, 30 at once: all at 10/3 until the first leaves at 3, then 5 each: the second's
    # remaining 10 take 2 s (done at 5), the third's remaining 10 alone take 1 s (done at 6)
    done, _ = finish_times([(0.0, 10.0), (0.0, 20.0), (0.0, 30.0)])
    assert done == [pytest.approx(3.0), pytest.approx(5.0), pytest.approx(6.0)]


def test_an_empty_request_is_done_at_once():
    done, _ = finish_times([(1.5, 0.0)])
    assert done == [pytest.approx(1.5)]
    env = simpy.Environment()
    ev = SharedServer(env, 10.0).request(0.0)
    assert ev.triggered                 # succeeded on the spot, not queued as a job


def test_requests_in_service_are_woken_when_the_first_is_done_not_before(monkeypatch):
    # 50 and 80 at rate 10: the shared phase ends when the 50 is done, at 10 s (not 5: the
    # wake-up is scheduled at the remaining work times the requests sharing), then the 80's
    # remaining 30 alone end at 13
    wakes = []
    wake = SharedServer._wake
    monkeypatch.setattr(SharedServer, "_wake", lambda self, gen: wakes.append(
        (self.env.now, gen == self._gen)) or wake(self, gen))
    done, _ = finish_times([(0.0, 50.0), (0.0, 80.0)])
    assert done == [pytest.approx(10.0), pytest.approx(13.0)]
    assert [t for t, current in wakes if current] == [pytest.approx(10.0), pytest.approx(13.0)]


def test_consumers_softmax_tiles_started_together_finish_together():
    """Two consumer warpgroups' Exp ops of one CTA, started at once on the shared unit: both end
    at twice one alone (the FIFO units would end the first at one tile's time)."""
    from iosim import load_gpu
    from iosim.machine import SmRates
    from iosim.schedule import Exp, Pipeline
    from iosim.sim import pipeline as pl
    from iosim.sim.compute import SmUnits
    from iosim.sim.memory import Server

    gpu = load_gpu("h200-calibrated")
    env = simpy.Environment()
    units = SmUnits(SmRates.of(gpu, "fp16"))
    pipe = Pipeline(stages=2, warp_specialized=True, consumer_warpgroups=2, intra_overlap=True)
    ctx = pl.CtaContext(env, units, None, pipe)          # no MmaCost: the exp unit alone
    op = Exp("exp", 2 * 8192)                            # the CTA's op; each consumer half
    ends = []

    def consumer():
        yield from pl.run_ops(ctx, (op,), {}, 0.5, [0.0] * 4, False, Server(units.tensor.rate))
        ends.append(env.now)
    env.process(consumer())
    env.process(consumer())
    env.run()
    tile_s = 8192 / (gpu.exp_per_clock_per_sm * gpu.clock_hz)
    assert ends == [pytest.approx(2 * tile_s), pytest.approx(2 * tile_s)]
