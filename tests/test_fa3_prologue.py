"""The FA-3 producer's issue order: fa3_fwd.cu issues Q_i, K_0, V_0 back to back
(`load_q(); load_kv(0); ...`) and the consumers wait for Q on its own mbarrier before their
first GEMM, so Q's load costs a lone CTA its transfer, not a second memory round trip
(pipeline.issue_prologue_with_loop). And the P-to-16-bit pack of the wgmma kernels' KV step
(F2FP.PACK_AB, two scores per instruction; fa3.PACK_P_INSTRUCTIONS_PER_ELEMENT)."""
from dataclasses import replace

import pytest

from iosim import AttentionProblem, build_schedule
from iosim.algorithms import fa3
from iosim.hardware import load_gpu
from iosim.schedule import Loop
from iosim.sim import simulate

GPU = load_gpu("h200-calibrated")


def _lone(drop_q: bool = False, warp_specialized: bool = True) -> float:
    """One CTA (128 query rows, 512 keys, d 128): its time, optionally without Q's load."""
    s = build_schedule(AttentionProblem(batch=1, heads_q=1, seq_q=128, seq_kv=512, head_dim=128),
                       "h200", "fa3")
    k = s.kernels[0]
    prog = k.program
    if drop_q:
        k = replace(k, program=lambda c: tuple(op for op in prog(c)
                                               if isinstance(op, Loop) or op.kind != "load"))
    if not warp_specialized:
        k = replace(k, pipeline=replace(k.pipeline, warp_specialized=False))
    return simulate(replace(s, kernels=(k,)), GPU, mode="exact").time_s


def test_q_is_issued_with_the_first_kv_tiles():
    # with Q issued alongside K_0 / V_0, its load adds at most its own transfer: well under
    # one DRAM round trip (dram_latency_s, 500 ns), where waiting for it first added one
    assert _lone() - _lone(drop_q=True) < 0.25 * GPU.dram_latency_s


def test_a_kernel_without_a_producer_still_waits_for_q_first():
    # no TMA producer (the thread issues, then waits): Q's round trip stays exposed
    extra = _lone(warp_specialized=False) - _lone(drop_q=True, warp_specialized=False)
    assert extra > 0.8 * GPU.dram_latency_s


@pytest.mark.parametrize("d,kernel", [(64, "iosim"), (128, "iosim"), (128, "cudnn")])
def test_kv_step_packs_half_an_instruction_per_score(d, kernel):
    p = AttentionProblem(batch=1, heads_q=1, seq_q=1024, head_dim=d)
    s = build_schedule(p, "h200", "fa3", kernel=kernel)
    t = s.tiling["fwd"]
    loop = next(op for op in s.kernels[0].program(0) if isinstance(op, Loop))
    packs = [op for op in loop.body if getattr(op, "name", "") == "pack P"]
    assert len(packs) == 1
    assert packs[0].count == t.block_q * t.block_kv // 2
    assert fa3.PACK_P_INSTRUCTIONS_PER_ELEMENT == 0.5


def test_fa2_forward_has_no_pack_op():
    # FA-2's softmax cost is the measured exposed fraction of the whole loop (machine.MmaCost)
    s = build_schedule(AttentionProblem(batch=1, heads_q=1, seq_q=1024, head_dim=64), "h200", "fa2")
    loop = next(op for op in s.kernels[0].program(0) if isinstance(op, Loop))
    assert not [op for op in loop.body if getattr(op, "name", "") == "pack P"]
