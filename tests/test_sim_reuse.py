"""sim.reuse.Reuse: the second simulation of a schedule (at another SM clock, as
clock.sustained_simulation runs it) reuses the L2 walk of the first and gives exactly the
result a simulation without it gives."""
import pytest

from iosim import AttentionProblem, build_schedule
from iosim.hardware import load_gpu
from iosim.sim import simulate
from iosim.sim.reuse import Reuse


@pytest.fixture(scope="module")
def schedule():
    return build_schedule(AttentionProblem(seq_q=8192, heads_q=16, batch=2, causal=True),
                          "h100", "fa2")


def _figures(r):
    return (r.time_s, r.dram_read_bytes, r.dram_write_bytes, r.l2_to_sm_bytes,
            [(k.time_s, k.dram_read_bytes, k.dram_write_bytes) for k in r.kernels])


def test_a_reused_walk_gives_the_result_of_a_fresh_simulation_at_another_clock(schedule):
    gpu = load_gpu("h100")
    slower = gpu.at_clock(gpu.clock_hz * 0.8)
    reuse = Reuse(schedule)
    first = simulate(schedule, gpu, reuse=reuse)
    assert first.model["engine"] == "aggregated" and len(reuse.walks) == 1
    again = simulate(schedule, slower, reuse=reuse)
    fresh = simulate(schedule, slower)
    assert len(reuse.walks) == 1                    # the same plan: the walk was reused
    assert _figures(again) == _figures(fresh)
    assert again.time_s != first.time_s             # the clock did change the result


def test_a_reuse_refuses_another_schedule(schedule):
    other = build_schedule(AttentionProblem(seq_q=8192, heads_q=16, batch=2), "h100", "fa2")
    with pytest.raises(ValueError, match="schedule it was made for"):
        simulate(other, "h100", reuse=Reuse(schedule))


def test_a_reuse_keeps_at_most_its_bound_of_walks(schedule):
    reuse = Reuse(schedule, max_walks=1)
    simulate(schedule, "h100", reuse=reuse)
    simulate(schedule, "h100", reuse=reuse, l2_sample_budget=20_000)   # another plan
    assert len(reuse.walks) == 1
