"""One consumer warpgroup's wgmma stream reaches a measured fraction of its SM's rate
(machine.wgmma_stream_fraction, H200 probe): a CTA alone is slower than with the SM's whole
rate per consumer, by at most what its GEMMs would lose were they all on its critical path."""
import pytest

from iosim import AttentionProblem, load_gpu
from iosim import machine
from iosim.algorithms import build_schedule
from iosim.schedule import Mma, expand
from iosim.sim import simulate


def test_fractions_are_the_probe_figures():
    s_qk = Mma("S=QK^T", 128, 128, 64)
    pv64 = Mma("O+=PV", 128, 64, 128)
    assert machine.wgmma_stream_fraction(s_qk) == pytest.approx(2030 / 4051)
    assert machine.wgmma_stream_fraction(pv64) == pytest.approx(1555 / 4051)


def _lone_time(monkeypatch, fractions=None):
    if fractions is not None:
        monkeypatch.setattr(machine, "WGMMA_STREAM_FRACTION", fractions)
        monkeypatch.setattr(machine, "WGMMA_STREAM_FRACTION_OTHER", 1.0)
    gpu = load_gpu("h200-calibrated")
    p = AttentionProblem(batch=1, heads_q=1, seq_q=128, seq_kv=1024, head_dim=128, dtype="fp16")
    s = build_schedule(p, gpu, "fa3")
    return s, gpu, simulate(s, gpu, "exact").time_s


def test_a_lone_cta_pays_for_its_streams_within_the_serial_bound(monkeypatch):
    s, gpu, capped = _lone_time(monkeypatch)
    _, _, full = _lone_time(monkeypatch, {})
    assert capped > full * 1.02                    # the streams bind for a CTA alone
    flops = sum(op.flops for op in expand(s.kernels[0].program(0)) if op.kind == "mma")
    rate = gpu.mma_flops_per_s_per_sm("fp16", "wgmma")
    assert capped - full <= flops / rate * (4051 / 1555 - 1) + 1e-12
