"""Standard attention counts against GEMM-panel closed forms derived here."""
import pytest
from hypothesis import given, settings, strategies as st

from iosim import AttentionProblem, IosimError, build_schedule, load_gpu

H100 = load_gpu("h100")
F32 = 4
BK = 64   # the generator's documented K-step (cuBLAS sm90 kernels step 64)


def cdiv(a, b):
    return -(-a // b)


def gemm(m, n, k, bm, bn):
    """Tiled GEMM C[m×n] = A[m×k]·B[k×n]: A elements read ⌈n/bn⌉ times, B elements ⌈m/bm⌉
    times, C written once; executed FLOPs on padded tiles."""
    return dict(a=cdiv(n, bn) * m * k, b=cdiv(m, bm) * k * n, c=m * n,
                flops=cdiv(m, bm) * cdiv(n, bn) * cdiv(k, BK) * 2 * bm * bn * BK)


def expected(p, bm, bn, gpu=H100):
    """{kernel: (loads, stores, flops, exp)} with bytes summed over batch and heads."""
    d, eb, heads, g = p.head_dim, p.elem_bytes, p.batch * p.heads_q, p.group_size
    nq, nkv = p.seq_q, p.seq_kv
    bd = min(bn, d)
    bmd = bm * bn // bd       # d-wide GEMM outputs keep the accumulator area BM×BN
    out = {}
    if p.direction in ("fwd", "fwd+bwd"):
        qk, pv = gemm(nq, nkv, d, bm, bn), gemm(nq, d, nkv, bmd, bd)
        passes = 1 if 4 * nkv * eb <= gpu.shared_memory_per_block_bytes else 2
        out["std_fwd_qk"] = ({"Q": qk["a"] * eb, "K": qk["b"] * eb}, {"S": qk["c"] * eb},
                             qk["flops"], 0)
        # exp twice per element either way: once for the row sum, once when writing P
        out["std_fwd_softmax"] = ({"S": passes * nq * nkv * eb}, {"P": nq * nkv * eb}, 0,
                                  2 * nq * nkv)
        out["std_fwd_pv"] = ({"P": pv["a"] * eb, "V": pv["b"] * eb}, {"O": pv["c"] * eb},
                             pv["flops"], 0)
    if p.direction in ("bwd", "fwd+bwd"):
        dk, dv = ("dK", "dV") if g == 1 else ("dK_expanded", "dV_expanded")
        dvg, dpg = gemm(nkv, d, nq, bmd, bd), gemm(nq, nkv, d, bm, bn)
        dqg, dkg = gemm(nq, d, nkv, bmd, bd), gemm(nkv, d, nq, bmd, bd)
        out["std_bwd_D"] = ({"O": nq * d * eb, "dO": nq * d * eb}, {"D": nq * F32}, 0, 0)
        out["std_bwd_dV"] = ({"P": dvg["a"] * eb, "dO": dvg["b"] * eb}, {dv: dvg["c"] * eb},
                             dvg["flops"], 0)
        out["std_bwd_dP"] = ({"dO": dpg["a"] * eb, "V": dpg["b"] * eb}, {"dP": dpg["c"] * eb},
                             dpg["flops"], 0)
        out["std_bwd_dS"] = ({"P": nq * nkv * eb, "dP": nq * nkv * eb,
                              "D": cdiv(nkv, bn) * nq * F32}, {"dS": nq * nkv * eb}, 0, 0)
        out["std_bwd_dQ"] = ({"dS": dqg["a"] * eb, "K": dqg["b"] * eb}, {"dQ": dqg["c"] * eb},
                             dqg["flops"], 0)
        out["std_bwd_dK"] = ({"dS": dkg["a"] * eb, "Q": dkg["b"] * eb}, {dk: dkg["c"] * eb},
                             dkg["flops"], 0)
    scaled = {name: ({t: v * heads for t, v in lo.items()}, {t: v * heads for t, v in st_.items()},
                     fl * heads, ex * heads) for name, (lo, st_, fl, ex) in out.items()}
    if g > 1 and p.direction != "fwd":
        per_q_head = heads * nkv * d * eb
        scaled["std_bwd_reduce_dkv"] = (
            {"dK_expanded": per_q_head, "dV_expanded": per_q_head},
            {"dK": per_q_head // g, "dV": per_q_head // g}, 0, 0)
    return scaled


problems = st.builds(
    lambda b, hkv, g, nq, nkv, d, causal, direction: AttentionProblem(
        batch=b, heads_q=hkv * g, heads_kv=hkv, seq_q=nq, seq_kv=nkv, head_dim=d,
        causal=causal, direction=direction),
    st.integers(1, 2), st.integers(1, 2), st.sampled_from([1, 2, 4]), st.integers(1, 700),
    st.integers(1, 700), st.sampled_from([64, 128, 192]), st.booleans(),
    st.sampled_from(["fwd", "bwd", "fwd+bwd"]))
tiles = st.sampled_from([(128, 128), (128, 64), (64, 64)])


@settings(max_examples=60, deadline=None)
@given(problems, tiles)
def test_every_kernels_bytes_flops_and_exps_equal_the_closed_form(p, tile):
    s = build_schedule(p, H100, "standard", block_q=tile[0], block_kv=tile[1])
    want = expected(p, tile[0], tile[1])
    assert [k.name for k in s.kernels] == list(want)
    for k in s.kernels:
        t = k.totals()
        lo, st_, fl, ex = want[k.name]
        assert (dict(t.load_bytes), dict(t.store_bytes), t.mma_flops, t.exp) == (lo, st_, fl, ex), k.name


def test_long_rows_take_the_two_pass_softmax_reading_s_twice():
    gpu = H100.with_(shared_memory_per_block_bytes=36864)   # a 64×64 GEMM tile still fits (32 KiB)
    p = AttentionProblem(heads_q=1, seq_q=64, seq_kv=5000, head_dim=64)   # 4·5000·2 B > 36 KiB
    s = build_schedule(p, gpu, "standard")
    softmax = next(k for k in s.kernels if k.name == "std_fwd_softmax").totals()
    assert softmax.load_bytes["S"] == 2 * 64 * 5000 * 2
    assert softmax.store_bytes["P"] == 64 * 5000 * 2
    assert softmax.exp == 2 * 64 * 5000
    want = expected(p, 128, 128, gpu)["std_fwd_softmax"]
    assert (dict(softmax.load_bytes), softmax.exp) == (want[0], want[3])


def test_causal_costs_the_same_gemm_work_as_noncausal():
    p = AttentionProblem(heads_q=2, seq_q=1000, head_dim=128, direction="fwd+bwd")
    full = build_schedule(p, H100, "standard").totals()
    causal = build_schedule(p.with_(causal=True), H100, "standard").totals()
    assert (causal.mma_flops, causal.exp, causal.load_bytes, causal.store_bytes) == \
        (full.mma_flops, full.exp, full.load_bytes, full.store_bytes)
    assert causal.alu > full.alu   # only the mask is extra


def test_s_and_p_traffic_grows_with_the_square_of_the_sequence():
    def sp_bytes(n):
        # one head and the tile given: cuBLAS's wave-filling split of small grids is off
        t = build_schedule(AttentionProblem(heads_q=1, seq_q=n, head_dim=128), H100,
                           "standard", block_q=256, block_kv=128).totals()
        return t.load_bytes["S"] + t.store_bytes["S"] + t.load_bytes["P"] + t.store_bytes["P"]
    assert sp_bytes(2048) == 4 * sp_bytes(1024)
    # S written and read once, P written once and read once per d-wide column tile
    assert sp_bytes(1024) == 4 * 1024 * 1024 * 2


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("shape", [
    dict(batch=2, heads_q=4, heads_kv=2, seq_q=200, seq_kv=330, causal=True),
    dict(batch=1, heads_q=2, seq_q=257, seq_kv=100, causal=False),
    dict(batch=1, heads_q=1, seq_q=64, seq_kv=64, causal=False)])
def test_class_totals_equal_enumerated_totals_for_every_kernel(direction, shape):
    p = AttentionProblem(head_dim=96, direction=direction, **shape)
    for k in build_schedule(p, H100, "standard", block_q=64, block_kv=64).kernels:
        assert k.totals() == k.totals_by_enumeration(), k.name


def test_a_tiling_too_big_for_shared_memory_is_refused_naming_one_that_fits():
    with pytest.raises(IosimError, match=r"shared memory.*would fit"):
        build_schedule(AttentionProblem(), H100, "standard", block_q=256, block_kv=256, stages=8)


def test_a_tile_too_big_for_the_registers_is_refused():
    with pytest.raises(IosimError, match=r"registers.*would fit"):
        build_schedule(AttentionProblem(), H100, "standard", block_q=256, block_kv=256, stages=1, warps=4)
