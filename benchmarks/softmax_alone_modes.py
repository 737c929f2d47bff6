"""The standard softmax kernel alone, fast (aggregated) against exact mode: H100, B 1, heads 4
and 16, N 1500 / 2001 / 3008 / 4441 / 6001, d 64, a one-kernel schedule on a cold L2 (output:
benchmarks/results/softmax_alone_modes.txt). --without-mechanisms: the schedule before
algorithms/softmax_code.py (one round trip, one instruction per counted op).

    python benchmarks/softmax_alone_modes.py [--without-mechanisms]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

CASES = [(n, h) for n in (1500, 2001, 3008, 4441, 6001) for h in (4, 16)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--without-mechanisms", action="store_true")
    a = ap.parse_args(argv)
    if a.without_mechanisms:
        from softmax_scalar_check import without_mechanisms
        without_mechanisms()
    from iosim import AttentionProblem, build_schedule, load_gpu
    from iosim.sim import simulate
    gpu = load_gpu("h100")
    errs = []
    print(f"{'N':>5} {'heads':>5} {'exact us':>9} {'fast us':>9} {'err':>7}")
    for n, h in CASES:
        sched = build_schedule(AttentionProblem(heads_q=h, seq_q=n, head_dim=64), gpu, "standard")
        (k,) = [k for k in sched.kernels if k.name == "std_fwd_softmax"]
        one = dataclasses.replace(sched, kernels=(k,))
        fast = simulate(one, gpu, "fast", exact_below_events=0)
        exact = simulate(one, gpu, "exact")
        errs.append(fast.time_s / exact.time_s - 1)
        print(f"{n:5d} {h:5d} {exact.time_s * 1e6:9.2f} {fast.time_s * 1e6:9.2f} {errs[-1]:+7.1%}")
    print(f"mean |err| {sum(map(abs, errs)) / len(errs):.1%}, range {min(errs):+.1%}..{max(errs):+.1%}"
          + (" (without the softmax mechanisms)" if a.without_mechanisms else ""))


if __name__ == "__main__":
    main()
