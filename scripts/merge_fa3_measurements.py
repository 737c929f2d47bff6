"""Replace rows of measured_h200_fa3.csv (+ _kernels.csv) by those of a later partial run, by id.

    python3 scripts/merge_fa3_measurements.py NEW.csv NEW_kernels.csv

Used once: after the fa3 schedule moved to 3 stages at d = 128, only the d = 128 configurations
of sweep_fa3.yaml were measured again (device run 4: `IOSIM_SWEEP=<sweep_fa3.yaml's d = 128
configs> python3 -m iosim.measure.sweep time ...` then `... sweep ncu ...`); the d = 64 rows
(tiling unchanged) are those of run 2. Rows are copied verbatim; only `config` is set to the
configuration's position in sweep_fa3.yaml (the partial run numbered its own)."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import yaml

VAL = Path(__file__).resolve().parents[1] / "iosim" / "data" / "validation"


def read(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        return r.fieldnames, list(r)


def main(new_csv: str, new_kernels: str) -> int:
    order = {c["id"]: k for k, c in enumerate(yaml.safe_load((VAL / "sweep_fa3.yaml").read_text())["configs"])}
    for old_path, new_path in ((VAL / "measured_h200_fa3.csv", new_csv),
                               (VAL / "measured_h200_fa3_kernels.csv", new_kernels)):
        fields, old = read(old_path)
        _, new = read(new_path)
        ids = {r["id"] for r in new}
        if "config" in fields:
            for r in new:
                r["config"] = str(order[r["id"]])
        rows = [r for r in old if r["id"] not in ids] + new
        rows.sort(key=lambda r: (order[r["id"]], int(r.get("kernel_index", 0) or 0)))
        with open(old_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
        print(f"{old_path.name}: {len(ids)} ids replaced, {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
