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
    kernel in launch order are replayed (all kernels keep the same fraction) and each
    kernel's miss ratio per tensor is applied to all of its loads. Repeated waves make the
    prefix representative.
Scaling back: per kernel and tensor, DRAM read bytes = load bytes × sampled miss ratio;
write-backs and the final flush are scaled by stored bytes ÷ sampled stored bytes.
"""
from __future__ import annotations

import zlib
from collections import OrderedDict

from ..schedule import Loop

TILES_PER_SAMPLED_CACHE = 32


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


class AccessSampler:
    def __init__(self, ratio: int):
        self.ratio = ratio
        self.salt = _Salt()
        self.ticks_memo: dict = {}
        self.out: list = []        # (time_s, serial, kernel, key, bytes, op, cohort)
        self.serial = 0            # op: 0 load 1 store 2 reduce; cohort: 1 = last partial wave

    def sampled(self, key: tuple) -> bool:
        if self.ratio == 1:
            return True
        return (key[-1] + self.salt[key[:-1]]) % self.ratio == 0

    def cta(self, ki: int, segments: list, start_s: float, seg_ends: tuple, stages: int,
            cohort: int = 0) -> None:
        """Place one CTA's accesses: segment s runs from the end of segment s−1 (or start_s)
        to seg_ends[s]; inside a segment, ops are spread evenly over its expanded ops."""
        self.cohort = cohort
        t0 = start_s
        for seg, t1 in zip(segments, seg_ends):
            ticks = _ticks(seg, self.ticks_memo)
            self._walk(ki, seg, 0, {}, t0, (t1 - t0) / max(ticks, 1), stages)
            t0 = t1

    def _emit(self, t: float, ki: int, key, op) -> None:
        code = 0 if op.kind == "load" else (2 if op.reduce else 1)
        self.out.append((t, self.serial, ki, key, op.bytes, code, self.cohort))
        self.serial += 1

    def _walk(self, ki, items, pos, env, t0, dt, stages):
        R = self.ratio
        for item in items:
            if not isinstance(item, Loop):
                if item.kind in ("load", "store"):
                    key = (item.tensor,) + tuple(env[c] if isinstance(c, str) else c
                                                 for c in item.coord)
                    if self.sampled(key):
                        self._emit(t0 + dt * pos, ki, key, item)
                pos += 1
                continue
            body, var, start, count = item.body, item.var, item.start, item.count
            body_ticks = _ticks(body, self.ticks_memo)
            if any(isinstance(b, Loop) for b in body):
                for v in range(start, start + count):
                    env[var] = v
                    self._walk(ki, body, pos + (v - start) * body_ticks, env, t0, dt, stages)
                env.pop(var, None)
                pos += count * body_ticks
                continue
            has_loads = any(b.kind == "load" for b in body)
            out = self.out
            for idx, op in enumerate(body):
                if op.kind not in ("load", "store"):
                    continue
                lead = (stages - 1) if (op.kind == "load" and has_loads) else 0
                coord = op.coord
                if coord and coord[-1] == var and var not in coord[:-1]:
                    head = (op.tensor,) + tuple(env[c] if isinstance(c, str) else c
                                                for c in coord[:-1])
                    first = start + ((-self.salt[head] - start) % R if R > 1 else 0)
                    code = 0 if op.kind == "load" else (2 if op.reduce else 1)
                    nbytes = op.bytes
                    base = t0 + dt * (pos + idx)
                    step = dt * body_ticks
                    serial, cohort = self.serial, self.cohort
                    for v in range(first, start + count, R):
                        j = v - start - lead
                        out.append((base + step * (j if j > 0 else 0), serial, ki, head + (v,),
                                    nbytes, code, cohort))
                        serial += 1
                    self.serial = serial
                else:
                    for v in range(start, start + count):
                        env[var] = v
                        key = (op.tensor,) + tuple(env[c] if isinstance(c, str) else c
                                                   for c in coord)
                        if self.sampled(key):
                            j = v - start - lead
                            self._emit(t0 + dt * (pos + (j if j > 0 else 0) * body_ticks + idx),
                                       ki, key, op)
                    env.pop(var, None)
            pos += count * body_ticks


def replay(accesses: list, capacity_bytes: float, n_kernels: int, dram_latency_s: float,
           protocol: str = "warm", dram_bandwidth_bytes_per_s: float = float("inf")):
    """Run sampled accesses through an LRU. Returns per-kernel dicts of sampled counts:
    load / miss bytes per tensor, `wait` per tensor = Σ over loads of the DRAM wait in units of
    dram_latency_s (1 for a miss, the remaining fraction for a hit on a line still arriving),
    the same load figures for the last partial wave's CTAs alone under "tail",
    and the dirty bytes left at the end (the final flush; 0 under the "ncu" protocol, where
    every kernel starts with an invalidated L2 and what stays dirty is counted by nobody)."""
    accesses.sort()      # by (time, serial): serials are unique, so nothing else is compared
    ncu = protocol == "ncu"
    if ncu:              # kernels in order even where a buffered load was placed early
        accesses.sort(key=lambda a: a[2])   # stable: time order inside each kernel
    lines: OrderedDict = OrderedDict()
    used = 0
    current = 0
    per = [{"store": 0, "writeback": 0, "reduce_read": 0} for _ in range(n_kernels)]
    loads: dict = {}         # (kernel, tensor, cohort) → [bytes, count, miss bytes, wait]
    groups = [[] for _ in range(n_kernels)]
    fetch_s = {}             # tile bytes → transfer + latency of one fetch
    for t, _s, ki, key, nbytes, code, cohort in accesses:
        if ncu and ki != current:            # profiler: write back + invalidate, unmeasured
            lines.clear()
            used = 0
            current = ki
        entry = lines.get(key)
        if code == 0:
            acc = loads.get((ki, key[0], cohort))
            if acc is None:
                acc = loads[ki, key[0], cohort] = [0, 0, 0, 0.0]
            acc[0] += nbytes
            acc[1] += 1
            fetch = fetch_s.get(nbytes)
            if fetch is None:
                fetch = fetch_s[nbytes] = nbytes / dram_bandwidth_bytes_per_s + dram_latency_s
            if entry is not None:
                lines.move_to_end(key)
                # a hit waits only if the line is still on its way from DRAM; then it joins
                # the group of loads that the line's arrival releases together
                if entry[2] > t:
                    acc[3] += (entry[2] - t) / fetch
                    if len(entry) > 3:
                        entry[3][0] += 1
                continue
            acc[2] += nbytes
            acc[3] += 1.0
            group = [1]
            groups[ki].append(group)
            lines[key] = [nbytes, False, t + fetch, group]
        else:
            k = per[ki]
            k["store"] += nbytes
            if entry is not None:
                lines.move_to_end(key)
                entry[1] = True
                used += nbytes - entry[0]
                entry[0] = nbytes
                continue
            if code == 2:
                k["reduce_read"] += nbytes
            lines[key] = [nbytes, True, t]
        used += nbytes
        while used > capacity_bytes and len(lines) > 1:
            _, (b, d, *_r) = lines.popitem(last=False)
            used -= b
            if d:
                per[ki]["writeback"] += b
    flush = 0 if ncu else sum(e[0] for e in lines.values() if e[1])
    for ki, k in enumerate(per):
        for part in ("all", "tail"):
            k[part] = {"load": {}, "loads": {}, "miss": {}, "wait": {}}
    for (ki, tensor, cohort), (nbytes, count, miss, wait) in sorted(loads.items()):
        for part in (("all", "tail") if cohort else ("all",)):
            d = per[ki][part]
            d["load"][tensor] = d["load"].get(tensor, 0) + nbytes
            d["loads"][tensor] = d["loads"].get(tensor, 0) + count
            d["miss"][tensor] = d["miss"].get(tensor, 0) + miss
            d["wait"][tensor] = d["wait"].get(tensor, 0.0) + wait
    for ki, k in enumerate(per):
        k.update(k.pop("all"))
        n = sum(k["loads"].values())
        # CTAs released together by one line's arrival issue their next loads together: a
        # load's expected place in that burst, in loads of the same CTA's size ahead of it
        k["l2_queue_position"] = (sum(g * (g - 1) / 2 for (g,) in groups[ki]) / n
                                  if n else 0.0)
    return per, flush
