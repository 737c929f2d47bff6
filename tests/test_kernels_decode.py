"""Launch arithmetic of the Flash-Decoding kernels and their float64 reference (CPU only)."""
from __future__ import annotations

import numpy as np
import pytest

from iosim.errors import IosimError
from iosim.kernels.decode import DecodeLaunch, random_decode_inputs, reference, splits_heuristic


def _launch(**kw):
    base = dict(batch=1, heads_q=8, heads_kv=8, seq_q=1, seqlens=(1000,))
    base.update(kw)
    return DecodeLaunch(**base)


def test_chunks_cover_every_block_once_and_in_order():
    L = _launch(splits=3)
    assert [L.block_range(1000, s) for s in range(3)] == [(0, 6), (6, 12), (12, 16)]


def test_splits_shrink_so_the_longest_request_has_no_empty_chunk():
    L = _launch(splits=6, seqlens=(640,))         # 10 blocks: 2 per chunk -> 5 chunks
    assert (L.per_split, L.n_splits) == (2, 5)


def test_a_shorter_request_leaves_its_last_chunks_empty():
    L = _launch(batch=2, seqlens=(1000, 65), splits=4)
    assert [L.block_range(65, s) for s in range(4)] == [(0, 2), (2, 2), (2, 2), (2, 2)]


def test_a_shared_prefix_adds_its_blocks_before_the_requests_own():
    L = _launch(batch=2, seqlens=(600, 300), prefix_len=130)
    assert (L.n_blocks(600), L.n_blocks(300), L.own_max) == (3 + 8, 3 + 3, 470)


def test_gqa_packing_puts_a_groups_query_rows_in_one_tile():
    L = _launch(batch=2, heads_q=32, heads_kv=4, seq_q=2, seqlens=(4096, 4096), splits=5)
    assert (L.rows, L.n_m, L.split_grid, L.combine_grid) == (16, 1, (5, 4, 2), (1, 4, 2))
    assert L.smem_bytes == 2 * 128 * (16 + 2 * 3 * 64)      # 102,400 B: two CTAs per SM


def test_more_rows_than_block_q_make_several_q_tiles():
    L = _launch(heads_q=64, heads_kv=8, seq_q=5, block_q=32)
    assert (L.rows, L.n_m, L.split_grid) == (40, 2, (1, 16, 1))


def test_block_q_other_than_16_or_32_is_refused():
    with pytest.raises(IosimError, match="16 or 32"):
        _launch(block_q=64)


def test_page_size_must_be_a_power_of_two():
    with pytest.raises(IosimError, match="power of two"):
        _launch(page_size=48)


def test_heuristic_does_not_split_a_grid_that_fills_the_gpu():
    assert splits_heuristic(64 * 8, sms=132, ctas_per_sm=2, n_blocks=256) == 1


def test_heuristic_splits_one_request_into_about_one_wave():
    s = splits_heuristic(8, sms=132, ctas_per_sm=2, n_blocks=256)
    assert 0.85 <= 8 * s / 264 <= 1.0


def test_reference_of_a_single_key_returns_its_value():
    L = _launch(heads_q=4, heads_kv=2, seqlens=(1,), page_size=16)
    host = random_decode_inputs(L, np.random.default_rng(0))
    from iosim.kernels.reference import from_storage
    o, lse = reference(host, L)
    page = host["block_table"][0, 0]
    v = from_storage(host["V"][page, :, 0], "fp16")       # [Hkv][D]
    assert np.allclose(o[0, :, 0], np.repeat(v, 2, axis=0))
    q = from_storage(host["Q"][0, :, 0], "fp16")
    k = from_storage(host["K"][page, :, 0], "fp16")
    assert np.allclose(lse[0, :, 0], (q * np.repeat(k, 2, axis=0)).sum(-1) / np.sqrt(128))


def test_shuffled_pages_use_every_page_once():
    L = _launch(batch=3, heads_q=4, heads_kv=4, seqlens=(100, 100, 100), page_size=16)
    host = random_decode_inputs(L, np.random.default_rng(0))
    assert sorted(host["block_table"].ravel()) == list(range(3 * 7))
    assert host["K"].shape == (21, 4, 16, 128)
