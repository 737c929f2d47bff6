"""The model's predictions for every configuration of a sweep YAML before it is measured (a
held-out set's first prediction, to compare with the measurement afterwards), as `iosim
validate` scores them before any kernel has run: iosim.analysis.validate.predict_rows, given a
placeholder measurement per configuration (only its presence is read; the errors it would give
are not printed) and no kernel names, so standard attention's GEMMs take the rule's tiles
(once measured, `iosim validate` takes the kernels the names state: validate.gemm_tiling).

    python scripts/sweep_predictions.py SWEEP.yaml [--without FIELD,FIELD]

--without: the sweep's GPU config with those figures removed (not modelled), e.g. what a
mechanism changes: --without dram_partial_sector_write_cost_bytes,dram_line_misaligned_stream_factor
--without-fallback: cuBLAS's Ampere fallback not modelled (standard attention's GEMMs as the
Hopper kernels at every pitch; iosim/algorithms/cublas_fallback.py)
"""
import sys
import tempfile
from pathlib import Path

import yaml

from iosim.analysis.validate import predict_rows
from iosim.formats import load_sweep
from iosim.hardware import _resolve as gpu_config_path  # a short name or path -> its YAML


def config_without(name: str, fields: list, directory: str) -> str:
    """A copy of GPU config `name` without `fields` (and their sources), as a YAML path."""
    d = yaml.safe_load(Path(gpu_config_path(name)).read_text())
    for f in fields:
        d.pop(f)
        d.get("sources", {}).pop(f, None)
    out = Path(directory) / f"{name}-without.yaml"
    out.write_text(yaml.safe_dump(d))
    return str(out)


def main(path: str, without: list) -> None:
    sweep = load_sweep(Path(path))
    placeholder = {c["id"]: {"time_s": "1"} for c in sweep["configs"]}
    with tempfile.TemporaryDirectory() as tmp:
        gpu = config_without(sweep.get("gpu", "h200-calibrated"), without, tmp) if without else None
        rows = predict_rows(sweep, placeholder, gpu)
    for r in rows:
        print(f"{r.id:58s} predicted {r.predicted_time_s * 1e3:8.4f} ms  "
              f"L2->SM {r.predicted_l2_to_sm_bytes / 1e6:9.1f} MB  "
              f"DRAM {r.predicted_dram_bytes / 1e6:9.1f} MB")


if __name__ == "__main__":
    args = sys.argv[1:]
    fields = args[args.index("--without") + 1].split(",") if "--without" in args else []
    if "--without-fallback" in args:
        from iosim.algorithms import cublas_fallback
        cublas_fallback.alignment = lambda problem, gpu: 0
    main(args[0], fields)
