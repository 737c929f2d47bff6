"""A CTA's fixed cost in a full grid: the project's FA-2 and FA-3 forward kernels at one grid
(N_q 1024, B 16, H 16: 2048 CTAs of 128 rows, 1536 of FA-3's 192 at d 64) while each CTA's
KV loop grows (N_kv 128 … 4096). Time = waves × (fixed + steps × step): the slope is a CTA
step's cost with every SM busy, the intercept what a CTA costs beside its loop (prologue,
epilogue, turnover) under the same load; the model's own line (its predictions at the same
shapes, computed on the CPU) says which of the two it misses on the validation's short rows
(FA-2 forward N 512 d 128 −11.7%, FA-3 N 512 −10%). CUDA events, median of 20 after 3
warm-ups, one input set; fp16, non-causal; none is a validation shape.

    python3 scripts/experiments/cta_fixed_cost_h200.py OUT.json
"""
from __future__ import annotations

import json
import sys

KV = (128, 256, 512, 1024, 2048, 4096)
KERNELS = (("fa2", 64), ("fa2", 128), ("fa3", 64), ("fa3", 128))


def op_of(algorithm: str, d: int, n_kv: int):
    import numpy as np
    from iosim.algorithms import build_schedule
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import Launcher, device_inputs
    from iosim.problem import AttentionProblem
    p = AttentionProblem(batch=16, heads_q=16, seq_q=1024, seq_kv=n_kv, head_dim=d, dtype="fp16")
    s = build_schedule(p, "h200", algorithm)
    T = device_inputs(random_inputs(p, np.random.default_rng(0)), p.dtype)
    ln = Launcher(s)
    t = s.tiling["fwd"]
    return (lambda k: ln.run(T)), {"block_q": t.block_q, "block_kv": t.block_kv,
                                   "stages": t.stages, "warps": t.warps,
                                   "ctas": s.kernels[0].num_ctas}


def main(out: str) -> None:
    from iosim.measure.timing import time_op
    rows = []
    for algorithm, d in KERNELS:
        for n_kv in KV:
            row = {"algorithm": algorithm, "d": d, "seq_q": 1024, "seq_kv": n_kv, "batch": 16,
                   "heads": 16}
            try:
                op, tiling = op_of(algorithm, d, n_kv)
                row.update(tiling)
                row.update(time_op(op, 1, warmup=3, repeat=20))
            except Exception as exc:           # one shape failing must not lose the rest
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
            print(json.dumps(row), flush=True)
            with open(out, "w") as f:
                json.dump(rows, f, indent=1)


def ncu_target() -> None:
    """Each shape launched twice (the second is the one to read), for Nsight Compute:
    ncu --clock-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
        --csv python3 scripts/experiments/cta_fixed_cost_h200.py --ncu"""
    import cupy as cp
    for algorithm, d in KERNELS:
        for n_kv in KV:
            op, _ = op_of(algorithm, d, n_kv)
            op(0)
            op(0)
            cp.cuda.runtime.deviceSynchronize()
            print(f"ncu-target {algorithm} d {d} N_kv {n_kv}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--ncu":
        ncu_target()
    else:
        main(sys.argv[1])
