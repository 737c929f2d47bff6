"""The block scheduler: which SM gets the next CTA.

CTAs are dispatched in launch order. A CTA goes to the SM with the fewest resident CTAs that
still has a free slot (ties: lowest SM index), so the first wave is spread breadth-first
(CTA i on SM i mod sm_count) and later CTAs take the slots that free up.
"""
from __future__ import annotations

import heapq


class SlotPicker:
    def __init__(self, sm_count: int, ctas_per_sm: int):
        self.occupancy = ctas_per_sm
        self.resident = [0] * sm_count
        self.buckets = [list(range(sm_count))] + [[] for _ in range(ctas_per_sm)]
        self.free = sm_count * ctas_per_sm     # free slots: pick() is None exactly when 0

    def pick(self):
        """An SM with a free slot (and count the CTA on it), or None when all are full."""
        for k in range(self.occupancy):
            bucket = self.buckets[k]
            while bucket:
                sm = heapq.heappop(bucket)
                if self.resident[sm] == k:          # else a stale entry
                    self.resident[sm] = k + 1
                    heapq.heappush(self.buckets[k + 1], sm)
                    self.free -= 1
                    return sm
        return None

    def release(self, sm: int) -> None:
        self.free += 1
        self.resident[sm] -= 1
        heapq.heappush(self.buckets[self.resident[sm]], sm)


def launch_ready(env, picker: SlotPicker, state: dict, n: int, cta) -> None:
    """Start the next CTAs of a kernel of n CTAs (state["next"] on) on free SM slots, in
    launch order, while any slot is free: `cta(c, sm)` is the CTA's SimPy process."""
    while state["next"] < n:
        sm = picker.pick()
        if sm is None:
            return
        env.process(cta(state["next"], sm))
        state["next"] += 1
