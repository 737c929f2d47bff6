"""The simulator's exp and ALU units run at the rates the GPU's figures give, shown on
hand-written one-op schedules (no algorithm, no fast-vs-exact comparison):

  exp unit of one SM   exp_per_clock_per_sm × clock_hz          (Programming Guide's table)
  ALUs of one SM       fp32_flops_per_s ÷ 2 ÷ sm_count          (one FMA = 2 FLOPs = 1 op)

Times are compared as differences (2n ops − n ops) so fixed per-kernel costs, if the model
has any, cancel."""
import pytest

from iosim import AttentionProblem, load_gpu
from iosim.schedule import Alu, Exp, Kernel, Launch, Pipeline, Schedule
from iosim.sim import simulate

# round figures: 100 SMs at 1 GHz, 16 exp per clock per SM → 1.6e10 exp/s per SM;
# 25.6 TFLOP/s fp32 → 1.28e13 ALU op/s → 1.28e11 per SM, i.e. 128 lanes per clock, as on
# GH100 (66.9 TFLOP/s / 2 / 132 SMs / 1.98 GHz); a faster ALU than the SM's 4 × 32 issue
# lanes would be capped by the issue slots (machine.MmaCost.issue_work_per_op)
# (no CTA turnover: a per-CTA fixed cost, tests/test_cta_turnover.py)
GPU = load_gpu("h100").with_(sm_count=100, clock_hz=1e9, exp_per_clock_per_sm=16,
                             fp32_flops_per_s=25.6e12, cta_turnover_cycles=None)
PROBLEM = AttentionProblem(batch=1, heads_q=1, seq_q=128, head_dim=64)


def one_op_schedule(op, ctas: int = 1) -> Schedule:
    """A kernel of `ctas` CTAs of 4 warps whose program is the single op."""
    kernel = Kernel(name="probe", launch=Launch((ctas, 1, 1), 128, 0, 32),
                    program=lambda cta: (op,), classes=((0, ctas),),
                    cta_coord=lambda cta: (cta,), pipeline=Pipeline())
    return Schedule("probe", PROBLEM, {}, (kernel,))


def time_of(op, mode, ctas: int = 1) -> float:
    return simulate(one_op_schedule(op, ctas), GPU, mode).time_s


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_one_sm_computes_exponentials_at_exp_per_clock_times_clock(mode):
    n = 4_000_000
    extra_s = time_of(Exp("exp", 2 * n), mode) - time_of(Exp("exp", n), mode)
    assert extra_s == pytest.approx(n / (16 * 1e9), rel=1e-6)        # 250 µs


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_one_sm_does_elementwise_ops_at_its_share_of_the_fp32_rate(mode):
    n = 40_000_000
    extra_s = time_of(Alu("alu", 2 * n), mode) - time_of(Alu("alu", n), mode)
    assert extra_s == pytest.approx(n / (25.6e12 / 2 / 100), rel=1e-6)  # 312.5 µs


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_an_op_alone_takes_ops_over_rate(mode):
    assert time_of(Exp("exp", 1_600_000), mode) == pytest.approx(1e-4, rel=1e-3)
    assert time_of(Alu("alu", 12_800_000), mode) == pytest.approx(1e-4, rel=1e-3)


def test_each_sm_has_its_own_exp_unit():
    # 100 CTAs land on 100 SMs and run side by side; a 101st queues behind one of them
    n = 1_600_000
    one = time_of(Exp("exp", n), "exact")
    assert time_of(Exp("exp", n), "exact", ctas=100) == pytest.approx(one, rel=1e-3)
    assert time_of(Exp("exp", n), "exact", ctas=101) == pytest.approx(2 * one, rel=1e-3)
