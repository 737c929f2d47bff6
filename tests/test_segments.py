"""kv_segments / q_segments / block_kind against a brute-force elementwise causal mask."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from iosim import AttentionProblem
from iosim.algorithms.common import block_kind, kv_segments, q_segments, rows_in_block
from mask_reference import block_kinds

SKIP, PARTIAL, FULL = 0, 1, 2


def flatten(segments):
    """{block: (masked, ragged)} from a segment list, checking order and disjointness."""
    out, last = {}, -1
    for s in segments:
        assert s.start < s.stop and s.start > last
        last = s.stop - 1
        for x in range(s.start, s.stop):
            out[x] = (s.masked, s.ragged)
    return out


shapes = st.tuples(st.integers(1, 400), st.integers(1, 400),
                   st.sampled_from([16, 32, 48, 64, 128]), st.sampled_from([16, 32, 64, 80, 128]),
                   st.booleans())


@settings(max_examples=150, deadline=None)
@given(shapes)
def test_kv_segments_visit_exactly_the_unmasked_blocks_of_every_q_block(shape):
    nq, nkv, br, bc, causal = shape
    p = AttentionProblem(heads_q=1, seq_q=nq, seq_kv=nkv, head_dim=64, causal=causal)
    kinds = block_kinds(nq, nkv, br, bc, causal)
    n_kv = kinds.shape[1]
    for i in range(kinds.shape[0]):
        got = flatten(kv_segments(p, i, br, bc))
        want = {j: (kinds[i, j] == PARTIAL, j == n_kv - 1 and nkv % bc != 0)
                for j in range(n_kv) if kinds[i, j] != SKIP}
        assert got == want, (i, got, want)


@settings(max_examples=150, deadline=None)
@given(shapes)
def test_q_segments_visit_exactly_the_q_blocks_that_see_every_kv_block(shape):
    nq, nkv, br, bc, causal = shape
    p = AttentionProblem(heads_q=1, seq_q=nq, seq_kv=nkv, head_dim=64, causal=causal)
    kinds = block_kinds(nq, nkv, br, bc, causal)
    n_q = kinds.shape[0]
    for j in range(kinds.shape[1]):
        got = flatten(q_segments(p, j, br, bc))
        want = {i: (kinds[i, j] == PARTIAL, i == n_q - 1 and nq % br != 0)
                for i in range(n_q) if kinds[i, j] != SKIP}
        assert got == want, (j, got, want)


@settings(max_examples=100, deadline=None)
@given(shapes)
def test_block_kind_matches_the_elementwise_mask(shape):
    nq, nkv, br, bc, causal = shape
    p = AttentionProblem(heads_q=1, seq_q=nq, seq_kv=nkv, head_dim=64, causal=causal)
    kinds = block_kinds(nq, nkv, br, bc, causal)
    names = {SKIP: "skip", PARTIAL: "partial", FULL: "full"}
    for (i, j), k in np.ndenumerate(kinds):
        assert block_kind(p, i, j, br, bc) == names[k]


def test_causal_square_blocks_are_skip_above_partial_on_full_below_the_diagonal():
    kinds = block_kinds(256, 256, 64, 64, causal=True)
    want = np.tril(np.full((4, 4), FULL)) - np.eye(4, dtype=int)   # diagonal: PARTIAL
    assert (kinds == want).all()


@pytest.mark.parametrize("length,block", [(1, 16), (16, 16), (17, 16), (1000, 128), (4096, 64)])
def test_rows_in_block_cover_the_length_exactly(length, block):
    n = -(-length // block)
    rows = [rows_in_block(i, block, length) for i in range(n)]
    assert sum(rows) == length and all(0 < r <= block for r in rows)
    assert rows_in_block(n, block, length) == 0
