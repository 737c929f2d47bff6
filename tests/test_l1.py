"""The SM's L1 for Load.l1 copies (sim/l1.py) against the H200's measurements: Nsight
Compute's shared-memory configurations, FA-1's L1 hits of its row statistics
(measurements/h200/fa1_l1/fa1_l1_hits_h200.csv) and the L1 probe's pattern
(measurements/h200/fa1_l1/l1_probe_h200.csv), in both engines."""
from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest

from iosim import AttentionProblem
from iosim.algorithms import build_schedule
from iosim.hardware import load_gpu
from iosim.schedule import Kernel, Launch, Load, Pipeline, Schedule, Store, expand
from iosim.sim import simulate
from iosim.l1_curve import carveout_bytes, hit_probability
from iosim.sim.l1 import L1Stack, kernel_l1_hit_bytes, program_l1_hits

H200 = load_gpu("h200-calibrated")
FA1_L1 = Path(__file__).parent.parent / "measurements" / "h200" / "fa1_l1"


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def fa1_measured() -> dict:
    """N → (hit fraction of the l, m sectors, shared-memory configuration bytes), from ncu."""
    lines = [ln for ln in open(FA1_L1 / "fa1_l1_hits_h200.csv") if not ln.startswith("==")]
    rows = list(csv.DictReader(lines))[1:]
    out = {}
    for r, n in zip(rows, (512, 1024, 2048)):      # the run's launch order (fa1_l1_hits_run.py)
        assert r["launch__grid_size"] == str(16384 // n * 16)
        hit = _num(r["l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access_lookup_hit.sum"])
        acc = _num(r["l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum"])
        out[n] = (hit / acc, int(_num(r["launch__shared_mem_config_size"])))
    return out


def probe_rows() -> list:
    with open(FA1_L1 / "l1_probe_h200.csv", newline="") as f:
        return list(csv.DictReader(f))


def fa1_schedule(n: int):
    p = AttentionProblem(batch=16384 // n, heads_q=16, seq_q=n, head_dim=64, dtype="fp16")
    return build_schedule(p, "h200", "fa1")


def test_carveout_is_the_configuration_ncu_reports_for_the_probe():
    seen = set()
    for r in probe_rows():
        smem = int(r["smem_dynamic_bytes"])
        if smem in seen:
            continue
        seen.add(smem)
        la = Launch((132, 1, 1), 256, smem, 32)
        assert carveout_bytes(H200, la, 1) == int(r["config_bytes"])
    assert len(seen) == 4


def test_carveout_of_fa1_counts_its_static_merge_buffer():
    k = fa1_schedule(512).kernels[0]
    assert k.launch.static_smem_bytes == 16896          # xch: 1 x 64 rows x 66 fp32
    assert carveout_bytes(H200, k.launch, 1) == fa1_measured()[512][1] == 167936


def test_fa1_row_statistics_are_the_only_l1_loads():
    k = fa1_schedule(1024).kernels[0]
    t = k.totals()
    assert t.l1_load_bytes == t.load_bytes["l"] + t.load_bytes["m"]


def test_fa1_stack_distance_is_the_o_tiles_and_statistics_stored_between_two_reads():
    # every l_i read sees the n_q - 1 other (O, l, m) steps and its own m_i: 7 x 8704 + 256 at
    # N 512 (d 64, 64-row blocks), which is the probe's n = 8 pattern
    k = fa1_schedule(512).kernels[0]
    stack = L1Stack(94208)
    dists = set()
    for op in expand(k.program(0)):
        if op.kind not in ("load", "store"):
            continue
        key = (op.tensor, *op.coord)
        if op.kind == "load" and op.l1:
            if op.tensor == "l":
                dists.add(stack.distance(key))
            stack.touch(key, op.bytes)
        elif op.kind == "store":
            stack.touch(key, op.bytes)
    assert dists == {7 * (8192 + 512) + 256}


@pytest.mark.parametrize("n", [1024, 2048])
def test_fa1_l1_hit_fraction_matches_ncu(n):
    k = fa1_schedule(n).kernels[0]
    predicted = kernel_l1_hit_bytes(H200, k) / k.totals().l1_load_bytes
    assert predicted == pytest.approx(fa1_measured()[n][0], abs=0.03)


def test_fa1_at_n512_hits_as_the_probe_at_its_distance_not_as_ncu_measured():
    # the documented gap (docs/simulator.md): one CTA per SM (the probe) hits 98.6% at the
    # distance of FA-1 N 512; FA-1, ~3.9 CTAs per SM in sequence, hits 81.4%
    k = fa1_schedule(512).kernels[0]
    predicted = kernel_l1_hit_bytes(H200, k) / k.totals().l1_load_bytes
    probe = next(float(r["hit_fraction"]) for r in probe_rows()
                 if r["mode"] == "0" and r["fill"] == "8192" and r["config_bytes"] == "167936"
                 and r["n"] == "8")
    assert predicted == pytest.approx(probe, abs=0.005)
    assert fa1_measured()[512][0] == pytest.approx(0.814, abs=0.001)


def test_exact_and_fast_count_the_same_l1_hits():
    s = fa1_schedule(1024)
    fast = simulate(s, H200, "fast", l2_protocol="ncu").kernels[0]
    exact = simulate(s, H200, "exact", l2_protocol="ncu").kernels[0]
    assert exact.l1_hit_bytes == pytest.approx(fast.l1_hit_bytes, rel=0.01)
    assert exact.l1_hit_bytes > 0.4 * s.totals().l1_load_bytes
    assert exact.l2_to_sm_bytes == s.totals().bytes_loaded - exact.l1_hit_bytes


def _probe_like(stores: tuple, loads: tuple = ()) -> tuple:
    """A statistic tile read, then `stores` and `loads`, then read again."""
    x = Load("x", (0,), 64, 1, 256, l1=True)
    return (x, *loads, *stores, x)


def test_plain_stores_push_a_line_down_the_stack():
    prog = _probe_like(tuple(Store("f", (i,), 64, 64, 8192, layout="fragment") for i in range(12)))
    hit, total = program_l1_hits(prog, 94208.0)
    assert total == 512
    assert hit == pytest.approx(256 * hit_probability(12 * 8192, 94208))
    assert hit_probability(12 * 8192, 94208) < 0.8


def test_cg_loads_and_atomic_reductions_do_not_enter_the_l1():
    # probe mode 6: .cg copies alone leave the statistics hitting; atomics are done in L2
    prog = _probe_like(tuple(Store("r", (i,), 64, 64, 8192, reduce=True) for i in range(30)),
                       tuple(Load("q", (i,), 64, 64, 8192) for i in range(30)))
    hit, _ = program_l1_hits(prog, 94208.0)
    assert hit == pytest.approx(256 * hit_probability(0, 94208))
    assert hit > 0.99 * 256


def test_a_gpu_without_an_l1_figure_has_no_l1_hits():
    a100 = load_gpu("a100")
    assert a100.l1_shared_memory_bytes_per_sm is None
    k = fa1_schedule(512).kernels[0]
    assert kernel_l1_hit_bytes(a100, k) == 0.0


def test_hit_probability_between_measured_capacities_lies_between_their_curves():
    # 108 KB sits between the measured 92 and 124 KB: at the same distance / capacity its
    # probability is between theirs
    for ratio in (0.9, 1.2, 1.6):
        lo = hit_probability(ratio * 94208, 94208)
        hi = hit_probability(ratio * 126976, 126976)
        mid = hit_probability(ratio * 110592, 110592)
        assert min(lo, hi) - 1e-12 <= mid <= max(lo, hi) + 1e-12


def _hits_walking_every_op(program, capacity_bytes, stretch):
    """The reference: every op of the expanded program through one stack."""
    from iosim.schedule import expand
    from iosim.sim.l1 import L1Stack
    stack, hit, total = L1Stack(capacity_bytes), 0.0, 0.0
    for op in expand(program):
        if op.kind == "load" and op.l1:
            key = (op.tensor, *op.coord)
            hit += op.bytes * stack.hit_probability(key, stretch)
            total += op.bytes
            stack.touch(key, op.bytes)
        elif op.kind == "store" and not op.reduce:
            stack.touch((op.tensor, *op.coord), op.bytes)
    return hit, total


@pytest.mark.parametrize("seq,causal,stretch", [(2048, False, 1.0), (1024, True, 1.0),
                                                (4096, False, 2.0), (512, False, 3.0),
                                                (8192, True, 1.0), (16384, False, 1.0)])
def test_counting_repeated_kv_iterations_equals_walking_every_op(seq, causal, stretch):
    from iosim.algorithms import build_schedule
    from iosim.problem import AttentionProblem
    from iosim.sim.l1 import program_l1_hits
    problem = AttentionProblem(batch=1, heads_q=2, seq_q=seq, head_dim=64, causal=causal)
    kernel = build_schedule(problem, "h200", "fa1").kernels[0]
    program = kernel.program(0)
    for cap in (60_000.0, 92 * 1024.0):
        got = program_l1_hits(program, cap, stretch)
        want = _hits_walking_every_op(program, cap, stretch)
        assert want[1] > 0
        assert got[0] == pytest.approx(want[0], rel=1e-9, abs=1e-6)
        assert got[1] == pytest.approx(want[1], rel=1e-12)


# ---- L1 tiles shared between CTAs (cuBLAS's align1 panels): the walk along a dispatch ----
def _two_cta_kernel(shared: bool) -> Kernel:
    """Two CTAs each loading 8 tiles through L1: the same 8 (shared) or their own."""
    def program(cta: int) -> tuple:
        return tuple(Load("a", (0 if shared else cta, t), 64, 64, 8192, l1=True)
                     for t in range(8))
    return Kernel(name="k", launch=Launch((2, 1, 1), 128, 1024, 32), program=program,
                  classes=((0, 1), (1, 1)), cta_coord=lambda c: (c, 0, 0),
                  pipeline=Pipeline(stages=1), class_of=lambda c: c)


def test_sharing_is_found_only_where_two_ctas_load_one_tile():
    from iosim.sim.l1 import shares_l1_tiles
    assert shares_l1_tiles(_two_cta_kernel(True))
    assert not shares_l1_tiles(_two_cta_kernel(False))
    assert not shares_l1_tiles(fa1_schedule(1024).kernels[0])       # per-CTA statistics


def test_a_shared_tile_hits_where_the_second_cta_runs_on_the_same_sm_after_the_first():
    """Two CTAs on one SM, the second starting after the first's span: its 8 loads are the
    first's tiles at the distance of the 8 tiles since (7 · 8 KB for each: every tile the
    first touched after it, then the second's own loads before it, re-ordered), each hit
    with the curve's probability; on two SMs, nothing hits."""
    from iosim.sim.l1 import dispatch_l1_hit_fraction
    k = _two_cta_kernel(True)
    cap = 94208.0
    same = dispatch_l1_hit_fraction(k, [(0, 5, 0.0, 1.0), (1, 5, 1.0, 2.0)], cap)
    assert same == pytest.approx(0.5 * hit_probability(7 * 8192, cap))
    apart = dispatch_l1_hit_fraction(k, [(0, 5, 0.0, 1.0), (1, 6, 1.0, 2.0)], cap)
    assert apart == 0.0
    # a gap on the SM (a steady state's skipped periods ran there) starts an empty stack
    gap = dispatch_l1_hit_fraction(k, [(0, 5, 0.0, 1.0), (1, 5, 1.5, 2.5)], cap)
    assert gap == 0.0
    assert dispatch_l1_hit_fraction(k, [], cap) == 0.0
    own = dispatch_l1_hit_fraction(_two_cta_kernel(False), [(0, 5, 0.0, 1.0), (1, 5, 1.0, 2.0)],
                                   cap)
    assert own == 0.0


def test_align1_panels_are_l1_loads_and_the_fast_mode_counts_their_shared_hits():
    """cuBLAS's align1 S = Q Kᵀ (odd N): its panels load through L1 (2-byte LDG), CTAs of one
    row or column of tiles share them, and both modes count hits of co-resident CTAs (exact
    mode's SmL1 as the CTAs interleave, the fast mode along its own dispatch): a few percent
    of the panels' bytes, no L2→SM bytes for them."""
    p = AttentionProblem(batch=1, heads_q=4, heads_kv=4, seq_q=2997, seq_kv=2997, head_dim=64)
    s = build_schedule(p, H200, "standard")
    qk = s.kernels[0]
    t = qk.totals()
    assert t.l1_load_bytes == t.bytes_loaded - t.oob_load_bytes > 0
    one = dataclasses.replace(s, kernels=(qk,))
    for mode in ("fast", "exact"):
        r = simulate(one, H200, mode, l2_protocol="ncu", exact_below_events=0).kernels[0]
        assert 0.005 * t.l1_load_bytes < r.l1_hit_bytes < 0.2 * t.l1_load_bytes, mode
        assert r.l2_to_sm_bytes == pytest.approx(t.bytes_loaded - r.l1_hit_bytes)
