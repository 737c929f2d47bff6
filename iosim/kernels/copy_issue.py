"""Copy issue from a captured trace's clock64 stamps: how long a CTA's computing threads spend
issuing their own cp.async copies (the decode kernels' method (docs/decode.md), iosim.kernels.decode.
copy_issue_cycles, made general for the project's FA-1/FA-2 kernels).

Thread 0 of a CTA stamps every event right after it issued its part of the operation
(iosim_common.cuh, TraceRec). Between a load's stamp and the previous event's stamp, when that
event is a load too, lie only the copy loop of this load and one trace write (the previous
event's record). A trace write alone is timed where two events follow each other with nothing
between (the kernel's consecutive store records: `write_pairs`); its median is subtracted.
Copies of a tile are issued whole (rows past the valid ones are zero-filled cp.async copies,
iosim_common.cuh load_tile), so a sample is per byte of the full tile, `tile_bytes`.

Used by the algorithms' constants (fa2.py, fa1.py: FA2_FWD_COPY_ISSUE_CYCLES_PER_BYTE, ...) and
by tests/test_copy_issue_traces.py, which recomputes them from tests/data/traces/*.json.
No cupy here: it reads trace JSON only."""
from __future__ import annotations

import numpy as np

LOAD, STORE = 1, 2


def _kernel(trace: dict, name: str) -> dict:
    return next(k for k in trace["kernels"] if k["name"] == name)


def trace_write_cycles(trace: dict, kernel: str, write_pairs) -> list:
    """clock64 gaps between consecutive stores (tensor a, tensor b) in `write_pairs` recorded
    after the CTA's first load: one trace write each (the kernel records them back to back;
    before the first load FA-1 zero-fills O, l, m with a store loop between the records)."""
    k = _kernel(trace, kernel)
    names = k["names"]
    pairs = {(names.index(a), names.index(b)) for a, b in write_pairs
             if a in names and b in names}
    out = []
    for events in k["ctas"]:
        first = next((i for i, e in enumerate(events) if e[0] == LOAD), len(events))
        for a, b in zip(events[first:], events[first + 1:]):
            if a[0] == STORE and b[0] == STORE and (a[1], b[1]) in pairs:
                out.append(b[6] - a[6])
    return out


def copy_issue_samples(trace: dict, kernel: str, pairs, write_cycles: float) -> dict:
    """{tensor: [issue cycles of one load ...]} for every load whose previous event in its CTA
    is the load named with it in `pairs` ((previous tensor, tensor): pairs between which the
    kernel's source runs nothing but the second load's copy loop, no wait or barrier): stamp
    gap less one trace write (`write_cycles`)."""
    k = _kernel(trace, kernel)
    names = k["names"]
    ids = {(names.index(a), names.index(b)): b for a, b in pairs if a in names and b in names}
    out = {b: [] for _a, b in pairs}
    for events in k["ctas"]:
        for a, b in zip(events, events[1:]):
            t = ids.get((a[1], b[1]))
            if t is not None and a[0] == LOAD and b[0] == LOAD:
                out[t].append(b[6] - a[6] - write_cycles)
    return out


def cycles_per_byte(samples: dict, tile_bytes: dict, same_as: dict | None = None) -> float:
    """One figure per kernel: the loop's loads' median issue cycles over their bytes,
    sum_t median_t / sum_t tile_bytes_t (a tensor without a clean sample takes the median of
    the tensor `same_as` names: the same copy loop over the same tile shape)."""
    same_as = same_as or {}
    cyc = byt = 0.0
    for t, nbytes in tile_bytes.items():
        s = samples.get(t) or samples.get(same_as.get(t, ""), [])
        if not s:
            raise ValueError(f"no clean copy-issue sample for {t}")
        cyc += float(np.median(s))
        byt += nbytes
    return cyc / byt


def store_issue_slope(trace: dict, kernel: str, after: str, store: str) -> float | None:
    """Cycles per stored byte of a store the threads write themselves (Store.thread_issued):
    the clock64 gap from the `after` op's stamp to the `store` tile's stamp, median per stored
    byte count, between the largest and the smallest count of the trace (same code, only the
    stored rows differ: the fixed part and the trace write cancel); None with one count."""
    k = _kernel(trace, kernel)
    names = k["names"]
    a_id, s_id = names.index(after), names.index(store)
    gaps: dict = {}
    for events in k["ctas"]:
        for a, b in zip(events, events[1:]):
            if a[0] != LOAD and a[0] != STORE and a[1] == a_id and b[0] == STORE and b[1] == s_id:
                gaps.setdefault(b[3], []).append(b[6] - a[6])
    if len(gaps) < 2:
        return None
    lo, hi = min(gaps), max(gaps)
    return (float(np.median(gaps[hi])) - float(np.median(gaps[lo]))) / (hi - lo)


def phase_gap_difference(trace: dict, kernel: str, with_phase: str, without_phase: str) -> float:
    """Clock64 cycles of a phase the kernel runs before op `with_phase` and not before op
    `without_phase`, where the two ops' stamp gaps are otherwise alike (one barrier, a GEMM of
    the same shape, one trace write): median gap before `with_phase` less median gap before
    `without_phase`, over every CTA and step of the trace (gaps from the previous stamp)."""
    k = _kernel(trace, kernel)
    names = k["names"]
    w_id, wo_id = names.index(with_phase), names.index(without_phase)
    gaps = {w_id: [], wo_id: []}
    for events in k["ctas"]:
        for a, b in zip(events, events[1:]):
            if b[1] in gaps and b[0] not in (LOAD, STORE, STORE + 1):
                gaps[b[1]].append(b[6] - a[6])
    return float(np.median(gaps[w_id])) - float(np.median(gaps[wo_id]))
