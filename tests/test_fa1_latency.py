"""fa1's measured latency figures (Barrier.cycles) recomputed from the committed H200 traces, and
charged by both engines."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from iosim import AttentionProblem, build_schedule
from iosim.algorithms import fa1
from iosim.hardware import load_gpu
from iosim.schedule import Barrier, expand
from iosim.sim import simulate

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("fa1_lat", ROOT / "scripts" / "fa1_latency_from_traces.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rows():
    mod = _script()
    return [mod.figures(str(p)) for p in sorted((ROOT / "tests/data/traces").glob("fa1_fwd_*.json"))]


def test_chunk_latency_is_the_traces_median(rows):
    assert fa1.FWD_CHUNK_LATENCY_CYCLES == pytest.approx(
        float(np.median([r["chunk_latency"] for r in rows])), abs=5)


def test_epilogue_and_merge_latency_are_the_traces(rows):
    one = float(np.mean([r["epilogue_latency"] for r in rows if r["wn"] == 1]))
    merge = float(np.mean([(r["epilogue_latency"] - one) / (r["wn"] - 1) for r in rows if r["wn"] > 1]))
    assert fa1.FWD_EPILOGUE_LATENCY_CYCLES == pytest.approx(one, abs=5)
    assert fa1.FWD_MERGE_LATENCY_CYCLES == pytest.approx(merge, abs=5)


def test_chunk_rounds_follow_the_kernels_loop():
    # for (ch = wn; ch < NCH; ch += WN): 7 chunks over 2 column groups -> 4 on warp group 0
    p = AttentionProblem(batch=1, heads_q=1, seq_q=1024, head_dim=64)
    t = build_schedule(p, "h200", "fa1", block_q=64, block_kv=448, warps=8).tiling["fwd"]
    assert fa1.fwd_chunk_rounds(t) == 4
    t = build_schedule(p, "h200", "fa1", block_q=128, block_kv=224, warps=8).tiling["fwd"]
    assert fa1.fwd_chunk_rounds(t) == 7


def test_latency_ops_add_their_cycles_to_a_lone_cta():
    p = AttentionProblem(batch=1, heads_q=1, seq_q=256, head_dim=128)
    sched = build_schedule(p, "h200", "fa1", block_q=128, block_kv=224, warps=8)
    gpu = load_gpu("h200").model_copy(update={"cta_turnover_cycles": None})
    with_lat = simulate(sched, gpu, mode="exact").time_s
    saved = (fa1.FWD_CHUNK_LATENCY_CYCLES, fa1.FWD_EPILOGUE_LATENCY_CYCLES)
    fa1.FWD_CHUNK_LATENCY_CYCLES = fa1.FWD_EPILOGUE_LATENCY_CYCLES = 0.0
    try:
        base = build_schedule(p, "h200", "fa1", block_q=128, block_kv=224, warps=8)
        without = simulate(base, gpu, mode="exact").time_s
    finally:
        fa1.FWD_CHUNK_LATENCY_CYCLES, fa1.FWD_EPILOGUE_LATENCY_CYCLES = saved
    cycles = sum(op.cycles for op in expand(sched.kernels[0].program(0)) if isinstance(op, Barrier))
    assert cycles == pytest.approx(4 * (7 * saved[0] + saved[1]))       # 2 x 2 steps
    assert with_lat - without == pytest.approx(cycles / gpu.clock_hz, rel=0.02)
