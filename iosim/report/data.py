"""Timelines and measurements for a report: CTA bars from a simulation, from a captured
kernel trace (tests/data/traces/*.json) and measured points (scenarios/validation/*.csv).
All optional: each returns nothing when its source is absent."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from ..paths import REPO_DIR

TRACE_DIR = REPO_DIR / "tests" / "data" / "traces"
MEASURED_DIR = REPO_DIR / "scenarios" / "validation"


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
    for key in ("batch", "heads_q", "seq_q", "seq_kv", "head_dim", "dtype", "causal"):
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


def _pick(d: dict, *names, default=None):
    for n in names:
        if n in d and d[n] is not None:
            return d[n]
    return default


def trace_bars(path: Path, cap: int) -> tuple[str, list, int]:
    """(label, bars, total CTAs) of a captured trace: per CTA its SM and start/end times.

    Reads the per-CTA records of iosim.kernels.trace's JSON (a list under "ctas", or
    "events" grouped by CTA); times in seconds, or in ns or clock cycles (converted with the
    trace's clock). Returns no bars when the trace carries no timing."""
    meta = json.loads(path.read_text())
    label = f"{meta.get('algorithm', path.stem)} (captured: {path.name})"
    clock = float(_pick(meta, "clock_hz", default=0) or 0)
    recs = meta.get("ctas") or meta.get("blocks") or []
    if not recs and isinstance(meta.get("events"), list):
        by_cta: dict = {}
        for e in meta["events"]:
            if not isinstance(e, dict) or "cta" not in e:
                continue
            c = by_cta.setdefault((e.get("kernel", 0), e["cta"]), {"cta": e["cta"],
                                                                   "kernel": e.get("kernel", 0)})
            for key in ("sm", "smid"):
                if key in e:
                    c["sm"] = e[key]
            t = _pick(e, "t_s", "time_s", "t_ns", "time_ns", "t_cycles", "clock", "globaltimer")
            if t is not None:
                c["start"] = min(c.get("start", t), t)
                c["end"] = max(c.get("end", t), t)
        recs = list(by_cta.values())
    rows = []
    for r in recs:
        if not isinstance(r, dict):
            continue
        sm = _pick(r, "sm", "smid", "sm_id")
        start = _pick(r, "start_s", "start_ns", "start_cycles", "start", "t0")
        end = _pick(r, "end_s", "end_ns", "end_cycles", "end", "t1")
        if sm is None or start is None or end is None:
            continue
        scale = 1.0
        if "start_ns" in r or meta.get("time_unit") == "ns":
            scale = 1e-9
        elif "start_cycles" in r or meta.get("time_unit") == "cycles":
            scale = 1.0 / clock if clock else 0.0
        if not scale:
            continue
        rows.append({"kernel_index": int(r.get("kernel", 0) or 0), "cta": int(r.get("cta", 0)),
                     "sm": int(sm), "start_s": float(start) * scale, "end_s": float(end) * scale,
                     "kernel": str(_pick(r, "kernel_name", default=meta.get("kernel", "kernel"))),
                     "detail": ""})
    if rows:
        t0 = min(r["start_s"] for r in rows)
        for r in rows:
            r["start_s"] -= t0
            r["end_s"] -= t0
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
    from. Rows must match the problem's fixed fields where the CSV has them; FLOPs are the
    useful matmul FLOPs of the row's N, bytes the row's measured DRAM (and L2) bytes."""
    path = measured_file(gpu)
    if path is None:
        return [], f"No measured dataset for {gpu.short_name} (looked for " \
                   f"scenarios/validation/measured_{gpu.short_name.split('-')[0]}.csv)"
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for row in rows:
        algo = (row.get("algorithm") or row.get("algo") or "").strip()
        n = _num(row, "seq", "seq_q", "N", "n")
        if n is None or (algorithms and algo and algo not in algorithms):
            continue
        skip = False
        for key in ("batch", "heads_q", "heads", "head_dim"):
            v = _num(row, key)
            attr = "heads_q" if key == "heads" else key
            if v is not None and int(v) != getattr(problem, attr):
                skip = True
        if "causal" in row and row["causal"] not in ("", None):
            if (row["causal"].strip().lower() in ("1", "true", "yes")) != problem.causal:
                skip = True
        t = _num(row, "time_s")
        if t is None and _num(row, "time_ms") is not None:
            t = _num(row, "time_ms") / 1e3
        if skip or not t:
            continue
        p = problem.with_(seq_q=int(n), seq_kv=int(n))
        flops = p.useful_flops()
        for level, key in (("DRAM", ("dram_bytes", "dram_bytes_measured")),
                           ("L2", ("l2_bytes", "l2_to_sm_bytes", "lts_bytes"))):
            b = _num(row, *key)
            if b:
                out.append({"intensity": flops / b, "flops_per_s": flops / t,
                            "label": (f"<b>measured {algo}</b> N = {int(n):,} vs {level}<br>"
                                      f"time {t:.6g} s<br>{level} bytes {int(b):,} B<br>"
                                      f"{flops / t:,.4g} useful FLOP/s<br>{path.name}")})
    note = (f"{len(out)} measured point(s) from {path.relative_to(REPO_DIR)}" if out else
            f"{path.relative_to(REPO_DIR)} has no rows for this problem")
    return out, note
