"""Issue 12's mechanisms and switches: ablations, issue-slot sharing, the clock under load,
the published dataset's provenance."""
import csv

import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.ablation import ablate
from iosim.machine import ISSUE_LANES_PER_CLOCK_PER_SM, MmaCost
from iosim.paths import VALIDATION_DIR
from iosim.schedule import Pipeline

H200 = load_gpu("h200-calibrated")


def _fa3_schedule():
    return build_schedule(AttentionProblem(seq_q=1024, heads_q=2), "h100", "fa3")


def test_pingpong_off_runs_the_consumers_in_lockstep_as_one():
    s = ablate(_fa3_schedule(), pingpong=False)
    p = s.kernels[0].pipeline
    assert p.consumer_warpgroups == 1 and p.warp_specialized and p.intra_overlap


def test_warp_specialization_off_also_drops_the_intra_warpgroup_overlap():
    p = ablate(_fa3_schedule(), warp_specialization=False).kernels[0].pipeline
    assert (p.warp_specialized, p.intra_overlap, p.consumer_warpgroups) == (False, False, 1)


def test_ablation_keeps_programs_bytes_and_flops():
    s = _fa3_schedule()
    a = ablate(s, intra_overlap=False)
    assert a.totals().mma_flops == s.totals().mma_flops
    assert a.totals().bytes_loaded == s.totals().bytes_loaded
    assert a.kernels[0].pipeline.intra_overlap is False


def test_no_ablation_returns_the_schedule_itself():
    s = _fa3_schedule()
    assert ablate(s) is s


def test_analysis_json_records_the_ablation():
    from iosim.analysis.analyze import analyze
    a = analyze(AttentionProblem(seq_q=512, heads_q=1), "h100", "fa3",
                ablation={"pingpong": False})
    d = a.to_dict()
    assert d["ablation"] == {"pingpong": False}
    assert d["kernels"][0]["pipeline"]["consumer_warpgroups"] == 1
    assert set(d["time_breakdown"]) >= {"mma_s", "mma_operand_reads_s", "exp_s", "alu_s",
                                        "launch_s", "unhidden_s"}


def test_unknown_ablation_switch_is_refused():
    from iosim.analysis.analyze import analyze
    from iosim.errors import IosimError
    with pytest.raises(IosimError, match="unknown ablation"):
        analyze(AttentionProblem(seq_q=512, heads_q=1), "h100", "fa3", ablation={"turbo": False})


def test_an_elementwise_instruction_holds_the_mma_stream_for_one_128_lane_dispatch():
    cost = MmaCost(H200, "fp16", Pipeline(mma_instruction="wgmma"), 384, 2)
    wgmma_rate = H200.tensor_flops_per_s_per_sm("fp16")
    # per element: 1 / (128 lanes x clock) seconds of the tensor server
    assert cost.issue_work_per_op / wgmma_rate == pytest.approx(
        1 / (ISSUE_LANES_PER_CLOCK_PER_SM * H200.clock_hz))


def test_tensor_heavy_schedule_runs_below_the_maximum_clock():
    from iosim.clock import sustained_simulation
    s = build_schedule(AttentionProblem(seq_q=2048, heads_q=16, batch=2), H200, "fa3")
    _r, at = sustained_simulation(s, H200)
    assert at.clock_hz < H200.clock_hz
    # the power line's fixed point: clock = a - b * rate at that clock
    pc = H200.power_capped_clock
    rate = s.totals().mma_flops / _r.time_s
    assert at.clock_hz == pytest.approx(pc.clock_at_zero_tensor_rate_hz
                                        - pc.clock_drop_hz_per_tensor_flop_per_s * rate, rel=0.05)


def test_published_rows_name_their_paper_figure_and_panel():
    rows = list(csv.DictReader((VALIDATION_DIR / "published.csv").open()))
    assert len(rows) >= 30
    assert all(r["paper"] and r["figure"] and r["panel"] and r["transcription"] for r in rows)
    # the paper's shape: 16k tokens, hidden 2048
    assert all(int(r["batch"]) * int(r["seq_q"]) == 16384 for r in rows)
    assert all(int(r["heads_q"]) * int(r["head_dim"]) == 2048 for r in rows)


def test_the_wide_sweep_is_paired_with_its_measurements_and_half_is_held_out():
    import yaml
    from iosim.analysis.validate import sweep_pairs
    assert "wide" in [t for t, _s, _m in sweep_pairs()]
    cfgs = yaml.safe_load((VALIDATION_DIR / "sweep_wide.yaml").read_text())["configs"]
    assert len(cfgs) >= 30
    assert sum(c["held_out"] for c in cfgs) == len(cfgs) // 2
