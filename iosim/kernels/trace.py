"""Traces captured from the kernels' trace mode, and their comparison with a Schedule.

A kernel compiled with -DIOSIM_TRACE records, per CTA, every tile load and store (tensor, tile
coordinates, bytes) and every MMA / exp phase (name), each stamped with %globaltimer, clock64()
and %smid by thread 0 right after it issued its part of the operation (layout: iosim_common.cuh).

How a trace is compared with a schedule (`compare_trace`): per CTA, the schedule's operations
`expand(kernel.program(cta))` without Alu and Barrier, against the kernel's recorded events.
 1. the LOADS, in order, must be equal (tensor, coordinates, bytes);
 2. the COMPUTE and STORE operations, in order, must be equal (Mma/Exp names; tensor,
    coordinates, bytes and atomic-reduce flag of stores);
 3. no load may come LATER than in the schedule: before each load the trace may have issued at
    most as many compute/store operations as the schedule has before it.
Loads may come earlier: that is the cp.async prefetch (tile j+stages−1 issued before tile j is
computed), which the Schedule expresses as `Kernel.pipeline`, not as operation order. The
largest hoist (in compute/store operations) is reported by `hoist_depths`.
 4. with `Pipeline.intra_overlap` (FA-3), an iteration's first GEMM is issued before the
    previous iteration's last GEMM (S_j = Q K_jᵀ, then O += P_{j−1} V_{j−1}, then the softmax of
    block j): the schedule's events are put in that software-pipelined order (`overlap_order`)
    before the comparison. The Schedule expresses this as `Pipeline.intra_overlap`, not as
    operation order, as it does the prefetch.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# must match the #defines in cuda/iosim_common.cuh
TENSORS = ("Q", "K", "V", "O", "LSE", "dO", "D", "dQaccum", "dQ", "dK", "dV", "dK_expanded",
           "dV_expanded", "S", "P", "m", "l", "O_partial", "ML_partial", "K_prefix", "V_prefix",
           "block_table")
KINDS = {1: "load", 2: "store", 3: "store", 4: "mma", 5: "exp"}
# compute-phase names per kernel, index = the id the .cu file records (its enum)
NAMES = {
    "fa2_fwd": ("S=QK^T", "exp", "O+=PV"),
    "fa2_bwd": ("S=QK^T", "P=exp(S-LSE)", "dV+=P^T dO", "dP=dO V^T", "dK+=dS^T Q", "dQ=dS K"),
    "fa1_fwd": ("S=QK^T", "exp", "PV"),
    "fa3_fwd": ("S=QK^T", "exp", "O+=PV"),
    "std_fwd_softmax": ("exp",),
    "fd_split": ("S=QK^T", "exp", "O+=PV"),
    "fd_combine": ("exp",),
}
TRACE_KINDS = ("load", "store", "mma", "exp")


@dataclass(frozen=True)
class Event:
    kind: str            # load | store | mma | exp
    name: str            # tensor (load/store) or phase name (mma/exp)
    coord: tuple = ()
    bytes: int = 0
    reduce: bool = False
    smid: int = -1
    t_ns: int = 0        # %globaltimer, relative to the kernel's first event
    clock: int = 0       # clock64(), relative to the CTA's first event

    def key(self) -> tuple:
        """What must equal the schedule's operation."""
        if self.kind in ("load", "store"):
            return (self.kind, self.name, tuple(self.coord), self.bytes, self.reduce)
        return (self.kind, self.name)


@dataclass
class KernelTrace:
    name: str
    grid: tuple
    threads: int
    smem: int
    ctas: list                   # per linear CTA index: list[Event]
    overflow: list = field(default_factory=list)   # CTAs whose slot overflowed


@dataclass
class Trace:
    algorithm: str
    problem: dict
    tiling: dict
    kernels: list                # list[KernelTrace], launch order
    untraced: list = field(default_factory=list)   # kernels run but not traceable (cuBLAS)
    device: str = ""
    command: str = ""

    # ---- JSON (compact: one array per event) ------------------------------------------
    def to_json(self) -> dict:
        ks = []
        for k in self.kernels:
            names = sorted({e.name for cta in k.ctas for e in cta})
            idx = {n: i for i, n in enumerate(names)}
            kinds = {"load": 1, "store": 2, "mma": 4, "exp": 5}
            ctas = [[[kinds[e.kind] + (1 if e.reduce else 0), idx[e.name], list(e.coord), e.bytes,
                      e.smid, e.t_ns, e.clock] for e in cta] for cta in k.ctas]
            ks.append({"name": k.name, "grid": list(k.grid), "threads": k.threads, "smem": k.smem,
                       "names": names, "overflow": k.overflow, "ctas": ctas})
        return {"format": "iosim-trace-1",
                "event_fields": ["kind(1 load,2 store,3 store-reduce,4 mma,5 exp)", "name index",
                                 "coord", "bytes", "smid", "t_ns", "clock"],
                "algorithm": self.algorithm, "problem": self.problem, "tiling": self.tiling,
                "device": self.device, "command": self.command, "untraced": self.untraced,
                "kernels": ks}

    @classmethod
    def from_json(cls, d: dict) -> "Trace":
        kernels = []
        for k in d["kernels"]:
            names = k["names"]
            ctas = [[Event(KINDS[e[0]], names[e[1]], tuple(e[2]), e[3], e[0] == 3, e[4], e[5], e[6])
                     for e in cta] for cta in k["ctas"]]
            kernels.append(KernelTrace(k["name"], tuple(k["grid"]), k["threads"], k["smem"], ctas,
                                       k.get("overflow", [])))
        return cls(d["algorithm"], d["problem"], d["tiling"], kernels, d.get("untraced", []),
                   d.get("device", ""), d.get("command", ""))

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), separators=(",", ":")))

    @classmethod
    def load(cls, path) -> "Trace":
        return cls.from_json(json.loads(Path(path).read_text()))

    def kernel(self, name: str) -> KernelTrace:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


# ---- decoding the device buffer ---------------------------------------------------------
def decode(buf, kernel_name: str, grid: tuple, threads: int, smem: int, cap: int) -> KernelTrace:
    """The uint64 trace buffer of one launch (numpy array) → KernelTrace."""
    import numpy as np

    n_ctas = grid[0] * grid[1] * grid[2]
    a = np.asarray(buf, dtype=np.uint64).reshape(n_ctas, 1 + 4 * cap)
    counts = a[:, 0].astype(np.int64)
    ev = a[:, 1:].reshape(n_ctas, cap, 4)
    names = NAMES.get(kernel_name, ())
    t_min = None
    for c in range(n_ctas):
        n = min(int(counts[c]), cap)
        if n:
            t = int(ev[c, :n, 2].min())
            t_min = t if t_min is None else min(t_min, t)
    ctas, overflow = [], []
    for c in range(n_ctas):
        n = int(counts[c])
        if n > cap:
            overflow.append(c)
        evs = []
        clk0 = int(ev[c, 0, 3]) if n else 0
        for e in range(min(n, cap)):
            w0, w1, w2, w3 = (int(x) for x in ev[c, e])
            nbytes = w0 & 0xFFFFFFFF
            ident = (w0 >> 32) & 0xFFFF
            kind_code = (w0 >> 48) & 0xF
            ncoord = (w0 >> 52) & 0xF
            smid = (w0 >> 56) & 0xFF
            coord = tuple((w1 >> (16 * q)) & 0xFFFF for q in range(ncoord))
            kind = KINDS[kind_code]
            if kind in ("load", "store"):
                name = TENSORS[ident]
            else:
                name = names[ident] if ident < len(names) else f"op{ident}"
            evs.append(Event(kind, name, coord, nbytes if kind in ("load", "store") else 0,
                             kind_code == 3, smid, w2 - (t_min or 0), w3 - clk0))
        ctas.append(evs)
    return KernelTrace(kernel_name, tuple(grid), threads, smem, ctas, overflow)


# ---- comparison with a schedule ----------------------------------------------------------
def schedule_events(kernel, cta: int) -> list:
    """The schedule's traceable operations of one CTA, as Events (no times)."""
    from ..schedule import expand

    out = []
    for op in expand(kernel.program(cta)):
        if op.kind in ("load", "store"):
            out.append(Event(op.kind, op.tensor, tuple(op.coord), op.bytes,
                             bool(getattr(op, "reduce", False))))
        elif op.kind in ("mma", "exp"):
            out.append(Event(op.kind, op.name))
    return out


def overlap_order(events: list) -> list:
    """The schedule's events as an intra-warpgroup-overlapped kernel issues them: every
    [last GEMM of iteration j−1, loads of iteration j, first GEMM of iteration j] becomes
    [loads, first GEMM of j, last GEMM of j−1]. The GEMM names are the first and last Mma of
    the sequence (FA-3: "S=QK^T" and "O+=PV")."""
    mmas = [e.name for e in events if e.kind == "mma"]
    if not mmas or mmas[0] == mmas[-1]:
        return list(events)
    first, last = mmas[0], mmas[-1]
    out, i = list(events), 0
    while i < len(out):
        if out[i].kind == "mma" and out[i].name == last:
            k = i + 1
            while k < len(out) and out[k].kind == "load":
                k += 1
            if k < len(out) and out[k].kind == "mma" and out[k].name == first:
                out[i:k + 1] = out[i + 1:k] + [out[k], out[i]]
                i = k + 1
                continue
        i += 1
    return out


def expected_events(kernel, cta: int) -> list:
    """What the kernel should record for one CTA: the schedule's events, in the
    software-pipelined order when the kernel overlaps within a warpgroup."""
    ev = schedule_events(kernel, cta)
    return overlap_order(ev) if getattr(kernel.pipeline, "intra_overlap", False) else ev


def _first_difference(a: list, b: list):
    for n, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return n, x, y
    if len(a) != len(b):
        n = min(len(a), len(b))
        return n, (a[n] if n < len(a) else None), (b[n] if n < len(b) else None)
    return None


def _positions(events: list) -> list:
    """For each load: how many compute/store operations precede it."""
    out, seen = [], 0
    for e in events:
        if e.kind == "load":
            out.append(seen)
        else:
            seen += 1
    return out


def compare_cta(expected: list, got: list) -> list:
    """Mismatches (strings) between the schedule's events and the kernel's for one CTA."""
    problems = []
    for what, pred in (("loads", lambda e: e.kind == "load"),
                       ("compute/stores", lambda e: e.kind != "load")):
        a = [e.key() for e in expected if pred(e)]
        b = [e.key() for e in got if pred(e)]
        diff = _first_difference(a, b)
        if diff:
            n, x, y = diff
            problems.append(f"{what} differ at #{n} of {len(a)} (schedule) / {len(b)} (kernel): "
                            f"schedule {x}, kernel {y}")
    if not problems:
        for n, (pe, pg) in enumerate(zip(_positions(expected), _positions(got))):
            if pg > pe:
                problems.append(f"load #{n} issued after {pg} compute/store ops; the schedule "
                                f"issues it after {pe}: a load came late")
                break
    return problems


def hoist_depths(expected: list, got: list) -> int:
    """Largest number of compute/store operations a load was issued ahead of its schedule
    position (the prefetch distance)."""
    return max([pe - pg for pe, pg in zip(_positions(expected), _positions(got))] or [0])


def compare_trace(schedule, trace: Trace, max_reports: int = 20) -> list:
    """Every difference between `schedule` and `trace`, as one-line strings; [] = equal.

    Kernels are matched in launch order by name; kernels the trace lists as untraced (cuBLAS
    GEMMs) are skipped. Launch shape (grid, threads, dynamic shared memory) must match."""
    out = []
    traced = {k.name: k for k in trace.kernels}
    for kernel in schedule.kernels:
        if kernel.name in trace.untraced:
            continue
        kt = traced.get(kernel.name)
        if kt is None:
            out.append(f"{kernel.name}: in the schedule but not in the trace")
            continue
        la = kernel.launch
        if tuple(kt.grid) != tuple(la.grid):
            out.append(f"{kernel.name}: grid {tuple(kt.grid)} in the trace, {tuple(la.grid)} scheduled")
            continue
        if kt.threads != la.threads_per_cta:
            out.append(f"{kernel.name}: {kt.threads} threads in the trace, {la.threads_per_cta} scheduled")
        if kt.smem != la.smem_bytes_per_cta:
            out.append(f"{kernel.name}: {kt.smem} B dynamic shared memory in the trace, "
                       f"{la.smem_bytes_per_cta} scheduled")
        if kt.overflow:
            out.append(f"{kernel.name}: trace slots overflowed for CTAs {kt.overflow[:5]}")
        for cta in range(kernel.num_ctas):
            for p in compare_cta(expected_events(kernel, cta), kt.ctas[cta]):
                out.append(f"{kernel.name} CTA {cta} {kernel.cta_coord(cta)}: {p}")
                if len(out) >= max_reports:
                    return out
    for name in traced:
        if name not in {k.name for k in schedule.kernels}:
            out.append(f"{name}: in the trace but not in the schedule")
    return out


def trace_stats(schedule, trace: Trace) -> dict:
    """Per kernel: CTAs, events, and the largest load hoist (prefetch distance)."""
    stats = {}
    for kernel in schedule.kernels:
        if kernel.name in trace.untraced or kernel.name not in {k.name for k in trace.kernels}:
            continue
        kt = trace.kernel(kernel.name)
        hoist = max(hoist_depths(expected_events(kernel, c), kt.ctas[c])
                    for c in range(kernel.num_ctas))
        stats[kernel.name] = {"ctas": kernel.num_ctas,
                              "events": sum(len(c) for c in kt.ctas),
                              "max_load_hoist": hoist,
                              "sms": len({e.smid for c in kt.ctas for e in c})}
    return stats


# ---- what the trace mode costs, and a CTA's span without it --------------------------------
def record_overhead_cycles(kernel: KernelTrace) -> float | None:
    """Median clock64 cycles thread 0 spends recording one event: the gap between the last two
    events of a CTA where both are stores recorded back to back, with no work between them
    (fa2_fwd.cu and fa3_fwd.cu record O and LSE after the epilogue's stores; fd_split records
    O_partial and ML_partial likewise). None when no CTA ends so."""
    gaps = sorted(c[-1].clock - c[-2].clock for c in kernel.ctas
                  if len(c) >= 2 and c[-1].kind == "store" and c[-2].kind == "store")
    if not gaps:
        return None
    n = len(gaps)
    return gaps[n // 2] if n % 2 else 0.5 * (gaps[n // 2 - 1] + gaps[n // 2])


def cta_span_ns(events: list, overhead_cycles: float) -> float:
    """Nanoseconds from a CTA's first recorded event to its last, less the recording itself:
    (clock64 span - (events - 1) x overhead) at the CTA's own clock (clock64 cycles per
    %globaltimer ns over the span). The first event is recorded just after the CTA issued its
    first load, the last just after it issued its last store."""
    first, last = events[0], events[-1]
    dt_ns = last.t_ns - first.t_ns
    if dt_ns <= 0:
        raise ValueError("a span needs events at two different times")
    cycles_per_ns = (last.clock - first.clock) / dt_ns
    return (last.clock - first.clock - (len(events) - 1) * overhead_cycles) / cycles_per_ns


def cta_clock_hz(events: list) -> float:
    """The SM clock a CTA ran at: its clock64 cycles over its %globaltimer ns, first event to
    last (the trace's own clock; the reported boost clock is not what the counters show,
    GpuSpec.sm_clock_counted_max_hz)."""
    first, last = events[0], events[-1]
    dt_ns = last.t_ns - first.t_ns
    if dt_ns <= 0:
        raise ValueError("a clock needs events at two different times")
    return (last.clock - first.clock) / dt_ns * 1e9
