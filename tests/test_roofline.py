"""The roofline pinned to values computed here from the GPU's figures: each unit or memory
level needs work ÷ peak rate; the roofline time is the largest of these (the roofs overlap,
they do not add), and the binding roof is the one that takes it.

Peak rates from the GpuSpec's figures (iosim/data/gpus/*.yaml):
  tensor cores  tensor_flops_per_s[dtype]                         (datasheet, dense)
  exp units     exp_per_clock_per_sm × clock_hz × sm_count        (Programming Guide's table)
  ALUs          fp32_flops_per_s ÷ 2   (one fp32 FMA = 2 FLOPs = 1 elementwise op)
  DRAM, L2      dram_bandwidth_bytes_per_s, l2_bandwidth_bytes_per_s
"""
import pytest

from iosim import AttentionProblem, analyze, load_gpu
from iosim.analysis.roofline import roofline

# a GPU with round figures: 100 SMs at 1 GHz, 16 exp per clock per SM → 1.6e12 exp/s;
# 40 TFLOP/s fp32 → 2e13 ALU op/s; 1e15 fp16 tensor FLOP/s; 2e12 B/s DRAM, 8e12 B/s L2
ROUND = load_gpu("h100").with_(
    sm_count=100, clock_hz=1e9, exp_per_clock_per_sm=16, fp32_flops_per_s=40e12,
    dram_bandwidth_bytes_per_s=2e12, l2_bandwidth_bytes_per_s=8e12,
    tensor_flops_per_s={"fp16": 1e15, "bf16": 1e15, "tf32": 5e14, "fp8": 2e15})


def test_each_roof_is_work_over_its_peak_rate():
    r = roofline(ROUND, "fp16", mma_flops=3e12, exp_count=8e9, alu_ops=6e10,
                 dram_bytes=4e9, l2_bytes=4e9)
    assert r.tensor_time_s == pytest.approx(3e-3)       # 3e12 / 1e15
    assert r.exp_time_s == pytest.approx(5e-3)          # 8e9 / (16 · 1e9 · 100)
    assert r.alu_time_s == pytest.approx(3e-3)          # 6e10 / (40e12 / 2)
    assert r.dram_time_s == pytest.approx(2e-3)         # 4e9 / 2e12
    assert r.l2_time_s == pytest.approx(0.5e-3)         # 4e9 / 8e12
    assert r.exp_per_s == pytest.approx(1.6e12)
    assert r.tensor_flops_per_s == pytest.approx(1e15)


def test_roofline_time_is_the_largest_roof_not_their_sum():
    r = roofline(ROUND, "fp16", mma_flops=3e12, exp_count=8e9, alu_ops=6e10,
                 dram_bytes=4e9, l2_bytes=4e9)
    assert r.roofline_time_s == pytest.approx(5e-3)
    assert r.bound == "exp units"


@pytest.mark.parametrize("work,bound,time_s", [
    (dict(mma_flops=2e12), "tensor cores", 2e-3),
    (dict(exp_count=3.2e9), "exp units", 2e-3),
    (dict(alu_ops=4e10), "ALUs", 2e-3),
    (dict(dram_bytes=4e9), "DRAM bandwidth", 2e-3),
    (dict(l2_bytes=16e9), "L2 bandwidth", 2e-3),
])
def test_the_binding_roof_is_named(work, bound, time_s):
    base = dict(mma_flops=1e9, exp_count=1e6, alu_ops=1e7, dram_bytes=1e6, l2_bytes=1e6)
    r = roofline(ROUND, "fp16", **{**base, **work})
    assert r.bound == bound
    assert r.roofline_time_s == pytest.approx(time_s)


def test_intensities_and_ridges_are_flops_per_byte():
    r = roofline(ROUND, "fp16", mma_flops=8e12, exp_count=0, alu_ops=0,
                 dram_bytes=4e9, l2_bytes=16e9)
    assert r.intensity_dram_flop_per_byte == pytest.approx(2000.0)
    assert r.intensity_l2_flop_per_byte == pytest.approx(500.0)
    assert r.ridge_dram_flop_per_byte == pytest.approx(500.0)    # 1e15 / 2e12
    assert r.ridge_l2_flop_per_byte == pytest.approx(125.0)      # 1e15 / 8e12


def test_h100_exp_roof_from_its_yaml_figures():
    # H100 SXM5: 16 exp per clock per SM (Programming Guide, CC 9.0) × 1.98 GHz (its maximum
    # boost clock, the YAML's clock_hz) × 132 SMs
    h100 = load_gpu("h100")
    rate = h100.exp_per_clock_per_sm * h100.clock_hz * h100.sm_count
    assert rate == pytest.approx(16 * 1.98e9 * 132)
    r = roofline(h100, "fp16", mma_flops=0, exp_count=rate * 1e-3, alu_ops=0, dram_bytes=0,
                 l2_bytes=0)
    assert r.exp_time_s == pytest.approx(1e-3)
    assert r.roofline_time_s == pytest.approx(1e-3)


def test_roofline_model_prediction_is_the_roofline_time_plus_one_launch_per_kernel():
    # FA-2 forward, N = 4096, d = 128, 16 heads; exp and L2 rates raised so the GEMMs bind
    gpu = ROUND.with_(exp_per_clock_per_sm=64, l2_bandwidth_bytes_per_s=32e12)
    p = AttentionProblem(batch=1, heads_q=16, seq_q=4096, head_dim=128)
    a = analyze(p, gpu, "fa2", model="roofline")
    flops = 16 * 4 * 4096 * 4096 * 128              # two GEMMs, no causal skipping
    assert a.counters.mma_flops == flops
    assert a.roofline.tensor_time_s == pytest.approx(flops / 1e15)
    assert a.roofline.bound == "tensor cores"
    assert a.predicted_time_s == pytest.approx(flops / 1e15 + gpu.launch_overhead_s)
