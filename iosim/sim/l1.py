"""The SM's L1 data cache, for the loads that look it up (Load.l1: cp.async.ca / ld.global.ca).

Every other load the project's kernels issue bypasses L1 (cp.async.cg, TMA), so in the
simulator the L1 matters for the 4-byte copies of FA-1's row statistics l and m
(iosim_common.cuh cp_async4: 4-byte copies cannot be .cg) and for cuBLAS's align1 fallback
GEMMs (odd N), whose 2-byte LDG load every panel through L1: the CTAs of one row or column of
tiles load the same panels, and a co-resident CTA's copy can hit. cuBLAS's align2 fallback
GEMMs copy through L1 too; what it keeps of their (and align1's) K-step boundary sectors is
counted in their schedules (algorithms/standard.copy_excess_bytes), with the same probe curve
(iosim/l1_curve.py). Measured on the H200 (measurements/h200/fa1_l1/README.md): FA-1's
copies hit L1 81% / 44% / 0.1% of their sectors at N 512 / 1024 / 2048 (d 64), exactly the
model's L2→SM excess before this module. The align1 probe's S = Q Kᵀ kernels
(measurements/h200/cublas_align1/) read 3.3-3.6% less than their panels' bytes; with the
shared panels' hits exact mode is within 0.5% of Nsight Compute, the fast mode within 1.6%
(scripts/align2_copy_sectors.py --regime align1 [--mode exact]).

The model, per SM:
- Capacity: the SM's unified L1 / shared-memory array (GpuSpec.l1_shared_memory_bytes_per_sm,
  256 KB on Hopper) less the kernel's shared-memory carve-out, the smallest of Hopper's
  configurations (CARVEOUTS_KIB) that holds its resident CTAs' shared memory, each with the
  1 KB the driver reserves (carveout_bytes; Nsight Compute's launch__shared_mem_config_size
  agrees on all five configurations measured, tests/test_l1.py).
- What a line's reuse sees: an LRU stack of the tiles the SM's CTAs touched in L1, the L1
  loads and every plain (non-reduce) store: the L1 probe (below) measured that stores allocate
  (FA-1's init stores of l, m are hit by the first KV pass) and evict. A load's stack distance
  is the bytes of the other tiles touched since its tile's last touch. .cg copies and TMA do
  not enter it (probe mode 6: .cg copies alone evict nothing), nor atomics (performed at L2).
- Hit probability: not a sharp LRU. The H200's L1 probe (scripts/experiments/l1_probe_h200.py,
  one CTA per SM with FA-1's row-statistic pattern and a sweep of the bytes stored between
  two reads of a line, at four carve-outs) measured a smooth curve: ~1 up to ~0.85 x capacity,
  ~0.45 at ~1.3 x, ~0 beyond ~2.4 x (iosim/data/validation/l1_probe.csv). hit_probability
  interpolates it at the kernel's capacity (linearly in the distance, between the two nearest
  measured capacities in distance / capacity, the nearest one's shape outside them).
- A hit crosses no L2→SM bytes and lands after the L1 latency (GpuSpec.l1_latency_s).

Assumed, not measured: the stack is per SM and LRU-ordered; co-resident CTAs share it as they
interleave (exact mode) or stretch each other's distances by the CTAs per SM (fast mode); the
curve's dependence on the stored tiles' size (probe rows with 2 KB and 16 KB tiles deviate
by up to 0.2 at 1.3-1.9 x capacity) and on the SM's earlier CTAs' lines is not modelled:
FA-1 at N 512 runs ~3.9 CTAs per SM in sequence and hits 81% where the probe's one CTA per
SM at the same distance hits 98.6% (docs/simulator.md).

Exact mode: L1Front puts an SM's L1 in front of ExactMemory for one CTA; a hit is decided
from the probability by error diffusion per SM (hits accumulate to the expected count,
whole tiles at a time, deterministically). Fast mode: kernel_l1_hit_bytes sums the expected
hit bytes over the CTA classes' programs; where CTAs share L1 tiles (shares_l1_tiles), it
walks the SMs' L1 along the fluid model's own dispatch instead (dispatch_l1_hit_fraction:
each CTA's L1 ops spread evenly over its span, an SM's CTAs merged in time order). Which CTAs
share an SM decides those hits, and the two modes' dispatches pair CTAs differently at wave
boundaries: on the align1 probe's S kernel at d 128 exact mode counts 31.8 MB of hits, the
fast mode 16.0 (of 810 MB loaded).
"""
from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from itertools import islice

from ..l1_curve import hit_probability, l1_capacity_bytes, probe_curves
from ..machine import occupancy
from ..schedule import Loop, expand, program_totals

def kernel_has_l1_loads(kernel) -> bool:
    return any(program_totals(kernel.program(rep)).l1_load_bytes for rep in kernel.representatives)


def l1_tensors(kernel) -> frozenset:
    """Tensors the kernel loads through L1 (Load.l1); a tensor loaded both ways is refused."""
    via, around = set(), set()

    def walk(items):
        for it in items:
            if isinstance(it, Loop):
                walk(it.body)
            elif it.kind == "load":
                (via if it.l1 else around).add(it.tensor)
    for rep in kernel.representatives:
        walk(kernel.program(rep))
    both = via & around
    if both:
        raise ValueError(f"kernel {kernel.name} loads {sorted(both)} both through L1 and around it")
    return frozenset(via)


class L1Stack:
    """One SM's LRU stack of the tiles touched in L1 (key → bytes, most recent last), kept
    to `depth_bytes` (beyond which the measured hit probability is 0)."""

    __slots__ = ("capacity_bytes", "depth_bytes", "lines", "used_bytes", "evictions")

    def __init__(self, capacity_bytes: float):
        self.capacity_bytes = capacity_bytes
        pts = max_distance_ratio()
        self.depth_bytes = capacity_bytes * pts
        self.lines: OrderedDict = OrderedDict()
        self.used_bytes = 0
        self.evictions = 0      # tiles dropped past depth_bytes so far

    def distance(self, key) -> float | None:
        """Bytes of the other tiles touched since `key` was last (None: not in the stack)."""
        if key not in self.lines:
            return None
        d = 0
        for k in reversed(self.lines):
            if k == key:
                return d
            d += self.lines[k]
        return None  # pragma: no cover - key was found above

    def touch(self, key, nbytes: int) -> None:
        old = self.lines.pop(key, None)
        if old is not None:
            self.used_bytes -= old
        self.lines[key] = nbytes
        self.used_bytes += nbytes
        while self.used_bytes > self.depth_bytes and len(self.lines) > 1:
            _, b = self.lines.popitem(last=False)
            self.used_bytes -= b
            self.evictions += 1

    def hit_probability(self, key, stretch: float = 1.0) -> float:
        d = self.distance(key)
        return 0.0 if d is None else hit_probability(d * stretch, self.capacity_bytes)


@lru_cache(maxsize=1)
def max_distance_ratio() -> float:
    """The largest measured distance / capacity (the stack's depth; the curves are ~0 there)."""
    return max(pts[-1][0] / c for c, pts in probe_curves())


class SmL1:
    """An SM's L1 in exact mode: its stack, and the error-diffusion credit that turns hit
    probabilities into whole-tile hits (the count of hits follows the sum of probabilities)."""

    __slots__ = ("stack", "credit")

    def __init__(self, capacity_bytes: float):
        self.stack = L1Stack(capacity_bytes)
        self.credit = 0.0

    def load(self, key, nbytes: int) -> bool:
        """An L1 load of a tile: whether it hits. The tile is then the most recent."""
        p = self.stack.hit_probability(key)
        self.credit += p
        hit = self.credit >= 0.5
        if hit:
            self.credit -= 1.0
        self.stack.touch(key, nbytes)
        return hit


class L1Front:
    """One CTA's memory in exact mode with its SM's L1 in front of ExactMemory: loads of the
    kernel's L1 tensors look it up (a hit returns after the L1 latency and counts
    `l1_hit_bytes`, no L2→SM bytes); plain stores allocate in it; the rest passes through."""

    __slots__ = ("mem", "l1", "tensors", "latency_s", "counts")

    def __init__(self, mem, l1: SmL1, tensors: frozenset, latency_s: float, counts: dict):
        self.mem, self.l1, self.tensors, self.latency_s = mem, l1, tensors, latency_s
        self.counts = counts            # the kernel's {"l1_hit_bytes": ..., "l1_load_bytes": ...}

    def load(self, key, tensor: str, nbytes: int, now_s: float, oob_bytes: int = 0,
             misaligned: bool = False, multicast: int = 1) -> float:
        if tensor in self.tensors:
            self.counts["l1_load_bytes"] += nbytes
            if self.l1.load(key, nbytes):
                self.counts["l1_hit_bytes"] += nbytes
                return now_s + self.latency_s
        return self.mem.load(key, tensor, nbytes, now_s, oob_bytes, misaligned, multicast)

    def trip_latency_s(self, key, tensor: str, now_s: float) -> float:
        return self.mem.trip_latency_s(key, tensor, now_s)

    def store(self, key, tensor: str, nbytes: int, reduce, now_s: float,
              layout: str = "coalesced", partial_sectors: int = 0,
              misaligned: bool = False) -> float:
        if not reduce:
            self.l1.stack.touch(key, nbytes)
        return self.mem.store(key, tensor, nbytes, reduce, now_s, layout, partial_sectors,
                              misaligned)


def exact_l1(gpu, kernel, ctas_per_sm: int):
    """(tensors, capacity bytes) of a kernel's L1 in exact mode, or None where it has none."""
    if gpu.l1_shared_memory_bytes_per_sm is None:
        return None
    tensors = l1_tensors(kernel)
    if not tensors:
        return None
    cap = l1_capacity_bytes(gpu, kernel.launch, ctas_per_sm)
    return (tensors, cap) if cap > 0 else None


@lru_cache(maxsize=256)
def program_l1_hits(program: tuple, capacity_bytes: float, stretch: float = 1.0) -> tuple:
    """(expected L1 hit bytes, L1 load bytes) of one CTA program run alone on its SM, its
    stack distances stretched by `stretch` (the CTAs that share the SM). A loop whose L1 ops
    do not move with its variable (FA-1's KV loop: l_i, m_i and O_i are the same tiles at
    every j) repeats its last iteration exactly once the stack is the same after two
    iterations in a row: the remaining ones are counted, not walked (the cost stays per
    iteration of the inner loop, not per op of the whole program)."""
    stack = L1Stack(capacity_bytes)
    acc = [0.0, 0.0]
    _walk_l1(program, {}, stack, acc, stretch)
    return acc[0], acc[1]


def _l1_op(op) -> bool:
    return (op.kind == "load" and op.l1) or (op.kind == "store" and not op.reduce)


def _moves_with(items, var: str) -> bool:
    """Whether an L1 op of `items` (nested loops included) has `var` in its coordinates."""
    for it in items:
        if isinstance(it, Loop):
            if _moves_with(it.body, var):
                return True
        elif _l1_op(it) and var in it.coord:
            return True
    return False


def _walk_l1(items, env: dict, stack: "L1Stack", acc: list, stretch: float,
             touched: set | None = None) -> None:
    for it in items:
        if isinstance(it, Loop):
            _walk_l1_loop(it, env, stack, acc, stretch, touched)
        elif _l1_op(it):
            (op,) = expand((it,), env)
            key = (op.tensor, *op.coord)
            if op.kind == "load":
                acc[0] += op.bytes * stack.hit_probability(key, stretch)
                acc[1] += op.bytes
            stack.touch(key, op.bytes)
            if touched is not None:
                touched.add(key)


def _walk_l1_loop(loop, env: dict, stack: "L1Stack", acc: list, stretch: float,
                  outer_touched: set | None) -> None:
    """One loop of program_l1_hits. A loop whose L1 tiles stay put repeats an iteration
    exactly once the stack repeats. A loop whose tiles move with it is shift-invariant once
    the stack holds only tiles it touched itself and is full (it dropped a tile past its depth
    in the last iteration: flushed, after `m` iterations): from then on every iteration
    counts the same, and the last m iterations rebuild the stack the loop leaves, so the
    iterations between are counted, not walked."""
    periodic = not _moves_with(loop.body, loop.var)
    values, n = loop.values(), loop.count
    previous, touched, flushed_after = None, set(), None
    j = 0
    while j < n:
        env[loop.var] = values[j]
        hit0, total0 = acc
        evictions0 = stack.evictions
        _walk_l1(loop.body, env, stack, acc, stretch, touched)
        if periodic:
            state = tuple(stack.lines.items())
            if state == previous:            # the next iterations repeat this one exactly
                left = n - j - 1
                acc[0] += left * (acc[0] - hit0)
                acc[1] += left * (acc[1] - total0)
                break
            previous = state
        elif flushed_after is None:
            if stack.evictions > evictions0 and all(k in touched for k in stack.lines):
                flushed_after = j
        elif flushed_after == j - 1:         # this iteration began flushed: the steady one
            last = n - (flushed_after + 1)   # the last iterations, walked to rebuild the stack
            skip = last - (j + 1)
            if skip > 0:
                acc[0] += skip * (acc[0] - hit0)
                acc[1] += skip * (acc[1] - total0)
                j = last
                continue
        j += 1
    env.pop(loop.var, None)
    if outer_touched is not None:
        outer_touched |= touched


def kernel_l1_hit_bytes(gpu, kernel, ctas_per_sm: int | None = None,
                        placed=None) -> float:
    """Fast mode: the kernel's expected L1 hit bytes (0 without L1 loads or an L1 model).
    Where its CTAs load the same L1 tiles (cuBLAS's align1 panels, shared by the CTAs of one
    row or column of tiles) and the dispatch's placed CTAs are given (`placed()`: a list of
    (cta, sm, start_s, end_s)), the hits come from
    their SMs' L1 along that dispatch (dispatch_l1_hit_fraction); else over its CTA classes,
    co-resident CTAs stretching each other's distances by the CTAs per SM."""
    if gpu.l1_shared_memory_bytes_per_sm is None or not kernel_has_l1_loads(kernel):
        return 0.0
    occ = ctas_per_sm if ctas_per_sm is not None else occupancy(gpu, kernel.launch)
    occ = min(occ, max(1, -(-kernel.num_ctas // gpu.sm_count)))
    cap = l1_capacity_bytes(gpu, kernel.launch, occupancy(gpu, kernel.launch))
    if cap <= 0:
        return 0.0
    rows = placed() if placed is not None and shares_l1_tiles(kernel) else None
    if rows:
        loads = sum(count * program_totals(kernel.program(rep)).l1_load_bytes
                    for rep, count in kernel.classes)
        return loads * dispatch_l1_hit_fraction(kernel, rows, cap)
    return sum(count * program_l1_hits(kernel.program(rep), cap, float(occ))[0]
               for rep, count in kernel.classes)


# the first CTAs, and the first L1 ops of each, whose tiles are compared for sharing (a shared
# panel shows in its first K steps; FA-1's per-CTA statistics run to tens of thousands of ops);
# the L1 ops the fast mode walks along its dispatch (whole SMs, evenly spread, each SM's
# earliest CTAs up to its share: a kernel of millions of CTAs is sampled, its hit fraction
# scaled to all of its L1 loads)
SHARING_PROBE_CTAS = 64
SHARING_PROBE_OPS = 64
WALKED_L1_OPS = 100_000


def _l1_ops(program: tuple, limit: int | None = None) -> list:
    """A program's L1 ops in order (schedule.expand): (key, bytes, is a load) of each L1 load
    and plain store; the first `limit` of them where one is given."""
    return list(islice((((op.tensor, *op.coord), op.bytes, op.kind == "load")
                        for op in expand(program) if _l1_op(op)), limit))


def shares_l1_tiles(kernel) -> bool:
    """Whether two of the kernel's first CTAs (in launch order) load the same L1 tile among
    their first SHARING_PROBE_OPS L1 ops."""
    owner: dict = {}
    for cta in range(min(SHARING_PROBE_CTAS, kernel.num_ctas)):
        for key, _, is_load in _l1_ops(kernel.program(cta), SHARING_PROBE_OPS):
            if is_load and owner.setdefault(key, cta) != cta:
                return True
    return False


def dispatch_l1_hit_fraction(kernel, placed: list, capacity_bytes: float) -> float:
    """The expected share of a kernel's L1 load bytes that hit, walked along a dispatch:
    `placed` = (cta, sm, start_s, end_s) of the CTAs the fluid model ran (its transients and
    last periods). SM by SM (evenly spread over those used, WALKED_L1_OPS ops in all, an SM's
    earliest CTAs first), each CTA's L1 ops are spread evenly over its span and the SM's CTAs'
    ops merged in time order through one L1 stack (co-resident CTAs interleave, as in exact
    mode's SmL1), each load hitting with the probe curve's probability at its distance. A
    CTA that starts after every walked CTA of its SM has ended begins on an empty stack: the
    gap is a steady state's skipped periods, whose CTAs' lines would stand between."""
    if not placed:
        return 0.0
    by_sm: dict = {}
    for cta, sm, start_s, end_s in placed:
        by_sm.setdefault(sm, []).append((start_s, cta, end_s))
    sms = sorted(by_sm)
    per_cta = max(1, len(_l1_ops(kernel.program(placed[0][0]))))
    per_sm = max(1, len(placed) * per_cta // len(sms))
    count = max(1, min(len(sms), WALKED_L1_OPS // per_sm))
    share = max(per_cta, WALKED_L1_OPS // count)        # ops walked on one SM, at most
    hit = total = 0.0
    for sm in (sms[(i * len(sms)) // count] for i in range(count)):
        segments, events, last_end, walked = [], [], None, 0
        for start_s, cta, end_s in sorted(by_sm[sm]):
            if walked >= share:
                break
            if last_end is not None and start_s > last_end:
                segments.append(events)
                events = []
            last_end = end_s if last_end is None else max(last_end, end_s)
            ops = _l1_ops(kernel.program(cta))
            walked += len(ops)
            n = len(ops)
            for i, op in enumerate(ops):
                events.append((start_s + (end_s - start_s) * (i + 0.5) / n, cta, i, op))
        segments.append(events)
        for events in segments:
            events.sort(key=lambda e: e[:3])
            stack = L1Stack(capacity_bytes)
            for _, _, _, (key, nbytes, is_load) in events:
                if is_load:
                    hit += nbytes * stack.hit_probability(key)
                    total += nbytes
                stack.touch(key, nbytes)
    return hit / total if total else 0.0
