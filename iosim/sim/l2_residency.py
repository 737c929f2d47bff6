"""An L2 whose re-reads hit with the measured residency curve at their stack distance.

The L2 reuse probe (scripts/experiments/l2_reuse_probe.py, measurements/h100/l1_l2_reuse/) reads a
tile once and re-reads it after D bytes of other distinct tiles: the H100's L2 misses none of
the re-reads below 0.49 of its capacity, 7.5% at 0.58, half at 0.72, all from 1.07 (`GpuSpec.
l2_residency_miss_curve`, solved for the probe's own re-read steps by scripts/
l2_residency_curve.py) where an LRU of any one size misses none below it and all above. Dirty lines are another matter: both dirty probes (H200
l2_dirty_probe `inter`, H100 l2_hot_dirty_probe) keep what an LRU of L2_EFFECTIVE_FRACTION of
the capacity with the dirty limit keeps, within 2.2 MiB, so a dirty line leaves the L2 (written
back) when its stack distance passes that LRU's capacity, as it did before the curve. (Kept
resident and clean instead, the FA-1 rows' re-read O tiles hit far more often than Nsight Compute
counts: their reads −3.3 → −14.5% at N 1024 d 64; neither dirty probe tells the two apart.)

Zones, in LRU order (a hit moves the line to the front of `recent`):
  recent   stack distance below the curve's last distance with under 0.5% misses: re-reads
           hit (the probe's floor, 0.01-0.04% at most distances, is taken as none);
  middle   up to the LRU capacity (`capacity_bytes`): dirty lines leave the L2 at its end,
           written back (the dirty limit, TileLru.mark_dirty, writes back earlier and keeps
           the line, clean);
  old      up to the curve's end (misses all): clean lines only.
A lookup of a line in `middle` or `old` computes its stack distance (the bytes of `recent` and
of the lines demoted after it, a Fenwick tree over demotion order) and hits with probability
1 - curve(distance / nominal capacity), decided by error diffusion (deterministic: the same
accesses, the same hits); a line that misses is dropped (a dirty one written back) and the
caller inserts it again as a miss. The interface is TileLru's (memory.py); `lines` is the
recent zone, which the fast mode's replay looks up inline before `lookup_old`.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict

from .memory import TileLru

RECENT, MIDDLE, OLD = 0, 1, 2
ALWAYS_HIT_MISS_FRACTION = 0.005     # below this miss fraction the curve's points are its floor
FENWICK_SIZE = 1 << 16      # the tree's first size; _renumber grows it past 2 x the entries


class ResidencyLru(TileLru):
    __slots__ = ("nominal_bytes", "xs", "ms", "recent_cap", "end_cap", "middle", "old",
                 "recent_bytes", "middle_bytes", "old_bytes", "tree", "size", "next_idx", "err",
                 "pending_wb")

    def __init__(self, capacity_bytes: float, nominal_bytes: float, curve,
                 dirty_capacity_bytes: float | None = None):
        super().__init__(capacity_bytes, dirty_capacity_bytes)
        self.nominal_bytes = nominal_bytes
        self.xs = [float(x) for x, _ in curve]
        self.ms = [float(m) for _, m in curve]
        floor = max((x for x, m in curve if m < ALWAYS_HIT_MISS_FRACTION), default=0.0)
        self.recent_cap = min(capacity_bytes, floor * nominal_bytes)
        self.end_cap = max(capacity_bytes, self.xs[-1] * nominal_bytes)
        self.middle: OrderedDict = OrderedDict()
        self.old: OrderedDict = OrderedDict()
        self._reset()

    def _reset(self) -> None:
        self.recent_bytes = self.middle_bytes = self.old_bytes = 0
        self.size = FENWICK_SIZE
        self.tree = [0] * (self.size + 1)
        self.next_idx = 1
        self.err = 0.0
        self.pending_wb = 0

    # ---- the Fenwick tree over demotion order (middle and old) ----------------------------
    def _add(self, i: int, v: int) -> None:
        t, n = self.tree, self.size
        while i <= n:
            t[i] += v
            i += i & -i

    def _newer_bytes(self, i: int) -> int:
        """Bytes of middle/old lines demoted after index i."""
        t, s, j = self.tree, 0, i
        while j > 0:
            s += t[j]
            j -= j & -j
        return self.middle_bytes + self.old_bytes - s

    def _renumber(self) -> None:
        """Indices 1..n again, in demotion order, in a tree at least twice n (so that
        renumbering stays rare however many small lines the zones hold)."""
        while self.size < 2 * (len(self.middle) + len(self.old)) + 2:
            self.size *= 2
        self.tree = [0] * (self.size + 1)
        i = 0
        for zone in (self.old, self.middle):
            for e in zone.values():
                i += 1
                e[5] = i
                self._add(i, e[0])
        self.next_idx = i + 1

    def _miss_fraction(self, x: float) -> float:
        xs, ms = self.xs, self.ms
        i = bisect_left(xs, x)
        if i >= len(xs):
            return ms[-1]
        if i == 0:
            return ms[0]
        x0, x1 = xs[i - 1], xs[i]
        return ms[i - 1] + (ms[i] - ms[i - 1]) * (x - x0) / (x1 - x0)

    # ---- TileLru's interface ---------------------------------------------------------------
    def contains(self, key) -> bool:
        return key in self.lines or key in self.middle or key in self.old

    def lookup(self, key):
        entry = self.lines.get(key)
        if entry is not None:
            self.lines.move_to_end(key)
            return entry
        return self.lookup_old(key)

    def lookup_old(self, key):
        """A line past the recent zone: a hit with the curve's probability at its stack
        distance (moved to the front), else dropped (None)."""
        zone = self.middle
        entry = zone.get(key)
        if entry is None:
            zone = self.old
            entry = zone.get(key)
            if entry is None:
                return None
        distance = self.recent_bytes + self._newer_bytes(entry[5])
        self.err += 1.0 - self._miss_fraction(distance / self.nominal_bytes)
        del zone[key]
        self._add(entry[5], -entry[0])
        if zone is self.middle:
            self.middle_bytes -= entry[0]
        else:
            self.old_bytes -= entry[0]
        if self.err >= 0.5:
            self.err -= 1.0
            entry[4] = RECENT
            self.lines[key] = entry
            self.recent_bytes += entry[0]
            self.pending_wb += self._cascade()
            return entry
        if entry[1]:                       # dropped dirty: written back now
            entry[1] = False
            del self.dirty[key]
            self.dirty_used_bytes -= entry[0]
            self.pending_wb += entry[0]
        return None

    def insert(self, key, nbytes: int, dirty: bool, ready_s: float, group=None) -> int:
        entry = [nbytes, False, ready_s, group, RECENT, 0]
        self.lines[key] = entry
        self.recent_bytes += nbytes
        written_back = self.mark_dirty(key, entry) if dirty else 0
        written_back += self._cascade() + self.pending_wb
        self.pending_wb = 0
        return written_back

    def mark_dirty(self, key, entry: list) -> int:
        written_back = TileLru.mark_dirty(self, key, entry) + self.pending_wb
        self.pending_wb = 0
        return written_back

    def _cascade(self) -> int:
        """Demote past each zone's end; dirty lines leaving the middle zone are written back."""
        written_back = 0
        recent, middle, old = self.lines, self.middle, self.old
        while self.recent_bytes > self.recent_cap and len(recent) > 1:
            k, e = recent.popitem(last=False)
            self.recent_bytes -= e[0]
            if self.next_idx > self.size:
                self._renumber()
            e[4], e[5] = MIDDLE, self.next_idx
            self.next_idx += 1
            self._add(e[5], e[0])
            middle[k] = e
            self.middle_bytes += e[0]
        while self.recent_bytes + self.middle_bytes > self.capacity_bytes and middle:
            k, e = middle.popitem(last=False)
            self.middle_bytes -= e[0]
            if e[1]:
                e[1] = False
                del self.dirty[k]
                self.dirty_used_bytes -= e[0]
                written_back += e[0]
                self._add(e[5], -e[0])       # a dirty line leaves the L2 here
                continue
            e[4] = OLD
            old[k] = e
            self.old_bytes += e[0]
        while self.recent_bytes + self.middle_bytes + self.old_bytes > self.end_cap and old:
            k, e = old.popitem(last=False)
            self.old_bytes -= e[0]
            self._add(e[5], -e[0])
        return written_back

    def resize(self, entry: list, nbytes: int) -> None:
        delta = nbytes - entry[0]
        if entry[4] == RECENT:
            self.recent_bytes += delta
        else:
            self._add(entry[5], delta)
            if entry[4] == MIDDLE:
                self.middle_bytes += delta
            else:
                self.old_bytes += delta
        if entry[1]:
            self.dirty_used_bytes += delta
        entry[0] = nbytes

    def clear(self) -> None:
        super().clear()
        self.middle.clear()
        self.old.clear()
        self._reset()
