"""The issue costs of cuBLAS's Ampere fallback GEMMs (iosim/algorithms/cublas_fallback.py),
solved from the H200 probe measurements/h200/cublas_align2/cublas_align2_h200.json with the
simulator itself, then every probe kernel simulated against its measured time.

Fit rows: the S = Q Kᵀ kernels (N 2996, 4002, 5006; one CTA per SM, 48-49 waves) at d 32 and
128 (256x128_32x3: K steps of 32) and d 256 (256x128_64x3: K steps of 64). Three figures:
a k-step's latency beyond its MMAs (cycles, whatever the step's bytes), the copies' issue
(cycles per byte copied: 24 vs 48 4-byte copies per thread per step) and the epilogue's store
issue (cycles per byte of S). Targets: the mean d = 32 time (the epilogue), the mean d 32 → 128
increase (K steps of 32) and the mean d 128 → 256 increase (K steps of 64, against the same
bytes per element), each over the three N, solved at once by Newton's method (finite
differences; the costs stay ≥ 0). Check rows: everything else in the file (the d 64 S kernels,
P V at d 64 and 128, Pᵀ dO), not used.

    python scripts/align2_costs.py [--given STEP COPY STORE]   # given: only the table
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.algorithms import cublas_fallback
from iosim.sim import simulate

PROBE = Path(__file__).resolve().parent.parent / "measurements/h200/cublas_align2/cublas_align2_h200.json"
# which kernel of which schedule each probe form is: (direction, kernel name)
FORMS = {"qk": ("fwd", "std_fwd_qk"), "pv": ("fwd", "std_fwd_pv"), "pt": ("bwd", "std_bwd_dV")}
FIT_D = (32, 128, 256)


def measured_rows():
    rows = []
    for r in json.loads(PROBE.read_text())["rows"]:
        ks = [k for k in r["kernels"] if "cutlass_80" in k["name"]]
        if len(ks) == 1:
            rows.append({**r, "measured_us": ks[0]["dur_us"], "kernel": ks[0]["name"]})
    return rows


def is_fit_row(r) -> bool:
    return r["form"] == "qk" and r["d"] in FIT_D


def simulated_us(r, gpu, costs) -> float:
    (cublas_fallback.K_STEP_CYCLES, cublas_fallback.COPY_ISSUE_CYCLES_PER_BYTE,
     cublas_fallback.STORE_ISSUE_CYCLES_PER_BYTE) = costs
    direction, name = FORMS[r["form"]]
    p = AttentionProblem(batch=1, heads_q=r["z"], heads_kv=r["z"], seq_q=r["n"], seq_kv=r["n"],
                         head_dim=r["d"], direction=direction)
    s = build_schedule(p, gpu, "standard")
    s = dataclasses.replace(s, kernels=tuple(k for k in s.kernels if k.name == name))
    return simulate(s, gpu).time_s * 1e6


def targets(fit, gpu, costs) -> np.ndarray:
    """Simulated minus measured, µs, of the three targets, averaged over the fit rows' N."""
    out = np.zeros(3)
    ns = sorted({r["n"] for r in fit})
    for n in ns:
        rs = [next(r for r in fit if r["n"] == n and r["d"] == d) for d in FIT_D]
        sim = [simulated_us(r, gpu, costs) for r in rs]
        meas = [r["measured_us"] for r in rs]
        out += [sim[0] - meas[0], (sim[1] - sim[0]) - (meas[1] - meas[0]),
                (sim[2] - sim[1]) - (meas[2] - meas[1])]
    return out / len(ns)


def solve(rows, gpu, steps: int = 8) -> tuple:
    fit = [r for r in rows if is_fit_row(r)]
    x = np.array([1000.0, 0.03, 0.08])
    h = np.array([50.0, 0.002, 0.005])
    for _ in range(steps):
        f = targets(fit, gpu, x)
        if np.abs(f).max() < 0.1:
            break
        jac = np.column_stack([(targets(fit, gpu, x + step) - f) / step.sum()
                               for step in np.diag(h)])
        x = np.maximum(x - np.linalg.solve(jac, f), 0.0)
    return tuple(float(v) for v in x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--given", type=float, nargs=3, metavar=("STEP", "COPY", "STORE"))
    ap.add_argument("--gpu", default="h200-calibrated")
    args = ap.parse_args(argv)
    gpu = load_gpu(args.gpu)
    rows = measured_rows()
    costs = tuple(args.given) if args.given else solve(rows, gpu)
    print(f"# {args.gpu}: k-step latency {costs[0]:.0f} cycles, copy issue {costs[1]:.4f} "
          f"cycles/B, epilogue store issue {costs[2]:.4f} cycles/B "
          f"({'given' if args.given else 'solved from the fit rows'})")
    print(f"{'form':4s} {'N':>5s} {'d':>4s} {'z':>3s} {'kernel':28s} {'measured_us':>11s} "
          f"{'simulated_us':>12s} {'err':>7s}  use")
    errs = []
    for r in rows:
        sim = simulated_us(r, gpu, costs)
        err = sim / r["measured_us"] - 1
        fit = is_fit_row(r)
        if not fit:
            errs.append(abs(err))
        name = r["kernel"].split("<")[-1].split(">")[0].replace(
            "cutlass_80_tensorop_f16_s16816gemm_f16_", "")
        print(f"{r['form']:4s} {r['n']:5d} {r['d']:4d} {r['z']:3d} {name:28s} "
              f"{r['measured_us']:11.1f} {sim:12.1f} {err:+7.1%}  {'fit' if fit else 'check'}")
    print(f"# check rows: {len(errs)}, mean |err| {np.mean(errs):.1%}, max {max(errs):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
