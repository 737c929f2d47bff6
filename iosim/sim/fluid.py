"""Fast mode, step 2: CTAs of one kernel through the SMs, with a fluid model of the shared
bandwidths.

A CTA is a sequence of segments (characterize.split_segments: runs of plain ops, loops). For
every residency k = 1..occupancy each segment has an intrinsic profile (duration and stalls
when k CTAs share the SM, from characterize.py) and known L2 and DRAM bytes. A running CTA
advances through its current segment as a fraction p ∈ [0, 1] at rate 1/D_k, where k is its
SM's current residency: when a neighbour leaves or arrives, the rate changes. All CTAs share
the L2↔SM and DRAM bandwidths: with demand = Σ bytes_seg / D_seg over running CTAs, every CTA
is slowed by the same factor s = min(1, B_l2 / demand_l2, B_dram / demand_dram) (the fluid
limit of saturated servers). Virtual time V advances at 1 per intrinsic second, real time at
dV / s.

Bursts: CTAs dispatched at the same instant (a kernel's first wave, or a group freed at
once) issue their first segment's loads (e.g. Q) together; in exact mode's FIFO servers the
last of them waits for all the others. For such a group the first segment's bytes are
reserved on FIFO copies of the L2 and DRAM servers, in launch order, and each CTA's queueing
delay is added to its first segment (whose bytes then stay out of the fluid demand); the
stagger this creates is what makes the end of a kernel ragged. A CTA dispatched alone puts its
first segment into the fluid demand like any other.

Steady state: the model is deterministic, and a kernel's CTA classes repeat along the launch
order (Kernel.class_period). When the whole state at the dispatch of CTA c + P (every resident
CTA's class, SM, segment, progress and rates; the burst queues) equals the state at the
dispatch of CTA c shifted by a time T, the kernel is periodic from there on: every later
period repeats the one between the two states, P CTAs and T seconds later. The model then
skips the periods up to the kernel's last few and records them as a `Repeat` of the rows that
period emitted. So the cost is O(CTAs of the transients), not O(CTAs): the periods are found,
not assumed; a kernel that never settles is walked CTA by CTA.

Store fill: a kernel's first stores fill the L2 before any dirty line is written back; until
its CTAs have stored `fill_bytes` (fast.StoreFill) the segments' DRAM demand is
ClassCosts.dram_bytes_fill, then dram_bytes (with write-backs). A burst's CTAs whose first
segment's stores go past the fill (counting the stores of the CTAs queued before them in the
burst) reserve that share of their write-backs too, as exact mode's stores past the fill
write back, and wait for room in its bounded write queue. No steady state is sought before the
fill has ended.

Events are segment completions (a heap keyed by virtual finish time) and dispatches
(dispatch.py).
"""
from __future__ import annotations

import heapq
from collections import deque
from heapq import heappush
from dataclasses import dataclass

from .dispatch import SlotPicker
from .memory import Server

TIE = 1e-12              # completions within this relative virtual time are simultaneous
STATE_TOLERANCE = 1e-9   # two states are equal when their times differ by less than this
                         # fraction of the period (float rounding, not modelling)
PERIOD_LAGS = 4          # a state is compared with the last 4 period boundaries


@dataclass(frozen=True)
class ClassCosts:
    """What the fluid model needs of one CTA class (all per segment of split_segments)."""

    profiles: tuple      # [k - 1][segment] = (duration_s, memory, tensor, exp, alu stall_s)
    l2_bytes: tuple      # L2↔SM bytes
    dram_bytes: tuple    # expected DRAM bytes
    dram_wait: tuple     # fraction of the load bytes that wait for DRAM
    burst_first: bool    # the first segment is plain ops (a dispatched group issues it at once)
    dram_bytes_fill: tuple = ()   # expected DRAM bytes while the kernel's stores fill the L2
    stored_bytes: tuple = ()      # bytes stored (with dram_bytes_fill: the kernel has a fill)
    # the profiles are a one-wave group's drain (characterize: a kernel of one wave whose CTAs
    # have no loop; its SM ends with its last CTA): a neighbour's end does not shorten them
    drains: bool = False

    def merged(self) -> "ClassCosts":
        """The class as one segment: a CTA dispatched alone runs its segments merged (fewer
        events; its phases matter only when many CTAs are in the same phase at once)."""
        fill = ((sum(self.dram_bytes_fill),), (sum(self.stored_bytes),)) if self.stored_bytes \
            else ()
        return ClassCosts(tuple((tuple(sum(v[i] for v in segs) for i in range(5)),)
                                for segs in self.profiles),
                          (sum(self.l2_bytes),), (sum(self.dram_bytes),), (0.0,), False, *fill,
                          drains=self.drains)

    def segment_fractions(self) -> list:
        """Segment ends as fractions of the merged duration (residency 1)."""
        total, acc, out = sum(v[0] for v in self.profiles[0]), 0.0, []
        for v in self.profiles[0]:
            acc += v[0]
            out.append(acc / total if total > 0 else 1.0)
        return out


@dataclass(frozen=True)
class FluidMachine:
    sm_count: int
    ctas_per_sm: int
    l2_bandwidth_bytes_per_s: float
    dram_bandwidth_bytes_per_s: float
    dram_latency_s: float


@dataclass(frozen=True)
class Repeat:
    """Rows first..last − 1 (in emission order) of a kernel run, repeated `times` more times,
    copy k (1..times) k·cta_step CTAs and k·time_step_s seconds later."""

    first: int
    last: int
    times: int
    cta_step: int
    time_step_s: float


@dataclass
class KernelRun:
    end_s: float
    repeats: list        # of Repeat


class _Cta:
    """A running CTA: its class and SM, the current segment, progress p and duration at the
    current residency, the virtual time p was last brought up to date, its accumulated
    intrinsic time and stalls, the first-segment extra delay of a burst, its segment ends."""

    __slots__ = ("cls", "sm", "p", "v_updated", "duration", "finish_v", "version", "start_s",
                 "intrinsic_s", "stall", "k", "seg", "extra_s", "marks", "burst", "costs")

    def __init__(self, cls: int, sm: int, v_now: float, t_now: float, costs: ClassCosts):
        self.cls, self.sm, self.costs = cls, sm, costs
        self.p, self.v_updated, self.duration, self.finish_v = 0.0, v_now, 0.0, 0.0
        self.version, self.start_s, self.intrinsic_s = 0, t_now, 0.0
        self.stall = [0.0, 0.0, 0.0, 0.0]
        self.k, self.seg, self.extra_s, self.marks, self.burst = 0, 0, 0.0, [], False


@dataclass(frozen=True)
class _State:
    """The model's state at a period boundary, relative to its clock (for comparison)."""

    next_cta: int
    t_now: float
    emitted: int
    discrete: tuple
    times: tuple


class FluidKernel:
    """One kernel's run. costs[c]: class c's ClassCosts; class_of(cta) → class;
    periodic_below: class_of repeats with period class_period for CTAs below it."""

    def __init__(self, n: int, class_of, costs: list, machine: FluidMachine, start_s: float,
                 emit, want_marks: bool = True, prologues=None, class_period: int = 0,
                 periodic_below: int = 0, fill_bytes: float | None = None):
        self.n, self.class_of, self.costs, self.m = n, class_of, costs, machine
        # while the kernel's first `fill_bytes` stored bytes fill the L2, stores cost DRAM
        # only their reductions' reads (ClassCosts.dram_bytes_fill); then write-backs begin
        self.filling, self.fill_bytes, self.stored = fill_bytes is not None, fill_bytes, 0.0
        self.merged = [c.merged() for c in costs]
        self.fractions = [c.segment_fractions() for c in costs]
        self.emit, self.want_marks, self.prologues = emit, want_marks, prologues
        self.picker = SlotPicker(machine.sm_count, machine.ctas_per_sm)
        self.l2_burst = Server(machine.l2_bandwidth_bytes_per_s)
        self.dram_burst = Server(machine.dram_bandwidth_bytes_per_s)
        self.residents = [[] for _ in range(machine.sm_count)]
        self.state: dict = {}
        self.heap: list = []
        self.v_now, self.t_now, self.end_s = 0.0, start_s, start_s
        self.demand = [0.0, 0.0]
        self.scale = 1.0
        self.next_cta = 0
        self.emitted = 0
        self.repeats: list = []
        slots = machine.sm_count * machine.ctas_per_sm
        self.period = 0
        if class_period > 0 and periodic_below > 0:
            self.period = class_period * max(1, -(-slots // class_period))
        self.periodic_below = periodic_below
        self.boundaries: deque = deque(maxlen=PERIOD_LAGS)
        self.last_boundary = -1

    # ---- one CTA's rates --------------------------------------------------------------
    def seg_bytes(self, st: _Cta) -> tuple:
        """(L2, DRAM) bytes of the current segment that enter the fluid demand (a burst CTA's
        first segment went through the burst servers)."""
        seg = st.seg
        if seg == 0 and st.burst:
            return 0.0, 0.0
        c = st.costs        # dram_of, inlined
        return c.l2_bytes[seg], (c.dram_bytes_fill[seg] if self.filling else c.dram_bytes[seg])

    def dram_of(self, costs: ClassCosts, seg: int) -> float:
        return costs.dram_bytes_fill[seg] if self.filling else costs.dram_bytes[seg]

    def end_fill(self) -> None:
        """The stores have filled the L2: every running segment's DRAM demand switches to
        its figure with write-backs (the rates stay; the shared scale follows)."""
        demand = self.demand
        for st in self.state.values():
            before = self.seg_bytes(st)[1]
            self.filling = False
            after = self.seg_bytes(st)[1]
            self.filling = True
            if st.duration > 0.0:
                demand[1] += (after - before) / st.duration
        self.filling = False

    def advance(self, st: _Cta) -> None:
        """Bring progress of the current segment up to v_now (at the old rate)."""
        v_now = self.v_now
        dp = (v_now - st.v_updated) / st.duration
        if dp > 0.0:
            st.p += dp
            prof = st.costs.profiles[st.k - 1][st.seg]
            st.intrinsic_s += dp * st.duration
            acc = st.stall
            acc[0] += dp * prof[1]
            acc[1] += dp * prof[2]
            acc[2] += dp * prof[3]
            acc[3] += dp * prof[4]
        st.v_updated = v_now

    def set_rate(self, cta: int, st: _Cta) -> None:
        """Switch the CTA's current segment to the SM's residency; reschedule its finish.
        (seg_bytes and advance inlined, the same arithmetic: the model's innermost step.)"""
        seg, c = st.seg, st.costs
        if seg == 0 and st.burst:
            b_l2 = b_dram = 0.0
        else:
            b_l2 = c.l2_bytes[seg]
            b_dram = c.dram_bytes_fill[seg] if self.filling else c.dram_bytes[seg]
        demand, v_now = self.demand, self.v_now
        duration = st.duration
        if duration > 0.0:
            dp = (v_now - st.v_updated) / duration          # advance(st)
            if dp > 0.0:
                st.p += dp
                prof = c.profiles[st.k - 1][seg]
                st.intrinsic_s += dp * duration
                acc = st.stall
                acc[0] += dp * prof[1]
                acc[1] += dp * prof[2]
                acc[2] += dp * prof[3]
                acc[3] += dp * prof[4]
            demand[0] -= b_l2 / duration
            demand[1] -= b_dram / duration
        k = len(self.residents[st.sm])
        if c.drains and st.k > k:
            # its profile is its SM's group's drain already (ClassCosts.drains)
            k = st.k
        st.k = k
        extra_s = st.extra_s
        d = c.profiles[k - 1][seg][0] + (extra_s if seg == 0 and extra_s > 0 else 0.0)
        st.duration = duration = d if d > 0.0 else 1e-18
        st.v_updated = v_now
        demand[0] += b_l2 / duration
        demand[1] += b_dram / duration
        st.version = version = st.version + 1
        remaining = 1.0 - st.p
        st.finish_v = finish_v = v_now + (remaining if remaining > 0.0 else 0.0) * duration
        heappush(self.heap, (finish_v, cta, version))

    def rescale(self) -> None:
        s = 1.0
        demand, m = self.demand, self.m
        if demand[0] > 0.0 and m.l2_bandwidth_bytes_per_s < demand[0] * s:
            s = m.l2_bandwidth_bytes_per_s / demand[0]
        if demand[1] > 0.0 and m.dram_bandwidth_bytes_per_s < demand[1] * s:
            s = m.dram_bandwidth_bytes_per_s / demand[1]
        self.scale = s

    # ---- dispatch ---------------------------------------------------------------------
    def dispatch(self) -> set:
        if self.next_cta >= self.n or not self.picker.free:      # nothing to dispatch
            return set()
        touched = set()
        group, ctas = [], []
        picker, n, class_of, merged = self.picker, self.n, self.class_of, self.merged
        state, residents, v_now, t_now = self.state, self.residents, self.v_now, self.t_now
        cta = self.next_cta
        while cta < n and picker.free:          # pick() is None exactly when none is free
            sm = picker.pick()
            cls = class_of(cta)
            st = _Cta(cls, sm, v_now, t_now, merged[cls])
            state[cta] = st
            residents[sm].append(cta)
            touched.add(sm)
            group.append(st)
            ctas.append(cta)
            cta += 1
        self.next_cta = cta
        # dispatched together, or while an earlier burst is still queued: their first loads
        # queue in FIFO order (behind that burst)
        t_now = self.t_now
        if len(group) > 1 or (group and (self.l2_burst.free_s > t_now
                                         or self.dram_burst.free_s > t_now)):
            queued_stores = 0.0
            for st in group:
                c = self.costs[st.cls]
                if c.burst_first:
                    dram = self.dram_of(c, 0)
                    if self.filling and c.stored_bytes and c.stored_bytes[0] > 0.0:
                        # the group's stores past the L2's fill write back (their share)
                        own = c.stored_bytes[0]
                        past = self.stored + queued_stores + own - self.fill_bytes
                        if past > 0.0:
                            dram += (min(past, own) / own) * (c.dram_bytes[0]
                                                              - c.dram_bytes_fill[0])
                        queued_stores += own
                    dram_s = self.dram_burst.reserve(t_now, dram)[0] - t_now
                    wait = max(self.l2_burst.reserve(t_now, c.l2_bytes[0])[0] - t_now,
                               c.dram_wait[0] * dram_s)
                    st.burst, st.extra_s, st.stall[0] = True, wait, wait
                    st.costs = c
            if self.prologues:
                self.prologue_waits(group, ctas)
        return touched

    def prologue_waits(self, group, ctas) -> None:
        """A first-wave CTA's first loop loads (first_wave.first_wave_prologues) queue behind
        everything reserved before them: issued at dispatch when the program starts with
        the loop, else when its burst segment is done. A tile's first reader in the group
        fetches it from DRAM, later readers wait for that fetch (a hit on a line in flight).
        The delay beyond what the loop's profile charges is added to the first segment."""
        dram_lat = self.m.dram_latency_s
        l2_burst, dram_burst = self.l2_burst, self.dram_burst
        fetched = {}                 # tile → when its DRAM fetch completes
        for cta, st in zip(ctas, group):
            entry = self.prologues.get(cta)
            if entry is None:
                continue
            after_burst, tiles = entry
            if after_burst:
                if not st.burst:
                    continue
                k = len(self.residents[st.sm])
                issue = self.t_now + st.extra_s + self.costs[st.cls].profiles[k - 1][0][0]
            else:
                issue = self.t_now
            waited = [t for t in tiles if t.waited]
            nbytes = sum(t.bytes for t in waited)
            ready = l2_burst.reserve(issue, nbytes)[1]
            modelled = issue + nbytes / l2_burst.rate      # the profile's own transfer ...
            l2_burst.reserve(issue, sum(t.bytes for t in tiles if not t.waited))  # no wait
            for t in tiles:
                if not t.bytes:      # a box wholly past the tensor's edge: no DRAM
                    continue
                done = fetched.get(t.key)
                if done is None and t.fetch > 0.0:
                    done = fetched[t.key] = dram_burst.reserve(issue, t.fetch * t.bytes)[1] + dram_lat
                if t.waited:
                    # ... and expected DRAM wait
                    modelled = max(modelled, issue + t.wait * (t.bytes / dram_burst.rate + dram_lat))
                    if done is not None:
                        ready = max(ready, done)
            extra = max(0.0, ready - modelled)
            st.extra_s += extra
            st.stall[0] += extra

    def refresh(self, sms) -> None:
        residents, state = self.residents, self.state
        for sm in sorted(sms):
            here = residents[sm]
            k = len(here)
            for c in here:
                st = state[c]
                if st.k != k:
                    self.set_rate(c, st)

    # ---- completions --------------------------------------------------------------------
    def pop_due(self):
        """The CTAs whose segments finish next (within TIE), or None when none is left."""
        heap, state = self.heap, self.state
        while heap:
            v_f, cta, version = heapq.heappop(heap)
            st = state.get(cta)
            if st is not None and st.version == version:
                break
        else:
            return None
        due = [cta]
        limit = v_f + TIE * max(v_f, 1e-30)
        while heap and heap[0][0] <= limit:
            _, c2, ver2 = heapq.heappop(heap)
            st2 = state.get(c2)
            if st2 is not None and st2.version == ver2:
                due.append(c2)
        self.t_now += (v_f - self.v_now) / self.scale
        self.v_now = v_f
        if len(due) > 1:
            due.sort()
        return due

    def finish_segment(self, c: int) -> int | None:
        """CTA c finished its current segment: start its next one, or retire it (returns
        its SM). (advance and seg_bytes inlined, the same arithmetic.)"""
        st = self.state[c]
        seg, costs, duration = st.seg, st.costs, st.duration
        v_now = self.v_now
        dp = (v_now - st.v_updated) / duration              # advance(st)
        if dp > 0.0:
            st.p += dp
            prof = costs.profiles[st.k - 1][seg]
            st.intrinsic_s += dp * duration
            acc = st.stall
            acc[0] += dp * prof[1]
            acc[1] += dp * prof[2]
            acc[2] += dp * prof[3]
            acc[3] += dp * prof[4]
        st.v_updated = v_now
        if seg == 0 and st.burst:                           # seg_bytes(st)
            b_l2 = b_dram = 0.0
        else:
            b_l2 = costs.l2_bytes[seg]
            b_dram = costs.dram_bytes_fill[seg] if self.filling else costs.dram_bytes[seg]
        demand = self.demand
        demand[0] -= b_l2 / duration
        demand[1] -= b_dram / duration
        t_now = self.t_now
        st.marks.append(t_now)
        if self.filling:
            self.stored += costs.stored_bytes[seg]
        if seg + 1 < len(costs.l2_bytes):                   # next segment of the same CTA
            st.seg = seg + 1
            st.p = 0.0
            st.duration = 0.0
            st.k = 0
            self.set_rate(c, st)
            return None
        del self.state[c]
        stall = list(st.stall)
        # time lost to saturated shared bandwidth is memory stall
        stall[0] += max(0.0, (t_now - st.start_s) - st.intrinsic_s)
        marks = st.marks
        if self.want_marks and not st.burst:
            t0 = st.start_s
            marks = [t0 + (t_now - t0) * f for f in self.fractions[st.cls]]
        self.emit(c, st.cls, st.sm, st.start_s, t_now, stall, marks)
        self.emitted += 1
        self.residents[st.sm].remove(c)
        self.picker.release(st.sm)
        self.end_s = t_now
        return st.sm

    def run(self) -> KernelRun:
        self.refresh(self.dispatch())
        self.rescale()
        while True:
            due = self.pop_due()
            if due is None:
                break
            touched = set()
            for c in due:
                sm = self.finish_segment(c)
                if sm is not None:
                    touched.add(sm)
            if self.filling and self.stored >= self.fill_bytes:
                self.end_fill()
            touched |= self.dispatch()
            self.refresh(touched)
            if not self.state:
                self.demand[0] = self.demand[1] = 0.0
            self.rescale()
            if self.period and self.next_cta // self.period > self.last_boundary:
                self.last_boundary = self.next_cta // self.period
                self.at_boundary()
        return KernelRun(self.end_s, self.repeats)

    # ---- steady state -------------------------------------------------------------------
    def snapshot(self) -> _State:
        v, t = self.v_now, self.t_now
        discrete, times = [self.next_cta % self.period, self.filling], [
            max(0.0, self.l2_burst.free_s - t), max(0.0, self.dram_burst.free_s - t)]
        state, costs, next_cta = self.state, self.costs, self.next_cta
        add, extend = discrete.append, times.extend
        for c in sorted(state):
            st = state[c]
            add((c - next_cta, st.sm, st.cls, st.seg, st.k, st.burst, len(st.marks),
                 st.costs is costs[st.cls]))
            extend((st.p, st.duration, st.finish_v - v, st.extra_s, st.intrinsic_s,
                    t - st.start_s, *st.stall))
            extend([t - x for x in st.marks])
        return _State(self.next_cta, t, self.emitted, tuple(discrete), tuple(times))

    def at_boundary(self) -> None:
        """When the dispatches pass a multiple of the period: compare the state with the
        last few such states; on a match (same CTA offset within the period, same resident
        CTAs, times within STATE_TOLERANCE of the step), skip the periods that follow."""
        if self.filling:          # a state before the fill's end does not repeat after it
            return
        now = self.snapshot()
        for before in reversed(self.boundaries):
            step_s = now.t_now - before.t_now
            if (before.discrete == now.discrete and step_s > 0.0
                    and all(abs(a - b) <= STATE_TOLERANCE * step_s
                            for a, b in zip(before.times, now.times))):
                self.skip(before, now)
                self.boundaries.clear()
                return
        self.boundaries.append(now)

    def skip(self, before: _State, now: _State) -> None:
        """Insert copies of the period before → now until one period short of the end of
        the periodic CTAs: relabel the residents, move the clock."""
        cta_step = now.next_cta - before.next_cta
        times = (min(self.n, self.periodic_below) - now.next_cta) // cta_step - 1
        if times < 1:
            return
        shift_c, shift_s = times * cta_step, times * (now.t_now - before.t_now)
        self.repeats.append(Repeat(before.emitted, now.emitted, times, cta_step,
                                   now.t_now - before.t_now))
        self.state = {c + shift_c: st for c, st in self.state.items()}
        for st in self.state.values():
            st.start_s += shift_s
            st.marks = [x + shift_s for x in st.marks]
        self.residents = [[c + shift_c for c in r] for r in self.residents]
        state = self.state
        self.heap = [(v, c + shift_c, ver) for v, c, ver in self.heap
                     if c + shift_c in state and state[c + shift_c].version == ver]
        heapq.heapify(self.heap)
        self.l2_burst.free_s += shift_s
        self.dram_burst.free_s += shift_s
        self.t_now += shift_s
        self.next_cta += shift_c


def run_kernel(n: int, class_of, costs: list, machine: FluidMachine, start_s: float, emit,
               want_marks: bool = True, prologues=None, class_period: int = 0,
               periodic_below: int = 0, fill_bytes: float | None = None) -> KernelRun:
    """Simulate one kernel's first n CTAs. Calls emit(cta, cls, sm, start_s, end_s, stall4,
    segment_ends) per simulated CTA; the returned KernelRun says which emitted rows repeat
    for the CTAs the steady state skipped. prologues[cta]: the tiles a first-wave CTA loads
    next (first_wave.first_wave_prologues). class_period, periodic_below: class_of repeats
    with that period below that CTA (0: do not look for a steady state). fill_bytes: stored
    bytes until the L2 writes back its first dirty line (None: costs.dram_bytes throughout)."""
    return FluidKernel(n, class_of, costs, machine, start_s, emit, want_marks, prologues,
                       class_period, periodic_below, fill_bytes).run()
