"""Partial-sector writes: stores whose row segments start or end off the 32-byte sector grid,
leaving the sector's other part to another CTA (standard attention's S, P and dS at N not a
multiple of 16). Their count against a byte-by-byte reference, the H200 cost recomputed from
the committed probe, and both engines charging it."""
import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iosim import AttentionProblem
from iosim.algorithms import build_schedule
from iosim.algorithms.common import partial_sector_writes
from iosim.hardware import load_gpu
from iosim.schedule import Store, program_totals
from iosim.sim import simulate

H200 = load_gpu("h200-calibrated")
ROOT = Path(__file__).resolve().parents[1]


def _derive(script: str = "partial_sector_cost.py") -> dict:
    """The figure one of scripts/ derives from its committed measurement."""
    spec = importlib.util.spec_from_file_location(script[:-3], ROOT / "scripts" / script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.derive()


def reference_partial_writes(first_row, rows, col_bytes, width_bytes, pitch_bytes):
    """Per byte: the sectors this CTA writes some but not all of, whose rest some other CTA
    writes (every byte of the tensor is written by some CTA)."""
    mine = set()
    for r in range(first_row, first_row + rows):
        base = r * pitch_bytes + col_bytes
        mine.update(range(base, base + width_bytes))
    partial = 0
    for sector in {b // 32 for b in mine}:
        covered = sum(1 for b in range(sector * 32, sector * 32 + 32) if b in mine)
        partial += covered < 32
    return partial


@pytest.mark.parametrize("first_row, rows, col, width, pitch", [
    (0, 128, 0, 512, 6000), (128, 128, 512, 512, 6000), (0, 128, 5632, 368, 6000),
    (0, 256, 0, 256, 6144), (0, 64, 256, 256, 10000), (3, 37, 96, 336, 6016),
    (0, 4, 0, 6000, 6000), (1, 4, 0, 7000, 7000), (0, 4, 0, 8192, 8192), (5, 9, 48, 80, 14000),
])
def test_partial_writes_match_a_byte_by_byte_count(first_row, rows, col, width, pitch):
    assert partial_sector_writes(first_row, rows, col, width, pitch) == \
        reference_partial_writes(first_row, rows, col, width, pitch)


@settings(max_examples=300, deadline=None)
@given(first_row=st.integers(0, 40), rows=st.integers(1, 24),
       col=st.one_of(st.just(0), st.integers(16, 300)), width=st.integers(16, 300),
       extra=st.one_of(st.just(0), st.integers(16, 200)), whole=st.booleans())
def test_partial_writes_match_the_byte_count_on_random_tiles(first_row, rows, col, width, extra,
                                                            whole):
    # even byte offsets (fp16/bf16 elements), segments of a sector or more starting at the row's
    # start or a sector or more into it and ending at the row's end or a sector or more before
    # it (partial_sector_writes' domain: a GEMM tile, a softmax row block); or whole rows
    col, width = 2 * col, 2 * width
    pitch = col + width + 2 * extra
    if whole:
        col, width = 0, pitch
    assert partial_sector_writes(first_row, rows, col, width, pitch) == \
        reference_partial_writes(first_row, rows, col, width, pitch)


def test_standard_qk_at_n3000_writes_two_partial_sectors_per_split_sector():
    # pitch 6000 B: every odd row starts at 16 mod 32, so each of the 24 column-tile edges
    # per odd row (the row's start included, shared with the even row before it) splits a
    # sector between two CTAs: 2 partial writes each, per matrix 1500 x 24 x 2
    p = AttentionProblem(batch=1, heads_q=2, seq_q=3000, head_dim=64, dtype="fp16")
    qk = build_schedule(p, H200, "standard").kernels[0]
    assert qk.name == "std_fwd_qk"
    tile_cols = qk.launch.grid[1]
    total = sum(count * program_totals(qk.program(rep)).partial_sector_writes
                for rep, count in qk.classes)
    assert total == 2 * 1500 * tile_cols * 2


def test_aligned_pitches_write_no_partial_sectors():
    for n in (2048, 3008, 4096):
        p = AttentionProblem(batch=1, heads_q=2, seq_q=n, head_dim=64, dtype="fp16")
        s = build_schedule(p, H200, "standard")
        for k in s.kernels:
            assert all(program_totals(k.program(rep)).partial_sector_writes == 0
                       for rep, _ in k.classes), k.name


def test_flash_kernels_write_no_partial_sectors():
    p = AttentionProblem(batch=1, heads_q=2, seq_q=3000, head_dim=64, dtype="fp16")
    for algo in ("fa1", "fa2", "fa3"):
        for k in build_schedule(p, H200, algo).kernels:
            assert all(program_totals(k.program(rep)).partial_sector_writes == 0
                       for rep, _ in k.classes), (algo, k.name)


def test_the_h200_cost_is_the_committed_probe_s():
    got = _derive()
    assert got["partial_writes"] == 864_000
    for name in ("h200", "h200-calibrated"):
        assert load_gpu(name).dram_partial_sector_write_cost_bytes == \
            pytest.approx(got["cost_bytes"], abs=0.05)


def test_a_gpu_without_the_figure_charges_nothing():
    from iosim.machine import partial_sector_write_cost_bytes
    assert partial_sector_write_cost_bytes(load_gpu("a100")) == 0.0
    assert partial_sector_write_cost_bytes(H200) == pytest.approx(138.7)


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_both_engines_charge_partial_writes_to_dram_time(mode):
    free = H200.model_copy(update={"dram_partial_sector_write_cost_bytes": None})
    p = AttentionProblem(batch=1, heads_q=4, seq_q=3000, head_dim=64, dtype="fp16")
    s = build_schedule(p, H200, "standard")
    with_cost = simulate(s, H200, mode).kernels[0]
    without = simulate(s, free, mode).kernels[0]
    partial = sum(count * program_totals(s.kernels[0].program(rep)).partial_sector_writes
                  for rep, count in s.kernels[0].classes)
    extra_dram_s = partial * 138.7 / H200.dram_read_bandwidth_bytes_per_s
    # the S = QK^T kernel is store-heavy: its time grows by a good part of the extra DRAM
    # time, and never by more than it
    grown = with_cost.time_s - without.time_s
    assert 0.3 * extra_dram_s < grown <= 1.02 * extra_dram_s
    assert with_cost.dram_write_bytes == pytest.approx(without.dram_write_bytes)


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_aligned_problems_do_not_move(mode):
    free = H200.model_copy(update={"dram_partial_sector_write_cost_bytes": None})
    p = AttentionProblem(batch=1, heads_q=4, seq_q=3072, head_dim=64, dtype="fp16")
    s = build_schedule(p, H200, "standard")
    assert simulate(s, H200, mode).time_s == simulate(s, free, mode).time_s


def test_a_store_writes_no_partial_sectors_unless_told():
    assert Store("O", (0,), 1, 1, 2).partial_sectors == 0


def test_pitch_off_16_bytes_is_noted_on_hopper_only():
    p = AttentionProblem(batch=1, heads_q=2, seq_q=3500, head_dim=64, dtype="fp16")
    assert any("TMA" in n for n in build_schedule(p, H200, "standard").notes)
    assert not any("TMA" in n for n in build_schedule(p, load_gpu("a100"), "standard").notes)
    q = AttentionProblem(batch=1, heads_q=2, seq_q=3000, head_dim=64, dtype="fp16")
    assert not any("TMA" in n for n in build_schedule(q, H200, "standard").notes)


# ---- rows off the 128-byte line: the softmax's plain row streams ------------------------------
def test_the_h200_line_factor_is_the_committed_probe_s():
    got = _derive("line_misaligned_factor.py")
    assert len(got["group_ratios"]) == 4 and all(r > 1.05 for r in got["group_ratios"])
    for name in ("h200", "h200-calibrated"):
        assert load_gpu(name).dram_line_misaligned_stream_factor == \
            pytest.approx(got["factor"], abs=5e-4)


@pytest.mark.parametrize("n, misaligned", [(3000, True), (2000, True), (2944, False),
                                           (2048, False), (5000, True), (3008, False)])
def test_the_softmax_streams_are_flagged_when_rows_start_off_the_line(n, misaligned):
    p = AttentionProblem(batch=1, heads_q=2, seq_q=n, head_dim=64, dtype="fp16")
    sm = build_schedule(p, H200, "standard").kernels[1]
    assert sm.name == "std_fwd_softmax"
    t = program_totals(sm.program(0))
    assert (t.misaligned_load_bytes["S"] == t.load_bytes["S"] > 0) is misaligned
    assert (t.misaligned_store_bytes == t.bytes_stored > 0) is misaligned
    # the GEMMs' TMA tiles are never flagged
    qk = build_schedule(p, H200, "standard").kernels[0]
    assert not program_totals(qk.program(0)).misaligned_load_bytes


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_both_engines_slow_a_misaligned_softmax_by_the_factor(mode):
    plain = H200.model_copy(update={"dram_line_misaligned_stream_factor": None})
    p = AttentionProblem(batch=1, heads_q=8, seq_q=3000, head_dim=64, dtype="fp16")
    s = build_schedule(p, H200, "standard")
    slow = simulate(s, H200, mode).kernels[1]
    base = simulate(s, plain, mode).kernels[1]
    assert slow.name == "std_fwd_softmax" and base.bound_by == "dram"
    # DRAM-bound: the kernel takes (nearly) the factor longer, never more
    assert 1.10 < slow.time_s / base.time_s <= 1.161 + 1e-6
    q = AttentionProblem(batch=1, heads_q=8, seq_q=3072, head_dim=64, dtype="fp16")
    s = build_schedule(q, H200, "standard")
    assert simulate(s, H200, mode).kernels[1].time_s == simulate(s, plain, mode).kernels[1].time_s


def test_dram_busy_and_the_breakdown_carry_the_penalty():
    # the DRAM busy time the run reports includes what the engines charge, and the breakdown
    # names it; an aligned problem has none
    from iosim.machine import dram_busy_s, time_breakdown
    free = H200.model_copy(update={"dram_line_misaligned_stream_factor": None,
                                   "dram_partial_sector_write_cost_bytes": None})
    p = AttentionProblem(batch=1, heads_q=4, seq_q=3000, head_dim=64, dtype="fp16")
    s = build_schedule(p, H200, "standard")
    r = simulate(s, H200, "exact")
    qk, sm = r.kernels[0], r.kernels[1]
    partial = sum(count * program_totals(s.kernels[0].program(rep)).partial_sector_writes
                  for rep, count in s.kernels[0].classes)
    assert qk.busy_s["dram"] == pytest.approx(
        dram_busy_s(H200, qk.dram_read_bytes, qk.dram_write_bytes)
        + partial * 138.7 / H200.dram_read_bandwidth_bytes_per_s)
    assert sm.busy_s["dram"] > dram_busy_s(H200, sm.dram_read_bytes, sm.dram_write_bytes) * 1.1
    b = time_breakdown(s, H200, r)
    assert b["dram_access_penalty_s"] > 0
    assert b["dram_access_penalty_s"] == pytest.approx(
        sum(k["dram_access_penalty_s"] for k in b["kernels"]))
    q = AttentionProblem(batch=1, heads_q=4, seq_q=3072, head_dim=64, dtype="fp16")
    sq = build_schedule(q, H200, "standard")
    assert time_breakdown(sq, H200, simulate(sq, H200, "exact"))["dram_access_penalty_s"] == 0
    rf = simulate(s, free, "exact")
    assert rf.kernels[0].busy_s["dram"] == pytest.approx(
        dram_busy_s(free, rf.kernels[0].dram_read_bytes, rf.kernels[0].dram_write_bytes))


def test_the_penalty_follows_the_dram_share_of_each_stream():
    # a kernel that loaded 4 MB (1 MB of it misaligned) and stored 2 MB (all misaligned), with
    # 2 MB read from DRAM (half its loads) and 0.5 MB written back (a quarter of its stores),
    # and 1000 partial-sector writes: the misaligned loads pay 0.161 on their DRAM half, the
    # stores 0.161 on their written-back quarter at a written byte's cost, by hand
    from collections import Counter
    from iosim.machine import dram_access_penalty_s, dram_write_cost
    from iosim.schedule import Totals
    t = Totals(load_bytes=Counter({"S": 1_000_000, "Q": 3_000_000}),
               store_bytes=Counter({"P": 2_000_000}), partial_sector_writes=1000,
               misaligned_load_bytes=Counter({"S": 1_000_000}), misaligned_store_bytes=2_000_000)
    wc = dram_write_cost(H200)
    assert wc > 1.05                              # so a dropped write cost shows
    by_hand = 0.161 * 500_000 + 0.161 * 500_000 * wc + 1000 * 138.7
    got = dram_access_penalty_s(H200, t, read_bytes=2_000_000, write_bytes=500_000)
    assert got * H200.dram_read_bandwidth_bytes_per_s == pytest.approx(by_hand, rel=1e-6)
    # more DRAM bytes than the streams moved (other tensors' misses): the share is capped at 1
    got = dram_access_penalty_s(H200, t, read_bytes=8_000_000, write_bytes=4_000_000)
    assert got * H200.dram_read_bandwidth_bytes_per_s == pytest.approx(
        0.161 * 1_000_000 + 0.161 * 2_000_000 * wc + 1000 * 138.7, rel=1e-6)
