"""Fast mode: the L2 FIFO queueing of a kernel's CTAs, from a short exact simulation of its wave.

Exact mode's L2↔SM port is one FIFO server shared by every SM. CTAs that run in lockstep
(released together by a shared line's arrival, or simply the same loop on every SM) reach it
together and queue behind one another even when the port is not saturated on average; a
saturated port queues every request behind the others' bytes. The fast mode's micro-
simulations see one SM on private servers, so they cannot produce that queueing; the fluid
model only slows CTAs once the mean demand exceeds the bandwidth.

So the queueing is taken from the mechanism itself: the kernel's first wave (its first
min(num_ctas, ctas_per_sm × sm_count) CTAs, the CTAs that share the machine in the kernel's
steady state) runs in the exact engine's own pieces (memory.ExactMemory behind the tile LRU,
the shared FIFO servers, pipeline.run_program on per-SM units), with every loop cut to
WAVE_ITERATIONS iterations. Per tensor, the mean time a load or store of a CTA's loops waits
on the L2 FIFO before its own transfer starts (server.free_s − issue time, exactly what
exact mode's loads wait), over the iterations after the first WARMUP_ITERATIONS and before the
last DRAIN_ITERATIONS (the start's burst is first_wave.py's; the end drains the queue).
Those waits go to the micro-simulations' memory (memory.ExpectedMemory.l2_fifo_wait_s): a
load's transfer starts no earlier than its issue plus its tensor's wait (opt-in).

The same wave also gives each wait point's latency (the loads a CTA issues at one instant,
keyed by their tensors in issue order: from issue to the last tile, exact mode's max over
them; a store's: until the L2 accepted it), over the same settled iterations, and apart over the CTAs of the kernel's last partial
wave where simulated: WaitPoints, which the fast mode uses for synchronous kernels whose
CTAs run in lockstep (lockstep.lockstep_waves; docs/simulator.md).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import simpy

from ..machine import (copy_issue_s_per_byte, cta_turnover_s, fragment_store_issue_s_per_byte,
                       store_issue_s_per_byte, tma_epilogue_cost)
from ..schedule import Loop
from .compute import SmUnits
from .dispatch import SlotPicker, launch_ready
from .memory import ExactMemory, exact_memory
from .pipeline import CtaContext, run_program

WAVE_ITERATIONS = 12     # loop iterations each wave CTA runs (4 warm-up, 6 counted, 2 drain)
WARMUP_ITERATIONS = 4    # first iterations not counted (the dispatch burst, pipeline fill)
DRAIN_ITERATIONS = 2     # last iterations not counted (CTAs leave, the queue drains)
WAVES = 3                # waves simulated; the first (a lockstep transient) is not counted


def truncated(items: tuple, count: int) -> tuple:
    """A program with every loop cut to at most `count` iterations (nested loops too)."""
    out = []
    for it in items:
        if isinstance(it, Loop):
            out.append(Loop(it.var, it.start, min(it.count, count), truncated(it.body, count)))
        else:
            out.append(it)
    return tuple(out)


class _Recorder:
    """One CTA's memory front end in the wave: forwards to the shared ExactMemory and records,
    per (kind, tensor), each request's FIFO wait in issue order."""

    __slots__ = ("mem", "waits", "issued", "points", "_point")

    def __init__(self, mem: ExactMemory):
        self.mem = mem
        self.waits = defaultdict(list)
        self.issued = defaultdict(list)   # the same requests' issue times
        self.points = defaultdict(list)   # wait point's tensors → issue-to-last-tile latencies
        self._point = None                # the open wait point: [issue_s, tensors, ready_s]

    def load(self, key, tensor, nbytes, now_s, oob_bytes=0, misaligned=False, multicast=1):
        self.waits["load", tensor].append(max(0.0, self.mem.l2_server.free_s - now_s))
        self.issued["load", tensor].append(now_s)
        ready = self.mem.load(key, tensor, nbytes, now_s, oob_bytes, misaligned, multicast)
        point = self._point
        if point is None or point[0] != now_s or tensor in point[1]:
            self.close()
            point = self._point = [now_s, (), ready]
        point[1] += (tensor,)
        point[2] = max(point[2], ready)
        return ready

    def trip_latency_s(self, key, tensor, now_s) -> float:
        return self.mem.trip_latency_s(key, tensor, now_s)

    def close(self) -> None:
        """End the open wait point (its loads were issued together): record its latency."""
        if self._point is not None:
            now_s, tensors, ready = self._point
            self.points[tensors].append(ready - now_s)
            self._point = None

    def store(self, key, tensor, nbytes, reduce, now_s, layout="coalesced", partial_sectors=0,
              misaligned=False):
        self.close()
        self.waits["store", tensor].append(max(0.0, self.mem.l2_server.free_s - now_s))
        self.issued["store", tensor].append(now_s)
        accepted = self.mem.store(key, tensor, nbytes, reduce, now_s, layout, partial_sectors,
                                  misaligned)
        self.points["store", tensor].append(accepted - now_s)
        return accepted


@dataclass(frozen=True)
class WaveQueue:
    """(kind, tensor) → mean L2 FIFO wait in seconds of a settled loop iteration's request
    (kind "load" or "store"), from the kernel's wave; requests outside loops are not in it."""

    waits: tuple          # sorted ((kind, tensor), wait_s) pairs: hashable, a memo key
    points: tuple = ()    # sorted ((tensors, ...), latency_s): a wait point's mean latency;
                          # (("store", tensor), latency_s): until the L2 accepts a store
    tail_points: tuple = ()   # the same over the CTAs of the last partial wave, if simulated
    cohort_points: tuple = ()  # ((cohort, points), ...): the same over each cohort's CTAs
    outsider_waits: tuple = ()  # like waits, of CTAs launched while the waves run
                                # (wave_queue(outsiders=True))

    def as_dict(self) -> dict:
        return dict(self.waits)


@dataclass(frozen=True)
class WaitPoints:
    """A kernel's wait points' mean latencies from its wave (WaveQueue.points) and the
    replay's L2 queue position for every other request."""

    points: tuple
    queue_position: float
    tail_points: tuple = ()   # the last partial wave's, where the wave simulated it
    cohort_points: tuple = ()  # ((cohort, points), ...): of each WaitCohorts cohort's CTAs
    cohort_waits: tuple = ()   # ((cohort, WaveQueue.waits), ...): FIFO waits of a cohort
                               # that runs beside the waves' lockstep (fast._outsider_queues)

    def cohort(self, c: int):
        """What a CTA of cohort c (wait_cohorts.WaitCohorts; 0: the kernel's other CTAs) uses: its
        cohort's FIFO waits where given (a WaveQueue), else its cohort's wait points where
        the wave simulation ran CTAs of it, else the kernel's, else (none: a kernel whose
        waves are not in lockstep) the replay's queue position."""
        waits = dict(self.cohort_waits).get(c)
        if waits:
            return WaveQueue(waits)
        points = self.points
        if c:
            by = dict(self.cohort_points)
            points = by.get(c) or (by.get(c[0]) if isinstance(c, tuple) else None) \
                or self.points
        return WaitPoints(points, self.queue_position, self.tail_points) if points \
            else self.queue_position

    def tail(self):
        """What the last partial wave's CTAs use: its own wait points where the wave
        simulation ran them, else the replay's queue position (they share their tiles with
        fewer CTAs than a full wave's)."""
        return WaitPoints(self.tail_points, self.queue_position) if self.tail_points \
            else self.queue_position


def wave_queue(kernel, gpu, rates, mma, ctas_per_sm: int, l2_capacity_bytes: float,
               tail_start: int | None = None, cohort_of: dict | None = None,
               waves: int = WAVES, wave_slots: int = 0, outsiders: bool = False) -> WaveQueue:
    """Simulate the kernel's first waves, loops cut to WAVE_ITERATIONS, in exact mode's pieces
    (`waves` of them, cold L2 of the given capacity); the mean FIFO waits of its loops' requests and the mean
    latencies of their wait points (loads issued together), the CTAs from tail_start (the
    last partial wave, when simulated) apart; with cohort_of (cta → cohort, wait_cohorts.WaitCohorts)
    also each cohort's, over its CTAs in the counted waves, else in the first wave, and with
    wave_slots each cohort's in each wave of wave_slots CTAs (launch order), key (cohort,
    wave). outsiders: the slots that the simulated waves' short CTAs free are refilled in
    launch order until a CTA whose loop was cut ends, and the refills' FIFO waits are
    measured while the waves run (WaveQueue.outsider_waits; the refills count nowhere else)."""
    env = simpy.Environment()
    mem = exact_memory(gpu, l2_capacity_bytes)
    sms = [SmUnits(rates) for _ in range(gpu.sm_count)]
    copy_s = copy_issue_s_per_byte(gpu, kernel.pipeline)
    store_s = store_issue_s_per_byte(gpu, kernel.pipeline)
    frag_s = fragment_store_issue_s_per_byte(gpu)
    picker = SlotPicker(gpu.sm_count, ctas_per_sm)
    slots = ctas_per_sm * gpu.sm_count
    n = min(kernel.num_ctas, waves * slots)
    counted_from = slots if n > slots else 0
    recorders, refills = [], []
    state = {"next": 0, "limit": kernel.num_ctas if outsiders else n}

    def cta(c: int, sm: int):
        program = truncated(kernel.program(c), WAVE_ITERATIONS)
        rec = _Recorder(mem)
        if c >= n:
            refills.append(rec)
        elif c >= counted_from or cohort_of is not None:
            recorders.append((c, (rec, program)))
        ctx = CtaContext(env, sms[sm], rec, kernel.pipeline, mma, copy_s, store_s, frag_s,
                         cycle_s=1.0 / gpu.clock_hz, epilogue=tma_epilogue_cost(gpu))
        yield from run_program(ctx, program, {})
        if c < n and _cut(program):
            state["limit"] = n            # the waves' loops end here: no more refills
        turnover_s = cta_turnover_s(gpu, program)
        if turnover_s:
            yield env.timeout(turnover_s)
        picker.release(sm)
        launch()

    def launch():
        launch_ready(env, picker, state, max(n, min(state["limit"], kernel.num_ctas)), cta)

    launch()
    env.run()
    total, count = defaultdict(float), defaultdict(int)
    points = [(defaultdict(float), defaultdict(int)) for _ in range(2)]   # body, tail
    tail = kernel.num_ctas if tail_start is None else tail_start
    by_cohort = defaultdict(lambda: (defaultdict(float), defaultdict(int)))
    for c, (rec, program) in recorders:
        rec.close()
        if cohort_of is not None and c < tail:
            _add_points(by_cohort[cohort_of.get(c, 0), c >= counted_from], rec, program,
                        c >= slots)
            if wave_slots:
                _add_points(by_cohort[(cohort_of.get(c, 0), c // wave_slots), True], rec,
                            program, c >= slots)
        if c < counted_from:
            continue
        if c < tail:
            for key, waits in rec.waits.items():
                for w in _settled(waits, _loop_iterations(program)):
                    total[key] += w
                    count[key] += 1
        _add_points(points[c >= tail], rec, program, c >= slots)
    means = [_means(p) for p in points]
    cohorts = sorted({k for k, _ in by_cohort}, key=repr)
    per_cohort = tuple((k, _means(by_cohort[k, True]) or _means(by_cohort[k, False]))
                       for k in cohorts)
    return WaveQueue(tuple(sorted((key, total[key] / count[key]) for key in count)), *means,
                     tuple((k, p) for k, p in per_cohort if p),
                     _outsider_waits(recorders, refills) if outsiders else ())


def _outsider_waits(recorders: list, refills: list) -> tuple:
    """Sorted ((kind, tensor), mean FIFO wait) of the refills' requests issued while every
    cut CTA of the simulated waves is in its settled iterations (after its first
    WARMUP_ITERATIONS, before its last DRAIN_ITERATIONS; the union of their spans where
    they do not overlap)."""
    firsts, lasts = [], []
    for _c, (rec, program) in recorders:
        if not _cut(program):
            continue
        iterations = _loop_iterations(program)
        for key, issued in rec.issued.items():
            settled = _settled(issued, iterations)
            if settled:
                firsts.append(settled[0])
                lasts.append(settled[-1])
    if not firsts:
        return ()
    lo, hi = max(firsts), min(lasts)
    if lo >= hi:
        lo, hi = min(firsts), max(lasts)
    total, count = defaultdict(float), defaultdict(int)
    for rec in refills:
        for key, waits in rec.waits.items():
            for t, w in zip(rec.issued[key], waits):
                if lo <= t <= hi:
                    total[key] += w
                    count[key] += 1
    return tuple(sorted((key, total[key] / count[key]) for key in count))


def _add_points(acc: tuple, rec: _Recorder, program: tuple, later_wave: bool) -> None:
    """Add a CTA's wait point latencies of its settled iterations to (totals, counts); of
    every iteration for a CTA after the first wave whose program no loop was cut of (its
    iterations are the kernel's own, first and last ones included, not stand-ins for a
    longer loop's middle; a first-wave CTA's first loads are the start's burst, which the
    fast mode charges apart: first_wave.py)."""
    p_total, p_count = acc
    whole = later_wave and not _cut(program)
    for key, lat in rec.points.items():
        for w in (lat if whole else _settled(lat, _loop_iterations(program))):
            p_total[key] += w
            p_count[key] += 1


def _cut(program: tuple) -> bool:
    """Whether truncated() cut a loop of this (truncated) program: one of WAVE_ITERATIONS
    iterations may have been longer (conservative: exactly WAVE_ITERATIONS counts as cut)."""
    return any(isinstance(it, Loop) and (it.count >= WAVE_ITERATIONS or _cut(it.body))
               for it in program)


def _means(acc: tuple) -> tuple:
    """Sorted (key, mean) pairs of (totals, counts)."""
    t, n = acc
    return tuple(sorted((key, t[key] / n[key]) for key in n))


def _loop_iterations(program: tuple) -> int:
    """Iterations of a program's loops (nested loops: the outermost counts), in all."""
    return sum(it.count for it in program if isinstance(it, Loop))


def _settled(waits: list, iterations: int) -> list:
    """The requests of a CTA's settled iterations: a tensor requested r times over `iterations`
    loop iterations is requested r / iterations times per iteration; drop the first
    WARMUP_ITERATIONS and the last DRAIN_ITERATIONS iterations' worth. A request made fewer
    times than every other iteration (outside the loops) is not counted."""
    r = len(waits)
    kept = iterations - WARMUP_ITERATIONS - DRAIN_ITERATIONS
    if kept <= 0 or 2 * r < iterations:
        return []
    per = r / iterations
    return waits[round(WARMUP_ITERATIONS * per): round((iterations - DRAIN_ITERATIONS) * per)]
