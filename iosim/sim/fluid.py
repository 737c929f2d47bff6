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

Events are segment completions (a heap keyed by virtual finish time) and dispatches
(dispatch.py); their number is O(CTAs × segments).
"""
from __future__ import annotations

import heapq

from .dispatch import SlotPicker
from .memory import Server

TIE = 1e-12   # completions within this relative virtual time are simultaneous
(_CLS, _SM, _P, _VU, _D, _VER, _START, _INTR, _ACC, _K, _SEG, _EXTRA, _MARKS, _BURST,
 _PROF, _L2, _DRAM) = range(17)


def run_kernel(n: int, class_of, seg_profiles, seg_l2, seg_dram, seg_wait, occ: int,
               sm_count: int,
               l2_bandwidth: float, dram_bandwidth: float, start_s: float, emit,
               burst_first, want_marks: bool = True, prologues=None,
               dram_latency_s: float = 0.0):
    """Simulate one kernel. seg_profiles[c][k-1][s] = (D, mem, tensor, exp, alu) of segment s
    of class c at residency k; seg_l2[c][s], seg_dram[c][s]: its bytes; seg_wait[c][s]: the
    fraction of its load bytes that wait for DRAM (a hit does not queue behind the
    write-backs a burst reserved). Calls
    emit(cta, cls, sm, start_s, end_s, stall4, segment_ends) per CTA. burst_first[c]: whether
    class c's first segment is a burst of plain ops. prologues[cta]: the tiles a first-wave
    CTA loads next, as soon as its burst segment is done (first_wave.first_wave_prologues).
    Returns the end time."""
    # a CTA dispatched alone runs its segments merged into one (fewer events; its phases
    # matter only when many CTAs are in the same phase at once, i.e. in a burst)
    merged_prof = [[[tuple(sum(v[i] for v in segs) for i in range(5))] for segs in by_k]
                   for by_k in seg_profiles]
    merged_l2 = [[sum(b)] for b in seg_l2]
    merged_dram = [[sum(b)] for b in seg_dram]
    fractions = []          # segment ends as fractions of the merged duration (residency 1)
    for by_k in seg_profiles:
        total, acc, f = sum(v[0] for v in by_k[0]), 0.0, []
        for v in by_k[0]:
            acc += v[0]
            f.append(acc / total if total > 0 else 1.0)
        fractions.append(f)
    picker = SlotPicker(sm_count, occ)
    l2_burst, dram_burst = Server(l2_bandwidth), Server(dram_bandwidth)
    residents = [[] for _ in range(sm_count)]
    state: dict = {}
    heap: list = []
    v_now = 0.0
    t_now = start_s
    demand = [0.0, 0.0]
    scale = 1.0
    next_cta = 0
    end_s = start_s

    def seg_bytes(st) -> tuple:
        """(L2, DRAM) bytes of the current segment that enter the fluid demand (a burst CTA's
        first segment went through the burst servers)."""
        seg = st[_SEG]
        if seg == 0 and st[_BURST]:
            return 0.0, 0.0
        return st[_L2][seg], st[_DRAM][seg]

    def advance(st) -> None:
        """Bring progress of the current segment up to v_now (at the old rate)."""
        dp = (v_now - st[_VU]) / st[_D]
        if dp > 0.0:
            st[_P] += dp
            prof = st[_PROF][st[_K] - 1][st[_SEG]]
            st[_INTR] += dp * st[_D]
            acc = st[_ACC]
            for i in range(4):
                acc[i] += dp * prof[1 + i]
        st[_VU] = v_now

    def set_rate(cta: int, st) -> None:
        """Switch the CTA's current segment to the SM's residency; reschedule its finish."""
        seg = st[_SEG]
        b_l2, b_dram = seg_bytes(st)
        if st[_D] > 0.0:
            advance(st)
            demand[0] -= b_l2 / st[_D]
            demand[1] -= b_dram / st[_D]
        k = len(residents[st[_SM]])
        st[_K] = k
        d = st[_PROF][k - 1][seg][0] + (st[_EXTRA] if seg == 0 and st[_EXTRA] > 0 else 0.0)
        st[_D] = d if d > 0.0 else 1e-18
        st[_VU] = v_now
        demand[0] += b_l2 / st[_D]
        demand[1] += b_dram / st[_D]
        st[_VER] += 1
        remaining = 1.0 - st[_P]
        heapq.heappush(heap, (v_now + (remaining if remaining > 0.0 else 0.0) * st[_D],
                              cta, st[_VER]))

    def rescale() -> None:
        nonlocal scale
        s = 1.0
        if demand[0] > 0.0 and l2_bandwidth < demand[0] * s:
            s = l2_bandwidth / demand[0]
        if demand[1] > 0.0 and dram_bandwidth < demand[1] * s:
            s = dram_bandwidth / demand[1]
        scale = s

    def dispatch() -> set:
        nonlocal next_cta
        touched = set()
        group, ctas = [], []
        while next_cta < n:
            sm = picker.pick()
            if sm is None:
                break
            cta = next_cta
            next_cta += 1
            cls = class_of(cta)
            st = [cls, sm, 0.0, v_now, 0.0, 0, t_now, 0.0, [0.0, 0.0, 0.0, 0.0], 0,
                  0, 0.0, [], False, merged_prof[cls], merged_l2[cls], merged_dram[cls]]
            state[cta] = st
            residents[sm].append(cta)
            touched.add(sm)
            group.append(st)
            ctas.append(cta)
        # dispatched together, or while an earlier burst is still queued: their first loads
        # queue in FIFO order (behind that burst)
        if len(group) > 1 or (group and (l2_burst.free_s > t_now or dram_burst.free_s > t_now)):
            for st in group:
                cls = st[_CLS]
                if burst_first[cls]:
                    wait = max(l2_burst.reserve(t_now, seg_l2[cls][0])[0] - t_now,
                               seg_wait[cls][0] * (dram_burst.reserve(t_now, seg_dram[cls][0])[0]
                                                   - t_now))
                    st[_BURST], st[_EXTRA], st[_ACC][0] = True, wait, wait
                    st[_PROF], st[_L2], st[_DRAM] = seg_profiles[cls], seg_l2[cls], seg_dram[cls]
            if prologues:
                prologue_waits(group, ctas)
        return touched

    def prologue_waits(group, ctas) -> None:
        """A first-wave CTA's first loop loads (first_wave.first_wave_prologues) queue behind
        everything reserved before them: issued at dispatch when the program starts with
        the loop, else when its burst segment is done. A tile's first reader in the group
        fetches it from DRAM, later readers wait for that fetch (a hit on a line in flight).
        The delay beyond what the loop's profile charges is added to the first segment."""
        dram_lat = dram_latency_s
        fetched = {}                 # tile → when its DRAM fetch completes
        for cta, st in zip(ctas, group):
            entry = prologues.get(cta)
            if entry is None:
                continue
            after_burst, tiles = entry
            if after_burst:
                if not st[_BURST]:
                    continue
                k = len(residents[st[_SM]])
                issue = t_now + st[_EXTRA] + seg_profiles[st[_CLS]][k - 1][0][0]
            else:
                issue = t_now
            waited = [t for t in tiles if t[4]]
            nbytes = sum(t[1] for t in waited)
            ready = l2_burst.reserve(issue, nbytes)[1]
            modelled = issue + nbytes / l2_burst.rate      # the profile's own transfer ...
            l2_burst.reserve(issue, sum(t[1] for t in tiles if not t[4]))  # the rest: no wait
            for key, b, fetch, wait, must_wait in tiles:
                done = fetched.get(key)
                if done is None and fetch > 0.0:
                    done = fetched[key] = dram_burst.reserve(issue, fetch * b)[1] + dram_lat
                if must_wait:
                    # ... and expected DRAM wait
                    modelled = max(modelled, issue + wait * (b / dram_burst.rate + dram_lat))
                    if done is not None:
                        ready = max(ready, done)
            extra = max(0.0, ready - modelled)
            st[_EXTRA] += extra
            st[_ACC][0] += extra

    def refresh(sms) -> None:
        for sm in sorted(sms):
            k = len(residents[sm])
            for c in residents[sm]:
                st = state[c]
                if st[_K] != k:
                    set_rate(c, st)

    refresh(dispatch())
    rescale()
    while heap:
        v_f, cta, version = heapq.heappop(heap)
        st = state.get(cta)
        if st is None or st[_VER] != version:
            continue
        due = [cta]
        limit = v_f + TIE * max(v_f, 1e-30)
        while heap and heap[0][0] <= limit:
            _, c2, ver2 = heapq.heappop(heap)
            st2 = state.get(c2)
            if st2 is not None and st2[_VER] == ver2:
                due.append(c2)
        t_now += (v_f - v_now) / scale
        v_now = v_f
        touched = set()
        if len(due) > 1:
            due.sort()
        for c in due:
            st = state[c]
            cls, sm, seg = st[_CLS], st[_SM], st[_SEG]
            advance(st)
            b_l2, b_dram = seg_bytes(st)
            demand[0] -= b_l2 / st[_D]
            demand[1] -= b_dram / st[_D]
            st[_MARKS].append(t_now)
            if seg + 1 < len(st[_L2]):               # next segment of the same CTA
                st[_SEG] = seg + 1
                st[_P] = 0.0
                st[_D] = 0.0
                st[_K] = 0
                set_rate(c, st)
                continue
            del state[c]
            stall = list(st[_ACC])
            # time lost to saturated shared bandwidth is memory stall
            stall[0] += max(0.0, (t_now - st[_START]) - st[_INTR])
            marks = st[_MARKS]
            if want_marks and not st[_BURST]:
                t0 = st[_START]
                marks = [t0 + (t_now - t0) * f for f in fractions[cls]]
            emit(c, cls, sm, st[_START], t_now, stall, marks)
            residents[sm].remove(c)
            picker.release(sm)
            touched.add(sm)
            end_s = t_now
        touched |= dispatch()
        refresh(touched)
        if not state:
            demand[0] = demand[1] = 0.0
        rescale()
    return end_s
