"""The per-step figures of the project's mma.sync kernels, recomputed from the committed H200
measurements of iosim.measure.step_cycles (measurements/h200/step_cycles_h200*.json: fa2_fwd.cu
and fa1_fwd.cu with clock64 around their main loop; variants without the step's wait or its
copies) and the FA-2 loop benchmark, against the constants the model uses: the forward copy
issue per byte, the SM clock the counters run at, mma.sync's rate per clock by warps per SM
sub-partition."""
import json
import statistics
from pathlib import Path

import pytest

from iosim import load_gpu
from iosim.algorithms import fa2
from iosim.machine import MmaCost
from iosim.schedule import Mma, Pipeline

MEAS = Path(__file__).parents[1] / "measurements" / "h200"
RUNS = [json.loads((MEAS / f).read_text()) for f in ("step_cycles_h200.json", "step_cycles_h200_run2.json")]
H200 = load_gpu("h200-calibrated")


def _rows(run, label, variant):
    return [r for r in run["rows"] if r["label"] == label and r["variant"] == variant]


def test_forward_copy_issue_is_the_measured_cost_of_the_steps_copies():
    """real - nocopy, one CTA per SM, both tilings (32 KB of K and V per step), both runs."""
    extra = []
    for run in RUNS:
        for d in (128, 64):
            label = f"fa2 d{d} 1 CTA/SM one KV head"
            real, nocopy = _rows(run, label, "real")[0], _rows(run, label, "nocopy")[0]
            assert real["steps_per_cta"] == nocopy["steps_per_cta"] >= 64
            extra.append(real["cycles_per_step_median"] - nocopy["cycles_per_step_median"])
    assert len(extra) == 4
    assert fa2.FWD_COPY_ISSUE_CYCLES_PER_BYTE == pytest.approx(statistics.mean(extra) / 32768, rel=0.01)
    # the traces' gap method, a different measurement of the same thing, within 15%
    assert fa2.FWD_COPY_ISSUE_TRACE_CYCLES_PER_BYTE == pytest.approx(
        fa2.FWD_COPY_ISSUE_CYCLES_PER_BYTE, rel=0.15)


def test_the_steps_cp_async_wait_costs_nothing_measurable():
    """Without the step's cp.async.wait_group (copies and barrier kept) a step is as long."""
    for run in RUNS:
        for per_sm in (1, 2):
            label = f"fa2 d128 {per_sm} CTA/SM one KV head"
            real, nowait = _rows(run, label, "real")[0], _rows(run, label, "nowait")[0]
            assert nowait["cycles_per_step_median"] == pytest.approx(real["cycles_per_step_median"], rel=0.01)


def test_the_copies_of_two_resident_ctas_are_exposed_as_the_softmax_is():
    """At 2 CTAs per SM the step's copies add (real - nocopy) / 2 SM cycles per step: the
    fraction of the lone CTA's copy time that the other CTA's MMAs do not hide is 0.72-0.74,
    near the softmax's measured 0.764 that MmaCost.copy_hold transfers to the copies."""
    for run in RUNS:
        for d in (128, 64):
            one = [_rows(run, f"fa2 d{d} 1 CTA/SM one KV head", v)[0]["cycles_per_step_median"]
                   for v in ("real", "nocopy")]
            two = [_rows(run, f"fa2 d{d} 2 CTA/SM one KV head", v)[0]["cycles_per_step_median"]
                   for v in ("real", "nocopy")]
            f = (two[0] - two[1]) / 2 / (one[0] - one[1])
            assert f == pytest.approx(H200.mma_sync_exposed_fraction_two_warps, abs=0.06)


def test_the_sm_clock_the_counters_run_at_is_the_configs_counted_maximum():
    run = RUNS[1]
    clocks = [r["sm_clock_hz_median"] for r in run["rows"]]
    assert len(clocks) >= 15
    assert H200.sm_clock_counted_max_hz == pytest.approx(statistics.median(clocks), rel=0.005)
    assert all(abs(c / H200.sm_clock_counted_max_hz - 1) < 0.015 for c in clocks)
    # nvidia-smi read the boost clock meanwhile, >= 8% above what the SMs counted
    smi = [r["nvidia_smi"]["sm_clock_mhz_median"] * 1e6 for r in run["rows"] if r.get("nvidia_smi")]
    assert len(smi) == 3
    assert all(s > 1.08 * H200.sm_clock_counted_max_hz for s in smi)


def test_mma_sync_fractions_are_the_fa2_loops_gemm_rates_per_clock():
    per_clock = H200.tensor_flops_per_s_per_sm("fp16") / H200.clock_hz
    by_occupancy = {1: [], 2: []}
    for loop in RUNS[1]["fa2_loop"]:
        for r in loop["rows"]:
            if r["mode"] == "gemms_only":
                flop = 2 * 2 * 128 * r["block_kv"] * r["d"] * r["ctas_per_sm"]
                by_occupancy[r["ctas_per_sm"]].append(flop / r["cycles_per_step_per_cta"])
    assert len(by_occupancy[1]) == len(by_occupancy[2]) == 2
    assert H200.tensor_mma_sync_fraction_one_warp == pytest.approx(
        statistics.mean(by_occupancy[1]) / per_clock, abs=0.002)
    assert H200.tensor_mma_sync_fraction_two_warps == pytest.approx(
        statistics.mean(by_occupancy[2]) / per_clock, abs=0.002)


def test_an_mma_sync_ops_work_follows_the_warps_per_sub_partition():
    pipe = Pipeline(stages=2, mma_instruction="mma_sync")
    op = Mma("O+=PV", 128, 128, 64)          # A (P) from registers: the tensor time binds
    one = MmaCost(H200, "fp16", pipe, 128, 2, ctas_per_sm=1)      # 4 warps: 1 per sub-partition
    two = MmaCost(H200, "fp16", pipe, 128, 2, ctas_per_sm=2)      # 2 per sub-partition
    assert one.scale == pytest.approx(1 / H200.tensor_mma_sync_fraction_one_warp)
    assert two.scale == pytest.approx(1 / H200.tensor_mma_sync_fraction_two_warps)
    assert one.work(op) / two.work(op) == pytest.approx(
        H200.tensor_mma_sync_fraction_two_warps / H200.tensor_mma_sync_fraction_one_warp)
    # a config without the by-warps figures keeps the one fraction
    plain = H200.model_copy(update={"tensor_mma_sync_fraction_one_warp": None,
                                    "tensor_mma_sync_fraction_two_warps": None})
    assert MmaCost(plain, "fp16", pipe, 128, 2, ctas_per_sm=1).scale == pytest.approx(
        1 / H200.tensor_mma_sync_fraction)


def test_kernels_run_at_most_at_the_counted_clock():
    assert H200.sustained_clock_hz(0.0) == H200.sm_clock_counted_max_hz
    assert H200.sustained_clock_hz(1000.0) == H200.sm_clock_counted_max_hz   # light tensor load
    heavy = 774.2e12 / 1447.5e6                     # the cuBLAS GEMM: the power line below it
    assert H200.sustained_clock_hz(heavy) < 1.5e9
    plain = H200.model_copy(update={"sm_clock_counted_max_hz": None})
    assert plain.sustained_clock_hz(0.0) == H200.clock_hz


def test_the_timed_kernel_copies_find_their_anchors():
    from iosim.measure.step_cycles import timed_source
    fa2_src, fa1_src = timed_source("fa2_fwd.cu"), timed_source("fa1_fwd.cu")
    for src in (fa2_src, fa1_src):
        assert src.count("const long long t0_ = clock64();") == 1
        assert src.count("trace[3 * c_] = (u64)(t1_ - t0_);") == 1
    assert fa2_src.count("!IOSIM_NOCOPY && j + STAGES - 1 < j_stop") == 1
    assert fa2_src.count("if (!IOSIM_NOWAIT) cp_async_wait") == 1
