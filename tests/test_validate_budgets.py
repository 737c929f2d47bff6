"""`iosim validate`'s budgets written as numbers, not read back from the code's own constant:

- project kernels' L2→SM bytes within 2% of Nsight Compute's on every row;
- project kernels' DRAM bytes within 10% on every row;
- issue 12: project kernels' time MAPE ≤ 6% with no fitted factor (the simulator's time
  against the measured GPU time). Not met yet (13.3% on the committed dataset): marked xfail
  until the timing model predicts it; strict, so the marker must go when it passes.

Errors are computed here from each row's predicted and measured figures (pred / meas − 1).
"""
import pytest

from iosim.analysis.validate import Row, check_budgets, summarize


def _row(l2_pred=100.0, dram_pred=100.0, impl="iosim", time_pred=1.0, time_meas=1.0):
    return Row(id="x", impl=impl, algorithm="fa2", direction="fwd", train=True,
               measured_time_s=time_meas, event_time_s=time_meas, predicted_time_s=time_pred,
               calibrated_time_s=time_pred,
               measured_l2_to_sm_bytes=100.0, predicted_l2_to_sm_bytes=l2_pred,
               measured_dram_bytes=100.0, predicted_dram_bytes=dram_pred)


def _failures(**row):
    return check_budgets(summarize([_row(**row)]))


# ---- the budgets themselves ---------------------------------------------------------------
def test_l2_to_sm_bytes_budget_is_two_percent():
    assert _failures(l2_pred=101.9) == []
    assert _failures(l2_pred=98.1) == []
    assert _failures(l2_pred=102.1) == ["project L2→SM bytes max error 2.1% exceeds 2%"]
    assert _failures(l2_pred=97.9) == ["project L2→SM bytes max error 2.1% exceeds 2%"]


def test_dram_bytes_budget_is_ten_percent():
    assert _failures(dram_pred=109.9) == []
    assert _failures(dram_pred=90.1) == []
    assert _failures(dram_pred=110.5) == ["project DRAM bytes max error 10.5% exceeds 10%"]
    assert _failures(dram_pred=89.5) == ["project DRAM bytes max error 10.5% exceeds 10%"]


def test_byte_budgets_bind_project_rows_not_external_ones():
    assert _failures(l2_pred=150.0, dram_pred=150.0, impl="torch_flash") == []


# ---- the committed H200 dataset -------------------------------------------------------------
def _project(rows):
    return [r for r in rows if r.impl == "iosim"]


def test_every_project_row_has_l2_to_sm_bytes_within_two_percent(validation_dataset):
    rows = _project(validation_dataset[0])
    errs = {r.id: r.predicted_l2_to_sm_bytes / r.measured_l2_to_sm_bytes - 1 for r in rows
            if r.measured_l2_to_sm_bytes}
    assert len(errs) >= 20
    assert {k: v for k, v in errs.items() if abs(v) > 0.02} == {}


def test_every_project_row_has_dram_bytes_within_ten_percent(validation_dataset):
    rows = _project(validation_dataset[0])
    errs = {r.id: r.predicted_dram_bytes / r.measured_dram_bytes - 1 for r in rows
            if r.measured_dram_bytes}
    assert len(errs) >= 20
    assert {k: v for k, v in errs.items() if abs(v) > 0.10} == {}


@pytest.mark.xfail(strict=True, reason="issue 12: uncalibrated time model")
def test_project_time_mape_without_fitted_factors_is_at_most_six_percent(validation_dataset):
    rows = _project(validation_dataset[0])
    errs = [abs(r.predicted_time_s / r.measured_time_s - 1) for r in rows]
    assert len(errs) >= 20
    assert sum(errs) / len(errs) <= 0.06


# ---- the error definitions the budgets are judged by -----------------------------------------
def test_uncalibrated_time_error_is_the_simulated_over_the_measured_time():
    rows = [_row(time_pred=2.2, time_meas=2.0), _row(time_pred=1.6, time_meas=2.0)]
    assert [r.raw_time_err for r in rows] == [pytest.approx(0.1), pytest.approx(-0.2)]
    s = summarize(rows)["project"]["time_uncalibrated"]
    assert (s["n"], s["mape"], s["max_abs_err"]) == (2, pytest.approx(0.15), pytest.approx(0.2))
    # no external rows: nothing to average
    assert summarize(rows)["external"]["time"] == {"n": 0, "mape": None, "max_abs_err": None}


def test_fitted_factor_is_measured_over_simulated_time():
    from iosim.analysis.validate import fit_efficiency
    rows = [_row(time_pred=4.0)]            # measured 1 s
    assert fit_efficiency(rows) == {("iosim", "fa2", "fwd"): pytest.approx(0.25)}
    assert rows[0].calibrated_time_s == pytest.approx(1.0)
