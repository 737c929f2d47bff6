"""The model's predictions for every configuration of a sweep YAML before it is measured (a
held-out set's first prediction, to compare with the measurement afterwards), exactly as
`iosim validate` will score them: iosim.analysis.validate.predict_rows, given a placeholder
measurement per configuration (only its presence is read; the errors it would give are not
printed).

    python scripts/sweep_predictions.py SWEEP.yaml
"""
import sys
from pathlib import Path

from iosim.analysis.validate import predict_rows
from iosim.formats import load_sweep


def main(path: str) -> None:
    sweep = load_sweep(Path(path))
    placeholder = {c["id"]: {"time_s": "1"} for c in sweep["configs"]}
    for r in predict_rows(sweep, placeholder):
        print(f"{r.id:58s} predicted {r.predicted_time_s * 1e3:8.4f} ms  "
              f"L2->SM {r.predicted_l2_to_sm_bytes / 1e6:9.1f} MB  "
              f"DRAM {r.predicted_dram_bytes / 1e6:9.1f} MB")


if __name__ == "__main__":
    main(sys.argv[1])
