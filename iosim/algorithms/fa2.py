"""FlashAttention-2: Q blocks in the outer loop, one CTA per (Q block, batch, head).

Forward: Q_i stays in shared memory/registers for the whole KV loop; K_j, V_j stream through
a `stages`-deep cp.async buffer; O_i accumulates in registers and is written once, with the
row log-sum-exp saved for the backward pass.

Backward: one CTA per (KV block, batch, head) keeps K_j, V_j and the dK_j, dV_j accumulators
on chip and streams Q_i, dO_i, LSE_i, D_i; dQ_i is accumulated in fp32 with atomics.
"""
from __future__ import annotations

from ..schedule import (Alu, Exp, Kernel, Launch, Load, Mma, Pipeline, Schedule, Store,
                        classes_along_x, loop)
from .common import (ACC_BYTES, STAT_BYTES, Tiling, ceil_div, check_fits, grid_index,
                     kv_segments, pick_tiling, q_segments, rows_in_block)

REG_OVERHEAD = 40  # addresses, loop state, softmax statistics: registers beyond the tiles

# Whose kernels a schedule describes, where their code differs in what the model charges:
# - "iosim": the project's kernels (iosim/kernels/cuda/fa2_fwd.cu, fa2_bwd.cu); the backward's
#   dQaccum atomicAdd issues the mma accumulator fragment (8 rows x 4 lanes x 2 floats per
#   warp instruction): Store.reduce_layout "fragment";
# - "flash-attn": Dao-AILab flash-attention 2 (torch's flash back end): its backward adds
#   dQaccum with 32 threads per row, a warp covering 128 contiguous bytes
#   (GmemTiledCopydQaccumAtomicAdd, csrc/flash_attn/src/kernel_traits.h; the atomicAdd loop of
#   compute_dq_dk_dv_1colblock, flash_bwd_kernel.h): reduce_layout "coalesced". Its loops run
#   downwards: the forward visits KV blocks from n_block_max − 1 to n_block_min, the blocks
#   that need the causal mask first (compute_attn_1rowblock, flash_fwd_kernel.h: `n_block =
#   n_block_max − 1`, `--n_block`), the backward Q blocks from m_block_max − 1 to m_block_min
#   (compute_dq_dk_dv_1colblock: `m_block = m_block_max − 1`, `--m_block`); Loop.step −1.
#   Its grids are the project's: (Q blocks, batch, heads) forward, (KV blocks, batch, heads)
#   backward, x fastest (flash_fwd_launch_template.h `dim3 grid(num_m_block, b, h)`,
#   flash_bwd_launch_template.h `grid_n(num_n_block, b, h)`; measured by Nsight Compute,
#   measurements/h200/torch_flash_launch_ncu.csv);
# - "torch-flash": torch's flash back end as scaled_dot_product_attention runs it: the
#   "flash-attn" kernels, and in the backward first two copies making the output O and its
#   gradient dO contiguous in the (batch, seq, heads, d) layout the kernels read
#   (`grad_out.contiguous()`, `out.contiguous()` in _flash_attention_backward,
#   aten/src/ATen/native/transformers/cuda/attention_backward.cu; Nsight Compute lists both
#   at::direct_copy_kernel_cuda launches before flash_bwd_dot_do_o_kernel in every torch
#   flash backward row, iosim/data/validation/measured_h200*_kernels.csv).
# - the output tiles: the project's kernels store O (forward) and dK/dV (backward) straight
#   from the mma accumulator fragments (fa2_fwd.cu, fa2_bwd.cu: a 4-byte st.global per lane,
#   8 rows x 16 bytes per warp instruction): Store.layout "fragment"; flash-attention stages
#   them through shared memory and copies them out in 16-byte vectors (flash_fwd_kernel.h:
#   sO then gmem_tiled_copy_O; flash_bwd_kernel.h: sdK/sdV): "coalesced".
KERNELS = ("iosim", "flash-attn", "torch-flash")
# kernels whose loops run downwards (flash-attention's)
DOWNWARD_KERNELS = ("flash-attn", "torch-flash")
# kernels whose forward holds one K and one V tile in shared memory, not `stages` buffers of
# both: flash-attention's (kernel_traits.h: kSmemSize = kSmemQSize + kSmemKVSize, the KV part
# one kBlockN x d tile each of K and V; flash_fwd_kernel.h overlaps V_j's copy with S_j and
# K_{j+1}'s with the softmax and P V_j instead). Its launch rules count on it:
# run_mha_fwd_hdim256 takes 64 x 64 on the H100 "(96KB smem) since then we can get 2 CTAs
# per SM" (flash_fwd_launch_template.h).
SINGLE_KV_BUFFER_KERNELS = ("flash-attn", "torch-flash")
# what torch's flash backward copies before flash-attention's kernels run ("torch-flash")
TORCH_COPIES = ("O", "dO")
COPY_ELEMENTS_PER_CTA = 128 * 4   # at::elementwise_kernel<128, 4>: threads x elements each


def output_layout(kernel: str) -> str:
    """Store.layout of a kernel's output tiles (O; dK, dV): "fragment" for the project's
    kernels, "coalesced" for kernels that stage them through shared memory."""
    return "fragment" if kernel == "iosim" else "coalesced"


# the backward's warp grids give every warp at least 32 rows of each product (Mma.warp_rows)
BWD_WARP_ROWS = 32
# Cycles the CTA's threads spend issuing one byte of their own cp.async copies, in series with
# their compute (Pipeline.copy_issue_cycles_per_byte). Forward: measured directly on the H200
# (iosim.measure.step_cycles, measurements/h200/step_cycles_h200.json and _run2.json): fa2_fwd.cu
# as committed against the same kernel without the step's K/V copies, one CTA per SM, clock64
# cycles per KV step over 128 (d 128) / 64 (d 64) steps: +907 / +921 (first run), +796 / +867
# (second) cycles per step for the step's 32 KB (K and V tiles, 16 copies of 16 B per thread at
# both tilings), mean 873 = 0.0266 cycles per byte. The step's cp.async.wait_group costs nothing
# measurable (without it: -11 / -5 cycles per step), so the copies' cost is their issue. The
# traces' gap method (a load's record to the next, less one trace write; the
# method, iosim.kernels.copy_issue, tests/test_copy_issue_traces.py) gives 0.0233, kept as a
# cross-check (FWD_COPY_ISSUE_TRACE_CYCLES_PER_BYTE). Backward main kernel: the traces' method,
# a Q-block iteration's Q, dO, LSE, D (the two 4-byte row-statistic loads take ~180 cycles
# each), 1045 cycles per 33 KB at d 128. flash-attention's kernels (torch flash) also issue
# their cp.async copies from the computing warps (flash_fwd_kernel.h / flash_bwd_kernel.h:
# flash::copy of the next K/V or Q/dO tile before the step's GEMMs); their copy loop is not
# measured: assumed to cost what the project's kernel's costs per byte.
FWD_COPY_ISSUE_CYCLES_PER_BYTE = 0.0266
FWD_COPY_ISSUE_TRACE_CYCLES_PER_BYTE = 0.0233
BWD_COPY_ISSUE_CYCLES_PER_BYTE = 0.0314
# Cycles the project's backward kernel's threads spend per byte of the dK_j, dV_j they write at
# the end (Pipeline.store_issue_cycles_per_byte, Store.thread_issued): fa2_bwd.cu stores them
# straight from the mma accumulator fragments, one 4-byte st.global of two halves per lane, so
# a warp instruction writes 8 rows x 16 bytes (8 sectors), the fragment layout whose rate the
# dQaccum atomics also have (plain st.f32 of that layout runs at the red.f32 rate:
# measurements/h200/atomics_h200.json, and 0.90-0.94 of its per-SM cost in the kernel itself:
# fa2_bwd_atomics_h200.json, IOSIM_DQ_MODE 2). Measured from the committed H200 traces
# (tests/data/traces/fa2_bwd_*.json, iosim.kernels.copy_issue.store_issue_slope, as FA-1's
# FWD_STORE_ISSUE_CYCLES_PER_BYTE): the dQaccum -> dK stamp gap of full KV blocks against the
# ragged last one (only the stored rows differ; the loop writes dK and dV, so per stored byte
# half the slope per dK byte), mean of the two traces that have both: d 64 0.0685, d 128 0.1284
# (tests/test_copy_issue_traces.py). ~6,450 cycles for a 128 x 128 block's dK and dV at d 128;
# the trace's whole gap is ~6,700-7,100. flash-attention's backward (torch flash) stages dK, dV
# through shared memory and copies them out coalesced (gmem_tiled_copy_dKV): not charged.
BWD_STORE_ISSUE_CYCLES_PER_BYTE = 0.0985
# Cycles per counted op (2 per S element) of the project's backward kernel's dS phase
# (Alu.phase_cycles_per_op): fa2_bwd.cu reads P back from shared memory (lds32 per element
# pair), forms dS = P (dP - D) in registers, writes dS to shared memory (sts32) and meets a
# barrier before dK += dSᵀQ; the ALU unit time of its 2 ops per element (128 lanes per clock)
# is ~0.016 cycles per element, the phase ~0.09: shared-memory round trips and the barrier,
# not arithmetic. Measured from the committed H200 traces (tests/data/traces/fa2_bwd_*.json,
# iosim.kernels.copy_issue.phase_gap_difference): the stamp gap before dK += dSᵀQ less the
# gap before dV += PᵀdO (each: one barrier, the same 128 x d x Br GEMM, one trace write; the
# first also the dS phase), per S element, median of the three traces (d 64 0.0948, d 128
# 0.0897 and 0.0911), halved (tests/test_fa2_bwd_atomics.py). flash-attention's backward
# forms dS in registers from its own P fragments: not charged. The barrier's own wait cancels
# in that gap difference (both gaps have one): it is BWD_DS_BARRIER_CYCLES below.
BWD_DS_PHASE_CYCLES_PER_OP = 0.0456
# A trace record inside the backward's Q loop (thread 0's clock64 read and 16-byte store,
# iosim_common.cuh TraceRec) costs ~48 cycles, not the 171 the back-to-back store records at a
# CTA's end take (iosim.kernels.trace.record_overhead_cycles): fa2_bwd at d 128, N 4096, built
# with and without IOSIM_TRACE, CUDA events, 11 records a Q-block step: 453.5 vs 434.5 us with
# 32 CTAs, 7096 vs 6802 us with 2048, 48.3 and 48.2 cycles a record at the counted 1.79 GHz
# (measurements/h200/fa2_bwd_barriers_h200.json, scripts/fa2_bwd_barriers_h200.py;
# tests/test_fa2_bwd_phases.py). With it the kernel's step reads ~11,900 cycles untraced
# against the model's ~10,760 (not the 1.01-1.09 lone-CTA ratio the 171-cycle subtraction
# gave): the phase and the barriers below are what the step lacked.
BWD_TRACE_RECORD_CYCLES = 48.2
# Cycles per S element (Alu.phase_cycles_per_op of the "P" op) of the backward's P phase after
# S = QKᵀ, beyond its exp2 on the special-function units (16 per clock per SM, CUDA C++
# Programming Guide): the FFMA of scale and LSE, the fp16 pack and the 4-byte st.shared of P
# for the dV GEMM's transposed read (fa2_bwd.cu). The trace's gap from the S GEMM's stamp to
# the P stamp (recorded before the barrier) less one record, less the exp unit time, per
# element, in the 32-CTA N 4096 d 128 trace (fa2_bwd_atomics_h200.json, 2048 steps: 790
# cycles, 0.0281; the 128-CTA run 0.0278; the committed unmasked d 128 trace
# tests/data/traces/fa2_bwd_n256_d128.json 0.0301). It replaces the op's ALU unit time
# (0.0078 an element). flash-attention's backward runs the same instructions
# (scale_apply_exp2, convert_type, the copy of P to sP, flash_bwd_kernel.h): both kernels.
BWD_P_PHASE_CYCLES_PER_OP = 0.0281
# Cycles a Q-block step waits at the __syncthreads that ends an elementwise phase before a
# GEMM (Alu.barrier_cycles): the warps' skew in the phase and the GEMM's restart behind it.
# Measured on the H200 (fa2_bwd_barriers_h200.json): fa2_bwd.cu at d 128, N 4096 without
# the barrier after its P phase (IOSIM_PHASE_BARRIERS_OFF 1; results wrong, time right) runs
# 293 (32 CTAs) / 285 (2048 CTAs) cycles a step faster; without the one after its dS phase
# (2) 132 / 145; without both (3) 732 / 743: the barrier left takes up much of the skew the
# one removed had, so each is charged what its own removal saves (428 a step together, not
# 737; the interaction is not modelled). Cross-check from the traces alone: the gap before
# dV (after the P barrier) less the gap before dP = dO Vᵀ (same FLOPs, no barrier) less the
# model's difference of the two GEMMs (768 - 1024 cycles, their ldmatrix operand bytes):
# 231 (32 and 128 CTAs), 306 and 306 (committed d 128 traces). flash-attention's backward has
# one such barrier, after writing P and dS, before dV (flash_bwd_kernel.h; its P phase runs
# into the dP GEMM without one): charged the dS barrier's figure.
BWD_P_BARRIER_CYCLES = 289.0
BWD_DS_BARRIER_CYCLES = 139.0


# ---- resources ------------------------------------------------------------------------
def fwd_smem_bytes(t: Tiling, d: int, eb: int, kernel: str = "iosim") -> int:
    """Q tile + `stages` buffers of (K tile + V tile); one of each for the kernels in
    SINGLE_KV_BUFFER_KERNELS."""
    kv_buffers = 1 if kernel in SINGLE_KV_BUFFER_KERNELS else t.stages
    return (t.block_q * d + kv_buffers * 2 * t.block_kv * d) * eb


def fwd_registers(t: Tiling, d: int) -> int:
    """fp32 O accumulator and S tile spread over the CTA's threads, plus overhead."""
    return ceil_div(t.block_q * d + t.block_q * t.block_kv, t.threads) + REG_OVERHEAD


def bwd_smem_bytes(t: Tiling, d: int, eb: int) -> int:
    """K_j, V_j resident; `stages` buffers of (Q_i, dO_i); P and dS tiles."""
    return (2 * t.block_kv * d + t.stages * 2 * t.block_q * d + 2 * t.block_q * t.block_kv) * eb


def bwd_registers(t: Tiling, d: int) -> int:
    """fp32 dK, dV accumulators and S, dP tiles spread over the threads, plus overhead."""
    return ceil_div(2 * t.block_kv * d + 2 * t.block_q * t.block_kv, t.threads) + REG_OVERHEAD


FWD_CANDIDATES = (Tiling(128, 128, 2, 4), Tiling(128, 64, 2, 4), Tiling(128, 64, 2, 8),
                  Tiling(64, 64, 2, 4), Tiling(128, 32, 2, 4), Tiling(64, 32, 1, 4))
BWD_CANDIDATES = (Tiling(128, 128, 2, 8), Tiling(64, 128, 2, 8), Tiling(64, 64, 2, 8),
                  Tiling(64, 64, 1, 8), Tiling(32, 64, 1, 4))


def fwd_tiling(problem, gpu, **overrides) -> Tiling:
    d, eb = problem.head_dim, problem.elem_bytes

    def fits(t: Tiling):
        check_fits(gpu, f"fa2 forward tiling {t.describe()} at d={d}",
                   fwd_smem_bytes(t, d, eb), fwd_registers(t, d), t.threads)
    return pick_tiling(FWD_CANDIDATES, fits, overrides)


def bwd_tiling(problem, gpu, **overrides) -> Tiling:
    d, eb = problem.head_dim, problem.elem_bytes

    def fits(t: Tiling):
        check_fits(gpu, f"fa2 backward tiling {t.describe()} at d={d}",
                   bwd_smem_bytes(t, d, eb), bwd_registers(t, d), t.threads)
    return pick_tiling(BWD_CANDIDATES, fits, overrides)


# ---- forward ------------------------------------------------------------------------
def kv_iteration(problem, t: Tiling, hk_coord, b, rows_kv: int, masked: bool, ragged: bool,
                 var: str = "j", pack_p_per_element: float = 0.0,
                 mask_cycles_per_element: float = 0.0, tma_box: bool = False) -> tuple:
    """One KV step of the online softmax for a Br-row Q block (FA-2 and FA-3 share it).
    `pack_p_per_element`: instructions per score element that convert P to 16 bits for the
    P·V GEMM (an Alu "pack P" op when > 0; fa3.PACK_P_INSTRUCTIONS_PER_ELEMENT);
    `mask_cycles_per_element`: the measured phase of a masked step's mask (mask_phase_cycles),
    0: one ALU op per element; `tma_box`: K and V are TMA copies of a Bc-row box (a ragged
    tile's missing rows are Load.oob_bytes)."""
    d, eb = problem.head_dim, problem.elem_bytes
    br, bc = t.block_q, t.block_kv
    oob = (bc - rows_kv) * d * eb if tma_box else 0
    body = [Load("K", (b, hk_coord, var), rows_kv, d, rows_kv * d * eb, oob_bytes=oob),
            Load("V", (b, hk_coord, var), rows_kv, d, rows_kv * d * eb, oob_bytes=oob),
            Mma("S=QK^T", br, bc, d)]
    if masked or ragged:
        body.append(Alu("mask", br * bc, phase_cycles_per_op=mask_cycles_per_element))
    body += [Alu("softmax", 3 * br * bc),      # scale-and-max, subtract, row sum
             Exp("exp", br * bc + br)]         # P = exp(S − m), and α = exp(m_old − m_new)
    if pack_p_per_element:
        body.append(Alu("pack P", round(pack_p_per_element * br * bc)))
    body += [Alu("rescale", br * d),           # O ← α·O
             Mma("O+=PV", br, d, bc)]
    return tuple(body)


def fwd_program(problem, t: Tiling, b: int, h: int, i: int, o_layout: str = "fragment",
                downward: bool = False, pack_p_per_element: float = 0.0,
                mask_cycles_per_element: float = 0.0, o_thread_issued: bool = False,
                tma_box: bool = False) -> tuple:
    """Q block i's program; `o_layout`: Store.layout of O; `downward`: its KV loop runs from
    the last block to the first (flash-attention's, DOWNWARD_KERNELS), else from the first
    to the last; `pack_p_per_element`, `mask_cycles_per_element`: kv_iteration's;
    `o_thread_issued`: O's Store.thread_issued (charged by the kernel's own figure);
    `tma_box`: Q, K and V are TMA copies of whole Br- / Bc-row boxes (FA-3)."""
    d, eb = problem.head_dim, problem.elem_bytes
    hk = h // problem.group_size
    rows_q = rows_in_block(i, t.block_q, problem.seq_q)
    tail = problem.seq_kv - (ceil_div(problem.seq_kv, t.block_kv) - 1) * t.block_kv
    q_oob = (t.block_q - rows_q) * d * eb if tma_box else 0
    prog = [Load("Q", (b, h, i), rows_q, d, rows_q * d * eb, oob_bytes=q_oob)]   # Q_i stays on chip
    segments = kv_segments(problem, i, t.block_q, t.block_kv)
    for seg in (reversed(segments) if downward else segments):
        rows_kv = tail if seg.ragged else t.block_kv
        prog += loop("j", seg.start, seg.stop,
                     kv_iteration(problem, t, hk, b, rows_kv, seg.masked, seg.ragged,
                                  pack_p_per_element=pack_p_per_element,
                                  mask_cycles_per_element=mask_cycles_per_element,
                                  tma_box=tma_box),
                     reverse=downward)
    prog += [Alu("normalize", t.block_q * d),
             Store("O", (b, h, i), rows_q, d, rows_q * d * eb, layout=o_layout,  # O_i written once
                   thread_issued=o_thread_issued),
             Store("LSE", (b, h, i), rows_q, 1, rows_q * STAT_BYTES)]
    return tuple(prog)


def q_block_kernel(name, problem, t: Tiling, smem: int, regs: int, program_of, pipeline,
                   shape_of_block=None):
    """A kernel with grid (Q blocks, batch, heads): the FA-2 forward launch shape.
    shape_of_block(i): what decides the shape of Q block i's program (default: its rows, for
    programs that differ only in the ragged last block)."""
    n_q = ceil_div(problem.seq_q, t.block_q)
    grid = (n_q, problem.batch, problem.heads_q)

    def program(cta: int) -> tuple:
        i, b, h = grid_index(cta, grid)
        return program_of(b, h, i)

    classes, class_of, period = classes_along_x(
        grid, shape_of_block or (lambda i: rows_in_block(i, t.block_q, problem.seq_q)))
    return Kernel(name=name, launch=Launch(grid, t.threads, smem, regs), program=program,
                  classes=classes, class_of=class_of, class_period=period,
                  cta_coord=lambda cta: grid_index(cta, grid), pipeline=pipeline,
                  coord_names=("q_block", "batch", "head"))


# A masked KV step's mask (the compares and selects of a causal or ragged step) in the project's
# FA-2 forward kernel: cycles per score element its threads spend in it (Alu "mask"
# phase_cycles_per_op, replacing the op's ALU unit time), by (kernel source, block_q, block_kv,
# d). From the committed lone-CTA traces (scripts/mask_phase_from_traces.py, tests/
# test_mask_phase.py recomputes them): a masked step's S -> exp gap less the same CTA's unmasked
# steps' (both carry the same records), over the step's score elements: fa2_fwd_n200_d64_causal
# (128x128, d 64) 631 and 815 cycles, 0.0441 per element; fa2_fwd_q130_kv300_gqa_d128_causal
# (128x64, d 128) ~410 cycles, 0.0497. Other tilings and kernels (FA-3, flash-attention, cuDNN):
# not measured, one ALU op per element. With every SM busy the mask costs more: the kernel
# built to mask every step (IOSIM_FORCE_MASK=1, measurements/h200/mask/) adds 264 / 202 us at
# N 4096, the model with these figures 158 / 178 (tests/test_mask_phase.py).
MASK_PHASE_CYCLES_PER_ELEMENT = {("fa2_fwd", 128, 128, 64): 0.0441, ("fa2_fwd", 128, 64, 128): 0.0497}


def mask_phase_cycles(source: str, t: Tiling, d: int) -> float:
    """MASK_PHASE_CYCLES_PER_ELEMENT of the project's kernel `source` at tiling t; 0 if not measured."""
    return MASK_PHASE_CYCLES_PER_ELEMENT.get((source, t.block_q, t.block_kv, d), 0.0)


def fwd_block_shape(problem, t: Tiling, i: int) -> tuple:
    """What decides the shape of Q block i's forward program: its rows and KV segments."""
    return (rows_in_block(i, t.block_q, problem.seq_q),
            tuple(kv_segments(problem, i, t.block_q, t.block_kv)))


def forward_kernels(problem, t: Tiling, kernel: str = "iosim") -> tuple:
    d, eb = problem.head_dim, problem.elem_bytes
    o_layout = output_layout(kernel)
    downward = kernel in DOWNWARD_KERNELS
    mask = mask_phase_cycles("fa2_fwd", t, d) if kernel == "iosim" else 0.0
    return (q_block_kernel(
        "fa2_fwd", problem, t, fwd_smem_bytes(t, d, eb, kernel), fwd_registers(t, d),
        lambda b, h, i: fwd_program(problem, t, b, h, i, o_layout, downward,
                                    mask_cycles_per_element=mask),
        Pipeline(stages=t.stages, mma_instruction="mma_sync",
                 copy_issue_cycles_per_byte=FWD_COPY_ISSUE_CYCLES_PER_BYTE),
        lambda i: fwd_block_shape(problem, t, i)),)


# ---- backward -----------------------------------------------------------------------
def preprocess_program(problem, t: Tiling, b, h, i) -> tuple:
    d, eb = problem.head_dim, problem.elem_bytes
    rows = rows_in_block(i, t.block_q, problem.seq_q)
    return (Load("O", (b, h, i), rows, d, rows * d * eb),
            Load("dO", (b, h, i), rows, d, rows * d * eb),
            Alu("D=rowsum(dO*O)", 2 * t.block_q * d),
            Store("D", (b, h, i), rows, 1, rows * STAT_BYTES),
            Store("dQaccum", (b, h, i), rows, d, rows * d * ACC_BYTES))   # zero-fill


def bwd_program(problem, t: Tiling, b: int, h: int, j: int, kernel: str = "iosim") -> tuple:
    d, eb = problem.head_dim, problem.elem_bytes
    br, bc = t.block_q, t.block_kv
    hk = h // problem.group_size
    rows_kv = rows_in_block(j, bc, problem.seq_kv)
    ragged_kv = rows_kv < bc
    tail_q = problem.seq_q - (ceil_div(problem.seq_q, br) - 1) * br
    prog = [Load("K", (b, hk, j), rows_kv, d, rows_kv * d * eb),   # K_j, V_j stay on chip
            Load("V", (b, hk, j), rows_kv, d, rows_kv * d * eb)]
    downward = kernel in DOWNWARD_KERNELS      # Q blocks from the last to the first
    segments = q_segments(problem, j, br, bc)
    for seg in (reversed(segments) if downward else segments):
        rq = tail_q if seg.ragged else br
        body = [Load("Q", (b, h, "i"), rq, d, rq * d * eb),
                Load("dO", (b, h, "i"), rq, d, rq * d * eb),
                Load("LSE", (b, h, "i"), rq, 1, rq * STAT_BYTES),
                Load("D", (b, h, "i"), rq, 1, rq * STAT_BYTES),
                Mma("S=QK^T", br, bc, d, BWD_WARP_ROWS)]
        if seg.masked or ragged_kv or seg.ragged:
            body.append(Alu("mask", br * bc))
        own = kernel == "iosim"
        body += [Exp("P=exp(S-LSE)", br * bc),
                 # the P phase; fa2_bwd.cu's ends at a barrier before dV (BWD_P_BARRIER)
                 Alu("P", br * bc, BWD_P_PHASE_CYCLES_PER_OP,
                     BWD_P_BARRIER_CYCLES if own else 0.0),
                 Mma("dV+=P^T dO", bc, d, br, BWD_WARP_ROWS),
                 Mma("dP=dO V^T", br, bc, d, BWD_WARP_ROWS),
                 # both kernels' dS phase ends at a barrier before the dK/dV GEMMs
                 Alu("dS=P*(dP-D)", 2 * br * bc, BWD_DS_PHASE_CYCLES_PER_OP if own else 0.0,
                     BWD_DS_BARRIER_CYCLES),
                 Mma("dK+=dS^T Q", bc, d, br, BWD_WARP_ROWS),
                 Mma("dQ=dS K", br, d, bc, BWD_WARP_ROWS),
                 Store("dQaccum", (b, h, "i"), rq, d, rq * d * ACC_BYTES, reduce=True,
                       reduce_layout="coalesced" if kernel in DOWNWARD_KERNELS else "fragment")]
        prog += loop("i", seg.start, seg.stop, body, reverse=downward)
    dk = "dK" if problem.group_size == 1 else "dK_expanded"
    dv = "dV" if problem.group_size == 1 else "dV_expanded"
    lay = output_layout(kernel)
    own = kernel == "iosim"     # fa2_bwd.cu writes dK, dV from its fragments (thread-issued)
    prog += [Alu("scale dK", bc * d),
             Store(dk, (b, h, j), rows_kv, d, rows_kv * d * eb, layout=lay, thread_issued=own),
             Store(dv, (b, h, j), rows_kv, d, rows_kv * d * eb, layout=lay, thread_issued=own)]
    return tuple(prog)


def contiguous_copy_kernel(problem, tensor: str) -> Kernel:
    """torch's `.contiguous()` of O or dO (TORCH_COPIES) as it launches: at::elementwise_kernel
    <128, 4> (aten/src/ATen/native/cuda/CUDALoops.cuh: 128 threads, 4 elements each, so
    COPY_ELEMENTS_PER_CTA per CTA and ceil(numel / 512) CTAs; Nsight Compute: grid 65536 x 128
    threads at B 4 H 16 N 4096 d 128, measured_h200_kernels.csv). Each CTA reads its chunk of
    the strided tensor and writes it contiguous; the tiles are the chunks (1 KB in fp16)."""
    eb = problem.elem_bytes
    numel = problem.batch * problem.heads_q * problem.seq_q * problem.head_dim
    n = ceil_div(numel, COPY_ELEMENTS_PER_CTA)
    grid = (n, 1, 1)

    def elements(c: int) -> int:
        return min(COPY_ELEMENTS_PER_CTA, numel - c * COPY_ELEMENTS_PER_CTA)

    def program(cta: int) -> tuple:
        e = elements(cta)
        return (Load(tensor + "_strided", (cta,), 1, e, e * eb),
                Store(tensor + "_contiguous", (cta,), 1, e, e * eb))

    classes, class_of, period = classes_along_x(grid, elements)
    return Kernel(name=f"torch_contiguous_{tensor}", launch=Launch(grid, 128, 0, 32),
                  program=program, classes=classes, class_of=class_of, class_period=period,
                  cta_coord=lambda cta: (cta, 0, 0), pipeline=Pipeline(stages=1),
                  coord_names=("chunk", "y", "z"))


def convert_dq_program(problem, t: Tiling, b, h, i) -> tuple:
    d, eb = problem.head_dim, problem.elem_bytes
    rows = rows_in_block(i, t.block_q, problem.seq_q)
    return (Load("dQaccum", (b, h, i), rows, d, rows * d * ACC_BYTES),
            Alu("scale dQ", t.block_q * d),
            Store("dQ", (b, h, i), rows, d, rows * d * eb))


def reduce_dkv_program(problem, t: Tiling, b, hk, j) -> tuple:
    """GQA: sum the per-query-head dK, dV of one KV head's group."""
    d, eb = problem.head_dim, problem.elem_bytes
    rows = rows_in_block(j, t.block_kv, problem.seq_kv)
    g = problem.group_size
    body = (Load("dK_expanded", (b, "g", j), rows, d, rows * d * eb),
            Load("dV_expanded", (b, "g", j), rows, d, rows * d * eb),
            Alu("sum", 2 * t.block_kv * d))
    return (*loop("g", hk * g, hk * g + g, body),
            Store("dK", (b, hk, j), rows, d, rows * d * eb),
            Store("dV", (b, hk, j), rows, d, rows * d * eb))


def kv_block_kernel(name, problem, t: Tiling, heads: int, smem: int, regs: int, program_of,
                    pipeline, shape_of_block=None):
    """A kernel with grid (KV blocks, batch, heads). shape_of_block(j): what decides the shape
    of KV block j's program (default: its rows)."""
    n_kv = ceil_div(problem.seq_kv, t.block_kv)
    grid = (n_kv, problem.batch, heads)

    def program(cta: int) -> tuple:
        j, b, h = grid_index(cta, grid)
        return program_of(b, h, j)

    classes, class_of, period = classes_along_x(
        grid, shape_of_block or (lambda j: rows_in_block(j, t.block_kv, problem.seq_kv)))
    return Kernel(name=name, launch=Launch(grid, t.threads, smem, regs), program=program,
                  classes=classes, class_of=class_of, class_period=period,
                  cta_coord=lambda cta: grid_index(cta, grid), pipeline=pipeline,
                  coord_names=("kv_block", "batch", "head"))


def bwd_block_shape(problem, t: Tiling, j: int) -> tuple:
    """What decides the shape of KV block j's backward program: its rows and Q segments."""
    return (rows_in_block(j, t.block_kv, problem.seq_kv),
            tuple(q_segments(problem, j, t.block_q, t.block_kv)))


def backward_kernels(problem, t: Tiling, kernel: str = "iosim") -> tuple:
    d, eb = problem.head_dim, problem.elem_bytes
    elementwise = Pipeline(stages=1)
    small = Tiling(t.block_q, t.block_kv, 1, 4)
    kernels = [] if kernel != "torch-flash" else [
        contiguous_copy_kernel(problem, name) for name in TORCH_COPIES]
    kernels += [
        q_block_kernel("fa2_bwd_preprocess", problem, small, 0, 32,
                       lambda b, h, i: preprocess_program(problem, small, b, h, i), elementwise),
        kv_block_kernel("fa2_bwd", problem, t, problem.heads_q, bwd_smem_bytes(t, d, eb),
                        bwd_registers(t, d), lambda b, h, j: bwd_program(problem, t, b, h, j, kernel),
                        Pipeline(stages=t.stages, mma_instruction="mma_sync",
                                 copy_issue_cycles_per_byte=BWD_COPY_ISSUE_CYCLES_PER_BYTE,
                                 store_issue_cycles_per_byte=(BWD_STORE_ISSUE_CYCLES_PER_BYTE
                                                              if kernel == "iosim" else 0.0)),
                        lambda j: bwd_block_shape(problem, t, j)),
        q_block_kernel("fa2_bwd_convert_dq", problem, small, 0, 32,
                       lambda b, h, i: convert_dq_program(problem, small, b, h, i), elementwise),
    ]
    if problem.group_size > 1:
        kernels.append(kv_block_kernel(
            "fa2_bwd_reduce_dkv", problem, small, problem.heads_kv, 0, 32,
            lambda b, hk, j: reduce_dkv_program(problem, small, b, hk, j), elementwise))
    return tuple(kernels)


def build(problem, gpu, fwd_overrides: dict, bwd_overrides: dict,
          kernel: str = "iosim") -> Schedule:
    if kernel not in KERNELS:
        from ..errors import IosimError
        raise IosimError(f"unknown FA-2 kernel {kernel!r}; choose from: {', '.join(KERNELS)}")
    tilings, kernels = {}, []
    if problem.direction in ("fwd", "fwd+bwd"):
        tilings["fwd"] = fwd_tiling(problem, gpu, **fwd_overrides)
        kernels += forward_kernels(problem, tilings["fwd"], kernel)
    if problem.direction in ("bwd", "fwd+bwd"):
        tilings["bwd"] = bwd_tiling(problem, gpu, **bwd_overrides)
        kernels += backward_kernels(problem, tilings["bwd"], kernel)
    return Schedule("fa2", problem, tilings, tuple(kernels))
