"""FA-1 forward softmax op counts (iosim.algorithms.fa1.fwd_inner) against fa1_fwd.cu's code,
counted by hand from the kernel source: S in CHK-column chunks (CHK = 64, 32 or 16, the
largest dividing Bc), the PV accumulator rescaled by the running max at every chunk."""
import pytest

from iosim import AttentionProblem, build_schedule
from iosim.algorithms.fa1 import fwd_chunks, fwd_warps_per_row_tile
from iosim.algorithms.common import Tiling
from iosim.schedule import Alu, Exp, Loop


@pytest.mark.parametrize("bc, chunks", [(224, 7), (448, 7), (128, 2), (96, 3), (48, 3)])
def test_chunks_follow_the_kernels_chk_rule(bc, chunks):
    assert fwd_chunks(bc) == chunks


@pytest.mark.parametrize("br, warps, wn", [(128, 8, 1), (64, 8, 2), (64, 4, 1), (32, 8, 4)])
def test_warps_per_row_tile(br, warps, wn):
    assert fwd_warps_per_row_tile(Tiling(br, 224, 1, warps)) == wn


def _step_ops(sched):
    def walk(prog):
        for it in prog:
            if isinstance(it, Loop):
                yield from walk(it.body)
            else:
                yield it
    k = sched.kernels[0]
    return [op for op in walk(k.program(0)) if isinstance(op, (Alu, Exp))]


def test_step_elementwise_counts_128x224_d128():
    """B1 H2 N256 d128 (the trace's tiling 128×224, 8 warps): per step 128·224·5.5 softmax
    ALU ops, 7 rescales of the 128×128 PV accumulator, 128·224 + 7·128 + 2·128 exps."""
    p = AttentionProblem(batch=1, heads_q=2, seq_q=256, seq_kv=256, head_dim=128)
    s = build_schedule(p, "h200", "fa1", block_q=128, block_kv=224, warps=8)
    ops = {(type(o).__name__, o.name): o for o in _step_ops(s)}
    assert ops[("Alu", "softmax")].count == 128 * 224 * 5 + 128 * 224 // 2
    assert ops[("Alu", "rescale PV")].count == 7 * 128 * 128
    assert ops[("Exp", "exp")].count == 128 * 224 + 7 * 128 + 2 * 128
    assert ("Alu", "merge") not in ops
