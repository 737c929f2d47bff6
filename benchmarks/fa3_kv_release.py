"""FA-3 kernel: K and V released separately (FA-3's pipelines) or together, and the d = 64 ablations.

    python3 benchmarks/fa3_kv_release.py predict OUT.json     # CPU: the simulator's times
    python3 benchmarks/fa3_kv_release.py measure OUT.json     # H200: CUDA-event medians
    python3 benchmarks/fa3_kv_release.py table PRED.json MEAS.json

Variants of iosim/kernels/cuda/fa3_fwd.cu (hopper.Fa3Variant) and of the fa3 schedule's
Pipeline, on fp16 shapes of the validation sweep (H 16, B = 16384 / N) at d = 64 and on the
d = 128 bench shape of run 1 (H 32, N 4096, B 4) with a 2-stage ring:
  sep            the kernel as built (K released after Q Kᵀ, V after P V)
  together       FA3_SEPARATE_KV_RELEASE=0 / Pipeline(separate_kv_release=False): one barrier
                 per stage, released after P V (the kernel that measured_h200_fa3.csv's d = 64
                 rows and run 1's 2-stage d = 128 rows were taken with)
  sep@s3, together@s3   the same with a 3-stage ring
  no_intra, no_pingpong the ablations (d = 64)
The predictions are written before the measurement is made (predict, then measure)."""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iosim import AttentionProblem, build_schedule  # noqa: E402

SHAPES = [  # (batch, heads, seq, d, causal, stages or None = the schedule's)
    (4, 16, 4096, 64, False, None), (4, 16, 4096, 64, True, None),
    (1, 16, 16384, 64, False, None), (1, 16, 16384, 64, True, None),
    (4, 32, 4096, 128, False, 2), (4, 32, 4096, 128, True, 2),
]
VARIANTS = {  # name: (kernel variant changes, pipeline changes, stages override)
    "sep": ({}, {}, None),
    "together": ({"separate_kv_release": False}, {"separate_kv_release": False}, None),
    "sep@s3": ({}, {}, 3),
    "together@s3": ({"separate_kv_release": False}, {"separate_kv_release": False}, 3),
    "no_intra": ({"intra_overlap": False}, {"intra_overlap": False}, None),
    "no_pingpong": ({"pingpong": False}, {"consumer_warpgroups": 1}, None),
}


def variants_for(d: int) -> list:
    return list(VARIANTS) if d == 64 else ["sep", "together"]


def problem(shape) -> AttentionProblem:
    b, h, n, d, causal, _ = shape
    return AttentionProblem(batch=b, heads_q=h, seq_q=n, head_dim=d, dtype="fp16", causal=causal)


def schedule(shape, name):
    _kv, _pipe, st = VARIANTS[name]
    st = st or shape[5]
    return build_schedule(problem(shape), "h200", "fa3", **({"stages": st} if st else {}))


def key(shape) -> str:
    b, h, n, d, causal, st = shape
    return f"B{b}-H{h}-N{n}-d{d}-{'causal' if causal else 'full'}" + (f"-s{st}" if st else "")


def predict(out: Path) -> None:
    from iosim.clock import sustained_simulation
    res = {}
    for shape in SHAPES:
        row = {}
        for name in variants_for(shape[3]):
            s = schedule(shape, name)
            pipe = VARIANTS[name][1]
            if pipe:
                s = replace(s, kernels=tuple(replace(k, pipeline=replace(k.pipeline, **pipe))
                                             for k in s.kernels))
            r, _ = sustained_simulation(s, "h200-calibrated", l2_protocol="ncu", time_protocol="warm")
            row[name] = r.time_s
        res[key(shape)] = row
        print(key(shape), {k: f"{v * 1e3:.3f} ms" for k, v in row.items()}, flush=True)
    out.write_text(json.dumps(res, indent=1))


def measure(out: Path) -> None:
    import numpy as np
    import cupy as cp
    from iosim.kernels.hopper import FULL
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import Launcher, device_inputs
    from iosim.measure.timing import sets_to_defeat_l2, time_op
    res = {}
    for shape in SHAPES:
        p = problem(shape)
        n_sets = sets_to_defeat_l2(p.q_bytes() * 2 + p.kv_bytes(), most=4)
        rng = np.random.default_rng(shape[2])
        sets = [device_inputs(random_inputs(p, rng), p.dtype) for _ in range(n_sets)]
        row = {}
        for name in variants_for(shape[3]):
            try:
                ln = Launcher(schedule(shape, name), fa3_variant=replace(FULL, **VARIANTS[name][0]))
                row[name] = time_op(lambda k, ln=ln: ln.run(sets[k]), n_sets, 2, 10)["time_s"]
            except Exception as exc:
                print(f"{key(shape)} {name}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        res[key(shape)] = row
        print(key(shape), {k: f"{v * 1e3:.3f} ms" for k, v in row.items()}, flush=True)
        del sets
        cp.get_default_memory_pool().free_all_blocks()
    out.write_text(json.dumps(res, indent=1))


def table(pred: Path, meas: Path) -> str:
    P, M = json.loads(pred.read_text()), json.loads(meas.read_text())
    lines = ["# time in ms, measured | simulated (err); cost columns: time(variant)/time(sep) - 1, measured | simulated"]
    for k in P:
        if k not in M or "sep" not in M[k]:
            continue
        ms, ps = M[k]["sep"], P[k]["sep"]
        parts = [f"sep {ms * 1e3:.3f} | {ps * 1e3:.3f} ({ps / ms - 1:+.1%})"]
        for name in P[k]:
            if name == "sep" or name not in M[k]:
                continue
            parts.append(f"{name} {M[k][name] / ms - 1:+.1%} | {P[k][name] / ps - 1:+.1%}")
        lines.append(f"{k:28s} " + "   ".join(parts))
    return "\n".join(lines)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "predict":
        predict(Path(sys.argv[2]))
    elif mode == "measure":
        measure(Path(sys.argv[2]))
    else:
        print(table(Path(sys.argv[2]), Path(sys.argv[3])))
