"""The KV cache as serving systems store it: pages through a block table, per-request lengths,
a shared prompt prefix.

Paging (`page_size` P tokens per page, PagedAttention's layout: a pool of pages, each holding
P positions × heads_kv × d for K and the same for V; a request's block table lists its pages).
A kernel finds each page through the table, so a K or V tile of block_kv rows is loaded page
by page: `paginate` rewrites every forward Load of K, V, K_prefix, V_prefix at coordinate
(..., j) of rows r into ⌈r / P⌉ loads at (..., p, j), p = 0, 1, ... the page within the tile,
each of min(P, r − p·P) rows (P < block_kv). With P ≥ block_kv a tile lies inside one page and
is loaded whole. The L2 model keys tiles by (tensor, coordinate), so it sees one tile per page
read: page-granular accesses. The decode split kernel (`fd_split`) also reads the block table:
before each own K tile, one Load of `block_table` at (b, j) of 4 bytes per page the tile touches
(the kernel reads those entries once per tile, for K and V). The kernel reads them one tile
ahead, right after tile j − 1's copies were issued, so when tile j is issued its entries are
in registers: nothing waits for the load, and it is not `indirect` (an indirect load holds the
copies after it until it lands, which is what the first kernel, reading the table right before
each tile's copies, did: a table round trip in series with every tile of the stream). The
schedule keeps the load in tile j's place (the trace's load order); issuing it with tile j's
copies rather than one ring iteration earlier changes no wait. Not in the schedule: the chunk's
first own tile does wait for its entries (one round trip at the CTA's start; the loop bodies
are uniform, so its first iteration cannot differ). Pages of a shared prefix carry no batch
index (K_prefix at (hk, …)): every request's table points at the same pages, and the L2 model
sees the reuse.

What a page layout changes. `block_table` places pages in a pool: contiguous (a request's pages
in order, requests back to back), shuffled (a seeded permutation of the pool: a long-running
server's free list), fragmented (the allocator of continuous batching: every request grows by one
token per decode step and takes the next free page when its last one fills, so the requests'
pages interleave). The simulator's L2 is a fully associative LRU keyed by tile identity, so a
one-to-one relabelling of pages changes no hit or miss: in this model the layout changes the
memory footprint statistics below, not the time. Page size itself costs (i) more, smaller loads
when P < block_kv (the per-load latency the simulator charges), (ii) the unused tail
of every request's last page (memory, not traffic: kernels read valid rows only); a paged
cache's copy loop costs fd_split's threads more issue time per copy than a contiguous one
(flash_decoding.COPY_ISSUE_CYCLES_PAGED, set on its Pipeline where the schedule is built).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from ..errors import IosimError
from ..schedule import Kernel, Load, Loop, Schedule

PAGED_TENSORS = ("K", "V", "K_prefix", "V_prefix")
TABLE_TENSOR = "block_table"
TABLE_ENTRY_BYTES = 4   # int32 page ids (PagedAttention's block tables)
TABLE_READERS = ("fd_split",)   # kernels whose program reads the block table (decode.cu)
PAGED_ALGORITHMS = ("fa1", "fa2", "fa3", "flash-decoding", "flash-decoding-cascade")
SHUFFLE_SEED = 0      # the shuffled layout's permutation seed (determinism)


def check_supported(problem, algorithm: str) -> None:
    """Refuse KV-cache features an algorithm's schedule does not model, in one line."""
    if not algorithm.startswith("flash-decoding") and (problem.seq_kv_list is not None or problem.prefix_len):
        raise IosimError(f"per-request KV lengths (seq-kv-list) and shared prefixes (prefix-len) "
                         f"are modelled by flash-decoding; {algorithm} gives every request "
                         f"seq-kv keys of its own")
    if problem.page_size and algorithm not in PAGED_ALGORITHMS:
        raise IosimError(f"paged KV (page-size) is modelled for {', '.join(PAGED_ALGORITHMS)}; "
                         f"{algorithm} reads K through GEMM tiles, not a KV cache")
    if problem.page_size and problem.direction != "fwd":
        raise IosimError("paged KV (page-size) is modelled for the forward pass (inference)")


# ---- tile loads split at page boundaries -------------------------------------------------
def _page_split(op: Load, page: int) -> tuple:
    if op.tensor not in PAGED_TENSORS or op.rows <= page:
        return (op,)
    per_row = op.bytes // op.rows
    head, j = op.coord[:-1], op.coord[-1]
    return tuple(Load(op.tensor, head + (p, j), min(page, op.rows - p * page), op.cols,
                      min(page, op.rows - p * page) * per_row)
                 for p in range(-(-op.rows // page)))


def _table_read(op: Load, page: int) -> Load:
    """The block-table entries of one own K tile: 4 bytes per page the tile touches, at (b, j)
    (per request: every KV head's CTA reads the same entries, and the L2 model sees that).
    Not indirect: the kernel reads them one tile ahead (module docstring)."""
    pages = -(-op.rows // page)
    return Load(TABLE_TENSOR, (op.coord[0], op.coord[-1]), pages, 1, pages * TABLE_ENTRY_BYTES)


@lru_cache(maxsize=65536)
def paged_program(program: tuple, page: int, table_reads: bool = False) -> tuple:
    out = []
    for item in program:
        if isinstance(item, Loop):
            out.append(Loop(item.var, item.start, item.count,
                            paged_program(item.body, page, table_reads), item.step))
        elif isinstance(item, Load):
            if table_reads and item.tensor == "K":
                out.append(_table_read(item, page))
            out.extend(_page_split(item, page))
        else:
            out.append(item)
    return tuple(out)


def paginate(schedule: Schedule) -> Schedule:
    """The schedule with its KV tile loads split at page boundaries (module docstring)."""
    problem = schedule.problem
    page = problem.page_size
    bc = schedule.tiling["fwd"].block_kv
    if page % bc and bc % page:
        raise IosimError(f"page-size {page} and block-kv {bc}: one must divide the other "
                         f"(a tile would straddle pages unevenly)")
    # page splitting cuts every K/V tile alike, so the CTA classes stay those of the kernel
    kernels = tuple(Kernel(name=k.name, launch=k.launch, classes=k.classes, cta_coord=k.cta_coord,
                           class_of=k.class_of, class_period=k.class_period,
                           pipeline=k.pipeline, coord_names=k.coord_names,
                           program=(lambda cta, f=k.program, t=k.name in TABLE_READERS:
                                    paged_program(f(cta), page, t)))
                    for k in schedule.kernels)
    stats = footprint(problem)
    note = (f"paged KV: pages of {page} tokens ({problem.page_layout} layout); "
            + (f"each {bc}-row K/V tile loaded as {bc // page} page loads; " if page < bc else
               "each K/V tile inside one page; ")
            + f"{stats.pages} pages, {stats.unused_bytes:,} B unused in last pages, "
            f"{stats.runs} physically contiguous runs")
    return Schedule(schedule.algorithm, problem, schedule.tiling, kernels,
                    notes=tuple(schedule.notes) + (note,))


# ---- block tables ------------------------------------------------------------------------
def block_table(problem) -> list:
    """Physical page of every logical page: one list per request (its prefix pages first, the
    same physical pages for every request), by `problem.page_layout`."""
    P = problem.page_size
    if not P:
        raise IosimError("block tables need a page size")
    pre = -(-problem.prefix_len // P) if problem.prefix_len else 0
    # a shared prefix is page-aligned in serving systems; a partial last prefix page is the
    # request's own from there on (copy-on-write), modelled as one more private page
    own = [-(-(n - pre * P) // P) if n > pre * P else 0 for n in problem.kv_lengths]
    layout = problem.page_layout
    total = pre + sum(own)
    if layout == "fragmented":   # grow all requests one token per step, next free page
        order, cursor, next_free = [[] for _ in own], 0, pre
        lens = [n - pre * P for n in problem.kv_lengths]
        for step in range(max(lens) if lens else 0):
            for b, n in enumerate(lens):
                if step < n and step % P == 0:
                    order[b].append(next_free)
                    next_free += 1
        return [list(range(pre)) + pages for pages in order]
    tables, nxt = [], pre
    for n in own:
        tables.append(list(range(pre)) + list(range(nxt, nxt + n)))
        nxt += n
    if layout == "shuffled":
        perm = list(range(total))
        random.Random(SHUFFLE_SEED).shuffle(perm)
        tables = [[perm[p] for p in t] for t in tables]
    return tables


@dataclass(frozen=True)
class Footprint:
    pages: int            # pages in use (the prefix's once)
    bytes: int            # K + V bytes the pages occupy
    unused_bytes: int     # bytes in the unused tails of last pages
    runs: int             # maximal runs of physically consecutive pages over all tables


def footprint(problem) -> Footprint:
    P, hk, d, eb = problem.page_size, problem.heads_kv, problem.head_dim, problem.elem_bytes
    tables = block_table(problem)
    pages = len({p for t in tables for p in t})
    page_bytes = 2 * P * hk * d * eb
    used = 2 * hk * d * eb * problem.kv_tokens_stored()
    runs = sum(1 + sum(1 for a, b in zip(t, t[1:]) if b != a + 1) for t in tables if t)
    return Footprint(pages, pages * page_bytes, pages * page_bytes - used, runs)
