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


def _tile_ops():
    """The probe's d 64 tile in the schedule's ops, for a CTA of three consumers (each a third)."""
    from iosim.schedule import Alu, Exp
    return (Alu("softmax", 3 * 3 * 8192), Exp("exp", 3 * (8192 + 64)), Alu("pack P", 3 * 4096),
            Alu("rescale", 3 * 4096))


def _tiles_end(n_tiles: int, busy_streams_until=()):
    """Cycles until each of n consumers, started together, ends its softmax tile (run_ops on the
    SM's units, no MmaCost), with wgmma streams busy until the given cycles."""
    from iosim import load_gpu
    from iosim.machine import SmRates
    from iosim.schedule import Pipeline
    from iosim.sim import pipeline as pl
    from iosim.sim.compute import SmUnits
    from iosim.sim.memory import Server

    gpu = load_gpu("h200-calibrated")
    env = simpy.Environment()
    units = SmUnits(SmRates.of(gpu, "fp16"))
    pipe = Pipeline(stages=2, warp_specialized=True, consumer_warpgroups=3, intra_overlap=True)
    ctx = pl.CtaContext(env, units, None, pipe, cycle_s=1 / gpu.clock_hz)
    for i, until in enumerate(busy_streams_until):
        units.note_wgmma(("stream", i), until / gpu.clock_hz)
    ends = []

    def consumer():
        yield from pl.run_ops(ctx, _tile_ops(), {}, 1 / 3, [0.0] * 4, False, Server(units.tensor.rate))
        ends.append(env.now * gpu.clock_hz)
    for _ in range(n_tiles):
        env.process(consumer())
    env.run()
    return ends


def test_a_lone_softmax_tile_takes_the_probe_s_cycles():
    assert _tiles_end(1) == [pytest.approx(1826874 / 2000)]


@pytest.mark.parametrize("n, cycles", [(2, 2730300 / 2000), (3, 3660683 / 2000)])
def test_tiles_started_together_finish_together_at_the_probe_s_cycles(n, cycles):
    assert _tiles_end(n) == [pytest.approx(cycles)] * n


@pytest.mark.parametrize("m, cycles", [(1, 2078163 / 2000), (2, 2471663 / 2000)])
def test_a_tile_beside_busy_wgmma_streams_takes_the_probe_s_cycles(m, cycles):
    assert _tiles_end(1, [1e6] * m) == [pytest.approx(cycles)]


def test_a_stream_going_idle_mid_tile_speeds_the_rest_up():
    """Beside one stream busy for the first 500 cycles: 500 cycles at 1/1.138 of the lone rate,
    then the rest of the 913.4 lone cycles at the lone rate."""
    lone, slow = 1826874 / 2000, 2078163 / 1826874
    assert _tiles_end(1, [500.0]) == [pytest.approx(500.0 + lone - 500.0 / slow)]
