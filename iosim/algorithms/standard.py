"""Standard attention: S = QKᵀ/√d and P = softmax(S) materialized in global memory.

Forward, three kernels per (batch, query head):
  1. `std_fwd_qk`: S = QKᵀ/√d, a batched cuBLAS-style GEMM. Grid (⌈N_q/BM⌉, ⌈N_kv/BN⌉, B·H):
     each CTA owns one BM×BN tile of S, walks the head dimension in BK-wide steps loading a
     BM×BK panel of Q and a BN×BK panel of K into shared memory (`stages` buffers), keeps the
     fp32 accumulator in registers, scales by 1/√d in the epilogue and stores the S tile in the
     input dtype.
  2. `std_fwd_softmax`: one CTA of 4 warps per 4 rows, one warp per row. The rows of S are
     read, masked (causal), max-reduced, exponentiated, summed, scaled and stored as P. When the
     CTA's 4 rows fit in shared memory (4·N_kv·elem ≤ the per-block limit) S is read once;
     otherwise the kernel runs two passes over SOFTMAX_CHUNK-wide column chunks (online max and
     sum, then recompute exp and store P), reading S twice and computing exp twice, as
     PyTorch's long-row softmax does.
  3. `std_fwd_pv`: O = P V, a GEMM with its K-loop over N_kv; output tile BM × min(BN, d).

Causal: standard attention computes the full S (no tile skipping) and applies the mask in the
softmax kernel; masked entries still cost their GEMM FLOPs, bytes, and exp (exp(−∞) = 0).

Backward (S, P saved by the forward; D = rowsum(dO∘O)):
  `std_bwd_D` (row kernel), dV = Pᵀ dO, dP = dO Vᵀ (stored, N_q×N_kv), `std_bwd_dS`
  (elementwise: reads P, dP, D; stores dS = P∘(dP − D)), dQ = dS K /√d, dK = dSᵀ Q /√d.
  GQA: dK and dV are computed per query head (dK_expanded, dV_expanded) and summed by a reduce
  kernel, as in fa2.

Counting conventions: loads and stores move only valid rows/columns of ragged tiles; Mma dims
are the executed (padded) tile; GEMM epilogue Alu counts the padded tile held in registers;
the row and elementwise kernels count valid elements (one thread per element, idle lanes
free). Tile coordinates are (row-tile, column-tile) indices of the stored tensor in the tile
sizes of that load (panels of a K-loop are indexed in BK units).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..errors import IosimError
from ..l1_curve import hit_probability, l1_capacity_bytes
from ..machine import resident_ctas_per_sm
from ..schedule import (Alu, Barrier, Exp, Kernel, Launch, Load, Loop, Mma, Pipeline, Schedule,
                        Store, classes_by_edges, loop)
from . import cublas_fallback as fallback
from . import softmax_code
from .cublas_tiles import GemmTile, parse as parse_gemm_tiles, text as text_of_tiles
from .common import (LINE_BYTES, SECTOR_BYTES, STAT_BYTES, Tiling, ceil_div, check_fits,
                     grid_index, occupancy, pick_tiling, partial_sector_writes, rows_in_block,
                     rows_off_sector, sector_bytes_read)
from .fa2 import kv_block_kernel, q_block_kernel, reduce_dkv_program

BK = 64                 # K-loop step of every GEMM (elements); cuBLAS's sm90 kernels step 64
ROWS_PER_CTA = 4        # softmax and D kernels: one warp per row, 4 warps per CTA
SOFTMAX_CHUNK = 2048    # columns per step of the two-pass softmax
REG_OVERHEAD = 40       # addresses, loop state: registers beyond the accumulator tile

# First choice: the tile cuBLAS ran on the H200 for these GEMMs (Nsight Compute kernel names
# nvjet_sm90_hsh_256x128_64x4: 256×128 output tile, K step 64, 4 stages; a producer and two
# consumer warpgroups); GPUs without that much shared memory fall back to 128×128.
CANDIDATES = (Tiling(256, 128, 4, 12), Tiling(128, 128, 2, 4), Tiling(128, 128, 2, 8),
              Tiling(128, 64, 2, 4), Tiling(64, 64, 2, 4))


# ---- resources ------------------------------------------------------------------------
def gemm_smem_bytes(t: Tiling, eb: int, bk: int = BK) -> int:
    """`stages` buffers of a BM×BK panel of A and a BN×BK panel of B (ncu on cuBLAS's
    fallback kernels: 73,728 B for 256x128_32x3, 147,456 for 128x256_64x3, 163,840 for
    64x256_64x4, 32,768 for the cutlass_75 128x128)."""
    return (t.block_q + t.block_kv) * bk * t.stages * eb


def gemm_registers(t: Tiling) -> int:
    """The fp32 BM×BN accumulator spread over the CTA's threads, plus overhead."""
    return ceil_div(t.block_q * t.block_kv, t.threads) + REG_OVERHEAD


def tiling(problem, gpu, direction: str, **overrides) -> Tiling:
    eb = problem.elem_bytes

    def fits(t: Tiling):
        check_fits(gpu, f"standard {direction} GEMM tile {t.describe()} (BK={BK})",
                   gemm_smem_bytes(t, eb), gemm_registers(t), t.threads)
    return pick_tiling(CANDIDATES, fits, overrides)


# ---- GEMM ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Operand:
    """One GEMM operand as stored in global memory. `transposed`: the GEMM reads the stored
    tensor transposed (Kᵀ in QKᵀ, Pᵀ in Pᵀ dO), so a panel's rows and columns swap."""

    tensor: str
    eb: int
    transposed: bool = False

    def panel(self, prefix: tuple, outer, k, outer_len: int, k_len: int, rows_along_k: bool,
              box: tuple | None = None, outer_index: int = 0, pitch_bytes: int = 0,
              slices: int = 1, copy_kept: float | None = None, outer_block: int = 0,
              l1: bool = False):
        """The panel as stored: coordinates and rows×cols in the tensor's own layout. `box`:
        the (outer, k) extent of the TMA box that copies it. Its rows past the tensor's edge
        cross the L2→SM path in full, and each valid row as the whole sectors its box row
        touches (common.sector_bytes_read, at the tensor's row pitch): Load.oob_bytes holds
        what that adds to the panel's bytes (measurements/h200/tma_pitch/). K steps start on
        the sector grid (BK·bytes a multiple of 32). `slices`: the CTAs of a cluster that
        share the panel (multicast) each copy 1/slices of every box row, and each slice
        crosses as the sectors it touches, once per CTA it reaches (box_excess_bytes).
        `copy_kept` (no box: cuBLAS's fallback kernels' narrow copies, align2's 4-byte
        cp.async and align1's 2-byte LDG): the sectors each row
        segment touches, a K-step boundary sector crossing again unless kept in L1 with that
        probability (copy_excess_bytes); `outer_block`, the tile's extent along the outer
        dimension, places the panel's first row or column. `l1`: copied by plain loads through
        the SM's L1 (cuBLAS's align1 kernels' 2-byte LDG; Load.l1)."""
        nbytes = outer_len * k_len * self.eb
        oob = 0
        if box:
            oob = box_excess_bytes(self.eb, rows_along_k, box, outer_len, k_len, outer_index,
                                   pitch_bytes, slices)
        elif copy_kept is not None:
            if outer_block <= 0:
                raise ValueError("a narrow-copied panel needs its tile's outer_block")
            oob = copy_excess_bytes(self.eb, rows_along_k, outer_len, k_len,
                                    outer_index * outer_block, pitch_bytes, copy_kept)
        if rows_along_k:
            return Load(self.tensor, (*prefix, k, outer), k_len, outer_len, nbytes, oob_bytes=oob,
                        multicast=slices, l1=l1)
        return Load(self.tensor, (*prefix, outer, k), outer_len, k_len, nbytes, oob_bytes=oob,
                    multicast=slices, l1=l1)


@lru_cache(maxsize=16384)
def box_excess_bytes(eb: int, rows_along_k: bool, box: tuple, outer_len: int, k_len: int,
                     outer_index: int, pitch_bytes: int, slices: int = 1) -> int:
    """The L2→SM bytes a TMA box panel moves beyond its valid bytes (Operand.panel): its rows
    past the tensor's edge in full, and the rest of the sectors its valid rows touch, each row
    cut into `slices` equal segments when a cluster multicasts it (each segment's sectors
    counted whole). Slices: Nsight Compute on the H200, the P·V kernel at N 2200 d 128
    (`nvjet_sm90_hsh_64x184_64x6_2x1`: two CTAs along the columns share each P box; P's rows
    every other one 16 bytes into a sector) read 8.7% more than whole 128-byte box rows
    would, as two 64-byte halves per row do (tests/test_cublas_given_tiles.py)."""
    if rows_along_k:    # box rows along K; each box[0] columns from outer_index·box[0]
        width = box[0] * eb
        part = width // slices
        read = (sum(sector_bytes_read(0, k_len, outer_index * width + s * part, part,
                                      pitch_bytes) for s in range(slices))
                + (box[1] - k_len) * width)
    else:               # box rows: the block's; each box[1] columns from a K-step start
        width = box[1] * eb
        part = width // slices
        read = (sum(sector_bytes_read(outer_index * box[0], outer_len, s * part, part,
                                      pitch_bytes) for s in range(slices))
                + (box[0] - outer_len) * width)
    return read - outer_len * k_len * eb


@lru_cache(maxsize=16384)
def copy_excess_bytes(eb: int, rows_along_k: bool, outer_len: int, k_len: int, outer_start: int,
                      pitch_bytes: int, kept: float) -> int:
    """The L2→SM bytes a panel copied in narrow pieces (cuBLAS's fallback kernels,
    cublas_fallback.py: align2's 4-byte cp.async, which cannot be .cg, and align1's 2-byte
    LDG, both through the SM's L1) moves beyond its valid bytes: each row segment fetches the
    32-byte sectors it touches (a 16-byte vector's narrow copies are issued together and the
    L1 merges their sectors; align1's probe kernels agree, Pᵀ dO to 0.01%).
    Panel rows along K (the stored tensor is read along its outer dimension: Pᵀ in Pᵀ dO,
    dSᵀ in dSᵀ Q): the segment's edge sectors are also the neighbouring CTA's, on another SM,
    so all of them cross. Rows along the outer dimension (P in P V, dS in dS K): a K step's
    segment of a row that starts inside a sector shares that sector with the same row's
    previous K step, fetched one step earlier by this CTA; the L1 still holds it with
    probability `kept` (gemm_kernel: the L1 probe's hit curve at one K step's lines on the
    SM), and then it does not cross again. Assumes K steps start on the sector grid (BK·bytes
    a multiple of 32) and, for rows along K, K steps of whole pitch periods (BK a multiple of
    32 / gcd(pitch mod 32, 32)), as BK 32 / 64 at 2 bytes are; a step that spans a whole
    stored row counts the sector it shares with the next row twice (tiny problems only)."""
    if rows_along_k:    # rows: one K index each; segment: the tile's outer columns
        read = sector_bytes_read(0, k_len, outer_start * eb, outer_len * eb, pitch_bytes)
        return read - outer_len * k_len * eb
    read = sector_bytes_read(outer_start, outer_len, 0, k_len * eb, pitch_bytes)
    shared = SECTOR_BYTES * rows_off_sector(outer_start, outer_len, 0, pitch_bytes)
    return max(0, round(read - outer_len * k_len * eb - kept * shared))


def gemm_program(name: str, a: Operand, a_prefix, b: Operand, b_prefix, c: str, c_prefix,
                 c_eb: int, m: int, n: int, k: int, bm: int, bn: int, i: int, j: int,
                 epilogue=(), bk: int = BK, warp_rows: int = 16,
                 thread_issued: bool = False, step_cycles: float = 0.0,
                 tma_box: bool = False, cluster: tuple = (1, 1),
                 copy_kept: float | None = None, l1_copies: bool = False) -> tuple:
    """C[i, j] = Σ_k A[i, k]·B[k, j] for one BM×BN output tile (M×N×K problem).

    A panels (BM×BK) and B panels (BK×BN) stream through shared memory; the accumulator
    stays in registers; the C tile is stored once (by the computing threads themselves with
    thread_issued: cuBLAS's fallback kernels, cublas_fallback.py). tma_box: the panels are
    TMA copies of whole BM×BK / BK×BN boxes (cuBLAS's sm90 kernels), a ragged tile's or K
    step's missing part included (Load.oob_bytes; "TMA copy boxes" in docs/validation.md),
    an A box multicast to the cluster's CTAs along the columns, a B box to those along the
    rows (cluster = (rows, cols) of CTAs). copy_kept: the panels are copied in narrow pieces
    (cuBLAS's fallback kernels: align2's 4-byte cp.async, align1's 2-byte LDG), each row
    segment as the sectors it touches,
    a K-step boundary sector fetched again unless the L1 kept it (copy_excess_bytes; the
    first K step has no previous one). l1_copies: the panels are loaded through the SM's L1
    (cuBLAS's align1 kernels: 2-byte LDG into registers), where a co-resident CTA's copy of
    the same panel can hit (Load.l1)."""
    rm = rows_in_block(i, bm, m)
    cn = rows_in_block(j, bn, n)
    full, tail = divmod(k, bk)

    def step(kc: int, kept: float | None) -> tuple:
        # A is stored M×K (rows along M) unless transposed; B is stored K×N unless transposed
        # pitches: A stored M×K (K×M when transposed), B stored K×N (N×K when transposed)
        return (a.panel(a_prefix, i, "k", rm, kc, rows_along_k=a.transposed,
                        box=(bm, bk) if tma_box else None, outer_index=i,
                        pitch_bytes=(m if a.transposed else k) * a.eb, slices=cluster[1],
                        copy_kept=kept, outer_block=bm, l1=l1_copies),
                b.panel(b_prefix, j, "k", cn, kc, rows_along_k=not b.transposed,
                        box=(bn, bk) if tma_box else None, outer_index=j,
                        pitch_bytes=(k if b.transposed else n) * b.eb, slices=cluster[0],
                        copy_kept=kept, outer_block=bn, l1=l1_copies),
                Mma(name, bm, bn, bk, warp_rows),
                *((Barrier("k_step", step_cycles),) if step_cycles else ()))

    # a loop's panels are one op for all its iterations: the full steps' expected kept share
    # spreads the first step's (nothing kept) over them
    kept_full = kept_tail = None
    if copy_kept is not None:
        kept_full = copy_kept * (full - 1) / full if full else 0.0
        kept_tail = copy_kept if full else 0.0
    # the ragged last K step only when there is one (its body is not built otherwise)
    prog = [*loop("k", 0, full, step(bk, kept_full)),
            *(loop("k", full, full + 1, step(tail, kept_tail)) if tail else ())]
    prog += epilogue
    if rm * cn:     # a tile past the edge (a cluster's padding) stores nothing
        partial = partial_sector_writes(i * bm, rm, j * bn * c_eb, cn * c_eb, n * c_eb)
        prog.append(Store(c, (*c_prefix, i, j), rm, cn, rm * cn * c_eb,
                          thread_issued=thread_issued, partial_sectors=partial,
                          tma_epilogue=tma_box))
    return tuple(prog)


def tile_grid(problem, heads: int, m: int, n: int, bm: int, bn: int,
              cluster: tuple = (1, 1)) -> tuple:
    """A batched GEMM's grid: its tile counts rounded up to the cluster's extent, B·heads."""
    return (ceil_div(ceil_div(m, bm), cluster[0]) * cluster[0],
            ceil_div(ceil_div(n, bn), cluster[1]) * cluster[1], problem.batch * heads)


def tile_kernel(name, problem, heads: int, m: int, n: int, bm: int, bn: int, t: Tiling,
                smem: int, regs: int, program_of, pipeline, cluster: tuple = (1, 1)) -> Kernel:
    """Grid (⌈M/BM⌉, ⌈N/BN⌉, B·heads), z = b·heads + h: a batched GEMM's launch shape, its
    tile counts rounded up to multiples of the cluster's (rows, cols) extent (cublas_tiles.py:
    the padded tiles lie past the tensor's edge). CTAs fall into classes: interior tiles, the
    ragged last row of tiles, the ragged last column, the corner, and the padding's."""
    tiles_m, tiles_n = ceil_div(m, bm), ceil_div(n, bn)
    grid = tile_grid(problem, heads, m, n, bm, bn, cluster)

    def coord(cta: int) -> tuple:
        i, j, z = grid_index(cta, grid)
        return (i, j, *divmod(z, heads))

    def program(cta: int) -> tuple:
        i, j, b, h = coord(cta)
        return program_of(b, h, i, j)

    classes, class_of, period = classes_by_edges(grid, m % bm != 0, n % bn != 0,
                                                 grid[0] - tiles_m, grid[1] - tiles_n)
    return Kernel(name=name, launch=Launch(grid, t.threads, smem, regs), program=program,
                  classes=classes, class_of=class_of, class_period=period, cta_coord=coord,
                  pipeline=pipeline, coord_names=("row_tile", "col_tile", "batch", "head"))


def copy_kept_fraction(gpu, launch, a: Operand, b: Operand, m: int, n: int, k: int, bm: int,
                       bn: int, bk: int) -> float:
    """How likely the L1 still holds a sector a narrow-copied panel row shares with its
    previous K step (copy_excess_bytes): the H200 L1 probe's hit curve (l1_curve.
    hit_probability) at a stack distance of one K step's copies on the SM, the lines a first
    tile's two panels touch times the CTAs resident per SM, in the L1 beside the kernel's
    carve-out (the driver's, for the kernel's occupancy). Checked against Nsight Compute on
    the align2 and align1 probes' P·V kernels (measurements/h200/cublas_align2/,
    cublas_align1/, tests/test_cublas_fallback.py)."""
    capacity = l1_capacity_bytes(gpu, launch, occupancy(gpu, launch))
    if capacity <= 0:
        return 0.0

    def lines(op: Operand, outer: int, rows_along_k: bool, pitch: int) -> int:
        rows, width = (bk, outer) if rows_along_k else (outer, bk)
        return sector_bytes_read(0, rows, 0, width * op.eb, pitch * op.eb, unit=LINE_BYTES)
    step_bytes = (lines(a, min(bm, m), a.transposed, m if a.transposed else k)
                  + lines(b, min(bn, n), not b.transposed, k if b.transposed else n))
    return hit_probability(resident_ctas_per_sm(gpu, launch) * step_bytes, capacity)


def gemm_kernel(name, problem, gpu, t: Tiling, mma: str, a: Operand, b: Operand, c: str,
                c_eb: int, m: int, n: int, k: int, bn: int, b_is_kv: bool,
                heads: int | None = None, scale: bool = False, fill_wave: bool = True,
                given: GemmTile | None = None) -> Kernel:
    """A batched GEMM over (batch, query head); B operands of K/V use head h // group. Its
    tile: `given` (the tile cuBLAS is known to run, cublas_tiles.py), else t.block_q × bn, or
    with fill_wave (the tile was not the user's) gemm_tile of it for this grid."""
    heads = heads or problem.heads_q
    g = problem.group_size
    eb = problem.elem_bytes
    fb = None
    align = fallback.alignment(problem, gpu) if fill_wave else 0
    if isinstance(given, fallback.FallbackTile) and not align:
        why = ("the tiling options override the GEMMs' tiles" if not fill_wave else
               f"{gpu.name} has no TMA" if not gpu.features.tma else
               f"S's row pitch ({problem.seq_kv * problem.elem_bytes} B) is on "
               f"{fallback.TMA_STRIDE_ALIGN_BYTES} bytes")
        raise IosimError(f"{name} is given the fallback kernel {given.kernel}, which cuBLAS runs "
                         f"only where S's row pitch is off {fallback.TMA_STRIDE_ALIGN_BYTES} bytes "
                         f"on a GPU with TMA; here {why}")
    if isinstance(given, GemmTile) and align:
        raise IosimError(f"{name} is given the tile {given.text()}, an sm90 GEMM's, but S's row "
                         f"pitch ({problem.seq_kv * problem.elem_bytes} B) is off "
                         f"{fallback.TMA_STRIDE_ALIGN_BYTES} bytes: cuBLAS runs a CUTLASS fallback "
                         "kernel there (give its name, e.g. std_fwd_pv=cutlass_80_tensorop_f16_"
                         "s16816gemm_f16_64x64_64x4_nn_align2)")
    if align:
        narrow = n == problem.head_dim and k != problem.head_dim     # O, dQ, dK, dV
        fb = (given if isinstance(given, fallback.FallbackTile) else
              fallback.spread_over_sms(fallback.narrow_output_tile(n, align), m, n,
                                       problem.batch * heads, gpu.sm_count) if narrow
              else fallback.square_output_tile(k, align))
        tt = Tiling(fb.rows, fb.cols, fb.stages, fb.warps)
    elif given is not None:
        if given.cluster != (1, 1) and not gpu.features.tma:
            raise IosimError(f"{name}'s given tile {given.text()} runs in a thread-block cluster, "
                             f"which {gpu.name} has not (clusters and TMA multicast are sm90's)")
        tt = Tiling(given.rows, given.cols, given.stages, t.warps)
        check_fits(gpu, f"{name}'s given tile {given.text()} (BK={BK})",
                   gemm_smem_bytes(tt, eb), gemm_registers(tt), tt.threads)
    elif fill_wave:
        tt = gemm_tile(t, bn, m, n, problem.batch * heads, gpu, eb, split_n=n > bn)
    else:
        tt = Tiling(t.block_q, bn, t.stages, t.warps)
    bm, bn = tt.block_q, tt.block_kv
    epilogue = (Alu("scale", bm * bn),) if scale else ()
    cluster = given.cluster if given is not None and fb is None else (1, 1)
    fallback_args = dict(bk=fb.bk, warp_rows=fb.warp_rows, thread_issued=True,
                         step_cycles=fb.regime.k_step_cycles) if fb \
        else {"tma_box": gpu.features.tma, "cluster": cluster}
    if fb is not None:
        # both fallback regimes copy row segments narrower than 16 bytes (align2: 4-byte
        # cp.async, align1: 2-byte LDG), each touching whole sectors; align1's plain loads
        # go through the SM's L1, where co-resident CTAs share panels (align2's cp.async.ca
        # does too, but its probe kernels, one to three CTAs per SM, read no fewer bytes
        # than their panels': no sharing is modelled for them)
        launch = Launch(tile_grid(problem, heads, m, n, bm, bn), tt.threads,
                        gemm_smem_bytes(tt, eb, fb.bk), fb.registers)
        fallback_args["copy_kept"] = copy_kept_fraction(gpu, launch, a, b, m, n, k, bm, bn,
                                                        fb.bk)
        fallback_args["l1_copies"] = align == 1

    def program_of(bb, h, i, j):
        hb = h // g if b_is_kv else h
        return gemm_program(mma, a, (bb, h), b, (bb, hb), c, (bb, h), c_eb, m, n, k,
                            bm, bn, i, j, epilogue, **fallback_args)

    if fb is None:
        return tile_kernel(name, problem, heads, m, n, bm, bn, tt, gemm_smem_bytes(tt, eb),
                           gemm_registers(tt), program_of, Pipeline(stages=tt.stages), cluster)
    pipeline = Pipeline(stages=fb.stages, mma_instruction="mma_sync",
                        copy_issue_cycles_per_byte=fb.regime.copy_issue_cycles_per_byte,
                        store_issue_cycles_per_byte=fb.regime.store_issue_cycles_per_byte)
    return tile_kernel(name, problem, heads, m, n, bm, bn, tt, gemm_smem_bytes(tt, eb, fb.bk),
                       fb.registers, program_of, pipeline)


# ---- row kernels ----------------------------------------------------------------------
def line_misaligned(problem) -> bool:
    """Whether S's / P's rows (N·bytes apart) start off the 128-byte line: the softmax's
    plain row loads and stores then stream slower (Load.line_misaligned)."""
    return (problem.seq_kv * problem.elem_bytes) % LINE_BYTES != 0


def softmax_program(problem, gpu, b, h, i, resident: int = 1, kept: tuple = ()) -> tuple:
    """resident: the kernel's CTAs per SM (machine.resident_ctas_per_sm), each a warp per SM
    sub-partition; kept: softmax_code.copy_kept of its row copies (softmax_kept)."""
    n, eb = problem.seq_kv, problem.elem_bytes
    rows = rows_in_block(i, ROWS_PER_CTA, problem.seq_q)
    mis = line_misaligned(problem)
    mask = (Alu("mask", rows * n),) if problem.causal else ()
    if single_pass(problem, gpu):   # the CTA's rows of S sit in shared memory
        # its warps copy their rows in dependent round trips, and its code issues more
        # instructions than its three counted ops per element, spread over them (softmax_code:
        # the kernel's SASS and Nsight Compute)
        issue = (softmax_code.issued_per_element(n, eb) / 3
                 / softmax_code.issue_efficiency(n, eb, resident))
        # a warp alone on its sub-partition issues its row slower than the SM's rate: its
        # lone time is a floor under the three ops, less the exponentials' own time alone
        lone = max(0.0, softmax_code.lone_row_cycles(n, eb)
                   - 2 * rows * n / gpu.exp_per_clock_per_sm) / 3
        # the sectors its load instructions request beyond S's bytes (softmax_code.
        # row_read_bytes: each trip's touched sectors, less those the L1 kept from an earlier
        # trip) cross the L2 → SM path and hold no line
        extra = softmax_code.rows_read_bytes(i * ROWS_PER_CTA, rows, n * eb, kept) - rows * n * eb
        return (Load("S", (b, h, i), rows, n, rows * n * eb, oob_bytes=extra,
                     line_misaligned=mis, round_trips=softmax_code.row_load_trips(n * eb)),
                *mask,
                Alu("max", rows * n, issue_per_op=issue, lone_cycles=lone),
                Exp("exp", 2 * rows * n),   # for the sum, then for P
                Alu("sum", rows * n, issue_per_op=issue, lone_cycles=lone),
                Alu("scale", rows * n, issue_per_op=issue, lone_cycles=lone),
                Store("P", (b, h, i), rows, n, rows * n * eb,
                      partial_sectors=partial_sector_writes(i * ROWS_PER_CTA, rows, 0, n * eb,
                                                            n * eb), line_misaligned=mis))
    # two passes over column chunks: a CTA's rows are still one contiguous range, but its
    # partial-sector ends are not counted here (zero whenever N is a multiple of 4)
    full, tail = divmod(n, SOFTMAX_CHUNK)

    def chunks(body_of) -> tuple:
        return (*loop("c", 0, full, body_of(SOFTMAX_CHUNK)),
                *(loop("c", full, full + 1, body_of(tail)) if tail else ()))

    def pass1(w):   # online row max and sum of exp
        return (Load("S", (b, h, i, "c"), rows, w, rows * w * eb, line_misaligned=mis),
                *((Alu("mask", rows * w),) if problem.causal else ()),
                Alu("online max,sum", 2 * rows * w), Exp("exp", rows * w))

    def pass2(w):   # recompute exp(S − m)/l and store P
        return (Load("S", (b, h, i, "c"), rows, w, rows * w * eb, line_misaligned=mis),
                *((Alu("mask", rows * w),) if problem.causal else ()),
                Exp("exp", rows * w), Alu("subtract,scale", 2 * rows * w),
                Store("P", (b, h, i, "c"), rows, w, rows * w * eb, line_misaligned=mis))
    return chunks(pass1) + chunks(pass2)


def softmax_kept(problem, gpu, launch) -> tuple:
    """softmax_code.copy_kept for the softmax kernel's launch: its resident warps (a warp per
    row, ROWS_PER_CTA per CTA) and the L1 beside its carve-out (l1_curve); () for the two-pass
    form, whose chunk loads are not enumerated."""
    if not single_pass(problem, gpu):
        return ()
    capacity = l1_capacity_bytes(gpu, launch, occupancy(gpu, launch))
    return softmax_code.copy_kept(problem.seq_kv * problem.elem_bytes,
                                  resident_ctas_per_sm(gpu, launch) * ROWS_PER_CTA, capacity)


def single_pass(problem, gpu) -> bool:
    return ROWS_PER_CTA * problem.seq_kv * problem.elem_bytes <= gpu.shared_memory_per_block_bytes


def row_tiling() -> Tiling:
    return Tiling(ROWS_PER_CTA, 16, 1, ROWS_PER_CTA)


def d_program(problem, b, h, i) -> tuple:
    d, eb = problem.head_dim, problem.elem_bytes
    rows = rows_in_block(i, ROWS_PER_CTA, problem.seq_q)
    return (Load("O", (b, h, i), rows, d, rows * d * eb),
            Load("dO", (b, h, i), rows, d, rows * d * eb),
            Alu("D=rowsum(dO*O)", 2 * rows * d),
            Store("D", (b, h, i), rows, 1, rows * STAT_BYTES))


def ds_program(problem, t: Tiling, b, h, i, j) -> tuple:
    """dS = P∘(dP − D) on one BM×BN tile: an elementwise kernel, nothing reused."""
    eb = problem.elem_bytes
    rm = rows_in_block(i, t.block_q, problem.seq_q)
    cn = rows_in_block(j, t.block_kv, problem.seq_kv)
    # its tiles are not flagged line_misaligned: that factor was measured on whole-row streams
    # (the softmax's), and the partial-sector figure on a tile store whose reference pitches
    # were on and off the line alike (machine.partial_sector_write_cost_bytes)
    return (Load("P", (b, h, i, j), rm, cn, rm * cn * eb),
            Load("dP", (b, h, i, j), rm, cn, rm * cn * eb),
            Load("D", (b, h, i), rm, 1, rm * STAT_BYTES),
            Alu("dS=P*(dP-D)", 2 * rm * cn),
            Store("dS", (b, h, i, j), rm, cn, rm * cn * eb,
                  partial_sectors=partial_sector_writes(i * t.block_q, rm, j * t.block_kv * eb,
                                                        cn * eb, problem.seq_kv * eb)))


# ---- schedule -----------------------------------------------------------------------
def narrow_gemm_tiling(t: Tiling, bd: int, gpu, eb: int) -> Tiling:
    """The tile of a GEMM whose output is only d wide: the accumulator area BM×BN is kept by
    widening BM (the accumulator registers are what bound a GEMM tile), and the pipeline
    depth shrinks until the panels fit shared memory. cuBLAS does this on the H200: for the
    d = 64 output of P·V it ran nvjet_sm90_hsh_64x512_64x2 (512 rows, 2 stages) where the
    d = 128 output ran 128x256_64x4 (iosim/data/validation/measured_h200_kernels.csv)."""
    if bd >= t.block_kv:
        return t
    rows = t.block_q * t.block_kv // bd
    stages = stages_that_fit(rows, bd, t.stages, gpu, eb)
    return Tiling(rows, t.block_kv, stages, t.warps) if stages > 1 else t


def stages_that_fit(bm: int, bn: int, most: int, gpu, eb: int) -> int:
    """The most pipeline stages (≤ most, ≥ 2) whose BM and BN panels fit a block's shared
    memory; 1 if not even two do."""
    for stages in range(most, 1, -1):
        if gemm_smem_bytes(Tiling(bm, bn, stages), eb) <= gpu.shared_memory_per_block_bytes:
            return stages
    return 1


LINE_BYTES = 128   # an L2 cache line (4 sectors)
MIN_TILE = 64   # the smallest tile side of cuBLAS's sm90 kernels seen on the H200 (64x64_64x13)


def gemm_tile(t: Tiling, bn: int, m: int, n: int, batches: int, gpu, eb: int,
              split_n: bool = True) -> Tiling:
    """The BM×BN tile (as Tiling(BM, BN, stages, warps)) of a batched m×n GEMM output, from the
    first-choice tile t (BM = t.block_q) and BN = bn: the tile is halved, its longer side first
    (BN when square; only BM when `split_n` is off), while the halved grid still fits one wave
    (tiles ≤ SM count), so a grid too small to fill the chip is spread over more SMs at no
    cost in waves. This is the choice cuBLAS's heuristic made on the H200
    (measurements/h200/cublas_tiles/: torch.matmul of the standard attention's GEMMs over
    z = 1..512 matrices, N 512..8192, d 64 and 128; tests/test_cublas_tile.py): e.g. P·V at
    d 64, N 4096, z 8 ran 64x256_64x5 (256 rows: 128 tiles), at z 64 the 512-row tile. Not
    followed: cuBLAS's odd tiles on grids of a few matrices (8..80, 192 rows), its 256-row tile
    at K = 512, and its halving of a d = 128 output's columns (the d-wide GEMMs pass
    split_n=False: two CTAs would share each P panel at once, which the fast mode does not
    yet follow within 1%). Stages: as many as fit, up to t.stages."""
    bm = t.block_q

    def tiles(a: int, b: int) -> int:
        return ceil_div(m, a) * ceil_div(n, b) * batches

    while True:
        a, b = (bm // 2, bn) if (bm > bn or not split_n) else (bm, bn // 2)
        if min(a, b) < MIN_TILE or tiles(a, b) > gpu.sm_count:
            break
        bm, bn = a, b
    return Tiling(bm, bn, stages_that_fit(bm, bn, t.stages, gpu, eb), t.warps)


def forward_kernels(problem, gpu, t: Tiling, fill_wave: bool = True,
                    tiles: dict | None = None) -> tuple:
    d, eb, nq, nkv = problem.head_dim, problem.elem_bytes, problem.seq_q, problem.seq_kv
    tiles = tiles or {}

    def gemm(name, *args, **kw):
        return gemm_kernel(name, *args, fill_wave=fill_wave, given=tiles.get(name), **kw)
    bd = min(t.block_kv, d)                  # output tile width of the d-wide GEMMs
    td = narrow_gemm_tiling(t, bd, gpu, eb)
    rt = row_tiling()
    sm_smem = ROWS_PER_CTA * (nkv if single_pass(problem, gpu) else SOFTMAX_CHUNK) * eb
    sm_launch = Launch((ceil_div(nq, ROWS_PER_CTA), problem.batch, problem.heads_q),
                       rt.threads, sm_smem, 32)
    resident = resident_ctas_per_sm(gpu, sm_launch)
    kept = softmax_kept(problem, gpu, sm_launch)
    return (
        gemm("std_fwd_qk", problem, gpu, t, "S=QK^T", Operand("Q", eb),
                    Operand("K", eb, transposed=True), "S", eb, nq, nkv, d, t.block_kv,
                    b_is_kv=True, scale=True),
        q_block_kernel("std_fwd_softmax", problem, rt, sm_smem, 32,
                       lambda b, h, i: softmax_program(problem, gpu, b, h, i, resident, kept),
                       Pipeline(stages=1)),
        gemm("std_fwd_pv", problem, gpu, td, "O=PV", Operand("P", eb), Operand("V", eb),
                    "O", eb, nq, d, nkv, bd, b_is_kv=True),
    )


def backward_kernels(problem, gpu, t: Tiling, fill_wave: bool = True,
                    tiles: dict | None = None) -> tuple:
    d, eb, nq, nkv = problem.head_dim, problem.elem_bytes, problem.seq_q, problem.seq_kv
    tiles = tiles or {}

    def gemm(name, *args, **kw):
        return gemm_kernel(name, *args, fill_wave=fill_wave, given=tiles.get(name), **kw)
    bd = min(t.block_kv, d)
    td = narrow_gemm_tiling(t, bd, gpu, eb)
    g = problem.group_size
    dk = "dK" if g == 1 else "dK_expanded"
    dv = "dV" if g == 1 else "dV_expanded"
    rt = row_tiling()
    kernels = [
        q_block_kernel("std_bwd_D", problem, rt, 0, 32,
                       lambda b, h, i: d_program(problem, b, h, i), Pipeline(stages=1)),
        gemm("std_bwd_dV", problem, gpu, td, "dV=P^T dO", Operand("P", eb, transposed=True),
                    Operand("dO", eb), dv, eb, nkv, d, nq, bd, b_is_kv=False),
        gemm("std_bwd_dP", problem, gpu, t, "dP=dO V^T", Operand("dO", eb),
                    Operand("V", eb, transposed=True), "dP", eb, nq, nkv, d, t.block_kv,
                    b_is_kv=True),
        tile_kernel("std_bwd_dS", problem, problem.heads_q, nq, nkv, t.block_q, t.block_kv, t,
                    0, 32, lambda b, h, i, j: ds_program(problem, t, b, h, i, j),
                    Pipeline(stages=1)),
        gemm("std_bwd_dQ", problem, gpu, td, "dQ=dS K", Operand("dS", eb), Operand("K", eb),
                    "dQ", eb, nq, d, nkv, bd, b_is_kv=True, scale=True),
        gemm("std_bwd_dK", problem, gpu, td, "dK=dS^T Q", Operand("dS", eb, transposed=True),
                    Operand("Q", eb), dk, eb, nkv, d, nq, bd, b_is_kv=False, scale=True),
    ]
    if g > 1:
        small = Tiling(t.block_q, t.block_kv, 1, 4)
        kernels.append(kv_block_kernel(
            "std_bwd_reduce_dkv", problem, small, problem.heads_kv, 0, 32,
            lambda b, hk, j: reduce_dkv_program(problem, small, b, hk, j), Pipeline(stages=1)))
    return tuple(kernels)


def gemm_tile_of(kernel: Kernel) -> GemmTile:
    """The output tile a GEMM kernel runs: its first MMA's rows × columns, its pipeline depth."""
    def first_mma(items):
        for item in items:
            found = first_mma(item.body) if isinstance(item, Loop) else item
            if isinstance(found, Mma):
                return found
        return None
    mma = first_mma(kernel.program(kernel.classes[0][0]))
    return GemmTile(mma.m, mma.n, kernel.pipeline.stages)


def gemm_tiles_note(kernels, given: dict, user_tiled: bool) -> tuple:
    """A note naming the tiles the schedule's cuBLAS GEMMs run (not the fallback kernels',
    which have their own note) and where each came from: given (`gemm_tiles`), the user's
    tiling overrides (`user_tiled`), or the model's rule for cuBLAS's choice."""
    tiles = {k.name: given.get(k.name) or gemm_tile_of(k) for k in kernels
             if k.name in FORWARD_GEMMS + BACKWARD_GEMMS and k.pipeline.mma_instruction != "mma_sync"}
    if not tiles:
        return ()
    ruled = [k for k in tiles if k not in given]
    how = ("as given (--gemm-tiles)" if not ruled else
           f"{', '.join(ruled)} from the tiling options, the rest given" if user_tiled and given else
           "from the tiling options" if user_tiled else
           ("the model's rule for cuBLAS's choice (the H200's on the powers of two); off them "
            "cuBLAS often runs others, which its kernel names state (--gemm-tiles takes them)")
           + (f", for {', '.join(ruled)}; the rest given" if given else ""))
    return (f"cuBLAS GEMM tiles (rows x cols x stages) {text_of_tiles(tiles)}: {how}",)


FORWARD_GEMMS = ("std_fwd_qk", "std_fwd_pv")
BACKWARD_GEMMS = ("std_bwd_dV", "std_bwd_dP", "std_bwd_dQ", "std_bwd_dK")


def build(problem, gpu, fwd_overrides: dict, bwd_overrides: dict,
          gemm_tiles: str | None = None) -> Schedule:
    """gemm_tiles: the tiles cuBLAS is known to run for some of the GEMMs (cublas_tiles.py:
    "std_fwd_qk=200x128x5;..."); the others keep gemm_tile's rule."""
    tiles = parse_gemm_tiles(gemm_tiles)
    unknown = set(tiles) - set(FORWARD_GEMMS) - set(BACKWARD_GEMMS)
    if unknown:
        raise IosimError(f"gemm_tiles names no GEMM of standard attention: {', '.join(sorted(unknown))} "
                         f"(its GEMMs: {', '.join(FORWARD_GEMMS + BACKWARD_GEMMS)})")
    tilings, kernels = {}, []
    user_fwd = any(v is not None for v in fwd_overrides.values())
    user_bwd = any(v is not None for v in bwd_overrides.values())
    if problem.direction in ("fwd", "fwd+bwd"):
        tilings["fwd"] = tiling(problem, gpu, "forward", **fwd_overrides)
        kernels += forward_kernels(problem, gpu, tilings["fwd"], fill_wave=not user_fwd, tiles=tiles)
    if problem.direction in ("bwd", "fwd+bwd"):
        tilings["bwd"] = tiling(problem, gpu, "backward", **bwd_overrides)
        kernels += backward_kernels(problem, gpu, tilings["bwd"], fill_wave=not user_bwd, tiles=tiles)
    notes = ("causal: full S computed, mask applied in the softmax (no tile skipping)",) \
        if problem.causal else ()
    notes += gemm_tiles_note(kernels, tiles, user_fwd or user_bwd)
    if fallback.runs_fallback(problem, gpu):
        given = not any(k.pipeline.mma_instruction == "mma_sync" for k in kernels)
        notes += (f"S's row pitch ({problem.seq_kv * problem.elem_bytes} B) is not a multiple of "
                  f"{fallback.TMA_STRIDE_ALIGN_BYTES} B: no TMA descriptor can describe it, so "
                  "cuBLAS runs its fallback kernels (CUTLASS mma.sync, "
                  f"{fallback.alignment(problem, gpu) * problem.elem_bytes}-byte copies "
                  "and stores; algorithms/cublas_fallback.py), " +
                  ("not modelled with a GEMM tile given: the Hopper GEMM of that tile is"
                   if given else "modelled as such"),)
        named = {k: t.text() for k, t in tiles.items() if isinstance(t, fallback.FallbackTile)}
        if named:
            notes += ("fallback kernels as given (their names): "
                      + "; ".join(f"{k}={v}" for k, v in named.items()),)
    return Schedule("standard", problem, tilings, tuple(kernels), notes)
