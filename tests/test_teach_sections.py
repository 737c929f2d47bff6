"""Every number of the lesson's sections 1, 2, 4, 5, 6, 7 against an independent computation:
the GPU YAML, closed forms written here, and analyze(...) counters."""
import math

import numpy as np
import pytest
import yaml

from iosim.analysis.analyze import analyze
from iosim.paths import GPU_CONFIG_DIR
from iosim.problem import AttentionProblem
from iosim.teach import build_lesson

N, D, H = 4096, 128, 32
PROBLEM = AttentionProblem(seq_q=N, head_dim=D, heads_q=H)


@pytest.fixture(scope="module")
def lesson():
    return {s.name: s for s in build_lesson(PROBLEM, "h100")}


def _numbers(x):
    """PyYAML reads '3.35e12' (no dot before e) as a string: make such figures numbers."""
    if isinstance(x, dict):
        return {k: _numbers(v) for k, v in x.items()}
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return x
    return x


@pytest.fixture(scope="module")
def yml():
    return _numbers(yaml.safe_load((GPU_CONFIG_DIR / "h100-sxm5-80gb.yaml").read_text()))


def counters(alg, direction="fwd", **tiling):
    return analyze(PROBLEM.with_(direction=direction), "h100", alg, model="roofline", **tiling).counters


# ---- 1. hierarchy ---------------------------------------------------------------------
def test_ridge_points_are_rate_over_bandwidth_from_the_yaml(lesson, yml):
    f = lesson["hierarchy"].facts
    rate = yml["tensor_flops_per_s"]["fp16"]   # roofline ridges at the datasheet peak
    assert f["ridge_dram"] == pytest.approx(rate / yml["dram_bandwidth_bytes_per_s"], rel=1e-12)
    assert f["ridge_l2"] == pytest.approx(rate / yml["l2_bandwidth_bytes_per_s"], rel=1e-12)
    smem_bw = (yml["shared_memory_bandwidth_bytes_per_clock_per_sm"] * yml["sm_count"]
               * yml["clock_hz"])
    assert f["ridge_smem"] == pytest.approx(rate / smem_bw, rel=1e-12)
    assert f"{rate / yml['dram_bandwidth_bytes_per_s']:.1f}" in lesson["hierarchy"].text


def test_hierarchy_sizes_come_from_the_yaml(lesson, yml):
    f = lesson["hierarchy"].facts
    assert f["sram_elements"] == int(yml["shared_memory_per_sm_bytes"]) // 2
    assert f["registers_per_sm_bytes"] == yml["registers_per_sm"] * 4
    assert f["exp_per_s"] == pytest.approx(yml["exp_per_clock_per_sm"] * yml["sm_count"] * yml["clock_hz"])
    caps = {n: c for n, c, _, _ in f["levels"]}
    assert caps["L2 cache"] == yml["l2_capacity_bytes"]
    assert caps["DRAM (HBM)"] == yml["dram_capacity_bytes"]
    assert f"M = {yml['shared_memory_per_sm_bytes'] // 2:,} elements" in lesson["hierarchy"].text


# ---- 2. standard attention -------------------------------------------------------------
def test_standard_round_trips_equal_the_schedule_counters_and_closed_form(lesson):
    f = lesson["standard"].facts
    c = counters("standard")
    nn = N * N * 2 * H                      # one N×N fp16 matrix over all heads
    for t, w, r in f["trips"]:
        assert w == c.smem_to_l2_bytes_by_tensor[t] == nn
        assert r == c.l2_to_smem_bytes_by_tensor[t] == nn
    assert f["round_trip_bytes"] == 4 * nn


def test_standard_section_quotes_the_times_iosim_run_prints(lesson):
    from click.testing import CliRunner
    import json as _json
    from iosim.cli import main
    f = lesson["standard"].facts
    for algo, key in (("standard", "time_s"), ("fa2", "fa2_time_s")):
        args = ["run", "--algo", algo, "--seq", str(PROBLEM.seq_q), "--heads",
                str(PROBLEM.heads_q), "--head-dim", str(PROBLEM.head_dim), "--format", "json"]
        run = _json.loads(CliRunner().invoke(main, args).stdout)
        assert f[key] == run["predicted_time_s"]
        assert f[key.replace("time_s", "bound_by")] == run["bound_by"]


def test_standard_intensity_is_flops_over_dram_bytes_and_below_ridge(lesson):
    f = lesson["standard"].facts
    a = analyze(PROBLEM, "h100", "standard", model="roofline")
    flops = 4 * N * N * D * H
    assert f["flops"] == a.counters.mma_flops == flops
    assert f["dram_bytes"] == a.dram_read_bytes + a.dram_write_bytes
    assert f["intensity"] == pytest.approx(flops / f["dram_bytes"])
    # closed form: Q, K, V read, O written, S, P written and read once each (fp16), LSE none
    assert f["dram_bytes"] == 2 * H * (4 * N * D + 4 * N * N)
    assert f["intensity"] < f["ridge"]
    assert f["intensity_limit"] == D / 2
    assert f"{f['intensity']:.1f} FLOP per DRAM byte" in lesson["standard"].text


# ---- 4. tiling -----------------------------------------------------------------------
def test_fa1_blocks_from_m_follow_the_paper(lesson, yml):
    f = lesson["tiling"].facts
    M = yml["shared_memory_per_block_bytes"] // 2
    assert f["M_block"] == M
    assert f["paper_bc"] == -(-M // (4 * D)) == 227
    assert f["paper_br"] == min(227, D)
    assert (f["fa1"]["br"], f["fa1"]["bc"]) == (128, 224)      # rounded down to multiples of 16


def test_tiling_and_lower_bound_sections_use_the_same_m(lesson, yml):
    M = yml["shared_memory_per_sm_bytes"] // 2
    assert lesson["tiling"].facts["M"] == lesson["lower-bound"].facts["M"] == M
    assert f"M = {M:,}" in lesson["tiling"].text and f"M = {M:,}" in lesson["lower-bound"].text


@pytest.mark.parametrize("alg", ["fa1", "fa2"])
def test_block_counts_and_pairs_are_closed_forms(lesson, alg):
    a = lesson["tiling"].facts[alg]
    br, bc = a["br"], a["bc"]
    assert a["T_r"] == math.ceil(N / br)
    assert a["T_c"] == math.ceil(N / bc)
    assert a["pairs"] == a["T_r"] * a["T_c"]


def test_fa1_numbers_at_h100_defaults(lesson):
    a = lesson["tiling"].facts["fa1"]
    assert (a["T_r"], a["T_c"], a["pairs"]) == (32, 19, 608)
    assert a["pair_bytes"] == 3 * 128 * D * 2 + 4 * 128 * 4
    assert a["formula_elements"] == 2 * N * D + 3 * N * D * 19


def test_fa1_counted_bytes_equal_analyze_and_formula_plus_statistics(lesson):
    a = lesson["tiling"].facts["fa1"]
    c = counters("fa1")
    assert a["counted_bytes"] == c.l2_bytes
    # Theorem 2 elements + init stores (O: Nd, l, m: 2N fp32) + l, m in and out per pair
    per_head = (2 * N * D + 3 * N * D * a["T_c"]) * 2 + N * D * 2 + 2 * N * 4 + 4 * N * 4 * a["T_c"]
    assert c.l2_bytes == per_head * H


def test_fa2_counted_bytes_equal_analyze_and_formula_plus_lse(lesson):
    a = lesson["tiling"].facts["fa2"]
    c = counters("fa2")
    assert a["counted_bytes"] == c.l2_bytes
    assert c.l2_bytes == ((2 * N * D + 2 * N * D * a["T_r"]) * 2 + N * 4) * H
    assert a["formula_bytes_all_heads"] == (2 * N * D + 2 * N * D * a["T_r"]) * 2 * H


def test_causal_pairs_count_unmasked_blocks_by_brute_force():
    from iosim.algorithms.common import block_kind
    from iosim.teach.tiling import block_pairs
    p = AttentionProblem(seq_q=1000, head_dim=64, causal=True)
    for br, bc in ((128, 64), (64, 112)):
        brute = sum(block_kind(p, i, j, br, bc) != "skip"
                    for i in range(math.ceil(1000 / br)) for j in range(math.ceil(1000 / bc)))
        assert block_pairs(p, br, bc) == brute


# ---- 5. lower bound and the M sweep ----------------------------------------------------
def test_lower_bound_numbers_are_closed_forms(lesson, yml):
    f = lesson["lower-bound"].facts
    M = yml["shared_memory_per_sm_bytes"] // 2
    assert f["M"] == M and f["d2"] == D * D and f["Nd"] == N * D
    assert f["fa1_range_ok"] == (D <= M <= N * D)
    assert f["n2d2_over_m_elements"] == pytest.approx(N * N * D * D / M)
    assert f["n2d_over_sqrtm_elements"] == pytest.approx(N * N * D / math.sqrt(M))
    assert f["saha_ye_bytes"] == int(min(N * N * D / math.sqrt(M), N * N * D * D / M) * 2 * H)
    assert f["regime"].startswith("large")


def test_sweep_fa2_bytes_are_the_fa2_closed_form(lesson):
    s = lesson["lower-bound"].facts["sweep"]
    for r in s["rows"]:
        br = r["M"] // (4 * D)
        if br == 0:
            assert r["fa2_bytes"] is None
            continue
        tr = math.ceil(N / br)
        assert r["fa2_br"] == br
        assert r["fa2_bytes"] == (2 * N * D + 2 * N * D * tr) * 2 + 4 * N


def test_sweep_square_bytes_match_analyze_on_a_gpu_with_m_elements(lesson):
    from iosim.hardware import load_gpu
    s = lesson["lower-bound"].facts["sweep"]
    p1 = PROBLEM.with_(heads_q=1, heads_kv=1)
    g = load_gpu("h100")
    for r in s["rows"][::3]:
        gm = g.with_(shared_memory_per_block_bytes=r["M"] * 2,
                     shared_memory_per_sm_bytes=max(r["M"] * 2, g.shared_memory_per_sm_bytes))
        a = analyze(p1, gm, "square", model="roofline")
        assert a.counters.l2_bytes == r["square_bytes"]
        assert a.tiling["fwd"].block_q == r["square_side"] <= math.isqrt(r["M"] // 3)


def test_sweep_slopes_are_minus_one_and_minus_half(lesson):
    s = lesson["lower-bound"].facts["sweep"]
    assert s["slope_fa2_large"] == pytest.approx(-1.0, abs=0.05)
    assert s["slope_square_small"] == pytest.approx(-0.5, abs=0.05)
    # and each algorithm's slope in the other regime is the other exponent
    assert s["slope_square_large"] == pytest.approx(-0.5, abs=0.05)
    assert s["slope_fa2_small"] == pytest.approx(-1.0, abs=0.05)
    # independent fit of the large-cache points
    rows = [r for r in s["rows"] if D * D <= r["M"] <= N * D // 8]
    x, y = np.log([r["M"] for r in rows]), np.log([r["fa2_bytes"] for r in rows])
    assert s["slope_fa2_large"] == pytest.approx(np.polyfit(x, y, 1)[0], abs=1e-12)


def test_sweep_each_algorithm_wins_its_regime(lesson):
    s = lesson["lower-bound"].facts["sweep"]
    for r in s["rows"]:
        if r["M"] <= D * D // 4:
            assert r["square_bytes"] < r["fa2_bytes"]
        if r["M"] >= 4 * D * D:
            assert r["fa2_bytes"] < r["square_bytes"]


# ---- 6. backward -----------------------------------------------------------------------
def test_backward_extra_flops_are_one_more_qk_per_head(lesson):
    f = lesson["backward"].facts
    cs, cf = counters("standard", "fwd+bwd"), counters("fa2", "fwd+bwd")
    assert f["extra_flops"] == cf.mma_flops - cs.mma_flops == 2 * N * N * D * H
    assert f["recompute_flops_closed_form"] == 2 * N * N * D * H
    assert f["saved_memory_bytes"] == N * N * 2 * H
    assert f["stats_memory_bytes"] == N * 4 * H
    assert f["n2_traffic_total"] == sum(
        cs.l2_to_smem_bytes_by_tensor.get(t, 0) + cs.smem_to_l2_bytes_by_tensor.get(t, 0)
        for t in ("S", "P", "dP", "dS"))


# ---- 7. exercises ----------------------------------------------------------------------
def test_exercise_answers(lesson, yml):
    ex = lesson["exercises"].facts["exercises"]
    assert ex[0]["numbers"]["ridge"] == pytest.approx(
        yml["tensor_flops_per_s"]["fp16"]   # roofline ridges at the datasheet peak
        / yml["dram_bandwidth_bytes_per_s"])
    assert ex[1]["numbers"]["round_trip_2N"] == 4 * 2 * (2 * N) ** 2 * H
    assert ex[1]["numbers"]["factor"] == 4
    e = math.exp
    n3 = ex[2]["numbers"]
    assert n3["m"] == 5 and n3["alpha"] == pytest.approx(e(-1))
    w = np.exp(np.array([1.0, 3, 4, 2, 5]) - 5)
    assert n3["l"] == pytest.approx(w.sum(), rel=1e-14)
    assert n3["out"] == pytest.approx(float(w @ [1, 2, 3, 4, 0]) / w.sum(), rel=1e-14)
    M = yml["shared_memory_per_block_bytes"] // 2
    n4 = ex[3]["numbers"]
    assert n4["bc"] == -(-(M // 2) // (4 * D)) and n4["T_c"] == math.ceil(N / n4["bc"])
    assert n4["theorem2"] == 2 * N * D + 3 * N * D * n4["T_c"]
    assert n4["counted"] == counters("fa1", block_q=128, block_kv=n4["bc_half"]).l2_bytes
    assert ex[4]["numbers"]["d_crossover"] == pytest.approx(math.sqrt(yml["shared_memory_per_sm_bytes"] // 2))
    assert ex[5]["numbers"]["extra"] == 2 * N * N * D * H
    for x in ex:
        assert x["cmd"].startswith("iosim ")
