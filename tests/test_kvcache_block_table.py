"""Paged flash-decoding reads its block table: one Load of `block_table` per own K tile, 4 bytes
per page the tile touches, read one tile ahead (not indirect: nothing waits for it); an indirect
load (the earlier kernel's table read right before each tile's copies) holds the copies."""
from dataclasses import replace

import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.analysis.counters import count
from iosim.schedule import Load, Loop, Schedule
from iosim.sim import simulate

H200 = load_gpu("h200")


def _paged(page, lens=(1000, 300), bc=128):
    p = AttentionProblem(batch=len(lens), heads_q=8, heads_kv=2, seq_q=1, seq_kv=max(lens),
                         seq_kv_list=lens, page_size=page, page_layout="shuffled")
    return p, build_schedule(p, H200, "flash-decoding", block_kv=bc, stages=2, splits=1)


@pytest.mark.parametrize("page", [16, 64])
def test_block_table_bytes_are_4_per_page_per_kv_head_when_pages_are_smaller_than_a_tile(page):
    p, s = _paged(page)
    # every (b, hk) CTA reads the entries of all ⌈L_b / page⌉ pages of its request once
    expected = p.heads_kv * sum(4 * -(-n // page) for n in (1000, 300))
    assert count(s).l2_to_smem_bytes_by_tensor["block_table"] == expected


def test_block_table_bytes_are_4_per_tile_when_a_tile_lies_in_one_page():
    p, s = _paged(256)
    expected = p.heads_kv * sum(4 * -(-n // 128) for n in (1000, 300))
    assert count(s).l2_to_smem_bytes_by_tensor["block_table"] == expected


def test_contiguous_decode_reads_no_block_table():
    p = AttentionProblem(batch=2, heads_q=8, heads_kv=2, seq_q=1, seq_kv=1000)
    assert "block_table" not in count(build_schedule(p, H200, "flash-decoding")).l2_to_smem_bytes_by_tensor


def _set_indirect(schedule, flag: bool):
    def strip(items):
        return tuple(Loop(i.var, i.start, i.count, strip(i.body)) if isinstance(i, Loop)
                     else replace(i, indirect=flag) if isinstance(i, Load) and i.tensor == "block_table"
                     else i for i in items)
    kernels = tuple(replace(k, program=lambda cta, f=k.program: strip(f(cta))) for k in schedule.kernels)
    return Schedule(schedule.algorithm, schedule.problem, schedule.tiling, kernels, notes=schedule.notes)


def _one_stream(page=64):
    # one request, one KV head, one split: one CTA streams 32 tiles, latency-bound
    p = AttentionProblem(batch=1, heads_q=1, heads_kv=1, seq_q=1, seq_kv=4096, page_size=page)
    return build_schedule(p, H200, "flash-decoding", block_kv=128, stages=2, splits=1)


def _loads(items):
    for i in items:
        if isinstance(i, Loop):
            yield from _loads(i.body)
        elif isinstance(i, Load):
            yield i


def test_decode_table_reads_are_prefetched_not_indirect():
    s = _one_stream()
    table = [ld for k in s.kernels for ld in _loads(k.program(0)) if ld.tensor == "block_table"]
    assert table and not any(ld.indirect for ld in table)


def test_indirect_table_load_holds_each_tiles_copies_for_at_least_an_l2_round_trip():
    # with 2 stages each tile's issue waits the table's round trip, half of which the other
    # tile in flight cannot hide (period (T_table + L) / 2 instead of L / 2)
    s = _one_stream()
    with_wait = simulate(_set_indirect(s, True), H200, "exact").time_s
    without = simulate(s, H200, "exact").time_s
    tiles = 4096 // 128
    assert with_wait - without >= tiles * H200.l2_latency_s / 2


def _without_table(schedule):
    def strip(items):
        return tuple(Loop(i.var, i.start, i.count, strip(i.body)) if isinstance(i, Loop) else i
                     for i in items if not (isinstance(i, Load) and i.tensor == "block_table"))
    kernels = tuple(replace(k, program=lambda cta, f=k.program: strip(f(cta))) for k in schedule.kernels)
    return Schedule(schedule.algorithm, schedule.problem, schedule.tiling, kernels, notes=schedule.notes)


def test_prefetched_table_reads_cost_the_stream_under_one_percent():
    # the 32 table reads of 8 bytes ride with the tiles' copies: nothing waits for them
    s = _one_stream(64)
    paged = simulate(s, H200, "exact").time_s
    bare = simulate(_without_table(s), H200, "exact").time_s
    assert paged >= bare
    assert (paged - bare) / bare < 0.01
