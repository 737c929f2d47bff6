"""The `h100` config (datasheet figures, the H200's measured SM figures) against kernel times
measured on an H100 SXM (measurements/h100/copy_wavefronts/copy_times_h100.json: CUDA events,
torch's flash forward and the project's fa2_fwd.cu at flash-attention's tiles, shapes of no
dataset): a GPU other than the one the model's figures were measured on."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from copy_wavefronts_table import predicted_s as _predict, timed_rows as _rows  # noqa: E402


def test_the_h100_config_predicts_the_h100_kernels_within_six_percent():
    rows = _rows()
    assert len(rows) == 8                  # torch and fa2_fwd at d 64 and 128, two shapes each
    errs = [_predict(r) / r["time_s"] - 1 for r in rows]
    assert max(abs(e) for e in errs) < 0.06, errs
    assert sum(abs(e) for e in errs) / len(errs) < 0.04


@pytest.mark.xfail(strict=True, reason="the model charges flash-attention's forward the project "
                   "kernel's softmax and copy costs; the H100 runs it 10% faster at d 128 "
                   "(measurements/h100/copy_wavefronts/README.md)")
def test_flash_attention_is_faster_than_the_project_kernel_at_d128_in_the_model_too():
    by = {(r["kernel"], r["n"]): r for r in _rows() if r["d"] == 128}
    for n in (2048, 4096):
        measured = by["fa2", n]["time_s"] / by["torch", n]["time_s"]
        model = _predict(by["fa2", n]) / _predict(by["torch", n])
        assert model == pytest.approx(measured, rel=0.03)
