"""What the L2 replay's walk spends on CTAs that sample nothing: an upper bound on what a
schedule-level "which tiles does this CTA touch" query could save the fast mode.

The replay (fast._walk_replayed) builds and walks the program of every CTA of the sampling
plan; at a high set-sampling ratio most of them hold no sampled tile access, and their walk
then changes nothing downstream (fast._placed places them at 0; their groups' times are never
read). Without the program the fast mode cannot know which CTAs those are. This experiment
learns them from a first simulation (the oracle), then simulates again walking only the
others, checks that the analysis JSON is byte-identical and prints the CPU seconds of the
analysis (min of --repeats) both ways, with the counts per kernel.

    python benchmarks/walk_skip_oracle.py [--algo standard] [--seq 65536] [--repeats 3]

Its output is committed in benchmarks/results/walk_skip_oracle.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from iosim import AttentionProblem
from iosim.analysis.analyze import analyze
from iosim.sim import fast
from iosim.sim.characterize import split_segments
from iosim.sim.l2model import BODY, TAIL, WARMUP, AccessSampler
from iosim.sim.wait_cohorts import counted_per_cta


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algo", default="standard")
    ap.add_argument("--seq", type=int, default=65536)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    problem = AttentionProblem(batch=1, heads_q=32, heads_kv=32, seq_q=a.seq, seq_kv=a.seq,
                               head_dim=128)
    real = fast._walk_replayed
    idle: set = set()            # (kernel, CTA) walked without a sampled access
    walked: dict = {}

    def learning(schedule, plan, tail_starts):
        sampler = real(schedule, plan, tail_starts)
        used = {run[0] for run in sampler.runs}
        g = 0
        for ki, cta, ticks in sampler.ctas:
            walked[ki] = walked.get(ki, 0) + 1
            if used.isdisjoint(range(g, g + len(ticks))):
                idle.add((ki, cta))
            g += len(ticks)
        return sampler

    def oracle(schedule, plan, tail_starts):
        sampler = AccessSampler(plan.ratio, frozenset(
            ki for ki, k in enumerate(schedule.kernels) if counted_per_cta(k)))
        for ki, k in enumerate(schedule.kernels):
            n, stages = k.num_ctas, max(1, k.pipeline.stages)
            tail = tail_starts[ki] if tail_starts[ki] is not None else n
            for cta in plan.replayed(ki, n):
                if (ki, cta) in idle:
                    continue
                cohort = TAIL if cta >= tail else (BODY if cta < plan.limits[ki] else WARMUP)
                sampler.walk_cta(ki, cta, split_segments(k.program(cta)), stages, cohort,
                                 k.class_of(cta))
        return sampler

    def timed(walk) -> tuple:
        fast._walk_replayed = walk
        try:
            t0 = time.process_time()
            out = json.dumps(analyze(problem, "h100", a.algo).to_dict(), sort_keys=True)
            return time.process_time() - t0, out
        finally:
            fast._walk_replayed = real

    _, reference = timed(learning)
    best = {"every CTA walked": float("inf"), "oracle: idle CTAs skipped": float("inf")}
    for _ in range(a.repeats):
        for name, walk in (("every CTA walked", real), ("oracle: idle CTAs skipped", oracle)):
            cpu_s, out = timed(walk)
            if out != reference:
                raise SystemExit(f"error: {name}: the analysis differs")
            best[name] = min(best[name], cpu_s)
    print(f"# {a.algo} N {a.seq} (B 1, H 32, d 128, h100); {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f} at the end; analysis CPU-s, min of {a.repeats}")
    for ki in sorted(walked):
        n_idle = sum(1 for k, _ in idle if k == ki)
        print(f"kernel {ki}: {walked[ki]:,} CTAs walked, {n_idle:,} without a sampled access "
              f"({n_idle / walked[ki]:.0%})")
    for name, cpu_s in best.items():
        print(f"{name:<28} {cpu_s:6.3f} CPU-s")
    print("analysis JSON byte-identical both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
