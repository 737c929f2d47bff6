"""Copy issue of the project's FA-1/FA-2 kernels (Pipeline.copy_issue_cycles_per_byte): the
constants are what the committed H200 traces' clock64 stamps give (iosim.kernels.copy_issue,
recomputed here from tests/data/traces/*.json), and the mechanisms that charge it: the
threads' issue time and the MMA stream it holds (machine.MmaCost.copy_hold), and reduce
stores held at the rate one SM gets (machine.reduce_sm_bytes_per_s)."""
import glob
import json
from pathlib import Path

import numpy as np
import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.algorithms import fa1, fa2
from iosim.kernels.copy_issue import copy_issue_samples, cycles_per_byte, trace_write_cycles
from iosim.machine import MmaCost, reduce_sm_bytes_per_s
from iosim.schedule import Pipeline

H200 = load_gpu("h200")
TRACES = Path(__file__).parent / "data" / "traces"

# per kernel: consecutive store records (one trace write each), the load pairs between which the
# kernel's source runs only the second load's copy loop (fa2_fwd.cu issue_kv and the Q load
# before it; fa2_bwd.cu issue_q and the K/V/Q prologue; fa1_fwd.cu the K/V and Q/O/l/m loads)
CASES = {
    "fa2_fwd": ([("O", "LSE")], [("Q", "K"), ("K", "V")], fa2.FWD_COPY_ISSUE_TRACE_CYCLES_PER_BYTE),
    "fa2_bwd": ([("dK", "dV"), ("dK_expanded", "dV_expanded")],
                [("V", "Q"), ("Q", "dO"), ("dO", "LSE"), ("LSE", "D")],
                fa2.BWD_COPY_ISSUE_CYCLES_PER_BYTE),
    "fa1_fwd": ([("O", "l"), ("l", "m")],
                [("K", "V"), ("V", "Q"), ("Q", "O"), ("O", "l"), ("l", "m")],
                fa1.FWD_COPY_ISSUE_CYCLES_PER_BYTE),
}


def _tile_bytes(trace: dict, kernel: str) -> dict:
    d = trace["problem"]["head_dim"]
    t = trace["tiling"]["bwd" if kernel == "fa2_bwd" else "fwd"]
    kv, q = t["block_kv"] * d * 2, t["block_q"] * d * 2
    stat = t["block_q"] * 4
    return {"fa2_fwd": {"K": kv, "V": kv},
            "fa2_bwd": {"Q": q, "dO": q, "LSE": stat, "D": stat},
            "fa1_fwd": {"K": kv, "V": kv, "Q": q, "O": q, "l": stat, "m": stat}}[kernel]


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_copy_issue_constants_are_the_traces_medians(kernel):
    writes_pairs, pairs, constant = CASES[kernel]
    files = sorted(glob.glob(str(TRACES / f"{kernel}_*.json")))
    assert len(files) == 3
    traces = [json.loads(Path(f).read_text()) for f in files]
    writes = [w for t in traces for w in trace_write_cycles(t, kernel, writes_pairs)]
    assert len(writes) >= 16
    w = float(np.median(writes))
    per_trace = []
    for t in traces:
        samples = copy_issue_samples(t, kernel, pairs, w)
        assert sum(len(v) for v in samples.values()) >= 8
        per_trace.append(cycles_per_byte(samples, _tile_bytes(t, kernel), {"K": "V"}))
    assert constant == pytest.approx(float(np.median(per_trace)), rel=0.02)


def test_copy_issue_samples_read_a_synthetic_trace():
    # Q at 0, K at 1000 (its copies + one trace write), V at 1900; O and LSE stored back to
    # back 100 cycles apart (one trace write): K 900, V 800 cycles of issue
    ev = [[1, 0, [0, 0, 0], 32768, 0, 0, 0], [1, 1, [0, 0, 0], 16384, 0, 0, 1000],
          [1, 2, [0, 0, 0], 16384, 0, 0, 1900], [2, 3, [0, 0, 0], 0, 0, 0, 5000],
          [2, 4, [0, 0, 0], 0, 0, 0, 5100]]
    t = {"kernels": [{"name": "k", "names": ["Q", "K", "V", "O", "LSE"], "ctas": [ev]}]}
    assert trace_write_cycles(t, "k", [("O", "LSE")]) == [100]
    s = copy_issue_samples(t, "k", [("Q", "K"), ("K", "V")], 100.0)
    assert s == {"K": [900.0], "V": [800.0]}
    assert cycles_per_byte(s, {"K": 16384, "V": 16384}) == pytest.approx(1700 / 32768)


def test_fa1_fa2_pipelines_carry_the_constants():
    p = AttentionProblem(batch=1, heads_q=2, heads_kv=2, seq_q=1024, seq_kv=1024,
                         direction="fwd+bwd")
    by_name = {k.name: k.pipeline.copy_issue_cycles_per_byte
               for k in build_schedule(p, H200, "fa2").kernels}
    assert by_name["fa2_fwd"] == fa2.FWD_COPY_ISSUE_CYCLES_PER_BYTE
    assert by_name["fa2_bwd"] == fa2.BWD_COPY_ISSUE_CYCLES_PER_BYTE
    assert by_name["fa2_bwd_preprocess"] == 0.0
    pf = AttentionProblem(batch=1, heads_q=2, heads_kv=2, seq_q=1024, seq_kv=1024)
    k = build_schedule(pf, H200, "fa1").kernels[0]
    assert k.pipeline.copy_issue_cycles_per_byte == fa1.FWD_COPY_ISSUE_CYCLES_PER_BYTE


def test_copy_hold_is_the_exposed_fraction_of_the_issue_time():
    # 4 warps, 2 CTAs per SM: 2 warps per sub-partition -> the second measured fraction
    pipe = Pipeline(stages=2, mma_instruction="mma_sync")
    cost = MmaCost(H200, "fp16", pipe, 128, 2, ctas_per_sm=2)
    wgmma = H200.tensor_flops_per_s_per_sm("fp16")
    assert cost.copy_hold(1e-6) == pytest.approx(H200.mma_sync_exposed_fraction_two_warps * 1e-6 * wgmma)
    lone = MmaCost(H200, "fp16", pipe, 128, 2, ctas_per_sm=1)
    assert lone.copy_hold(1e-6) == pytest.approx(H200.mma_sync_exposed_fraction_one_warp * 1e-6 * wgmma)
    # wgmma kernels (a TMA producer issues the copies): no hold
    assert MmaCost(H200, "fp16", Pipeline(stages=2), 384, 2).copy_hold(1e-6) == 0.0


def test_reduce_rate_of_one_sm_is_its_limit_or_its_share_of_the_chip():
    sm = H200.l2_reduce_sm_bandwidth_bytes_per_s
    chip = H200.l2_reduce_bandwidth_bytes_per_s
    assert reduce_sm_bytes_per_s(H200, "fragment", 1) == sm
    assert reduce_sm_bytes_per_s(H200, "fragment", 10_000) == pytest.approx(chip / H200.sm_count)
    assert reduce_sm_bytes_per_s(H200, "fragment", 0) == pytest.approx(chip / H200.sm_count)
    assert reduce_sm_bytes_per_s(H200, "coalesced", 1) == H200.l2_reduce_coalesced_sm_bandwidth_bytes_per_s
    assert reduce_sm_bytes_per_s(load_gpu("a100"), "fragment", 1) is None


def test_fa1_store_issue_constant_is_the_traces_slope():
    """fa1.FWD_STORE_ISSUE_CYCLES_PER_BYTE: the PV -> O-store gap's growth per stored byte
    (full Q blocks against the ragged last one), mean over the traces that have both sizes."""
    from iosim.kernels.copy_issue import store_issue_slope
    slopes = [store_issue_slope(json.loads(Path(f).read_text()), "fa1_fwd", "PV", "O")
              for f in sorted(glob.glob(str(TRACES / "fa1_fwd_*.json")))]
    slopes = [s for s in slopes if s is not None]
    assert len(slopes) == 2
    assert 0.04 < min(slopes) and max(slopes) < 0.07      # ~7 cycles per 128-byte warp store
    assert fa1.FWD_STORE_ISSUE_CYCLES_PER_BYTE == pytest.approx(float(np.mean(slopes)), rel=0.02)


def test_thread_issued_store_holds_the_cta():
    """A thread-issued O store of B bytes adds B x store_issue_cycles_per_byte / clock to a
    lone CTA's exact-mode time (FA-1 forward with the figure against without it)."""
    from iosim.sim import simulate
    p = AttentionProblem(batch=1, heads_q=1, seq_q=256, seq_kv=256, head_dim=128)
    s = build_schedule(p, "h200", "fa1", block_q=128, block_kv=224, warps=8)
    k = s.kernels[0]
    bare = k.__class__(**{**{f: getattr(k, f) for f in k.__dataclass_fields__},
                          "pipeline": Pipeline(**{**k.pipeline.__dict__, "store_issue_cycles_per_byte": 0.0})})
    gpu = H200.model_copy(update={"cta_turnover_cycles": None})
    t_with = simulate(s, gpu, mode="exact").time_s
    t_bare = simulate(s.__class__(**{**s.__dict__, "kernels": (bare,)}), gpu, mode="exact").time_s
    o_bytes = 4 * 128 * 128 * 2                      # 2 j blocks x 2 i blocks of 128 x 128 fp16
    expect = o_bytes * fa1.FWD_STORE_ISSUE_CYCLES_PER_BYTE / gpu.clock_hz
    assert t_with - t_bare == pytest.approx(expect, rel=0.05)
