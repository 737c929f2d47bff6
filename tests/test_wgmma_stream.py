"""One consumer warpgroup's wgmma group takes a fixed latency plus its work at its SM's rate
(machine.wgmma_group_latency_cycles, H200 probe): a CTA alone is slower than with no latency,
by at most one latency per group on its consumers' chain."""
import pytest

from iosim import AttentionProblem, load_gpu
from iosim import machine
from iosim.algorithms import build_schedule
from iosim.schedule import Mma, Pipeline
from iosim.sim import simulate

SS_LATENCY = machine.WGMMA_GROUP_LATENCY_CYCLES[(False, 128)]


def test_latency_plus_work_is_the_probe_s_group():
    """4 x m64n128k16 (both operands in shared memory) and 8 x m64n64k16 (A in registers) per
    group: 2065834 and 2696756 cycles per 4000 groups in the probe, at cuBLAS's 4051 FLOP/clk."""
    ss = machine.wgmma_group_latency_cycles(Mma("S=QK^T", 64, 128, 64))
    rs = machine.wgmma_group_latency_cycles(Mma("O+=PV", 64, 64, 128))
    assert ss + 4 * 2 * 64 * 128 * 16 / 4051 == pytest.approx(2065834 / 4000)
    assert rs + 8 * 2 * 64 * 64 * 16 / 4051 == pytest.approx(2696756 / 4000)
    # a shape the probe did not run (P·V at d 128: n = 128) takes the m64n128k16 figure
    assert machine.wgmma_group_latency_cycles(Mma("O+=PV", 64, 128, 128)) == ss


def test_a_stream_s_work_is_the_share_plus_the_latency():
    gpu = load_gpu("h200-calibrated")
    pipe = Pipeline(stages=2, warp_specialized=True, consumer_warpgroups=2, intra_overlap=True)
    cost = machine.MmaCost(gpu, "fp16", pipe, 384, 2)
    op = Mma("S=QK^T", 128, 128, 128)
    lat = machine.wgmma_group_latency_cycles(op)
    assert cost.stream_work(op, 0.5) == pytest.approx(cost.work(op) * 0.5 + lat / gpu.clock_hz * cost.wgmma_rate)
    # one consumer's d 128 S group alone on its stream: 258 + 518 cycles
    assert cost.stream_work(op, 0.5) / cost.wgmma_rate * gpu.clock_hz == pytest.approx(
        lat + 2 * 64 * 128 * 128 / (cost.wgmma_rate / gpu.clock_hz))


def _lone_time(monkeypatch, latency=True):
    if not latency:
        monkeypatch.setattr(machine, "WGMMA_GROUP_LATENCY_CYCLES", {})
        monkeypatch.setattr(machine, "WGMMA_GROUP_LATENCY_CYCLES_OTHER", 0.0)
    gpu = load_gpu("h200-calibrated")
    p = AttentionProblem(batch=1, heads_q=1, seq_q=128, seq_kv=1024, head_dim=128, dtype="fp16")
    s = build_schedule(p, gpu, "fa3")
    return s, gpu, simulate(s, gpu, "exact").time_s


def test_a_lone_cta_pays_for_its_group_latencies_within_the_serial_bound(monkeypatch):
    s, gpu, with_latency = _lone_time(monkeypatch)
    _, _, without = _lone_time(monkeypatch, latency=False)
    assert with_latency > without * 1.005                # the latencies show for a CTA alone
    groups = 2 * 1024 // 128 + 1                          # S_j and P_{j-1}V_{j-1} per step, the last P V
    assert with_latency - without <= groups * SS_LATENCY / gpu.clock_hz
