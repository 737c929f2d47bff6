"""Fast mode, step 1: what one CTA costs on an SM shared with k − 1 others like it.

A *micro-simulation* runs k identical copies of a program segment on one SM with the same
pipeline code as exact mode (pipeline.py), but behind ExpectedMemory (private L2/DRAM servers
at full bandwidth, expected miss latency per tensor). The result is a profile vector per CTA:
[duration_s, memory_stall_s, tensor_stall_s, exp_stall_s, alu_stall_s], the mean over the k
copies.

A program is cut into segments that are profiled separately and summed:
  - a run of plain ops: simulated as is;
  - an innermost Loop: simulated directly when short; otherwise at two truncated counts
    T1 < T2 and extrapolated linearly (a buffered loop settles into a steady period within a
    few iterations, so duration(n) = duration(T1) + (n − T1)·period);
  - a Loop with nested loops: count × profile(body).
Profiles are memoized by the segment's shape (ops without tile coordinates), k and the miss
probabilities, so the work grows with the number of distinct CTA classes, not with N².
"""
from __future__ import annotations

from collections import defaultdict

import simpy

from ..machine import (copy_issue_s_per_byte, store_issue_s_per_byte, cta_turnover_s, dram_read_rate,
                       dram_write_cost_at,
                       reduce_l2_costs, fragment_store_issue_s_per_byte, fragment_store_l2_cost,
                       line_misaligned_dram_factor, tma_epilogue_cost, tma_epilogue_s)
from ..schedule import Loop
from .compute import SmUnits
from .memory import ExpectedMemory, Server, trip_latency_of
from .pipeline import CtaContext, run_program
from .wave_queue import WaitPoints, WaveQueue

VECTOR_LEN = 5   # duration, memory, tensor, exp, alu stall
TRIP_FIXED_POINT_ITERATIONS = 12   # micro-simulations at most per dependent-trip profile
TRIP_UTILIZATION_TOLERANCE = 0.005
STREAM_GENERATIONS = 3   # CTAs per slot of a short kernel's stream; the middle one is measured


def _add(a, b, times=1.0):
    return tuple(x + times * y for x, y in zip(a, b))


ZERO = (0.0,) * VECTOR_LEN


def shape_key(items) -> tuple:
    """The parts of a program that matter for time: ops without coordinates, loop counts."""
    out = []
    for item in items:
        kind = item.kind
        if kind == "loop":
            out.append(("loop", item.count, shape_key(item.body)))
        elif kind == "load":
            out.append(("load", item.tensor, item.bytes, item.oob_bytes, item.line_misaligned,
                        item.round_trips, item.multicast))
        elif kind == "store":
            out.append(("store", item.tensor, item.bytes, item.reduce and item.reduce_layout,
                        item.layout, item.partial_sectors, item.line_misaligned,
                        item.tma_epilogue))
        elif kind == "mma":
            out.append(("mma", item.m, item.n, item.k))
        elif kind == "alu":
            out.append((kind, item.count, item.phase_cycles_per_op, item.barrier_cycles,
                        item.issue_per_op, item.lone_cycles))
        elif kind == "exp":
            out.append((kind, item.count))
    return tuple(out)


def split_segments(program: tuple) -> list:
    """A program as segments: each maximal run of plain ops, and each top-level Loop alone
    (as a 1-tuple). The fluid model and the L2 replay walk CTAs segment by segment."""
    out, plain = [], []
    for item in program:
        if isinstance(item, Loop):
            if plain:
                out.append(tuple(plain))
                plain = []
            out.append((item,))
        else:
            plain.append(item)
    if plain:
        out.append(tuple(plain))
    return out


def openings(points: dict) -> dict:
    """The proper prefixes of the known load wait points (tensor tuples) → the latency of
    the shortest point they open."""
    out: dict = {}
    for tensors, latency_s in sorted(points.items(), key=lambda kv: (len(kv[0]), repr(kv[0]))):
        if tensors and tensors[0] != "store":
            for n in range(1, len(tensors)):
                out.setdefault(tensors[:n], latency_s)
    return out


def _has_dram_trips(items, miss: dict) -> bool:
    """Whether any load in items (nested loops too) is read in dependent round trips from a
    tensor that misses the L2 (Load.round_trips > 1, a DRAM wait fraction above 0)."""
    for it in items:
        if isinstance(it, tuple):
            if _has_dram_trips(it, miss):
                return True
        elif isinstance(it, Loop):
            if _has_dram_trips(it.body, miss):
                return True
        elif (getattr(it, "round_trips", 1) > 1
              and miss.get(it.tensor, (0.0, 0.0))[1] > 0.0):
            return True
    return False


class _WaitPointMemory(ExpectedMemory):
    """ExpectedMemory whose loads of a known wait point (the loads a CTA issues at one
    instant, by their tensors in issue order) take that wait point's latency from exact
    mode's wave (wave_queue.WaitPoints), and whose stores take the wave's time until the L2
    accepted a store of their tensor (key ("store", tensor)); other requests, and anything
    faster on this SM's own servers, as ExpectedMemory's."""

    wait_point_s: dict = {}
    opening_s: dict = {}              # openings(wait_point_s)
    _point: tuple = (None, ())        # the open wait point: (issue time, tensors so far)

    def use_points(self, points: dict) -> None:
        """The wave's wait points (tensors → latency; ("store", tensor) → acceptance)."""
        self.wait_point_s, self.opening_s = points, openings(points)

    def load(self, key, tensor: str, nbytes: int, now_s: float, oob_bytes: int = 0,
             misaligned: bool = False, multicast: int = 1) -> float:
        at, tensors = self._point
        if at != now_s or tensor in tensors:
            tensors = ()
        tensors += (tensor,)
        self._point = (now_s, tensors)
        latency_s = self.wait_point_s.get(tensors)
        if latency_s is None:
            # a load that opens a known wait point (its first tensors): the point's latency
            # (the wave measured issue to last tile over all of its loads)
            latency_s = self.opening_s.get(tensors)
        if latency_s is None:
            return super().load(key, tensor, nbytes, now_s, oob_bytes, misaligned, multicast)
        own_s = (self.l2_server.reserve(now_s, (nbytes + oob_bytes) / multicast)[1]
                 + self.l2_latency_s)
        return max(own_s, now_s + latency_s)

    def store(self, key, tensor: str, nbytes: int, reduce, now_s: float,
              layout: str = "coalesced", partial_sectors: int = 0,
              misaligned: bool = False) -> float:
        self._point = (None, ())
        latency_s = self.wait_point_s.get(("store", tensor))
        accepted = super().store(key, tensor, nbytes, reduce, now_s, layout, partial_sectors,
                                 misaligned)
        return accepted if latency_s is None else max(accepted, now_s + latency_s)


class Characterizer:
    """Profiles of program segments on one SM, for one kernel's pipeline."""

    def __init__(self, gpu, rates, pipeline, mma=None, programs=None,
                 first_wave_share: float = 0.0, active_sms: float | None = None):
        """programs: the kernel's CTA-class programs, where known; when every one is short
        (`_short`) the kernel's co-resident CTAs are profiled as a stream (`_stream`).
        first_wave_share: the fraction of the kernel's CTAs in its first wave (dispatched
        together, so in lockstep on their SMs). active_sms: the SMs the kernel occupies
        (default all): the chip's DRAM utilization a dependent trip sees is theirs
        (ExpectedMemory.trip_latency_s)."""
        self.gpu, self.rates, self.pipe, self.mma = gpu, rates, pipeline, mma
        self.active_sms = gpu.sm_count if active_sms is None else active_sms
        self.trip_latency = trip_latency_of(gpu)
        # the kernel's DRAM bytes that are reads (fast.py sets it from the L2 replay before
        # the timed dispatch; until then no load misses, and a trip's latency is the L2's)
        self.dram_read_share = 1.0
        self.t1 = max(8, 2 * max(1, pipeline.stages) + 4)
        self.t2 = self.t1 + 8
        self.streams = programs is None or all(self._short(p) for p in programs)
        self.first_wave_share = min(1.0, max(0.0, first_wave_share))
        self.memo: dict = {}
        self.simulations = 0

    # ---- one micro-simulation ---------------------------------------------------------
    def _simulate(self, items: tuple, k: int, miss: tuple, stagger_s: float = 0.0) -> tuple:
        """k copies of `items` on one SM, copy i starting at i × stagger_s; the mean over the
        copies of (duration from its own start, stalls)."""
        return self._simulate_stream((items,), k, miss, stagger_s, 1)[0]

    def _simulate_stream(self, segments: tuple, k: int, miss: tuple, stagger_s: float,
                         generations: int, last_end: bool = False) -> list:
        """k slots on one SM, slot i starting at i × stagger_s, each running `generations`
        CTAs back to back, a CTA being `segments` in order; per segment, the mean over the
        measured CTAs of (its duration, stalls). With generations > 2 the measured CTAs are
        the middle ones, which run with every neighbour slot busy (a steady stream); else
        all of them. last_end (one generation): the duration is the last copy's end less the
        last start, (k − 1) × stagger_s, rather than the copies' mean.
        Segments with dependent DRAM trips (Load.round_trips) take the trip latency at the
        chip's DRAM utilization their own stream implies (_trip_fixed_point)."""
        if self.trip_latency is None or not _has_dram_trips(segments, dict(miss[0])):
            return self._run_stream(segments, k, miss, stagger_s, generations, last_end)[0]
        return self._trip_fixed_point(segments, k, miss, stagger_s, generations, last_end)

    def _trip_fixed_point(self, segments, k, miss, stagger_s, generations, last_end) -> list:
        """The stream's profile at the DRAM utilization u it implies: the SMs the kernel
        occupies, each with k CTAs of this profile's duration D, each CTA's DRAM time w (its
        reads at the private server, its share of the kernel's write-backs): u = min(1,
        active_sms · k · w / D), the trips at loaded_trip_latency_s(u); damped iteration from
        u = 0.5 until u moves by less than TRIP_UTILIZATION_TOLERANCE (a few micro-
        simulations: the profile's duration rises with u, so the map falls and the fixed
        point is unique). Exact mode reads the same utilization off its DRAM server as the
        kernel runs (ExactMemory.dram_utilization)."""
        share = max(self.dram_read_share, 1e-9)
        per_read_s = 1.0 + (1.0 - share) / share * dram_write_cost_at(self.gpu, share)
        u, out = 0.5, None
        for _ in range(TRIP_FIXED_POINT_ITERATIONS):
            out, busy_s, ctas = self._run_stream(segments, k, miss, stagger_s, generations,
                                                 last_end, u)
            duration_s = sum(v[0] for v in out)
            implied = (min(1.0, self.active_sms * k * busy_s * per_read_s / ctas / duration_s)
                       if duration_s > 0.0 else 0.0)
            if abs(implied - u) < TRIP_UTILIZATION_TOLERANCE:
                break
            u = 0.5 * (u + implied)
        return out

    def _run_stream(self, segments: tuple, k: int, miss: tuple, stagger_s: float,
                    generations: int, last_end: bool = False,
                    trip_utilization: float = 0.0) -> tuple:
        """One micro-simulation (_simulate_stream); (per-segment profiles, the private DRAM
        server's busy seconds, the CTAs run)."""
        env = simpy.Environment()
        gpu = self.gpu
        units = SmUnits(self.rates)
        miss_items, queue = miss     # queue: the L2 queue position, or a WaveQueue
        fifo = queue.as_dict() if isinstance(queue, WaveQueue) else None
        points = dict(queue.points) if isinstance(queue, WaitPoints) else None
        position = (0.0 if fifo is not None else
                    queue.queue_position if points is not None else queue)
        mem = (ExpectedMemory if points is None else _WaitPointMemory)(
            Server(gpu.l2_bandwidth_bytes_per_s), Server(dram_read_rate(gpu)),
            gpu.l2_latency_s, gpu.dram_latency_s, dict(miss_items), position,
            reduce_l2_costs(gpu), fifo, fragment_store_l2_cost(gpu),
            line_misaligned_dram_factor(gpu), self.trip_latency, trip_utilization,
            self.dram_read_share)
        if points is not None:
            mem.use_points(points)
        copy_s = copy_issue_s_per_byte(self.gpu, self.pipe)
        store_s = store_issue_s_per_byte(self.gpu, self.pipe)
        frag_s = fragment_store_issue_s_per_byte(self.gpu)
        measured = range(1, generations - 1) if generations > 2 else range(generations)
        vecs = [[0.0] * VECTOR_LEN for _ in segments]
        ends = [0.0]

        def slot(i: int):
            if i and stagger_s > 0.0:
                yield env.timeout(i * stagger_s)
            for g in range(generations):
                for vec, items in zip(vecs, segments):
                    ctx = CtaContext(env, units, mem, self.pipe, self.mma, copy_s, store_s,
                                     frag_s, cycle_s=1.0 / self.gpu.clock_hz,
                                     epilogue=tma_epilogue_cost(gpu))
                    start_s = env.now
                    yield from run_program(ctx, items, defaultdict(int))
                    ends[0] = max(ends[0], env.now)
                    if g in measured:
                        vec[0] += env.now - start_s
                        for s in range(4):
                            vec[1 + s] += ctx.stall[s]

        for i in range(k):
            env.process(slot(i))
        env.run()
        self.simulations += 1
        n = k * len(measured)
        out = [tuple(v / n for v in vec) for vec in vecs]
        if last_end and len(out) == 1:
            out[0] = (ends[0] - (k - 1) * stagger_s,) + out[0][1:]
        return out, mem.dram_server.busy_s, k * generations

    def _memo_sim(self, items: tuple, k: int, miss: tuple) -> tuple:
        key = (shape_key(items), k, miss)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._simulate(items, k, miss)
        return hit

    # ---- programs -----------------------------------------------------------------------
    def profile(self, program: tuple, k: int, miss: tuple) -> tuple:
        """Profile vector of a whole CTA program with k co-resident copies."""
        total = ZERO
        for vec in self._segments(program, k, miss):
            total = _add(total, vec)
        return total

    def segment_profiles(self, program: tuple, k: int, miss: tuple,
                         burst_span_s: float = 0.0) -> list:
        """One profile vector per segment of split_segments(program), a whole CTA's
        program: its last segment holds the SM slot `machine.cta_turnover_s` longer (the
        CTA's retirement and the next launch, as exact mode holds it). burst_span_s: over
        how long a first-wave burst spreads the arrival of the first segment's data."""
        out = self._segments(program, k, miss, burst_span_s)
        turnover_s = cta_turnover_s(self.gpu, program)
        if out and turnover_s:
            out[-1] = (out[-1][0] + turnover_s,) + tuple(out[-1][1:])
        # the SM's epilogue path serves the k resident CTAs' epilogues one after another, so
        # a slot's CTAs follow each other no faster than k epilogues (exact mode's FIFO:
        # a tile's epilogue waits for the previous one's drain)
        floor_s = k * tma_epilogue_s(self.gpu, program)
        if out and floor_s > sum(v[0] for v in out):
            short_s = floor_s - sum(v[0] for v in out)
            out[-1] = (out[-1][0] + short_s, out[-1][1] + short_s) + tuple(out[-1][2:])
        return out

    def epilogue_tail_s(self, program: tuple, k: int, miss: tuple) -> float:
        """What exact mode's chain of epilogues on one SM (machine.tma_epilogue_cost) adds once
        at a kernel's end beyond its CTAs' spacing (segment_profiles' floor): the first tile's
        main loop M before the chain starts when the epilogues bind (spacing E), else the
        last drain beyond the CTA, (1 − f)·E − turnover: min of the two, at least 0."""
        e = tma_epilogue_s(self.gpu, program)
        if not e:
            return 0.0
        serial = tma_epilogue_cost(self.gpu)[1]
        main_s = max(0.0, sum(v[0] for v in self._segments(program, k, miss)) - serial * e)
        return max(0.0, min(main_s, (1.0 - serial) * e - cta_turnover_s(self.gpu, program)))

    def _segments(self, program: tuple, k: int, miss: tuple, burst_span_s: float = 0.0) -> list:
        if k > 1 and self.streams and self.first_wave_share < 1.0 and self._short(program):
            return self._stream_or_lockstep(program, k, miss, burst_span_s)
        return self._lockstep(program, k, miss, burst_span_s)

    def _lockstep(self, program: tuple, k: int, miss: tuple, burst_span_s: float) -> list:
        """Each segment on its own, the k copies of a loop started together."""
        drains = self.drains(program)
        return [self._loop(seg[0], k, miss) if len(seg) == 1 and isinstance(seg[0], Loop)
                else self._plain(seg, k, miss, burst_span_s if i == 0 else 0.0, drains)
                for i, seg in enumerate(split_segments(program))]

    def _short(self, program: tuple) -> bool:
        """A CTA without a loop long enough to settle into a steady period (nor nested loops):
        its segments run once per CTA, so co-resident CTAs are neither in lockstep nor alone.
        Streamed only in a kernel of short CTAs: in a grid of mostly long ones (a causal
        grid's first query blocks) a short CTA's neighbours are long CTAs, which a stream of
        copies of itself does not describe."""
        return all(not isinstance(item, Loop) or
                   (item.count < self.t1 and not any(isinstance(i, Loop) for i in item.body))
                   for item in program)

    def _stream_or_lockstep(self, program: tuple, k: int, miss: tuple,
                            burst_span_s: float) -> list:
        """A short CTA's profiles: its first-wave share as the lockstep copies (the first wave
        is dispatched together), the rest as the stream; weighted by CTA count."""
        stream = self._stream(program, k, miss)
        f = self.first_wave_share
        if f <= 0.0:
            return stream
        return [tuple(f * a + (1.0 - f) * b for a, b in zip(x, y))
                for x, y in zip(self._lockstep(program, k, miss, burst_span_s), stream)]

    def _stream(self, program: tuple, k: int, miss: tuple) -> list:
        """A short CTA's segment profiles with k co-resident: a steady stream of whole CTAs on
        k slots out of phase (slot i starts i/k of a solo CTA late), STREAM_GENERATIONS CTAs
        each; the middle CTAs' per-segment means. A long loop settles whatever the phases
        (the lockstep copies of _loop); a short CTA's cost depends on what its neighbours do
        meanwhile, and after the first waves exact mode's slots on an SM are out of phase
        (docs/fast_mode_accuracy.md)."""
        key = (shape_key(program), k, miss, "stream")
        hit = self.memo.get(key)
        if hit is None:
            solo = sum(v[0] for v in self._segments(program, 1, miss))
            hit = self.memo[key] = self._simulate_stream(tuple(split_segments(program)), k, miss,
                                                         solo / k, STREAM_GENERATIONS)
        return list(hit)

    def drains(self, program: tuple) -> bool:
        """Whether a CTA's profiles are its SM's one-wave group's drain (_plain): a kernel of
        one wave, a program of plain ops only."""
        return self.first_wave_share >= 1.0 and not any(isinstance(i, Loop) for i in program)

    def _plain(self, items: tuple, k: int, miss: tuple, burst_span_s: float,
               drains: bool = False) -> tuple:
        """A run of plain ops runs once per CTA, so its k co-resident copies are not assumed
        to start together: they are staggered evenly over one solo duration (CTAs of a
        steady stream) or over the burst span, whichever is longer (a first wave whose
        FIFO loads spread the CTAs' data over the span). drains (a kernel of one wave of
        loop-free CTAs, `drains`): the copies' group drain instead."""
        if k == 1:
            return self._memo_sim(items, 1, miss)
        if drains:
            # the whole kernel is its first wave: each slot runs one CTA, dispatched together
            # and spread only by the burst, and the kernel ends with its SM's last CTA, not
            # its mean one (the copies share the SM's units in arrival order)
            stagger = burst_span_s / k
            key = (shape_key(items), k, miss, stagger, "last")
            hit = self.memo.get(key)
            if hit is None:
                hit = self.memo[key] = self._simulate_stream((items,), k, miss, stagger, 1,
                                                             last_end=True)[0]
            return hit
        solo = self._memo_sim(items, 1, miss)[0]
        stagger = max(solo, burst_span_s) / k
        key = (shape_key(items), k, miss, stagger)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._simulate(items, k, miss, stagger)
        return hit

    def _loop(self, loop: Loop, k: int, miss: tuple) -> tuple:
        if any(isinstance(i, Loop) for i in loop.body):
            return _add(ZERO, self.profile(loop.body, k, miss), loop.count)
        n = loop.count
        if n < self.t1:
            return self._memo_sim((loop,), k, miss)
        short = self._memo_sim((Loop(loop.var, 0, self.t1, loop.body),), k, miss)
        long = self._memo_sim((Loop(loop.var, 0, self.t2, loop.body),), k, miss)
        slope = tuple((b - a) / (self.t2 - self.t1) for a, b in zip(short, long))
        return _add(short, slope, n - self.t1)
