"""A held-out sweep's first prediction against its measurement: the predictions committed
before the device call (scripts/sweep_predictions.py's output, with and without a mechanism),
set beside what `iosim validate` scores for the measured rows.

    python scripts/holdout_first_prediction.py SWEEP.yaml MEASURED.csv WITHOUT.txt
"""
import re
import sys
from pathlib import Path

from iosim.analysis.validate import validate_dataset


def main(sweep: str, measured: str, without_path: str) -> None:
    rows, _ = validate_dataset(sweep, measured)
    without = {}
    for line in open(without_path):
        m = re.match(r"(\S+)\s+predicted\s+([\d.]+) ms", line)
        if m:
            without[m.group(1)] = float(m.group(2)) * 1e-3
    print(f"{'row':58s} {'GPU ms':>7s} {'sim ms':>7s} {'time':>7s} {'without':>8s} {'L2->SM':>7s} {'DRAM':>6s}")
    errs, errs0 = [], []
    for r in rows:
        e0 = without[r.id] / r.measured_time_s - 1
        errs.append(abs(r.time_err))
        errs0.append(abs(e0))
        print(f"{r.id:58s} {r.measured_time_s * 1e3:7.3f} {r.predicted_time_s * 1e3:7.3f} "
              f"{r.time_err * 100:+6.1f}% {e0 * 100:+7.1f}% {r.l2_err * 100:+6.1f}% {r.dram_err * 100:+5.1f}%")
    print(f"time MAPE {sum(errs) / len(errs) * 100:.1f}% max {max(errs) * 100:.1f}%; without "
          f"(the model without the mechanism tested, {Path(without_path).name}): MAPE {sum(errs0) / len(errs0) * 100:.1f}% max {max(errs0) * 100:.1f}% (n {len(errs)})")


if __name__ == "__main__":
    main(*sys.argv[1:4])
