"""CTA timelines as Chrome / Perfetto trace-event JSON (the "JSON Object Format" of the Trace
Event Format; opens in ui.perfetto.dev and chrome://tracing).

Layout, the same for a simulation (`iosim run --timeline`) and a captured kernel trace
(`iosim capture --timeline`), so the two files open side by side:

- each kernel launch is a process (pid 1, 2, ... in launch order), named after the kernel;
- each SM slot is a thread (track) of it: tid = SM × slots + slot, named "SM 12 · slot 1",
  where a slot is one of the CTAs an SM holds at once (CTAs resident together on an SM get
  different slots; a slot is reused once its CTA has ended);
- each CTA is a complete event ("ph": "X", ts and dur in µs) on its slot's track, with the
  CTA's coordinates in args.

Inside a CTA: a captured trace has every tile load, store and compute phase stamped with
%globaltimer, so each phase is its own complete event nested in the CTA's (from one recorded
operation to the next, named after the operation that opens it). The simulator records per CTA
only how long it was stalled on, and busy with, each unit, not when: those totals go in the
CTA event's args (`memory_stall_us`, `tensor_us`, ...) rather than as invented slices.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import IosimError


def _slots(rows: list) -> int:
    """Give each row (dict with sm, start, end, key) a `slot` on its SM; returns the most slots
    any SM used."""
    ends: dict = {}
    most = 1
    for r in sorted(rows, key=lambda r: (r["start"], r["sm"], r["key"])):
        lane = ends.setdefault(r["sm"], [])
        for i, e in enumerate(lane):
            if e <= r["start"]:
                lane[i] = r["end"]
                r["slot"] = i
                break
        else:
            lane.append(r["end"])
            r["slot"] = len(lane) - 1
        most = max(most, len(lane))
    return most


def _metadata(pid: int, name: str, tracks: dict, sort: int) -> list:
    out = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}},
           {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": sort}}]
    for tid, label in sorted(tracks.items()):
        out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                    "args": {"name": label}})
        out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                    "args": {"sort_index": tid}})
    return out


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 6)


def _kernel_events(pid: int, title: str, rows: list) -> list:
    """Metadata and CTA events of one kernel; rows carry sm, start, end (s), key, name, args,
    and optionally phases [(name, start_s, end_s, args)]."""
    slots = _slots(rows)
    tracks, events = {}, []
    for r in sorted(rows, key=lambda r: (r["start"], r["sm"], r["slot"], r["key"])):
        tid = r["sm"] * slots + r["slot"]
        tracks[tid] = f"SM {r['sm']} · slot {r['slot']}"
        events.append({"ph": "X", "pid": pid, "tid": tid, "cat": "cta", "name": r["name"],
                       "ts": _us(r["start"]), "dur": _us(r["end"] - r["start"]),
                       "args": r["args"]})
        for name, t0, t1, args in r.get("phases", ()):
            events.append({"ph": "X", "pid": pid, "tid": tid, "cat": "phase", "name": name,
                           "ts": _us(t0), "dur": _us(t1 - t0), "args": args})
    return _metadata(pid, title, tracks, pid) + events


def _coord_args(kernel, cta: int) -> dict:
    if kernel is None or not hasattr(kernel, "cta_coord"):
        return {}
    return dict(zip(kernel.coord_names, (int(c) for c in kernel.cta_coord(cta))))


PHASE_COLUMNS = (("memory_stall_s", "memory_stall_us"), ("tensor_stall_s", "tensor_stall_us"),
                 ("exp_stall_s", "exp_stall_us"), ("alu_stall_s", "alu_stall_us"),
                 ("tensor_s", "tensor_us"), ("exp_s", "exp_us"), ("alu_s", "alu_us"))


def simulation_trace(analysis) -> dict:
    """The simulated CTA timeline of an analysis (model 'sim') as a trace-event document."""
    sim = analysis.simulation
    tl = getattr(sim, "timeline", None)
    if tl is None or len(tl) == 0:
        raise IosimError("--timeline needs the simulator (--model sim)")
    cols = tl.columns
    kernels = analysis.schedule.kernels
    by_kernel: dict = {}
    for i in range(len(tl)):
        k, cta = int(cols["kernel"][i]), int(cols["cta"][i])
        kern = kernels[k] if k < len(kernels) else None
        args = {"cta": cta, **_coord_args(kern, cta)}
        args.update({out: _us(cols[col][i]) for col, out in PHASE_COLUMNS})
        by_kernel.setdefault(k, []).append({
            "sm": int(cols["sm"][i]), "start": cols["start_s"][i], "end": cols["end_s"][i],
            "key": cta, "name": f"CTA {cta}", "args": args})
    events = []
    for k in sorted(by_kernel):
        name = tl.kernel_names[k] if k < len(tl.kernel_names) else kernels[k].name
        events += _kernel_events(k + 1, f"{name} (simulated)", by_kernel[k])
    a = analysis
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"source": "iosim simulation", "algorithm": a.algorithm,
                          "gpu": a.gpu.name, "problem": a.problem.describe(),
                          "mode": sim.mode if hasattr(sim, "mode") else "",
                          "predicted_time_s": a.predicted_time_s}}


def _event_label(e) -> str:
    if e.kind in ("load", "store"):
        coord = ",".join(map(str, e.coord))
        return f"{e.kind} {e.name}[{coord}]" + (" (reduce)" if e.reduce else "")
    return f"{e.kind} {e.name}"


def capture_trace(trace) -> dict:
    """A captured kernel Trace (iosim.kernels.trace, format iosim-trace-1) as a trace-event
    document: kernels laid end to end in launch order, times from %globaltimer."""
    events, offset = [], 0.0
    for ki, kern in enumerate(trace.kernels):
        rows, kend = [], 0.0
        for cta, evs in enumerate(kern.ctas):
            if not evs:
                continue
            evs = sorted(evs, key=lambda e: e.t_ns)
            t = [offset + e.t_ns * 1e-9 for e in evs]
            phases = [(_event_label(e), t[j], t[j + 1],
                       {"bytes": e.bytes} if e.kind in ("load", "store") else {})
                      for j, e in enumerate(evs[:-1])]
            rows.append({"sm": evs[0].smid, "start": t[0], "end": t[-1], "key": cta,
                         "name": f"CTA {cta}", "phases": phases,
                         "args": {"cta": cta, "events": len(evs)}})
            kend = max(kend, t[-1] - offset)
        events += _kernel_events(ki + 1, f"{kern.name} (captured)", rows)
        offset += kend
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"source": "iosim capture (kernel trace mode)",
                          "algorithm": trace.algorithm, "device": trace.device,
                          "problem": trace.problem, "command": trace.command}}


def write(doc: dict, path, force: bool = True) -> None:
    p = Path(path)
    if p.exists() and not force:
        raise IosimError(f"{path} exists; pass --force to overwrite it")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
