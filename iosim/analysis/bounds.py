"""IO bounds for exact attention, per (batch, head), in bytes unless the name says otherwise.

Notation: N = sequence length, d = head dimension, M = on-chip memory (SRAM) in elements.

- FA-1 Theorem 2 (Dao et al., 2022): FlashAttention does Θ(N²d²/M) HBM accesses for
  d ≤ M ≤ Nd. With the paper's block sizes Bc = ⌈M/4d⌉, Br = min(⌈M/4d⌉, d), Algorithm 1
  makes T_c = ⌈N/Bc⌉ passes over Q and O (read Q_i, read O_i, write O_i: 3Nd elements per
  pass) after reading K and V once (2Nd): 2Nd + 3Nd·T_c ≈ 12 N²d²/M elements.
- FA-1 Proposition 3: no exact attention algorithm does o(N²d²/M) accesses for all M in
  [d, Nd]. The argument sits at M = Θ(Nd), where N²d²/M = Θ(Nd): the compulsory traffic.
- Saha & Ye (2024), red–blue pebble game: the IO complexity of (square) attention is
  Θ(min(N²d/√M, N²d²/M)). For M ≥ d² the second term is the smaller (FlashAttention is
  optimal); for M < d², Θ(N²d/√M) is achieved by square tiling and is the bound.
  The crossover is at M = d².
- Rectangular, masked, GQA, decode: `io_bounds` counts attended (query, key) pairs instead of
  N², K and V per KV head, and takes the larger of that Θ term and the floor (every needed
  input read once, O written once), which is the bound in decode. See io_bounds.
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


def necessary_bytes(problem) -> dict:
    """What any exact forward algorithm must move at least once (the floor): every query row
    that attends a key, every key/value some query attends (per KV head: query heads of a GQA
    group share them; a shared prefix is stored, hence read, once) and the output written once.
    The LSE is not counted: inference needs only O. Under bottom-right causal alignment the
    last query row attends every key, so K and V are always needed whole; rows r < seq_q −
    seq_kv attend nothing and need no Q read."""
    from .tensors import tensor_bytes as tb
    p = problem
    q_rows = sum(c * (min(p.seq_q, n) if p.causal else p.seq_q) for n, c in p.kv_length_counts)
    q = q_rows * p.heads_q * p.head_dim * p.elem_bytes
    kv = sum(tb(p, t) for t in ("K", "V", "K_prefix", "V_prefix"))
    read, write = q + kv, tb(p, "O")
    return {"read_bytes": read, "write_bytes": write, "total_bytes": read + write}


def attention_regime(floor_bytes: int, theta_bytes: float, d: int, M_elements: int) -> str:
    if floor_bytes >= theta_bytes:
        return ("memory floor: reading the needed inputs once and writing O once exceeds the "
                "Θ term (few (query, key) pairs per byte moved: decode, short queries, "
                "large SRAM)")
    return saha_ye_regime(d, M_elements)


@dataclass(frozen=True)
class IoBounds:
    sram_elements: int
    compulsory_bytes: int            # the floor: necessary_bytes (inputs needed once, O once)
    fa1_theorem2_bytes: int          # Algorithm 1 count with the paper's constants, all heads
    n2d2_over_m_bytes: int           # pairs·d²/M (constant 1), all heads (N²d²/M when square)
    saha_ye_bytes: int               # Θ-order term (constant 1) over attended pairs, all heads
    lower_bound_bytes: int           # max(floor, Θ term)
    regime: str
    crossover_sram_elements: int     # d²
    fa1_range_ok: bool               # d ≤ M ≤ Nd, where FA-1 Theorem 2 / Prop. 3 apply
    attended_pairs: int = 0          # (query, key) pairs not masked, all batch × query heads

    def to_dict(self) -> dict:
        return asdict(self)


def io_bounds(problem, sram_bytes: int) -> IoBounds:
    """Bounds for the forward pass on all batch × heads, for any shape.

    Rectangular and masked problems: the papers' N² counts (query, key) pairs, so the Θ term is
    taken over the attended pairs A (Σ over requests and query heads of the unmasked pairs):
    min(A·d/√M, A·d²/M) elements. GQA: K and V are read per KV head in the floor; the Θ term is
    unchanged (a KV group is one problem of g·seq_q queries, whose pairs are the group's sum).
    Decode (seq_q small): A·d²/M falls far below the KV cache, and the floor — the KV cache read
    once — is the bound. The lower bound is max(floor, Θ term); `regime` says which holds.
    M: the SM's shared memory in elements (the tiles' home; register-held accumulators are
    not counted, as in the papers' SRAM)."""
    eb = problem.elem_bytes
    M = sram_bytes // eb
    d = problem.head_dim
    N = max(problem.seq_q, problem.seq_kv)
    pairs = problem.attended_pairs_total() * problem.heads_q
    floor = necessary_bytes(problem.with_(direction="fwd"))["total_bytes"]
    theta = min(pairs * d / math.sqrt(M), pairs * d * d / M) * eb
    _, bc = fa1_block_sizes(M, d)
    fa1 = sum(c * (2 * n * d + 3 * problem.seq_q * d * math.ceil(n / bc))
              for n, c in problem.kv_length_counts) * eb * problem.heads_q
    return IoBounds(
        sram_elements=M,
        compulsory_bytes=floor,
        fa1_theorem2_bytes=fa1,
        n2d2_over_m_bytes=int(pairs * d * d / M * eb),
        saha_ye_bytes=int(theta),
        lower_bound_bytes=max(floor, int(theta)),
        regime=attention_regime(floor, theta, d, M),
        crossover_sram_elements=d * d,
        fa1_range_ok=d <= M <= N * d,
        attended_pairs=pairs,
    )
