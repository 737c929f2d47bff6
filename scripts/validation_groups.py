"""Per-group time MAPE, mean signed error, max and held-out MAPE of `iosim validate --format json`
files side by side (before -> after): python scripts/validation_groups.py BEFORE.json AFTER.json.
Groups: implementation/algorithm/direction (decode sweep marked). Used ."""
import json, sys, collections
def groups(path):
    d = json.load(open(path)); G = collections.defaultdict(list)
    for r in d['rows']:
        if 'published' in path or 'pub' in path:
            rid = r['id']; parts = rid.split('-')
            key = r.get('series') or '-'.join(p for p in parts if not p.startswith(('N', 'd')) and not p.isdigit())
            key = rid.rsplit('-', 3)[0] if not r.get('series') else key
        else:
            ds = r.get('dataset', 'sweep'); impl = r['impl']; alg = r['algorithm']; dr = r['direction']
            key = f"{impl}/{alg}/{dr}" + (" [decode]" if ds == 'decode' else "")
        e = r['time_err']
        if e is None: continue
        G[key].append((e, r['train']))
    return G
def stats(v):
    n = len(v); m = sum(abs(e) for e, _ in v) / n; s = sum(e for e, _ in v) / n; mx = max(abs(e) for e, _ in v)
    h = [abs(e) for e, tr in v if not tr]
    return n, m, s, mx, (sum(h) / len(h) if h else float('nan'))
paths = sys.argv[1:]
Gs = [groups(p) for p in paths]
keys = sorted(set().union(*Gs))
print(f"{'group':34}" + ''.join(f"{'n':>3} {'MAPE':>6} {'mean':>6} {'max':>6} {'held':>5} |" for _ in paths))
for k in keys:
    line = f"{k[:34]:34}"
    for G in Gs:
        if k in G:
            n, m, s, mx, h = stats(G[k]); line += f"{n:3d} {m*100:6.1f} {s*100:+6.1f} {mx*100:6.1f} {h*100:5.1f} |"
        else: line += " " * 32 + "|"
    print(line)
for p in paths:
    d = json.load(open(p)); print(p)
    for g, v in d['summary'].items():
        t = v.get('time', v) if isinstance(v, dict) else v
        try:
            print('  ', g, 'time MAPE %.1f%% max %.1f%%' % (v['time']['mape']*100, v['time']['max_abs_err']*100),
                  ('held-out MAPE %.1f%%' % (v['time_held_out']['mape']*100)) if 'time_held_out' in v else '')
        except Exception:
            print('  ', g, 'MAPE %.1f%% max %.1f%%' % (v['mape']*100, v['max_abs_err']*100) if 'mape' in v else str(v)[:100])
