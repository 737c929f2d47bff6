"""FA-2 kernels of iosim against torch SDPA's flash back end, measured in the same run.

    python3 benchmarks/kernels_vs_torch.py [--quick]

fp16, d = 128, N = 4096 (B = 4, H = 32) and N = 16384 (B = 1, H = 32), causal and not, forward
and backward. Each figure is the median of CUDA-event timings after warm-up, inputs rotated
over enough sets to defeat the 60 MB L2; TFLOP/s counts the useful matmul FLOPs (4·d per
unmasked (query, key) pair forward, 2.5× that backward) for both kernels alike."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iosim import AttentionProblem, build_schedule  # noqa: E402


def fa2_op(problem, n_sets):
    import numpy as np
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import Launcher, device_inputs, forward_schedule, run_schedule

    rng = np.random.default_rng(0)
    sets = []
    for _ in range(n_sets):
        T = device_inputs(random_inputs(problem, rng, with_grad=problem.direction != "fwd"), problem.dtype)
        if problem.direction != "fwd":
            run_schedule(forward_schedule(problem, "fa2"), T)
        sets.append(T)
    sched = build_schedule(problem, "h200", "fa2")
    ln = Launcher(sched)
    return (lambda k: ln.run(sets[k])), sched


def bytes_per_set(p) -> int:
    return p.q_bytes() * (2 if p.direction == "fwd" else 4) + p.kv_bytes() * (1 if p.direction == "fwd" else 2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args(argv)
    from iosim.measure.timing import sets_to_defeat_l2, time_op
    from iosim.measure.torch_sdpa import make_op

    rep = 5 if args.quick else 20
    lines = ["kernel             dir  causal      N  B  H    d  time_ms  TFLOP/s  torch_flash_ms  torch_TFLOP/s  ratio"]
    for n, b in ((4096, 4), (16384, 1)):
        for direction in ("fwd", "bwd"):
            for causal in (False, True):
                p = AttentionProblem(batch=b, heads_q=32, seq_q=n, head_dim=128, dtype="fp16",
                                     causal=causal, direction=direction)
                sets = sets_to_defeat_l2(bytes_per_set(p))
                op, sched = fa2_op(p, sets)
                ours = time_op(op, sets, warmup=3, repeat=rep)
                top = make_op(p, "torch_flash", sets)
                theirs = time_op(top, sets, warmup=3, repeat=rep) if top else None
                fl = p.useful_flops()
                t1 = fl / ours["time_s"] / 1e12
                t2 = fl / theirs["time_s"] / 1e12 if theirs else float("nan")
                til = sched.tiling["fwd" if direction == "fwd" else "bwd"]
                lines.append(
                    f"fa2 {til.block_q}x{til.block_kv}x{til.stages}s{til.warps}w".ljust(18)
                    + f" {direction}  {str(causal):>6} {n:6d} {b:2d} 32  128 {ours['time_s']*1e3:8.3f} {t1:8.1f}"
                    + (f" {theirs['time_s']*1e3:15.3f} {t2:14.1f} {t1/t2:6.2f}" if theirs else "   (torch flash refused)"))
                print(lines[-1], flush=True)
    import torch
    head = f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  (median of {rep} runs)"
    text = "\n".join([head] + lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
