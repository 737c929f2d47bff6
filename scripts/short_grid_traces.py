"""Full-grid trace-mode runs of the project's FA-3 / FA-2 forward kernels at N 512 (B 32, H 16;
measurements/h200/store_layout/*_b32h16.json, `iosim capture`), phase by phase: per CTA the
clock64 span from its first record to its last, the prologue (first record -> first MMA
record), the epilogue (last MMA record -> O store record), and the gap between a CTA's last
record and the first record of the next CTA on the same SM (%globaltimer ns; same SM).
Medians over CTAs. Run from the repository root: python scripts/short_grid_traces.py"""
import glob, json, statistics as st
for f in sorted(glob.glob('measurements/h200/store_layout/*_b32h16.json')):
    t = json.load(open(f)); k = t['kernels'][0]; names = k['names']
    span, pro, epi, steps, gaps, per_sm, dur_ns = [], [], [], [], [], {}, []
    for c, ev in enumerate(k['ctas']):
        if not ev:
            continue
        mm = [i for i, e in enumerate(ev) if e[0] == 4]
        so = [i for i, e in enumerate(ev) if e[0] == 2 and names[e[1]] == 'O']
        span.append(ev[-1][6] - ev[0][6]); dur_ns.append(ev[-1][5] - ev[0][5])
        pro.append(ev[mm[0]][6] - ev[0][6])
        if so:
            epi.append(ev[so[0]][6] - ev[mm[-1]][6])
        per_sm.setdefault(ev[0][4], []).append((ev[0][5], ev[-1][5]))
    for sm, v in per_sm.items():
        v.sort()
        for a, b in zip(v, v[1:]):
            gaps.append(b[0] - a[1])
    m = lambda x: st.median(x) if x else float('nan')
    first = min(e[0][5] for e in k['ctas'] if e); last = max(e[-1][5] for e in k['ctas'] if e)
    print(f"{f.split('/')[-1]}: {len(k['ctas'])} CTAs, {len(per_sm)} SMs, {t['tiling']}")
    print(f"  kernel span (first..last record) {(last-first)/1e3:.1f} us; CTAs per SM {st.mean(len(v) for v in per_sm.values()):.1f}")
    print(f"  CTA span cycles median {m(span):.0f} (ns {m(dur_ns):.0f}); prologue {m(pro):.0f}; last MMA -> O store {m(epi):.0f}")
    print(f"  same-SM gap last record -> next first record ns: median {m(gaps):.0f} p10 {sorted(gaps)[len(gaps)//10]:.0f} p90 {sorted(gaps)[9*len(gaps)//10]:.0f}")
