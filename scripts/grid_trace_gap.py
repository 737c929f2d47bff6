"""Where the full-grid FA-3 traces' same-SM gap goes. For the N 512 full-grid
trace-mode runs (measurements/h200/store_layout/fa3_fwd_n512_*_b32h16.json) and the committed
lone-CTA traces (tests/data/traces/fa3_fwd_*.json): per CTA in clock64 cycles, medians over the
CTAs after each SM's first (steady state): Q record -> K0 record (one TMA issue + one record),
O record -> LSE record (one record: the trace mode's own cost, an atomic each), Q record -> first
S record, mean S -> S step, last PV -> O record; and the same-SM gap from a CTA's last record
to its successor's first, in ns and in cycles at the CTAs' clock, less the modelled turnover
(420 + 350.5 cycles after a fragment-layout store) and one record. Run from the repository
root: python scripts/grid_trace_gap.py"""
import glob, json, statistics as st

def phases(path, steady=True):
    k = json.load(open(path))['kernels'][0]; names = k['names']
    per_sm = {}
    for c, ev in enumerate(k['ctas']):
        if ev:
            per_sm.setdefault(ev[0][4], []).append(ev)
    out = {key: [] for key in ('Q_K0', 'O_LSE', 'Q_S0', 'step', 'PV_O', 'clk', 'gap_ns')}
    for sm, v in per_sm.items():
        v.sort(key=lambda ev: ev[0][5])
        for n, ev in enumerate(v):
            if steady and len(v) > 1 and n == 0:
                continue
            nm = lambda e: names[e[1]]
            S = [e for e in ev if e[0] == 4 and nm(e) == 'S=QK^T']
            P = [e for e in ev if e[0] == 4 and nm(e) == 'O+=PV']
            O = [e for e in ev if e[0] == 2 and nm(e) == 'O'][0]
            L = [e for e in ev if e[0] == 2 and nm(e) == 'LSE'][0]
            out['Q_K0'].append(ev[1][6] - ev[0][6]); out['O_LSE'].append(L[6] - O[6])
            out['Q_S0'].append(S[0][6] - ev[0][6]); out['PV_O'].append(O[6] - P[-1][6])
            out['step'].append((S[-1][6] - S[0][6]) / max(1, len(S) - 1))
            out['clk'].append((ev[-1][6] - ev[0][6]) / max(1, ev[-1][5] - ev[0][5]))
            if n + 1 < len(v):
                out['gap_ns'].append(v[n + 1][0][5] - ev[-1][5])
    return {k: (st.median(x) if x else float('nan')) for k, x in out.items()}

for f in sorted(glob.glob('measurements/h200/store_layout/fa3_fwd_n512_*_b32h16.json')) + \
         sorted(glob.glob('tests/data/traces/fa3_fwd_*.json')):
    r = phases(f)
    line = (f"{f.split('/')[-1]:40s} Q->K0 {r['Q_K0']:5.0f}  O->LSE {r['O_LSE']:4.0f}  Q->S0 {r['Q_S0']:5.0f}"
            f"  step {r['step']:5.0f}  PV->O {r['PV_O']:5.0f}  clk {r['clk']:.3f} GHz")
    if r['gap_ns'] == r['gap_ns']:
        gap_c = r['gap_ns'] * r['clk']
        line += (f"\n{'':40s} gap {r['gap_ns']:.0f} ns = {gap_c:.0f} cycles; less turnover 770.5 and one"
                 f" record ({r['O_LSE']:.0f}): {gap_c - 770.5 - r['O_LSE']:.0f} cycles")
    print(line)
