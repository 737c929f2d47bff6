"""The issue costs of cuBLAS's fallback GEMMs (iosim/algorithms/cublas_fallback.py), solved
from an H200 probe (align2: measurements/h200/cublas_align2/cublas_align2_h200.json; align1:
measurements/h200/cublas_align1/cublas_align1_h200.json) with the simulator itself, then every
probe kernel simulated against its measured time.

align1 (`--regime align1`): its kernels step K by 32 at every d. The P V kernels (nn; fit
rows too) give their step latency and the copy issue of the 2-byte loads (their steps' bytes
differ between d 64 and 128); the S kernels (tn) at d 32 and 128 then give their own step
latency and the epilogue's store issue with that copy issue; P V is solved again with that
store issue. Check rows: the S kernels at d 64 and 256, Pᵀ dO.

Fit rows: the S = Q Kᵀ kernels (N 2996, 4002, 5006; one CTA per SM, 48-49 waves) at d 32 and
128 (256x128_32x3: K steps of 32) and d 256 (256x128_64x3: K steps of 64). Three figures:
a k-step's latency beyond its MMAs (cycles, whatever the step's bytes), the copies' issue
(cycles per byte copied: 24 vs 48 4-byte copies per thread per step) and the epilogue's store
issue (cycles per byte of S). Targets: the mean d = 32 time (the epilogue), the mean d 32 → 128
increase (K steps of 32) and the mean d 128 → 256 increase (K steps of 64, against the same
bytes per element), each over the three N, solved at once by Newton's method (finite
differences; the costs stay ≥ 0). Check rows: everything else in the file (the d 64 S kernels,
P V at d 64 and 128, Pᵀ dO), not used.

    python scripts/align2_costs.py [--regime align2|align1] [--given STEP COPY STORE]
    python scripts/align2_costs.py --residency     # the residency probe's rows, as modelled
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.algorithms import cublas_fallback
from iosim.clock import sustained_simulation

MEASURED = Path(__file__).resolve().parent.parent / "measurements/h200"
PROBES = {"align2": MEASURED / "cublas_align2/cublas_align2_h200.json",
          "align1": MEASURED / "cublas_align1/cublas_align1_h200.json"}
# the regime each probe form's kernel takes: (alignment, narrow output)
def regime_key(regime: str, form: str) -> tuple:
    return (2 if regime == "align2" else 1, form != "qk")
# which kernel of which schedule each probe form is: (direction, kernel name)
FORMS = {"qk": ("fwd", "std_fwd_qk"), "pv": ("fwd", "std_fwd_pv"), "pt": ("bwd", "std_bwd_dV")}
FIT = {"align2": (32, 128, 256), "align1": (32, 128)}


def measured_rows(regime: str = "align2"):
    rows = []
    family = "cutlass_80" if regime == "align2" else "cutlass_75"
    for r in json.loads(PROBES[regime].read_text())["rows"]:
        ks = [k for k in r["kernels"] if family in k["name"]]
        if len(ks) == 1:
            rows.append({**r, "measured_us": ks[0]["dur_us"], "kernel": ks[0]["name"]})
    return rows


def is_fit_row(r, regime: str = "align2") -> bool:
    return r["form"] == "qk" and r["d"] in FIT[regime]


def simulated_us(r, gpu, costs, regime: str = "align2") -> float:
    """The probe row's kernel simulated with its regime's figures set to `costs`, at the SM
    clock `iosim validate` simulates it at (clock.sustained_simulation: the counted clock, or
    the power-capped one below it), so that cycle figures mean the same time in both."""
    reg = cublas_fallback.REGIMES[regime_key(regime, r["form"])]
    reg.k_step_cycles, reg.copy_issue_cycles_per_byte, reg.store_issue_cycles_per_byte = costs
    direction, name = FORMS[r["form"]]
    p = AttentionProblem(batch=1, heads_q=r["z"], heads_kv=r["z"], seq_q=r["n"], seq_kv=r["n"],
                         head_dim=r["d"], direction=direction)
    s = build_schedule(p, gpu, "standard")
    s = dataclasses.replace(s, kernels=tuple(k for k in s.kernels if k.name == name))
    return sustained_simulation(s, gpu)[0].time_s * 1e6


def targets(fit, gpu, costs, regime: str) -> np.ndarray:
    """Simulated minus measured, µs, of the targets (the d = 32 time, then each increase to the
    next fit d), averaged over the fit rows' N."""
    ds = FIT[regime]
    out = np.zeros(len(ds))
    ns = sorted({r["n"] for r in fit})
    for n in ns:
        rs = [next(r for r in fit if r["n"] == n and r["d"] == d) for d in ds]
        sim = [simulated_us(r, gpu, costs, regime) for r in rs]
        meas = [r["measured_us"] for r in rs]
        out += [sim[0] - meas[0]] + [(sim[i] - sim[i - 1]) - (meas[i] - meas[i - 1])
                                     for i in range(1, len(ds))]
    return out / len(ns)


def solve(rows, gpu, regime: str, steps: int = 8, copy: float = 0.0) -> tuple:
    """Newton's method on the targets: (step, copy, store) for align2, (step, store) with the
    copy issue given (the P V kernels': the same 2-byte loads) for align1."""
    fit = [r for r in rows if is_fit_row(r, regime)]
    free = [0, 1, 2] if regime == "align2" else [0, 2]
    x = np.array([1000.0, 0.03, 0.08]) if regime == "align2" else np.array([4000.0, copy, 0.1])
    h = np.array([50.0, 0.002, 0.005])
    for _ in range(steps):
        f = targets(fit, gpu, x, regime)
        if np.abs(f).max() < 0.1:
            break
        jac = np.column_stack([(targets(fit, gpu, x + h[i] * np.eye(3)[i], regime) - f) / h[i]
                               for i in free])
        x[free] = np.maximum(x[free] - np.linalg.solve(jac, f), 0.0)
    return tuple(float(v) for v in x)


def solve_nn(rows, gpu, store: float, steps: int = 8) -> tuple:
    """align1's P V kernels: (step latency, copy issue) with the S kernels' store issue, from
    the mean simulated-minus-measured time at d 64 and at d 128 over the probe's N."""
    pv = [r for r in rows if r["form"] == "pv"]

    def f(x):
        return np.array([np.mean([simulated_us(r, gpu, (x[0], x[1], store), "align1")
                                  - r["measured_us"] for r in pv if r["d"] == d])
                         for d in (64, 128)])
    x, h = np.array([2000.0, 0.05]), np.array([50.0, 0.002])
    for _ in range(steps):
        fx = f(x)
        if np.abs(fx).max() < 0.1:
            break
        jac = np.column_stack([(f(x + h[i] * np.eye(2)[i]) - fx) / h[i] for i in range(2)])
        x = np.maximum(x - np.linalg.solve(jac, fx), 0.0)
    return float(x[0]), float(x[1]), store


RESIDENCY = MEASURED / "cublas_residency/cublas_residency_h200.json"


def residency(gpu) -> None:
    """The residency probe's align1 P V rows (measurements/h200/cublas_residency/, none used
    for a figure) simulated with the module's figures: one CTA per SM (grid ≤ SMs) or two."""
    reg = cublas_fallback.REGIMES[1, True]
    costs = (reg.k_step_cycles, reg.copy_issue_cycles_per_byte, reg.store_issue_cycles_per_byte)
    print(f"# residency probe, align1 nn figures {costs}")
    print(f"{'N':>5s} {'z':>3s} {'grid':>5s} {'measured_us':>11s} {'simulated_us':>12s} {'err':>7s}")
    for r in json.loads(RESIDENCY.read_text())["rows"]:
        k = r["kernels"][0]
        if (r["form"] != "pv" or len(r["kernels"]) != 1 or "128x128_nn_align1" not in k["name"]
                or k["registers"] != 252):
            continue       # cuBLAS ran another kernel there (split-K, sm90 xmma, 64-row tiles)
        grid = k["grid"][0] * k["grid"][1] * k["grid"][2]
        sim = simulated_us(r, gpu, costs, "align1")
        print(f"{r['n']:5d} {r['z']:3d} {grid:5d} {k['dur_us']:11.1f} {sim:12.1f} "
              f"{sim / k['dur_us'] - 1:+7.1%}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--given", type=float, nargs=3, metavar=("STEP", "COPY", "STORE"))
    ap.add_argument("--gpu", default="h200-calibrated")
    ap.add_argument("--regime", choices=sorted(PROBES), default="align2")
    ap.add_argument("--given-nn", type=float, nargs=3, metavar=("STEP", "COPY", "STORE"),
                    help="align1: the P V kernels' figures, given")
    ap.add_argument("--residency", action="store_true",
                    help="only simulate the residency probe's rows with the module's figures")
    args = ap.parse_args(argv)
    gpu = load_gpu(args.gpu)
    if args.residency:
        residency(gpu)
        return 0
    rg = args.regime
    rows = measured_rows(rg)
    if rg == "align1" and not args.given:
        # the P V kernels' copy issue (their d 64 / 128 steps differ in bytes), then the S
        # kernels' step latency and store issue with it, then P V again with that store issue
        copy = solve_nn(rows, gpu, 0.1)[1]
        costs = solve(rows, gpu, rg, copy=copy)
        costs_nn = solve_nn(rows, gpu, costs[2])
    else:
        costs = tuple(args.given) if args.given else solve(rows, gpu, rg)
        costs_nn = tuple(args.given_nn) if args.given_nn else costs
    if rg == "align1":
        print(f"# {args.gpu}, align1 nn (P V, Pᵀ dO): k-step latency {costs_nn[0]:.0f} cycles, "
              f"copy issue {costs_nn[1]:.4f} cycles/B, epilogue store issue {costs_nn[2]:.4f} "
              f"cycles/B ({'given' if args.given_nn else 'solved from the P V rows'}; "
              "fit: the P V rows too)")
    print(f"# {args.gpu}, {rg}: k-step latency {costs[0]:.0f} cycles, copy issue {costs[1]:.4f} "
          f"cycles/B, epilogue store issue {costs[2]:.4f} cycles/B "
          f"({'given' if args.given else 'solved from the fit rows'})")
    print(f"{'form':4s} {'N':>5s} {'d':>4s} {'z':>3s} {'kernel':28s} {'measured_us':>11s} "
          f"{'simulated_us':>12s} {'err':>7s}  use")
    errs = []
    for r in rows:
        sim = simulated_us(r, gpu, costs if r["form"] == "qk" else costs_nn, rg)
        err = sim / r["measured_us"] - 1
        fit = is_fit_row(r, rg) or (rg == "align1" and r["form"] == "pv")
        if not fit:
            errs.append(abs(err))
        name = r["kernel"].split("<")[-1].split(">")[0].replace(
            "cutlass_80_tensorop_f16_s16816gemm_f16_", "").replace(
            "cutlass_75_tensorop_f16_s1688gemm_f16_", "")
        print(f"{r['form']:4s} {r['n']:5d} {r['d']:4d} {r['z']:3d} {name:28s} "
              f"{r['measured_us']:11.1f} {sim:12.1f} {err:+7.1%}  {'fit' if fit else 'check'}")
    print(f"# check rows: {len(errs)}, mean |err| {np.mean(errs):.1%}, max {max(errs):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
