"""FA-3 forward: FA-2's per-CTA bytes on Hopper tiles, warp-specialized launch, reversed causal order."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from iosim import AttentionProblem, IosimError, build_schedule, load_gpu
from mask_reference import block_kinds

H100 = load_gpu("h100")
F32 = 4


problems = st.builds(
    lambda b, hkv, g, nq, nkv, d, causal: AttentionProblem(
        batch=b, heads_q=hkv * g, heads_kv=hkv, seq_q=nq, seq_kv=nkv, head_dim=d, causal=causal),
    st.integers(1, 2), st.integers(1, 2), st.sampled_from([1, 2, 4]), st.integers(1, 900),
    st.integers(1, 900), st.sampled_from([64, 128, 256]), st.booleans())


@settings(max_examples=60, deadline=None)
@given(problems)
def test_forward_totals_equal_the_closed_form(p):
    s = build_schedule(p, H100, "fa3")
    t = s.tiling["fwd"]
    br, bc, d, eb, heads = t.block_q, t.block_kv, p.head_dim, p.elem_bytes, p.batch * p.heads_q
    vis = block_kinds(p.seq_q, p.seq_kv, br, bc, p.causal) > 0
    rkv = np.array([min(bc, p.seq_kv - j * bc) for j in range(vis.shape[1])])
    kv_rows = int((vis * rkv[None, :]).sum())
    got = s.totals()
    assert dict(got.load_bytes) == {"Q": heads * p.seq_q * d * eb, "K": heads * kv_rows * d * eb,
                                    "V": heads * kv_rows * d * eb}
    assert dict(got.store_bytes) == {"O": heads * p.seq_q * d * eb, "LSE": heads * p.seq_q * F32}
    assert got.mma_flops == heads * int(vis.sum()) * 4 * br * bc * d
    assert got.exp == heads * int(vis.sum()) * (br * bc + br)


# stages: the project's FA-3 kernel at d 128 starves a 2-stage K/V ring (H200: 0.75-0.84x
# cuDNN with 2 stages, 0.98-1.06x with 3; benchmarks/results/fa3_NOTES.md), so d 97..128 use 3
@pytest.mark.parametrize("d,tile,threads,stages", [(64, (192, 128), 512, 2),
                                                   (128, (128, 128), 384, 3),
                                                   (256, (128, 80), 384, 2)])
def test_default_tiles_and_warpgroups(d, tile, threads, stages):
    k = build_schedule(AttentionProblem(head_dim=d), H100, "fa3").kernels[0]
    t = build_schedule(AttentionProblem(head_dim=d), H100, "fa3").tiling["fwd"]
    assert (t.block_q, t.block_kv) == tile
    assert k.launch.threads_per_cta == threads
    assert k.pipeline.warp_specialized and k.pipeline.intra_overlap and k.pipeline.stages == stages
    assert k.pipeline.consumer_warpgroups == threads // 128 - 1
    assert k.launch.registers_per_thread * threads <= H100.registers_per_sm


def test_same_tiles_give_fa2s_bytes():
    p = AttentionProblem(batch=2, heads_q=8, heads_kv=2, seq_q=1000, seq_kv=1500, causal=True)
    fa3 = build_schedule(p, H100, "fa3", block_q=128, block_kv=128).totals()
    fa2 = build_schedule(p, H100, "fa2", block_q=128, block_kv=128, warps=8).totals()
    assert (fa3.load_bytes, fa3.store_bytes, fa3.mma_flops) == \
        (fa2.load_bytes, fa2.store_bytes, fa2.mma_flops)


def test_causal_launch_order_is_heads_major_with_the_longest_q_blocks_first():
    p = AttentionProblem(batch=2, heads_q=3, seq_q=1024, head_dim=128, causal=True)
    k = build_schedule(p, H100, "fa3").kernels[0]
    n_q = 1024 // 128
    assert k.launch.grid == (n_q, 3, 2)
    assert [k.cta_coord(c) for c in range(n_q + 1)] == \
        [(n_q - 1 - x, 0, 0) for x in range(n_q)] + [(n_q - 1, 1, 0)]
    first, last = (sum(op.flops for op in _mmas(k.program(c))) for c in (0, n_q - 1))
    assert first == 8 * last   # Q block 7 visits 8 KV blocks, Q block 0 visits 1


def _mmas(program):
    from iosim.schedule import Mma, expand
    return [op for op in expand(program) if isinstance(op, Mma)]


def test_class_totals_equal_enumerated_totals():
    for causal in (False, True):
        p = AttentionProblem(batch=2, heads_q=4, heads_kv=2, seq_q=300, seq_kv=450, head_dim=64,
                             causal=causal)
        k = build_schedule(p, H100, "fa3").kernels[0]
        assert k.totals() == k.totals_by_enumeration()


def test_backward_is_refused_in_one_line():
    with pytest.raises(IosimError, match="^fa3 models the forward pass only; use fa2 for the "
                                         "backward pass$"):
        build_schedule(AttentionProblem(direction="bwd"), H100, "fa3")


def test_pre_hopper_gpus_are_refused():
    with pytest.raises(IosimError, match="TMA and wgmma"):
        build_schedule(AttentionProblem(), "a100", "fa3")


def test_a_tiling_too_big_for_shared_memory_is_refused_naming_one_that_fits():
    with pytest.raises(IosimError, match=r"shared memory.*would fit"):
        build_schedule(AttentionProblem(head_dim=256), H100, "fa3", block_kv=64, stages=4)


def test_a_tile_too_big_for_the_consumer_registers_is_refused():
    with pytest.raises(IosimError, match=r"per consumer thread.*setmaxnreg leaves 240.*would fit"):
        build_schedule(AttentionProblem(head_dim=256), H100, "fa3", block_q=128, block_kv=256)


def test_block_q_must_be_whole_wgmma_row_slabs():
    with pytest.raises(IosimError, match=r"multiple of 64"):
        build_schedule(AttentionProblem(), H100, "fa3", block_q=96)
