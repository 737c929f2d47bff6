"""The standard softmax kernel's issued instructions per row of S, fitted to Nsight Compute's
counts (measurements/h100/softmax_issue/: smsp__inst_executed of softmax.cu as committed, one
launch each at N 512 ... 8192 and 2008 / 4008 on the 16-byte path, 1001 ... 6001 on the scalar
path; the same compiler output as the H200's, whose N 4008 / 4001 counts in
measurements/h200/softmax_scalar/ these reproduce to the instruction).

Per path, warp instructions per row = a·N + b + c·trips, trips being the row copy's dependent
round trips (softmax_code.row_load_trips: each trip is a remainder iteration or an unrolled
block of the copy loop, with its own loop overhead); least squares on the relative error.
Prints the figures softmax_code.ISSUED_PER_ROW holds and each launch's residual.

    python scripts/softmax_issue_fit.py > benchmarks/results/softmax_issue_fit.txt
"""
from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from iosim.algorithms import softmax_code as sc

PROBE = Path(__file__).resolve().parents[1] / "measurements/h100/softmax_issue"
sys.path.insert(0, str(Path(__file__).resolve().parent / "experiments"))
from softmax_issue_h200 import SEQS, shape as _shape  # noqa: E402  the probe's own shapes


def _ncu_order() -> list:
    """(N, variant) of softmax_issue_ncu.csv's launches, in order (the probe's --ncu run)."""
    return [(s, v) for s in SEQS for v in ((0, 4) if (2 * s) % 16 == 0 else (0,))]


def _probe_gpu():
    """The H100 config: the probe's GPU, whose launch overhead and CTA turnover come off the
    probe's CUDA-event times."""
    from iosim.hardware import load_gpu
    return load_gpu("h100")


def _launches(name: str) -> list:
    per = defaultdict(dict)
    for r in csv.reader(open(PROBE / name)):
        if len(r) > 14 and r[0].isdigit():
            per[int(r[0])][r[12]] = float(r[14].replace(",", ""))
    return [per[i] for i in sorted(per)]


def counts() -> list:
    """(N, path, warp instructions per row) of every launch of the kernel itself (variant 0)."""
    out = []
    for (seq, variant), m in zip(_ncu_order(), _launches("softmax_issue_ncu.csv")):
        if variant == 0:
            b, h = _shape(seq)
            out.append((seq, m["smsp__inst_executed.sum"] / (b * h * seq)))
    for seq, m in zip((4008, 4001, 2008, 2001), _launches("softmax_issue_ncu_b1h16.csv")):
        out.append((seq, m["smsp__inst_executed.sum"] / (16 * seq)))
    return [(n, sc.path(2 * n), i) for n, i in out]


def fit(path: str) -> tuple:
    """(a, b, c) of warp instructions per row = a·N + b + c·trips on `path`'s launches."""
    pts = [(n, i) for n, p, i in counts() if p == path]
    a = np.array([[n, 1.0, sc.row_load_trips(2 * n)] for n, _ in pts])
    y = np.array([i for _, i in pts])
    x, *_ = np.linalg.lstsq(a / y[:, None], np.ones_like(y), rcond=None)
    return tuple(float(v) for v in x)


def main() -> None:
    for path in ("vector", "scalar"):
        a, b, c = fit(path)
        print(f"{path}: {a:.4f} per element + {b:.1f} per row + {c:.1f} per copy trip")
        for n, p, i in counts():
            if p == path:
                model = sc.issued_per_row(n, 2)
                print(f"  N {n:5d}  trips {sc.row_load_trips(2 * n):2d}  ncu {i:7.1f}  "
                      f"softmax_code {model:7.1f}  {model / i - 1:+.1%}")
    a, b = lone_warp_fit()
    print(f"\none warp alone (compute only, one CTA per SM): {a:.3f} cycles per instruction + "
          f"{b:.1f} per row")
    for n, i, c in lone_warp_points():
        print(f"  N {n:5d}  {i:7.1f} instructions  {c:8.1f} cycles a row  "
              f"softmax_code {sc.lone_row_cycles(n, 2):8.1f}  {sc.lone_row_cycles(n, 2) / c - 1:+.1%}")
    print("\nissue efficiency by warps per sub-partition (compute only): measured, "
          "1 - (1 - p)^W (softmax_code.issue_efficiency)")
    for n, k, e, model in efficiency_points():
        print(f"  N {n:5d}  W {k:2d}  measured {e:.3f}  model {model:.3f}  {model / e - 1:+.1%}")


def lone_warp_points() -> list:
    """(N, warp instructions per row, clock cycles per row) of the compute-only variant (4) at
    one CTA per SM: one warp on each SM sub-partition, each its own row after another. Its
    CUDA-event time less one launch (GpuSpec.launch_overhead_s) at the clock Nsight Compute
    read for the same variant, over the rows a sub-partition runs (the CTAs an SM runs), less
    the CTA turnover between them (GpuSpec.cta_turnover_cycles; both the h100 config's)."""
    import json
    probe = json.loads((PROBE / "softmax_issue.json").read_text())
    order = _ncu_order()
    gpu = _probe_gpu()
    turnover_cycles, launch_s = gpu.cta_turnover_cycles, gpu.launch_overhead_s
    clock = {s: m["sm__cycles_elapsed.avg.per_second"]
             for (s, v), m in zip(order, _launches("softmax_issue_ncu.csv")) if v == 4}
    issued = {s: m["smsp__inst_executed.sum"] / (b * h * s)
              for (s, v), m in zip(order, _launches("softmax_issue_ncu.csv")) if v == 4
              for b, h in [_shape(s)]}
    out = []
    for r in probe["rows"]:
        if r["variant"] == 4 and r["ctas_per_sm"] == 1:
            s = r["seq"]
            rows_per_smsp = r["batch"] * r["heads"] * -(-s // 4) / 132
            cycles = (r["ms"] * 1e-3 - launch_s) * clock[s] / rows_per_smsp - turnover_cycles
            out.append((s, issued[s], cycles))
    return out


def lone_warp_fit() -> tuple:
    """(cycles per instruction, cycles per row) of one warp issuing alone: least squares on
    lone_warp_points' relative error."""
    pts = lone_warp_points()
    a = np.array([[i, 1.0] for _n, i, _c in pts])
    y = np.array([c for *_x, c in pts])
    x, *_ = np.linalg.lstsq(a / y[:, None], np.ones_like(y), rcond=None)
    return tuple(float(v) for v in x)


def efficiency_points() -> list:
    """(N, warps per sub-partition, measured issue efficiency, softmax_code.issue_efficiency)
    of the compute-only variant at 2, 3 and 4 CTAs per SM and its own occupancy: the
    instructions a sub-partition issued over its cycles (CUDA-event time less one launch, at
    the clock Nsight Compute read for the variant, less the CTA turnover per slot)."""
    import json
    probe = json.loads((PROBE / "softmax_issue.json").read_text())
    order = _ncu_order()
    gpu = _probe_gpu()
    turnover_cycles, launch_s = gpu.cta_turnover_cycles, gpu.launch_overhead_s
    ncu = {s: m for (s, v), m in zip(order, _launches("softmax_issue_ncu.csv")) if v == 4}
    out = []
    for r in probe["rows"]:
        s, k = r["seq"], r["ctas_per_sm"]
        if r["variant"] != 4 or k == 1:
            continue
        m = ncu[s]
        rows_per_smsp = r["batch"] * r["heads"] * -(-s // 4) / 132
        issued = m["smsp__inst_executed.sum"] / (r["batch"] * r["heads"] * s) * rows_per_smsp
        cycles = (r["ms"] * 1e-3 - launch_s) * m["sm__cycles_elapsed.avg.per_second"] \
            - turnover_cycles * rows_per_smsp / k
        out.append((s, k, issued / cycles, sc.issue_efficiency(s, 2, k)))
    return out


if __name__ == "__main__":
    main()
