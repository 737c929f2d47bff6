"""FlashAttention-1 (Dao et al. 2022), Algorithms 1 and 4: KV blocks in the outer loop.

Forward (`fa1_fwd`, Algorithm 1): one CTA per (batch, query head), grid (B, H).
  - First the CTA writes the initial O = 0 (input dtype), l = 0 and m = −∞ (fp32) of its head
    to global memory, one Br-row block at a time (Algorithm 1, line 2; counted as stores).
  - Outer loop over KV blocks j: K_j, V_j are loaded once and stay in shared memory for the
    whole inner loop.
  - Inner loop over Q blocks i (causal: only the blocks that see some key of block j, from
    `q_segments`): load Q_i, O_i, l_i, m_i; S = Q_i K_jᵀ; mask (causal partial or ragged
    tile); rowmax, P̃ = exp(S − m̃), rowsum; new m, l; O_i ← diag(l_new)⁻¹(diag(l_i)e^{m_i−m_new}
    O_i + e^{m̃−m_new} P̃ V_j); store O_i, l_i, m_i. O therefore crosses the SM boundary twice
    per (i, j) pair: the traffic FA-2 removes.

Backward (`fa1_bwd`, Algorithm 4, no dropout): one CTA per (batch, query head).
  - First the CTA zero-fills its dQ accumulator (fp32, as FA-1's CUDA code keeps dq_accum; the
    paper's dK = dV = 0 initialisation in HBM is not counted: dK_j, dV_j are accumulated on
    chip and written whole, so those zeros would never be read).
  - Outer loop over KV blocks j: K_j, V_j loaded once; dK_j, dV_j accumulate on chip.
  - Inner loop over Q blocks i: load Q_i, O_i, dO_i, dQ_i, l_i, m_i; recompute S and P from l,
    m; dV_j += Pᵀ dO_i; dP = dO_i V_jᵀ; D_i = rowsum(dO_i ∘ O_i) recomputed at every step as
    the paper does (hence O_i is loaded); dS = P∘(dP − D_i); dQ_i += dS K_j read-modify-written
    in global memory (fp32) at every step; dK_j += dSᵀ Q_i.
  - After the inner loop dK_j, dV_j are written once (per query head; GQA sums them in a
    reduce kernel as fa2 does). A final kernel converts dQ from fp32 to the dtype.

Block sizes: the paper's Bc = ⌈M/4d⌉, Br = min(⌈M/4d⌉, d) with M the shared memory per block in
elements of the dtype, each rounded DOWN to a multiple of 16 (tensor-core tiles; FA-1's CUDA
implementation uses such tiles too). On an H100 at d = 128, fp16: M = 116,224, ⌈M/4d⌉ = 227,
so Br × Bc = 128 × 224. The warp count is the first of 4, 8, 16 for which the tiles fit the
registers. If the paper's sizes do not fit at all (e.g. the backward pass, whose working set
the paper's asymptotic accounting ignores), the larger of Bc and Br (Bc on a tie) is halved,
rounded to 16, until a tiling fits; the schedule's notes say so. `--block-q` / `--block-kv` set Br / Bc directly.
"""
from __future__ import annotations

from functools import cache

from ..schedule import Alu, Barrier, Exp, Kernel, Launch, Load, Mma, Pipeline, Schedule, Store, loop
from .common import (ACC_BYTES, STAT_BYTES, Tiling, ceil_div, check_fits, kv_segments,
                     pick_tiling, q_segments, rows_in_block)
from .fa2 import REG_OVERHEAD, convert_dq_program, kv_block_kernel, q_block_kernel, \
    reduce_dkv_program

WARPS = (4, 8, 16)


# ---- block sizes and resources --------------------------------------------------------
def round16(x: int) -> int:
    return max(16, x // 16 * 16)


def paper_blocks(problem, gpu) -> tuple[int, int]:
    """(Br, Bc) of Algorithm 1, line 1, rounded down to multiples of 16."""
    m_elems = gpu.shared_memory_per_block_bytes // problem.elem_bytes
    bc = round16(ceil_div(m_elems, 4 * problem.head_dim))
    return min(bc, problem.head_dim), bc


def candidates(br: int, bc: int, stages: int = 1) -> tuple:
    """The paper's blocks, then the larger of Bc, Br halved, repeatedly; each with 4, 8, 16 warps."""
    sizes = [(br, bc)]
    while sizes[-1] != (16, 16):
        r, c = sizes[-1]
        sizes.append((r, round16(c // 2)) if c >= r and c > 16 else (round16(r // 2), c))
    return tuple(Tiling(r, c, stages, w) for r, c in sizes for w in WARPS)


def fwd_smem_bytes(t: Tiling, d: int, eb: int) -> int:
    """K_j, V_j resident; `stages` buffers of (Q_i, O_i, l_i, m_i)."""
    return 2 * t.block_kv * d * eb + t.stages * (2 * t.block_q * d * eb + 2 * t.block_q * STAT_BYTES)


def fwd_static_smem_bytes(t: Tiling, d: int) -> int:
    """fa1_fwd.cu's static shared memory: the cross-warp merge buffer xch, (WN − 1) column
    groups × Br rows × (d + 2) fp32 (one float when WN = 1). Beside the dynamic smem it
    decides the carve-out (sim/l1.py: FA-1 d 64, 64 × 448: 131,584 + 16,896 + 1,024 reserved
    bytes → the 164 KB configuration Nsight Compute reports)."""
    wn = fwd_warps_per_row_tile(t)
    return (wn - 1) * t.block_q * (d + 2) * 4 if wn > 1 else 4


def fwd_registers(t: Tiling, d: int) -> int:
    """fp32 S tile and P̃V product spread over the threads, plus overhead."""
    return ceil_div(t.block_q * t.block_kv + t.block_q * d, t.threads) + REG_OVERHEAD


def bwd_smem_bytes(t: Tiling, d: int, eb: int) -> int:
    """K_j, V_j resident; `stages` buffers of (Q_i, O_i, dO_i, fp32 dQ_i, l_i, m_i); P, dS."""
    per_q = 3 * t.block_q * d * eb + t.block_q * d * ACC_BYTES + 2 * t.block_q * STAT_BYTES
    return 2 * t.block_kv * d * eb + t.stages * per_q + 2 * t.block_q * t.block_kv * eb


def bwd_registers(t: Tiling, d: int) -> int:
    """fp32 dK_j, dV_j accumulators and S, dP tiles over the threads, plus overhead."""
    return ceil_div(2 * t.block_kv * d + 2 * t.block_q * t.block_kv, t.threads) + REG_OVERHEAD


def choose(problem, gpu, direction: str, smem_of, regs_of, overrides: dict):
    d, eb = problem.head_dim, problem.elem_bytes
    br, bc = paper_blocks(problem, gpu)
    cands = candidates(br, bc)

    def fits(t: Tiling):
        check_fits(gpu, f"fa1 {direction} tiling {t.describe()} at d={d}",
                   smem_of(t, d, eb), regs_of(t, d), t.threads)
    t = pick_tiling(cands, fits, overrides)
    note = ()
    if (t.block_q, t.block_kv) != (br, bc) and overrides.get("block_q") is None \
            and overrides.get("block_kv") is None:
        note = (f"fa1 {direction}: the paper's Br×Bc = {br}×{bc} does not fit {gpu.short_name}; "
                f"using {t.block_q}×{t.block_kv}",)
    return t, note


# ---- forward ------------------------------------------------------------------------
def q_blocks(problem, br: int) -> list[tuple[int, int, int]]:
    """(start, stop, rows) runs of Q blocks: the full ones, then the ragged last one."""
    n = ceil_div(problem.seq_q, br)
    tail = rows_in_block(n - 1, br, problem.seq_q)
    return [(0, n - 1, br), (n - 1, n, tail)] if tail < br else [(0, n, br)]


def init_program(problem, br: int, b, h, with_o: bool) -> tuple:
    """Zero-fill of O (dtype) and l, m (fp32), or of the fp32 dQ accumulator."""
    d, eb = problem.head_dim, problem.elem_bytes
    prog = []
    for start, stop, r in q_blocks(problem, br):
        body = ((Store("O", (b, h, "i"), r, d, r * d * eb),
                 Store("l", (b, h, "i"), r, 1, r * STAT_BYTES),
                 Store("m", (b, h, "i"), r, 1, r * STAT_BYTES)) if with_o else
                (Store("dQaccum", (b, h, "i"), r, d, r * d * ACC_BYTES),))
        prog += loop("i", start, stop, body)
    return tuple(prog)


def kv_outer(problem, t: Tiling, b, h, inner_of, after_of=None) -> tuple:
    """The outer loop over KV blocks j: K_j, V_j loaded once each, then the inner Q loop
    `inner_of(rows_q, masked, q_ragged, kv_ragged)`, then `after_of(j, rows_kv)`.
    Non-causal: every j runs the same inner loop, so j is a Loop; causal: one entry per j."""
    d, eb, bc = problem.head_dim, problem.elem_bytes, t.block_kv
    hk = h // problem.group_size
    inner_of = cache(inner_of)      # a causal grid asks for the same few bodies at every j

    def step(j, rows_kv: int) -> tuple:
        inner = []
        for seg in q_segments(problem, j if isinstance(j, int) else 0, t.block_q, bc):
            rq = rows_in_block(seg.stop - 1, t.block_q, problem.seq_q)
            inner += loop("i", seg.start, seg.stop, inner_of(rq, seg.masked, seg.ragged,
                                                              rows_kv < bc))
        return (Load("K", (b, hk, j), rows_kv, d, rows_kv * d * eb),   # K_j, V_j stay in SRAM
                Load("V", (b, hk, j), rows_kv, d, rows_kv * d * eb),   # for the whole i loop
                *inner, *(after_of(j, rows_kv) if after_of else ()))

    prog = []
    if not problem.causal:
        for seg in kv_segments(problem, 0, t.block_q, bc):
            prog += loop("j", seg.start, seg.stop,
                         step("j", rows_in_block(seg.stop - 1, bc, problem.seq_kv)))
    else:
        for j in range(ceil_div(problem.seq_kv, bc)):
            prog += step(j, rows_in_block(j, bc, problem.seq_kv))
    return tuple(prog)


def fwd_chunks(bc: int) -> int:
    """Column chunks fa1_fwd.cu computes a step's S in (CHK = 64, 32 or 16 columns, the largest
    that divides Bc): the running max rescales the P̃V accumulator once per chunk."""
    chk = 64 if bc % 64 == 0 else (32 if bc % 32 == 0 else 16)
    return bc // chk


def fwd_warps_per_row_tile(t: Tiling) -> int:
    """fa1_fwd.cu's WN: warps sharing a 16-row tile when the CTA has more warps than tiles."""
    return t.warps // min(t.warps, t.block_q // 16)


def fwd_chunk_rounds(t: Tiling) -> int:
    """Chunks the busiest warp of fa1_fwd.cu computes per step: warps of column group wn run
    chunks wn, wn + WN, ... (`for (int ch = wn; ch < NCH; ch += WN)`), ceil(NCH / WN)."""
    return ceil_div(fwd_chunks(t.block_kv), fwd_warps_per_row_tile(t))


def fwd_inner(problem, t: Tiling, b, h):
    d, eb = problem.head_dim, problem.elem_bytes
    br, bc = t.block_q, t.block_kv

    def body(rq: int, masked: bool, q_ragged: bool, kv_ragged: bool) -> tuple:
        ops = [Load("Q", (b, h, "i"), rq, d, rq * d * eb),
               Load("O", (b, h, "i"), rq, d, rq * d * eb),
               # the row statistics: 4-byte cp.async.ca copies (cp_async4), which look up L1
               # and hit it while the O_i stored since their last visit fit (sim/l1.py)
               Load("l", (b, h, "i"), rq, 1, rq * STAT_BYTES, l1=True),
               Load("m", (b, h, "i"), rq, 1, rq * STAT_BYTES, l1=True),
               Mma("S=QK^T", br, bc, d)]
        if masked or kv_ragged:             # padded Q rows are simply not stored
            ops.append(Alu("mask", br * bc))
        # fa1_fwd.cu's softmax, instruction by instruction (S in `chunks` column chunks with
        # a running max, fwd_chunks): per S element a scale multiply, a max, (s − m)·log2 e
        # (add, multiply), the row-sum add (5) and half a pack to fp16 for P̃V (one cvt packs
        # two); per chunk and row the running max's rescale factor e^{m_old − m} (one exp),
        # the two shuffle steps of max and the l update (4), and the P̃V accumulator's
        # rescale by it (d multiplies per row per chunk: the kernel rescales O in registers at
        # every chunk, not once per step)
        nch = fwd_chunks(bc)
        wn = fwd_warps_per_row_tile(t)
        # (m, l, P̃V) of the WN column groups merged through shared memory: 2 exps per row and
        # group, 2 ops per P̃V element and group (one Exp op: the kernel records one exp phase)
        ops += [Alu("softmax", 5 * br * bc + br * bc // 2),
                # P̃, chunk rescales, e^{m_i − m_new}, e^{m̃ − m_new}, the merge's
                Exp("exp", br * bc + br * nch + 2 * br + 2 * (wn - 1) * br),
                Alu("chunk stats", 4 * br * nch),
                Alu("rescale PV", br * d * nch),
                Mma("PV", br, d, bc),
                # the chunk loop's latency chains, per chunk on the critical warp (a warp of
                # column group wn runs chunks wn, wn + WN, ...: ceil(chunks / WN) of them)
                Barrier("chunk chains", fwd_chunk_rounds(t) * FWD_CHUNK_LATENCY_CYCLES)]
        if wn > 1:
            ops.append(Alu("merge", 2 * (wn - 1) * br * d))
        ops += [Alu("stats", 4 * br),              # m_new, l_new
                Alu("update O", 3 * br * d),       # rescale old O, add P̃V, divide by l_new
                # the epilogue's fixed latency (row statistics' shuffles, exps, division, the
                # old O read from shared memory; with WN > 1 the merge's shared-memory
                # exchange, its barrier, and 1 warp per sub-partition folding it in)
                Barrier("epilogue chain", FWD_EPILOGUE_LATENCY_CYCLES
                        + (wn - 1) * FWD_MERGE_LATENCY_CYCLES),
                # written by the threads from their P̃V fragments (FWD_STORE_ISSUE_...)
                # fa1_fwd.cu writes O_i from the P̃V fragments (8 rows x 16 bytes per warp
                # instruction): Store.layout "fragment"; its issue cost is the kernel's own
                # traced figure (thread_issued, FWD_STORE_ISSUE_CYCLES_PER_BYTE)
                Store("O", (b, h, "i"), rq, d, rq * d * eb, thread_issued=True, layout="fragment"),
                Store("l", (b, h, "i"), rq, 1, rq * STAT_BYTES),
                Store("m", (b, h, "i"), rq, 1, rq * STAT_BYTES)]
        return tuple(ops)
    return body


def fwd_program(problem, t: Tiling, b: int, h: int) -> tuple:
    return init_program(problem, t.block_q, b, h, with_o=True) + \
        kv_outer(problem, t, b, h, fwd_inner(problem, t, b, h))


def head_kernel(name, problem, t: Tiling, smem: int, regs: int, program_of, pipeline,
                static_smem: int = 0) -> Kernel:
    """Grid (B, H): one CTA per (batch, query head); all CTAs do the same work."""
    grid = (problem.batch, problem.heads_q, 1)

    def coord(cta: int) -> tuple:
        return cta % problem.batch, cta // problem.batch

    def program(cta: int) -> tuple:
        return program_of(*coord(cta))

    return Kernel(name=name, launch=Launch(grid, t.threads, smem, regs, static_smem), program=program,
                  classes=((0, problem.batch * problem.heads_q),), cta_coord=coord,
                  pipeline=pipeline, coord_names=("batch", "head"))


# ---- backward -----------------------------------------------------------------------
def bwd_inner(problem, t: Tiling, b, h):
    d, eb = problem.head_dim, problem.elem_bytes
    br, bc = t.block_q, t.block_kv

    def body(rq: int, masked: bool, q_ragged: bool, kv_ragged: bool) -> tuple:
        ops = [Load("Q", (b, h, "i"), rq, d, rq * d * eb),
               Load("O", (b, h, "i"), rq, d, rq * d * eb),
               Load("dO", (b, h, "i"), rq, d, rq * d * eb),
               Load("dQaccum", (b, h, "i"), rq, d, rq * d * ACC_BYTES),
               Load("l", (b, h, "i"), rq, 1, rq * STAT_BYTES),
               Load("m", (b, h, "i"), rq, 1, rq * STAT_BYTES),
               Mma("S=QK^T", br, bc, d)]
        if masked or q_ragged or kv_ragged:   # padded rows would leak into dK, dV
            ops.append(Alu("mask", br * bc))
        ops += [Exp("P=exp(S-m)", br * bc),
                Alu("P", 2 * br * bc),              # subtract m, divide by l
                Mma("dV+=P^T dO", bc, d, br),
                Mma("dP=dO V^T", br, bc, d),
                Alu("D=rowsum(dO*O)", 2 * br * d),
                Alu("dS=P*(dP-D)", 2 * br * bc),
                Mma("dQ+=dS K", br, d, bc),
                Store("dQaccum", (b, h, "i"), rq, d, rq * d * ACC_BYTES),
                Mma("dK+=dS^T Q", bc, d, br)]
        return tuple(ops)

    return body


def bwd_after(problem, t: Tiling, b, h):
    d, eb = problem.head_dim, problem.elem_bytes
    dk = "dK" if problem.group_size == 1 else "dK_expanded"
    dv = "dV" if problem.group_size == 1 else "dV_expanded"

    def after(j, rows_kv: int) -> tuple:   # dK_j, dV_j leave the chip once per j
        return (Alu("scale dK", t.block_kv * d),
                Store(dk, (b, h, j), rows_kv, d, rows_kv * d * eb),
                Store(dv, (b, h, j), rows_kv, d, rows_kv * d * eb))
    return after


def bwd_program(problem, t: Tiling, b: int, h: int) -> tuple:
    return init_program(problem, t.block_q, b, h, with_o=False) + \
        kv_outer(problem, t, b, h, bwd_inner(problem, t, b, h), bwd_after(problem, t, b, h))


# Cycles the CTA's threads spend issuing one byte of their own cp.async copies, in series with
# their compute (Pipeline.copy_issue_cycles_per_byte): the committed H200 traces
# (tests/data/traces/fa1_fwd_*.json, clock64 stamps; iosim.kernels.copy_issue,
# tests/test_copy_issue_traces.py): K, V, Q, O tiles and the l, m row statistics of a step
# over their bytes, median over the three traces (79.5 cycles per 16-byte copy per thread at
# 256 threads). The backward kernel is not traced: 0.
FWD_COPY_ISSUE_CYCLES_PER_BYTE = 0.0194

# Cycles the CTA's threads spend per byte of the O_i they write back at every step
# (Pipeline.store_issue_cycles_per_byte, Store.thread_issued): fa1_fwd.cu's epilogue reads the
# old O_i from shared memory and stores the new one straight from the P̃V fragments, one
# 4-byte st.global per lane, so a warp instruction writes 8 rows x 16 bytes (8 lines) and the
# loop costs ~7 cycles per 128 bytes. Measured from the committed H200 traces
# (tests/data/traces/fa1_fwd_*.json, iosim.kernels.copy_issue.store_issue_slope,
# tests/test_copy_issue_traces.py): the PV -> O-store stamp gap of full Q blocks against
# that of the ragged last block of the same trace (only the stored rows differ), over the
# stored bytes' difference; mean of the two traces that have both (d 128: 0.0529, d 64:
# 0.0572). The gap's fixed part (the row statistics' shuffles, exps, division: ~800 cycles
# at d 128 against the schedule's ~390 of ALU work) is not in this figure.
FWD_STORE_ISSUE_CYCLES_PER_BYTE = 0.0550

# Latency the throughput model of a step does not see (Barrier.cycles, fa1_fwd.cu; 2 warps per
# SM sub-partition, one 16-row tile per warp: little to hide a dependent chain under). Measured
# from the committed H200 traces (tests/data/traces/fa1_fwd_*.json, clock64 stamps less one
# 171-cycle trace write per record) against exact mode's op times for the same lone CTA with
# these figures at 0 (scripts/fa1_latency_from_traces.py, tests/test_fa1_latency.py):
# - per chunk on the busiest warp (fwd_chunk_rounds): the m-load -> P̃V gap (the step's wait,
#   barrier, then S, softmax, P̃V of every chunk) less the schedule's S, mask, softmax, exp,
#   chunk-stats, rescale and P̃V cycles, over the rounds: 173 (d 64, 64 x 448, WN 2, 4 rounds of
#   64-column chunks), 215 and 270 (d 128, 128 x 224, WN 1, 7 rounds of 32 columns); median
#   215: the chunk's serial chain (the running max's fmax chain and two shuffles, the rescale
#   exp, S -> P̃ -> P̃V) and the step's last-copy wait, not op counts.
# - per step, the epilogue: the P̃V -> O-store gap of full Q blocks less the schedule's stats,
#   update-O (and merge) ALU cycles and the O store issue (FWD_STORE_ISSUE_CYCLES_PER_BYTE): 458
#   and 355 at WN 1 (mean 407); 1157 at WN 2, the one trace with a cross-warp merge: 750
#   more per extra column group (its shared-memory exchange, the barrier, the fold done by
#   the WM warps alone).
FWD_CHUNK_LATENCY_CYCLES = 215.0
FWD_EPILOGUE_LATENCY_CYCLES = 407.0
FWD_MERGE_LATENCY_CYCLES = 750.0


# ---- schedule -----------------------------------------------------------------------
def build(problem, gpu, fwd_overrides: dict, bwd_overrides: dict) -> Schedule:
    d, eb = problem.head_dim, problem.elem_bytes
    tilings, kernels, notes = {}, [], ()
    if problem.direction in ("fwd", "fwd+bwd"):
        t, note = choose(problem, gpu, "forward", fwd_smem_bytes, fwd_registers,
                         {"stages": 1, **{k: v for k, v in fwd_overrides.items() if v is not None}})
        tilings["fwd"], notes = t, notes + note
        kernels.append(head_kernel("fa1_fwd", problem, t, fwd_smem_bytes(t, d, eb),
                                   fwd_registers(t, d),
                                   lambda b, h: fwd_program(problem, t, b, h),
                                   Pipeline(stages=t.stages, mma_instruction="mma_sync",
                                            copy_issue_cycles_per_byte=FWD_COPY_ISSUE_CYCLES_PER_BYTE,
                                            store_issue_cycles_per_byte=FWD_STORE_ISSUE_CYCLES_PER_BYTE),
                                   static_smem=fwd_static_smem_bytes(t, d)))
    if problem.direction in ("bwd", "fwd+bwd"):
        t, note = choose(problem, gpu, "backward", bwd_smem_bytes, bwd_registers,
                         {"stages": 1, **{k: v for k, v in bwd_overrides.items() if v is not None}})
        tilings["bwd"], notes = t, notes + note
        small = Tiling(t.block_q, t.block_kv, 1, 4)
        kernels.append(head_kernel("fa1_bwd", problem, t, bwd_smem_bytes(t, d, eb),
                                   bwd_registers(t, d),
                                   lambda b, h: bwd_program(problem, t, b, h),
                                   Pipeline(stages=t.stages, mma_instruction="mma_sync")))
        kernels.append(q_block_kernel(
            "fa1_bwd_convert_dq", problem, small, 0, 32,
            lambda b, h, i: convert_dq_program(problem, small, b, h, i), Pipeline(stages=1)))
        if problem.group_size > 1:
            kernels.append(kv_block_kernel(
                "fa1_bwd_reduce_dkv", problem, small, problem.heads_kv, 0, 32,
                lambda b, hk, j: reduce_dkv_program(problem, small, b, hk, j), Pipeline(stages=1)))
    return Schedule("fa1", problem, tilings, tuple(kernels), notes)
