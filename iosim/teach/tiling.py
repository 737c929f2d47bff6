"""Section 4: tiling. Block sizes from M, block counts, bytes per block pair, and the total
Θ(N²d²/M), with the fa1 and fa2 schedules' counted bytes beside the formulas."""
from __future__ import annotations


from ..algorithms.common import ceil_div, kv_segments
from ..analysis.bounds import fa1_block_sizes
from ..analysis.tensors import STAT_BYTES
from .fmt import capacity, heading, nbytes, table

NAME = "tiling"
TITLE = "Tiling: block sizes from M, and the Θ(N²d²/M) count"


def block_pairs(problem, br: int, bc: int) -> int:
    """(Q block, KV block) pairs a tiled schedule visits per head (causal: unmasked ones)."""
    return sum(s.count for i in range(ceil_div(problem.seq_q, br))
               for s in kv_segments(problem, i, br, bc))


def facts(ctx) -> dict:
    p, N, d, eb, H = ctx.problem, ctx.N, ctx.d, ctx.eb, ctx.heads
    M_block = ctx.sram_elements_per_block      # what one CTA may use: sizes FA-1's blocks
    M = ctx.sram_elements_per_sm               # the bound's M (section 5, `iosim run`)
    paper_br, paper_bc = fa1_block_sizes(M_block, d)
    out = {"N": N, "d": d, "eb": eb, "heads": H, "causal": p.causal, "M": M,
           "M_bytes": ctx.gpu.shared_memory_per_sm_bytes, "M_block": M_block,
           "M_block_bytes": ctx.gpu.shared_memory_per_block_bytes,
           "paper_br": paper_br, "paper_bc": paper_bc}
    out["n2d2_over_m_elements"] = N * N * d * d / M              # per head
    for alg in ("fa1", "fa2"):
        a = ctx.analysis(alg)
        t = a.tiling["fwd"]
        br, bc = t.block_q, t.block_kv
        c = a.counters
        tr, tc = ceil_div(p.seq_q, br), ceil_div(p.seq_kv, bc)
        pairs = block_pairs(p, br, bc)
        if alg == "fa1":
            # per pair: read Q_i, O_i, write O_i (3·Br·d elements) and read+write ℓ_i, m_i
            pair_bytes = 3 * br * d * eb + 4 * br * STAT_BYTES
            formula = 2 * N * d + 3 * N * d * tc                # Theorem 2, elements per head
            formula_name = "2Nd + 3Nd·T_c"
        else:
            # per pair: read K_j, V_j (2·Bc·d elements); Q_i read and O_i written once
            pair_bytes = 2 * bc * d * eb
            formula = 2 * N * d + 2 * N * d * tr
            formula_name = "2Nd + 2Nd·T_r"
        out[alg] = {
            "br": br, "bc": bc, "T_r": tr, "T_c": tc, "pairs": pairs,
            "pairs_dense": tr * tc, "pair_bytes": pair_bytes,
            "formula_name": formula_name, "formula_elements": formula,
            "formula_bytes_all_heads": formula * eb * H,
            "counted_bytes": c.l2_bytes,
            "counted_by_tensor": {k: c.l2_to_smem_bytes_by_tensor.get(k, 0)
                                  + c.smem_to_l2_bytes_by_tensor.get(k, 0)
                                  for k in sorted(set(c.l2_to_smem_bytes_by_tensor)
                                                  | set(c.smem_to_l2_bytes_by_tensor))},
            "ratio_to_n2d2_over_m": c.l2_bytes / (out["n2d2_over_m_elements"] * eb * H),
            "formula_over_n2d2_over_m": formula / out["n2d2_over_m_elements"],
            "notes": list(a.schedule.notes),
        }
    return out


def text(f: dict) -> str:
    a1, a2 = f["fa1"], f["fa2"]
    N, d = f["N"], f["d"]

    def row(name, a):
        return (name, f"{a['br']}×{a['bc']}", a["T_r"], a["T_c"], f"{a['pairs']:,}",
                nbytes(a["pair_bytes"]))
    lines = [
        heading(4, TITLE), "",
        "Keep blocks of Q, K, V and O in SRAM so that each N×N tile of S and P lives only on chip.",
        f"FA-1 (Algorithm 1) sizes the blocks from M: Bc = ⌈M/4d⌉, Br = min(Bc, d), so that",
        "K_j, V_j (Bc×d each), Q_i, O_i (Br×d each) and S_ij (Br×Bc) fit in O(M).", "",
        f"M here = shared memory per SM = {capacity(f['M_bytes'])} = {f['M']:,} elements (the M of "
        "the bound in section 5 and of `iosim run`);",
        f"one CTA may use {capacity(f['M_block_bytes'])} = {f['M_block']:,} elements of it, which "
        "sizes FA-1's blocks:",
        f"Bc = ⌈{f['M_block']:,}/(4·{d})⌉ = {f['paper_bc']}, Br = min({f['paper_bc']}, {d}) = "
        f"{f['paper_br']}. The fa1 schedule rounds to tensor-core multiples of 16: "
        f"{a1['br']}×{a1['bc']}.",
        f"FA-2 swaps the loops (Q blocks outer) and picks {a2['br']}×{a2['bc']} (its O accumulator "
        "lives in registers, which limit Br).", "",
        f"T_r = ⌈N/Br⌉ row blocks, T_c = ⌈N/Bc⌉ column blocks, N = {N:,}"
        + (" (causal: masked pairs skipped)" if f["causal"] else "") + ":", "",
        table(["schedule", "Br×Bc", "T_r", "T_c", "block pairs/head", "bytes per pair"],
              [row("fa1", a1), row("fa2", a2)]), "",
        "fa1 per pair: read Q_i, O_i and write O_i (3·Br·d elements) plus ℓ_i, m_i in and out.",
        "fa2 per pair: read K_j, V_j (2·Bc·d elements); Q_i is read and O_i written once.", "",
        "FA-1's Theorem 2 is an upper bound: FlashAttention makes O(N²d²/M) HBM accesses. Its",
        "proof counts, for a tiling, at most the accesses below; they are not a lower bound.",
        "Per head, in elements (× bytes/element × heads for the totals below):",
        f"  fa1: Theorem 2's count {a1['formula_name']} = {a1['formula_elements']:,} "
        f"= {a1['formula_over_n2d2_over_m']:.2f}·N²d²/M  (3Nd·N/Bc with Bc = M/4d is 12·N²d²/M)",
        f"  fa2: {a2['formula_name']} = {a2['formula_elements']:,} "
        f"= {a2['formula_over_n2d2_over_m']:.2f}·N²d²/M", "",
        table(["schedule", "formula (all heads)", "counted by iosim", "counted / (N²d²/M)"],
              [(n, nbytes(a["formula_bytes_all_heads"]), nbytes(a["counted_bytes"]),
                f"{a['ratio_to_n2d2_over_m']:.2f}") for n, a in (("fa1", a1), ("fa2", a2))]), "",
        "Counted = tile loads + stores of the schedule (the papers' 'HBM accesses'), by tensor:",
    ]
    for n, a in (("fa1", a1), ("fa2", a2)):
        lines.append(f"  {n}: " + ", ".join(f"{k} {nbytes(v)}" for k, v in a["counted_by_tensor"].items()))
    lines += [
        "(fa1 also stores the initial O, ℓ, m and moves ℓ, m each pair; fa2 writes the row "
        "log-sum-exp LSE.)",
        f"N²d²/M = {f['n2d2_over_m_elements']:,.0f} elements per head (M = {f['M']:,}): both "
        "schedules sit a constant factor above it, as Θ(N²d²/M) says.",
    ]
    for n, a in (("fa1", a1), ("fa2", a2)):
        for note in a["notes"]:
            lines.append(f"note ({n}): {note}")
    return "\n".join(lines)
