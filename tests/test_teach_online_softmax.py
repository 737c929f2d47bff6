"""The online-softmax section and `iosim teach online-softmax`, against hand-computed values
and NumPy's direct softmax."""
import math

import numpy as np
import pytest
from click.testing import CliRunner

from iosim.cli import main
from iosim.errors import IosimError
from iosim.teach.online_softmax import (direct_softmax, float_experiment, online_softmax,
                                        parse_floats, walkthrough)


def test_issue_example_matches_hand_computed_recurrence():
    # scores 1,3,4,2; values 1,2,3,4; blocks of 2
    w = walkthrough([1, 3, 4, 2], [1, 2, 3, 4], 2)
    s1, s2 = w["steps"]
    e = math.exp
    # block 1: m = 3, α = e^(−∞) = 0, ℓ = e^(1−3) + e^0, o = 1·e^(−2) + 2·1
    assert s1["m"] == 3 and s1["alpha"] == 0
    assert s1["l"] == pytest.approx(e(-2) + 1, rel=1e-15)
    assert s1["o"] == pytest.approx(e(-2) + 2, rel=1e-15)
    assert s1["out"] == pytest.approx((e(-2) + 2) / (e(-2) + 1), rel=1e-15)
    # block 2: m = 4, α = e^(3−4), ℓ = α·ℓ₁ + e^0 + e^(−2), o = α·o₁ + 3 + 4e^(−2)
    assert s2["m"] == 4
    assert s2["alpha"] == pytest.approx(e(-1), rel=1e-15)
    l2 = e(-1) * (e(-2) + 1) + 1 + e(-2)
    o2 = e(-1) * (e(-2) + 2) + 3 + 4 * e(-2)
    assert s2["l"] == pytest.approx(l2, rel=1e-14)
    assert s2["o"] == pytest.approx(o2, rel=1e-14)
    assert w["tiled"] == pytest.approx(o2 / l2, rel=1e-14)
    assert w["tiled"] == pytest.approx(2.786144294, abs=1e-9)


def test_issue_example_direct_softmax_is_numpy_softmax():
    w = walkthrough([1, 3, 4, 2], [1, 2, 3, 4], 2)
    s = np.array([1.0, 3, 4, 2])
    p = np.exp(s) / np.exp(s).sum()
    assert np.allclose(w["probabilities"], p, rtol=1e-15)
    assert w["direct"] == pytest.approx(float(p @ [1, 2, 3, 4]), rel=1e-15)
    assert w["abs_diff"] < 1e-15


@pytest.mark.parametrize("block", [1, 3, 7, 64, 1000])
def test_tiled_output_equals_numpy_softmax_on_random_rows(block):
    rng = np.random.default_rng(1)
    s = rng.standard_normal((5, 300)) * 3
    v = rng.standard_normal((300, 8))
    ref = (np.exp(s - s.max(1, keepdims=True)) / np.exp(s - s.max(1, keepdims=True)).sum(1, keepdims=True)) @ v
    out = online_softmax(s, v, block)[-1].out
    assert np.allclose(out, ref, rtol=0, atol=1e-13)


def test_running_max_and_sum_after_each_block_are_prefix_statistics():
    rng = np.random.default_rng(2)
    s = rng.standard_normal(20)
    v = rng.standard_normal(20)
    for st in online_softmax(s, v, 6):
        prefix = s[:st.stop]
        assert st.m[0] == prefix.max()
        assert st.l[0] == pytest.approx(np.exp(prefix - prefix.max()).sum(), rel=1e-14)
        assert st.out[0, 0] == pytest.approx(
            (np.exp(prefix - prefix.max()) @ v[:st.stop]) / np.exp(prefix - prefix.max()).sum(), rel=1e-13)


def test_float64_tiled_and_direct_agree_to_rounding():
    x = float_experiment(n=2048, dv=64, block=64, seed=0, rows=16)
    assert x["float64"]["max_rel_diff"] < 50 * np.finfo(np.float64).eps


def test_float32_tiled_and_direct_differ_only_at_associativity_level():
    x = float_experiment(n=2048, dv=64, block=64, seed=0, rows=16)
    f32 = x["float32"]
    assert f32["max_abs_diff"] > 0                        # not bitwise identical
    assert f32["identical_fraction"] < 1
    assert 1e-8 < f32["max_rel_diff"] < 50 * np.finfo(np.float32).eps   # ~1e-7 relative
    # the difference is bounded by the two results' own float32 errors
    assert f32["max_rel_diff"] <= f32["tiled_err_vs_f64"] + f32["direct_err_vs_f64"] + 1e-12


def test_float_experiment_diff_recomputed_independently():
    x = float_experiment(n=512, dv=16, block=32, seed=3, rows=4)
    rng = np.random.default_rng(3)
    s = (rng.standard_normal((4, 512)) * 2.0).astype(np.float32)
    v = rng.standard_normal((512, 16)).astype(np.float32)
    _, direct = direct_softmax(s, v, np.float32)
    tiled = online_softmax(s, v, 32, np.float32)[-1].out
    assert x["float32"]["max_abs_diff"] == float(np.abs(tiled.astype(np.float64) - direct).max())


def test_cli_online_softmax_prints_issue_example():
    r = CliRunner().invoke(main, ["teach", "online-softmax", "--scores", "1,3,4,2",
                                  "--values", "1,2,3,4", "--block", "2"])
    assert r.exit_code == 0, r.output
    assert "0.367879" in r.output            # α of block 2 = e^−1
    assert "1.13534" in r.output and "1.553" in r.output
    assert "2.13534" in r.output and "4.32689" in r.output
    assert r.output.count("2.786144294") == 2   # tiled and direct, side by side


@pytest.mark.parametrize("args,fragment", [
    (["--scores", "1,a", "--values", "1,2"], "comma-separated list of numbers"),
    (["--scores", "1,2,3", "--values", "1,2"], "give one value per score"),
    (["--scores", "1,,2", "--values", "1,2,3"], "comma-separated"),
    (["--scores", "1,inf", "--values", "1,2"], "finite"),
    (["--block", "0"], "--block must be a positive integer"),
    (["--block", "-3"], "--block must be a positive integer"),
])
def test_cli_online_softmax_bad_input_exits_2_with_one_line(args, fragment):
    r = CliRunner().invoke(main, ["teach", "online-softmax", *args])
    assert r.exit_code == 2
    assert fragment in r.output
    assert "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_parse_floats_rejects_empty():
    with pytest.raises(IosimError):
        parse_floats("", "scores")
