"""FA-2 counts against closed forms derived here from the elementwise mask (not the generator)."""
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from iosim import AttentionProblem, IosimError, build_schedule, load_gpu
from mask_reference import block_kinds, valid_rows

H100 = load_gpu("h100")
F32 = 4


def fwd_expected(p, br, bc):
    d, eb, heads = p.head_dim, p.elem_bytes, p.batch * p.heads_q
    kinds = block_kinds(p.seq_q, p.seq_kv, br, bc, p.causal)
    vis = kinds > 0
    rkv = valid_rows(p.seq_kv, bc)
    kv_rows = int((vis * rkv[None, :]).sum())            # K_j rows streamed past all Q blocks
    ragged_col = np.zeros(kinds.shape[1], bool)
    ragged_col[-1] = p.seq_kv % bc != 0
    masked = int(((kinds == 1) | (vis & ragged_col[None, :])).sum())
    n = int(vis.sum())
    return dict(
        loads={"Q": heads * p.seq_q * d * eb, "K": heads * kv_rows * d * eb,
               "V": heads * kv_rows * d * eb},
        stores={"O": heads * p.seq_q * d * eb, "LSE": heads * p.seq_q * F32},
        flops=heads * n * 4 * br * bc * d,
        exp=heads * n * (br * bc + br),
        alu=heads * (n * (3 * br * bc + br * d) + masked * br * bc + kinds.shape[0] * br * d))


def bwd_expected(p, br, bc):
    d, eb, heads, g = p.head_dim, p.elem_bytes, p.batch * p.heads_q, p.group_size
    kinds = block_kinds(p.seq_q, p.seq_kv, br, bc, p.causal)
    vis = kinds > 0
    rq = valid_rows(p.seq_q, br)
    q_rows = int((vis * rq[:, None]).sum())              # Q_i rows streamed past all KV blocks
    n = int(vis.sum())
    nq, nkv = p.seq_q, p.seq_kv
    loads = Counter({"O": heads * nq * d * eb, "dO": heads * nq * d * eb,           # preprocess
                     "K": heads * nkv * d * eb, "V": heads * nkv * d * eb})         # once per CTA
    loads.update({"Q": heads * q_rows * d * eb, "dO": heads * q_rows * d * eb,
                  "LSE": heads * q_rows * F32, "D": heads * q_rows * F32,
                  "dQaccum": heads * nq * d * F32})                                # convert
    stores = Counter({"D": heads * nq * F32, "dQaccum": heads * nq * d * F32,       # zero-fill
                      "dQ": heads * nq * d * eb})
    stores["dQaccum"] += heads * q_rows * d * F32                                   # atomics
    if g == 1:
        stores.update({"dK": heads * nkv * d * eb, "dV": heads * nkv * d * eb})
    else:
        per_q_head = heads * nkv * d * eb
        stores.update({"dK_expanded": per_q_head, "dV_expanded": per_q_head,
                       "dK": per_q_head // g, "dV": per_q_head // g})
        loads.update({"dK_expanded": per_q_head, "dV_expanded": per_q_head})
    return dict(loads=dict(loads), stores=dict(stores), flops=heads * n * 10 * br * bc * d,
                exp=heads * n * br * bc)


problems = st.builds(
    lambda b, hkv, g, nq, nkv, d, causal, dtype: AttentionProblem(
        batch=b, heads_q=hkv * g, heads_kv=hkv, seq_q=nq, seq_kv=nkv, head_dim=d,
        causal=causal, dtype=dtype),
    st.integers(1, 2), st.integers(1, 2), st.sampled_from([1, 2, 4]), st.integers(1, 700),
    st.integers(1, 700), st.sampled_from([64, 128]), st.booleans(), st.sampled_from(["fp16", "fp8"]))
tiles = st.sampled_from([(128, 64), (64, 64), (128, 32), (64, 128), (32, 32)])


@settings(max_examples=60, deadline=None)
@given(problems, tiles)
def test_forward_totals_equal_the_closed_form(p, tile):
    s = build_schedule(p, H100, "fa2", block_q=tile[0], block_kv=tile[1])
    t = s.tiling["fwd"]
    want = fwd_expected(p, t.block_q, t.block_kv)
    got = s.totals()
    assert dict(got.load_bytes) == want["loads"]
    assert dict(got.store_bytes) == want["stores"]
    assert (got.mma_flops, got.exp, got.alu) == (want["flops"], want["exp"], want["alu"])


@settings(max_examples=50, deadline=None)
@given(problems.map(lambda p: p.with_(dtype="fp16" if p.dtype == "fp8" else p.dtype, direction="bwd")), tiles)
def test_backward_totals_equal_the_closed_form(p, tile):
    s = build_schedule(p, H100, "fa2", block_q=tile[0], block_kv=tile[1])
    t = s.tiling["bwd"]
    want = bwd_expected(p, t.block_q, t.block_kv)
    got = s.totals()
    assert dict(got.load_bytes) == want["loads"]
    assert dict(got.store_bytes) == want["stores"]
    assert (got.mma_flops, got.exp) == (want["flops"], want["exp"])


@pytest.mark.parametrize("n,br,bc", [(4096, 128, 64), (1000, 128, 64), (777, 64, 64)])
def test_noncausal_forward_reads_q_once_and_kv_once_per_q_block(n, br, bc):
    # the closed form: Q + T_r·(K + V) per head, T_r = ⌈N/Br⌉ (ragged included)
    p = AttentionProblem(batch=2, heads_q=8, heads_kv=2, seq_q=n, head_dim=128)
    s = build_schedule(p, H100, "fa2", block_q=br, block_kv=bc)
    per_head_q = n * 128 * 2
    per_head_kv = 2 * n * 128 * 2
    t_r = -(-n // br)
    assert s.totals().bytes_loaded == 16 * (per_head_q + t_r * per_head_kv)


def test_causal_square_forward_visits_the_lower_triangle_of_blocks():
    # N = 1024, 128×128 tiles: 8 Q blocks visit 1 + 2 + ... + 8 = 36 KV blocks
    p = AttentionProblem(heads_q=1, seq_q=1024, head_dim=64, causal=True)
    s = build_schedule(p, H100, "fa2", block_q=128, block_kv=128, warps=8)
    assert s.totals().mma_flops == 36 * 4 * 128 * 128 * 64
    assert s.totals().load_bytes["K"] == 36 * 128 * 64 * 2


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("shape", [
    dict(batch=2, heads_q=4, heads_kv=2, seq_q=200, seq_kv=330, causal=True),
    dict(batch=1, heads_q=2, seq_q=257, seq_kv=100, causal=True),
    dict(batch=2, heads_q=3, seq_q=130, seq_kv=130, causal=False)])
def test_class_totals_equal_enumerated_totals_for_every_kernel(direction, shape):
    p = AttentionProblem(head_dim=64, direction=direction, **shape)
    for k in build_schedule(p, H100, "fa2", block_q=64, block_kv=64).kernels:
        assert k.totals() == k.totals_by_enumeration(), k.name


def test_a_tiling_too_big_for_shared_memory_is_refused_naming_one_that_fits():
    p = AttentionProblem(head_dim=256)
    with pytest.raises(IosimError, match=r"shared memory.*would fit"):
        build_schedule(p, H100, "fa2", block_q=256, block_kv=256, stages=4)


def test_shared_memory_operand_reads_follow_the_mma_sync_warp_layout():
    # 4 warps split the 128 Q rows: per KV step S = Q·Kᵀ reads Q (128×128) once and K
    # (64×128) once per warp; O += P·V keeps P in registers and reads V once per warp.
    # 4 heads × 8 Q blocks × 16 KV blocks = 512 steps, fp16.
    from iosim.analysis.counters import count
    c = count(build_schedule(AttentionProblem(seq_q=1024, heads_q=4), H100, "fa2"))
    assert c.smem_read_bytes_estimate == 512 * (128 * 128 + 4 * 64 * 128 + 4 * 64 * 128) * 2
