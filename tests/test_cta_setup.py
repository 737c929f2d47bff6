"""The project's FA-3 kernel's CTA setup (fa3.CTA_SETUP_CYCLES, measured with %globaltimer
stamps): a wait at the head of each CTA program that delays the CTA by exactly its time and
leaves the producer's issue order alone (Q still goes out with K0/V0)."""
from dataclasses import replace

import pytest

from iosim import AttentionProblem, load_gpu
from iosim.algorithms import build_schedule
from iosim.algorithms import fa3
from iosim.schedule import Barrier
from iosim.sim import simulate


def _lone(kernel: str = "iosim"):
    gpu = load_gpu("h200-calibrated")
    p = AttentionProblem(batch=1, heads_q=1, seq_q=128, seq_kv=512, head_dim=128, dtype="fp16")
    return build_schedule(p, gpu, "fa3", kernel=kernel) if kernel != "iosim" else build_schedule(p, gpu, "fa3"), gpu


def test_program_starts_with_the_measured_setup_only_for_the_project_kernel():
    s, _ = _lone()
    first = s.kernels[0].program(0)[0]
    assert isinstance(first, Barrier) and first.cycles == fa3.CTA_SETUP_CYCLES["iosim"] > 0
    s2, _ = _lone("flash-attn")
    assert not isinstance(s2.kernels[0].program(0)[0], Barrier)


def _without_setup(s):
    k = s.kernels[0]
    prog = k.program
    return replace(s, kernels=(replace(k, program=lambda c: prog(c)[1:]),))


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_setup_delays_a_lone_cta_by_exactly_its_time(mode):
    s, gpu = _lone()
    kw = {"exact_below_events": 0} if mode == "fast" else {}
    with_setup = simulate(s, gpu, mode, **kw).time_s
    without = simulate(_without_setup(s), gpu, mode, **kw).time_s
    # one CTA: nothing else can use the wait, and the Q copy still leaves with K0/V0 after it
    # (were Q waited for before the loop, the difference would include a memory round trip)
    assert with_setup - without == pytest.approx(fa3.CTA_SETUP_CYCLES["iosim"] / gpu.clock_hz, rel=1e-6)
