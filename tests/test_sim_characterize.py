"""The fast mode's step 1 (sim/characterize.py): profiles of program segments on one SM,
against closed forms."""
import pytest

from iosim import load_gpu
from iosim.machine import SmRates
from iosim.schedule import Alu, Exp, Load, Loop, Pipeline
from iosim.sim.characterize import Characterizer, split_segments

GPU = load_gpu("h100")
RATES = SmRates.of(GPU, "fp16")
ALL_HIT = ((), 0.0)          # no tensor misses, no L2 queue


def test_a_long_compute_loop_is_extrapolated_to_count_times_its_period():
    """2,000 iterations of 1,000 ALU ops: the characterizer simulates 12 and 20 iterations
    and extrapolates; an ALU-bound loop lasts count × ops ÷ the SM's ALU rate."""
    ch = Characterizer(GPU, RATES, Pipeline(stages=1))
    program = (Loop("j", 0, 2000, (Alu("x", 1000),)),)
    duration = ch.profile(program, 1, ALL_HIT)[0]
    assert duration == pytest.approx(2000 * 1000 / RATES.alu_ops_per_s, rel=1e-9)
    assert ch.simulations == 2


def test_two_ctas_on_one_sm_share_its_exp_unit():
    """Two co-resident copies of an exp-bound loop alternate on the FIFO exp unit: one ends
    after 2n − 1 iteration times, the other after 2n; the profile is their mean."""
    ch = Characterizer(GPU, RATES, Pipeline(stages=1))
    program = (Loop("j", 0, 500, (Exp("e", 4096),)),)
    one = ch.profile(program, 1, ALL_HIT)[0]
    two = ch.profile(program, 2, ALL_HIT)[0]
    assert one == pytest.approx(500 * 4096 / RATES.exp_per_s, rel=1e-9)
    t = 4096 / RATES.exp_per_s
    assert two == pytest.approx((2 * 500 - 0.5) * t, rel=1e-9)


def test_a_load_that_hits_waits_for_its_transfer_and_the_l2_latency():
    ch = Characterizer(GPU, RATES, Pipeline(stages=1))
    nbytes = 32768
    duration, memory_stall = ch.profile((Load("Q", (0,), 128, 128, nbytes),), 1, ALL_HIT)[:2]
    expected = nbytes / GPU.l2_bandwidth_bytes_per_s + GPU.l2_latency_s
    assert duration == pytest.approx(expected, rel=1e-9)
    assert memory_stall == pytest.approx(expected, rel=1e-9)


def test_a_program_splits_into_plain_runs_and_top_level_loops():
    q = Load("Q", (0,), 1, 1, 2)
    body = (Alu("a", 1),)
    program = (q, Alu("b", 1), Loop("j", 0, 4, body), Loop("k", 0, 2, body), Alu("c", 1))
    assert [len(s) for s in split_segments(program)] == [2, 1, 1, 1]
    assert split_segments(program)[1][0].var == "j"


def test_short_ctas_on_one_sm_run_as_a_stream_of_out_of_phase_slots():
    """A CTA too short to settle (a 2-iteration exp loop, then as long an ALU phase) with two
    co-resident: the profile is a steady stream of two slots half a CTA apart, so one slot's
    exp phase runs under the other's ALU phase and each CTA lasts its solo time (started in
    lockstep, the two would queue on each unit and last about twice as long)."""
    ch = Characterizer(GPU, RATES, Pipeline(stages=1))
    t_exp = 2 * 4096 / RATES.exp_per_s
    alu_ops = round(t_exp * RATES.alu_ops_per_s)
    program = (Loop("j", 0, 2, (Exp("e", 4096),)), Alu("a", alu_ops))
    solo = ch.segment_profiles(program, 1, ALL_HIT)
    two = ch.segment_profiles(program, 2, ALL_HIT)
    assert [v[0] for v in two] == pytest.approx([v[0] for v in solo], rel=1e-6)
    turnover_s = GPU.cta_turnover_cycles / GPU.clock_hz      # held by the last segment
    assert sum(v[0] for v in solo) == pytest.approx(2 * t_exp + turnover_s, rel=1e-3)
    lockstep = ch._simulate(program, 2, ALL_HIT)[0]
    assert lockstep > 1.4 * 2 * t_exp
