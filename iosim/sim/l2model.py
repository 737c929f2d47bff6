"""Fast mode, step 3: the L2, replayed on a sample of the tile accesses.

The accesses every CTA makes are placed in time from the start and end of each of its segments
(fluid.py): inside a segment an op's time is proportional to its position among the segment's
expanded ops; buffered loads are moved `stages − 1` iterations earlier, as they are issued. They run
through the same tile LRU, write-allocate / write-back rules as exact mode (memory.py), in time
order.

Sampling, so that the cost does not grow with N²:
  - set sampling: a tile (tensor, *coord) is simulated iff (coord[-1] + crc32(tensor,
    coord[:-1])) mod R == 0, in an LRU of capacity C_eff / R. The rule depends only on the
    tile, so every access to a sampled tile, from any kernel, is simulated; for the loop over
    the last coordinate the sampled iterations are enumerated arithmetically. R is the
    smallest ratio that keeps the sampled accesses within `budget`, but at most
    C_eff / (32 × largest tile) so that the sampled cache still holds dozens of tiles.
    R = 1 (every access) whenever the problem is small enough.
  - CTA sampling: if R at its cap still gives too many accesses, only the first CTAs of each
    kernel in launch order are replayed (all kernels keep the same fraction), and the last
    partial wave after two full waves; loads count only inside their cohort's window of time
    (fast.SamplingPlan, fast._l2_sample), where the LRU has seen what the full trace would.
Scaling back: per kernel and tensor, DRAM read bytes = load bytes × sampled miss ratio (the
last partial wave's loads by its own); write-backs and the final flush are scaled by stored
bytes ÷ sampled stored bytes. The stored bytes until a kernel's first write-back are its
store fill (fast.StoreFill).

An access is a tuple (time_s, tile key, bytes, op, stream): op 0 load, 1 store, 2 reduce
(atomic accumulate); stream indexes AccessSampler.streams, the (kernel, tensor, cohort) it
counts for (cohort: BODY, TAIL or WARMUP), and the CTA for a kernel whose loads are counted per
CTA too (KernelCounts.cta_loads: wait_cohorts.WaitCohorts). Accesses are replayed in time order,
ties in the order they were sampled.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from ..schedule import Loop
from .memory import TileLru
from .pipeline import issue_lead

TILES_PER_SAMPLED_CACHE = 32
LOAD, STORE, REDUCE = 0, 1, 2
BODY, TAIL, WARMUP = 0, 1, 2     # Stream.cohort: the kernel's CTAs before its last partial
                                 # wave, that wave, CTAs replayed only to fill the LRU


class _Salt(dict):
    def __missing__(self, prefix):
        v = self[prefix] = zlib.crc32(repr(prefix).encode())
        return v


def count_ops(items, memo: dict) -> int:
    """Expanded ops of a program (loops unrolled), memoised by identity."""
    return _ticks(items, memo)


def _ticks(items, memo: dict) -> int:
    key = id(items)
    hit = memo.get(key)
    if hit is not None and hit[0] is items:
        return hit[1]
    n = 0
    for it in items:
        n += it.count * _ticks(it.body, memo) if isinstance(it, Loop) else 1
    memo[key] = (items, n)
    return n


@dataclass(frozen=True)
class Stream:
    """What a sampled access counts for."""

    kernel: int
    tensor: str
    cohort: int      # BODY, TAIL (the kernel's last partial wave) or WARMUP
    cta: int = -1    # the CTA, for kernels whose loads are counted per CTA (else -1)


def _op_code(op) -> int:
    return LOAD if op.kind == "load" else (REDUCE if op.reduce else STORE)


@dataclass(frozen=True)
class Site:
    """A memory op of an innermost loop body, as its class walks it: its index in the body,
    op code, iterations issued early, and how its tile key moves with the loop variable
    (MOVES_LAST: along the last coordinate; MOVES_INNER: along coordinate `at`, another one;
    MOVES_ENV: otherwise, keys bound from the environment)."""

    index: int
    code: int
    ahead: int
    moves: int
    at: int = -1
    literal: bool = False    # every coordinate but the loop variable's is a number


MOVES_LAST, MOVES_INNER, MOVES_ENV = 0, 1, 2
MEMORY_LEAF = "memory"


@dataclass(frozen=True)
class LoopShape:
    """A loop of a class's program: expanded ops per iteration, and either the shapes of its
    body's items (a loop that holds loops) or the sites of its memory ops (innermost)."""

    body_ticks: int
    children: tuple | None
    sites: tuple


def _site(idx: int, op, var: str, lead: int) -> Site:
    coord = op.coord
    if coord and coord[-1] == var and var not in coord[:-1]:
        moves, at = MOVES_LAST, -1
    elif coord and coord.count(var) == 1:
        moves, at = MOVES_INNER, coord.index(var)
    else:
        moves, at = MOVES_ENV, -1
    literal = all(not isinstance(c, str) for i, c in enumerate(coord)
                  if i != (len(coord) - 1 if moves == MOVES_LAST else at))
    return Site(idx, _op_code(op), lead if op.kind == "load" else 0, moves, at,
                literal and moves != MOVES_ENV)


def compile_shape(items, stages: int, memo: dict) -> tuple:
    """The shape of a program's items (one entry per item): None for an op that touches no
    memory, MEMORY_LEAF for a load or store, a LoopShape for a loop. CTAs of one class share
    it (schedule.Kernel: same ops and loop counts, other coordinates), so it is built once
    per class and the CTA's own ops supply the coordinates."""
    out = []
    for it in items:
        if not isinstance(it, Loop):
            out.append(MEMORY_LEAF if it.kind in ("load", "store") else None)
        elif any(isinstance(b, Loop) for b in it.body):
            out.append(LoopShape(_ticks(it.body, memo), compile_shape(it.body, stages, memo),
                                 ()))
        else:
            lead = issue_lead(stages)
            out.append(LoopShape(_ticks(it.body, memo), None,
                                 tuple(_site(i, op, it.var, lead) for i, op in enumerate(it.body)
                                       if op.kind in ("load", "store"))))
    return tuple(out)


_INNERMOST, _PLAIN, _NESTED = "innermost", "plain", "nested"


def _plan(shape: tuple) -> tuple:
    """How AccessSampler.walk_cta walks a segment of this shape: (_INNERMOST, shape, its
    LoopShape) for a lone innermost loop, (_PLAIN, shape, positions of its loads and stores)
    for plain ops, else (_NESTED, shape, None): _walk."""
    if len(shape) == 1 and isinstance(shape[0], LoopShape) and shape[0].children is None:
        return _INNERMOST, shape, shape[0]
    if not any(isinstance(node, LoopShape) for node in shape):
        return _PLAIN, shape, tuple(i for i, node in enumerate(shape) if node is MEMORY_LEAF)
    return _NESTED, shape, None


class AccessSampler:
    """Places the sampled tile accesses of CTAs in time (see the module docstring).

    The walk (walk_cta) records each access's tile, bytes, op code and stream, and how its time
    follows from its segment's start t0 and time per expanded op dt (a run: (group, a, b,
    seq); b None: t0 + dt·c for c in seq; else (t0 + dt·a) + (dt·b)·j for j in seq). None of
    that depends on when the segments run, so one walk serves every placement in time
    (times(), fast._l2_sample: the simulations of one schedule at several SM clocks)."""

    def __init__(self, ratio: int, per_cta_kernels=frozenset()):
        self.ratio = ratio
        self.per_cta_kernels = per_cta_kernels   # kernels whose streams are kept per CTA
        self.salt = _Salt()
        self.ticks_memo: dict = {}
        self._shapes: dict = {}      # (kernel, class, stages) → per segment (ticks, shape)
        self._inner_hits: dict = {}  # sampled iterations of a tile moving along an inner coord
        self._last_hits: dict = {}   # ... along its last coordinate
        self.keys: list = []         # the sampled accesses' tile keys, in sampling order
        self.metas: list = []        # their (bytes, op code, stream)
        self.runs: list = []         # their times as functions of their group's (t0, dt)
        self.ctas: list = []         # (kernel, cta, ticks of each segment) of the walked CTAs
        self.n_groups = 0            # segments walked (a group: one CTA's segment)
        self._t0s: list = []         # the start and time per tick of each group placed by cta()
        self._dts: list = []
        self.streams: list = []      # of Stream
        self._stream_ids: dict = {}
        self.kernel = self.cohort = 0
        self._cta = -1               # the CTA being walked, where counted per CTA

    def sampled(self, key: tuple) -> bool:
        if self.ratio == 1:
            return True
        return (key[-1] + self.salt[key[:-1]]) % self.ratio == 0

    def stream(self, tensor: str) -> int:
        k = (self.kernel, tensor, self.cohort, self._cta)
        sid = self._stream_ids.get(k)
        if sid is None:
            sid = self._stream_ids[k] = len(self.streams)
            self.streams.append(Stream(*k))
        return sid

    def _segment_shapes(self, segments: list, stages: int, cls) -> tuple:
        """(per segment its shape and how walk_cta walks it (_plan), the segments' expanded
        ops), once per class."""
        key = (self.kernel, cls, stages)
        hit = self._shapes.get(key) if cls is not None else None
        if hit is None:
            self.ticks_memo.clear()
            shapes = [compile_shape(seg, stages, self.ticks_memo) for seg in segments]
            hit = ([_plan(shape) for shape in shapes],
                   tuple(_ticks(seg, self.ticks_memo) for seg in segments))
            self.ticks_memo.clear()
            if cls is not None:
                self._shapes[key] = hit
        return hit

    def walk_cta(self, ki: int, cta: int, segments: list, stages: int, cohort: int = 0,
                 cls: int | None = None) -> None:
        """Record one CTA's sampled accesses, one group per segment (placed in time later,
        by times()). `cls`: the CTA's class in kernel ki (schedule.Kernel.class_of); CTAs of
        one class share the program's shape, computed once (None: computed for this CTA).
        A segment of plain ops or a lone innermost loop is walked directly (_plan), the same
        accesses in the same order as _walk records them."""
        self.kernel, self.cohort = ki, cohort
        self._cta = cta if ki in self.per_cta_kernels else -1
        plans, ticks = self._segment_shapes(segments, stages, cls)
        g = self.n_groups
        for seg, (how, shape, what) in zip(segments, plans):
            if len(seg) != len(shape):
                raise ValueError(f"kernel {ki} CTA {cta}: a segment of {len(seg)} items where "
                                 f"its class has {len(shape)}")
            if how is _INNERMOST:
                self._innermost(seg[0], what.sites, 0, {}, g, what.body_ticks)
            elif how is _PLAIN:
                self._plain(seg, what, g)
            else:
                self._walk(seg, shape, 0, {}, g)
            g += 1
        self.n_groups = g
        self.ctas.append((ki, cta, ticks if len(ticks) <= len(segments)
                          else ticks[:len(segments)]))

    def _plain(self, items, leaves: tuple, g: int) -> None:
        """A segment of plain ops: its loads and stores (at positions `leaves`, each op one
        expanded op), keys all numbers (_walk's MEMORY_LEAF outside every loop)."""
        R, salt = self.ratio, self.salt
        for pos in leaves:
            item = items[pos]
            key = (item.tensor,) + item.coord
            if item.bytes and (R == 1 or (key[-1] + salt[key[:-1]]) % R == 0):
                self.keys.append(key)
                self.metas.append((item.bytes, _op_code(item), self.stream(item.tensor)))
                self.runs.append((g, None, None, (pos,)))

    def cta(self, ki: int, segments: list, start_s: float, seg_ends: tuple, stages: int,
            cohort: int = 0, cls: int | None = None) -> None:
        """Place one CTA's accesses: segment s runs from the end of segment s−1 (or start_s)
        to seg_ends[s]; inside a segment, ops are spread evenly over its expanded ops
        (walk_cta, then group_times; `out` lists the placed accesses)."""
        segments = segments[:len(seg_ends)]
        self.walk_cta(ki, len(self.ctas), segments, stages, cohort, cls)
        group_times(((start_s, seg_ends, self.ctas[-1][2]),), self._t0s, self._dts)

    @property
    def out(self) -> list:
        """The accesses placed by cta(): (time_s, key, bytes, op, stream), sampling order."""
        return [(t, key, *meta) for t, key, meta in
                zip(self.times(self._t0s, self._dts), self.keys, self.metas)]

    def times(self, t0s: list, dts: list) -> list:
        """Every recorded access's time, in sampling order, its group g running from t0s[g]
        at dts[g] seconds per expanded op."""
        out: list = []
        ext = out.extend
        for g, a, b, seq in self.runs:
            t0, dt = t0s[g], dts[g]
            if b is None:
                ext([t0 + dt * c for c in seq])
            else:
                base, tick = t0 + dt * a, dt * b
                ext([base + tick * j for j in seq])
        return out

    def _walk(self, items, shape, pos, env, g):
        for item, node in zip(items, shape, strict=True):
            if node is None:
                pos += 1
            elif node is MEMORY_LEAF:
                coord = item.coord    # outside every loop (env empty) it is all numbers
                key = (item.tensor,) + (tuple(env[c] if isinstance(c, str) else c
                                              for c in coord) if env else coord)
                R = self.ratio
                if item.bytes and (R == 1 or (key[-1] + self.salt[key[:-1]]) % R == 0):
                    self.keys.append(key)
                    self.metas.append((item.bytes, _op_code(item), self.stream(item.tensor)))
                    self.runs.append((g, None, None, (pos,)))
                pos += 1
            else:
                body_ticks = node.body_ticks
                if node.children is not None:
                    for it, v in enumerate(item.values()):
                        env[item.var] = v
                        self._walk(item.body, node.children, pos + it * body_ticks, env, g)
                    env.pop(item.var, None)
                else:
                    self._innermost(item, node.sites, pos, env, g, body_ticks)
                pos += item.count * body_ticks

    def _inner_sampled(self, pre: tuple, mid: tuple, last, start: int, count: int) -> tuple:
        """The values v of [start, start + count) whose tile pre + (v,) + mid + (last,)
        is sampled, in increasing order, and those tiles (memoised: CTAs that share the
        tile walk it alike)."""
        key = (pre, mid, last, start, count)
        hit = self._inner_hits.get(key)
        if hit is None:
            R, salt = self.ratio, self.salt
            values = [v for v in range(start, start + count)
                      if R == 1 or (last + salt[pre + (v,) + mid]) % R == 0]
            hit = self._inner_hits[key] = (values, [pre + (v,) + mid + (last,) for v in values])
        return hit

    def _innermost(self, item, sites, pos, env, g, body_ticks):
        """An innermost loop's memory ops; loads issued as the pipeline issues them
        (pipeline.issue_lead iterations early). A tile that moves with the loop along its
        last coordinate: none of its iterations sampled (known from the row's salt), or its
        sampled iterations, arithmetically (_last_sampled), memoised: the CTAs (or outer
        iterations) that read one tile row, a head's K and V, walk it alike. An op's stream is
        looked up once it has a sampled access (the streams' numbering is their order of
        first sampled access; the replay counts them by (kernel, tensor, cohort))."""
        start, step, count = item.start, item.step, item.count
        body, R = item.body, self.ratio
        lo = item.lowest
        for site in sites:
            op = body[site.index]
            if not op.bytes:        # a box wholly past the tensor's edge: no line, no DRAM
                continue
            if site.moves == MOVES_LAST:
                coord = op.coord
                head = (op.tensor,) + (coord[:-1] if site.literal else tuple(
                    env[c] if isinstance(c, str) else c for c in coord[:-1]))
                if R > 1 and (-self.salt[head] - lo) % R >= count:
                    continue                                 # no iteration sampled
                ck = (head, lo, count, start, step, site.ahead)
                hit = self._last_hits.get(ck)
                if hit is None:
                    hit = self._last_hits[ck] = self._last_sampled(head, lo, count, start,
                                                                   step, site.ahead)
                keys, js = hit
                if keys:
                    self.keys.extend(keys)
                    self.metas.extend([(op.bytes, site.code, self.stream(op.tensor))]
                                      * len(keys))
                    self.runs.append((g, pos + site.index, body_ticks, js))
                continue
            if site.moves == MOVES_INNER:
                values, keys = self._moving_inner(op, site, item, env)
                if step < 0:                                # iteration order
                    values, keys = values[::-1], keys[::-1]
            else:
                values, keys = self._env_keys(op, item, env)
            if not keys:
                continue
            ahead, idx = site.ahead, site.index
            self.keys.extend(keys)
            self.metas.extend([(op.bytes, site.code, self.stream(op.tensor))] * len(keys))
            self.runs.append((g, None, None, [
                pos + (j if j > 0 else 0) * body_ticks + idx
                for j in [(v - start) * step - ahead for v in values]]))

    def _last_sampled(self, head: tuple, lo: int, count: int, start: int, step: int,
                      ahead: int) -> tuple:
        """The sampled tiles head + (v,), v in [lo, lo + count), in iteration order, and their
        issue indices j = (v − start)·step − ahead, which grow by R from one to the next
        (clamped at 0: loads issued before the loop starts)."""
        R = self.ratio
        first = lo + ((-self.salt[head] - lo) % R if R > 1 else 0)
        values = range(first, lo + count, R)
        n = len(values)
        if step < 0:
            values = values[::-1]
        js = ()
        if n:
            j0 = (values[0] - start) * step - ahead
            js = range(j0, j0 + n * R, R)
            if j0 < 0:
                k = min(n, (R - 1 - j0) // R)                # the iterations with j < 0
                js = [0] * k + list(js[k:])
        return [head + (v,) for v in values], js

    def _moving_inner(self, op, site, item, env) -> tuple:
        """A tile that moves with the loop along another coordinate than the last: the key's
        prefix changes with v, its last coordinate does not."""
        coord, at = op.coord, site.at
        bound, after = coord[:at], coord[at + 1:]
        if not site.literal:
            bound = tuple(env[c] if isinstance(c, str) else c for c in bound)
            after = tuple(env[c] if isinstance(c, str) else c for c in after)
        return self._inner_sampled((op.tensor,) + bound, after[:-1], after[-1], item.lowest,
                                   item.count)

    def _env_keys(self, op, item, env) -> tuple:
        """Keys bound from the environment: every iteration's key, the sampled ones kept."""
        values, keys = [], []
        var = item.var
        for v in item.values():
            env[var] = v
            key = (op.tensor,) + tuple(env[c] if isinstance(c, str) else c for c in op.coord)
            if self.sampled(key):
                values.append(v)
                keys.append(key)
        env.pop(var, None)
        return values, keys


def group_times(placed, t0s: list, dts: list) -> None:
    """Append the groups of CTAs placed in time, placed: (start_s, seg_ends, ticks) per CTA:
    segment s runs from the end of segment s−1 (or start_s) to seg_ends[s], its ticks[s]
    expanded ops evenly spread."""
    push_t0, push_dt = t0s.append, dts.append
    for start_s, seg_ends, ticks in placed:
        t0 = start_s
        for t1, n in zip(seg_ends, ticks):
            push_t0(t0)
            push_dt((t1 - t0) / (n if n > 1 else 1))
            t0 = t1


def lru_insert_load(lru: TileLru, key, nbytes: int, t: float, fetch_s: dict,
                    dram_bandwidth_bytes_per_s: float, dram_latency_s: float, counts) -> None:
    """A load miss outside the counted window: the line is allocated as for a counted one,
    and the dirty lines it evicts are still written back (stores are counted whole)."""
    fetch = fetch_s.get(nbytes)
    if fetch is None:
        fetch = fetch_s[nbytes] = nbytes / dram_bandwidth_bytes_per_s + dram_latency_s
    counts.note_writeback(lru.insert(key, nbytes, False, t + fetch))


@dataclass
class LoadCounts:
    """Sampled loads of one tensor: bytes, loads, bytes that missed, and the DRAM wait summed
    over the loads in units of one tile fetch (1 for a miss, the remaining fraction for a
    hit on a line still arriving)."""

    bytes: int = 0
    loads: int = 0
    miss_bytes: int = 0
    wait: float = 0.0
    first_wait: float = 0.0   # the first load's wait (kept once a second one is counted)

    def first(self) -> float:
        """The DRAM wait of the first of these loads, in tile fetches."""
        return self.wait if self.loads == 1 else self.first_wait

    def add(self, other: "LoadCounts") -> None:
        self.bytes += other.bytes
        self.loads += other.loads
        self.miss_bytes += other.miss_bytes
        self.wait += other.wait


def miss_figures(loads: dict, tensors, fallback) -> dict:
    """tensor → (miss ratio, wait per load) from sampled LoadCounts; `fallback(tensor)` for
    tensors with no sampled load."""
    return {t: ((loads[t].miss_bytes / loads[t].bytes, loads[t].wait / loads[t].loads)
                if t in loads and loads[t].bytes else fallback(t)) for t in tensors}


@dataclass
class KernelCounts:
    """Sampled L2 counts of one kernel."""

    store_bytes: int = 0
    writeback_bytes: int = 0
    reduce_read_bytes: int = 0
    # the fill: stores and reduce reads until the kernel's first write-back (None: none seen)
    fill_store_bytes: int | None = None
    fill_reduce_read_bytes: int = 0

    def note_writeback(self, nbytes: int, storing: int = 0) -> None:
        """Count write-back bytes; the first one ends the kernel's fill (`storing`: bytes of
        the store that evicted, counted already, not absorbed)."""
        if nbytes:
            self.writeback_bytes += nbytes
            if self.fill_store_bytes is None:
                self.fill_store_bytes = self.store_bytes - storing
                self.fill_reduce_read_bytes = self.reduce_read_bytes
    loads: dict = field(default_factory=dict)       # tensor → LoadCounts, CTAs before the
                                                    # last partial wave
    tail_loads: dict = field(default_factory=dict)  # tensor → LoadCounts, last partial wave
    cta_loads: dict = field(default_factory=dict)   # cta → tensor → LoadCounts, the CTAs
                                                    # before the last partial wave of a kernel
                                                    # counted per CTA (AccessSampler)
    l2_queue_position: float = 0.0   # a load's expected place in the burst its line releases


@dataclass
class ReplayResult:
    kernels: list          # of KernelCounts
    flush_bytes: int       # dirty bytes left in L2 at the end (0 under "ncu")


def replay(accesses: list, streams: list, capacity_bytes: float, n_kernels: int,
           dram_latency_s: float, protocol: str = "warm",
           dram_bandwidth_bytes_per_s: float = float("inf"),
           windows: list | None = None,
           dirty_capacity_bytes: float | None = None, cache: TileLru | None = None
           ) -> ReplayResult:
    """replay_trace of (time_s, key, bytes, op, stream) tuples."""
    return replay_trace([a[0] for a in accesses], [a[1] for a in accesses],
                        [a[2:] for a in accesses], streams, capacity_bytes, n_kernels,
                        dram_latency_s, protocol, dram_bandwidth_bytes_per_s, windows,
                        dirty_capacity_bytes, cache)


def replay_trace(times: list, keys: list, metas: list, streams: list, capacity_bytes: float,
                 n_kernels: int, dram_latency_s: float, protocol: str = "warm",
                 dram_bandwidth_bytes_per_s: float = float("inf"),
                 windows: list | None = None,
                 dirty_capacity_bytes: float | None = None,
                 cache: TileLru | None = None) -> ReplayResult:
    """Run sampled accesses (times[i], keys[i], metas[i] = (bytes, op, stream)) through the
    tile LRU (memory.TileLru; `cache`, an empty one from memory.l2_cache, in its place where
    given) in time order, ties in their order in the lists. Under "ncu"
    every kernel starts with an invalidated L2 and what stays dirty is counted by nobody.
    windows[k][cohort] = (from_s, until_s): kernel k's loads of that cohort are counted in
    that window of time; outside it they still go through the LRU (fast._l2_sample). Stores
    are counted whole. Default: every load of cohorts 0 and 1 counts."""
    order = sorted(range(len(times)), key=times.__getitem__)     # stable
    kernel_of = [s.kernel for s in streams]
    inf = float("inf")
    window = [(windows[s.kernel].get(s.cohort, (inf, inf)) if windows else
               ((-inf, inf) if s.cohort in (BODY, TAIL) else (inf, inf))) for s in streams]
    ncu = protocol == "ncu"
    if ncu:              # kernels in order even where a buffered load was placed early
        order.sort(key=lambda i: kernel_of[metas[i][2]])   # stable: time order inside each
    lru = cache if cache is not None else TileLru(capacity_bytes, dirty_capacity_bytes)
    per = [KernelCounts() for _ in range(n_kernels)]
    counts = [LoadCounts() for _ in streams]
    groups = [[] for _ in range(n_kernels)]
    fetch_s: dict = {}             # tile bytes → transfer + latency of one fetch
    _replay_loop(order, times, keys, metas, kernel_of, window, ncu, lru, per, counts, groups,
                 fetch_s, dram_bandwidth_bytes_per_s, dram_latency_s)
    for sid in sorted(range(len(streams)), key=lambda i: (
            streams[i].kernel, streams[i].tensor, streams[i].cohort, streams[i].cta)):
        s, c = streams[sid], counts[sid]
        if not c.loads or s.cohort not in (BODY, TAIL):
            continue
        part = per[s.kernel].loads if s.cohort == BODY else per[s.kernel].tail_loads
        part.setdefault(s.tensor, LoadCounts()).add(c)
        if s.cta >= 0 and s.cohort == BODY:
            per[s.kernel].cta_loads.setdefault(s.cta, {})[s.tensor] = c
    for k, g in zip(per, groups):
        n = sum(c.loads for c in (*k.loads.values(), *k.tail_loads.values()))
        # CTAs released together by one line's arrival issue their next loads together: a
        # load's expected place in that burst, in loads of the same CTA's size ahead of it
        k.l2_queue_position = sum(x * (x - 1) / 2 for (x,) in g) / n if n else 0.0
    return ReplayResult(per, 0 if ncu else lru.dirty_bytes())


def _replay_loop(order, times, keys, metas, kernel_of, window, ncu, lru, per, counts, groups,
                 fetch_s, dram_bandwidth_bytes_per_s, dram_latency_s) -> None:
    """The accesses in `order` through the LRU (TileLru.lookup inlined: the hot loop)."""
    current = 0
    lines = lru.lines
    get, touch, old = lines.get, lines.move_to_end, lru.lookup_old
    for i in order:
        t = times[i]
        key = keys[i]
        nbytes, code, sid = metas[i]
        ki = kernel_of[sid]
        if ncu and ki != current:            # profiler: write back + invalidate, unmeasured
            lru.clear()
            current = ki
        entry = get(key)
        if entry is not None:
            touch(key)
        else:
            entry = old(key)
        if code == LOAD:
            lo, hi = window[sid]
            if not lo <= t < hi:                 # the LRU only
                if entry is None:
                    lru_insert_load(lru, key, nbytes, t, fetch_s, dram_bandwidth_bytes_per_s,
                                    dram_latency_s, per[ki])
                continue
            acc = counts[sid]
            acc.bytes += nbytes
            if acc.loads == 1:                   # the first load's wait, as it was
                acc.first_wait = acc.wait
            acc.loads += 1
            fetch = fetch_s.get(nbytes)
            if fetch is None:
                fetch = fetch_s[nbytes] = nbytes / dram_bandwidth_bytes_per_s + dram_latency_s
            if entry is not None:
                # a hit waits only if the line is still on its way from DRAM; then it joins
                # the group of loads that the line's arrival releases together
                if entry[2] > t:
                    acc.wait += (entry[2] - t) / fetch
                    if entry[3] is not None:
                        entry[3][0] += 1
                continue
            acc.miss_bytes += nbytes
            acc.wait += 1.0
            group = [1]
            groups[ki].append(group)
            per[ki].note_writeback(lru.insert(key, nbytes, False, t + fetch, group))
        else:
            k = per[ki]
            k.store_bytes += nbytes
            if entry is not None:
                k.note_writeback(lru.mark_dirty(key, entry), nbytes)
                lru.resize(entry, nbytes)
                continue
            if code == REDUCE:
                k.reduce_read_bytes += nbytes
            k.note_writeback(lru.insert(key, nbytes, True, t), nbytes)
