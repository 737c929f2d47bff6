"""cuBLAS's align2 fallback GEMMs: the L2→SM bytes of their 4-byte copies, model against
Nsight Compute on the align2 probe's kernels (no validation shape).

    python scripts/align2_copy_sectors.py [--gpu h200-calibrated]

For every P·V (and Pᵀ dO) kernel Nsight Compute measured in measurements/h200/cublas_align2/
(cublas_align2_ncu.csv, l1tex__m_xbar2l1tex_read_bytes), the schedule's L2→SM bytes for the same
GEMM (the standard attention problem with B·H = the probe's batch and the kernel it ran, given
by name): the panels' valid bytes alone (before: no sector excess), and with the sectors each
4-byte-copied row segment touches, a K-step boundary sector kept by the L1 with the probe
curve's probability (standard.copy_excess_bytes, copy_kept_fraction). The output is committed
as benchmarks/results/align2_copy_sectors.txt; tests/test_cublas_fallback.py checks the same
figures.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from iosim import AttentionProblem, load_gpu
from iosim.algorithms import build_schedule
from iosim.measure.ncu import parse_csv
from iosim.schedule import program_totals

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "measurements" / "h200" / "cublas_align2"
KERNEL_OF_FORM = {"pv": ("std_fwd_pv", "fwd"), "pt": ("std_bwd_dV", "bwd")}


def probe_kernels() -> list:
    """(form, N, d, batch, kernel name, measured L2→SM bytes) of each P·V / Pᵀ dO kernel the
    probe ran under Nsight Compute."""
    batch = {(r["form"], r["n"], r["d"]): r["z"] for r in
             json.loads((PROBE / "cublas_align2_h200.json").read_text())["rows"]}
    out = []
    for block in (PROBE / "cublas_align2_ncu.csv").read_text().split("## ")[1:]:
        head, _, rest = block.partition("\n")
        form, n, d = head.split()[:3]
        if form not in KERNEL_OF_FORM:
            continue
        (row,) = parse_csv(rest)
        name = row["kernel"]
        name = name[name.index("cutlass_80"):name.index(">")]
        measured = row["l2_to_sm_read_bytes"]
        out.append((form, int(n), int(d), batch[(form, int(n), int(d))], name, measured))
    return out


def predicted(gpu, form: str, n: int, d: int, z: int, name: str) -> tuple:
    """(valid panel bytes, L2→SM bytes with the copies' sector excess) of the kernel."""
    kernel, direction = KERNEL_OF_FORM[form]
    schedule = build_schedule(AttentionProblem(batch=1, heads_q=z, heads_kv=z, seq_q=n,
                                               seq_kv=n, head_dim=d, direction=direction),
                              gpu, "standard", gemm_tiles=f"{kernel}={name}")
    k = next(k for k in schedule.kernels if k.name == kernel)
    valid = excess = 0
    for rep, count in k.classes:
        t = program_totals(k.program(rep))
        valid += count * sum(t.load_bytes.values())
        excess += count * t.oob_load_bytes
    return valid, valid + excess


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h200-calibrated")
    args = ap.parse_args(argv)
    gpu = load_gpu(args.gpu)
    print(f"# align2 fallback kernels' L2→SM bytes on {gpu.name}: Nsight Compute (probe) "
          "against the schedule")
    print(f"{'form':4s} {'N':>5s} {'d':>4s} {'z':>3s} {'kernel':44s} {'ncu_MB':>8s} "
          f"{'valid_err':>9s} {'model_err':>9s}")
    errs = []
    for form, n, d, z, name, measured in probe_kernels():
        valid, model = predicted(gpu, form, n, d, z, name)
        errs.append(model / measured - 1)
        print(f"{form:4s} {n:5d} {d:4d} {z:3d} {name.split('gemm_f16_')[1]:44s} {measured / 1e6:8.1f} "
              f"{valid / measured - 1:+9.2%} {model / measured - 1:+9.2%}")
    print(f"# mean |err| {sum(map(abs, errs)) / len(errs):.2%}, max {max(map(abs, errs)):.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
