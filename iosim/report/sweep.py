"""The numbers behind a report: sweeps over N and over SRAM size M, as plain records.

Everything here is importable and testable without plotly; `figures.py` only draws these
records. A point that cannot be built (a tiling that does not fit, a problem too large for the
GPU) becomes a record with `ok: False` and the one-line reason, and the report lists it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..analysis.bounds import fa1_theorem2_elements, saha_ye_elements
from ..errors import IosimError
from ..progress import Progress

UNITS = ("tensor cores", "exp units", "DRAM", "L2")


def parse_seq_range(text: str) -> list[int]:
    """'1024..65536' → 1024, 2048, …, 65536 (doubling); '1024,4096' → those; '4096' → [4096]
    (options.parse_seq_list, with its limits)."""
    from ..options import parse_seq_list
    return parse_seq_list(text)


def default_compare_seq(seqs: list[int]) -> int:
    """The middle point of the sweep (geometric middle for a power-of-two range)."""
    return seqs[len(seqs) // 2]


# ---- one analysis → one record ----------------------------------------------------------
def utilizations(a) -> tuple[dict, str]:
    """Busy fraction of each unit over the predicted time, and where it came from.

    The simulator's own utilizations when its result carries them; otherwise each unit's
    roofline time (work at peak rate) over the predicted time, capped at 1.
    """
    sim = a.simulation
    util = getattr(sim, "utilization", None) if sim is not None else None
    if isinstance(util, dict) and util:
        aliases = {"tensor cores": ("tensor cores", "tensor", "tensor_cores", "mma"),
                   "exp units": ("exp units", "exp", "sfu", "exp_units"),
                   "DRAM": ("DRAM", "dram", "DRAM bandwidth", "dram_bandwidth"),
                   "L2": ("L2", "l2", "L2 bandwidth", "l2_bandwidth")}
        out = {}
        for unit, names in aliases.items():
            for n in names:
                if n in util and util[n] is not None:
                    out[unit] = float(util[n])
                    break
        if len(out) == len(UNITS):
            return out, "simulator"
    r, t = a.roofline, a.predicted_time_s
    raw = {"tensor cores": r.tensor_time_s, "exp units": r.exp_time_s, "DRAM": r.dram_time_s,
           "L2": r.l2_time_s}
    return {k: min(1.0, v / t) if t else 0.0 for k, v in raw.items()}, "roofline time / predicted time"


def record(a) -> dict:
    c, r, b = a.counters, a.roofline, a.bounds
    util, util_source = utilizations(a)
    t = a.predicted_time_s
    return {
        "ok": True,
        "algorithm": a.algorithm,
        "seq": a.problem.seq_q,
        "model": a.model,
        "time_s": t,
        "bound_by": a.bound_by,
        "tiling": "; ".join(f"{k} {v.block_q}×{v.block_kv}, {v.stages} st, {v.warps} w"
                            for k, v in a.tiling.items()),
        "ctas": sum(k.ctas for k in a.kernels),
        "kernels": len(a.kernels),
        "waves": max((k.waves for k in a.kernels), default=0.0),
        "mma_flops": c.mma_flops,
        "useful_flops": c.useful_flops,
        "exp_count": c.exp_count,
        "alu_ops": c.alu_ops,
        "l2_to_smem_bytes": c.l2_to_smem_bytes,
        "smem_to_l2_bytes": c.smem_to_l2_bytes,
        "l2_bytes": c.l2_bytes,
        "dram_read_bytes": a.dram_read_bytes,
        "dram_write_bytes": a.dram_write_bytes,
        "dram_bytes": a.dram_read_bytes + a.dram_write_bytes,
        "dram_source": a.dram_source,
        "mma_instructions": sorted({k.pipeline.get("mma_instruction", "wgmma")
                                    for k in a.kernels}),
        "smem_operand_bytes": c.smem_read_bytes_estimate,
        "smem_operand_time_s": c.smem_read_bytes_estimate / a.gpu.shared_memory_bandwidth_bytes_per_s,
        "intensity_smem": (c.mma_flops / c.smem_read_bytes_estimate
                           if c.smem_read_bytes_estimate else None),
        "intensity_dram": r.intensity_dram_flop_per_byte,
        "intensity_l2": r.intensity_l2_flop_per_byte,
        "flops_per_s": c.mma_flops / t if t else 0.0,
        "useful_flops_per_s": c.useful_flops / t if t else 0.0,
        "roofline": {"tensor cores": r.tensor_time_s, "exp units": r.exp_time_s,
                     "ALUs": r.alu_time_s, "DRAM": r.dram_time_s, "L2": r.l2_time_s,
                     "bound": r.bound},
        "utilization": util,
        "utilization_source": util_source,
        "compulsory_bytes": b.compulsory_bytes,
        "n2d2_over_m_bytes": b.n2d2_over_m_bytes,
        "fa1_theorem2_bytes": b.fa1_theorem2_bytes,
    }


def failed(algorithm: str, seq: int, exc: Exception) -> dict:
    return {"ok": False, "algorithm": algorithm, "seq": seq,
            "error": " ".join(str(exc).split()) or type(exc).__name__}


# ---- the sweeps ---------------------------------------------------------------------------
@dataclass
class SweepResult:
    points: list                      # records over (algorithm, N)
    analyses: dict = field(default_factory=dict)   # (algorithm, N) → Analysis at compare N
    notes: set = field(default_factory=set)
    substituted: list = field(default_factory=list)


SIM_MAX_CTAS = 250_000   # larger schedules use the roofline model in a report (time budget)


def schedule_ctas(problem, gpu, algorithm: str, tiling: dict) -> int:
    from ..algorithms import build_schedule
    return sum(k.num_ctas for k in build_schedule(problem, gpu, algorithm, **tiling).kernels)


def sweep_n(problem, gpu, algorithms, seqs, compare_seq, model="sim", sim_mode="fast",
            tiling=None, progress: Progress | None = None,
            sim_max_ctas: int | None = SIM_MAX_CTAS) -> SweepResult:
    """Analyze every algorithm at every N (seq_q = seq_kv = N). Analyses at `compare_seq` are
    kept whole (their simulations carry the CTA timelines). Schedules of more than
    `sim_max_ctas` CTAs are analyzed with the roofline model (the record says so)."""
    from ..analysis.analyze import analyze
    tiling = tiling or {}
    out = SweepResult(points=[])
    for algo in algorithms:
        for n in seqs:
            p = problem.with_(seq_q=n, seq_kv=n)
            try:
                point_model = model
                if model == "sim" and sim_max_ctas is not None:
                    ctas = schedule_ctas(p, gpu, algo, tiling)
                    if ctas > sim_max_ctas:
                        point_model = "roofline"
                        out.substituted.append(
                            f"{algo} N = {n:,}: {ctas:,} CTAs > {sim_max_ctas:,} "
                            "(--sim-max-ctas); roofline model used")
                try:
                    a = analyze(p, gpu, algo, model=point_model, sim_mode=sim_mode, **tiling)
                except ImportError as exc:   # a simulator mode not available in this iosim
                    if model != "sim":
                        raise
                    out.notes.add(f"simulator ({sim_mode} mode) unavailable: {exc}; "
                                  "the roofline model was used")
                    a = analyze(p, gpu, algo, model="roofline", **tiling)
            except (IosimError, MemoryError) as exc:
                out.points.append(failed(algo, n, exc))
            else:
                out.points.append(record(a))
                if n == compare_seq:
                    out.analyses[(algo, n)] = a
            if progress:
                progress.step(f"{algo} N={n}")
    return out


def sram_sizes(problem, gpu, points: int = 10) -> list[int]:
    """Shared-memory sizes M (bytes per CTA) from the smallest a 16-row tile needs up to the
    GPU's per-block limit, geometrically spaced, rounded to KiB; d² always included."""
    d, eb = problem.head_dim, problem.elem_bytes
    lo = 3 * 16 * d * eb                      # Q, K, V tiles of 16 rows
    hi = gpu.shared_memory_per_block_bytes
    if hi <= lo:
        return [hi]
    sizes = {int(round(lo * (hi / lo) ** (i / (points - 1)) / 1024)) * 1024
             for i in range(points)}
    sizes.add(d * d * eb)
    return sorted(s for s in sizes if lo <= s <= hi)


def gpu_with_sram(gpu, m_bytes: int):
    """The GPU with M bytes of shared memory per CTA (and M + 1 KiB per SM: the 1 KiB CUDA
    reserves per resident block, so one CTA of M bytes fits)."""
    return gpu.with_(shared_memory_per_block_bytes=m_bytes,
                     shared_memory_per_sm_bytes=m_bytes + 1024)


SCALED_BLOCKS = tuple(range(256, 15, -16))
SCALED_WARPS = (4, 8, 16)


def scaled_tiling(problem, gpu_m, algorithm: str):
    """The largest square tile B×B (one stage) that fits M, for generators whose default
    tiling does not follow M (FA-2: its default is a fixed candidate list). Returns
    (schedule, overrides) or raises the smallest tile's error."""
    from ..algorithms import build_schedule
    last = None
    for bsz in SCALED_BLOCKS:
        for warps in SCALED_WARPS:
            ov = dict(block_q=bsz, block_kv=bsz, stages=1, warps=warps)
            try:
                return build_schedule(problem, gpu_m, algorithm, **ov), ov
            except IosimError as exc:
                last = exc
    raise last


# how each algorithm's tiling follows M: "default" re-derives it from the GPU (FA-1 uses the
# paper's Bc = ⌈M/4d⌉, Br = min(Bc, d)); "scaled" searches the largest square tile
M_TILING = {"fa1": "default", "fa2": "scaled", "square": "default"}


def available_algorithms() -> tuple:
    from .. import algorithms
    return tuple(algorithms.ALGORITHMS)


def m_sweep_algorithms() -> list[str]:
    return [a for a in ("fa1", "fa2", "square") if a in available_algorithms()]


def sweep_m(problem, gpu, sizes, algorithms=None, progress: Progress | None = None) -> list:
    """Tile traffic (L2→SM + SM→L2, the papers' "HBM accesses") of each algorithm at each
    SRAM size M, from the exact counters (no simulation needed: bytes do not depend on
    timing)."""
    from ..algorithms import build_schedule
    from ..analysis.counters import count
    algorithms = algorithms if algorithms is not None else m_sweep_algorithms()
    out = []
    for algo in algorithms:
        for m in sizes:
            rec = {"algorithm": algo, "sram_bytes": m, "seq": problem.seq_q}
            try:
                gpu_m = gpu_with_sram(gpu, m)
                if M_TILING.get(algo, "default") == "scaled":
                    sched, _ = scaled_tiling(problem, gpu_m, algo)
                else:
                    sched = build_schedule(problem, gpu_m, algo)
                c = count(sched)
                t = next(iter(sched.tiling.values()))
                rec.update(ok=True, l2_to_smem_bytes=c.l2_to_smem_bytes,
                           smem_to_l2_bytes=c.smem_to_l2_bytes, l2_bytes=c.l2_bytes,
                           tiling=f"{t.block_q}×{t.block_kv}, {t.stages} st, {t.warps} w",
                           tiling_rule=M_TILING.get(algo, "default"))
            except (IosimError, ValueError) as exc:
                rec.update(ok=False, error=" ".join(str(exc).split()))
            out.append(rec)
            if progress:
                progress.step(f"{algo} M={m // 1024} KiB")
    return out


def fit_slope(xs, ys) -> float | None:
    """Least-squares slope of log y against log x (None with fewer than two points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def m_slopes(mpoints, problem) -> dict:
    """Per algorithm, the log-log slope of tile traffic against M: over all sizes, over
    M ≥ d² (large cache) and over M < d² (small cache)."""
    d2 = problem.head_dim ** 2 * problem.elem_bytes
    out = {}
    for algo in dict.fromkeys(m["algorithm"] for m in mpoints):
        pts = [m for m in mpoints if m["algorithm"] == algo and m["ok"]]
        parts = {"all": pts, "large": [m for m in pts if m["sram_bytes"] >= d2],
                 "small": [m for m in pts if m["sram_bytes"] < d2]}
        out[algo] = {k: fit_slope([m["sram_bytes"] for m in v], [m["l2_bytes"] for m in v])
                     for k, v in parts.items()}
    return out


def m_bounds(problem, sizes) -> dict:
    """Reference curves over M, all heads, in bytes: N²d²/M, N²d/√M, FA-1 Theorem 2."""
    n, d, eb = problem.seq_q, problem.head_dim, problem.elem_bytes
    heads = problem.batch * problem.heads_q
    out = {"n2d2_over_m": [], "n2d_over_sqrt_m": [], "fa1_theorem2": [], "saha_ye": []}
    for m in sizes:
        me = m // eb
        out["n2d2_over_m"].append(n * n * d * d / me * eb * heads)
        out["n2d_over_sqrt_m"].append(n * n * d / math.sqrt(me) * eb * heads)
        out["fa1_theorem2"].append(fa1_theorem2_elements(n, d, me) * eb * heads)
        out["saha_ye"].append(saha_ye_elements(n, d, me) * eb * heads)
    return out
