"""Square tiling (small cache, M < d²): exact counts and the Θ(N²d/√M) scaling."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from iosim import AttentionProblem, IosimError, build_schedule, load_gpu
from mask_reference import block_kinds

H100 = load_gpu("h100")
F32 = 4


def expected(p, br, bc):
    """Per visited (i, j): Q_i, K_j, V_j read once, O_i written, and read unless j = 0 (O is
    still zero); LSE written once per row; rows that see no key write O = 0 once."""
    d, eb, heads = p.head_dim, p.elem_bytes, p.batch * p.heads_q
    vis = block_kinds(p.seq_q, p.seq_kv, br, bc, p.causal) > 0
    rq = np.array([min(br, p.seq_q - i * br) for i in range(vis.shape[0])])
    rkv = np.array([min(bc, p.seq_kv - j * bc) for j in range(vis.shape[1])])
    q_rows = int((vis * rq[:, None]).sum())
    kv_rows = int((vis * rkv[None, :]).sum())
    o_read_rows = int((vis[:, 1:] * rq[:, None]).sum())
    unvisited_rows = int(rq[~vis.any(axis=1)].sum())
    return dict(
        loads={k: v for k, v in {"Q": heads * q_rows * d * eb, "K": heads * kv_rows * d * eb,
                                 "V": heads * kv_rows * d * eb,
                                 "O": heads * o_read_rows * d * eb}.items() if v},
        stores={"O": heads * (q_rows + unvisited_rows) * d * eb, "LSE": heads * p.seq_q * F32},
        flops=heads * int(vis.sum()) * 4 * br * bc * d)


problems = st.builds(
    lambda b, hkv, g, nq, nkv, d, causal: AttentionProblem(
        batch=b, heads_q=hkv * g, heads_kv=hkv, seq_q=nq, seq_kv=nkv, head_dim=d, causal=causal),
    st.integers(1, 2), st.integers(1, 2), st.sampled_from([1, 2, 4]), st.integers(1, 500),
    st.integers(1, 500), st.sampled_from([64, 128]), st.booleans())
tiles = st.sampled_from([None, (16, 16), (20, 30), (48, 48), (40, 24)])


@settings(max_examples=60, deadline=None)
@given(problems, tiles)
def test_forward_totals_equal_the_closed_form(p, tile):
    over = {} if tile is None else dict(block_q=tile[0], block_kv=tile[1])
    s = build_schedule(p, H100, "square", **over)
    t = s.tiling["fwd"]
    want = expected(p, t.block_q, t.block_kv)
    got = s.totals()
    assert dict(got.load_bytes) == want["loads"]
    assert dict(got.store_bytes) == want["stores"]
    assert got.mma_flops == want["flops"]


@pytest.mark.parametrize("smem_bytes,side", [
    (3 * 32 * 32 * 2 + 8 * 32, 32),     # Q chunk + K chunk + S tile (fp16) + m, l (fp32)
    (3 * 64 * 64 * 2 + 8 * 64, 64),
    (3 * 64 * 64 * 2, 63),              # m and l no longer fit beside three 64² tiles
    (232448, 196)])                     # H100: ⌊√(116224/3)⌋ = 196
def test_default_side_is_the_root_of_a_third_of_the_cache(smem_bytes, side):
    gpu = H100.with_(shared_memory_per_block_bytes=smem_bytes)
    t = build_schedule(AttentionProblem(head_dim=128), gpu, "square").tiling["fwd"]
    assert (t.block_q, t.block_kv) == (side, side)


def test_io_scales_as_n_squared_d_over_root_m():
    p = AttentionProblem(heads_q=1, seq_q=8192, head_dim=256)
    moved = {}
    for side in (16, 64):
        m_elems = 3 * side ** 2
        gpu = H100.with_(shared_memory_per_block_bytes=m_elems * 2 + 8 * side)
        assert build_schedule(p, gpu, "square").tiling["fwd"].block_q == side
        t = build_schedule(p, gpu, "square").totals()
        moved[m_elems] = t.bytes_loaded + t.bytes_stored
        # ≈ 5 tiles of B×d per (i, j) pair: 5·N²·d/B elements = 5·√3·N²·d/√M
        ratio = moved[m_elems] / 2 / (p.seq_q ** 2 * 256 / math.sqrt(m_elems))
        assert ratio == pytest.approx(5 * math.sqrt(3), rel=0.03)
    assert moved[3 * 16 ** 2] / moved[3 * 64 ** 2] == pytest.approx(4, rel=0.03)   # √16 = 4


def test_beats_fa1_style_tiles_when_the_cache_is_below_d_squared():
    # M = 3·32² + 128 = 3200 elements < d² = 256²: square tiles are 32×32, while a Q-outer
    # FlashAttention tiling must hold a full-width Q block and K, V blocks: Br·d + 2·Bc·d ≤ M
    # allows Br = Bc = 4 (FA-1's Bc = ⌈M/4d⌉ = 4 too)
    p = AttentionProblem(heads_q=1, seq_q=4096, head_dim=256)
    gpu = H100.with_(shared_memory_per_block_bytes=3 * 32 * 32 * 2 + 8 * 32)
    square = build_schedule(p, gpu, "square").totals()
    assert build_schedule(p, gpu, "square").tiling["fwd"].block_q == 32
    # Q and O once, K and V once per Q block (T_r = N/4)
    fa_like = 4096 * 256 * 2 * (1 + 2 * math.ceil(4096 / 4)) + 4096 * 256 * 2
    assert square.bytes_loaded + square.bytes_stored < fa_like


def test_class_totals_equal_enumerated_totals():
    for causal in (False, True):
        p = AttentionProblem(batch=2, heads_q=4, heads_kv=2, seq_q=150, seq_kv=100, head_dim=64,
                             causal=causal)
        k = build_schedule(p, H100, "square", block_q=24, block_kv=40).kernels[0]
        assert k.totals() == k.totals_by_enumeration()


def test_a_tiling_too_big_for_shared_memory_is_refused_naming_one_that_fits():
    with pytest.raises(IosimError, match=r"shared memory.*196×196 would fit"):
        build_schedule(AttentionProblem(), H100, "square", block_q=1000, block_kv=1000)


def test_backward_is_refused():
    with pytest.raises(IosimError, match="forward pass only"):
        build_schedule(AttentionProblem(direction="bwd"), H100, "square")
