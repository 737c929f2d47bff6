"""ALU and exp counts of FA-1 (forward and backward), FA-2 backward, square and standard
attention against closed forms written here from each algorithm's definition.

The model charges one ALU op per element per elementwise step of the algorithm (an FMA is
one op) on the tile the kernel executes (Br×Bc or Br×d, padded rows included), and one exp
per exponential. Which steps an algorithm has comes from its paper's pseudo-code and its
module's docstring; which (Q block, KV block) pairs are visited and which need the mask comes
from the elementwise causal mask (tests/mask_reference.py), never from the generators.

Per visited (i, j) pair:
  FA-1 forward (Algorithm 1, lines 9-12)   S = Q_i K_jᵀ, then
    mask       Br·Bc   when the pair is partially masked or K_j is the short last block
    softmax    3·Br·Bc m̃ = rowmax(S) (the 1/√d folded in), S − m̃, l̃ = rowsum(P̃)
    exp        Br·Bc + 2·Br   P̃ = exp(S − m̃), e^{m_i − m_new}, e^{m̃ − m_new}
    stats      4·Br    m_new = max(m_i, m̃), l_new = e^{·}l_i + e^{·}l̃ (2 mul, 1 add, 1 max)
    update O   3·Br·d  O_i ← diag(l_new)⁻¹(diag(l_i)e^{·}O_i + e^{·}P̃V_j): rescale, add, divide
  FA-1 backward (Algorithm 4, no dropout)
    mask       Br·Bc   partially masked pair, or either block short
    P          2·Br·Bc P = diag(l)⁻¹ exp(S − m): subtract m, divide by l;  exp Br·Bc
    D          2·Br·d  D_i = rowsum(dO_i ∘ O_i), recomputed at every step as the paper does
    dS         2·Br·Bc dS = P ∘ (dP − D_i)
  and once per KV block: dK_j scaled by 1/√d (Bc·d); a convert kernel scales dQ by 1/√d
  (Br·d per Q block); GQA sums the group's per-query-head dK, dV (2·Bc·d per KV block and
  query head).
  FA-2 backward (FA-2 paper, Algorithm 2)
    mask       Br·Bc   partially masked pair, or either block short
    P          Br·Bc   P = exp(S − LSE): one subtraction (the log-sum-exp folds m and l);
                       exp Br·Bc
    dS         2·Br·Bc dS = P ∘ (dP − D_i)
  and D_i = rowsum(dO ∘ O) once per Q block in the preprocessing kernel (2·Br·d), the dK
  scale per KV block (Bc·d), the dQ convert per Q block (Br·d) and the GQA reduce as FA-1.
  Square (Saha & Ye; iosim/algorithms/square.py): the FA-1 forward steps on B×B tiles,
  the O update done chunk by chunk (3·Br·dk per chunk, 3·Br·d in all).
  Standard: the QKᵀ GEMM scales its BM×BN output tile by 1/√d in the epilogue; the softmax
  kernel does, per element of S, max, sum and scale (3 ops) in one pass over a row kept in
  shared memory, or online max+sum (2) then subtract+scale (2) in two passes, plus the mask
  (1 per pass) when causal; exp twice per element either way. Backward: D = rowsum(dO∘O)
  (2·N_q·d), dS = P∘(dP − D) (2·N_q·N_kv), dQ and dK scaled by 1/√d in their GEMM epilogues
  (BM×BN per output tile), GQA reduce as above.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from iosim import AttentionProblem, build_schedule, load_gpu
from mask_reference import block_kinds, valid_rows

H100 = load_gpu("h100")


def cdiv(a, b):
    return -(-a // b)


def pair_classes(p, br, bc):
    """(visited pairs, pairs needing the mask in the forward pass (partial or short K_j),
    pairs needing it in the backward pass (partial, short Q_i or short K_j))."""
    kinds = block_kinds(p.seq_q, p.seq_kv, br, bc, p.causal)
    vis = kinds > 0
    short_q = valid_rows(p.seq_q, br) < br
    short_kv = valid_rows(p.seq_kv, bc) < bc
    fwd_mask = vis & ((kinds == 1) | short_kv[None, :])
    bwd_mask = vis & ((kinds == 1) | short_kv[None, :] | short_q[:, None])
    return int(vis.sum()), int(fwd_mask.sum()), int(bwd_mask.sum())


def gqa_reduce_alu(p, bc):
    if p.group_size == 1:
        return 0
    return p.batch * p.heads_q * cdiv(p.seq_kv, bc) * 2 * bc * p.head_dim


def fa1_fwd_expected(p, br, bc, warps):
    """fa1_fwd.cu counted from its source: per S element scale, max, subtract, ·log2 e, sum and
    half a pack (5.5); per row and chunk (largest of 64/32/16 columns dividing Bc) 4 stats ops,
    one exp and d multiplies rescaling P̃V; WN warps per 16-row tile merge with 2 exps per row
    and 2 ops per P̃V element per extra group; then m_new, l_new (4 per row), O update (3 d)."""
    d, heads = p.head_dim, p.batch * p.heads_q
    n, masked, _ = pair_classes(p, br, bc)
    chunks = bc // next(c for c in (64, 32, 16) if bc % c == 0)
    wn = warps // min(warps, br // 16)
    per_pair = (5 * br * bc + br * bc // 2 + 4 * br * chunks + br * d * chunks
                + 2 * (wn - 1) * br * d + 4 * br + 3 * br * d)
    return dict(alu=heads * (n * per_pair + masked * br * bc),
                exp=heads * n * (br * bc + chunks * br + 2 * br + 2 * (wn - 1) * br))


def fa1_bwd_expected(p, br, bc):
    d, heads = p.head_dim, p.batch * p.heads_q
    n, _, masked = pair_classes(p, br, bc)
    per_pair = 2 * br * bc + 2 * br * d + 2 * br * bc
    alu = heads * (n * per_pair + masked * br * bc
                   + cdiv(p.seq_kv, bc) * bc * d        # dK_j · 1/√d
                   + cdiv(p.seq_q, br) * br * d)        # dQ convert · 1/√d
    return dict(alu=alu + gqa_reduce_alu(p, bc), exp=heads * n * br * bc)


def fa2_bwd_expected(p, br, bc):
    d, heads = p.head_dim, p.batch * p.heads_q
    n, _, masked = pair_classes(p, br, bc)
    per_pair = br * bc + 2 * br * bc
    alu = heads * (n * per_pair + masked * br * bc
                   + cdiv(p.seq_q, br) * 2 * br * d     # D = rowsum(dO ∘ O), preprocess
                   + cdiv(p.seq_kv, bc) * bc * d        # dK_j · 1/√d
                   + cdiv(p.seq_q, br) * br * d)        # dQ convert · 1/√d
    return dict(alu=alu + gqa_reduce_alu(p, bc), exp=heads * n * br * bc)


def square_expected(p, br, bc):
    d, heads = p.head_dim, p.batch * p.heads_q
    n, masked, _ = pair_classes(p, br, bc)
    per_pair = 3 * br * bc + 4 * br + 3 * br * d
    return dict(alu=heads * (n * per_pair + masked * br * bc),
                exp=heads * n * (br * bc + 2 * br))


def standard_expected(p, bm, bn, gpu=H100):
    """{kernel: (alu, exp)} for the standard schedule with BM×BN GEMM tiles."""
    d, eb, heads = p.head_dim, p.elem_bytes, p.batch * p.heads_q
    nq, nkv = p.seq_q, p.seq_kv
    bd = min(bn, d)            # the d-wide GEMMs' output tile: BM·BN/bd × bd
    bmd = bm * bn // bd
    mask = 1 if p.causal else 0
    out = {}
    if p.direction in ("fwd", "fwd+bwd"):
        one_pass = 4 * nkv * eb <= gpu.shared_memory_per_block_bytes
        per_elem = 3 + mask if one_pass else 4 + 2 * mask
        out["std_fwd_qk"] = (cdiv(nq, bm) * cdiv(nkv, bn) * bm * bn, 0)
        out["std_fwd_softmax"] = (per_elem * nq * nkv, 2 * nq * nkv)
        out["std_fwd_pv"] = (0, 0)
    if p.direction in ("bwd", "fwd+bwd"):
        out["std_bwd_D"] = (2 * nq * d, 0)
        out["std_bwd_dV"] = (0, 0)
        out["std_bwd_dP"] = (0, 0)
        out["std_bwd_dS"] = (2 * nq * nkv, 0)
        out["std_bwd_dQ"] = (cdiv(nq, bmd) * cdiv(d, bd) * bmd * bd, 0)
        out["std_bwd_dK"] = (cdiv(nkv, bmd) * cdiv(d, bd) * bmd * bd, 0)
    out = {k: (a * heads, e * heads) for k, (a, e) in out.items()}
    if p.group_size > 1 and p.direction != "fwd":
        out["std_bwd_reduce_dkv"] = (gqa_reduce_alu(p, bn), 0)
    return out


problems = st.builds(
    lambda b, hkv, g, nq, nkv, d, causal: AttentionProblem(
        batch=b, heads_q=hkv * g, heads_kv=hkv, seq_q=nq, seq_kv=nkv, head_dim=d, causal=causal),
    st.integers(1, 2), st.integers(1, 2), st.sampled_from([1, 2, 4]), st.integers(1, 600),
    st.integers(1, 600), st.sampled_from([64, 128]), st.booleans())


def totals(p, algorithm, tile, direction):
    over = {} if tile is None else dict(block_q=tile[0], block_kv=tile[1])
    s = build_schedule(p, H100, algorithm, **over)
    t = s.tiling[direction]
    return s.totals(), t.block_q, t.block_kv


# ---- FA-1 ---------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(problems, st.sampled_from([None, (64, 64), (32, 128), (48, 80)]))
def test_fa1_forward_alu_and_exp_equal_the_closed_form(p, tile):
    s = build_schedule(p, H100, "fa1", **({} if tile is None else dict(block_q=tile[0], block_kv=tile[1])))
    t = s.tiling["fwd"]
    got = s.totals()
    assert (got.alu, got.exp) == tuple(fa1_fwd_expected(p, t.block_q, t.block_kv, t.warps).values())


@settings(max_examples=40, deadline=None)
@given(problems.map(lambda p: p.with_(direction="bwd")), st.sampled_from([None, (64, 64), (32, 48)]))
def test_fa1_backward_alu_and_exp_equal_the_closed_form(p, tile):
    got, br, bc = totals(p, "fa1", tile, "bwd")
    assert (got.alu, got.exp) == tuple(fa1_bwd_expected(p, br, bc).values())


def test_fa1_forward_alu_of_one_head_by_hand():
    # N = 256, d = 64, Br = Bc = 64 (one 64-column chunk), 4 warps (one per 16-row tile), not
    # causal: 4 × 4 = 16 pairs, none masked; per pair 5.5·64·64 (softmax) + 4·64 (chunk
    # stats) + 64·64 (P̃V rescale) + 4·64 (stats) + 3·64·64 (update O) = 39,424
    p = AttentionProblem(heads_q=1, seq_q=256, head_dim=64)
    got = build_schedule(p, H100, "fa1", block_q=64, block_kv=64, warps=4).totals()
    assert got.alu == 16 * 39_424
    assert got.exp == 16 * (64 * 64 + 64 + 2 * 64)


# ---- FA-2 backward ------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(problems.map(lambda p: p.with_(direction="bwd")),
       st.sampled_from([(128, 64), (64, 64), (64, 128), (32, 32)]))
def test_fa2_backward_alu_and_exp_equal_the_closed_form(p, tile):
    got, br, bc = totals(p, "fa2", tile, "bwd")
    assert (got.alu, got.exp) == tuple(fa2_bwd_expected(p, br, bc).values())


def test_fa2_backward_pays_the_causal_mask_on_the_diagonal_blocks_only():
    # N = 512, Br = Bc = 64, d = 64: 8 diagonal blocks are partially masked (64·64 each);
    # causal visits 36 of the 64 pairs
    p = AttentionProblem(heads_q=1, seq_q=512, head_dim=64, direction="bwd")
    full = build_schedule(p, H100, "fa2", block_q=64, block_kv=64).totals()
    causal = build_schedule(p.with_(causal=True), H100, "fa2", block_q=64, block_kv=64).totals()
    per_pair = 3 * 64 * 64                      # P (1) and dS (2) per element
    fixed = 8 * 2 * 64 * 64 + 8 * 64 * 64 + 8 * 64 * 64   # D, dK scale, dQ convert
    assert full.alu == 64 * per_pair + fixed
    assert causal.alu == 36 * per_pair + 8 * 64 * 64 + fixed


# ---- square -------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(problems, st.sampled_from([None, (16, 16), (20, 30), (48, 48)]))
def test_square_alu_and_exp_equal_the_closed_form(p, tile):
    got, br, bc = totals(p, "square", tile, "fwd")
    assert (got.alu, got.exp) == tuple(square_expected(p, br, bc).values())


# ---- standard -----------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(problems.map(lambda p: p.with_(direction="fwd+bwd")),
       st.sampled_from([(128, 128), (128, 64), (64, 64)]))
def test_standard_alu_and_exp_per_kernel_equal_the_closed_form(p, tile):
    s = build_schedule(p, H100, "standard", block_q=tile[0], block_kv=tile[1])
    want = standard_expected(p, *tile)
    got = {k.name: (k.totals().alu, k.totals().exp) for k in s.kernels}
    assert got == want


@pytest.mark.parametrize("causal", [False, True])
def test_standard_two_pass_softmax_alu(causal):
    gpu = H100.with_(shared_memory_per_block_bytes=36864)   # 4 rows of 5000 fp16 do not fit
    p = AttentionProblem(heads_q=1, seq_q=64, seq_kv=5000, head_dim=64, causal=causal)
    s = build_schedule(p, gpu, "standard", block_q=64, block_kv=64)
    softmax = next(k for k in s.kernels if k.name == "std_fwd_softmax").totals()
    assert softmax.alu == (4 + 2 * causal) * 64 * 5000
    assert softmax.alu == standard_expected(p, 64, 64, gpu)["std_fwd_softmax"][0]
