"""The probe of scripts/experiments/cta_fixed_cost_h200.py against the model: per kernel, the
measured times and the model's (warm protocol, the GPU's clock law: what `iosim validate`
scores) at each N_kv, and each one's least-squares line time = a + b × (KV steps per CTA):
b × CTAs / slots is a step's cost per slot with every SM busy, a / waves what a CTA costs
beside its loop.

    python scripts/cta_fixed_cost_check.py measurements/h100/cta_fixed_cost/cta_fixed_cost.json --gpu h100
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict


def line(xs: list, ys: list) -> tuple:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probe")
    ap.add_argument("--gpu", default="h100")
    a = ap.parse_args(argv)
    from iosim.algorithms import build_schedule
    from iosim.clock import sustained_simulation
    from iosim.hardware import load_gpu
    from iosim.problem import AttentionProblem
    gpu = load_gpu(a.gpu)
    groups = defaultdict(list)
    for r in json.load(open(a.probe)):
        if "time_s" in r:
            groups[(r["algorithm"], r["d"])].append(r)
    for (algorithm, d), rows in groups.items():
        xs, meas, model = [], [], []
        print(f"{algorithm} d {d} ({rows[0]['block_q']}x{rows[0]['block_kv']}, "
              f"{rows[0]['ctas']} CTAs):")
        for r in rows:
            p = AttentionProblem(batch=r["batch"], heads_q=r["heads"], seq_q=r["seq_q"],
                                 seq_kv=r["seq_kv"], head_dim=d, dtype="fp16")
            s = build_schedule(p, a.gpu, algorithm, block_q=r["block_q"],
                               block_kv=r["block_kv"], stages=r["stages"], warps=r["warps"])
            t = sustained_simulation(s, gpu, time_protocol="warm")[0].time_s
            steps = -(-r["seq_kv"] // r["block_kv"])
            xs.append(steps)
            meas.append(r["time_s"] * 1e6)
            model.append(t * 1e6)
            print(f"  N_kv {r['seq_kv']:5d} ({steps:3d} steps): measured {r['time_s'] * 1e6:8.1f} us,"
                  f" model {t * 1e6:8.1f} us ({t / r['time_s'] - 1:+.1%})")
        (am, bm), (ao, bo) = line(xs, meas), line(xs, model)
        print(f"  line: measured {am:7.1f} + {bm:6.2f} x steps us; model {ao:7.1f} + {bo:6.2f} x "
              f"steps us (intercept {ao - am:+.1f} us, slope {bo / bm - 1:+.1%})")


if __name__ == "__main__":
    main()
