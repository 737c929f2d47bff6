"""A lone CTA's time, prologue and epilogue included: exact mode against the committed H200
traces (tests/data/traces/*.json: one CTA per SM, one wave). The trace mode's own cost per event
is measured from the traces themselves (two store records back to back at a CTA's end) and
taken off the recorded span (iosim.kernels.trace.cta_span_ns)."""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from iosim.hardware import load_gpu
from iosim.kernels.trace import Trace, cta_clock_hz, cta_span_ns, record_overhead_cycles
from iosim.sim import simulate

sys.path.insert(0, str(Path(__file__).parent))
from test_kernels_trace import schedule_of  # noqa: E402

TRACES = Path(__file__).parent / "data" / "traces"
FA2_FWD = sorted(TRACES.glob("fa2_fwd_*.json"))


def test_record_overhead_is_measured_from_back_to_back_records():
    """fa2_fwd.cu records O and LSE one after the other: the same ~171 cycles in every trace."""
    figures = [record_overhead_cycles(Trace.load(p).kernels[0]) for p in FA2_FWD]
    assert len(figures) == 3
    assert all(150 <= f <= 200 for f in figures), figures
    assert max(figures) - min(figures) <= 5


def test_span_without_recording_is_shorter_by_the_events():
    t = Trace.load(FA2_FWD[0]).kernels[0]
    evs = t.ctas[0]
    raw = evs[-1].t_ns - evs[0].t_ns
    assert cta_span_ns(evs, 0.0) == pytest.approx(raw, rel=1e-9)
    assert cta_span_ns(evs, 171.0) < raw


def test_a_ctas_clock_is_its_cycles_over_its_nanoseconds():
    t = Trace.load(FA2_FWD[1]).kernels[0]
    evs = t.ctas[0]
    f = cta_clock_hz(evs)
    assert f == pytest.approx((evs[-1].clock - evs[0].clock) / (evs[-1].t_ns - evs[0].t_ns) * 1e9)
    assert 1.70e9 < f < 1.85e9          # fa2_fwd_n256_d128: ~1.82 GHz, not the 1.98 boost clock


@pytest.mark.parametrize("path", FA2_FWD, ids=lambda p: p.stem)
def test_lone_cta_span_matches_exact_mode(path):
    """FA-2 forward, every CTA alone on its SM: exact mode's CTA time (without the slot's
    turnover, which follows the last instruction), simulated at the SM clock the trace's CTAs
    ran at (their clock64 over %globaltimer), is within 8% of the trace's span less its
    recording."""
    trace = Trace.load(path)
    kt = trace.kernels[0]
    overhead = record_overhead_cycles(kt)
    clock = statistics.median(cta_clock_hz(evs) for evs in kt.ctas)
    gpu = load_gpu("h200").model_copy(update={"cta_turnover_cycles": None}).at_clock(clock)
    sim = simulate(schedule_of(trace), gpu, mode="exact").timeline_df()
    ratios = []
    for c, evs in enumerate(kt.ctas):
        row = sim[sim.cta == c].iloc[0]
        ratios.append(cta_span_ns(evs, overhead) / ((row.end_s - row.start_s) * 1e9))
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.08), ratios
