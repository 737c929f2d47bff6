"""What the O store costs the project's FA-3 and FA-2 forward kernels when every SM runs one:
the short-KV validation shapes (N 512, H 16) timed with O written from the accumulator fragments
(the kernels), not written at all, and (FA-3) staged through shared memory and written coalesced
(IOSIM_O_STORE = 1 / 0 / 2 in fa3_fwd.cu and fa2_fwd.cu). Grids of B 32 and B 64 (15.5 and 31 waves
for FA-3 d 64 at one CTA per SM) give the per-wave slope; KV lengths 128 and 512 at B 32 separate
what a CTA pays once from what a KV step pays. CUDA events, median of 10 after 2 warm-ups, the
validation's input sets (iosim.measure.timing).

    python3 scripts/experiments/o_store_h200.py OUT.json      # H200
    python3 scripts/experiments/o_store_h200.py --predict OUT.json   # CPU: the simulator's times
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iosim import AttentionProblem  # noqa: E402
from iosim.algorithms import build_schedule  # noqa: E402

SHAPES = [  # (algorithm, head_dim, batch, seq_kv)
    ("fa3", 64, 32, 512), ("fa3", 64, 64, 512), ("fa3", 64, 32, 128),
    ("fa3", 128, 32, 512), ("fa3", 128, 64, 512), ("fa3", 128, 32, 128),
    ("fa2", 64, 32, 512), ("fa2", 64, 64, 512), ("fa2", 64, 32, 128),
    ("fa2", 128, 32, 512), ("fa2", 128, 64, 512), ("fa2", 128, 32, 128),
]
STORES = {"fa3": (1, 0, 2), "fa2": (1, 0)}


def problem(d: int, batch: int, seq_kv: int) -> AttentionProblem:
    return AttentionProblem(batch=batch, heads_q=16, seq_q=512, seq_kv=seq_kv, head_dim=d, dtype="fp16")


def key(algo, d, batch, seq_kv, store) -> str:
    return f"{algo}-d{d}-B{batch}-Nkv{seq_kv}-store{store}"


def measure(out: Path) -> None:
    import cupy as cp
    import numpy as np
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import device_inputs
    from kernel_defines import launcher
    from iosim.measure.timing import sets_to_defeat_l2, time_op

    res = {}
    for algo, d, batch, nkv in SHAPES:
        p = problem(d, batch, nkv)
        sched = build_schedule(p, "h200", algo)
        n_sets = sets_to_defeat_l2(p.q_bytes() * 2 + p.kv_bytes(), most=4)
        rng = np.random.default_rng(d + batch + nkv)
        sets = [device_inputs(random_inputs(p, rng), p.dtype) for _ in range(n_sets)]
        ref = None
        for store in STORES[algo]:
            k = key(algo, d, batch, nkv, store)
            try:
                ln = launcher(sched, IOSIM_O_STORE=store)
                outs = [dict(x) for x in sets]       # outputs allocated once per input set
                T = ln.run(outs[0])
                o = cp.asnumpy(T["O"]).astype(np.float32)
                if store == 1:
                    ref = o
                check = float(np.nanmax(np.abs(o - ref))) if store == 2 else None
                t = time_op(lambda s, ln=ln, outs=outs: ln.run(outs[s]), n_sets, 2, 10)
                res[k] = {"time_s": t["time_s"], "max_abs_diff_vs_store1": check,
                          "ctas": sched.kernels[0].num_ctas}
                print(f"{k:34s} {t['time_s'] * 1e6:9.2f} us" + (f"  |O-O1| {check:.2e}" if check is not None else ""),
                      flush=True)
            except Exception as exc:  # keep the other variants
                res[k] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                print(k, res[k]["error"], flush=True)
        del sets
        cp.get_default_memory_pool().free_all_blocks()
    out.write_text(json.dumps(res, indent=1, sort_keys=True))


def predict(out: Path) -> None:
    from iosim.clock import sustained_simulation
    res = {}
    for algo, d, batch, nkv in SHAPES:
        s = build_schedule(problem(d, batch, nkv), "h200-calibrated", algo)
        r, _ = sustained_simulation(s, "h200-calibrated", l2_protocol="ncu", time_protocol="warm")
        res[key(algo, d, batch, nkv, 1)] = {"time_s": r.time_s}
        print(f"{key(algo, d, batch, nkv, 1):34s} {r.time_s * 1e6:9.2f} us", flush=True)
    out.write_text(json.dumps(res, indent=1, sort_keys=True))


if __name__ == "__main__":
    if sys.argv[1] == "--predict":
        predict(Path(sys.argv[2]))
    else:
        measure(Path(sys.argv[1]))
