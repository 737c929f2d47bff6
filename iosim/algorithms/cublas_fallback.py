"""cuBLAS's Ampere fallback on Hopper: the GEMMs of standard attention when S's row pitch is
off 16 bytes.

cuBLAS's sm90 kernels (nvjet) read and write through TMA, and a TMA descriptor's global strides
must be multiples of 16 bytes (CUDA driver API, cuTensorMapEncodeTiled: globalStrides). Where
N_kv·bytes is not (fp16: N_kv not a multiple of 8), every GEMM of standard attention touches a
matrix of that pitch (S, P, dP, dS), and cuBLAS runs CUTLASS 2.x Ampere kernels instead:
`cutlass_80_tensorop_f16_s16816gemm_f16_<M>x<N>_<K>x<stages>_<layout>_align2`, mma.sync
m16n8k16 tiles whose global copies move 2 elements (4 bytes) per thread (align2), issued by the
computing warps, and a staged epilogue whose stores also move 4 bytes per thread.

What the H200 ran (measurements/h200/cublas_align2/: torch.matmul as iosim/kernels/run.py calls
it, at N 1498..6006 off the 16-byte pitch, none a validation shape; the validation row N 3500
ran the same two kernels):
  - N×N outputs (S = Q Kᵀ, dP = dO Vᵀ; K = d): 256x128_32x3_tn (K step 64 at d 256), 256
    threads; in the row-major view a 128-row × 256-column tile of S.
  - N×d outputs (O = P V, dQ, dK, dV; K = N): 128x256_64x3 (d 128: 256 rows × 128 columns, 256
    threads) and 64x256_64x4 (d 64: 256 rows, 128 threads) on most grids; cuBLAS chose smaller
    tiles on some (d 64: 64x128 at z 89 and z 12, 64x64 at z 6; d 128: 128x128 at N 6006 z 6
    and for Pᵀ dO at N 4002 z 12). Not followed: the model takes the first tile always.

Costs beyond what the model already charges an mma.sync GEMM (tensor rate, ldmatrix operand
reads, the copies' bytes), each in series with the MMAs: a K step's latency (a Barrier per
step: with one 8-warp CTA per SM nothing hides the mainloop's cp.async wait and barrier), the
threads' issue of the 4-byte copies (Pipeline.copy_issue_cycles_per_byte) and of the
epilogue's 4-byte stores (store_issue_cycles_per_byte). The three figures come from the
probe's S = Q Kᵀ kernels alone (one CTA per SM, 48-49 waves): the d = 32 time gives the
epilogue, the slopes in d at K steps of 32 (d 32 → 128) and 64 (d 128 → 256, another tile)
split a step's cost into its fixed part and its part per byte (`python scripts/align2_costs.py`,
which solves for the three with the simulator itself). The probe's P V and Pᵀ dO kernels and
the d = 64 S kernels are the check.
"""
from __future__ import annotations

from dataclasses import dataclass

TMA_STRIDE_ALIGN_BYTES = 16
WARP_ROWS = 64     # CUTLASS sm80 warp tile 64×64: a warp owns 64 rows of its output tile

# Solved by scripts/align2_costs.py from measurements/h200/cublas_align2/ (the S = Q Kᵀ kernels
# at N 2996 / 4002 / 5006 and d 32 / 128 / 256; output benchmarks/results/align2_costs.txt): a
# K step's latency beyond its MMAs (the mainloop's cp.async wait and barrier with one CTA of 8
# warps per SM), the threads' issue of their 4-byte copies per byte copied, and the
# epilogue's 4-byte stores per byte stored, in clock cycles. H200 only: other Hopper GPUs
# borrow them. The probe's other 13 kernels (P V, Pᵀ dO, d 64): mean |err| 6.4%, max 15.8%.
K_STEP_CYCLES = 1069.0
COPY_ISSUE_CYCLES_PER_BYTE = 0.0334
STORE_ISSUE_CYCLES_PER_BYTE = 0.1042

@dataclass(frozen=True)
class FallbackTile:
    """One cutlass_80 align2 kernel's tile, in the row-major view of the GEMM's output."""

    rows: int
    cols: int
    bk: int
    stages: int
    warps: int
    kernel: str

    def smem_bytes(self, eb: int) -> int:
        """`stages` buffers of a rows×bk panel of A and a bk×cols panel of B (ncu: 73,728 B for
        256x128_32x3, 147,456 for 128x256_64x3, 163,840 for 64x256_64x4)."""
        return (self.rows + self.cols) * self.bk * self.stages * eb


def runs_fallback(problem, gpu) -> bool:
    """Whether cuBLAS runs its Ampere kernels for this problem's GEMMs on this GPU."""
    return bool(gpu.features.tma) and \
        (problem.seq_kv * problem.elem_bytes) % TMA_STRIDE_ALIGN_BYTES != 0


def square_output_tile(k: int) -> FallbackTile:
    """The tile of a GEMM whose output is N×N (S, dP), K = d."""
    bk = 32 if k <= 128 else 64
    return FallbackTile(128, 256, bk, 3, 8, f"cutlass_80 256x128_{bk}x3_tn_align2")


def narrow_output_tile(d: int) -> FallbackTile:
    """The tile of a GEMM whose output is N×d (O, dQ, dK, dV), K = N."""
    if d <= 64:
        return FallbackTile(256, 64, 64, 4, 4, "cutlass_80 64x256_64x4_nn_align2")
    return FallbackTile(256, 128, 64, 3, 8, "cutlass_80 128x256_64x3_nn_align2")
