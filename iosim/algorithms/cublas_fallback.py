"""cuBLAS's fallback kernels on Hopper: the GEMMs of standard attention when S's row pitch is
off 16 bytes.

cuBLAS's sm90 kernels (nvjet) read and write through TMA, and a TMA descriptor's global strides
must be multiples of 16 bytes (CUDA driver API, cuTensorMapEncodeTiled: globalStrides). Where
N_kv·bytes is not (fp16: N_kv not a multiple of 8), every GEMM of standard attention touches a
matrix of that pitch (S, P, dP, dS), and cuBLAS runs CUTLASS 2.x Ampere kernels instead:
`cutlass_80_tensorop_f16_s16816gemm_f16_<M>x<N>_<K>x<stages>_<layout>_align2`, mma.sync
m16n8k16 tiles whose global copies move 2 elements (4 bytes) per thread (align2), issued by the
computing warps, and a staged epilogue whose stores also move 4 bytes per thread.

Two regimes, by the pitch's alignment (`alignment`): off 16 but on 4 bytes (fp16: N_kv even,
not a multiple of 8) cuBLAS runs the cutlass_80 align2 kernels below; off 4 bytes (N_kv odd)
it runs CUTLASS's Turing kernels `cutlass_75_tensorop_f16_s1688gemm_f16_128x128_<layout>_align1`
(mma.sync m16n8k8, 2-byte global accesses staged through registers: no cp.async), 128
threads, 32 KB of shared memory (K steps of 32, 2 stages), 254 registers: two CTAs per SM
(measurements/h200/cublas_align1/, ncu). The align1 tile is 128 × 128 for every output (P V
at d 64 too: half its columns idle; cuBLAS chose 64x64 for P V at d 64 in the fallback
holdout's shapes and 128x256 for Pᵀ dO at N 2997 z 22: the rule does not follow them; a
kernel named by a measurement or the user is followed, tile_of_kernel_name).

What the H200 ran for align2 (measurements/h200/cublas_align2/: torch.matmul as iosim/kernels/run.py calls
it, at N 1498..6006 off the 16-byte pitch, none a validation shape; the validation row N 3500
ran the same two kernels):
  - N×N outputs (S = Q Kᵀ, dP = dO Vᵀ; K = d): 256x128_32x3_tn (K step 64 at d 256), 256
    threads; in the row-major view a 128-row × 256-column tile of S.
  - N×d outputs (O = P V, dQ, dK, dV; K = N): 128x256_64x3 (d 128: 256 rows × 128 columns, 256
    threads) and 64x256_64x4 (d 64: 256 rows, 128 threads) on most grids; cuBLAS chose smaller
    tiles on some (d 64: 64x128 at z 89 and z 12, 64x64 at z 6; d 128: 128x128 at N 6006 z 6
    and for Pᵀ dO at N 4002 z 12). The rule takes the first tile (spread_over_sms aside);
    a named kernel (tile_of_kernel_name, `--gemm-tiles`) is taken as named.

Costs beyond what the model already charges an mma.sync GEMM (tensor rate, ldmatrix operand
reads, the copies' bytes), each in series with the MMAs: a K step's latency (a Barrier per
step: with one 8-warp CTA per SM nothing hides the mainloop's cp.async wait and barrier), the
threads' issue of the 4-byte copies (Pipeline.copy_issue_cycles_per_byte) and of the
epilogue's 4-byte stores (store_issue_cycles_per_byte). The three figures come from the
probe's S = Q Kᵀ kernels alone (one CTA per SM, 48-49 waves): the d = 32 time gives the
epilogue, the slopes in d at K steps of 32 (d 32 → 128) and 64 (d 128 → 256, another tile)
split a step's cost into its fixed part and its part per byte (`python scripts/align2_costs.py`,
which solves for the three with the simulator itself). The probe's P V and Pᵀ dO kernels and
the d = 64 S kernels are the check. The align1 regime has its own figures, solved the same way
from its own probe's S kernels (`python scripts/align2_costs.py --regime align1`): its K steps
are all 32 wide, so a step's fixed part and its part per byte are not told apart, and the
whole step is charged as latency (copy issue 0).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

TMA_STRIDE_ALIGN_BYTES = 16
WARP_ROWS = 64     # CUTLASS's warp tile 64×64 (sm80 and sm75 kernels): a warp owns 64 rows


@dataclass
class Regime:
    """One family of fallback kernels and its issue costs (clock cycles, in series with the
    MMAs): a K step's latency beyond its MMAs, the threads' issue per byte copied and per
    byte of the epilogue's stores. H200 figures; other Hopper GPUs borrow them."""

    name: str
    k_step_cycles: float
    copy_issue_cycles_per_byte: float
    store_issue_cycles_per_byte: float


# Solved by scripts/align2_costs.py (outputs benchmarks/results/align2_costs.txt and
# align1_costs.txt) at the SM clock `iosim validate` simulates the kernels at (the counted
# clock, GpuSpec.sm_clock_counted_max_hz: cycles mean the same seconds in both), with the
# DRAM write queue bounded (GpuSpec.dram_write_queue_s) as the validation has it, from the
# probes measurements/h200/cublas_align2/ (N 2996 / 4002 / 5006) and cublas_align1/ (N 2997 /
# 4003 / 5007; P V at N 1499..6007), none a validation shape. Keys:
# (alignment, narrow output). align2: one set for both layouts, from its S = Q Kᵀ kernels at
# d 32 / 128 / 256 (its 13 other kernels the check: mean |err| 6.4%, max 14.1%). align1 (K
# steps all 32 wide): its P V kernels (nn) at d 64 / 128 give their step latency and the
# 2-byte copies' issue (their steps' bytes differ by d); the S kernels (tn) at d 32 / 128 then
# their own step latency and the epilogue's store issue with that copy issue; P V solved again
# with that store issue. An align1 S step costs 2.4 times a P V step of the same bytes (4133
# against 1708 cycles of latency); why is not measured. Solved with the fast mode's short
# kernels characterized as a stream (sim/characterize.py; the probes' S kernels at d 32 / 64 /
# 128 have 1 / 2 / 4 K steps, at d 256 8, which the lockstep extrapolation takes: before the
# stream 3483 / 0.0614 / 0.1248 and 1712 / 0.0608 / 0.1248, checks 8.1%, max 18.4%). Checks:
# align1's S kernels at d 64 / 256 and Pᵀ dO, mean |err| 10.6%, max 18.5% (d 64 −5%, d 256
# +15%).
_ALIGN2 = Regime("align2", k_step_cycles=1061.0, copy_issue_cycles_per_byte=0.0273,
                 store_issue_cycles_per_byte=0.0868)
REGIMES = {
    (2, False): _ALIGN2,
    (2, True): _ALIGN2,
    (1, False): Regime("align1 tn", k_step_cycles=4133.0, copy_issue_cycles_per_byte=0.0614,
                       store_issue_cycles_per_byte=0.1108),
    (1, True): Regime("align1 nn", k_step_cycles=1708.0, copy_issue_cycles_per_byte=0.0611,
                      store_issue_cycles_per_byte=0.1108),
}


@dataclass(frozen=True)
class FallbackTile:
    """One fallback kernel's tile, in the row-major view of the GEMM's output, and its regime."""

    rows: int
    cols: int
    bk: int
    stages: int
    warps: int
    kernel: str
    regime: Regime
    registers: int      # per thread, as ncu measured the kernel (launch__registers_per_thread)
    warp_rows: int = WARP_ROWS    # rows of the output tile one warp computes

    def text(self) -> str:
        """How a gemm_tiles item names it: the kernel's own name (a given kernel's full name)."""
        return self.kernel


# The launch of each fallback kernel cuBLAS has run on the H200, as Nsight Compute measured it:
# (threads per CTA, registers per thread). measurements/h200/fallback_holdout/ncu_raw_fallback.txt,
# cublas_align2/cublas_align2_ncu.csv, cublas_align1/cublas_align1_ncu.csv (launch__block_size,
# launch__registers_per_thread; the shared memory each states, launch__shared_mem_per_block_dynamic,
# is its stages' A and B panels: stages x (rows + cols) x K step x 2 bytes, as gemm_smem_bytes
# counts them).
MEASURED_LAUNCH = {
    "cutlass_80_tensorop_f16_s16816gemm_f16_256x128_32x3_tn_align2": (256, 218),
    "cutlass_80_tensorop_f16_s16816gemm_f16_128x256_32x3_tn_align2": (256, 218),
    "cutlass_80_tensorop_f16_s16816gemm_f16_128x256_64x3_nn_align2": (256, 226),
    "cutlass_80_tensorop_f16_s16816gemm_f16_64x256_64x4_nn_align2": (128, 234),
    "cutlass_80_tensorop_f16_s16816gemm_f16_128x128_64x3_nn_align2": (128, 240),
    "cutlass_80_tensorop_f16_s16816gemm_f16_64x128_64x3_nn_align2": (128, 154),
    "cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x4_nn_align2": (64, 156),
    "cutlass_80_tensorop_f16_s16816gemm_f16_128x128_32x4_nt_align2": (128, 222),
    "cutlass_75_tensorop_f16_s1688gemm_f16_128x128_tn_align1": (128, 254),
    "cutlass_75_tensorop_f16_s1688gemm_f16_128x128_nn_align1": (128, 252),
    "cutlass_75_tensorop_f16_s1688gemm_f16_64x64_nn_align1": (128, 96),
    "cutlass_75_tensorop_f16_s1688gemm_f16_128x256_nt_align1": (256, 226),
}
_NAME = re.compile(r"cutlass_(?:80|75)_tensorop_f16_s\d+gemm_f16_(\d+)x(\d+)(?:_(\d+)x(\d+))?"
                   r"_([nt][nt])_align([12])")
ALIGN1_K_STEP, ALIGN1_STAGES = 32, 2   # the sm75 kernels' names state neither (docstring)


def _warp_rows(rows: int, cols: int, warps: int) -> int:
    """Rows of a warp's share of the tile: the warps split the tile into the squarest warp
    tiles (CUTLASS's 64 x 64 warp tile for every kernel whose tile and warps allow it; a
    tie goes to the taller warp tile)."""
    best = None
    for along_rows in range(1, warps + 1):
        if warps % along_rows or rows % along_rows or cols % (warps // along_rows):
            continue
        wr, wc = rows // along_rows, cols // (warps // along_rows)
        key = (abs(wr - wc), -wr)
        if best is None or key < best[0]:
            best = (key, wr)
    return best[1] if best else WARP_ROWS


def tile_of_kernel_name(name: str) -> FallbackTile | None:
    """The FallbackTile of a CUTLASS kernel cuBLAS ran, from its name: its tile (in cuBLAS's
    column-major view the name states the row-major output's columns first, as nvjet's do:
    256x128_32x3_tn is a 128-row x 256-column tile of S, 128x256_64x3_nn a 256-row x
    128-column tile of O), K step and stages (the align1 names state neither: 32 and 2, as
    their shared memory says), layout (tn: an N x N output, S or dP; nn / nt: an N x d one)
    and alignment; its threads and registers as Nsight Compute measured them
    (MEASURED_LAUNCH). None for another kernel or one whose launch was never measured."""
    m = _NAME.search(name)
    if not m:
        return None
    full = m.group(0)
    if full not in MEASURED_LAUNCH:
        return None
    cols, rows = int(m.group(1)), int(m.group(2))
    align, narrow = int(m.group(6)), m.group(5) != "tn"
    bk, stages = ((int(m.group(3)), int(m.group(4))) if m.group(3)
                  else (ALIGN1_K_STEP, ALIGN1_STAGES))
    threads, registers = MEASURED_LAUNCH[full]
    warps = threads // 32
    return FallbackTile(rows, cols, bk, stages, warps, full, REGIMES[align, narrow], registers,
                        _warp_rows(rows, cols, warps))


def spread_over_sms(fb: FallbackTile, m: int, n: int, batches: int, sm_count: int) -> FallbackTile:
    """An N×d output's tile with its rows halved (half the warps: CUTLASS's warp tile stays
    64 × 64) while the halved grid still fits one wave (tiles ≤ SM count): cuBLAS's heuristic
    spreading a grid too small to fill the chip, as for its Hopper kernels
    (standard.gemm_tile). The validation row N 6006, d 128, z 2 ran O = P V as
    128x128_64x3_nn_align2, grid (47, 1, 2) (measured_h200_fallback_kernels.csv), where the
    256-row tile's grid is 48; the align2 probe's other N×d shapes all have grids over
    66 tiles, where the rule keeps the first tile (cuBLAS's smaller tiles there, e.g. 128 rows
    at N 6006 z 6 with 144 tiles, the rule does not follow). The halved kernel keeps the first
    tile's registers per thread and its regime's per-K-step figures (not measured apart)."""
    rows = fb.rows
    while (rows // 2 >= 2 * WARP_ROWS
           and -(-m // (rows // 2)) * -(-n // fb.cols) * batches <= sm_count):
        rows //= 2
    if rows == fb.rows:
        return fb
    return replace(fb, rows=rows, warps=fb.warps * rows // fb.rows,
                   kernel=fb.kernel.replace(f"x{fb.rows}_", f"x{rows}_"))


def alignment(problem, gpu) -> int:
    """The fallback regime cuBLAS runs this problem's GEMMs in on this GPU: 0 none (the Hopper
    kernels: the pitch is on 16 bytes, or the GPU has no TMA), 2 (align2: on 4 bytes), 1
    (align1)."""
    pitch = problem.seq_kv * problem.elem_bytes
    if not gpu.features.tma or pitch % TMA_STRIDE_ALIGN_BYTES == 0:
        return 0
    return 2 if pitch % 4 == 0 else 1


def runs_fallback(problem, gpu) -> bool:
    """Whether cuBLAS runs its fallback kernels for this problem's GEMMs on this GPU."""
    return alignment(problem, gpu) != 0


def square_output_tile(k: int, align: int = 2) -> FallbackTile:
    """The tile of a GEMM whose output is N×N (S, dP), K = d."""
    if align == 1:
        return FallbackTile(128, 128, 32, 2, 4, "cutlass_75 128x128_tn_align1", REGIMES[1, False],
                            254)
    bk = 32 if k <= 128 else 64
    return FallbackTile(128, 256, bk, 3, 8, f"cutlass_80 256x128_{bk}x3_tn_align2",
                        REGIMES[2, False], 218)


def narrow_output_tile(d: int, align: int = 2) -> FallbackTile:
    """The tile of a GEMM whose output is N×d (O, dQ, dK, dV), K = N."""
    if align == 1:
        return FallbackTile(128, 128, 32, 2, 4, "cutlass_75 128x128_nn_align1", REGIMES[1, True],
                            252)
    if d <= 64:
        return FallbackTile(256, 64, 64, 4, 4, "cutlass_80 64x256_64x4_nn_align2",
                            REGIMES[2, True], 234)
    return FallbackTile(256, 128, 64, 3, 8, "cutlass_80 128x256_64x3_nn_align2",
                        REGIMES[2, True], 226)
