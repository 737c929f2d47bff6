"""Atomic reductions (fp32 red.global.add into L2): the measured rate and how the memory
model serves a `reduce` store (FA-2 backward's dQaccum)."""
import json
from pathlib import Path

import pytest

from iosim.hardware import load_gpu
from iosim.machine import reduce_l2_cost
from iosim.schedule import Store, program_totals
from iosim.sim.memory import ExactMemory, ExpectedMemory, Server, TileLru

MEASURED = Path(__file__).resolve().parent.parent / "measurements" / "h200" / "atomics_h200.json"
L2_RATE = 1e12


def test_h200_reduce_rate_is_the_measured_fragment_red_at_64_ctas_per_tile():
    rows = json.loads(MEASURED.read_text())["atomic_reduction"]["rows"]
    row, = [r for r in rows if r["layout"] == "fragment" and r["op"] == "red.f32"
            and r["share"] == 64]
    assert row["checked"]
    for name in ("h200", "h200-calibrated", "h100"):
        assert load_gpu(name).l2_reduce_bandwidth_bytes_per_s == pytest.approx(
            row["bytes_per_s"], rel=1e-3)


def test_reduce_cost_is_l2_bandwidth_over_reduce_rate():
    gpu = load_gpu("h200-calibrated")
    assert reduce_l2_cost(gpu) == pytest.approx(7.141e12 / 0.965e12)


def test_a_gpu_without_a_reduce_rate_serves_reduces_as_plain_stores():
    assert load_gpu("a100").l2_reduce_bandwidth_bytes_per_s is None
    assert reduce_l2_cost(load_gpu("a100")) == 1.0


def _exact(cost):
    return ExactMemory(TileLru(1 << 30), Server(L2_RATE), Server(L2_RATE), 0.0, 0.0, cost)


def test_exact_mode_holds_the_l2_port_reduce_cost_times_a_reduce_stores_bytes():
    mem = _exact({"fragment": 4.0})
    assert mem.store(("a",), "a", 1000, "fragment", 0.0) == pytest.approx(4000 / L2_RATE)
    assert mem.counters.sm_to_l2_bytes == 1000          # bytes stay the bytes stored


def test_exact_mode_serves_a_plain_store_at_the_l2_rate_whatever_the_reduce_cost():
    assert _exact({"fragment": 4.0}).store(("a",), "a", 1000, False, 0.0) == pytest.approx(1000 / L2_RATE)


def test_fast_mode_memory_holds_the_port_reduce_cost_times_a_reduce_stores_bytes():
    mem = ExpectedMemory(Server(L2_RATE), Server(L2_RATE), 0.0, 0.0, {}, 0.0, {"fragment": 4.0})
    assert mem.store(("a",), "a", 1000, "fragment", 0.0) == pytest.approx(4000 / L2_RATE)
    assert mem.store(("b",), "b", 1000, False, 0.0) == pytest.approx(5000 / L2_RATE)


def test_program_totals_count_reduce_bytes_apart_from_plain_stores():
    t = program_totals((Store("dQaccum", (0,), 64, 128, 32768, reduce=True),
                        Store("dK", (0,), 128, 128, 32768)))
    assert (t.bytes_stored, t.reduce_bytes) == (65536, 32768)


def test_a_coalesced_reduce_costs_the_measured_coalesced_rate():
    # measurements/h200/atomics_h200.json: coalesced red.f32 at share 64, 3265.4 GB/s
    gpu = load_gpu("h200-calibrated")
    assert reduce_l2_cost(gpu, "coalesced") == pytest.approx(
        gpu.l2_bandwidth_bytes_per_s / 3.2654e12, rel=1e-3)


def test_exact_mode_charges_each_reduce_layout_its_own_cost():
    mem = _exact({"fragment": 4.0, "coalesced": 2.0})
    assert mem.store(("a",), "a", 1000, "coalesced", 0.0) == pytest.approx(2000 / L2_RATE)


def test_program_totals_count_coalesced_reduce_bytes_apart():
    t = program_totals((Store("dQaccum", (0,), 64, 128, 32768, reduce=True,
                              reduce_layout="coalesced"),
                        Store("dQaccum", (1,), 64, 128, 32768, reduce=True)))
    assert (t.reduce_bytes, t.reduce_coalesced_bytes) == (65536, 32768)


def _dq_layouts(**kw):
    from iosim import AttentionProblem, build_schedule
    s = build_schedule(AttentionProblem(seq_q=512, heads_q=2, direction="bwd"), "h200", "fa2", **kw)
    (bwd,) = [k for k in s.kernels if k.name == "fa2_bwd"]
    return {op.reduce_layout for loop in bwd.program(0) if loop.kind == "loop"
            for op in loop.body if op.kind == "store" and op.reduce}


def test_the_projects_backward_adds_dq_in_the_fragment_layout():
    assert _dq_layouts() == {"fragment"}


def test_flash_attentions_backward_adds_dq_coalesced():
    assert _dq_layouts(kernel="flash-attn") == {"coalesced"}


def test_a_kernel_option_outside_fa2_is_refused():
    from iosim import AttentionProblem, build_schedule
    from iosim.errors import IosimError
    with pytest.raises(IosimError, match="FA-2"):
        build_schedule(AttentionProblem(seq_q=512), "h200", "fa1", kernel="flash-attn")
    with pytest.raises(IosimError, match="unknown FA-2 kernel"):
        build_schedule(AttentionProblem(seq_q=512), "h200", "fa2", kernel="cutlass")


def test_torch_flash_backward_rows_are_simulated_as_torch_flash():
    from iosim.analysis.validate import implementation_tiling
    assert implementation_tiling({"impl": "torch_flash", "direction": "bwd", "head_dim": 128},
                                 "h200") == {"kernel": "torch-flash"}


def test_torch_flash_backward_adds_dq_coalesced():
    assert _dq_layouts(kernel="torch-flash") == {"coalesced"}
