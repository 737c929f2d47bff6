"""cuBLAS's fallback GEMMs: the L2→SM bytes of their narrow copies, model against Nsight
Compute on the fallback probes' kernels (no validation shape).

    python scripts/align2_copy_sectors.py [--gpu h200-calibrated] [--regime align2|align1] [--mode fast|exact]

align2 (measurements/h200/cublas_align2/): every P·V and Pᵀ dO kernel Nsight Compute measured
(cublas_align2_ncu.csv, l1tex__m_xbar2l1tex_read_bytes); align1 (measurements/h200/
cublas_align1/, cublas_align1_ncu.csv): every kernel, S = Q Kᵀ included. For each, the
schedule's L2→SM bytes for the same GEMM (the standard attention problem with B·H = the
probe's batch and the kernel it ran, given by name): the panels' valid bytes alone (before: no
sector excess); with the sectors each narrow-copied row segment touches, a K-step boundary
sector kept by the L1 with the probe curve's probability (standard.copy_excess_bytes,
copy_kept_fraction); and the fast mode's simulated bytes, which also take out the loads that
hit the SM's L1 (align1's 2-byte LDG go through it, so co-resident CTAs that share a panel
hit each other's lines: sim/l1.py, dispatch_l1_hit_fraction); last, the share of K-step
boundary sectors the L1 keeps as the model takes it (copy_kept_fraction) and as the measured
bytes imply (kept_shares). The output is committed as
benchmarks/results/align2_copy_sectors.txt and align1_copy_sectors.txt; tests/
test_cublas_fallback.py checks the same figures.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from iosim import AttentionProblem, load_gpu
from iosim.algorithms import build_schedule
from iosim.measure.ncu import parse_csv
from iosim.schedule import program_totals
from iosim.sim import simulate

ROOT = Path(__file__).resolve().parents[1]
PROBES = {"align2": (ROOT / "measurements" / "h200" / "cublas_align2", "cutlass_80", ("pv", "pt")),
          "align1": (ROOT / "measurements" / "h200" / "cublas_align1", "cutlass_75",
                     ("qk", "pv", "pt"))}
KERNEL_OF_FORM = {"qk": ("std_fwd_qk", "fwd"), "pv": ("std_fwd_pv", "fwd"),
                  "pt": ("std_bwd_dV", "bwd")}


def probe_kernels(regime: str = "align2") -> list:
    """(form, N, d, batch, kernel name, measured L2→SM bytes) of each kernel of the regime's
    probe that Nsight Compute measured (align2: P·V and Pᵀ dO; align1: all three forms)."""
    probe, prefix, forms = PROBES[regime]
    batch = {(r["form"], r["n"], r["d"]): r["z"] for r in
             json.loads((probe / f"cublas_{regime}_h200.json").read_text())["rows"]}
    out = []
    for block in (probe / f"cublas_{regime}_ncu.csv").read_text().split("## ")[1:]:
        head, _, rest = block.partition("\n")
        form, n, d = head.split()[:3]
        if form not in forms:
            continue
        (row,) = parse_csv(rest)
        name = row["kernel"]
        name = name[name.index(prefix):name.index(">")]
        measured = row["l2_to_sm_read_bytes"]
        out.append((form, int(n), int(d), batch[(form, int(n), int(d))], name, measured))
    return out


def _kernel(gpu, form: str, n: int, d: int, z: int, name: str):
    kernel, direction = KERNEL_OF_FORM[form]
    schedule = build_schedule(AttentionProblem(batch=1, heads_q=z, heads_kv=z, seq_q=n,
                                               seq_kv=n, head_dim=d, direction=direction),
                              gpu, "standard", gemm_tiles=f"{kernel}={name}")
    return schedule, next(k for k in schedule.kernels if k.name == kernel)


def predicted(gpu, form: str, n: int, d: int, z: int, name: str) -> tuple:
    """(valid panel bytes, L2→SM bytes with the copies' sector excess) of the kernel."""
    _, k = _kernel(gpu, form, n, d, z, name)
    valid = excess = 0
    for rep, count in k.classes:
        t = program_totals(k.program(rep))
        valid += count * sum(t.load_bytes.values())
        excess += count * t.oob_load_bytes
    return valid, valid + excess


def kept_shares(gpu, form: str, n: int, d: int, z: int, name: str, measured: float) -> tuple:
    """(the L1's keep of a K-step boundary sector as copy_kept_fraction gives it, the keep the
    measured bytes imply): the schedule's bytes with every boundary sector kept and with none
    (copy_kept_fraction held at 1 and 0), the measurement placed between them. None where no
    boundary sector is shared (rows along K: Pᵀ dO)."""
    from unittest import mock
    from iosim.algorithms import standard
    bytes_at = {}
    for kept in (0.0, 1.0):
        with mock.patch.object(standard, "copy_kept_fraction", lambda *a, kept=kept, **k: kept):
            bytes_at[kept] = predicted(gpu, form, n, d, z, name)[1]
    b0, b1 = bytes_at[0.0], bytes_at[1.0]
    if b0 == b1:
        return None, None
    model = predicted(gpu, form, n, d, z, name)[1]
    return (b0 - model) / (b0 - b1), (b0 - measured) / (b0 - b1)


def simulated(gpu, form: str, n: int, d: int, z: int, name: str, mode: str = "fast",
              with_l1: bool = False):
    """The simulator's L2→SM bytes of the kernel run alone (Nsight Compute's protocol): the
    schedule's, less its loads' L1 hits; with_l1: (those bytes, the L1 hit bytes)."""
    schedule, k = _kernel(gpu, form, n, d, z, name)
    alone = dataclasses.replace(schedule, kernels=(k,))
    r = simulate(alone, gpu, mode, l2_protocol="ncu", exact_below_events=0).kernels[0]
    return (r.l2_to_sm_bytes, r.l1_hit_bytes) if with_l1 else r.l2_to_sm_bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h200-calibrated")
    ap.add_argument("--regime", choices=tuple(PROBES), default="align2")
    ap.add_argument("--mode", choices=("fast", "exact"), default="fast",
                    help="the simulator mode of the sim_err column (exact: minutes)")
    args = ap.parse_args(argv)
    gpu = load_gpu(args.gpu)
    print(f"# {args.regime} fallback kernels' L2→SM bytes on {gpu.name}: Nsight Compute (probe) "
          f"against the schedule (valid panels; with the copies' sectors) and the {args.mode} "
          "mode (less L1 hits)")
    print(f"{'form':4s} {'N':>5s} {'d':>4s} {'z':>3s} {'kernel':44s} {'ncu_MB':>8s} "
          f"{'valid_err':>9s} {'model_err':>9s} {'sim_err':>9s} {'l1_MB':>6s} {'kept':>5s} "
          f"{'implied':>7s}")
    errs = []
    for form, n, d, z, name, measured in probe_kernels(args.regime):
        valid, model = predicted(gpu, form, n, d, z, name)
        sim, l1_hit = simulated(gpu, form, n, d, z, name, args.mode, with_l1=True)
        errs.append(sim / measured - 1)
        kept, implied = kept_shares(gpu, form, n, d, z, name, measured)
        shares = (f" {kept:5.2f} {implied:7.2f}" if kept is not None else f" {'-':>5s} {'-':>7s}")
        print(f"{form:4s} {n:5d} {d:4d} {z:3d} {name.split('gemm_f16_')[1]:44s} {measured / 1e6:8.1f} "
              f"{valid / measured - 1:+9.2%} {model / measured - 1:+9.2%} {sim / measured - 1:+9.2%}"
              f" {l1_hit / 1e6:6.1f}"
              + shares)
    print(f"# simulated: mean |err| {sum(map(abs, errs)) / len(errs):.2%}, "
          f"max {max(map(abs, errs)):.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
