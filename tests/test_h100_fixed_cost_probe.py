"""The H100 fixed-cost probe timed by Nsight Compute (measurements/h100/cta_fixed_cost/
cta_fixed_cost_ncu.json, from cta_fixed_cost_ncu.csv by scripts/cta_fixed_cost_ncu_json.py):
what the README and docs/validation.md say of it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "measurements" / "h100" / "cta_fixed_cost"


def _rows():
    return json.loads((PROBE / "cta_fixed_cost_ncu.json").read_text())


def test_the_json_is_the_second_launch_of_each_shape_in_the_raw_page():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "cta_fixed_cost_ncu_json.py"),
                          str(PROBE / "cta_fixed_cost_ncu.csv"),
                          str(PROBE / "cta_fixed_cost_events.json")],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert json.loads(out) == _rows()


def test_kernel_durations_are_the_events_within_minus_3_to_plus_6_percent():
    errs = [r["time_s"] / r["event_time_s"] - 1 for r in _rows()]
    assert len(errs) == 24
    assert -0.035 < min(errs) and max(errs) < 0.055


def test_the_heaviest_kernels_run_on_the_h200s_power_line():
    """clock = 2246 MHz - 1 MHz per TFLOP/s (power_capped_clock, measured on the H200) within
    5 MHz at FA-3 d 128's two longest loops; every launch at or below the H200's counted 1.79 GHz."""
    for r in _rows():
        tflops = 4 * r["batch"] * r["heads"] * r["seq_q"] * r["seq_kv"] * r["d"] / r["time_s"] / 1e12
        assert r["sm_clock_hz"] < 1.79e9
        if tflops > 550:
            assert r["sm_clock_hz"] / 1e6 == pytest.approx(2246 - tflops, abs=5)
