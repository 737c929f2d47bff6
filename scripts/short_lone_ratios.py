"""Lone CTAs: each committed forward trace's CTA span less its recording (iosim.kernels.trace.
cta_span_ns, record_overhead_cycles) over exact mode's CTA time without the slot's turnover
(tests/test_trace_cta_spans.py's method), median and range per trace. Run from the repository
root: python scripts/short_lone_ratios.py"""
import statistics, sys
from pathlib import Path
sys.path.insert(0, 'tests')
from iosim.hardware import load_gpu
from iosim.kernels.trace import Trace, cta_span_ns, record_overhead_cycles
from iosim.sim import simulate
from test_kernels_trace import schedule_of

gpu = load_gpu('h200').model_copy(update={'cta_turnover_cycles': None})
for p in sorted(Path('tests/data/traces').glob('fa[23]_fwd_*.json')):
    tr = Trace.load(p); kt = tr.kernels[0]; ov = record_overhead_cycles(kt)
    sim = simulate(schedule_of(tr), gpu, mode='exact').timeline_df()
    r = [cta_span_ns(e, ov) / ((sim[sim.cta == c].iloc[0].end_s - sim[sim.cta == c].iloc[0].start_s) * 1e9)
         for c, e in enumerate(kt.ctas)]
    print(f"{p.stem:40s} median {statistics.median(r):.3f} range {min(r):.2f}-{max(r):.2f}")
