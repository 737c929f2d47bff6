"""wave_queue.py measures the L2 FIFO waits of a kernel's settled loop iterations in exact
mode's pieces. Checked on hand-written lockstep kernels against the closed form of a FIFO
server: n CTAs (one per SM) each load the same L2-resident tile of s seconds' transfer in a
loop with nothing else, L2 latency L. Saturated (n·s > s + L): the port never idles, each CTA
comes round every n·s seconds and waits n·s − s − L for its turn. Unsaturated (n·s < s + L):
after the first iteration the CTAs are spread s apart and nobody waits."""
import pytest

from iosim import AttentionProblem, load_gpu
from iosim.machine import SmRates
from iosim.schedule import Alu, Kernel, Launch, Load, Pipeline, Store, loop
from iosim.sim.launch import ctas_per_sm, kernel_mma_cost
from iosim.sim.wave_queue import truncated, wave_queue

SMS = 10
GPU = load_gpu("h100").with_(sm_count=SMS, cta_turnover_cycles=None)
PROBLEM = AttentionProblem(batch=1, heads_q=1, seq_q=128, head_dim=64)


def wave_of(tile_s: float, ctas: int = 3 * SMS, tensors: str = "A"):
    """The wave of a loop loading one L2-resident tile of tile_s seconds' transfer per tensor."""
    nbytes = int(round(GPU.l2_bandwidth_bytes_per_s * tile_s))
    rates = SmRates.of(GPU, "fp16")
    body = tuple(Load(t, (0,), 1, nbytes, nbytes) for t in tensors)
    kernel = Kernel(name="probe", launch=Launch((ctas, 1, 1), 128, 200_000, 32),
                    program=lambda cta: tuple(loop("j", 0, 40, body)), classes=((0, ctas),),
                    cta_coord=lambda cta: (cta,), pipeline=Pipeline(stages=1))
    assert ctas_per_sm(GPU, kernel) == 1
    return wave_queue(kernel, GPU, rates, kernel_mma_cost(GPU, PROBLEM, kernel), 1,
                      GPU.l2_capacity_bytes)


def waits_of(tile_s: float, ctas: int = 3 * SMS) -> dict:
    """The wave's mean FIFO wait of a load of a tile of tile_s seconds' transfer."""
    return wave_of(tile_s, ctas).as_dict()


def test_a_saturated_lockstep_loop_waits_for_the_other_ctas_transfers():
    tile_s = 100e-9
    expected = SMS * tile_s - tile_s - GPU.l2_latency_s       # 760 ns at L = 140 ns
    assert expected > 0
    assert waits_of(tile_s)["load", "A"] == pytest.approx(expected, rel=0.01)


def test_an_unsaturated_loop_does_not_queue_once_spread():
    tile_s = 10e-9
    assert SMS * tile_s < tile_s + GPU.l2_latency_s
    assert waits_of(tile_s)["load", "A"] == pytest.approx(0.0, abs=1e-12)


def test_truncation_cuts_every_loop_to_the_count():
    prog = tuple(loop("j", 3, 50, (*loop("c", 0, 30, (Alu("x", 1),)),)))
    (outer,) = truncated(prog, 12)
    assert (outer.start, outer.count, outer.body[0].count) == (3, 12, 12)


def test_a_saturated_wait_point_lasts_one_round_of_every_ctas_transfers():
    # issue to the last tile: the wait for the others (n·2s − 2s − L), its own 2s, then L
    tile_s = 100e-9
    points = dict(wave_of(tile_s, tensors="AB").points)
    assert points[("A", "B")] == pytest.approx(SMS * 2 * tile_s, rel=0.01)


def test_an_unsaturated_wait_point_lasts_its_transfer_and_the_l2_latency():
    tile_s = 10e-9
    points = dict(wave_of(tile_s).points)
    assert points[("A",)] == pytest.approx(tile_s + GPU.l2_latency_s, rel=1e-6)


def test_the_last_partial_waves_wait_points_are_kept_apart():
    # 25 CTAs on 10 SMs: CTAs 20-24 form the last partial wave, alone on the port
    tile_s = 100e-9
    wave = wave_of(tile_s, ctas=25)
    assert dict(wave.tail_points) == {}          # without tail_start: one body
    nbytes = int(round(GPU.l2_bandwidth_bytes_per_s * tile_s))
    body = (Load("A", (0,), 1, nbytes, nbytes),)
    kernel = Kernel(name="probe", launch=Launch((25, 1, 1), 128, 200_000, 32),
                    program=lambda cta: tuple(loop("j", 0, 40, body)), classes=((0, 25),),
                    cta_coord=lambda cta: (cta,), pipeline=Pipeline(stages=1))
    split = wave_queue(kernel, GPU, SmRates.of(GPU, "fp16"),
                       kernel_mma_cost(GPU, PROBLEM, kernel), 1, GPU.l2_capacity_bytes, 20)
    assert dict(split.points)[("A",)] == pytest.approx(SMS * tile_s, rel=0.01)
    assert dict(split.tail_points)[("A",)] == pytest.approx(5 * tile_s, rel=0.01)


def test_a_stores_latency_is_its_wait_for_the_port_and_its_transfer():
    # one store per iteration, saturated: n·s per round, the store done n·s after issue
    tile_s = 100e-9
    nbytes = int(round(GPU.l2_bandwidth_bytes_per_s * tile_s))
    body = (Store("O", (0,), 1, nbytes, nbytes),)
    kernel = Kernel(name="probe", launch=Launch((3 * SMS, 1, 1), 128, 200_000, 32),
                    program=lambda cta: tuple(loop("j", 0, 40, body)),
                    classes=((0, 3 * SMS),), cta_coord=lambda cta: (cta,),
                    pipeline=Pipeline(stages=1))
    wave = wave_queue(kernel, GPU, SmRates.of(GPU, "fp16"),
                      kernel_mma_cost(GPU, PROBLEM, kernel), 1, GPU.l2_capacity_bytes)
    assert dict(wave.points)["store", "O"] == pytest.approx(SMS * tile_s, rel=0.01)
