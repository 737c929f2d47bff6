"""Fast mode, step 2: CTAs of one kernel through the SMs, with a fluid model of the shared
bandwidths.

Each CTA class has, for every residency k = 1..occupancy, an intrinsic profile (duration and
stalls when k CTAs share its SM, characterize.py). A running CTA advances through its work as
a fraction p ∈ [0, 1] at rate 1/D_k, where k is its SM's current residency: when a neighbour
leaves or arrives, the rate changes. All CTAs also share the L2↔SM and DRAM bandwidths: with
demand = Σ bytes_c / D_c over running CTAs, every CTA is slowed by the same factor
s = min(1, B_l2 / demand_l2, B_dram / demand_dram) (the fluid limit of FIFO servers that are
saturated). Virtual time V advances at 1 per intrinsic second, real time at dV / s.

Bursts: CTAs dispatched at the same instant (a kernel's first wave) issue their prologue
loads (the loads before the first loop and the first `stages` iterations' tiles) together; in
FIFO servers the last of them waits for all the others. Each such CTA is given that queueing
delay, from reservations of its prologue bytes on a burst copy of the L2 and DRAM servers, as
extra intrinsic work; the resulting stagger is what makes the end of a saturated kernel ragged.

Events are CTA completions (a heap keyed by virtual finish time) and dispatches (dispatch.py);
their number is O(CTAs), each O(log CTAs + occupancy).
"""
from __future__ import annotations

import heapq

from .dispatch import SlotPicker
from .memory import Server

TIE = 1e-12   # completions within this relative virtual time are simultaneous


def run_kernel(n: int, class_of, profiles, l2_bytes, dram_bytes, occ: int, sm_count: int,
               l2_bandwidth: float, dram_bandwidth: float, start_s: float, emit,
               burst_bytes=None):
    """Simulate one kernel; call emit(cta, sm, start_s, end_s, stall4) per CTA in completion
    order. profiles[c][k-1] = (D, mem, tensor, exp, alu); l2_bytes[c], dram_bytes[c] per CTA.
    Returns the kernel's end time."""
    picker = SlotPicker(sm_count, occ)
    l2_burst, dram_burst = Server(l2_bandwidth), Server(dram_bandwidth)
    residents = [[] for _ in range(sm_count)]
    # per running CTA: [cls, sm, p, v_updated, D, version, start_s, acc_intr, acc4(list)]
    state: dict = {}
    heap: list = []
    v_now = 0.0
    t_now = start_s
    demand = [0.0, 0.0]
    scale = 1.0
    next_cta = 0
    end_s = start_s

    def set_rate(cta: int, st: list) -> None:
        """Bring progress up to v_now and switch to the SM's current residency."""
        cls, sm = st[0], st[1]
        if st[4] > 0.0:
            dp = (v_now - st[3]) / st[4]
            if dp > 0.0:
                st[2] += dp
                prof = profiles[cls][st[9] - 1]
                st[7] += dp * (prof[0] + st[10])
                acc = st[8]
                for i in range(4):
                    acc[i] += dp * prof[1 + i]
            demand[0] -= l2_bytes[cls] / st[4]
            demand[1] -= dram_bytes[cls] / st[4]
        k = len(residents[sm])
        st[9] = k
        st[4] = profiles[cls][k - 1][0] + st[10]
        st[3] = v_now
        demand[0] += l2_bytes[cls] / st[4]
        demand[1] += dram_bytes[cls] / st[4]
        st[5] += 1
        remaining = 1.0 - st[2]
        heapq.heappush(heap, (v_now + (remaining if remaining > 0.0 else 0.0) * st[4],
                              cta, st[5]))

    def rescale() -> None:
        nonlocal scale
        s = 1.0
        if demand[0] > 0.0 and l2_bandwidth < demand[0] * s:
            s = l2_bandwidth / demand[0]
        if demand[1] > 0.0 and dram_bandwidth < demand[1] * s:
            s = dram_bandwidth / demand[1]
        scale = s

    def dispatch() -> None:
        nonlocal next_cta
        touched = []
        while next_cta < n:
            sm = picker.pick()
            if sm is None:
                break
            cta = next_cta
            next_cta += 1
            cls = class_of(cta)
            wait = 0.0
            if burst_bytes is not None:
                b_l2, b_dram = burst_bytes[cls]
                wait = max(l2_burst.reserve(t_now, b_l2)[0] - t_now,
                           dram_burst.reserve(t_now, b_dram)[0] - t_now)
            st = [cls, sm, 0.0, v_now, 0.0, 0, t_now, 0.0, [wait, 0.0, 0.0, 0.0], 0, wait]
            state[cta] = st
            residents[sm].append(cta)
            touched.append(sm)
        for sm in sorted(set(touched)):
            for c in residents[sm]:
                set_rate(c, state[c])

    dispatch()
    rescale()
    while heap:
        v_f, cta, version = heapq.heappop(heap)
        st = state.get(cta)
        if st is None or st[5] != version:
            continue
        finishing = [cta]
        limit = v_f + TIE * max(v_f, 1e-30)
        while heap and heap[0][0] <= limit:
            _, c2, ver2 = heapq.heappop(heap)
            st2 = state.get(c2)
            if st2 is not None and st2[5] == ver2:
                finishing.append(c2)
        t_now += (v_f - v_now) / scale
        v_now = v_f
        touched = set()
        for c in sorted(finishing):
            st = state.pop(c)
            cls, sm = st[0], st[1]
            dp = 1.0 - st[2]
            prof = profiles[cls][st[9] - 1]
            intrinsic = st[7] + dp * (prof[0] + st[10])
            acc = st[8]
            stall = [acc[i] + dp * prof[1 + i] for i in range(4)]
            demand[0] -= l2_bytes[cls] / st[4]
            demand[1] -= dram_bytes[cls] / st[4]
            # time lost to saturated shared bandwidth is memory stall
            stall[0] += max(0.0, (t_now - st[6]) - intrinsic)
            emit(c, sm, st[6], t_now, stall)
            residents[sm].remove(c)
            picker.release(sm)
            touched.add(sm)
            end_s = t_now
        dispatch()
        for sm in sorted(touched):
            for c in residents[sm]:
                st = state[c]
                if st[9] != len(residents[sm]):
                    set_rate(c, st)
        if not state:
            demand[0] = demand[1] = 0.0
        rescale()
    return end_s
