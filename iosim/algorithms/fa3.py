"""FlashAttention-3 forward (Shah et al. 2024): the Hopper schedule.

Per CTA the bytes are FA-2's: Q_i is loaded once (TMA) and stays in shared memory, K_j and
V_j stream through a `stages`-deep shared-memory ring filled by TMA, O_i accumulates in the
consumers' registers and is written once with the row log-sum-exp (the program is
`fa2.fwd_program`, built on `fa2.kv_iteration`). What differs is how the CTA runs:

  - 1 producer warpgroup issues the TMA copies; `block_q / 64` consumer warpgroups (one
    wgmma M=64 row slab each: 2 at 128 rows, 3 at 192) run the GEMMs and softmax, ping-ponging
    so one's softmax hides under the other's GEMMs, and each overlaps its own softmax with its
    next QKᵀ GEMM (Pipeline(warp_specialized, consumer_warpgroups, intra_overlap)).
  - Registers are redistributed with setmaxnreg: the producer drops to 24 (32 with three
    consumers) and the consumers take the rest of the register file, rounded down to 8 and at
    most the per-thread limit (240 with two consumers, 160 with three, FA-3's values). The fit
    check is per consumer thread: its 64-row slab of the fp32 O accumulator (d/2), of the fp32
    S tile (Bc/2) and of the fp16 P tile (Bc/4), plus FA3_REG_OVERHEAD.
  - Shared memory: Q tile + `stages` × (K tile + V tile); P stays in registers (RS wgmma).

Tiles (fp16/bf16, after FA-3's tile_size_fwd_sm90 where it fits this register model): d ≤ 64:
192×128 (three consumers); d = 96, 128: 128×128 (FA-3 uses 192×144 at d = 96, which needs
more than three consumers' 160 registers here, and 128×176 at d = 128 non-causal; 128 keeps one
shape for causal and non-causal); d = 192: 128×112; d = 256: 128×80. Two stages, except
d = 97..128: three (224 KiB of shared memory). K and V have rings of their own
(Pipeline.separate_kv_release): a K slot goes back to the producer after Q Kᵀ, a V slot after
P V, as FA-3's pipeline_k / pipeline_v and the project's kernel (iosim/kernels/cuda/fa3_fwd.cu)
since issue 12. Before, the kernel released a stage's K and V together after O += P V; with two
stages its producer then waited on the consumers (H200: +31% at d = 128, +36..+46% at d = 64,
benchmarks/results/fa3_kv_release/; none with three stages). The same tiles are used for fp8
(FA-3's fp8 tiles differ; not modelled).

Launch order: grid (Q blocks, heads, batch), x fastest, so one head's Q blocks launch together
(heads-major). With causal masking the Q blocks are reversed: CTA x computes Q block
n_q − 1 − x, the longest rows first, as FA-3's scheduler does for load balance.

Only the forward pass is modelled; FA-3 needs TMA and wgmma (Hopper).

Whose kernel (`kernel`, as fa2's): "iosim", the project's fa3_fwd.cu (default), stores O from
the consumers' accumulator fragments, a 4-byte st.global per lane, 8 rows x 16 bytes per warp
instruction (Store.layout "fragment"); "flash-attn" (Dao-AILab FA-3: the epilogue writes O to
shared memory and copies it out with TMA, hopper/epilogue_fwd.hpp) and "cudnn" (torch's cuDNN
back end; staged likewise) store it coalesced.
"""
from __future__ import annotations

from ..errors import IosimError
from ..schedule import Barrier, Kernel, Launch, Pipeline, Schedule, classes_along_x
from .common import Tiling, ceil_div, check_fits, grid_index, pick_tiling
from .fa2 import fwd_block_shape, fwd_program, output_layout

KERNELS = ("iosim", "flash-attn", "cudnn")

FA3_REG_OVERHEAD = 24   # wgmma needs few address registers; producer/consumer barriers
WGMMA_M = 64            # rows per consumer warpgroup
# P converted to fp16/bf16 for the register-sourced P·V wgmma: F2FP.F16.F32.PACK_AB packs two
# fp32 scores per instruction, 0.5 per score element. SASS of the project's fa3_fwd.cu
# (benchmarks/results/fa3_h200_run5/fa3_sass.txt, static counts, 2 copies of the loop body):
# d 64 80 F2FP = 2 x 32 for P (64 scores per consumer thread and step) + 16 for O's epilogue
# (32 elements); d 128 96 = 2 x 32 + 32. The schedule's softmax ops (3 Alu + 1 Exp + the
# rescale per element, which match the SASS's FFMA/FADD/FMNMX, MUFU and FMUL counts) lack it.
# FA-2's mma.sync loop converts P too, but its softmax cost is the measured exposed fraction of
# the whole softmax (machine.MmaCost), so the op is added for the wgmma kernels only.
PACK_P_INSTRUCTIONS_PER_ELEMENT = 0.5
# The CTA's setup before the producer issues its first copy, by kernel: fa3_fwd.cu's thread 0
# initialises 1 + 4·stages mbarriers and fences them, then __syncthreads and the producer's
# setmaxnreg.dec. H200, %globaltimer stamps in the untraced kernel (-DIOSIM_STAMPS,
# scripts/experiments/cta_phases_h200.py, measurements/h200/o_store/cta_phases_h200.json): CTA
# entry → the producer's first copy 224-256 ns in all six shapes (d 64/128, N_kv 128/512, one
# head alone or all SMs busy), median 248 ns; at the counted clock (1.79 GHz) 444 cycles. A
# measured wait (Barrier.cycles) at the head of each CTA program; the lone-CTA traces start
# after it (their first record is the Q copy). flash-attention's FA-3 and cuDNN: not measured.
CTA_SETUP_CYCLES = {"iosim": 444.0}
# The project's kernel's epilogue, by its own stamps: each consumer normalises its 64 rows and
# writes them from its accumulator fragments (4-byte stores, 8 rows x 16 B per warp
# instruction), after the ping-pong barrier. H200, untraced %globaltimer stamps
# (measurements/h200/o_store/cta_phases_h200_consumers.json): from the last consumer's loop end
# to its last store, d 128 1792 / 1680 ns (one head alone, N_kv 512 / 128), 1888 / 1632 (every
# SM busy), mean 1748; d 64 1248 / 1184, mean 1216. Less the normalise op's ALU unit time
# (71.5 / 53.6 ns), over the CTA's O bytes (32 / 24 KB) at the counted clock 1.79 GHz: 0.0916 /
# 0.0847 cycles per byte, mean 0.088 (scripts/fa3_o_store_from_stamps.py; tests/
# test_fa3_lone_cta.py recomputes it): the O store's issue cost for this kernel (Store.thread_issued,
# Pipeline.store_issue_cycles_per_byte), in place of the store microbenchmark's 0.0604
# (fragment_store_issue_cycles_per_byte, which a lone 128- or 256-thread store phase gives).
O_STORE_ISSUE_CYCLES_PER_BYTE = {"iosim": 0.088}
# The project's kernel's consumer step outside its GEMMs and softmax, by its own stamps, per
# tiling (block_q, block_kv, d): (the waits before each GEMM issue that do not block: the K / V
# full mbarriers, the ping-pong named barrier, the wgmma fence; O's rescale, P's packing and the
# loop back), clock cycles per consumer per step (Pipeline.consumer_step_overhead_cycles,
# rescale_phase_cycles). H200, two clock64 stamps per step, one phase per build
# (scripts/experiments/fa3_phase_pairs_h200.py, measurements/h200/fa3_phases/
# fa3_phase_pairs_h200.json): consumer 0 (it goes first, so its waits do not block) of a lone
# CTA, median over its steady steps, less the stamps' own cost (the seven phases summed less the
# one-stamp step, over seven: 70 / 54 cycles); scripts/fa3_phase_split.py prints them and
# tests/test_fa3_phase_split.py recomputes them. Other tilings of the kernel take the mean of
# the two. flash-attention's FA-3 (not measured) takes the project kernel's figures: its
# mainloop has the same per-step waits (pipeline_k / pipeline_v consumer_wait, the warp
# scheduler's named barrier, warpgroup_arrive) and the same rescale_o and P conversion; this
# transfer was decided after the FA-3 paper's H100 rows had moved the wrong way without it
# (docs/validation.md). cuDNN (its code not known): 0.
CONSUMER_PHASE_CYCLES = {(192, 128, 64): (258.0, 536.0), (128, 128, 128): (236.0, 349.0)}
CONSUMER_PHASE_KERNELS = ("iosim", "flash-attn")


def consumer_phase_cycles(kernel: str, t: Tiling, d: int) -> tuple:
    """(step overhead, rescale phase) cycles of `kernel`'s consumers at tiling t (CONSUMER_PHASE_CYCLES)."""
    if kernel not in CONSUMER_PHASE_KERNELS:
        return 0.0, 0.0
    hit = CONSUMER_PHASE_CYCLES.get((t.block_q, t.block_kv, d))
    if hit is None:
        vals = list(CONSUMER_PHASE_CYCLES.values())
        hit = (sum(v[0] for v in vals) / len(vals), sum(v[1] for v in vals) / len(vals))
    return hit


def default_tiles(d: int) -> tuple:
    if d <= 64:
        return (Tiling(192, 128, 2, 16), Tiling(128, 128, 2, 12), Tiling(128, 64, 2, 12))
    if d <= 96:
        return (Tiling(128, 128, 2, 12), Tiling(128, 64, 2, 12))
    if d <= 128:
        return (Tiling(128, 128, 3, 12), Tiling(128, 128, 2, 12), Tiling(128, 64, 2, 12))
    if d <= 192:
        return (Tiling(128, 112, 2, 12), Tiling(128, 64, 2, 12), Tiling(64, 64, 2, 8))
    return (Tiling(128, 80, 2, 12), Tiling(128, 64, 2, 12), Tiling(64, 64, 2, 8))


def consumers(t: Tiling) -> int:
    return t.block_q // WGMMA_M


def producer_registers(n_consumers: int) -> int:
    return 24 if n_consumers <= 2 else 32


def consumer_budget(gpu, n_consumers: int) -> int:
    """setmaxnreg for the consumers: what the producer leaves, in steps of 8."""
    free = gpu.registers_per_sm - 128 * producer_registers(n_consumers)
    return min(gpu.registers_per_thread_max // 8 * 8, free // (128 * n_consumers) // 8 * 8)


def consumer_registers(t: Tiling, d: int) -> int:
    """One consumer thread's share of its 64-row slab: O (fp32), S (fp32), P (fp16)."""
    threads = 128
    return (ceil_div(WGMMA_M * d, threads) + ceil_div(WGMMA_M * t.block_kv, threads)
            + ceil_div(WGMMA_M * t.block_kv, 2 * threads) + FA3_REG_OVERHEAD)


def smem_bytes(t: Tiling, d: int, eb: int) -> int:
    return (t.block_q * d + t.stages * 2 * t.block_kv * d) * eb


def launch_registers(gpu, t: Tiling) -> int:
    """What the kernel is compiled for (one CTA per SM): the register file over the threads."""
    return min(gpu.registers_per_thread_max, gpu.registers_per_sm // t.threads) // 8 * 8


def tiling(problem, gpu, overrides: dict) -> Tiling:
    d, eb = problem.head_dim, problem.elem_bytes
    over = {k: v for k, v in overrides.items() if v is not None}
    if "block_q" in over and "warps" not in over:      # warps follow the consumer count
        over["warps"] = 4 * (1 + max(1, over["block_q"] // WGMMA_M))

    def fits(t: Tiling):
        what = f"fa3 forward tiling {t.describe()} at d={d}"
        if t.block_q % WGMMA_M:
            raise IosimError(f"{what}: block-q must be a multiple of {WGMMA_M} "
                             f"(one wgmma row slab per consumer warpgroup)")
        if t.warps != 4 * (1 + consumers(t)):
            raise IosimError(f"{what}: block-q {t.block_q} needs {4 * (1 + consumers(t))} warps "
                             f"(1 producer + {consumers(t)} consumer warpgroups)")
        budget = consumer_budget(gpu, consumers(t))
        need = consumer_registers(t, d)
        if need > budget:
            raise IosimError(f"{what} needs ~{need} registers per consumer thread but "
                             f"setmaxnreg leaves {budget} with {consumers(t)} consumer warpgroups")
        check_fits(gpu, what, smem_bytes(t, d, eb), launch_registers(gpu, t), t.threads)
    return pick_tiling(default_tiles(d), fits, over)


def kernel(problem, gpu, t: Tiling, kernel: str = "iosim") -> Kernel:
    n_q = ceil_div(problem.seq_q, t.block_q)
    grid = (n_q, problem.heads_q, problem.batch)

    def coord(cta: int) -> tuple:
        x, h, b = grid_index(cta, grid)
        return (n_q - 1 - x if problem.causal else x), h, b   # causal: longest Q blocks first

    o_layout = output_layout(kernel)     # the project's kernel stores O from its fragments

    setup = CTA_SETUP_CYCLES.get(kernel, 0.0)
    o_issue = O_STORE_ISSUE_CYCLES_PER_BYTE.get(kernel, 0.0)
    head = (Barrier("cta setup", setup),) if setup else ()

    def program(cta: int) -> tuple:
        i, h, b = coord(cta)
        return head + fwd_program(problem, t, b, h, i, o_layout,
                                  pack_p_per_element=PACK_P_INSTRUCTIONS_PER_ELEMENT,
                                  o_thread_issued=o_issue > 0.0, tma_box=True)

    d, eb = problem.head_dim, problem.elem_bytes
    overhead, rescale = consumer_phase_cycles(kernel, t, d)
    classes, class_of, period = classes_along_x(
        grid, lambda x: fwd_block_shape(problem, t, n_q - 1 - x if problem.causal else x))
    return Kernel(name="fa3_fwd",
                  launch=Launch(grid, t.threads, smem_bytes(t, d, eb), launch_registers(gpu, t)),
                  program=program,
                  classes=classes, class_of=class_of, class_period=period, cta_coord=coord,
                  pipeline=Pipeline(stages=t.stages, warp_specialized=True,
                                    consumer_warpgroups=consumers(t), intra_overlap=True,
                                    store_issue_cycles_per_byte=o_issue,
                                    consumer_step_overhead_cycles=overhead,
                                    rescale_phase_cycles=rescale),
                  coord_names=("q_block", "head", "batch"))


_kernel = kernel     # build's `kernel` argument names whose kernel, as fa2's


def build(problem, gpu, fwd_overrides: dict, bwd_overrides: dict,
          kernel: str = "iosim") -> Schedule:
    if kernel not in KERNELS:
        raise IosimError(f"unknown FA-3 kernel {kernel!r}; choose from: {', '.join(KERNELS)}")
    if problem.direction != "fwd":
        raise IosimError("fa3 models the forward pass only; use fa2 for the backward pass")
    if not (gpu.features.tma and gpu.features.wgmma):
        raise IosimError(f"fa3 needs TMA and wgmma (Hopper); {gpu.short_name} lacks them; use fa2")
    t = tiling(problem, gpu, fwd_overrides)
    return Schedule("fa3", problem, {"fwd": t}, (_kernel(problem, gpu, t, kernel),))
