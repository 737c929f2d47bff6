"""What the size limits of iosim/limits.py cost: time and peak memory of the largest accepted
work, and how long a refusal takes, each case in a fresh process.

    python benchmarks/limits_cost.py            # every case (minutes)
    python benchmarks/limits_cost.py --quick    # the cheap cases only

The simulator cases run at a fraction of their limit and are scaled linearly (their cost is
one entry per CTA or one event per tile operation); the table says which rows are scaled.
docs/limits.md quotes the figures of one run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASE = r'''
import json, resource, sys, time
from iosim.problem import AttentionProblem
from iosim.algorithms import build_schedule
from iosim.analysis.analyze import analyze
from iosim.errors import IosimError
from iosim.limits import schedule_size
spec = json.loads(sys.argv[1])
p = AttentionProblem(**spec["problem"])
t0 = time.perf_counter()
size, error = None, None
try:
    a = analyze(p, "h100", spec["algorithm"], model=spec["model"],
                sim_mode=spec.get("mode", "fast"), **spec.get("tiling", {}))
    seconds = time.perf_counter() - t0
    size = schedule_size(a.schedule)
    t = a.schedule.totals()
    size["tile_ops"] = t.loads + t.stores + t.mma_ops
except IosimError as exc:
    seconds = time.perf_counter() - t0
    error = str(exc)[:70]
print(json.dumps({"s": seconds, "error": error, "size": size,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''

# (label, spec, scale to the limit or None, quick)
ONE_HEAD = dict(heads_q=1, seq_q=2 ** 24, head_dim=32, dtype="fp8")
CASES = [
    ("seq at its limit: fa2, roofline, N = 2^24, 1 head",
     dict(problem=ONE_HEAD, algorithm="fa2", model="roofline"), None, False),
    ("seq at its limit: standard, roofline, N = 2^24, 1 head",
     dict(problem=ONE_HEAD, algorithm="standard", model="roofline"), None, False),
    ("tile classes at the limit: fa2 causal, roofline, N = 2^24, block-q 64",
     dict(problem=dict(ONE_HEAD, causal=True), algorithm="fa2", model="roofline",
          tiling=dict(block_q=64, block_kv=64)), None, False),
    ("refusal by tile classes: fa2 causal, N = 2^24, block-q 16",
     dict(problem=dict(ONE_HEAD, causal=True), algorithm="fa2", model="roofline",
          tiling=dict(block_q=16, block_kv=16)), None, False),
    ("refusal by DRAM: fa2, batch 65,535, 64 heads, N = 65,536",
     dict(problem=dict(batch=65_535, heads_q=64, seq_q=65_536), algorithm="fa2", model="sim"),
     None, True),
    ("fast simulator, 2^18 CTAs (fa2, N = 4096, batch 256, 32 heads)",
     dict(problem=dict(batch=256, heads_q=32, seq_q=4096), algorithm="fa2", model="sim"),
     2 ** 23 / 2 ** 18, True),
    ("exact simulator, ~2^20 tile ops (fa2, N = 4096, batch 4, 32 heads)",
     dict(problem=dict(batch=4, heads_q=32, seq_q=4096), algorithm="fa2", model="sim",
          mode="exact"), None, True),
]


def run_case(spec: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", CASE, json.dumps(spec)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    from iosim.limits import MAX_EXACT_TILE_OPS
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs")
    print(f"{'case':<72} {'time':>8} {'peak RSS':>9}  result")
    for label, spec, scale, quick in CASES:
        if args.quick and not quick:
            continue
        r = run_case(spec)
        if r["size"] and spec.get("mode") == "exact":
            scale = MAX_EXACT_TILE_OPS / r["size"]["tile_ops"]
        what = r["error"] or f"{r['size']['classes']:,} classes, {r['size']['ctas']:,} CTAs, " \
                             f"{r['size']['tile_ops']:,} tile ops"
        print(f"{label:<72} {r['s']:>7.1f}s {r['rss_mb']:>6.0f} MB  {what}")
        if scale and not r["error"]:
            print(f"{'  scaled to the limit (x' + format(scale, '.1f') + ', linear)':<72} "
                  f"{r['s'] * scale:>7.0f}s {'':>9}  (time only)")


if __name__ == "__main__":
    main()
