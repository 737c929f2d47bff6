"""The project's FA-2 backward (fa2_bwd.cu): what its dQaccum atomics and its dK/dV epilogue
cost, against the H200 measurement of the kernel with its dQ update as atomics, left out and
as plain stores (measurements/h200/fa2_bwd_atomics_h200.json, scripts/fa2_bwd_atomics_h200.py)
and the committed traces (tests/data/traces/fa2_bwd_*.json)."""
import glob
import json
from pathlib import Path

import numpy as np
import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.algorithms import fa2
from iosim.kernels.copy_issue import store_issue_slope
from iosim.machine import MmaCost, reduce_hold_bytes_per_s
from iosim.schedule import Pipeline

H200 = load_gpu("h200")
ROOT = Path(__file__).resolve().parents[1]
MEAS = json.loads((ROOT / "measurements" / "h200" / "fa2_bwd_atomics_h200.json").read_text())
TRACES = Path(__file__).parent / "data" / "traces"
STEP_BYTES = 64 * 128 * 4          # one Q-block step's dQaccum adds at d 128 (64 x 128 fp32)


def _kernel(schedule, name):
    return next(k for k in schedule.kernels if k.name == name)


def _by_config():
    out = {}
    for r in MEAS["rows"]:
        out.setdefault(r["config"], {})[r["dq_mode"]] = r
    return out


def _atomics_s_per_step(rows):
    """(time with atomics - time without) / Q-block steps one SM runs (CTAs over 132 SMs)."""
    steps = rows[0]["q_steps_per_cta"] * max(1.0, rows[0]["ctas"] / H200.sm_count)
    return (rows[0]["time_s"] - rows[1]["time_s"]) / steps


def test_measured_atomics_cost_does_not_grow_with_the_sms_adding():
    """32, 64, 128 CTAs in one wave and 2048 in 15.5 waves: the atomics cost per step is the
    same within 8% (a share of the chip-wide rate over the occupied SMs would make it 4x from
    32 to 128 CTAs)."""
    per = [_atomics_s_per_step(rows) for rows in _by_config().values()]
    assert len(per) == 7
    assert max(per) / min(per) < 1.08, per


def test_measured_atomics_cost_is_the_per_sm_limit():
    """Each step's 32 KB at the SM's own fragment-layout limit (15.5 GB/s, measured alone) is
    2.11 us; the kernel's atomics cost 2.17-2.33 us a step, not the 4.05 us of 1.07 TB/s / 132."""
    sm = reduce_hold_bytes_per_s(H200, "fragment")
    for rows in _by_config().values():
        assert _atomics_s_per_step(rows) == pytest.approx(STEP_BYTES / sm, rel=0.12)


def test_traced_sms_adding_at_once_stay_under_the_chip_rate():
    """In the traced row (2048 CTAs) about a quarter of the running CTAs are in their atomics
    phase at a time; at the per-SM limit they ask the L2 for less than its measured rate."""
    t = MEAS["traces"]["row-B4-H16-N4096"]
    assert 120 < t["running_ctas_mean"] <= H200.sm_count
    adding = t["atomics_phase_ctas"]["mean"]
    assert 20 < adding < 50
    chip = 1.07e12                    # atomic_scaling_h200.json, 132 and 264 CTAs adding
    assert t["atomics_phase_ctas"]["p90"] * H200.l2_reduce_sm_bandwidth_bytes_per_s < chip


def test_plain_stores_of_the_fragment_cost_about_what_the_atomics_cost():
    """IOSIM_DQ_MODE 2 (plain st.global.f32 of the same fragment): 0.85-0.97 of the atomics'
    cost per step: the layout, not atomicity, sets the rate (as atomics_h200.json found
    chip-wide), which is why the dK/dV fragment stores are charged too."""
    for rows in _by_config().values():
        plain = rows[2]["time_s"] - rows[1]["time_s"]
        atom = rows[0]["time_s"] - rows[1]["time_s"]
        assert 0.85 < plain / atom < 0.97


def test_reduce_hold_is_the_sm_limit_whatever_the_occupancy():
    pipe = Pipeline(stages=2, mma_instruction="mma_sync")
    wgmma = H200.tensor_flops_per_s_per_sm("fp16")
    lone = MmaCost(H200, "fp16", pipe, 256, 2, 1, active_sms=1)
    full = MmaCost(H200, "fp16", pipe, 256, 2, 1, active_sms=10_000)
    for layout, rate in (("fragment", H200.l2_reduce_sm_bandwidth_bytes_per_s),
                         ("coalesced", H200.l2_reduce_coalesced_sm_bandwidth_bytes_per_s)):
        assert lone.reduce_hold(STEP_BYTES, layout) == pytest.approx(STEP_BYTES / rate * wgmma)
        assert full.reduce_hold(STEP_BYTES, layout) == lone.reduce_hold(STEP_BYTES, layout)


def test_bwd_store_issue_constant_is_the_traces_slope():
    """fa2.BWD_STORE_ISSUE_CYCLES_PER_BYTE: the dQaccum -> dK gap's growth per dK byte (full KV
    blocks against the ragged last one), halved (the loop also writes dV), mean over the two
    traces that have both sizes."""
    slopes = []
    for f in sorted(glob.glob(str(TRACES / "fa2_bwd_*.json"))):
        t = json.loads(Path(f).read_text())
        names = next(k for k in t["kernels"] if k["name"] == "fa2_bwd")["names"]
        s = store_issue_slope(t, "fa2_bwd", "dQaccum", "dK_expanded" if "dK_expanded" in names else "dK")
        if s is not None:
            slopes.append(s / 2)
    assert len(slopes) == 2
    assert 0.05 < min(slopes) and max(slopes) < 0.15
    assert fa2.BWD_STORE_ISSUE_CYCLES_PER_BYTE == pytest.approx(float(np.mean(slopes)), rel=0.02)


def test_only_the_project_kernel_writes_dk_dv_from_its_fragments():
    p = AttentionProblem(batch=1, heads_q=2, seq_q=1024, head_dim=128, direction="bwd")
    own = _kernel(build_schedule(p, H200, "fa2"), "fa2_bwd")
    fa = _kernel(build_schedule(p, H200, "fa2", kernel="flash-attn"), "fa2_bwd")
    assert own.pipeline.store_issue_cycles_per_byte == fa2.BWD_STORE_ISSUE_CYCLES_PER_BYTE
    assert fa.pipeline.store_issue_cycles_per_byte == 0.0
    stores = lambda k: [op for op in k.program(0) if getattr(op, "kind", "") == "store"]
    assert [s.thread_issued for s in stores(own)] == [True, True]
    assert [s.thread_issued for s in stores(fa)] == [False, False]


def test_dk_dv_store_issue_adds_its_cycles_to_a_lone_cta():
    """Exact mode, one lone CTA: the epilogue's dK + dV bytes x BWD_STORE_ISSUE_CYCLES_PER_BYTE
    / clock is the difference the figure makes."""
    from iosim.sim import simulate
    p = AttentionProblem(batch=1, heads_q=1, seq_q=128, head_dim=128, direction="bwd")
    s = build_schedule(p, "h200", "fa2")
    k = _kernel(s, "fa2_bwd")
    bare = k.__class__(**{**{f: getattr(k, f) for f in k.__dataclass_fields__},
                          "pipeline": Pipeline(**{**k.pipeline.__dict__, "store_issue_cycles_per_byte": 0.0})})
    gpu = H200.model_copy(update={"cta_turnover_cycles": None})
    t_with = simulate(s, gpu, mode="exact").kernels[1].time_s
    swapped = tuple(bare if kk.name == "fa2_bwd" else kk for kk in s.kernels)
    t_bare = simulate(s.__class__(**{**s.__dict__, "kernels": swapped}), gpu, mode="exact").kernels[1].time_s
    expect = 2 * 128 * 128 * 2 * fa2.BWD_STORE_ISSUE_CYCLES_PER_BYTE / gpu.clock_hz
    assert t_with - t_bare == pytest.approx(expect, rel=0.05)


def test_ds_phase_constant_is_the_traces_gap_difference():
    """fa2.BWD_DS_PHASE_CYCLES_PER_OP: the gap before dK += dSᵀQ less the gap before
    dV += PᵀdO (the dS phase), per S element, median of the three committed traces, halved
    (the schedule counts 2 ops per element)."""
    from iosim.kernels.copy_issue import phase_gap_difference
    per_element = []
    for f in sorted(glob.glob(str(TRACES / "fa2_bwd_*.json"))):
        t = json.loads(Path(f).read_text())
        bq = {128: 64, 64: 128}[t["problem"]["head_dim"]]          # the traces' tilings
        assert t["tiling"]["bwd"]["block_q"] == bq and t["tiling"]["bwd"]["block_kv"] == 128
        per_element.append(phase_gap_difference(t, "fa2_bwd", "dK+=dS^T Q", "dV+=P^T dO") / (bq * 128))
    assert len(per_element) == 3
    assert 0.08 < min(per_element) and max(per_element) < 0.1
    assert fa2.BWD_DS_PHASE_CYCLES_PER_OP == pytest.approx(float(np.median(per_element)) / 2, rel=0.01)


def test_ds_phase_holds_a_lone_cta_for_its_cycles():
    """Exact mode, one lone CTA of 2 Q-block steps at d 128 (64 x 128 S tiles): the dS
    phase's cycles beyond the ALU unit time it replaces are what the figure adds."""
    from iosim.schedule import Alu, Loop
    from iosim.sim import simulate
    p = AttentionProblem(batch=1, heads_q=1, seq_q=128, head_dim=128, direction="bwd")
    s = build_schedule(p, "h200", "fa2")
    k = _kernel(s, "fa2_bwd")
    gpu = H200.model_copy(update={"cta_turnover_cycles": None})

    def strip(items):
        out = []
        for it in items:
            if isinstance(it, Loop):
                out.append(Loop(it.var, it.start, it.count, tuple(strip(it.body))))
            elif isinstance(it, Alu) and it.name == "dS=P*(dP-D)":   # its barrier stays
                out.append(Alu(it.name, it.count, 0.0, it.barrier_cycles))
            else:
                out.append(it)
        return out
    bare = k.__class__(**{**{f: getattr(k, f) for f in k.__dataclass_fields__},
                          "program": lambda cta: tuple(strip(k.program(cta)))})
    swapped = tuple(bare if kk.name == "fa2_bwd" else kk for kk in s.kernels)
    t_with = simulate(s, gpu, mode="exact").kernels[1].time_s
    t_bare = simulate(s.__class__(**{**s.__dict__, "kernels": swapped}), gpu, mode="exact").kernels[1].time_s
    n = 2 * 64 * 128 * 2                                   # 2 steps x 2 ops per S element
    unit = n / (gpu.alu_ops_per_s / gpu.sm_count)
    expect = n * fa2.BWD_DS_PHASE_CYCLES_PER_OP / gpu.clock_hz - unit
    assert t_with - t_bare == pytest.approx(expect, rel=0.1)


def test_flash_attn_ds_phase_is_not_charged():
    p = AttentionProblem(batch=1, heads_q=2, seq_q=1024, head_dim=128, direction="bwd")
    from iosim.schedule import Alu, Loop
    for kernel, want in (("iosim", fa2.BWD_DS_PHASE_CYCLES_PER_OP), ("flash-attn", 0.0)):
        k = _kernel(build_schedule(p, H200, "fa2", kernel=kernel), "fa2_bwd")
        loop = next(it for it in k.program(0) if isinstance(it, Loop))
        ds = next(it for it in loop.body if isinstance(it, Alu) and it.name.startswith("dS"))
        assert ds.phase_cycles_per_op == want


def test_breakdown_counts_the_ds_phase_hold():
    """time_breakdown's issue_slots_s of fa2_bwd: the exp hold plus each Alu op's hold, the P
    and dS phases' being the exposed fraction of their measured cycles and barrier waits."""
    from iosim.machine import occupancy, time_breakdown
    from iosim.schedule import Alu, Loop
    from iosim.sim import simulate
    p = AttentionProblem(batch=1, heads_q=1, seq_q=1024, head_dim=128, direction="bwd")
    s = build_schedule(p, "h200", "fa2")
    k = _kernel(s, "fa2_bwd")
    part = next(x for x in time_breakdown(s, H200, simulate(s, H200))["kernels"] if x["name"] == "fa2_bwd")
    cost = MmaCost(H200, "fp16", k.pipeline, k.launch.threads_per_cta, 2, occupancy(H200, k.launch))
    f = H200.mma_sync_exposed_fraction_two_warps
    ds = exp = other = 0.0
    for cta in range(k.launch.num_ctas):
        loop = next(it for it in k.program(cta) if isinstance(it, Loop))
        for it in loop.body:
            if isinstance(it, Alu) and it.barrier_cycles:   # its barrier wait's exposed part
                ds += loop.count * it.barrier_cycles / H200.clock_hz * f
            if isinstance(it, Alu) and it.phase_cycles_per_op:
                ds += loop.count * it.count * it.phase_cycles_per_op / H200.clock_hz * f
            elif isinstance(it, Alu):
                other += loop.count * cost.elementwise_hold("alu", it.count)
            elif it.kind == "exp":
                exp += loop.count * cost.elementwise_hold("exp", it.count)
        other += sum(cost.elementwise_hold("alu", it.count) for it in k.program(cta) if isinstance(it, Alu))
    wgmma = H200.tensor_flops_per_s_per_sm("fp16") * H200.sm_count
    assert part["issue_slots_s"] == pytest.approx(ds / H200.sm_count + (exp + other) / wgmma, rel=1e-6)
