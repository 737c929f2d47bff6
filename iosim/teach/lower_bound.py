"""Section 5: the lower bound, stated exactly, and a sweep over M from the schedules.

The sweep takes the SRAM size M (elements) as a free parameter, for one head of the lesson's
N and d (non-causal, forward):
  - fa2 with tiles derived from M by FA-1's rule with the loops' roles swapped (FA-2 keeps the
    Q block on chip): Br = ⌊M/4d⌋, Bc = min(Br, d). The fa2 generator builds the schedule with
    these tiles directly; M is abstract here, so the tiles are not checked against a real SM's
    registers, nor rounded to multiples of 16 (counting only).
  - square (Saha & Ye's small-cache algorithm) on the GPU with `shared_memory_per_block_bytes`
    set to M elements: its default tiles B = ⌊√(M/3)⌋ (reduced until they fit).
Counted bytes are the schedules' tile loads + stores. Slopes are least-squares fits of
log(counted bytes) against log M: small cache over M < d², large cache over d² ≤ M ≤ Nd/8,
where N²d²/M is at least 8× the compulsory Θ(Nd) (nearer Nd every count flattens onto the
compulsory traffic: Proposition 3's end of the range).
"""
from __future__ import annotations

import math

import numpy as np

from ..algorithms import build_schedule
from ..algorithms.common import Tiling
from ..analysis.bounds import compulsory_bytes, io_bounds, saha_ye_elements
from ..analysis.counters import count
from ..schedule import Schedule
from .fmt import heading, nbytes, table

NAME = "lower-bound"
TITLE = "The lower bound, stated exactly"


def sweep_problem(problem):
    return problem.with_(batch=1, heads_q=1, heads_kv=1, causal=False, direction="fwd",
                         seq_kv=problem.seq_q)


def fa2_tiles_for(M: int, d: int) -> tuple[int, int] | None:
    br = M // (4 * d)
    return (br, min(br, d)) if br >= 1 else None


def fa2_bytes_for(problem, M: int) -> int | None:
    """Tile traffic of the fa2 schedule with tiles derived from M (None below M = 4d)."""
    from ..algorithms import fa2
    tiles = fa2_tiles_for(M, problem.head_dim)
    if tiles is None:
        return None
    t = Tiling(tiles[0], tiles[1], 1, 4)
    return count(Schedule("fa2", problem, {"fwd": t}, fa2.forward_kernels(problem, t))).l2_bytes


def gpu_with_sram(gpu, M: int, eb: int):
    b = M * eb
    return gpu.with_(shared_memory_per_block_bytes=b,
                     shared_memory_per_sm_bytes=max(b, gpu.shared_memory_per_sm_bytes))


def square_side_and_bytes(problem, gpu, M: int) -> tuple[int, int]:
    s = build_schedule(problem, gpu_with_sram(gpu, M, problem.elem_bytes), "square")
    return s.tiling["fwd"].block_q, count(s).l2_bytes


def m_grid(N: int, d: int) -> list[int]:
    """Powers of two from 4d (Br ≥ 1) to the first ≥ Nd, plus d² itself."""
    lo, hi = 4 * d, N * d
    ms, m = [], 1 << max(0, (lo - 1).bit_length())
    while True:
        ms.append(m)
        if m >= hi:
            break
        m *= 2
    return sorted(set(ms) | {d * d})


def fit_slope(ms, ys) -> float | None:
    pts = [(m, y) for m, y in zip(ms, ys) if y and y > 0]
    if len(pts) < 2:
        return None
    x = np.log([m for m, _ in pts])
    y = np.log([v for _, v in pts])
    return float(np.polyfit(x, y, 1)[0])


def sweep(problem, gpu, has_square: bool = True) -> dict:
    p = sweep_problem(problem)
    N, d, eb = p.seq_q, p.head_dim, p.elem_bytes
    comp = compulsory_bytes(p)["total_bytes"]
    rows = []
    for M in m_grid(N, d):
        f2 = fa2_bytes_for(p, M)
        side, sq = square_side_and_bytes(p, gpu, M) if has_square else (None, None)
        rows.append({"M": M, "regime": "small" if M < d * d else "large",
                     "fa2_br": (fa2_tiles_for(M, d) or (None,))[0], "fa2_bytes": f2,
                     "square_side": side, "square_bytes": sq,
                     "saha_ye_bytes": saha_ye_elements(N, d, M) * eb,
                     "n2d2_over_m_bytes": N * N * d * d / M * eb,
                     "n2d_over_sqrtm_bytes": N * N * d / math.sqrt(M) * eb})
    small = [r for r in rows if r["regime"] == "small"]
    large = large_fit_rows(rows, N, d)
    col = lambda rs, k: [r[k] for r in rs]
    return {
        "N": N, "d": d, "eb": eb, "compulsory_bytes": comp, "rows": rows,
        "large_range": (large[0]["M"], large[-1]["M"]) if large else None,
        "small_range": (small[0]["M"], small[-1]["M"]) if small else None,
        "slope_fa2_large": fit_slope(col(large, "M"), col(large, "fa2_bytes")),
        "slope_square_large": fit_slope(col(large, "M"), col(large, "square_bytes")),
        "slope_square_small": fit_slope(col(small, "M"), col(small, "square_bytes")),
        "slope_fa2_small": fit_slope(col(small, "M"), col(small, "fa2_bytes")),
    }


def large_fit_rows(rows, N: int, d: int) -> list:
    """Large-cache points where N²d²/M ≥ 8·Nd (the Θ term dominates the compulsory traffic);
    all large-cache points up to Nd if that leaves fewer than three."""
    large = [r for r in rows if r["regime"] == "large" and r["M"] <= N * d]
    dominated = [r for r in large if 8 * r["M"] <= N * d]
    return dominated if len(dominated) >= 3 else large


def facts(ctx) -> dict:
    p, N, d = ctx.problem, ctx.N, ctx.d
    b = io_bounds(p, ctx.gpu.shared_memory_per_sm_bytes)
    M = b.sram_elements
    return {
        "N": N, "d": d, "heads": ctx.heads, "M": M, "Nd": N * d, "d2": d * d,
        "M_over_d2": M / (d * d), "M_over_Nd": M / (N * d),
        "fa1_range_ok": b.fa1_range_ok, "regime": b.regime,
        "n2d2_over_m_bytes": b.n2d2_over_m_bytes, "saha_ye_bytes": b.saha_ye_bytes,
        "compulsory_bytes": b.compulsory_bytes, "lower_bound_bytes": b.lower_bound_bytes,
        "n2d_over_sqrtm_elements": N * N * d / math.sqrt(M),
        "n2d2_over_m_elements": N * N * d * d / M,
        "fa2_counted_bytes": ctx.analysis("fa2").counters.l2_bytes,
        "sweep": sweep(p, ctx.gpu, ctx.has_algorithm("square")),
    }


def _b(x):
    return "—" if x is None else nbytes(x)


def text(f: dict) -> str:
    s = f["sweep"]
    fa2_ratio = f["fa2_counted_bytes"] / f["lower_bound_bytes"]
    rows = [(f"{r['M']:,}", r["regime"], r["fa2_br"] or "—", _b(r["fa2_bytes"]),
             r["square_side"] or "—", _b(r["square_bytes"]), nbytes(r["saha_ye_bytes"]))
            for r in s["rows"]]

    def slope(x):
        return "—" if x is None else f"{x:+.3f}"
    return "\n".join([
        heading(5, TITLE), "",
        "FA-1, Proposition 3 (Dao et al. 2022). Let N be the sequence length, d the head",
        "dimension and M the SRAM size with d ≤ M ≤ Nd. There is no algorithm that computes",
        "exact attention with o(N²d²/M) HBM accesses for all M in [d, Nd].", "",
        "Why the argument sits at M = Θ(Nd): there N²d²/M = Θ(Nd), the size of Q, K, V and O,",
        "which every algorithm must read or write. An o(Nd) algorithm cannot exist, so",
        "o(N²d²/M) fails at that end of the range. The proposition says nothing about",
        "M ≪ Nd: it rules out beating FlashAttention everywhere, not anywhere.", "",
        "Saha & Ye (2024) close the gap with the red–blue pebble game (Hong & Kung 1981): M red",
        "pebbles are fast-memory slots, blue pebbles slow memory; a computation step needs red",
        "pebbles on its inputs, and each red↔blue move is one IO. For exact attention they prove",
        "", "    IO = Θ( min( N²d/√M , N²d²/M ) + Nd )   for every M,", "",
        "where Nd is the compulsory term (Q, K, V read and O written once; it dominates only",
        "near M = Nd), matched by algorithms in both regimes. The other two terms cross where",
        "√M = d, i.e. M = d²:",
        "  M ≥ d² (large cache): Θ(N²d²/M); FlashAttention's tiling is optimal.",
        "  M < d² (small cache): Θ(N²d/√M), a matrix-multiplication-like bound; a Br×d block of",
        "  Q no longer fits, and square tiles that also split d (the `square` schedule) reach it.",
        "",
        f"Here: N = {f['N']:,}, d = {f['d']}, M = {f['M']:,} elements (shared memory per SM), "
        f"d² = {f['d2']:,}, Nd = {f['Nd']:,}.",
        f"M/d² = {f['M_over_d2']:.2f} → {f['regime']}; M/Nd = {f['M_over_Nd']:.3f}; "
        f"d ≤ M ≤ Nd {'holds' if f['fa1_range_ok'] else 'does NOT hold'}.",
        f"Per head: N²d²/M = {f['n2d2_over_m_elements']:,.0f} and N²d/√M = "
        f"{f['n2d_over_sqrtm_elements']:,.0f} elements.",
        f"All heads: Saha–Ye bound {nbytes(f['saha_ye_bytes'])} (constant 1), compulsory "
        f"{nbytes(f['compulsory_bytes'])}, lower bound max(...) = {nbytes(f['lower_bound_bytes'])};",
        f"fa2's counted tile traffic is {nbytes(f['fa2_counted_bytes'])} = {fa2_ratio:.1f}× that.",
        "",
        f"Sweep over M (one head, N = {s['N']:,}, d = {s['d']}, non-causal; counted tile bytes;",
        "fa2 tiles Br = ⌊M/4d⌋, Bc = min(Br, d); square tiles B = ⌊√(M/3)⌋ on an SM of M elements):",
        "",
        table(["M (elements)", "regime", "fa2 Br", "fa2 bytes", "square B", "square bytes",
               "min(N²d/√M, N²d²/M)"], rows), "",
        "Least-squares slopes of log(counted bytes) against log M:",
        f"  large cache (M = {s['large_range'][0]:,} … {s['large_range'][1]:,}): fa2 "
        f"{slope(s['slope_fa2_large'])} (theory −1), square {slope(s['slope_square_large'])}"
        if s["large_range"] else "  large cache: no points",
        f"  small cache (M = {s['small_range'][0]:,} … {s['small_range'][1]:,}): square "
        f"{slope(s['slope_square_small'])} (theory −1/2), fa2 {slope(s['slope_fa2_small'])}"
        if s["small_range"] else "  small cache: no points",
        "(The large-cache fit stops where N²d²/M falls below 8× compulsory; nearer M = Nd both "
        f"counts flatten onto the compulsory {nbytes(s['compulsory_bytes'])} per head.)",
        "Each algorithm is the better one in its own regime; the crossover sits near M = d².",
    ])
