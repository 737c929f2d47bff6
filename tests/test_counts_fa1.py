"""FA-1 counts against closed forms derived here (Algorithms 1 and 4 of the FA-1 paper)."""
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from iosim import AttentionProblem, IosimError, build_schedule, load_gpu
from mask_reference import block_kinds, valid_rows

H100 = load_gpu("h100")
A100 = load_gpu("a100")
F32 = 4


def pair_rows(p, br, bc):
    """(visited pairs, Σ over visited pairs of the Q block's valid rows)."""
    vis = block_kinds(p.seq_q, p.seq_kv, br, bc, p.causal) > 0
    return int(vis.sum()), int((vis * valid_rows(p.seq_q, br)[:, None]).sum())


def fwd_expected(p, br, bc, warps=4):
    d, eb, heads = p.head_dim, p.elem_bytes, p.batch * p.heads_q
    n, q_rows = pair_rows(p, br, bc)
    # fa1_fwd.cu: S in chunks of the largest of 64, 32, 16 columns dividing Bc, one running-max
    # rescale exp per row per chunk; WN warps per 16-row tile merged with 2 exps per row each
    chunks = bc // next(c for c in (64, 32, 16) if bc % c == 0)
    wn = warps // min(warps, br // 16)
    nq, nkv = p.seq_q, p.seq_kv
    return dict(
        # K_j, V_j once per j; Q_i, O_i, l_i, m_i once per visited (i, j)
        loads={"K": heads * nkv * d * eb, "V": heads * nkv * d * eb,
               "Q": heads * q_rows * d * eb, "O": heads * q_rows * d * eb,
               "l": heads * q_rows * F32, "m": heads * q_rows * F32},
        # initialisation (O = 0, l = 0, m = −∞), then O_i, l_i, m_i at every visited (i, j)
        stores={"O": heads * (nq + q_rows) * d * eb, "l": heads * (nq + q_rows) * F32,
                "m": heads * (nq + q_rows) * F32},
        flops=heads * n * 4 * br * bc * d,
        exp=heads * n * (br * bc + chunks * br + 2 * br + 2 * (wn - 1) * br))


def bwd_expected(p, br, bc):
    d, eb, heads, g = p.head_dim, p.elem_bytes, p.batch * p.heads_q, p.group_size
    n, q_rows = pair_rows(p, br, bc)
    nq, nkv = p.seq_q, p.seq_kv
    loads = Counter({"K": heads * nkv * d * eb, "V": heads * nkv * d * eb,
                     "Q": heads * q_rows * d * eb, "O": heads * q_rows * d * eb,
                     "dO": heads * q_rows * d * eb, "l": heads * q_rows * F32,
                     "m": heads * q_rows * F32,
                     "dQaccum": heads * (q_rows + nq) * d * F32})   # every step + the convert
    stores = Counter({"dQaccum": heads * (nq + q_rows) * d * F32,   # zero-fill + every step
                      "dQ": heads * nq * d * eb})
    per_q_head = heads * nkv * d * eb
    if g == 1:
        stores.update({"dK": per_q_head, "dV": per_q_head})
    else:
        stores.update({"dK_expanded": per_q_head, "dV_expanded": per_q_head,
                       "dK": per_q_head // g, "dV": per_q_head // g})
        loads.update({"dK_expanded": per_q_head, "dV_expanded": per_q_head})
    return dict(loads=dict(loads), stores=dict(stores), flops=heads * n * 10 * br * bc * d,
                exp=heads * n * br * bc)


problems = st.builds(
    lambda b, hkv, g, nq, nkv, d, causal: AttentionProblem(
        batch=b, heads_q=hkv * g, heads_kv=hkv, seq_q=nq, seq_kv=nkv, head_dim=d, causal=causal),
    st.integers(1, 2), st.integers(1, 2), st.sampled_from([1, 2, 4]), st.integers(1, 700),
    st.integers(1, 700), st.sampled_from([64, 128]), st.booleans())
tiles = st.sampled_from([None, (64, 64), (128, 224), (32, 128), (48, 80)])


def build(p, tile):
    over = {} if tile is None else dict(block_q=tile[0], block_kv=tile[1])
    return build_schedule(p, H100, "fa1", **over)


@settings(max_examples=60, deadline=None)
@given(problems, tiles)
def test_forward_totals_equal_the_closed_form(p, tile):
    s = build(p, tile)
    t = s.tiling["fwd"]
    want = fwd_expected(p, t.block_q, t.block_kv, t.warps)
    got = s.totals()
    assert dict(got.load_bytes) == want["loads"]
    assert dict(got.store_bytes) == want["stores"]
    assert (got.mma_flops, got.exp) == (want["flops"], want["exp"])


@settings(max_examples=50, deadline=None)
@given(problems.map(lambda p: p.with_(direction="bwd")), st.sampled_from([None, (64, 64), (32, 48)]))
def test_backward_totals_equal_the_closed_form(p, tile):
    s = build(p, tile)
    t = s.tiling["bwd"]
    want = bwd_expected(p, t.block_q, t.block_kv)
    got = s.totals()
    assert dict(got.load_bytes) == want["loads"]
    assert dict(got.store_bytes) == want["stores"]
    assert (got.mma_flops, got.exp) == (want["flops"], want["exp"])


@pytest.mark.parametrize("gpu,d,want", [
    # M = smem per block / 2 B; Bc = ⌈M/4d⌉ rounded down to 16; Br = min(Bc, d)
    (H100, 128, (128, 224)),   # M = 116224: ⌈116224/512⌉ = 227
    (H100, 64, (64, 448)),     # ⌈116224/256⌉ = 454
    (H100, 256, (112, 112)),   # ⌈116224/1024⌉ = 114
    (A100, 128, (128, 160)),   # M = 83456: ⌈83456/512⌉ = 163
])
def test_default_forward_blocks_are_the_papers(gpu, d, want):
    s = build_schedule(AttentionProblem(head_dim=d), gpu, "fa1")
    assert (s.tiling["fwd"].block_q, s.tiling["fwd"].block_kv) == want
    assert s.notes == ()


def test_block_overrides_set_br_and_bc():
    s = build_schedule(AttentionProblem(head_dim=128), H100, "fa1", block_q=64, block_kv=96)
    assert (s.tiling["fwd"].block_q, s.tiling["fwd"].block_kv) == (64, 96)


def test_noncausal_forward_moves_o_twice_per_block_pair_and_kv_once():
    # N = 1024, Br = Bc = 128: T_r = T_c = 8; per head K + V once, Q and O read 8 times,
    # O written 8 times plus its initialisation
    p = AttentionProblem(heads_q=1, seq_q=1024, head_dim=128)
    got = build_schedule(p, H100, "fa1", block_q=128, block_kv=128).totals()
    tensor = 1024 * 128 * 2
    assert got.load_bytes["K"] == got.load_bytes["V"] == tensor
    assert got.load_bytes["Q"] == got.load_bytes["O"] == 8 * tensor
    assert got.store_bytes["O"] == 9 * tensor


def test_at_equal_tiles_fa1_moves_three_halves_of_fa2s_loads_and_stores_o_every_step():
    # per visited (i, j) pair: FA-1 reads Q_i and O_i and writes O_i (3·B·d), FA-2 reads
    # K_j and V_j (2·B·d); FA-1 writes O T_c + 1 times, FA-2 once
    p = AttentionProblem(batch=1, heads_q=4, seq_q=4096, head_dim=128)
    fa1 = build_schedule(p, H100, "fa1", block_q=128, block_kv=128).totals()
    fa2 = build_schedule(p, H100, "fa2", block_q=128, block_kv=128, warps=8).totals()
    pairs_bytes = 4 * 32 * 32 * 128 * 128 * 2
    assert fa1.load_bytes["Q"] + fa1.load_bytes["O"] + fa1.store_bytes["O"] == \
        3 * pairs_bytes + p.o_bytes()
    assert fa2.load_bytes["K"] + fa2.load_bytes["V"] == 2 * pairs_bytes
    assert fa1.store_bytes["O"] == 33 * fa2.store_bytes["O"] == 33 * p.o_bytes()


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("shape", [
    dict(batch=2, heads_q=4, heads_kv=2, seq_q=200, seq_kv=330, causal=True),
    dict(batch=1, heads_q=2, seq_q=257, seq_kv=100, causal=True),
    dict(batch=2, heads_q=3, seq_q=130, seq_kv=130, causal=False)])
def test_class_totals_equal_enumerated_totals_for_every_kernel(direction, shape):
    p = AttentionProblem(head_dim=64, direction=direction, **shape)
    for k in build_schedule(p, H100, "fa1", block_q=64, block_kv=48).kernels:
        assert k.totals() == k.totals_by_enumeration(), k.name


def test_a_tiling_too_big_for_shared_memory_is_refused_naming_one_that_fits():
    with pytest.raises(IosimError, match=r"shared memory.*would fit"):
        build_schedule(AttentionProblem(head_dim=128), H100, "fa1", block_q=256, block_kv=1024)


def test_the_backward_pass_falls_back_from_the_papers_blocks_and_says_so():
    s = build_schedule(AttentionProblem(head_dim=128, direction="bwd"), H100, "fa1")
    t = s.tiling["bwd"]
    assert t.block_q * t.block_kv < 128 * 224
    assert any("128×224" in n for n in s.notes)
