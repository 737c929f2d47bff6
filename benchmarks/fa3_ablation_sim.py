"""The simulator's prediction for each FA-3 ablation, beside the H200 measurement of the kernel.

    python3 benchmarks/fa3_ablation_sim.py [--bench benchmarks/results/fa3_h200/bench.json]
        [--gpu h200-calibrated] [--out FILE]

For each configuration of the measured run (fp16, d = 128, H = 32; N 4k/8k/16k, causal and
not) the fa3 schedule is simulated (fast mode) as built and with its Pipeline changed:
  no_intra_overlap        intra_overlap=False
  no_pingpong             consumer_warpgroups=1 (the simulator's consumers always ping-pong;
                          one consumer running the whole 128-row iteration is its nearest
                          ablation — the kernel keeps two consumers, unsynchronised)
  no_warp_specialization  warp_specialized=False (the simulator's buffered cp.async loop: it
                          drops ping-pong and intra overlap with it; the kernel keeps both and
                          only moves the copies into consumer 0's warp 0)
Each cost is time(ablation) / time(full) − 1, measured and predicted. The simulator has no
ablation switch of its own on this branch: the Pipeline fields it reads are changed here."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iosim import AttentionProblem, build_schedule  # noqa: E402
from iosim.sim import simulate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PIPELINE_CHANGES = {
    "full": {},
    "no_intra_overlap": {"intra_overlap": False},
    "no_pingpong": {"consumer_warpgroups": 1},
    "no_warp_specialization": {"warp_specialized": False},
}


def ablated(schedule, changes: dict):
    if not changes:
        return schedule
    kernels = tuple(replace(k, pipeline=replace(k.pipeline, **changes)) for k in schedule.kernels)
    return replace(schedule, kernels=kernels)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=str(ROOT / "benchmarks/results/fa3_h200/bench.json"))
    ap.add_argument("--gpu", default="h200-calibrated")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    bench = json.loads(Path(a.bench).read_text())
    lines = [f"# simulator: fast mode on {a.gpu}; measured: {a.bench} (median CUDA-event times)",
             "# cost = time(ablation)/time(full) - 1;  measured | predicted",
             "     N causal   full_ms meas/pred   " + "   ".join(f"{n:>28s}" for n in PIPELINE_CHANGES if n != "full")]
    for r in bench["rows"]:
        p = AttentionProblem(batch=r["batch"], heads_q=r["heads"], seq_q=r["seq"], head_dim=r["head_dim"],
                             dtype="fp16", causal=r["causal"])
        sched = build_schedule(p, "h200", "fa3")
        pred = {n: simulate(ablated(sched, ch), a.gpu).time_s for n, ch in PIPELINE_CHANGES.items()}
        meas = r["time_s"]
        cells = []
        for n in PIPELINE_CHANGES:
            if n == "full":
                continue
            m = f"{meas[n] / meas['full'] - 1:+7.1%}" if n in meas else "      -"
            cells.append(f"{m} | {pred[n] / pred['full'] - 1:+7.1%}".rjust(28))
        lines.append(f"{r['seq']:6d} {str(r['causal']):>6s} {meas['full']*1e3:7.3f}/{pred['full']*1e3:7.3f}   "
                     + "   ".join(cells))
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
