"""Fast mode (the default): characterise, dispatch, replay L2, dispatch again.

  1. CTA classes: CTAs whose programs have the same shape (kernel.classes) share one profile
     per residency k, from micro-simulations of one SM (characterize.py).
  2. Dispatch every CTA through the SMs with the fluid bandwidth model (fluid.py).
  3. Replay a sample of the tile accesses, placed in time by step 2, through the LRU L2
     (l2model.py): per kernel and tensor, the miss ratio and the DRAM bytes.
  4. Repeat 1–2 with those miss ratios (expected DRAM latency per load in the micro-
     simulations, DRAM bytes in the fluid demand). The bytes of step 3 and the times of the
     second dispatch are the result.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from dataclasses import asdict, dataclass
from itertools import accumulate, chain
from math import ceil
from operator import itemgetter

from ..gcpause import full_collections_deferred
from ..schedule import program_totals
from .characterize import Characterizer, shape_key, split_segments
from ..machine import (SmRates, dram_read_rate, dram_write_cost, dram_write_cost_at,
                       reduce_l2_costs, tensor_server_busy_s, fragment_store_l2_cost,
                       partial_sector_write_cost_bytes, line_misaligned_dram_factor)
from .launch import busy_of_program, ctas_per_sm, kernel_mma_cost, kernel_rates
from .first_wave import first_wave_loads, first_wave_prologues, tail_wave_start
from .fluid import ClassCosts, FluidMachine, run_kernel
from .l2model import (BODY, TAIL, TILES_PER_SAMPLED_CACHE, WARMUP, AccessSampler, group_times,
                      miss_figures, replay_trace)
from .lockstep import lockstep_waves
from .wait_cohorts import counted_per_cta, wait_cohorts
from .wave_queue import WAVES, WaitPoints
from .summary import kernel_result, schedule_result
from .timeline import Timeline
from .l1 import kernel_l1_hit_bytes
from .memory import l2_cache, l2_dirty_capacity_bytes, l2_policy
from .reuse import Reuse

DEFAULT_SAMPLE_BUDGET = 50_000   # sampled tile accesses replayed through the L2 model


def segment_bytes(program, miss: dict, dram_store_ratio: float,
                  reduce_cost: dict | None = None, fragment_store_cost: float = 1.0,
                  partial_sector_cost: float = 0.0, misaligned_factor: float = 1.0) -> tuple:
    """Per segment: (L2↔SM bytes, expected DRAM-server bytes, the fraction of its load bytes that
    wait for DRAM: misses and hits on lines still in flight, capped at 1). Write-backs are
    DRAM bytes nobody waits for: a load that hits in L2 does not queue behind them. The L2
    figure counts a reduced byte as reduce_cost[layout] port bytes (machine.reduce_l2_costs),
    a plain fragment-layout stored byte as fragment_store_cost (machine.fragment_store_l2_cost).
    dram_store_ratio: DRAM-server bytes per stored byte, i.e. the share written back times
    machine.dram_write_cost (a written byte's DRAM time in read-rate bytes). Each partial-sector
    write (Store.partial_sectors) adds partial_sector_cost DRAM-server bytes
    (machine.partial_sector_write_cost_bytes), charged when stored, as exact mode does; the
    DRAM bytes of misaligned row streams (Load / Store.line_misaligned) take misaligned_factor
    times as long (machine.line_misaligned_dram_factor)."""
    rc = reduce_cost or {}
    frag, coal = rc.get("fragment", 1.0), rc.get("coalesced", 1.0)
    l2, dram, wait = [], [], []
    for seg in split_segments(program):
        t = program_totals(seg)
        l2.append(t.bytes_loaded - t.multicast_bytes + t.bytes_stored
                  + (t.reduce_bytes - t.reduce_coalesced_bytes) * (frag - 1.0)
                  + t.reduce_coalesced_bytes * (coal - 1.0)
                  + t.fragment_store_bytes * (fragment_store_cost - 1.0))
        extra = misaligned_factor - 1.0
        dram.append(sum(b * miss.get(tn, (0.0, 0.0))[0] for tn, b in t.load_bytes.items())
                    + t.bytes_stored * dram_store_ratio
                    + t.partial_sector_writes * partial_sector_cost
                    + extra * (sum(b * miss.get(tn, (0.0, 0.0))[0]
                                   for tn, b in t.misaligned_load_bytes.items())
                               + t.misaligned_store_bytes * dram_store_ratio))
        wait.append(sum(b * min(1.0, miss.get(tn, (0.0, 0.0))[1])
                        for tn, b in t.load_bytes.items()) / t.bytes_loaded
                    if t.bytes_loaded else 0.0)
    return l2, dram, wait


def _tensors(program) -> set:
    return {op.tensor for op in _memory_ops(program)}


@dataclass
class KernelInfo:
    """What the fast mode knows of one kernel before simulating it: its classes'
    programs (by Kernel.classes), their shapes and unit busy times, its occupancy, totals."""

    kernel: object
    occ: int
    totals: object
    programs: list
    shapes: list
    rates: object
    busy: list

    @classmethod
    def of(cls, kernel, gpu, dtype: str) -> "KernelInfo":
        programs = [kernel.program(rep) for rep in kernel.representatives]
        rates = kernel_rates(gpu, dtype, kernel)
        return cls(kernel, ctas_per_sm(gpu, kernel), kernel.totals(), programs,
                   [shape_key(p) for p in programs], rates,
                   [busy_of_program(p, rates) for p in programs])


@dataclass
class KernelRows:
    """One kernel's timeline rows as the fluid model emitted them, with its repeats."""

    rows: list           # (kernel, cta, sm, start_s, end_s, stall, busy), emission order
    marks: dict | None   # cta → (start_s, segment ends), for the L2 replay
    repeats: list        # of fluid.Repeat
    _of: object = None   # marks_of's lookup, built on first use

    def marks_of(self, cta: int) -> tuple:
        """Start and segment ends of a CTA, simulated or in a repeated period."""
        if self._of is None:
            self._of = self._lookup()
        return self._of(cta)

    def _lookup(self):
        """cta → marks: the emitted CTAs' own, else those of the CTA its repeated period
        copies, shifted by the copies' time step (the replay asks this of every CTA it
        walks: each repeat's CTA mod cta_step → the emitted CTA of the period it copies is
        built once; a period's CTAs have distinct residues, its copies never overlap)."""
        marks = self.marks
        own = marks.get
        repeats = [(rep.cta_step, {row[1] % rep.cta_step: row[1]
                                   for row in self.rows[rep.first:rep.last]}.get,
                    rep.times, rep.time_step_s) for rep in self.repeats]

        def of(cta: int) -> tuple:
            hit = own(cta)
            if hit is not None:
                return hit
            for step, source_of, times, time_step_s in repeats:
                source = source_of(cta % step)
                if source is not None:
                    k = (cta - source) // step
                    if 1 <= k <= times:
                        start, ends = marks[source]
                        dt = k * time_step_s
                        return start + dt, ((ends[0] + dt, ends[1] + dt) if len(ends) == 2
                                            else tuple([e + dt for e in ends]))
            raise KeyError(cta)
        return of


def _class_costs(info: KernelInfo, cohorts, dram_scale: float, characterizer, span_s: float,
                 fill: StoreFill | None = None, write_cost: float | None = None):
    """ClassCosts of every class under every cohort's L2 figures (cohort-major); with a
    store fill, also the DRAM bytes of each segment while the L2 fills."""
    costs, bytes_by_shape, profiles_by_shape = [], {}, {}
    reduce_cost = reduce_l2_costs(characterizer.gpu)
    frag_cost = fragment_store_l2_cost(characterizer.gpu)
    access_costs = (partial_sector_write_cost_bytes(characterizer.gpu),
                    line_misaligned_dram_factor(characterizer.gpu))
    for ci, (c_miss, c_key) in enumerate(cohorts):
        for p, shape in zip(info.programs, info.shapes):
            ab = bytes_by_shape.get((shape, ci))
            if ab is None:
                wc = (dram_write_cost(characterizer.gpu) if write_cost is None
                      else write_cost)                # DRAM time of a written byte
                ab = segment_bytes(p, c_miss, dram_scale * wc, reduce_cost, frag_cost,
                                   *access_costs)
                if fill is not None:
                    # while the L2 fills, stores cost DRAM only their reductions' reads
                    ab = (*ab, segment_bytes(p, c_miss, fill.dram_per_stored_byte,
                                             reduce_cost, frag_cost, *access_costs)[1],
                          tuple(program_totals(seg).bytes_stored for seg in split_segments(p)))
                bytes_by_shape[shape, ci] = ab
            prof = profiles_by_shape.get((shape, c_key))
            if prof is None:         # classes of one shape share their profiles
                prof = profiles_by_shape[shape, c_key] = tuple(
                    tuple(characterizer.segment_profiles(p, k, c_key, span_s))
                    for k in range(1, info.occ + 1))
            costs.append(ClassCosts(prof, tuple(ab[0]), tuple(ab[1]), tuple(ab[2]),
                                    bool(p) and p[0].kind != "loop",
                                    *((tuple(ab[3]), ab[4]) if fill is not None else ()),
                                    drains=characterizer.drains(p)))
    return costs


def _placed_ctas(timeline, ki: int) -> list:
    """(cta, sm, start_s, end_s) of the kernel's CTAs the timeline holds row by row (the
    fluid model's transients and last periods; its skipped periods are not expanded)."""
    if timeline is None:
        return []
    c = timeline.columns
    return [(c["cta"][r], c["sm"][r], c["start_s"][r], c["end_s"][r])
            for r in range(len(c["cta"])) if c["kernel"][r] == ki]


def _first_wave_loads(kernel, ki: int, group: int, reuse) -> dict:
    """first_wave.first_wave_loads, from `reuse` when it has them (keyed by kernel and group)."""
    if reuse is None:
        return first_wave_loads(kernel, group)
    hit = reuse.first_loads.get((ki, group))
    if hit is None:
        hit = reuse.first_loads[ki, group] = first_wave_loads(kernel, group)
    return hit


def _with_cohort_classes(class_of, n_classes: int, cohort_of: dict, tail_start, tail: int):
    """Classes per cohort (cohort-major, as _class_costs orders the costs): a CTA of
    cohort_of (a WaitCohorts' CTA → cohort index, others cohort 0), the last partial wave's
    CTAs (from tail_start, None: no such cohort) cohort `tail`."""
    def of(cta: int) -> int:
        if tail_start is not None and cta >= tail_start:
            return class_of(cta) + n_classes * tail
        return class_of(cta) + n_classes * cohort_of.get(cta, 0)
    return of


def _burst_span(info: KernelInfo, miss: dict, dram_scale: float, gpu, group: int) -> float:
    """How long until the last of a first wave's first segments, all queued at once, has
    its data: the group's mean first-segment bytes at the shared bandwidths. dram_scale:
    DRAM-server bytes per stored byte (segment_bytes' dram_store_ratio)."""
    n_cls = len(info.programs)
    first = [segment_bytes(p, miss, dram_scale, reduce_l2_costs(gpu), fragment_store_l2_cost(gpu),
                           partial_sector_write_cost_bytes(gpu), line_misaligned_dram_factor(gpu))
             for p in info.programs]
    mean_l2 = sum(b[0][0] for b in first) / n_cls
    mean_dram = sum(b[1][0] for b in first) / n_cls
    return group * max(mean_l2 / gpu.l2_bandwidth_bytes_per_s,
                       mean_dram / dram_read_rate(gpu))


def kernel_write_cost(gpu, read_share: float | None) -> float:
    """DRAM-server bytes (at the read rate) per written byte of a kernel whose DRAM bytes are
    `read_share` reads: machine.dram_write_cost_at of the kernel's mix (exact mode's
    MixedDramServer takes the mix in flight); machine.dram_write_cost where the kernel moves
    no DRAM byte."""
    if read_share is None:
        return dram_write_cost(gpu)
    return dram_write_cost_at(gpu, read_share)


def _dispatch_all(schedule, gpu, infos, miss, dram_scale, characterizers, keep_marks,
                  limits=None, cold_start: bool = False, first_loads_queue: bool = True,
                  tail_miss=None, l2_queue=None, store_fill=None, reuse=None,
                  dram_read_shares=None, cohorts_of=None):
    """Steps 1–2 for every kernel: spans, timeline, segment end times of the CTAs.
    limits[ki]: dispatch only the first CTAs of each kernel (their times barely depend on
    the CTAs launched after them). reuse: a Reuse holding the first waves' loads."""
    timeline = Timeline()
    timeline.kernel_names = [k.name for k in schedule.kernels]
    spans, runs = [], []
    t = 0.0
    l2_queue = l2_queue or [0.0] * len(schedule.kernels)
    touched: set = set()        # tensors earlier kernels loaded or stored
    for ki, (kernel, info) in enumerate(zip(schedule.kernels, infos)):
        if ki:
            t += gpu.launch_overhead_s
        occ = info.occ
        # the last partial wave may find its tiles in L2 already (an earlier wave fetched
        # them): its CTAs are classes of their own, with the replay's figures for them
        tail_start = tail_wave_start(kernel.num_ctas, occ * gpu.sm_count)
        # the CTAs whose loads wait for DRAM apart from those that find their tiles in L2
        # (WaitCohorts: a synchronous kernel's CTAs, by the replay's counts of each CTA)
        split = cohorts_of[ki] if cohorts_of is not None else None
        queue = l2_queue[ki]
        cohort_miss = [miss[ki]] + (list(split.miss) if split else [])
        cohort_queue = [queue.cohort(split.key(c) if split else c)
                        if isinstance(queue, WaitPoints) else queue
                        for c in range(len(cohort_miss))]
        has_tail = (tail_miss is not None and tail_miss[ki] is not None
                    and tail_start is not None)
        if has_tail:
            cohort_miss.append(tail_miss[ki])
            # the last partial wave's CTAs share their tiles with fewer others, so the wait
            # points of the full waves (WaitPoints) are not theirs: the replay's queue
            # position is
            cohort_queue.append(queue.tail() if isinstance(queue, WaitPoints) else queue)
        # (miss figures, profile memo key: the figures and the L2 queue factor)
        cohorts = [(m, (tuple(sorted(m.items())), q)) for m, q in zip(cohort_miss, cohort_queue)]
        group = min(kernel.num_ctas, occ * gpu.sm_count)
        fill = store_fill[ki] if store_fill is not None else None
        wc = kernel_write_cost(gpu, dram_read_shares[ki] if dram_read_shares else None)
        span = _burst_span(info, miss[ki], dram_scale[ki] * wc if fill is None
                           else fill.dram_per_stored_byte, gpu, group)
        costs = _class_costs(info, cohorts, dram_scale[ki], characterizers[ki], span, fill, wc)
        n_cls = len(info.programs)
        class_of = kernel.class_of if len(cohorts) == 1 else _with_cohort_classes(
            kernel.class_of, n_cls, split.of if split else {},
            tail_start if has_tail else None, len(cohorts) - 1)
        prologues = (first_wave_prologues(kernel, group, miss[ki],
                                          set() if cold_start else touched,
                                          _first_wave_loads(kernel, ki, group, reuse))
                     if first_loads_queue else None)
        if not cold_start:
            for p in info.programs:
                touched |= _tensors(p)
        busy = info.busy * len(cohorts)
        want = keep_marks(ki)
        rows, kmarks = [], ({} if want else None)

        def emit(cta, cls, sm, s, e, stall, seg_ends, _ki=ki):
            rows.append((_ki, cta, sm, s, e, stall, busy[cls]))
            if kmarks is not None:
                kmarks[cta] = (s, tuple(seg_ends))

        n = kernel.num_ctas if limits is None else limits[ki]
        machine = FluidMachine(gpu.sm_count, occ, gpu.l2_bandwidth_bytes_per_s,
                               dram_read_rate(gpu), gpu.dram_latency_s)
        run = run_kernel(n, class_of, costs, machine, t, emit, want, prologues,
                         kernel.class_period,
                         0 if split else tail_start if len(cohorts) > 1 else kernel.num_ctas,
                         fill.stored_bytes if fill is not None else None)
        kernel_rows = KernelRows(rows, kmarks, run.repeats)
        timeline.add_kernel(rows, run.repeats)
        last = kernel.class_of(n - 1) if n else 0
        end_s = run.end_s + (characterizers[ki].epilogue_tail_s(
            info.programs[last], occ, cohorts[0][1]) if n else 0.0)
        spans.append((t, end_s, occ))
        runs.append(kernel_rows)
        t = end_s
    return timeline, spans, runs


MIN_PREFIX_WAVES = 8        # a sampled prefix covers at least this many waves of a kernel
MIN_TILES_PER_SAMPLED_CACHE = 2
TAIL_WARMUP_WAVES = 2       # full waves replayed, uncounted, before a kernel's last partial wave


class SamplingPlan:
    """Set-sampling ratio and, per kernel, which CTAs (in launch order) the L2 replays.

    Every CTA when the budget allows it at a ratio R ≤ C_eff / (32 × largest tile) (the
    sampled cache then holds dozens of tiles). Otherwise a prefix of each kernel, the same
    fraction of each, but at least MIN_PREFIX_WAVES waves: a kernel's first waves are a
    transient (its first wave's CTAs start together and share their tiles in lockstep; later
    waves are staggered and re-read them). To afford the waves, R may rise until the sampled
    cache holds MIN_TILES_PER_SAMPLED_CACHE tiles; beyond that, the budget is exceeded rather
    than the prefix shortened. The prefix's loads are counted only before its first CTA that
    is not replayed starts (fast._l2_sample). A kernel with a last partial wave also replays
    it, after TAIL_WARMUP_WAVES full waves that fill the LRU as the full trace would and are
    not counted: that wave's CTAs share each tile with fewer others and miss more (FA-2,
    N = 16,384, H100, 4 MiB: 3.1% of its load bytes against 1.5% in every full wave), which
    no prefix shows. With R and the CTAs set by the budget alone, the sampled trace is the
    same at every L2 size above the small sizes where the 2-tile floor binds, so DRAM bytes do
    not rise with capacity (an LRU's stack property)."""

    def __init__(self, schedule, gpu, infos, capacity_bytes: float, budget: int):
        kernels = schedule.kernels
        per_cta = [(i.totals.loads + i.totals.stores) / max(1, k.num_ctas)
                   for k, i in zip(kernels, infos)]
        accesses = sum(i.totals.loads + i.totals.stores for i in infos)
        largest = max((b.bytes for info in infos for p in info.programs
                       for b in _memory_ops(p)), default=1)

        def cap(tiles: int) -> int:
            return max(1, int(capacity_bytes // (tiles * max(1, largest))))
        self.ratio = min(cap(TILES_PER_SAMPLED_CACHE), max(1, ceil(accesses / budget)))
        ctas = sum(k.num_ctas for k in kernels)
        self.suffix = [None] * len(kernels)     # first CTA of the replayed tail part
        if accesses <= budget * self.ratio and ctas <= budget:
            self.limits = [k.num_ctas for k in kernels]
            return
        slots = [info.occ * gpu.sm_count for info in infos]
        waves = [min(k.num_ctas, MIN_PREFIX_WAVES * w) for k, w in zip(kernels, slots)]
        tails = [_suffix_start(k.num_ctas, w) for k, w in zip(kernels, slots)]
        suffix_ctas = [k.num_ctas - max(t, w) if t is not None else 0
                       for k, t, w in zip(kernels, tails, waves)]
        least = sum((w + x) * a for w, x, a in zip(waves, suffix_ctas, per_cta))
        self.ratio = min(cap(MIN_TILES_PER_SAMPLED_CACHE), max(self.ratio, ceil(least / budget)))
        room = budget * self.ratio - sum(x * a for x, a in zip(suffix_ctas, per_cta))
        fraction = min(1.0, max(0.0, room) / accesses) if accesses else 1.0
        # every replayed CTA's program is built and walked, sampled tiles or not: at most
        # `budget` CTAs (many tiny CTAs would otherwise cost more than their accesses)
        if ctas > budget:
            fraction = min(fraction, budget / ctas)
        self.limits = [k.num_ctas if fraction >= 1.0 else
                       min(k.num_ctas, max(w, ceil(k.num_ctas * fraction)))
                       for k, w in zip(kernels, waves)]
        for ki, (k, t) in enumerate(zip(kernels, tails)):
            if t is not None and t <= self.limits[ki]:
                self.limits[ki] = k.num_ctas     # prefix and tail part meet: every CTA
            elif self.limits[ki] < k.num_ctas:
                self.suffix[ki] = t

    def replayed(self, ki: int, num_ctas: int):
        """The CTAs of kernel ki the replay walks, in launch order."""
        if self.suffix[ki] is None:
            return range(self.limits[ki])
        return chain(range(self.limits[ki]), range(self.suffix[ki], num_ctas))

    def replayed_count(self, ki: int, num_ctas: int) -> int:
        """How many CTAs of kernel ki the replay walks."""
        return self.limits[ki] + (num_ctas - self.suffix[ki] if self.suffix[ki] is not None
                                  else 0)

    def __call__(self, ki: int, cta: int = 0) -> bool:
        return cta < self.limits[ki]


def _suffix_start(num_ctas: int, slots: int):
    """First CTA of the replayed tail part (TAIL_WARMUP_WAVES full waves of `slots` CTAs,
    then the last partial wave), or None when the kernel has no partial last wave."""
    tail = tail_wave_start(num_ctas, slots)
    return None if tail is None else max(0, tail - TAIL_WARMUP_WAVES * slots)


def _l2_sample(schedule, plan: SamplingPlan, runs, tail_starts, slots, reuse=None) -> tuple:
    """The sampled accesses of the replayed CTAs (an AccessSampler: the walk, from `reuse`
    when it has it) and their times, and per kernel the window of time in which each
    cohort's loads are counted: (BODY: until the prefix's first CTA that is not replayed
    starts; TAIL: from when every CTA before the tail part's warm-up has ended).

    Until the first unreplayed CTA starts, the LRU has seen every access the full trace
    would have (CTAs start in launch order and access nothing before they start), so the
    counted loads are exactly those of the full trace in that window; after it, the replayed
    CTAs still running miss the tiles they would have shared with the CTAs that are not
    replayed (FA-2, N = 65,536, H100: the 9 CTAs of a 2,121-CTA prefix past its 8 whole
    waves, each alone on its head's K/V, raised the kernel's miss ratio by 6%). Symmetrically,
    the tail part's loads count once no CTA before its warm-up runs any more."""
    inf = float("inf")
    windows = []
    for ki, k in enumerate(schedule.kernels):
        marks_of = runs[ki].marks_of
        n = k.num_ctas
        body_end = marks_of(plan.limits[ki])[0] if plan.limits[ki] < n else inf
        a = plan.suffix[ki]
        tail_from = (max(marks_of(c)[1][-1] for c in range(max(0, a - slots[ki]), a))
                     if a else -inf)
        windows.append({BODY: (-inf, body_end), TAIL: (tail_from, inf), WARMUP: (inf, inf)})
    key = (plan.ratio, tuple(plan.limits), tuple(plan.suffix), tuple(tail_starts))
    sampler = reuse.walks.get(key) if reuse is not None else None
    if sampler is None:
        sampler = _walk_replayed(schedule, plan, tail_starts)
        if reuse is not None:
            reuse.keep(key, sampler)
    return sampler, sampler.times(*_group_times(sampler, runs)), windows


def _group_times(sampler: AccessSampler, runs) -> tuple:
    """Each walked segment's start and time per expanded op (l2model.group_times), from the
    segment ends the dispatch gave its CTA."""
    t0s, dts = [], []
    group_times(_placed(sampler, runs), t0s, dts)
    return t0s, dts


def _placed(sampler: AccessSampler, runs):
    """(start_s, segment ends, ticks) of every walked CTA (KernelRows.marks_of), in walk
    order: CTA after CTA, one group per segment. A CTA none of whose groups a sampled access
    names (AccessSampler.runs: (group, ...)) is placed at time 0, since its groups' times are
    never read: at a high set-sampling ratio most walked CTAs (standard attention's QKᵀ
    tiles at N = 65,536: ~19 in 20) sample nothing."""
    marks_of = [r.marks_of for r in runs]
    used = {run[0] for run in sampler.runs}
    unread: dict = {}            # segments → (0.0, ...) placeholder ends
    g = 0
    for ki, cta, ticks in sampler.ctas:
        n = len(ticks)
        if used.isdisjoint(range(g, g + n)):
            ends = unread.get(n)
            if ends is None:
                ends = unread[n] = (0.0,) * n
            yield 0.0, ends, ticks
        else:
            start_s, seg_ends = marks_of[ki](cta)
            if len(seg_ends) != n:      # the fluid model ends every segment it runs
                raise AssertionError(f"kernel {ki} CTA {cta}: {len(seg_ends)} segment ends "
                                     f"for {n} segments")
            yield start_s, seg_ends, ticks
        g += n


def _walk_replayed(schedule, plan: SamplingPlan, tail_starts) -> AccessSampler:
    """Walk every replayed CTA's program: its sampled accesses, not yet placed in time. A
    class's programs have one shape, so its segments (split_segments) lie at the same
    positions in every one of them: found on its first CTA, sliced out of the others."""
    sampler = AccessSampler(plan.ratio, frozenset(
        ki for ki, k in enumerate(schedule.kernels) if counted_per_cta(k)))
    for ki, k in enumerate(schedule.kernels):
        n = k.num_ctas
        stages = max(1, k.pipeline.stages)
        tail = tail_starts[ki] if tail_starts[ki] is not None else n
        program, class_of, limit, walk = k.program, k.class_of, plan.limits[ki], sampler.walk_cta
        bounds: dict = {}            # class → (program length, its segments' slicer)
        for cta in plan.replayed(ki, n):
            cohort = TAIL if cta >= tail else (BODY if cta < limit else WARMUP)
            cls, prog = class_of(cta), program(cta)
            b = bounds.get(cls)
            if b is None:
                segments = split_segments(prog)
                bounds[cls] = (len(prog), _segment_slicer(segments))
            elif len(prog) != b[0]:
                raise ValueError(f"kernel {ki} CTA {cta}: a program of {len(prog)} items where "
                                 f"its class has {b[0]}")
            else:
                segments = b[1](prog)
            walk(ki, cta, segments, stages, cohort, cls)
    return sampler


def _segment_slicer(segments: list):
    """program → its segments as a tuple (split_segments' segments, by their positions in the
    program; operator.itemgetter of slices, one C call per CTA)."""
    cuts, at = [], 0
    for seg in segments:
        cuts.append(slice(at, at + len(seg)))
        at += len(seg)
    if len(cuts) < 2:                 # itemgetter of one item returns it bare
        return lambda prog: tuple(prog[c] for c in cuts)
    return itemgetter(*cuts)


@dataclass
class KernelMemory:
    """One kernel's memory figures scaled to all of its accesses."""

    dram_read_bytes: float
    dram_write_bytes: float
    load_miss_bytes: float
    load_hit_bytes: float


@dataclass
class L2Figures:
    """The replay, scaled to every access of every kernel (per kernel): miss figures
    tensor → (miss ratio, DRAM wait per load) for all CTAs and for the last partial wave
    (None where none was sampled), DRAM bytes per stored byte once the L2 writes dirty lines
    back, the fill before that (StoreFill or None), memory counters, the L2 queue position;
    and the final flush bytes."""

    miss: list
    tail_miss: list
    dram_store_ratio: list
    store_fill: list
    memory: list
    l2_queue: list
    flush_bytes: float
    cohorts: list = None     # per kernel: WaitCohorts or None


def _tail_load_bytes(kernel, info: KernelInfo, tail_start) -> dict:
    """tensor → load bytes of the kernel's last partial wave (none: {})."""
    if tail_start is None:
        return {}
    per_class = [program_totals(p).load_bytes for p in info.programs]
    out: dict = {}
    for cta in range(tail_start, kernel.num_ctas):
        for t, b in per_class[kernel.class_of(cta)].items():
            out[t] = out.get(t, 0) + b
    return out


@dataclass(frozen=True)
class StoreFill:
    """A kernel's first stores, before the L2 writes back its first dirty line: they fill the
    L2 and cost DRAM only what their atomic reductions read (dram_per_stored_byte), until
    `stored_bytes` have been stored."""

    stored_bytes: float
    dram_per_stored_byte: float


def _store_figures(k, ratio: int) -> tuple:
    """(DRAM bytes per stored byte after the fill, StoreFill or None) of sampled counts. The
    fill's stored bytes scale by the set-sampling ratio alone: the sampled cache is C / R, and
    the fill happens at the kernel's start however many CTAs follow."""
    if not k.store_bytes:
        return 0.0, None
    whole = (k.writeback_bytes + k.reduce_read_bytes) / k.store_bytes
    filled = k.fill_store_bytes
    if not filled or filled >= k.store_bytes:    # no write-back, or one from the start
        return whole, None
    after = ((k.writeback_bytes + k.reduce_read_bytes - k.fill_reduce_read_bytes)
             / (k.store_bytes - filled))
    return after, StoreFill(filled * ratio, k.fill_reduce_read_bytes / filled)


def _scale(infos, result, tail_bytes: list, ratio: int = 1) -> L2Figures:
    """Scale the sampled L2 counts to every access of every kernel: the CTAs before the last
    partial wave by the figures of their sampled loads, that wave's CTAs by its own
    (tail_bytes[k]: tensor → its load bytes)."""
    miss, tail_miss, store_ratio, fills, mems, cohorts = [], [], [], [], [], []
    total_store = sum(i.totals.bytes_stored for i in infos)
    sampled_store = sum(k.store_bytes for k in result.kernels)
    for info, k, tail_b in zip(infos, result.kernels, tail_bytes):
        tot = info.totals
        sampled = [*k.loads.values(), *k.tail_loads.values()]
        sampled_load = sum(c.bytes for c in sampled)
        overall = (sum(c.miss_bytes for c in sampled) / sampled_load if sampled_load else 1.0)
        m = miss_figures(k.loads, tot.load_bytes, lambda t: (overall, overall))
        tm = miss_figures(k.tail_loads, tot.load_bytes, lambda t: m[t]) if k.tail_loads else None
        store_scale = (tot.bytes_stored / k.store_bytes) if k.store_bytes else 0.0
        miss_bytes = sum((b - tail_b.get(t, 0)) * m[t][0] + tail_b.get(t, 0) * (tm or m)[t][0]
                         for t, b in tot.load_bytes.items())
        miss.append(m)
        tail_miss.append(tm)
        cohorts.append(wait_cohorts(k.cta_loads, tot.load_bytes, m))
        after, fill = _store_figures(k, ratio)
        store_ratio.append(after)
        fills.append(fill)
        mems.append(KernelMemory(miss_bytes + k.reduce_read_bytes * store_scale,
                                 k.writeback_bytes * store_scale, miss_bytes,
                                 sum(tot.load_bytes.values()) - miss_bytes))   # TMA boxes' empty rows: no L2 line
    flush_bytes = (result.flush_bytes * (total_store / sampled_store) if sampled_store
                   else 0.0)
    if mems:
        mems[-1].dram_write_bytes += flush_bytes
    return L2Figures(miss, tail_miss, store_ratio, fills, mems,
                     [k.l2_queue_position for k in result.kernels], flush_bytes, cohorts)


def _read_shares(fig: L2Figures) -> list:
    """Per kernel, the share of its DRAM bytes that are reads (None: it moves none); the
    final flush (added to the last kernel's writes, never timed) left out."""
    out = []
    for ki, m in enumerate(fig.memory):
        write = m.dram_write_bytes - (fig.flush_bytes if ki == len(fig.memory) - 1 else 0.0)
        total = m.dram_read_bytes + max(0.0, write)
        out.append(m.dram_read_bytes / total if total > 0 else None)
    return out


def _memory_ops(items):
    for it in items:
        if it.kind == "loop":
            yield from _memory_ops(it.body)
        elif it.kind in ("load", "store"):
            yield it


def _wave_queues(schedule, gpu, rates, infos, characterizers, capacity: float) -> list:
    """The L2 FIFO queueing of each kernel from a short exact simulation of its waves
    (wave_queue.py; simulate_fast(l2_queue_from_wave=True), not the default:
    docs/fast_mode_accuracy.md says why; the default is the replay's queue position)."""
    from .wave_queue import wave_queue
    return [wave_queue(k, gpu, rates, c.mma, i.occ, capacity)
            for k, i, c in zip(schedule.kernels, infos, characterizers)]


class _Occupancy:
    """The integral over time of how many of a set of CTAs run (their (start, end) spans):
    F(x) = Σ_k max(0, min(x, end_k) − start_k), by bisection over the sorted starts and
    ends and their prefix sums."""

    def __init__(self, spans: list):
        self.starts = sorted(s for s, _ in spans)
        self.ends = sorted(e for _, e in spans)
        self.start_sums = list(accumulate(self.starts, initial=0.0))
        self.end_sums = list(accumulate(self.ends, initial=0.0))

    def _at(self, x: float) -> float:
        i, j = bisect_left(self.starts, x), bisect_left(self.ends, x)
        return (i * x - self.start_sums[i]) - (j * x - self.end_sums[j])

    def between(self, a: float, b: float) -> float:
        return self._at(b) - self._at(a)


def _outsider_queues(split, waits: tuple, rows: list, slots: int) -> tuple:
    """((cohort, FIFO waits), ...) for a causal synchronous kernel's cohorts that wait on no
    tensor: the first wave's waiting CTAs move in lockstep trains whose requests reach the
    L2 FIFO together, and a request of another CTA issued meanwhile waits behind them
    (wave_queue.WaveQueue.outsider_waits, measured beside the whole wave). The trains shrink
    as the causal grid's short CTAs end, and with them that wait: each cohort takes the
    waits times the mean share of the wave's waiting CTAs still running over its CTAs'
    time (pass 1's rows: the dispatch with every load a hit)."""
    if not waits:
        return ()
    train = [(r[3], r[4]) for r in rows if r[1] < slots
             and split.of.get(r[1], 0) and split.waits[split.of[r[1]] - 1]]
    if not train:
        return ()
    occupancy = _Occupancy(train)
    busy, inside = defaultdict(float), defaultdict(float)
    for r in rows:
        c = split.of.get(r[1], 0)
        if c and not split.waits[c - 1]:
            busy[c] += r[4] - r[3]
            inside[c] += occupancy.between(r[3], r[4]) / len(train)
    return tuple((split.key(c), tuple((key, w * inside[c] / busy[c]) for key, w in waits))
                 for c in sorted(busy) if busy[c] > 0.0 and inside[c] > 0.0)


def _with_wait_points(schedule, gpu, rates, infos, characterizers, capacity: float,
                      l2_queue: list, cohorts=None, pass1_rows=None) -> tuple:
    """Per kernel, the replay's L2 queue position, or for a lockstep_waves kernel a
    wave_queue.WaitPoints: its wait points' latencies from a short exact simulation of its
    waves, the queue position for every other request (docs/simulator.md, "Lockstep kernels and wait cohorts");
    and the kernels' WaitCohorts (or None), a lockstep kernel's split by wave where its
    waves were simulated (their CTAs take their own wave's wait points). pass1_rows: per
    kernel, pass 1's timeline rows (_outsider_queues)."""
    from .wave_queue import wave_queue
    out = []
    cohorts = list(cohorts or [None] * len(schedule.kernels))
    pass1_rows = pass1_rows or [[] for _ in schedule.kernels]
    for ki, (k, i, c, q) in enumerate(zip(schedule.kernels, infos, characterizers, l2_queue)):
        split = cohorts[ki]
        slots = i.occ * gpu.sm_count
        if lockstep_waves(k, i):
            # cohorts co-run in a different mix in every wave (a KV group's first readers,
            # whose lockstep bursts queue the others' loads): each of the first waves is
            # simulated, up to MIN_PREFIX_WAVES (the replay's least prefix), the last partial
            # one too when that reaches it
            tail = tail_wave_start(k.num_ctas, slots)
            waves = WAVES if split is None else max(WAVES, min(MIN_PREFIX_WAVES,
                                                               ceil(k.num_ctas / slots)))
            wave = wave_queue(k, gpu, rates, c.mma, i.occ, capacity, tail,
                              split.of if split else None, waves=waves,
                              wave_slots=slots if split else 0)
            if split is not None and wave.points:
                cohorts[ki] = split.by_wave(slots, waves)
            out.append(WaitPoints(wave.points, q, wave.tail_points, wave.cohort_points)
                       if wave.points else q)
        elif split is not None:
            # CTAs that wait on a line in flight are released together by its arrival: a
            # cohort that waits for DRAM runs in lockstep, as the kernel's first wave does
            # (its CTAs start together on a cold L2); its wait points come from that wave,
            # and the cohorts that run beside it wait behind its trains on the L2 FIFO
            wave = wave_queue(k, gpu, rates, c.mma, i.occ, capacity, None, split.of, waves=1,
                              outsiders=True)
            points = tuple((ci, p) for ci, p in wave.cohort_points if split.waits[ci - 1])
            waits = _outsider_queues(split, wave.outsider_waits, pass1_rows[ki], slots)
            out.append(WaitPoints((), q, (), points, waits) if points or waits else q)
        else:
            out.append(q)
    return out, cohorts


def simulate_fast(schedule, gpu, l2_effective_fraction: float,
                  l2_sample_budget: int = DEFAULT_SAMPLE_BUDGET, l2_protocol: str = "warm",
                  time_protocol: str | None = None, l2_queue_from_wave: bool = False,
                  reuse: Reuse | None = None):
    """l2_protocol decides the bytes; time_protocol (default: the same) the L2 state the
    timed dispatch sees. Both replays share one placement of the accesses (pass 1).
    reuse: a Reuse of this schedule, to share the clock-independent work with other
    simulations of it (the results are the same with or without). Python's full garbage
    collections wait until it returns (gcpause.py: they found nothing to free and cost
    standard attention's replay a sixth of its time)."""
    with full_collections_deferred():
        return _simulate_fast(schedule, gpu, l2_effective_fraction, l2_sample_budget,
                              l2_protocol, time_protocol, l2_queue_from_wave, reuse)


def _simulate_fast(schedule, gpu, l2_effective_fraction: float, l2_sample_budget: int,
                   l2_protocol: str, time_protocol: str | None, l2_queue_from_wave: bool,
                   reuse: Reuse | None):
    if reuse is not None:
        reuse.check(schedule)
    time_protocol = time_protocol or l2_protocol
    rates = SmRates.of(gpu, schedule.problem.dtype)      # the servers run at the wgmma rate
    infos = [KernelInfo.of(k, gpu, schedule.problem.dtype) for k in schedule.kernels]
    characterizers = [Characterizer(gpu, rates, k.pipeline,
                                    kernel_mma_cost(gpu, schedule.problem, k), info.programs,
                                    gpu.sm_count * info.occ / max(1, k.num_ctas),
                                    min(gpu.sm_count, k.num_ctas / max(1, info.occ)))
                      for k, info in zip(schedule.kernels, infos)]
    n_k = len(schedule.kernels)
    capacity = gpu.l2_capacity_bytes * l2_effective_fraction
    plan = SamplingPlan(schedule, gpu, infos, capacity, l2_sample_budget)

    # pass 1: everything hits in L2; where are the sampled CTAs' segments in time
    # (and the first CTA that is not replayed: when it starts, the counted window ends;
    # every CTA where the tail part is replayed)
    dispatched = [k.num_ctas if a is not None else min(k.num_ctas, n + 1)
                  for k, n, a in zip(schedule.kernels, plan.limits, plan.suffix)]
    timeline, spans, runs = _dispatch_all(schedule, gpu, infos, [{} for _ in range(n_k)],
                                           [0.0] * n_k, characterizers, plan, dispatched,
                                           first_loads_queue=False)
    tail_starts = [tail_wave_start(k.num_ctas, i.occ * gpu.sm_count)
                   for k, i in zip(schedule.kernels, infos)]
    slots = [i.occ * gpu.sm_count for i in infos]
    sampler, times, windows = _l2_sample(schedule, plan, runs, tail_starts, slots, reuse)
    tail_bytes = [_tail_load_bytes(k, i, t) for k, i, t in zip(schedule.kernels, infos,
                                                               tail_starts)]
    pass1_rows = [r.rows for r in runs]
    del runs
    sampling = {"l2_set_sampling_ratio": plan.ratio, "l2_sampled_accesses": len(times),
                "l2_simulated_ctas": [plan.replayed_count(ki, k.num_ctas)
                                      for ki, k in enumerate(schedule.kernels)]}
    figures = {protocol: _scale(infos, replay_trace(times, sampler.keys, sampler.metas,
                                                    sampler.streams, capacity / plan.ratio, n_k,
                                                    gpu.dram_latency_s, protocol,
                                                    dram_read_rate(gpu), windows,
                                                    l2_dirty_capacity_bytes(gpu) / plan.ratio,
                                                    l2_cache(gpu, capacity / plan.ratio,
                                                             plan.ratio)),
                                tail_bytes, plan.ratio)
               for protocol in dict.fromkeys((l2_protocol, time_protocol))}
    del sampler, times
    counted, timed = figures[l2_protocol], figures[time_protocol]
    mems, flush_bytes = counted.memory, counted.flush_bytes

    # pass 2: the same dispatch with the L2's miss ratios and DRAM bytes
    read_shares = _read_shares(timed)
    for c, share in zip(characterizers, read_shares):
        c.dram_read_share = 1.0 if share is None else share
    l2_queue, cohorts = ((_wave_queues(schedule, gpu, rates, infos, characterizers, capacity),
                          None) if l2_queue_from_wave else
                         _with_wait_points(schedule, gpu, rates, infos, characterizers,
                                           capacity, timed.l2_queue, timed.cohorts,
                                           pass1_rows))
    del pass1_rows
    timeline, spans, _ = _dispatch_all(schedule, gpu, infos, timed.miss, timed.dram_store_ratio,
                                       characterizers, lambda ki: False,
                                       cold_start=time_protocol == "ncu",
                                       tail_miss=timed.tail_miss, l2_queue=l2_queue,
                                       store_fill=timed.store_fill, reuse=reuse,
                                       dram_read_shares=read_shares,
                                       cohorts_of=cohorts)
    model = {"l2_effective_fraction": l2_effective_fraction,
             "l2_effective_capacity_bytes": capacity,
             "l2_policy": l2_policy(gpu),
             "l2_protocol": l2_protocol,
             **({"time_protocol": time_protocol} if time_protocol != l2_protocol else {}),
             **sampling,
             "micro_simulations": sum(c.simulations for c in characterizers),
             "cta_classes": [len(i.programs) for i in infos]}
    return _fast_result(schedule, gpu, rates, infos, characterizers, spans, mems, flush_bytes,
                        timeline, model)


def _fast_result(schedule, gpu, rates, infos, characterizers, spans, mems, flush_bytes,
                 timeline, model: dict):
    """The fast run's SimResult: per kernel its span with the replay's counters, the totals
    and the timeline."""
    kernels = [kernel_result(k, gpu, i.rates, s, e, occ,
                             {**asdict(m), "l1_hit_bytes": kernel_l1_hit_bytes(
                                 gpu, k, occ, lambda: _placed_ctas(timeline, ki))}, i.totals,
                             tensor_server_busy_s(k, c.mma, rates.tensor_flops_per_s))
               for ki, (k, (s, e, occ), m, i, c) in enumerate(zip(schedule.kernels, spans, mems,
                                                                    infos, characterizers))]
    total = {"dram_read_bytes": sum(m.dram_read_bytes for m in mems),
             "dram_write_bytes": sum(m.dram_write_bytes for m in mems),
             "dram_write_flush_bytes": flush_bytes,
             "load_hit_bytes": sum(m.load_hit_bytes for m in mems),
             "load_miss_bytes": sum(m.load_miss_bytes for m in mems)}
    return schedule_result("fast", schedule, gpu, kernels, total, timeline, model)
