"""FA-1 forward traces (tests/data/traces/fa1_fwd_*.json) phase by phase: clock64 gap between consecutive
records less one 171-cycle trace write (median/min/max per pair of events), and each CTA's span less its
recording against exact mode's CTA time. Run from the repository root: python scripts/fa1_trace_phases.py"""
import json, glob, numpy as np, sys
sys.path.insert(0,'tests')
from iosim.kernels.trace import Trace, cta_span_ns, record_overhead_cycles
from iosim.hardware import load_gpu
from iosim.sim import simulate
from test_kernels_trace import schedule_of
W=171
for f in sorted(glob.glob('tests/data/traces/fa1_fwd_*.json')):
    t=json.load(open(f)); k=t['kernels'][0]; names=k['names']
    ph={}
    for ev in k['ctas']:
        lab=[(('L' if e[0]==1 else 'S' if e[0]==2 else 'C')+names[e[1]]) for e in ev]
        for a,b,ea,eb in zip(lab,lab[1:],ev,ev[1:]):
            ph.setdefault(a+'->'+b,[]).append(eb[6]-ea[6]-W)
    print(f.split('/')[-1], t['tiling']['fwd'])
    for key,v in ph.items(): print(f'  {key:10s} n={len(v):3d} median={np.median(v):8.0f} min={min(v):7.0f} max={max(v):7.0f}')
    tr=Trace.load(f); kt=tr.kernels[0]; ov=record_overhead_cycles(kt)
    gpu=load_gpu('h200').model_copy(update={'cta_turnover_cycles':None})
    sim=simulate(schedule_of(tr),gpu,mode='exact').timeline_df()
    for c,evs in enumerate(kt.ctas):
        row=sim[sim.cta==c].iloc[0]
        print('  cta',c,'trace span less rec ns',round(cta_span_ns(evs,ov)),'exact ns',round((row.end_s-row.start_s)*1e9))
