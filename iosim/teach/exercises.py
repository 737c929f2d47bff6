"""Section 7: exercises with worked answers, each naming the iosim command that checks it."""
from __future__ import annotations

import math

from ..algorithms.common import ceil_div
from ..analysis.bounds import fa1_block_sizes, fa1_theorem2_elements
from .fmt import fnum, heading, nbytes
from .online_softmax import walkthrough

NAME = "exercises"
TITLE = "Exercises (with worked answers)"

E3_SCORES = (1.0, 3.0, 4.0, 2.0, 5.0)
E3_VALUES = (1.0, 2.0, 3.0, 4.0, 0.0)


def problem_args(ctx, problem=None) -> str:
    p = problem or ctx.problem
    args = [f"--gpu {ctx.gpu.short_name}", f"--seq {p.seq_q}", f"--head-dim {p.head_dim}",
            f"--heads {p.heads_q}", f"--batch {p.batch}", f"--dtype {p.dtype}"]
    if p.causal:
        args.append("--causal")
    return " ".join(args)


def _ridge_exercise(ctx) -> dict:
    """Exercise 1: ridge point against standard attention's intensity."""
    p, N = ctx.problem, ctx.N
    std = ctx.analysis("standard")
    ridge = std.roofline.ridge_dram_flop_per_byte
    return {
        "q": f"On the {ctx.gpu.short_name} in {p.dtype}, how many FLOPs per DRAM byte make a kernel "
             f"compute-bound, and is standard attention at N = {N:,} there?",
        "numbers": {"ridge": ridge, "intensity": std.roofline.intensity_dram_flop_per_byte},
        "a": f"Ridge = tensor rate / DRAM bandwidth = {ridge:.1f} FLOP/B. Standard attention does "
             f"{std.roofline.intensity_dram_flop_per_byte:.1f} FLOP/B: memory-bound.",
        "cmd": f"iosim run --algo standard {problem_args(ctx)} --model roofline",
    }


def _doubling_exercise(ctx) -> dict:
    """Exercise 2: doubling N quadruples the S/P round trips."""
    p, N = ctx.problem, ctx.N
    p2 = p.with_(seq_q=2 * p.seq_q, seq_kv=2 * p.seq_kv)
    rt = {}
    for tag, prob in (("N", p), ("2N", p2)):
        a = ctx.analysis("standard") if tag == "N" else _standard_at(ctx, prob)
        c = a.counters
        rt[tag] = sum(c.l2_to_smem_bytes_by_tensor.get(t, 0) + c.smem_to_l2_bytes_by_tensor.get(t, 0)
                      for t in ("S", "P"))
    return {
        "q": f"Double N to {2 * N:,}. By what factor do standard attention's S/P round trips grow?",
        "numbers": {"round_trip_N": rt["N"], "round_trip_2N": rt["2N"],
                    "factor": rt["2N"] / rt["N"]},
        "a": f"They are N² terms: {nbytes(rt['N'])} → {nbytes(rt['2N'])}, "
             f"×{rt['2N'] / rt['N']:.2f}. The FLOPs grow ×4 too, so the intensity stays put.",
        "cmd": f"iosim run --algo standard {problem_args(ctx, p2)} --model roofline --format json",
    }


def _online_softmax_exercise(ctx) -> dict:
    """Exercise 3: online softmax by hand, one more block."""
    w = walkthrough(E3_SCORES, E3_VALUES, 2)
    last = w["steps"][-1]
    return {
        "q": "Append a fifth key with score 5 and value 0 to the worked example (blocks of 2). "
             "What are m, α, ℓ after the third block, and the output?",
        "numbers": {"m": last["m"], "alpha": last["alpha"], "l": last["l"], "out": w["tiled"],
                    "direct": w["direct"]},
        "a": f"m = {fnum(last['m'])}, α = e^(4−5) = {fnum(last['alpha'])}, "
             f"ℓ = α·ℓ₂ + e^0 = {fnum(last['l'])}, output o/ℓ = {fnum(w['tiled'], 8)} "
             f"(direct softmax: {fnum(w['direct'], 8)}).",
        "cmd": "iosim teach online-softmax --scores 1,3,4,2,5 --values 1,2,3,4,0 --block 2",
    }


def _half_sram_exercise(ctx) -> dict:
    """Exercise 4: FA-1 with half the SRAM."""
    N, d = ctx.N, ctx.d
    M = ctx.sram_elements_per_block
    br, bc = fa1_block_sizes(M, d)
    br2, bc2 = fa1_block_sizes(M // 2, d)
    t1 = fa1_theorem2_elements(N, d, M)
    t2 = fa1_theorem2_elements(N, d, M // 2)
    a1 = ctx.analysis("fa1")
    br_s, bc_s = a1.tiling["fwd"].block_q, a1.tiling["fwd"].block_kv
    bc_half = max(16, bc_s // 2 // 16 * 16)
    a_half = ctx.analysis("fa1", block_q=br_s, block_kv=bc_half)
    return {
        "q": f"Halve the SRAM: M = {M // 2:,} elements. What are FA-1's Bc, T_c and Theorem 2 "
             f"count per head, and what does the fa1 schedule count with Bc = {bc_half}?",
        "numbers": {"bc": bc2, "br": br2, "T_c": ceil_div(N, bc2), "theorem2": t2,
                    "theorem2_full": t1, "ratio": t2 / t1, "bc_half": bc_half,
                    "counted": a_half.counters.l2_bytes, "counted_full": a1.counters.l2_bytes,
                    "counted_ratio": a_half.counters.l2_bytes / a1.counters.l2_bytes},
        "a": f"Bc = ⌈{M // 2:,}/{4 * d}⌉ = {bc2}, Br = {br2}, T_c = {ceil_div(N, bc2)}; "
             f"2Nd + 3Nd·T_c = {t2:,} elements (×{t2 / t1:.2f} of the full-M {t1:,}). The "
             f"schedule with {br_s}×{bc_half} tiles counts {nbytes(a_half.counters.l2_bytes)}, "
             f"×{a_half.counters.l2_bytes / a1.counters.l2_bytes:.2f} of its {br_s}×{bc_s} count: "
             "IO ∝ 1/M.",
        "cmd": f"iosim run --algo fa1 {problem_args(ctx)} --block-q {br_s} --block-kv {bc_half} "
               "--model roofline --format json",
    }


def _crossover_exercise(ctx) -> dict:
    """Exercise 5: where is the crossover."""
    m_sm = ctx.sram_elements_per_sm
    return {
        "q": f"The crossover is M = d². With M = {m_sm:,} elements per SM, above which head "
             "dimension would this GPU be in the small-cache regime?",
        "numbers": {"d_crossover": math.sqrt(m_sm), "M": m_sm},
        "a": f"d > √M = {math.sqrt(m_sm):.1f}. Every supported head dimension (≤ 256) is below "
             "it, so FlashAttention's Θ(N²d²/M) tiling is optimal here."
             if math.sqrt(m_sm) > 256 else
             f"d > √M = {math.sqrt(m_sm):.1f}: larger head dimensions are in the small-cache "
             "regime, where square tiling reaches Θ(N²d/√M).",
        "cmd": f"iosim teach --section lower-bound {problem_args(ctx)}",
    }


def _recompute_exercise(ctx) -> dict:
    """Exercise 6: recomputation."""
    p, d = ctx.problem, ctx.d
    pb = p.with_(direction="fwd+bwd")
    s_b, f_b = ctx.analysis("standard", "fwd+bwd"), ctx.analysis("fa2", "fwd+bwd")
    extra = f_b.counters.mma_flops - s_b.counters.mma_flops
    share = extra / s_b.counters.mma_flops
    if not p.causal:
        answer = (f"One more S = QKᵀ in the backward pass: 2·N²·d per head, over {ctx.heads} "
                  f"heads {extra:,} FLOPs, {100 * share:.1f}% of standard's "
                  f"{s_b.counters.mma_flops:,}.")
    else:
        answer = (f"fa2 does {extra:+,} FLOPs relative to standard ({100 * share:+.1f}%): causal "
                  "fa2 skips masked blocks while standard computes the full S, which outweighs "
                  "the recomputation.")
    return {
        "q": "How many extra tensor-core FLOPs does FA-2's backward recomputation cost, as a "
             "share of standard attention's forward + backward?",
        "numbers": {"extra": extra, "share": share,
                    "closed_form": 2 * pb.attended_pairs() * d * ctx.heads},
        "a": answer,
        "cmd": f"iosim compare --algos standard,fa2 {problem_args(ctx)} --direction fwd+bwd "
               "--model roofline",
    }


def facts(ctx) -> dict:
    return {"exercises": [make(ctx) for make in (
        _ridge_exercise, _doubling_exercise, _online_softmax_exercise,
        _half_sram_exercise, _crossover_exercise, _recompute_exercise)]}


def _standard_at(ctx, problem):
    from ..analysis.analyze import analyze
    return analyze(problem, ctx.gpu, "standard", model="roofline")


def text(f: dict) -> str:
    lines = [heading(7, TITLE), ""]
    for i, e in enumerate(f["exercises"], 1):
        lines += [f"Exercise {i}. {e['q']}", f"  Answer: {e['a']}", f"  Check:  {e['cmd']}", ""]
    return "\n".join(lines).rstrip()
