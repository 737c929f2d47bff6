"""FA-2 backward traces (tests/data/traces/fa2_bwd_*.json) phase by phase against exact mode:
for each pair of consecutive fa2_bwd events, the trace's clock64 gap less one in-loop trace
record (fa2.BWD_TRACE_RECORD_CYCLES, 22: not the 171 of back-to-back end-of-CTA records) and exact mode's gap between the same ops of a lone CTA (each
op's end as the engine runs it, cycles at the GPU config's clock). Medians over CTAs and steps.
Run from the repository root: python scripts/fa2_bwd_trace_phases.py"""
import glob, inspect, json, sys, textwrap
import numpy as np
sys.path.insert(0, 'tests')
from iosim.hardware import load_gpu
from iosim.kernels.trace import Trace
from iosim.sim import pipeline, simulate
from test_kernels_trace import schedule_of

from iosim.algorithms.fa2 import BWD_TRACE_RECORD_CYCLES as W
LOG = []
src = textwrap.dedent(inspect.getsource(pipeline.run_ops))
src = src.replace("    for op in ops:\n        kind = op.kind\n",
                  "    for op in ops:\n        kind = op.kind\n        LOG.append(('start', op, env.now, id(ctx)))\n")
src = src.replace("        # barriers cost nothing beyond", "        LOG.append(('end', op, env.now, id(ctx)))\n        # barriers cost nothing beyond")
ns = dict(pipeline.__dict__); ns['LOG'] = LOG
exec(src, ns)
pipeline.run_ops = ns['run_ops']
KIND = {1: 'L', 2: 'S', 3: 'R', 4: 'M', 5: 'E'}


def label(op):
    k = op.kind
    if k == 'load': return 'L' + op.tensor
    if k == 'store': return ('R' if op.reduce else 'S') + op.tensor
    return ('M' if k == 'mma' else 'E' if k == 'exp' else 'A') + op.name


for f in sorted(glob.glob('tests/data/traces/fa2_bwd_*.json')):
    t = json.load(open(f)); k = next(k for k in t['kernels'] if k['name'] == 'fa2_bwd'); names = k['names']
    ph = {}
    for ev in k['ctas']:
        lab = [KIND[e[0]] + names[e[1]] for e in ev]
        for a, b, ea, eb in zip(lab, lab[1:], ev, ev[1:]):
            ph.setdefault(a + '->' + b, []).append(eb[6] - ea[6] - W)
    tr = Trace.load(f)
    gpu = load_gpu('h200').model_copy(update={'cta_turnover_cycles': None})
    gpu = gpu.at_clock(gpu.sm_clock_counted_max_hz)     # the clock the validation runs at
    sched = schedule_of(tr)
    ki = [kk.name for kk in sched.kernels].index('fa2_bwd')
    # one lone fa2_bwd CTA (the first of the grid): a one-CTA kernel of the same program
    kern = sched.kernels[ki]
    LOG.clear()
    simulate(sched.__class__(**{**sched.__dict__, 'kernels': (kern,)}), gpu, mode='exact')
    # model gap: end of a traced op -> end of the next traced op, in CTA 0's order
    per_cta = {}
    first = LOG[0][3]            # the first CTA's context; the others run on other SMs
    # traced ops only (no Alu stamps); a load is stamped after its issue, at its start here
    ends = [(label(op), now) for tag, op, now, c in LOG if c == first and op.kind != 'alu'
            and ((tag == 'end') != (op.kind == 'load'))]
    mg = {}
    for (a, ta), (b, tb) in zip(ends, ends[1:]):
        if a.startswith('AP') and False: pass
        mg.setdefault(a + '->' + b, []).append((tb - ta) * gpu.clock_hz)
    print(f.split('/')[-1], t['tiling']['bwd'], 'clock', gpu.clock_hz / 1e9)
    print(f'  {"pair":28s} {"n":>4s} {"trace":>7s} {"model":>7s} {"diff":>7s}')
    keys = list(dict.fromkeys(list(ph)))
    for key in keys:
        v = ph[key]; m = mg.get(key)
        mm = np.median(m) if m else float('nan')
        print(f'  {key:28s} {len(v):4d} {np.median(v):7.0f} {mm:7.0f} {np.median(v) - mm:7.0f}')
    print('  model-only pairs:', [k2 for k2 in mg if k2 not in ph][:12])
