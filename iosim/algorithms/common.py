"""Tile arithmetic shared by the schedule generators: block counts, causal block ranges,
ragged edges, and the check that a tiling fits the GPU."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import gcd

from ..errors import IosimError
from ..machine import grid_index, occupancy  # noqa: F401  (re-exported for generators)

STAT_BYTES = 4  # m, l, log-sum-exp and D are fp32 per row
ACC_BYTES = 4   # fp32 accumulators (dQ accumulation buffer)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


SECTOR_BYTES = 32   # the L2's and DRAM's unit of transfer (a 128-byte line holds 4)


def partial_sector_writes(first_row: int, rows: int, col_bytes: int, width_bytes: int,
                          pitch_bytes: int) -> int:
    """Writes of part of a 32-byte sector when one CTA stores rows [first_row, first_row+rows)
    of a row-major tensor (row pitch `pitch_bytes`), each row's segment [col_bytes,
    col_bytes + width_bytes): a segment edge off the sector grid leaves that sector's other part
    to the CTA storing the neighbouring segment. A tile of whole rows (width = pitch) is one
    contiguous range: only its two ends count. Offsets are within one matrix (a batched
    tensor's matrices start on the sector grid when N·N·bytes is a multiple of 32). Exact for
    segments of at least a sector that start and end at the row's ends or at least a sector
    from them (GEMM tiles, softmax row blocks); a narrower one may count a sector twice."""
    s = SECTOR_BYTES
    if width_bytes == pitch_bytes:
        start, end = first_row * pitch_bytes, (first_row + rows) * pitch_bytes
        return (start % s != 0) + (end % s != 0)
    p = pitch_bytes % s
    if p == 0 and col_bytes % s == 0 and width_bytes % s == 0:
        return 0                  # every segment starts and ends on the sector grid
    period = s // gcd(p, s)       # rows after which the edges' offsets repeat
    return _partial_sector_writes(first_row % period, rows, col_bytes % s, width_bytes, p, period)


@lru_cache(maxsize=4096)
def _partial_sector_writes(first_row: int, rows: int, col_bytes: int, width_bytes: int, p: int,
                           period: int) -> int:
    s = SECTOR_BYTES

    def row_edges(r: int) -> int:
        start = (r * p + col_bytes) % s
        end = start + width_bytes
        return (start % s != 0) + (end % s != 0)
    per = [row_edges((first_row + k) % period) for k in range(period)]
    full, rest = divmod(rows, period)
    return full * sum(per) + sum(per[:rest])


LINE_BYTES = 128    # an L1 / L2 line: 4 sectors


def sector_bytes_read(first_row: int, rows: int, col_bytes: int, width_bytes: int,
                      pitch_bytes: int, unit: int = SECTOR_BYTES) -> int:
    """The bytes of whole 32-byte sectors (of whole `unit`-byte blocks) a copy of rows
    [first_row, first_row + rows) reads,
    each row's segment [col_bytes, col_bytes + width_bytes) of a row-major tensor of pitch
    `pitch_bytes`: a segment that starts or ends inside a sector reads all of it (a 128-byte
    TMA box row that starts 16 bytes into a sector crosses the L2→SM path as 5 sectors, 160
    bytes: measurements/h200/tma_pitch/, the load rows). Offsets repeat every
    unit / gcd(pitch mod unit, unit) rows. unit=LINE_BYTES: the bytes of the whole lines the
    segments touch."""
    p = pitch_bytes % unit
    if p == 0:                   # every row starts at the same offset
        return rows * unit * (-(-(col_bytes % unit + width_bytes) // unit))
    period = unit // gcd(p, unit)
    return _sector_bytes_read(first_row % period, rows, col_bytes % unit, width_bytes, p, period,
                              unit)


@lru_cache(maxsize=4096)
def _sector_bytes_read(first_row: int, rows: int, col_bytes: int, width_bytes: int, p: int,
                       period: int, unit: int) -> int:
    def row_bytes(r: int) -> int:
        start = (r * p + col_bytes) % unit
        return unit * (-(-(start + width_bytes) // unit))
    per = [row_bytes((first_row + k) % period) for k in range(period)]
    full, rest = divmod(rows, period)
    return full * sum(per) + sum(per[:rest])


def rows_off_sector(first_row: int, rows: int, col_bytes: int, pitch_bytes: int) -> int:
    """How many of rows [first_row, first_row + rows) of a row-major tensor (pitch
    `pitch_bytes`) have their segment starting at `col_bytes` inside a sector: that sector is
    also the previous segment's of the same row."""
    s = SECTOR_BYTES
    p = pitch_bytes % s
    if p == 0:
        return rows if col_bytes % s else 0
    period = s // gcd(p, s)
    per = [((first_row + k) * p + col_bytes) % s != 0 for k in range(period)]
    full, rest = divmod(rows, period)
    return full * sum(per) + sum(per[:rest])


def rows_in_block(i: int, block: int, length: int) -> int:
    """Valid rows of block i (the last block of a ragged length is short)."""
    return max(0, min(block, length - i * block))


@dataclass(frozen=True)
class Segment:
    """A run [start, stop) of blocks processed identically."""

    start: int
    stop: int
    masked: bool   # partially masked by causality: the kernel applies the mask elementwise
    ragged: bool   # the block is the short last one

    @property
    def count(self) -> int:
        return self.stop - self.start


def _split_ragged(start: int, stop: int, masked: bool, n_blocks: int, ragged_last: bool):
    if stop <= start:
        return []
    if ragged_last and stop == n_blocks:
        out = []
        if stop - 1 > start:
            out.append(Segment(start, stop - 1, masked, False))
        out.append(Segment(stop - 1, stop, masked, True))
        return out
    return [Segment(start, stop, masked, False)]


def block_kind(problem, i: int, j: int, block_q: int, block_kv: int) -> str:
    """'skip', 'full' or 'partial' for Q block i against KV block j (reference, elementwise
    reasoning on corners; used by tests and by the generators through the range functions)."""
    if not problem.causal:
        return "full"
    off = problem.causal_offset
    r0 = i * block_q
    r1 = min(problem.seq_q, r0 + block_q)
    c0 = j * block_kv
    c1 = min(problem.seq_kv, c0 + block_kv)
    if c0 > r1 - 1 + off:
        return "skip"
    if c1 - 1 <= r0 + off:
        return "full"
    return "partial"


def kv_segments(problem, i: int, block_q: int, block_kv: int) -> list[Segment]:
    """KV blocks that Q block i must visit, in increasing order, as uniform segments."""
    n_kv = ceil_div(problem.seq_kv, block_kv)
    ragged = problem.seq_kv % block_kv != 0
    if not problem.causal:
        return _split_ragged(0, n_kv, False, n_kv, ragged)
    off = problem.causal_offset
    r0 = i * block_q
    r1 = min(problem.seq_q, r0 + block_q)
    last_col = r1 - 1 + off                  # largest key any row of the block may see
    j_stop = 0 if last_col < 0 else min(n_kv, last_col // block_kv + 1)
    first_col = r0 + off                     # largest key the block's first row may see
    j_full = 0 if first_col + 1 < 0 else min(n_kv, (first_col + 1) // block_kv)
    if j_full == n_kv - 1 and problem.seq_kv - 1 <= first_col:
        j_full = n_kv
    j_full = min(j_full, j_stop)
    return (_split_ragged(0, j_full, False, n_kv, ragged)
            + _split_ragged(j_full, j_stop, True, n_kv, ragged))


def q_segments(problem, j: int, block_q: int, block_kv: int) -> list[Segment]:
    """Q blocks that attend KV block j, in increasing order, as uniform segments
    (`ragged` marks the short last Q block)."""
    n_q = ceil_div(problem.seq_q, block_q)
    ragged = problem.seq_q % block_q != 0
    if not problem.causal:
        return _split_ragged(0, n_q, False, n_q, ragged)
    off = problem.causal_offset
    c0 = j * block_kv
    c1 = min(problem.seq_kv, c0 + block_kv)

    def first(pred) -> int:  # smallest i in [0, n_q] with pred(i); pred is monotone
        lo, hi = 0, n_q
        while lo < hi:
            mid = (lo + hi) // 2
            if pred(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    # Q block i attends KV block j once its last row sees key c0
    i_first = first(lambda i: min(problem.seq_q, (i + 1) * block_q) - 1 + off >= c0)
    # ... and without a mask once its first row sees key c1 − 1
    i_full = max(i_first, first(lambda i: i * block_q + off >= c1 - 1))
    return (_split_ragged(i_first, i_full, True, n_q, ragged)
            + _split_ragged(i_full, n_q, False, n_q, ragged))


def check_fits(gpu, what: str, smem_bytes: int, registers_per_thread: int, threads: int,
               suggestion: str = "") -> None:
    """Refuse a tiling the GPU cannot hold, in one line that says what would fit."""
    hint = f"; {suggestion}" if suggestion else ""
    if smem_bytes > gpu.shared_memory_per_block_bytes:
        raise IosimError(
            f"{what} needs {smem_bytes:,} B of shared memory per CTA but {gpu.short_name} allows "
            f"{gpu.shared_memory_per_block_bytes:,} B{hint}")
    if registers_per_thread > gpu.registers_per_thread_max:
        raise IosimError(
            f"{what} needs ~{registers_per_thread} registers per thread but {gpu.short_name} allows "
            f"{gpu.registers_per_thread_max}{hint}")
    if registers_per_thread * threads > gpu.registers_per_sm:
        raise IosimError(
            f"{what} needs {registers_per_thread * threads:,} registers per CTA but an SM of "
            f"{gpu.short_name} has {gpu.registers_per_sm:,}{hint}")
    if threads > 1024:
        raise IosimError(f"{what} uses {threads} threads per CTA; CUDA allows at most 1024{hint}")


@dataclass(frozen=True)
class Tiling:
    """Tile shape and pipelining of one pass (forward or backward) of an algorithm."""

    block_q: int
    block_kv: int
    stages: int = 2
    warps: int = 4

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def describe(self) -> str:
        return f"{self.block_q}×{self.block_kv}, {self.stages} stage(s), {self.warps} warps"


WARPGROUP = 4        # warps of one warpgroup: the unit of Hopper's wgmma and of iosim's kernels
MAX_WARPS = 32       # 1024 threads, CUDA's limit per CTA


def check_warps(warps) -> None:
    """Warps per CTA must make whole warpgroups and fit a CTA: 4, 8, ..., 32."""
    if (not isinstance(warps, int) or isinstance(warps, bool) or warps <= 0
            or warps % WARPGROUP or warps > MAX_WARPS):
        raise IosimError(f"warps must be a multiple of {WARPGROUP} (whole warpgroups) from "
                         f"{WARPGROUP} to {MAX_WARPS} (1024 threads), got {warps!r}")


def validate_tiling(t: Tiling) -> None:
    for name in ("block_q", "block_kv", "stages", "warps"):
        v = getattr(t, name)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise IosimError(f"{name.replace('_', '-')} must be a positive integer, got {v!r}")
    check_warps(t.warps)
    for name in ("block_q", "block_kv"):
        if getattr(t, name) % 16:
            raise IosimError(f"{name.replace('_', '-')} must be a multiple of 16 (tensor-core tile), "
                             f"got {getattr(t, name)}")


def pick_tiling(candidates, fits, overrides: dict) -> Tiling:
    """The first candidate, with the user's overrides applied, that fits the GPU. If none
    does, the first one's error, naming a default tiling that would fit."""
    chosen = {k: v for k, v in overrides.items() if v is not None}
    first_error = None
    for cand in candidates:
        t = Tiling(**{**cand.__dict__, **chosen})
        validate_tiling(t)
        try:
            fits(t)
            return t
        except IosimError as exc:
            first_error = first_error or exc
    alt = _first_fitting(candidates, fits) if chosen else None
    suffix = f"; {alt.describe()} would fit" if alt else ""
    raise IosimError(str(first_error) + suffix)


def _first_fitting(candidates, fits):
    for cand in candidates:
        try:
            fits(cand)
            return cand
        except IosimError:
            continue
    return None
