"""FA-3's K and V rings (Pipeline.separate_kv_release): K's slot back to the producer after
Q Kᵀ (FA-3's pipeline_k / pipeline_v, the project's kernel since issue 12) or both after P V
(the kernel before). Measured on the H200 (benchmarks/results/fa3_kv_release/measured.json):
the joint release costs +30..+46% with a 2-stage ring and nothing with 3 stages."""
from dataclasses import replace

import pytest

from iosim import AttentionProblem, build_schedule
from iosim.sim import simulate


def _time(stages: int, **pipe) -> float:
    s = build_schedule(AttentionProblem(batch=1, heads_q=2, seq_q=2048, head_dim=64), "h200",
                       "fa3", stages=stages)
    s = replace(s, kernels=tuple(replace(k, pipeline=replace(k.pipeline, **pipe))
                                 for k in s.kernels))
    return simulate(s, "h200-calibrated", mode="exact").time_s


def test_fa3_releases_k_and_v_separately_by_default():
    s = build_schedule(AttentionProblem(seq_q=1024, heads_q=2, head_dim=64), "h200", "fa3")
    assert s.kernels[0].pipeline.separate_kv_release is True


def test_joint_release_starves_a_two_stage_ring_with_intra_overlap():
    # K_{j+1} can only be loaded once every consumer's P V_{j-1} is done: its TMA latency is
    # exposed every iteration
    assert _time(2, separate_kv_release=False) / _time(2) - 1 > 0.25


def test_a_third_stage_hides_the_joint_release():
    assert _time(3, separate_kv_release=False) == pytest.approx(_time(3), rel=0.01)


def test_joint_release_with_one_stage_and_intra_overlap_is_refused():
    # K_{j+1} is waited for before V_j's GEMM frees the only stage: a deadlock in the kernel
    with pytest.raises(ValueError, match="2 stages"):
        _time(1, separate_kv_release=False)
