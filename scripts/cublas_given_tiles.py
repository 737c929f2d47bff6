"""The standard-attention rows of the H200 dataset predicted twice: with the GEMM tiles the
model's rule picks (standard.gemm_tile, what `iosim run` uses for a problem nobody measured)
and with the tiles cuBLAS ran, read from the kernel names Nsight Compute recorded
(validate.gemm_tiling, what `iosim validate` scores). Per kernel: L2→SM bytes and time against Nsight Compute's, and the kernel's
counted L2→SM rate (Nsight Compute's bytes over its time; above the port's measured 7.14 TB/s
only where a cluster multicasts). Per row and over all rows: time and L2→SM against the sums
over the row's kernels (what `iosim validate` scores).

    python scripts/cublas_given_tiles.py [--only N5000,N2200] > benchmarks/results/cublas_given_tiles.txt

Rows whose GEMMs ran CUTLASS's fallback kernels (row pitch off 16 bytes) are given those
kernels by name (cublas_fallback.tile_of_kernel_name); the summaries split nvjet and fallback rows.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from iosim.algorithms import build_schedule
from iosim.analysis.validate import PROBLEM_KEYS, _predict_one, gemm_tiling
from iosim.formats import load_kernel_rows
from iosim.problem import AttentionProblem

DATA = Path(__file__).resolve().parents[1] / "iosim/data/validation"
GPU = "h200-calibrated"


def rows() -> list:
    cfgs, kernels = {}, {}
    for f in sorted(DATA.glob("sweep*.yaml")):
        for c in yaml.safe_load(f.read_text())["configs"]:
            cfgs[c["id"]] = c
    for f in sorted(DATA.glob("measured_h200*_kernels.csv")):
        kernels.update(load_kernel_rows(f))
    out = []
    for id_, ks in sorted(kernels.items()):
        c = cfgs.get(id_)
        if c is None or c["impl"] != "iosim" or c.get("direction", "fwd") != "fwd":
            continue
        tiles = gemm_tiling(c, [k["kernel"] for k in ks]).get("gemm_tiles")
        if tiles:
            out.append((id_, c, ks, tiles))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated substrings of row ids")
    args = ap.parse_args()
    only = args.only.split(",") if args.only else None
    print("kernel: L2→SM err rule / given, time err rule / given (model / Nsight Compute − 1), "
          "counted L2→SM TB/s")
    errs = {}      # (rule / given, nvjet / fallback rows) -> [(time err, L2→SM err)]
    for id_, c, ks, tiles in rows():
        if only and not any(s in id_ for s in only):
            continue
        problem = {k: c[k] for k in PROBLEM_KEYS if k in c}
        rule = _predict_one((problem, "standard", GPU, {}))
        given = _predict_one((problem, "standard", GPU, {"gemm_tiles": tiles}))
        p = AttentionProblem(**problem)
        sched = {"rule": build_schedule(p, GPU, "standard"),
                 "given": build_schedule(p, GPU, "standard", gemm_tiles=tiles)}
        parts = []
        for i, k in enumerate(ks):
            l2 = float(k["l2_to_sm_read_bytes"])
            t = float(k["ncu_time_s"])
            e = [sched[w].kernels[i].totals().bytes_loaded / l2 - 1 for w in ("rule", "given")]
            tt = [r["kernels"][i][1] / t - 1 for r in (rule, given)]
            parts.append(f"{sched['rule'].kernels[i].name[8:]} {e[0]:+6.1%}/{e[1]:+6.1%} "
                         f"{tt[0]:+6.1%}/{tt[1]:+6.1%} {l2 / t / 1e12:5.2f}")
        t_row = sum(float(k["ncu_time_s"]) for k in ks)
        l2_row = sum(float(k["l2_to_sm_read_bytes"]) for k in ks)
        row = []
        family = "fallback" if "cutlass" in tiles else "nvjet"
        for label, r in (("rule", rule), ("given", given)):
            e = (r["time_s"] / t_row - 1, r["l2_to_sm_bytes"] / l2_row - 1)
            for key in ((label, family), (label, "all")):
                errs.setdefault(key, []).append(e)
            row.append(f"{label} time {e[0]:+6.1%} L2→SM {e[1]:+6.1%}")
        print(f"{id_[15:]}  {tiles}\n    " + " | ".join(parts) + "\n    row: " + "; ".join(row))
    for (label, family), es in sorted(errs.items(), key=lambda kv: (kv[0][1], kv[0][0] != "rule")):
        t, l2 = [abs(e[0]) for e in es], [abs(e[1]) for e in es]
        print(f"{label} tiles, {len(es)} {family} rows: time MAPE {sum(t) / len(t):.1%} max "
              f"{max(t):.1%}; L2→SM mean |err| {sum(l2) / len(l2):.2%} max {max(l2):.1%}")


if __name__ == "__main__":
    main()
