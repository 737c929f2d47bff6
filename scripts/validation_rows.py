"""Per-row figures of one sweep/measurements pair, as `iosim validate` scores them: measured
and predicted time, and the time, L2→SM and DRAM errors. For a first prediction of new rows
(before any model change) and for before/after comparisons.

    python scripts/validation_rows.py SWEEP.yaml MEASURED.csv
"""
import sys

from iosim.analysis.validate import validate_dataset


def main(sweep: str, measured: str) -> None:
    rows, _ = validate_dataset(sweep, measured)
    for r in rows:
        l2 = r.l2_err * 100 if r.l2_err is not None else float("nan")
        dram = (r.predicted_dram_bytes / r.measured_dram_bytes - 1) * 100
        print(f"{r.id[:58]:58s} meas {r.measured_time_s * 1e3:7.3f} sim {r.predicted_time_s * 1e3:7.3f} "
              f"time {r.time_err * 100:+6.1f}% l2 {l2:+6.1f}% dram {dram:+6.1f}%")


if __name__ == "__main__":
    main(*sys.argv[1:3])
