"""Per-kernel time errors of `iosim validate --format json` files: for every row whose
measurement lists its kernels (iosim/data/validation/measured_h200*_kernels.csv, Nsight
Compute's gpu__time_duration per kernel) with as many kernels as the model's breakdown, the
model's kernel time against the measured one, grouped by kernel name; mean |err|, mean
signed error, max |err| per file (before -> after).

    python scripts/validation_kernels.py [--algorithm standard] A.json [B.json ...]
"""
from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "iosim/data/validation"


def measured_kernels() -> dict:
    out: dict = defaultdict(list)
    for f in sorted(DATA.glob("measured_h200*_kernels.csv")):
        for r in csv.DictReader(open(f)):
            out[r["id"]].append(float(r["ncu_time_s"]))
    return out


def kernel_errors(path: str, algorithm: str | None) -> dict:
    meas = measured_kernels()
    out: dict = defaultdict(list)
    for row in json.load(open(path))["rows"]:
        if algorithm and row["algorithm"] != algorithm:
            continue
        ms = meas.get(row["id"])
        ks = (row.get("breakdown") or {}).get("kernels") or []
        if not ms or len(ms) != len(ks):
            continue
        for k, m in zip(ks, ms):
            out[k["name"]].append(k["time_s"] / m - 1)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--algorithm", default="standard")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    for path in a.files:
        print(path)
        for name, e in sorted(kernel_errors(path, a.algorithm).items()):
            print(f"  {name:28s} rows {len(e):3d}  mean |err| {sum(map(abs, e)) / len(e):6.1%}  "
                  f"mean {sum(e) / len(e):+6.1%}  max {max(map(abs, e)):6.1%}")


if __name__ == "__main__":
    main()
