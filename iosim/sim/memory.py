"""Memory side of the machine: FIFO bandwidth servers (DRAM, L2↔SM), the tile-level LRU L2,
and the two memory front ends the CTA programs talk to.

Where data lives: a tile is in DRAM until a load misses in L2; then it is in L2 (keyed by
(tensor, *coord)) until LRU evicts it. Stores are write-allocate and write-back: a stored tile
becomes a dirty L2 line; DRAM sees its bytes when it is evicted or at the end of the schedule
(the final flush, counted in bytes but not in time: the GPU would drain it after the last
kernel). A `reduce` store (fp32 atomic accumulate) is a read-modify-write in L2: a miss first
reads the line from DRAM.
"""
from __future__ import annotations

import math
from collections import OrderedDict

# Fraction of the nominal L2 capacity an LRU model may use. Real L2s are set-associative with
# hashed set indices and not LRU, H100/H200 split the L2 into two partitions that may each hold
# a copy of a line read from both sides, and some capacity holds other data. Measured on the
# H200 (iosim/data/validation/l2_probe.csv, ncu DRAM bytes): a buffer re-read by SMs all over the
# chip starts to miss above ~30 MB (0.5 of 60 MiB) and misses half its re-reads at ~46 MB (0.73);
# dirty lines retained at a kernel's end saturate at ~27.5 MB. An LRU has one sharp threshold,
# so its fraction was fitted: 0.70 minimises the DRAM-byte error of the validation sweep's
# training rows (grid 0.45..0.80 in steps of 0.05; docs/validation.md). Overridable through
# simulate(..., l2_effective_fraction=...).
L2_EFFECTIVE_FRACTION = 0.70

# Dirty bytes the L2 holds at once, as a fraction of its nominal capacity: measured on the H200
# (measurements/h200/l2_sharing/README.md). A buffer written once with coalesced stores keeps
# 26.8-28.0 MiB dirty at a kernel's end for every size from 32 to 72 MiB, in 15 rows of two
# probes (median 27.4 MiB), stores interleaved with clean reads too; beyond that the L2 writes
# dirty lines back although it still holds them. Modelled as a cap on the LRU's dirty bytes:
# past it the dirty line stored longest ago is written back and stays, clean. The H100 keeps the
# same fraction within 2% (23.3-23.6 of 50 MiB, measurements/h100/l2_rewrite/); the A100's L2 is
# taken to keep it too (not measured there).
L2_DIRTY_FRACTION = 27.4 / 60

# How the L2 behaves across the kernels of a schedule (simulate(..., l2_protocol=...)):
#   "warm": one L2 for the whole schedule, as in an application; dirty lines still in L2 at
#           the end are written back by a final flush, counted in dram_write (iosim run).
#   "ncu":  as Nsight Compute measures with its default --cache-control all: before each
#           kernel the L2 is written back and invalidated outside the measurement, so every
#           kernel starts cold, and dirty lines left in L2 when a kernel ends are counted by
#           no kernel (no final flush). `iosim validate` predicts ncu's bytes this way.
L2_PROTOCOLS = ("warm", "ncu")


class Server:
    """A FIFO server with deterministic service: a bandwidth (units = bytes) or an execution
    unit (units = FLOPs, exps, ALU ops). Requests are served in arrival order, one at a time,
    at `rate` units per second. Reserving returns (start_s, finish_s) and needs no event: the
    caller waits until finish_s (or not, for fire-and-forget traffic)."""

    __slots__ = ("rate", "free_s", "busy_s")

    def __init__(self, rate_per_s: float):
        self.rate = float(rate_per_s)
        self.free_s = 0.0   # when the server finishes its last accepted request
        self.busy_s = 0.0   # total service time given

    def reserve(self, now_s: float, amount: float) -> tuple[float, float]:
        service_s = amount / self.rate
        start_s = self.free_s if self.free_s > now_s else now_s
        self.free_s = start_s + service_s
        self.busy_s += service_s
        return start_s, self.free_s


class MixedDramServer(Server):
    """The DRAM server where a written byte's cost depends on the mix of directions in flight
    (machine.dram_write_cost_at): a FIFO at the read-only rate that keeps the bytes it was
    given by direction, decayed with time constant `window_s` (the DRAM latency: what the
    memory controllers hold at once). A read costs its bytes (`reserve`: load misses, a
    reduction's read of the old line); a write-back `write_cost_of_share(read share)` times
    its bytes at the decayed mix, its own bytes included (`reserve_write`)."""

    __slots__ = ("write_cost_of_share", "window_s", "read_w", "write_w", "seen_s")

    def __init__(self, rate_per_s: float, write_cost_of_share, window_s: float):
        super().__init__(rate_per_s)
        self.write_cost_of_share, self.window_s = write_cost_of_share, window_s
        self.read_w = self.write_w = 0.0   # bytes by direction, decayed to seen_s
        self.seen_s = 0.0

    def _decay(self, now_s: float) -> None:
        if now_s > self.seen_s:
            f = math.exp(-(now_s - self.seen_s) / self.window_s)
            self.read_w *= f
            self.write_w *= f
            self.seen_s = now_s

    def reserve(self, now_s: float, amount: float) -> tuple[float, float]:
        self._decay(now_s)
        self.read_w += amount
        return Server.reserve(self, now_s, amount)

    def reserve_write(self, now_s: float, nbytes: float) -> tuple[float, float]:
        self._decay(now_s)
        self.write_w += nbytes
        share = self.read_w / (self.read_w + self.write_w)
        return Server.reserve(self, now_s, nbytes * self.write_cost_of_share(share))


def dram_server(gpu) -> Server:
    """Exact mode's DRAM server: a MixedDramServer where the GPU config has the measured
    stream mixes (machine.dram_mix_points), else a FIFO at the read rate (a written byte
    then costs machine.dram_write_cost, charged by ExactMemory)."""
    from ..machine import dram_mix_points, dram_read_rate, dram_write_cost_at
    if dram_mix_points(gpu) is None:
        return Server(dram_read_rate(gpu))
    return MixedDramServer(dram_read_rate(gpu), lambda share: dram_write_cost_at(gpu, share),
                           gpu.dram_latency_s)


def trip_latency_of(gpu):
    """(utilization, read share) -> a dependent DRAM trip's latency on `gpu`
    (machine.loaded_trip_latency_s), or None where its config has no measured curve."""
    if getattr(gpu, "dram_trip_latency", None) is None:
        return None
    from ..machine import loaded_trip_latency_s
    return lambda u, share: loaded_trip_latency_s(gpu, u, share)


def l2_dirty_capacity_bytes(gpu) -> float:
    """The dirty bytes `gpu`'s L2 holds at once (L2_DIRTY_FRACTION of its capacity)."""
    return gpu.l2_capacity_bytes * L2_DIRTY_FRACTION


def l2_cache(gpu, capacity_bytes: float, ratio: float = 1.0) -> "TileLru":
    """The L2 both engines replay accesses through, on `gpu` with an LRU of `capacity_bytes`
    (the effective capacity, already divided by a set-sampling `ratio`): where the GPU config
    has a measured residency curve (GpuSpec.l2_residency_miss_curve) re-reads hit by it at
    their stack distance, dirty lines leave at the LRU's capacity (l2_residency.py); else a
    plain TileLru. Both with the dirty limit (l2_dirty_capacity_bytes / ratio)."""
    curve = getattr(gpu, "l2_residency_miss_curve", None)
    dirty = l2_dirty_capacity_bytes(gpu) / ratio
    if curve is None:
        return TileLru(capacity_bytes, dirty)
    from .l2_residency import ResidencyLru
    return ResidencyLru(capacity_bytes, gpu.l2_capacity_bytes / ratio, curve, dirty)


def l2_policy(gpu) -> str:
    """The L2 policy l2_cache builds on `gpu`, in words (results' model.l2_policy)."""
    if getattr(gpu, "l2_residency_miss_curve", None) is None:
        return "tile-level fully associative LRU, write-allocate, write-back"
    return ("tile-level, re-read hits by the measured residency curve, write-allocate, "
            "write-back, dirty lines out at the LRU's")


def exact_memory(gpu, l2_capacity_bytes: float) -> "ExactMemory":
    """Exact mode's memory on `gpu` with an L2 of effective capacity `l2_capacity_bytes`
    (l2_cache; the engine's, and the fast mode's short wave simulations, wave_queue.py)."""
    from ..machine import (dram_write_cost, dram_write_queue_s, fragment_store_l2_cost,
                           line_misaligned_dram_factor, partial_sector_write_cost_bytes,
                           reduce_l2_costs)
    lru = l2_cache(gpu, l2_capacity_bytes)
    return ExactMemory(lru, Server(gpu.l2_bandwidth_bytes_per_s),
                       dram_server(gpu), gpu.l2_latency_s, gpu.dram_latency_s,
                       reduce_l2_costs(gpu), dram_write_cost(gpu), fragment_store_l2_cost(gpu),
                       partial_sector_write_cost_bytes(gpu), line_misaligned_dram_factor(gpu),
                       dram_write_queue_s(gpu), trip_latency_of(gpu))


class TileLru:
    """Fully associative LRU cache of tiles with a byte capacity. Entries: key → [bytes, dirty,
    ready_s, group] where ready_s is when a missed line has arrived from DRAM (a hit on a line
    still in flight waits for it, as an MSHR merge would) and group, when given, counts the
    loads that line's arrival releases (the fast mode's L2 replay). At most
    `dirty_capacity_bytes` of the lines are dirty (L2_DIRTY_FRACTION; None: no limit): a store
    past it writes back the dirty line stored longest ago, which stays in the cache, clean."""

    __slots__ = ("capacity_bytes", "used_bytes", "lines", "dirty_capacity_bytes", "dirty",
                 "dirty_used_bytes")

    def __init__(self, capacity_bytes: float, dirty_capacity_bytes: float | None = None):
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self.lines: OrderedDict = OrderedDict()
        self.dirty_capacity_bytes = dirty_capacity_bytes
        self.dirty: OrderedDict = OrderedDict()     # the dirty entries, by their last store
        self.dirty_used_bytes = 0

    def lookup(self, key):
        """The entry (touched as most recent) or None."""
        entry = self.lines.get(key)
        if entry is not None:
            self.lines.move_to_end(key)
        return entry

    def lookup_old(self, key):
        """A line not in `lines` (the fast path the replay looks up inline): none here
        (l2_residency.ResidencyLru keeps older lines)."""
        return None

    def contains(self, key) -> bool:
        return key in self.lines

    def insert(self, key, nbytes: int, dirty: bool, ready_s: float, group=None) -> int:
        """Insert a line; evict LRU lines until it fits. Returns dirty bytes written back."""
        entry = [nbytes, False, ready_s, group]
        self.lines[key] = entry
        self.used_bytes += nbytes
        written_back = self.mark_dirty(key, entry) if dirty else 0
        lines = self.lines
        while self.used_bytes > self.capacity_bytes and len(lines) > 1:
            old_key, old = lines.popitem(last=False)
            self.used_bytes -= old[0]
            if old[1]:
                written_back += old[0]
                self.dirty_used_bytes -= old[0]
                del self.dirty[old_key]
        return written_back

    def mark_dirty(self, key, entry: list) -> int:
        """A store to a line present: it becomes the most recently stored dirty line. Returns
        the bytes the dirty limit writes back."""
        dirty = self.dirty
        if entry[1]:
            dirty.move_to_end(key)
            return 0
        entry[1] = True
        dirty[key] = entry
        self.dirty_used_bytes += entry[0]
        cap = self.dirty_capacity_bytes
        written_back = 0
        if cap is not None:
            while self.dirty_used_bytes > cap and len(dirty) > 1:
                _, old = dirty.popitem(last=False)
                old[1] = False
                self.dirty_used_bytes -= old[0]
                written_back += old[0]
        return written_back

    def resize(self, entry: list, nbytes: int) -> None:
        """A write of another size to a line already present (no eviction: as issued)."""
        self.used_bytes += nbytes - entry[0]
        if entry[1]:
            self.dirty_used_bytes += nbytes - entry[0]
        entry[0] = nbytes

    def dirty_bytes(self) -> int:
        return self.dirty_used_bytes

    def clear(self) -> None:
        self.lines.clear()
        self.dirty.clear()
        self.used_bytes = 0
        self.dirty_used_bytes = 0


class MemoryCounters:
    """Bytes that crossed each boundary (exact mode and the fast mode's L2 model)."""

    __slots__ = ("l2_to_sm_bytes", "sm_to_l2_bytes", "load_hit_bytes", "load_miss_bytes",
                 "load_hits", "load_misses", "dram_read_bytes", "dram_write_bytes",
                 "dram_write_flush_bytes")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)


class ExactMemory:
    """The memory front end of exact mode: every load and store goes through the tile LRU,
    the L2↔SM bandwidth server and, on a miss or dirty eviction, the DRAM server."""

    def __init__(self, l2: TileLru, l2_server: Server, dram_server: Server,
                 l2_latency_s: float, dram_latency_s: float, reduce_cost: dict | None = None,
                 dram_write_cost: float = 1.0, fragment_store_cost: float = 1.0,
                 partial_sector_cost: float = 0.0, misaligned_factor: float = 1.0,
                 write_queue_s: float | None = None, trip_latency=None):
        self.l2, self.l2_server, self.dram_server = l2, l2_server, dram_server
        # (utilization, read share) -> a dependent DRAM trip's latency
        # (machine.loaded_trip_latency_s); None: dram_latency_s
        self.trip_latency = trip_latency
        self.kernel_start_s = self.kernel_start_busy_s = 0.0
        # machine.partial_sector_write_cost_bytes: DRAM time per Store.partial_sectors write
        self.partial_sector_cost = partial_sector_cost
        # machine.line_misaligned_dram_factor: DRAM time of a byte of a misaligned row stream
        self.misaligned_extra = misaligned_factor - 1.0
        # machine.fragment_store_l2_cost: port bytes per byte of a plain fragment-layout store
        self.fragment_store_cost = fragment_store_cost
        # machine.dram_write_cost: DRAM-server bytes (at the read rate) per written byte
        self.dram_write_cost = dram_write_cost
        # machine.reduce_l2_costs: port bytes per reduced byte, by Store.reduce_layout
        self.reduce_cost = reduce_cost or {}
        self.l2_latency_s, self.dram_latency_s = l2_latency_s, dram_latency_s
        # machine.dram_write_queue_s: DRAM work a write-back may leave queued (None: any)
        self.write_queue_s = write_queue_s
        self.counters = MemoryCounters()
        self.kernel_counters = MemoryCounters()   # reset by the engine at each kernel start

    def _count(self, name: str, value: int) -> None:
        setattr(self.counters, name, getattr(self.counters, name) + value)
        setattr(self.kernel_counters, name, getattr(self.kernel_counters, name) + value)

    def load(self, key, tensor: str, nbytes: int, now_s: float, oob_bytes: int = 0,
             misaligned: bool = False, multicast: int = 1) -> float:
        """Issue a load at now_s; returns when the tile is in the SM's shared memory.
        oob_bytes (Load.oob_bytes) cross the L2 → SM path only; a multicast copy
        (Load.multicast) holds the port for its share of the bytes; a miss of a misaligned row
        stream (Load.line_misaligned) takes its bytes' DRAM time times the misaligned factor.
        A miss that evicts a dirty line waits for room in a bounded write queue (_writeback)."""
        # L2 → SM bandwidth is taken at issue (the request's slot on the crossbar)
        _, l2_done_s = self.l2_server.reserve(now_s, (nbytes + oob_bytes) / multicast)
        self._count("l2_to_sm_bytes", nbytes + oob_bytes)
        if not nbytes:      # a box wholly past the tensor's edge: no line, no DRAM
            return l2_done_s + self.l2_latency_s
        entry = self.l2.lookup(key)
        if entry is not None:
            self._count("load_hit_bytes", nbytes)
            self._count("load_hits", 1)
            line_ready_s = entry[2]
        else:
            self._count("load_miss_bytes", nbytes)
            self._count("load_misses", 1)
            self._count("dram_read_bytes", nbytes)
            _, dram_done_s = self.dram_server.reserve(
                now_s, nbytes * (1.0 + self.misaligned_extra) if misaligned else nbytes)
            line_ready_s = dram_done_s + self.dram_latency_s
            held_s = self._writeback(self.l2.insert(key, nbytes, False, line_ready_s), now_s)
            if held_s > line_ready_s:
                line_ready_s = held_s
        return max(l2_done_s, line_ready_s) + self.l2_latency_s

    def begin_kernel(self, now_s: float) -> None:
        """A kernel starts: its DRAM utilization (dram_utilization) counts from now (the
        work served by now: given less still queued)."""
        srv = self.dram_server
        self.kernel_start_s = now_s
        self.kernel_start_busy_s = srv.busy_s - max(0.0, srv.free_s - now_s)

    def dram_utilization(self, now_s: float) -> tuple[float, float]:
        """(busy fraction, read share) of the DRAM since the kernel began: the work it has
        served (reserved less what is still queued) over the elapsed time, and the kernel's
        DRAM bytes that were reads (1 before any)."""
        elapsed_s = now_s - self.kernel_start_s
        srv = self.dram_server
        served_s = srv.busy_s - self.kernel_start_busy_s - max(0.0, srv.free_s - now_s)
        k = self.kernel_counters
        moved = k.dram_read_bytes + k.dram_write_bytes
        return (served_s / elapsed_s if elapsed_s > 0.0 else 0.0,
                k.dram_read_bytes / moved if moved else 1.0)

    def trip_latency_s(self, key, tensor: str, now_s: float) -> float:
        """The latency of one round trip of a load of this tile issued now (Load.round_trips):
        the L2's if the tile is in it, the DRAM's at the kernel's DRAM utilization so far if
        not (machine.loaded_trip_latency_s; dram_latency_s, a pointer chase's load-to-use time,
        without a measured curve)."""
        if self.l2.contains(key):
            return self.l2_latency_s
        if self.trip_latency is None:
            return self.dram_latency_s
        return self.trip_latency(*self.dram_utilization(now_s))

    def store(self, key, tensor: str, nbytes: int, reduce, now_s: float,
              layout: str = "coalesced", partial_sectors: int = 0,
              misaligned: bool = False) -> float:
        """Issue a store; returns when L2 has accepted it (the CTA waits for that, not for DRAM,
        except for room in a bounded write queue for the write-back it causes: _writeback).
        A reduce holds the L2 port for as long as the atomic-reduction rate takes; a plain
        store in the fragment layout (Store.layout) as long as that layout's rate takes. Its
        partial-sector writes (Store.partial_sectors) and, for a misaligned row stream
        (Store.line_misaligned), its bytes' extra write time take DRAM time nobody waits for,
        charged when stored."""
        cost = (self.reduce_cost.get(reduce, 1.0) if reduce else
                self.fragment_store_cost if layout == "fragment" else 1.0)
        _, l2_done_s = self.l2_server.reserve(now_s, nbytes * cost)
        self._count("sm_to_l2_bytes", nbytes)
        extra = partial_sectors * self.partial_sector_cost
        if misaligned:
            extra += nbytes * self.misaligned_extra * self.dram_write_cost
        if extra:
            Server.reserve(self.dram_server, now_s, extra)
        entry = self.l2.lookup(key)
        if entry is not None:
            written_back = self.l2.mark_dirty(key, entry)
            if entry[0] != nbytes:            # a differently sized write to the same tile
                self.l2.resize(entry, nbytes)
            held_s = self._writeback(written_back, now_s)
            return held_s if held_s > l2_done_s else l2_done_s
        ready_s = l2_done_s
        if reduce:                            # read-modify-write: fetch the old value first
            self._count("dram_read_bytes", nbytes)
            _, dram_done_s = self.dram_server.reserve(now_s, nbytes)
            ready_s = max(ready_s, dram_done_s + self.dram_latency_s)
        held_s = self._writeback(self.l2.insert(key, nbytes, True, ready_s), now_s)
        return held_s if held_s > l2_done_s else l2_done_s

    def _writeback(self, nbytes: int, now_s: float) -> float:
        """Queue a write-back of nbytes on the DRAM server; returns until when the access that
        caused it is held (0: not held): until the queue has served all but write_queue_s of
        its work (GpuSpec.dram_write_queue_s; None: an unbounded queue, fire and forget)."""
        if not nbytes:
            return 0.0
        self._count("dram_write_bytes", nbytes)
        if isinstance(self.dram_server, MixedDramServer):   # the cost of the mix
            self.dram_server.reserve_write(now_s, nbytes)
        else:
            self.dram_server.reserve(now_s, nbytes * self.dram_write_cost)
        if self.write_queue_s is None:
            return 0.0
        return self.dram_server.free_s - self.write_queue_s

    def flush(self) -> None:
        """End of schedule: dirty lines still in L2 reach DRAM (bytes only, no time)."""
        nbytes = self.l2.dirty_bytes()
        self._count("dram_write_bytes", nbytes)
        self._count("dram_write_flush_bytes", nbytes)

    def invalidate(self) -> int:
        """ncu protocol, between kernels: the profiler writes dirty lines back and invalidates
        the L2 outside any kernel's measurement (no bytes counted, no time). Returns the dirty
        bytes dropped from the counts."""
        nbytes = self.l2.dirty_bytes()
        self.l2.clear()
        return nbytes


class ExpectedMemory:
    """The memory front end of the fast mode's micro-simulations: no cache; for each tensor
    the L2 model gives (p_bytes, p_latency): the fraction of its load bytes read from DRAM and
    the expected DRAM wait of a load in units of dram_latency_s (a hit on a line still in
    flight from DRAM waits too, which is why p_latency ≥ p_bytes when CTAs read a tile
    together). Every latency and DRAM transfer is its expected value. The servers are private
    to the one simulated SM; contention between SMs is the macro simulation's business."""

    def __init__(self, l2_server: Server, dram_server: Server, l2_latency_s: float,
                 dram_latency_s: float, miss_probability: dict, l2_queue_position: float = 0.0,
                 reduce_cost: dict | None = None, l2_fifo_wait_s: dict | None = None,
                 fragment_store_cost: float = 1.0, misaligned_factor: float = 1.0,
                 trip_latency=None, trip_utilization: float = 0.0, read_share: float = 1.0):
        self.l2_server, self.dram_server = l2_server, dram_server
        # a dependent DRAM trip's latency by (chip utilization, read share) (trip_latency_of),
        # the chip's DRAM utilization the trips see (the characterizer's fixed point) and the
        # kernel's DRAM read share
        self.trip_latency, self.trip_utilization, self.read_share = (
            trip_latency, trip_utilization, read_share)
        self.misaligned_factor = misaligned_factor
        self.reduce_cost = reduce_cost or {}
        self.fragment_store_cost = fragment_store_cost
        self.l2_queue_factor = 1.0 + l2_queue_position
        # (kind, tensor) → the L2 FIFO wait exact mode's wave gives such a request
        # (wave_queue.py); when given, it replaces the queue factor
        self.l2_fifo_wait_s = l2_fifo_wait_s
        self.l2_latency_s, self.dram_latency_s = l2_latency_s, dram_latency_s
        self.miss_probability = miss_probability

    def _l2_done(self, kind: str, tensor: str, nbytes: float, now_s: float) -> float:
        """When the request's L2 transfer ends: after its FIFO wait (the wave's, or the queue
        factor's) and behind this SM's own earlier requests."""
        waits = self.l2_fifo_wait_s
        if waits is None:
            return self.l2_server.reserve(now_s, nbytes * self.l2_queue_factor)[1]
        return self.l2_server.reserve(now_s + waits.get((kind, tensor), 0.0), nbytes)[1]

    def load(self, key, tensor: str, nbytes: int, now_s: float, oob_bytes: int = 0,
             misaligned: bool = False, multicast: int = 1) -> float:
        l2_done_s = self._l2_done("load", tensor, (nbytes + oob_bytes) / multicast, now_s)
        if not nbytes:      # a box wholly past the tensor's edge: no line, no DRAM
            return l2_done_s + self.l2_latency_s
        p_bytes, p_latency = self.miss_probability.get(tensor, (0.0, 0.0))
        # a miss waits for the tile's transfer and the DRAM latency; a hit on a line in
        # flight waits for what is left of that fetch: p_latency is the expected fraction
        wait_s = p_latency * (nbytes / self.dram_server.rate + self.dram_latency_s)
        if p_bytes > 0.0:           # DRAM bandwidth: queued behind this SM's earlier misses
            f = self.misaligned_factor if misaligned else 1.0
            wait_s += self.dram_server.reserve(now_s, p_bytes * nbytes * f)[0] - now_s
        line_ready_s = now_s + wait_s
        return max(l2_done_s, line_ready_s) + self.l2_latency_s

    def trip_latency_s(self, key, tensor: str, now_s: float) -> float:
        """The expected latency of one round trip of a load of `tensor` (Load.round_trips):
        the DRAM's for the expected fraction that waits for it, the L2's for the rest. The
        DRAM's is at the chip's DRAM utilization trip_utilization (the characterizer's fixed
        point over the stream's own DRAM work: characterize._trip_fixed_point), as exact mode
        takes it from the kernel's DRAM so far (ExactMemory.dram_utilization)."""
        p = min(1.0, self.miss_probability.get(tensor, (0.0, 0.0))[1])
        dram_s = self.dram_latency_s
        if p > 0.0 and self.trip_latency is not None:
            dram_s = self.trip_latency(self.trip_utilization, self.read_share)
        return (1.0 - p) * self.l2_latency_s + p * dram_s

    def store(self, key, tensor: str, nbytes: int, reduce, now_s: float,
              layout: str = "coalesced", partial_sectors: int = 0,
              misaligned: bool = False) -> float:
        port_bytes = nbytes * (self.reduce_cost.get(reduce, 1.0) if reduce else
                               self.fragment_store_cost if layout == "fragment" else 1.0)
        return self._l2_done("store", tensor, port_bytes, now_s)
