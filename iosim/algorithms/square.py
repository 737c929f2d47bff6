"""Square tiling for the small-cache regime (M < d², Saha & Ye): the head dimension is split too.

When the on-chip memory M (elements) is smaller than d², a Br×d block of Q does not fit, so
FlashAttention's Θ(N²d²/M) strategy is unavailable. Saha and Ye show the IO is then
Θ(N²d/√M), reached by square tiles: Br = Bc = dk = B ≈ √(M/3), so that a Q chunk (B×dk), a K
chunk (B×dk) and the S tile (B×B) fit together, and later a V chunk, an O chunk and P.

One CTA per (Q block i, batch, head), grid (⌈N_q/B⌉, B, H) as in fa2. For every KV block j
the CTA visits (causal: `kv_segments`):
  1. S_ij = Σ_c Q_i[:, c] K_j[:, c]ᵀ over d-chunks c of width dk: Q_i's chunk and K_j's chunk
     are loaded for every c; S_ij accumulates on chip. Q_i is therefore re-read once per j.
  2. Online softmax on S_ij; the row statistics m_i, l_i (2·Br floats) stay on chip.
  3. For each d-chunk c: load V_j's chunk and (except at the first KV block, where O is still
     zero) O_i's chunk, O_ic ← diag(l_new)⁻¹(diag(l_old)·e^{m_old−m_new}·O_ic + P̃ V_jc),
     store O_ic (input dtype, kept normalized as in FA-1, so no final pass).
  Finally the row log-sum-exp is stored; a Q block that sees no key stores O = 0 once.

Per visited (i, j) pair this moves Q_i, K_j, V_j once and O_i twice: 5·B·d elements against
2·B²·d FLOP-pairs, so IO ≈ 5·N²·d/B ∝ N²d/√M.

Default B = ⌊√(M/3)⌋ with M = the GPU's shared memory per block in elements of the dtype
(reduced until the S tile, two chunks and m, l fit). A sweep over M either passes a GpuSpec
with another `shared_memory_per_block_bytes` or sets the tiles directly with block_q (Br) and
block_kv (Bc); dk = min(Br, Bc, d). Tiles need not be multiples of 16: this schedule exists for
counting (there is no kernel for it), Mma k is the chunk's exact width. Forward pass only.
"""
from __future__ import annotations

from math import isqrt

from ..errors import IosimError
from ..schedule import Alu, Exp, Load, Mma, Pipeline, Schedule, Store, loop
from .common import STAT_BYTES, Tiling, check_fits, check_warps, kv_segments, rows_in_block
from .fa2 import fwd_block_shape, q_block_kernel

WARPS = 4


def d_chunk(t: Tiling, d: int) -> int:
    return min(t.block_q, t.block_kv, d)


def smem_bytes(t: Tiling, d: int, eb: int) -> int:
    """Q chunk + K chunk + S tile (or V chunk + O chunk + P tile), plus m and l."""
    dk = d_chunk(t, d)
    return (t.block_q * dk + t.block_kv * dk + t.block_q * t.block_kv) * eb \
        + 2 * t.block_q * STAT_BYTES


def default_side(problem, gpu) -> int:
    d, eb = problem.head_dim, problem.elem_bytes
    side = max(1, isqrt(gpu.shared_memory_per_block_bytes // eb // 3))
    while side > 1 and smem_bytes(Tiling(side, side, 1, WARPS), d, eb) > \
            gpu.shared_memory_per_block_bytes:
        side -= 1
    return side


def tiling(problem, gpu, overrides: dict) -> Tiling:
    side = default_side(problem, gpu)
    over = {k: v for k, v in overrides.items() if v is not None}
    t = Tiling(**{"block_q": side, "block_kv": side, "stages": 1, "warps": WARPS, **over})
    for name in ("block_q", "block_kv", "stages", "warps"):
        v = getattr(t, name)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise IosimError(f"{name.replace('_', '-')} must be a positive integer, got {v!r}")
    check_warps(t.warps)
    d, eb = problem.head_dim, problem.elem_bytes
    check_fits(gpu, f"square tiling {t.block_q}×{t.block_kv} (d-chunk {d_chunk(t, d)}) at d={d}",
               smem_bytes(t, d, eb), 32, t.threads,
               f"{side}×{side} would fit")
    return t


def chunks(d: int, dk: int, body_of) -> tuple:
    """Loop "c" over the d-chunks: the full ones, then the short last one."""
    full, tail = divmod(d, dk)
    return (*loop("c", 0, full, body_of(dk)), *loop("c", full, full + (tail > 0), body_of(tail)))


def program(problem, t: Tiling, b: int, h: int, i: int) -> tuple:
    d, eb = problem.head_dim, problem.elem_bytes
    br, bc = t.block_q, t.block_kv
    dk = d_chunk(t, d)
    hk = h // problem.group_size
    rq = rows_in_block(i, br, problem.seq_q)

    def step(rkv: int, masked: bool, first: bool) -> tuple:
        def qk(w):   # Q_i and K_j chunks pass through SRAM; S_ij accumulates there
            return (Load("Q", (b, h, i, "c"), rq, w, rq * w * eb),
                    Load("K", (b, hk, "j", "c"), rkv, w, rkv * w * eb),
                    Mma("S+=Q_c K_c^T", br, bc, w))

        def pv(w):   # O_i's chunk is read (unless still zero), updated and written back
            ops = [Load("V", (b, hk, "j", "c"), rkv, w, rkv * w * eb)]
            if not first:
                ops.append(Load("O", (b, h, i, "c"), rq, w, rq * w * eb))
            return (*ops, Mma("O_c+=PV_c", br, w, bc), Alu("update O", 3 * br * w),
                    Store("O", (b, h, i, "c"), rq, w, rq * w * eb))

        return (*chunks(d, dk, qk),
                *((Alu("mask", br * bc),) if masked else ()),
                Alu("softmax", 3 * br * bc),            # max, subtract, row sum
                Exp("exp", br * bc + 2 * br),           # P̃, e^{m_old − m_new}, e^{m̃ − m_new}
                Alu("stats", 4 * br),
                *chunks(d, dk, pv))

    prog = []
    segs = kv_segments(problem, i, br, bc)
    for seg in segs:
        rkv = rows_in_block(seg.stop - 1, bc, problem.seq_kv)
        masked = seg.masked or seg.ragged
        start = seg.start
        if start == 0:                      # the first KV block: O_i is not read yet
            prog += loop("j", 0, 1, step(rkv, masked, first=True))
            start = 1
        prog += loop("j", start, seg.stop, step(rkv, masked, first=False))
    if not segs:                            # rows that see no key: O = 0
        prog.append(Store("O", (b, h, i), rq, d, rq * d * eb))
    prog.append(Store("LSE", (b, h, i), rq, 1, rq * STAT_BYTES))
    return tuple(prog)


def build(problem, gpu, fwd_overrides: dict, bwd_overrides: dict) -> Schedule:
    if problem.direction != "fwd":
        raise IosimError("square models the forward pass only (small-cache IO study)")
    t = tiling(problem, gpu, fwd_overrides)
    d, eb = problem.head_dim, problem.elem_bytes
    kernel = q_block_kernel("square_fwd", problem, t, smem_bytes(t, d, eb), 32,
                            lambda b, h, i: program(problem, t, b, h, i), Pipeline(stages=1),
                            lambda i: fwd_block_shape(problem, t, i))
    return Schedule("square", problem, {"fwd": t}, (kernel,),
                    (f"square tiles {t.block_q}×{t.block_kv}, d-chunk {d_chunk(t, d)}",))
