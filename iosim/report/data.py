"""Timelines and measurements for a report: CTA bars from a simulation, from a captured
kernel trace (tests/data/traces/*.json) and measured points (iosim/data/validation/*.csv).
All optional: each returns nothing when its source is absent."""
from __future__ import annotations

import csv
import json
from pathlib import Path



from ..paths import TRACE_DIR, VALIDATION_DIR
MEASURED_DIR = VALIDATION_DIR


# ---- simulator timeline -------------------------------------------------------------
def timeline_frame(sim):
    """The simulation's per-CTA timeline as a DataFrame, or None."""
    tl = getattr(sim, "timeline", None) if sim is not None else None
    if tl is None:
        return None
    if hasattr(tl, "to_dataframe"):
        tl = tl.to_dataframe()
    if not hasattr(tl, "columns") or len(tl) == 0:
        return None
    return tl


def first_ctas(rows: list, cap: int) -> list:
    """The `cap` earliest-starting CTAs (ties by kernel, CTA): the first waves."""
    rows = sorted(rows, key=lambda r: (r["start_s"], r["kernel_index"], r["cta"]))
    return rows[:cap]


def assign_lanes(bars: list) -> int:
    """Give each bar a `lane` on its SM so that CTAs resident at once do not overlap;
    returns the number of lanes used (the largest number of co-resident CTAs seen)."""
    lanes_end: dict = {}
    most = 1
    for b in sorted(bars, key=lambda b: (b["start_s"], b["sm"], b["cta"])):
        ends = lanes_end.setdefault(b["sm"], [])
        for i, e in enumerate(ends):
            if e <= b["start_s"]:
                ends[i] = b["end_s"]
                b["lane"] = i
                break
        else:
            ends.append(b["end_s"])
            b["lane"] = len(ends) - 1
        most = max(most, len(ends))
    return most


def sim_bars(analysis, cap: int) -> tuple[list, int]:
    """(bars, total CTAs) of the first `cap` CTAs of a simulated analysis."""
    df = timeline_frame(analysis.simulation)
    if df is None:
        return [], 0
    cols = set(df.columns)
    name_col = "kernel_name" if "kernel_name" in cols else None
    kernels = analysis.schedule.kernels
    rows = []
    for rec in df.itertuples(index=False):
        r = rec._asdict()
        k = int(r.get("kernel", 0))
        kern = kernels[k] if 0 <= k < len(kernels) else None
        rows.append({"kernel_index": k, "cta": int(r["cta"]), "sm": int(r["sm"]),
                     "start_s": float(r["start_s"]), "end_s": float(r["end_s"]),
                     "kernel": (r[name_col] if name_col and r[name_col] else
                                (kern.name if kern else str(k))),
                     "detail": _detail(r), "_k": kern})
    bars = first_ctas(rows, cap)
    for b in bars:
        kern = b.pop("_k")
        if kern is not None:
            coord = kern.cta_coord(b["cta"])
            b["coord"] = "(" + ", ".join(f"{n} {v}" for n, v in zip(kern.coord_names, coord)) + ")"
    return bars, len(rows)


def _detail(r: dict) -> str:
    parts = []
    for key, label in (("memory_stall_s", "memory stall"), ("tensor_s", "tensor-core work"),
                       ("exp_s", "exp work"), ("tensor_stall_s", "tensor-core wait"),
                       ("exp_stall_s", "exp wait")):
        if key in r and r[key] is not None:
            parts.append(f"{label} {float(r[key]) * 1e6:.4f} µs")
    return "<br>".join(parts)


# ---- captured traces ------------------------------------------------------------------
def _problem_matches(meta: dict, problem) -> bool:
    p = meta.get("problem", meta)
    for key in ("batch", "heads_q", "heads_kv", "seq_q", "seq_kv", "head_dim", "dtype", "causal",
                "direction"):
        if key in p and getattr(problem, key) != p[key]:
            return False
    return "seq_q" in p


def find_traces(problem, trace_dir: Path = TRACE_DIR) -> list[Path]:
    """Captured traces whose problem equals `problem` (any algorithm)."""
    if not trace_dir.is_dir():
        return []
    out = []
    for path in sorted(trace_dir.glob("*.json")):
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and _problem_matches(meta, problem):
            out.append(path)
    return out


def trace_bars(path: Path, cap: int) -> tuple[str, list, int]:
    """(label, bars, total CTAs) of a captured trace (iosim.kernels.trace format
    'iosim-trace-1'): per CTA its SM (%smid) and first/last event time (%globaltimer, ns,
    relative to the kernel's first event). Kernels are laid end to end in launch order."""
    meta = json.loads(path.read_text())
    fields = [str(f).split("(")[0].strip() for f in meta.get("event_fields", [])]
    try:
        i_sm, i_t = fields.index("smid"), fields.index("t_ns")
    except ValueError:
        return f"{path.name} (unknown trace format)", [], 0
    device = meta.get("device", "")
    label = f"{meta.get('algorithm', path.stem)} (captured on {device.split(',')[0]}: {path.name})"
    rows, offset = [], 0.0
    for ki, kern in enumerate(meta.get("kernels", [])):
        kend = 0.0
        for cta, events in enumerate(kern.get("ctas", [])):
            ev = [e for e in events if isinstance(e, list) and len(e) > max(i_sm, i_t)]
            if not ev:
                continue
            t0 = min(e[i_t] for e in ev) * 1e-9
            t1 = max(e[i_t] for e in ev) * 1e-9
            kend = max(kend, t1)
            rows.append({"kernel_index": ki, "cta": cta, "sm": int(ev[0][i_sm]),
                         "start_s": offset + t0, "end_s": offset + t1,
                         "kernel": kern.get("name", f"kernel {ki}"),
                         "detail": f"{len(ev)} tile events (first to last event)"})
        offset += kend
    return label, first_ctas(rows, cap), len(rows)


# ---- measured points ------------------------------------------------------------------
def measured_file(gpu) -> Path | None:
    base = gpu.short_name.split("-")[0].lower()
    p = MEASURED_DIR / f"measured_{base}.csv"
    return p if p.is_file() else None


def _num(row: dict, *names):
    for n in names:
        v = row.get(n)
        if v not in (None, ""):
            try:
                return float(v)
            except ValueError:
                continue
    return None


def measured_points(gpu, problem, algorithms, seqs) -> tuple[list, str]:
    """Measured (intensity, FLOP/s) points for the roofline and a note on where they came
    from. Rows must match the problem's head dim, dtype, causality and direction and one of
    the algorithms (batch and heads may differ: intensity and rate barely depend on them once
    the GPU is full). FLOP/s = the row's useful FLOPs / time; bytes = measured DRAM read +
    write (ncu) and L2→SM reads."""
    path = measured_file(gpu)
    rel = f"iosim/data/validation/measured_{gpu.short_name.split('-')[0]}.csv"
    if path is None:
        return [], f"No measured dataset for {gpu.short_name} (looked for {rel})"
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for row in rows:
        algo = (row.get("algorithm") or "").strip()
        n = _num(row, "seq_q", "seq")
        if n is None or algo not in algorithms or not seqs[0] <= n <= seqs[-1]:
            continue
        skip = False
        for key in ("head_dim",):
            v = _num(row, key)
            if v is not None and int(v) != getattr(problem, key):
                skip = True
        for key in ("dtype", "direction"):
            if row.get(key) and row[key].strip() != getattr(problem, key):
                skip = True
        if row.get("causal"):
            if (row["causal"].strip().lower() in ("1", "true", "yes")) != problem.causal:
                skip = True
        t = _num(row, "time_s")
        if skip or not t:
            continue
        flops = _num(row, "useful_flops") or problem.with_(
            seq_q=int(n), seq_kv=int(_num(row, "seq_kv") or n)).useful_flops()
        dram = (_num(row, "dram_read_bytes") or 0) + (_num(row, "dram_write_bytes") or 0)
        l2 = _num(row, "l2_to_sm_read_bytes", "l2_bytes")
        impl = row.get("impl", "")
        shape = f"B{int(_num(row, 'batch') or 0)} H{int(_num(row, 'heads_q') or 0)}"
        for level, b in (("DRAM", dram), ("L2", l2)):
            if b:
                out.append({"intensity": flops / b, "flops_per_s": flops / t, "level": level,
                            "algorithm": algo,
                            "label": (f"<b>measured {algo}</b> ({impl}) N = {int(n):,}, {shape}<br>"
                                      f"vs {level}: {flops / b:,.2f} useful FLOP/B<br>"
                                      f"time {t:.6g} s<br>{level} bytes {int(b):,} B (ncu)<br>"
                                      f"{flops / t:,.4g} useful FLOP/s<br>{row.get('id', '')}")})
    note = (f"{len(out)} measured point(s) (✕ vs DRAM, + vs L2) from {rel}" if out else
            f"{rel} has no rows for this problem and range")
    return out, note
