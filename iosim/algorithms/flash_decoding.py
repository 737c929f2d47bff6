"""Flash-Decoding: split-KV attention for few query tokens against a long KV cache.

The schedule (the decode CUDA kernels' trace must equal it, operation for operation):

Packing (GQA). The g = heads_q / heads_kv query heads of one KV head and the seq_q query tokens
of one request form the R = seq_q · g rows of one packed Q matrix, token-major: row
r = t · g + u holds query token t of query head hk · g + u. It is cut into n_m = ⌈R / block_q⌉
row tiles m; tile m has rows_m = min(block_q, R − m · block_q) valid rows. Every row of a tile
uses the same KV head, so one K/V tile load serves all of them (FlashAttention's decode path
packs the same way).

KV blocks. Each request b's KV positions are cut into blocks of block_kv. Without a shared
prefix there is one range: blocks j = 0 … ⌈L_b / block_kv⌉ − 1 of tensors K, V at coordinate
(b, hk, j), the last block holding L_b − (n − 1) · block_kv rows. With a shared prefix of P
tokens (`prefix_len`) the request's KV is two ranges, visited in this order: the prefix,
blocks j of K_prefix, V_prefix at coordinate (hk, j) (no batch index: every request's block
table points at the same pages), then the request's own L_b − P tokens, blocks of K, V at
(b, hk, j). The per-request block list is the concatenation: prefix blocks first.

Splits. The block list of every request is cut into `splits` S chunks of
bps = ⌈n_max / S⌉ consecutive blocks (n_max: the longest request's block count); S is then
reduced to ⌈n_max / bps⌉ so that no chunk is empty for the longest request (shorter requests
may have empty chunks). Without --splits, S follows FlashAttention-2's num_splits_heuristic
(flash_api.cpp): no split if the B · heads_kv · n_m tiles already fill 80% of the CTA slots,
else the smallest S ≤ min(128, slots, n_max) whose wave efficiency (tiles · S / slots over its
ceiling) reaches 85% of the best, counting only S that change ⌈n_max / S⌉; slots = SMs × CTAs
of this kernel per SM (FlashAttention passes 2 × SMs, its kernel's occupancy).

Kernel 1, `fd_split`: grid (S, heads_kv · n_m, batch), x fastest; CTA (k, hk · n_m + m, b).
    Load  Q           (b, hk, m)      rows_m × d, element bytes      [only if the chunk is non-empty]
    for each range, for each block j of the chunk in that range (increasing):
        Load K[_prefix]  coord (b, hk, j) or (hk, j)   rows × d
        Load V[_prefix]  same coord                    rows × d
        Mma S=QK^T (block_q × block_kv × d); [Alu mask if causal-partial or ragged];
        Alu softmax 3·bq·bc; Exp bq·bc + bq; Alu rescale bq·d; Mma O+=PV (bq × d × bc)
      (full blocks are one Loop over j; a causal-partial run, a ragged last block, each their own)
    Alu normalize block_q · d
    S > 1:  Store O_partial  (b, hk, m, k)  rows_m × d fp32   (O_k, normalized by its own l_k)
            Store ML_partial (b, hk, m, k)  rows_m × 2 fp32   (m_k, l_k per row)
    S = 1:  Store O   (b, hk, m)  rows_m × d, element bytes;  Store LSE (b, hk, m) rows_m × 1 fp32
  An empty chunk (a short request) loads nothing and stores O_partial = 0, (m, l) = (−inf, 0).

  Pipeline: `stages`, mma.sync, and the threads' copy issue (copy_issue_cycles_per_byte from
  COPY_ISSUE_CYCLES_CONTIGUOUS / _PAGED, measured in the kernel's traces): a tile's copies are
  issued by the warps that then compute on it, in series (docs/decode.md).

Kernel 2, `fd_combine` (only when S > 1): grid (n_m, heads_kv, batch); CTA (m, hk, b).
    for k in 0 … S−1:  Load ML_partial (b, hk, m, k) rows_m × 2 fp32;
                       Load O_partial  (b, hk, m, k) rows_m × d fp32;
                       Alu running max/sum 3·rows_m; Exp 2·rows_m; Alu rescale-accumulate 3·rows_m·d
    Store O (b, hk, m) rows_m × d;  Store LSE (b, hk, m) rows_m × 1 fp32
  computing m = max_k m_k, l = Σ_k e^{m_k − m} l_k, O = Σ_k e^{m_k − m} l_k O_k / l, online over k.

Causal (seq_q > 1, speculative decoding; bottom-right aligned): token t attends key c iff
c ≤ t + L_b − seq_q. Tile m covers tokens t0 = ⌊m·bq / g⌋ … t1 = ⌊(m·bq + rows_m − 1) / g⌋;
blocks past t1's last key are skipped, blocks past t0's are masked (as common.kv_segments).

Paged KV (`page_size`) is applied to this schedule as to every algorithm's: see kvcache.py.
Tile sizes: block_q 16 when R ≤ 16, else 32 (n_m tiles of 32 rows: the decode kernel holds
all of a tile's rows in every warp, and 64 rows would need 256 fp32 accumulator registers per
thread at d = 128); block_kv 128 at d = 128 (256 at d ≤ 64, 64 above) and 2 stages, as
FlashAttention-2's split-KV kernel traits (flash_fwd_launch_template.h); 4 warps. On the H200
the project's decode kernel ran faster at 128 × 2 stages than at 64 × 3 stages in all 14
contiguous rows (benchmarks/results/decode_vs_torch_h200.txt). At d = 128, fp16: 4 KiB of Q +
2 × 64 KiB of K/V = 132 KiB of shared memory, one CTA per H100/H200 SM, so the split
heuristic's slots are the SMs (occupancy × SMs). Every warp holds all
block_q rows and the warps split each tile's keys, keeping their own (m, l, O): after the
block loop, `Alu merge warps` of 3 · (warps − 1) · block_q · d merges them, then
`Alu normalize`. Executed MMA work is block_q / R × the useful (4× for R = 4), not the 128× of
FA-2's one-row-per-query-head tiles.

Cascade (`flash-decoding-cascade`, with prefix_len > 0): kernel `fd_prefix` first, grid
(S_p, heads_kv · n_mp, groups), tiling 64 × block_kv, 2 stages, 4 warps each owning 16 rows
(FA-2 style, no warp merge): the packed rows of per_group = ⌊64 / R⌋ requests (or, when
R > 32, tile m of one request) form one 64-row Q tile; the CTA loads Q of each member request
(b, hk, m) (rows_m each), then the prefix blocks of its chunk (K_prefix, V_prefix at (hk, j)),
and stores per member request Store O_prefix (b, hk, m, k) rows_m × d fp32 and ML_prefix
(b, hk, m, k) rows_m × 2 fp32. S_p by the same heuristic over groups · heads_kv · n_mp tiles.
Then `fd_split` over the requests' own KV only (always storing partials), then `fd_combine`
whose CTA loops first over the S_p prefix partials (ML_prefix, O_prefix at (b, hk, m, k)) and
then over the S own partials, with the same body. The prefix's KV is read once per group of
per_group requests instead of once per request.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import IosimError
from ..machine import occupancy
from ..schedule import Alu, Exp, Kernel, Launch, Load, Mma, Pipeline, Schedule, Store, loop
from .common import STAT_BYTES, Segment, Tiling, ceil_div, check_fits, grid_index, pick_tiling
from .fa2 import fwd_registers, fwd_smem_bytes

PARTIAL_BYTES = 4        # O_k and (m_k, l_k) are written in fp32
MAX_SPLITS = 128         # FlashAttention-2's cap (flash_api.cpp)
FILL_FRACTION = 0.8      # no split when the tiles already fill 80% of the CTA slots (same source)
EFFICIENCY_FRACTION = 0.85   # smallest S within 85% of the best wave efficiency (same source)
COMBINE_REGISTERS = 64   # combine: fp32 accumulator row slice plus addresses
SPLIT_STAGES = 2         # K/V tile buffers per CTA (FA-2's traits; see the module docstring)
PREFIX_BLOCK_Q = 64      # cascade prefix tile: FlashAttention-2's split-KV kBlockM, warps own rows
# Cycles a thread of fd_split spends per 16-byte cp.async of a tile's K/V copies (address
# arithmetic, the paged cache's page shuffle, the copy's issue) with one warp per SM
# sub-partition, contiguous and paged cache: the median over the committed H200 traces
# (tests/data/traces/flash-decoding_*.json, clock64 stamps; iosim.kernels.decode.
# copy_issue_cycles computes them; tests/test_decode_copy_issue.py checks these against them).
# The split kernel's threads issue a tile's copies and then compute on it, so this time is in
# series with its compute (Pipeline.copy_issue_cycles_per_byte; docs/decode.md).
COPY_ISSUE_CYCLES_CONTIGUOUS = 26.5
COPY_ISSUE_CYCLES_PAGED = 45.5
COPY_BYTES = 16          # one cp.async


def default_block_kv(d: int) -> int:
    """128 keys per tile at d = 128 (256 at d ≤ 64, 64 above): FlashAttention-2's split-KV
    kernel traits, and the faster of the two tilings measured for the decode kernel."""
    return 256 if d <= 64 else (128 if d <= 128 else 64)


def default_block_q(rows: int) -> int:
    """16 packed rows (one MMA row tile) if they suffice, else 32 (more tiles of 32 rows)."""
    return 16 if rows <= 16 else 32


def candidates(d: int, bq: int) -> tuple:
    bc = default_block_kv(d)
    return (Tiling(bq, bc, SPLIT_STAGES, 4), Tiling(bq, bc, 2, 4), Tiling(bq, 32, 2, 4),
            Tiling(16, 32, 2, 4))


def prefix_candidates(d: int) -> tuple:
    bc = default_block_kv(d)
    return (Tiling(PREFIX_BLOCK_Q, bc, SPLIT_STAGES, 4), Tiling(PREFIX_BLOCK_Q, bc, 2, 4),
            Tiling(PREFIX_BLOCK_Q, 32, 2, 4))


def warp_merge_ops(t: Tiling, d: int) -> int:
    """The split kernel's warps split each K/V tile's keys (each warp holds all block_q rows),
    keep their own (m, l, O) and merge them once at the end through shared memory: 3 ops per
    O element per warp beyond the first."""
    return 3 * (t.warps - 1) * t.block_q * d


def tiling(problem, gpu, prefix: bool = False, **overrides) -> Tiling:
    d, eb = problem.head_dim, problem.elem_bytes
    rows = problem.seq_q * problem.group_size
    cands = prefix_candidates(d) if prefix else candidates(d, default_block_q(rows))

    def fits(t: Tiling):
        check_fits(gpu, f"flash-decoding tiling {t.describe()} at d={d}",
                   fwd_smem_bytes(t, d, eb), fwd_registers(t, d), t.threads)
    return pick_tiling(cands, fits, overrides)


def num_splits_heuristic(tiles: int, slots: int, n_blocks: int, max_splits: int = MAX_SPLITS) -> int:
    """FlashAttention-2's rule (see the module docstring)."""
    if tiles >= FILL_FRACTION * slots:
        return 1
    max_splits = min(max_splits, slots, n_blocks)

    def eligible(s: int) -> bool:
        return s == 1 or ceil_div(n_blocks, s) != ceil_div(n_blocks, s - 1)

    eff = {}
    for s in range(1, max_splits + 1):
        if eligible(s):
            waves = tiles * s / slots
            eff[s] = waves / -(-waves // 1)
    best = max(eff.values())
    return next(s for s in sorted(eff) if eff[s] >= EFFICIENCY_FRACTION * best)


@dataclass(frozen=True)
class KvRange:
    """One run of KV blocks a request visits: its tensors, coordinate head, block count and
    the rows of its last block."""

    k: str
    v: str
    head: tuple       # coordinate before the block index
    n_blocks: int
    tail_rows: int


def kv_ranges(problem, b: int, hk: int, bc: int, own_only: bool = False) -> list:
    """The request's KV block ranges, prefix first (see the module docstring); own_only: the
    request's own tokens alone (the cascade reads the prefix in a kernel of its own)."""
    out = []
    p = problem.prefix_len
    if own_only:
        own = problem.kv_lengths[b] - p
        n = ceil_div(own, bc)
        return [KvRange("K", "V", (b, hk), n, own - (n - 1) * bc)] if own else []
    own = problem.kv_lengths[b] - p
    if p:
        out.append(KvRange("K_prefix", "V_prefix", (hk,), ceil_div(p, bc), p - (ceil_div(p, bc) - 1) * bc))
    if own:
        out.append(KvRange("K", "V", (b, hk), ceil_div(own, bc), own - (ceil_div(own, bc) - 1) * bc))
    return out


def blocks_of(problem, b: int, bc: int, own_only: bool = False) -> int:
    return sum(r.n_blocks for r in kv_ranges(problem, b, 0, bc, own_only))


@dataclass(frozen=True)
class Plan:
    """Everything the kernels' shapes depend on."""

    rows: int          # R = seq_q · g packed rows per (b, hk)
    n_m: int
    n_max: int         # blocks of the longest request
    splits: int
    per_split: int     # bps
    own_only: bool = False     # cascade: the split kernel reads the requests' own KV only


def plan(problem, gpu, t: Tiling, splits: int | None, own_only: bool = False) -> Plan:
    rows = problem.seq_q * problem.group_size
    n_m = ceil_div(rows, t.block_q)
    n_max = max(blocks_of(problem, b, t.block_kv, own_only) for b in range(problem.batch))
    if n_max == 0:     # cascade, every request's KV is the prefix: nothing of its own
        return Plan(rows, n_m, 0, 0, 1, own_only)
    if splits is None:
        occ = occupancy(gpu, Launch((1, 1, 1), t.threads, fwd_smem_bytes(t, problem.head_dim,
                                    problem.elem_bytes), fwd_registers(t, problem.head_dim)))
        splits = num_splits_heuristic(problem.batch * problem.heads_kv * n_m,
                                      gpu.sm_count * max(occ, 1), n_max)
    elif not isinstance(splits, int) or isinstance(splits, bool) or splits < 1:
        raise IosimError(f"splits must be a positive integer, got {splits!r}")
    elif splits > n_max:
        raise IosimError(f"splits {splits} is more than the {n_max} KV blocks of {t.block_kv} "
                         f"tokens")
    bps = ceil_div(n_max, splits)
    return Plan(rows, n_m, n_max, ceil_div(n_max, bps), bps, own_only)


def _mask_limits(problem, b: int, m: int, t: Tiling, rows_m: int, n_blocks: int) -> tuple:
    """(j_full, j_stop) of tile m against request b's single KV range (causal, no prefix)."""
    length = problem.kv_lengths[b]
    if not problem.causal:
        return n_blocks, n_blocks
    g, bc = problem.group_size, t.block_kv
    t0, t1 = (m * t.block_q) // g, (m * t.block_q + rows_m - 1) // g
    off = length - problem.seq_q
    last_col, first_col = t1 + off, t0 + off
    j_stop = 0 if last_col < 0 else min(n_blocks, last_col // bc + 1)
    j_full = 0 if first_col + 1 < 0 else min(n_blocks, (first_col + 1) // bc)
    if j_full == n_blocks - 1 and length - 1 <= first_col:
        j_full = n_blocks
    return min(j_full, j_stop), j_stop


def _segments(lo: int, hi: int, j_full: int, j_stop: int, n: int, ragged: bool) -> list:
    """Blocks [lo, hi) cut into uniform runs: full, causal-partial, the ragged last block."""
    out = []
    for a, z, masked in ((lo, min(hi, j_full), False), (max(lo, j_full), min(hi, j_stop), True)):
        if z <= a:
            continue
        if ragged and z == n:
            if z - 1 > a:
                out.append(Segment(a, z - 1, masked, False))
            out.append(Segment(z - 1, z, masked, True))
        else:
            out.append(Segment(a, z, masked, False))
    return out


def block_body(problem, t: Tiling, k: str, v: str, coord: tuple, rows_kv: int,
               masked: bool) -> tuple:
    d, eb, br, bc = problem.head_dim, problem.elem_bytes, t.block_q, t.block_kv
    body = [Load(k, coord, rows_kv, d, rows_kv * d * eb),
            Load(v, coord, rows_kv, d, rows_kv * d * eb),
            Mma("S=QK^T", br, bc, d)]
    if masked:
        body.append(Alu("mask", br * bc))
    body += [Alu("softmax", 3 * br * bc), Exp("exp", br * bc + br), Alu("rescale", br * d),
             Mma("O+=PV", br, d, bc)]
    return tuple(body)


def split_program(problem, t: Tiling, pl: Plan, b: int, hk: int, m: int, k: int) -> tuple:
    d, eb = problem.head_dim, problem.elem_bytes
    rows_m = min(t.block_q, pl.rows - m * t.block_q)
    lo, hi = k * pl.per_split, (k + 1) * pl.per_split
    body, base = [], 0
    for r in kv_ranges(problem, b, hk, t.block_kv, pl.own_only):
        a, z = max(lo - base, 0), min(hi - base, r.n_blocks)
        if z > a:
            j_full, j_stop = (_mask_limits(problem, b, m, t, rows_m, r.n_blocks)
                              if r.k == "K" and not problem.prefix_len else (r.n_blocks,) * 2)
            ragged = r.tail_rows < t.block_kv
            for seg in _segments(a, z, j_full, j_stop, r.n_blocks, ragged):
                rows_kv = r.tail_rows if seg.ragged else t.block_kv
                body += loop("j", seg.start, seg.stop,
                             block_body(problem, t, r.k, r.v, r.head + ("j",), rows_kv,
                                        seg.masked or seg.ragged))
        base += r.n_blocks
    prog = [Load("Q", (b, hk, m), rows_m, d, rows_m * d * eb)] if body else []
    prog += body
    if body:
        merge = warp_merge_ops(t, d)
        prog += [Alu("merge warps", merge)] if merge else []
        prog.append(Alu("normalize", t.block_q * d))
    if pl.splits > 1 or pl.own_only:
        prog += [Store("O_partial", (b, hk, m, k), rows_m, d, rows_m * d * PARTIAL_BYTES),
                 Store("ML_partial", (b, hk, m, k), rows_m, 2, rows_m * 2 * PARTIAL_BYTES)]
    else:
        prog += [Store("O", (b, hk, m), rows_m, d, rows_m * d * eb),
                 Store("LSE", (b, hk, m), rows_m, 1, rows_m * STAT_BYTES)]
    return tuple(prog)


def _combine_body(d: int, rows_m: int, ml: str, o: str, coord: tuple) -> tuple:
    return (Load(ml, coord, rows_m, 2, rows_m * 2 * PARTIAL_BYTES),
            Load(o, coord, rows_m, d, rows_m * d * PARTIAL_BYTES),
            Alu("running max/sum", 3 * rows_m),
            Exp("exp", 2 * rows_m),
            Alu("rescale-accumulate", 3 * rows_m * d))


def combine_program(problem, pl: Plan, t: Tiling, b: int, hk: int, m: int,
                    prefix_splits: int = 0) -> tuple:
    d, eb = problem.head_dim, problem.elem_bytes
    rows_m = min(t.block_q, pl.rows - m * t.block_q)
    body = _combine_body(d, rows_m, "ML_partial", "O_partial", (b, hk, m, "k"))
    pre = _combine_body(d, rows_m, "ML_prefix", "O_prefix", (b, hk, m, "k"))
    return (*loop("k", 0, prefix_splits, pre),
            *loop("k", 0, pl.splits, body),
            Store("O", (b, hk, m), rows_m, d, rows_m * d * eb),
            Store("LSE", (b, hk, m), rows_m, 1, rows_m * STAT_BYTES))


def _batch_classes(problem) -> list:
    """Requests grouped by KV length (their programs have equal totals): [(first b, count)]."""
    if problem.seq_kv_list is None:
        return [(0, problem.batch)]
    seen: dict = {}
    for b, n in enumerate(problem.kv_lengths):
        seen.setdefault(n, [b, 0])[1] += 1
    return [tuple(v) for v in seen.values()]


def _group_of_request(problem, groups: list):
    """request b → index into `groups` (_batch_classes) of its KV-length group."""
    if len(groups) == 1:
        return lambda b: 0
    index = {problem.kv_lengths[b]: i for i, (b, _count) in enumerate(groups)}
    of = [index[n] for n in problem.kv_lengths]
    return of.__getitem__


def split_kernel(problem, t: Tiling, pl: Plan) -> Kernel:
    hk_n, d, eb = problem.heads_kv, problem.head_dim, problem.elem_bytes
    grid = (pl.splits, hk_n * pl.n_m, problem.batch)

    def program(cta: int) -> tuple:
        k, y, b = grid_index(cta, grid)
        return split_program(problem, t, pl, b, y // pl.n_m, y % pl.n_m, k)

    groups = _batch_classes(problem)
    classes = tuple((k + grid[0] * (m + grid[1] * b), hk_n * count)
                    for b, count in groups
                    for m in range(pl.n_m) for k in range(pl.splits))
    # a CTA's program shape: its split k, its Q tile m and its request's KV length (the KV
    # head only moves coordinates); classes enumerate (length group, m, k) in that order
    group_of = _group_of_request(problem, groups)

    def class_of(cta: int) -> int:
        k, y, b = grid_index(cta, grid)
        return (group_of(b) * pl.n_m + y % pl.n_m) * pl.splits + k
    period = grid[0] * grid[1] if len(groups) == 1 else grid[0] * grid[1] * grid[2]
    copy_cycles = copy_issue_cycles_per_byte(problem, t)
    return Kernel(name="fd_split", launch=Launch(grid, t.threads, fwd_smem_bytes(t, d, eb),
                                                 fwd_registers(t, d)),
                  program=program, classes=classes, class_of=class_of, class_period=period,
                  cta_coord=lambda cta: grid_index(cta, grid),
                  pipeline=Pipeline(stages=t.stages, mma_instruction="mma_sync",
                                    copy_issue_cycles_per_byte=copy_cycles),
                  coord_names=("split", "kv_head_x_q_tile", "batch"))


def copy_issue_cycles_per_byte(problem, t: Tiling) -> float:
    """fd_split's copy issue, in cycles per byte of its loads (Pipeline field): the measured
    cycles per 16-byte copy per thread over the bytes the CTA's threads copy at once."""
    cycles = COPY_ISSUE_CYCLES_PAGED if problem.page_size else COPY_ISSUE_CYCLES_CONTIGUOUS
    return cycles / (COPY_BYTES * t.threads)


def combine_kernel(problem, t: Tiling, pl: Plan, prefix_splits: int = 0) -> Kernel:
    grid = (pl.n_m, problem.heads_kv, problem.batch)

    def program(cta: int) -> tuple:
        m, hk, b = grid_index(cta, grid)
        return combine_program(problem, pl, t, b, hk, m, prefix_splits)

    classes = tuple((m, problem.batch * problem.heads_kv) for m in range(pl.n_m))
    return Kernel(name="fd_combine", launch=Launch(grid, 128, 0, COMBINE_REGISTERS),
                  program=program, classes=classes, class_of=lambda cta: cta % pl.n_m,
                  class_period=pl.n_m, cta_coord=lambda cta: grid_index(cta, grid),
                  pipeline=Pipeline(stages=1), coord_names=("q_tile", "kv_head", "batch"))


# ---- cascade: the shared prefix read once per group of requests ---------------------------
@dataclass(frozen=True)
class PrefixPlan:
    per_group: int     # requests whose packed rows share one prefix Q tile
    groups: int
    n_m: int           # prefix Q tiles per group (> 1 only when one request fills a tile)
    n_blocks: int
    splits: int
    per_split: int


def prefix_plan(problem, gpu, t: Tiling, splits: int | None) -> PrefixPlan:
    rows = problem.seq_q * problem.group_size
    per_group = max(1, t.block_q // rows)
    groups = ceil_div(problem.batch, per_group)
    n_m = 1 if per_group > 1 else ceil_div(rows, t.block_q)
    n_blocks = ceil_div(problem.prefix_len, t.block_kv)
    if splits is None:
        occ = occupancy(gpu, Launch((1, 1, 1), t.threads, fwd_smem_bytes(t, problem.head_dim,
                                    problem.elem_bytes), fwd_registers(t, problem.head_dim)))
        splits = num_splits_heuristic(groups * problem.heads_kv * n_m,
                                      gpu.sm_count * max(occ, 1), n_blocks)
    splits = min(splits, n_blocks)
    bps = ceil_div(n_blocks, splits)
    return PrefixPlan(per_group, groups, n_m, n_blocks, ceil_div(n_blocks, bps), bps)


def prefix_program(problem, t: Tiling, pp: PrefixPlan, grp: int, hk: int, m: int, k: int) -> tuple:
    """One prefix tile: the packed rows of requests grp·per_group … (or tile m of one request)
    against prefix blocks of chunk k; one (O, m, l) partial stored per request slice."""
    d, eb, bc = problem.head_dim, problem.elem_bytes, t.block_kv
    rows = problem.seq_q * problem.group_size
    members = list(range(grp * pp.per_group, min(problem.batch, (grp + 1) * pp.per_group)))
    slices = [(b, m, min(t.block_q, rows - m * t.block_q)) for b in members]
    lo, hi = k * pp.per_split, min(pp.n_blocks, (k + 1) * pp.per_split)
    tail = problem.prefix_len - (pp.n_blocks - 1) * bc
    prog = [Load("Q", (b, hk, mm), r, d, r * d * eb) for b, mm, r in slices]
    ragged = tail < bc
    for seg in _segments(lo, hi, pp.n_blocks, pp.n_blocks, pp.n_blocks, ragged):
        rows_kv = tail if seg.ragged else bc
        prog += loop("j", seg.start, seg.stop,
                     block_body(problem, t, "K_prefix", "V_prefix", (hk, "j"), rows_kv,
                                seg.ragged))
    prog.append(Alu("normalize", t.block_q * d))
    for b, mm, r in slices:
        prog += [Store("O_prefix", (b, hk, mm, k), r, d, r * d * PARTIAL_BYTES),
                 Store("ML_prefix", (b, hk, mm, k), r, 2, r * 2 * PARTIAL_BYTES)]
    return tuple(prog)


def prefix_kernel(problem, t: Tiling, pp: PrefixPlan) -> Kernel:
    hk_n, d, eb = problem.heads_kv, problem.head_dim, problem.elem_bytes
    grid = (pp.splits, hk_n * pp.n_m, pp.groups)

    def program(cta: int) -> tuple:
        k, y, grp = grid_index(cta, grid)
        return prefix_program(problem, t, pp, grp, y // pp.n_m, y % pp.n_m, k)

    last = problem.batch - (pp.groups - 1) * pp.per_group      # requests in the last group
    groups = [(0, pp.groups - (1 if last != pp.per_group else 0))]
    if last != pp.per_group:
        groups.append((pp.groups - 1, 1))
    groups = [(g0, count) for g0, count in groups if count]
    classes = tuple((k + grid[0] * (m + grid[1] * g0), hk_n * count)
                    for g0, count in groups
                    for m in range(pp.n_m) for k in range(pp.splits))
    short_last = last != pp.per_group       # the last group has fewer requests: its own class

    def class_of(cta: int) -> int:
        k, y, grp = grid_index(cta, grid)
        g = 1 if short_last and grp == pp.groups - 1 and len(groups) == 2 else 0
        return (g * pp.n_m + y % pp.n_m) * pp.splits + k
    return Kernel(name="fd_prefix", launch=Launch(grid, t.threads, fwd_smem_bytes(t, d, eb),
                                                  fwd_registers(t, d)),
                  program=program, classes=classes, class_of=class_of,
                  class_period=grid[0] * grid[1] * grid[2],
                  cta_coord=lambda cta: grid_index(cta, grid),
                  pipeline=Pipeline(stages=t.stages, mma_instruction="mma_sync"),
                  coord_names=("split", "kv_head_x_q_tile", "request_group"))


def build_cascade(problem, gpu, fwd_overrides: dict, bwd_overrides: dict,
                  splits: int | None = None) -> Schedule:
    """Cascade (shared-prefix) decoding: kernel fd_prefix attends the prefix for a group of
    requests per Q tile, reading its KV once per group; fd_split the requests' own KV;
    fd_combine merges the prefix partials and the own partials with the same equations."""
    if not problem.prefix_len:
        return build(problem, gpu, fwd_overrides, bwd_overrides, splits)
    if problem.direction != "fwd":
        raise IosimError("flash-decoding is a forward (inference) schedule; use --direction fwd")
    t = tiling(problem, gpu, **fwd_overrides)
    tp = tiling(problem, gpu, prefix=True, **fwd_overrides)
    pp = prefix_plan(problem, gpu, tp, None)
    pl = plan(problem, gpu, t, splits, own_only=True)
    kernels = [prefix_kernel(problem, tp, pp)]
    if pl.n_max:
        kernels.append(split_kernel(problem, t, pl))
    kernels.append(combine_kernel(problem, t, pl, prefix_splits=pp.splits))
    notes = (f"cascade: the {problem.prefix_len}-token shared prefix read once per group of "
             f"{pp.per_group} request(s) ({pp.groups} group(s), {pp.splits} split(s)); own KV in "
             f"{pl.splits} split(s) of {pl.per_split} block(s) of {t.block_kv}",)
    return Schedule("flash-decoding-cascade", problem, {"fwd": t, "fwd_prefix": tp},
                    tuple(kernels), notes=notes)


def build(problem, gpu, fwd_overrides: dict, bwd_overrides: dict, splits: int | None = None
          ) -> Schedule:
    if problem.direction != "fwd":
        raise IosimError("flash-decoding is a forward (inference) schedule; use --direction fwd")
    t = tiling(problem, gpu, **fwd_overrides)
    pl = plan(problem, gpu, t, splits)
    kernels = [split_kernel(problem, t, pl)]
    if pl.splits > 1:
        kernels.append(combine_kernel(problem, t, pl))
    notes = (f"split-KV: {pl.splits} split(s) of {pl.per_split} KV block(s) of {t.block_kv}; "
             f"{problem.group_size} query head(s) × {problem.seq_q} token(s) packed into "
             f"{pl.n_m} Q tile(s) of {t.block_q} rows",)
    return Schedule("flash-decoding", problem, {"fwd": t}, tuple(kernels), notes=notes)


def outside_design_note(schedule) -> str | None:
    """A note when a prefill schedule (one query row block per Q tile, per query head) runs a
    decode-shaped problem: most of its Q tile's rows are padding."""
    p = schedule.problem
    if schedule.algorithm.startswith("flash-decoding") or "fwd" not in schedule.tiling:
        return None
    bq = getattr(schedule.tiling["fwd"], "block_q", None)
    if not bq or p.seq_q * 2 > bq:
        return None
    return (f"outside what the {schedule.algorithm} schedule was made for: {p.seq_q} query "
            f"row(s) in a {bq}-row Q tile per query head (tensor-core work ≈ {bq // p.seq_q}× "
            f"the useful); each query head's CTA reads its KV head's whole cache (each KV head "
            f"{p.group_size}× per Q tile row block); flash-decoding packs the {p.group_size} query head(s) of a KV head into "
            f"one tile and splits the KV over the SMs")
