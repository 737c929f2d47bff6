"""IO bounds for exact attention, per (batch, head), in bytes unless the name says otherwise.

Notation: N = sequence length, d = head dimension, M = on-chip memory (SRAM) in elements.

- FA-1 Theorem 2 (Dao et al., 2022): FlashAttention does Θ(N²d²/M) HBM accesses for
  d ≤ M ≤ Nd. With the paper's block sizes Bc = ⌈M/4d⌉, Br = min(⌈M/4d⌉, d), Algorithm 1
  makes T_c = ⌈N/Bc⌉ passes over Q and O (read Q_i, read O_i, write O_i: 3Nd elements per
  pass) after reading K and V once (2Nd): 2Nd + 3Nd·T_c ≈ 12 N²d²/M elements.
- FA-1 Proposition 3: no exact attention algorithm does o(N²d²/M) accesses for all M in
  [d, Nd]. The argument sits at M = Θ(Nd), where N²d²/M = Θ(Nd): the compulsory traffic.
- Saha & Ye (2024), red–blue pebble game: the IO complexity of attention is
  Θ(min(N²d/√M, N²d²/M)). For M ≥ d² the second term is the smaller (FlashAttention is
  optimal); for M < d², Θ(N²d/√M) is achieved by square tiling and is the bound.
  The crossover is at M = d².
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass


def compulsory_bytes(problem) -> dict:
    """Every input read once and every output written once, for the problem's direction."""
    from .tensors import tensor_bytes as tb
    p = problem
    fwd_read = tb(p, "Q") + tb(p, "K") + tb(p, "V")
    fwd_write = tb(p, "O") + tb(p, "LSE")
    bwd_read = tb(p, "Q") + tb(p, "K") + tb(p, "V") + tb(p, "O") + tb(p, "dO") + tb(p, "LSE")
    bwd_write = tb(p, "dQ") + tb(p, "dK") + tb(p, "dV")
    read = write = 0
    if p.direction in ("fwd", "fwd+bwd"):
        read += fwd_read
        write += fwd_write
    if p.direction in ("bwd", "fwd+bwd"):
        read += bwd_read
        write += bwd_write
    return {"read_bytes": read, "write_bytes": write, "total_bytes": read + write}


def fa1_block_sizes(M_elements: int, d: int) -> tuple[int, int]:
    """(Br, Bc) as FA-1 Algorithm 1 sets them from the SRAM size M."""
    bc = math.ceil(M_elements / (4 * d))
    return min(bc, d), bc


def fa1_theorem2_elements(N: int, d: int, M_elements: int) -> int:
    """HBM element accesses of FA-1 Algorithm 1 (forward) per head: 2Nd + 3Nd·⌈N/Bc⌉."""
    _, bc = fa1_block_sizes(M_elements, d)
    return 2 * N * d + 3 * N * d * math.ceil(N / bc)


def saha_ye_elements(N: int, d: int, M_elements: int) -> float:
    """min(N²d/√M, N²d²/M), the Θ-order IO complexity (constant 1), per head."""
    return min(N * N * d / math.sqrt(M_elements), N * N * d * d / M_elements)


def saha_ye_regime(d: int, M_elements: int) -> str:
    return "large-cache (M ≥ d²): Θ(N²d²/M)" if M_elements >= d * d else \
        "small-cache (M < d²): Θ(N²d/√M)"


@dataclass(frozen=True)
class IoBounds:
    sram_elements: int
    compulsory_bytes: int
    fa1_theorem2_bytes: int          # Algorithm 1 count with the paper's constants, all heads
    n2d2_over_m_bytes: int           # N²d²/M (constant 1), all heads
    saha_ye_bytes: int               # Θ-order lower bound (constant 1), all heads
    lower_bound_bytes: int           # max(compulsory, saha_ye)
    regime: str
    crossover_sram_elements: int     # d²
    fa1_range_ok: bool               # d ≤ M ≤ Nd, where FA-1 Theorem 2 / Prop. 3 apply

    def to_dict(self) -> dict:
        return asdict(self)


def io_bounds(problem, sram_bytes: int) -> IoBounds:
    """Bounds for the forward pass (the papers' setting) on all batch × heads."""
    eb = problem.elem_bytes
    M = sram_bytes // eb
    N, d = max(problem.seq_q, problem.seq_kv), problem.head_dim
    n_heads = problem.batch * problem.heads_q
    comp = compulsory_bytes(problem.with_(direction="fwd"))["total_bytes"]
    sy = int(saha_ye_elements(N, d, M) * eb * n_heads)
    return IoBounds(
        sram_elements=M,
        compulsory_bytes=comp,
        fa1_theorem2_bytes=fa1_theorem2_elements(N, d, M) * eb * n_heads,
        n2d2_over_m_bytes=int(N * N * d * d / M * eb * n_heads),
        saha_ye_bytes=sy,
        lower_bound_bytes=max(comp, sy),
        regime=saha_ye_regime(d, M),
        crossover_sram_elements=d * d,
        fa1_range_ok=d <= M <= N * d,
    )
