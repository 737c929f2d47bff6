"""One call from (problem, GPU, algorithm) to everything iosim knows about it."""
from __future__ import annotations

import math
from concurrent.futures import as_completed
from dataclasses import dataclass, replace

from ..algorithms import build_schedule
from ..machine import occupancy
from ..hardware import load_gpu
from ..limits import check_problem, check_schedule
from .bounds import IoBounds, io_bounds
from .counters import Counters, count
from .roofline import Roofline, roofline

MODELS = ("sim", "roofline")
# the simulator's resource names, in the roofline's words
BOUND_NAMES = {"dram": "DRAM bandwidth", "l2": "L2 bandwidth", "tensor": "tensor cores",
               "exp": "exp units", "alu": "ALUs"}


@dataclass
class KernelSummary:
    name: str
    grid: tuple
    ctas: int
    threads_per_cta: int
    smem_bytes_per_cta: int
    registers_per_thread: int
    ctas_per_sm: int
    waves: float
    pipeline: dict

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["grid"] = list(self.grid)
        return d


@dataclass
class Analysis:
    algorithm: str
    gpu: object
    problem: object
    schedule: object
    tiling: dict
    kernels: list
    counters: Counters
    bounds: IoBounds
    roofline: Roofline
    simulation: object | None      # iosim.sim result, when model == "sim"
    model: str
    predicted_time_s: float
    bound_by: str
    dram_read_bytes: int
    dram_write_bytes: int
    dram_source: str
    notes: tuple = ()
    ablation: dict | None = None       # features switched off (iosim.ablation); None: none
    time_breakdown: dict | None = None  # predicted seconds by mechanism (machine.time_breakdown)

    @property
    def achieved_tflops(self) -> float:
        return self.counters.useful_flops / self.predicted_time_s / 1e12

    @property
    def bound_ratio(self) -> float:
        """Tile-level (L2→SM plus SM→L2) bytes over the Θ-order lower bound."""
        return self.counters.l2_bytes / self.bounds.lower_bound_bytes

    def _repr_html_(self) -> str:
        """Jupyter shows an Analysis as its run table."""
        from ..report.text import analysis_html
        return analysis_html(self)

    def to_dict(self) -> dict:
        """Stable keys; documented in docs/json.md."""
        from .. import __version__
        out = {
            "iosim_version": __version__,
            "algorithm": self.algorithm,
            "gpu": self.gpu.short_name,
            "gpu_name": self.gpu.name,
            "problem": self.problem.to_dict(),
            "model": self.model,
            "tiling": {k: dict(v.__dict__) for k, v in self.tiling.items()},
            "kernels": [k.to_dict() for k in self.kernels],
            "counters": _counters_dict(self.counters),
            "dram_read_bytes": self.dram_read_bytes,
            "dram_write_bytes": self.dram_write_bytes,
            "dram_source": self.dram_source,
            "bounds": self.bounds.to_dict(),
            "bound_ratio": self.bound_ratio,
            "roofline": self.roofline.to_dict(),
            "predicted_time_s": self.predicted_time_s,
            "bound_by": self.bound_by,
            "achieved_tflops": self.achieved_tflops,
        }
        if self.notes:
            out["notes"] = list(self.notes)
        out["ablation"] = self.ablation or {}
        if self.time_breakdown is not None:
            out["time_breakdown"] = self.time_breakdown
        if self.simulation is not None:
            out["simulation"] = self.simulation.to_dict()
        return out


# counters.dram_* were the compulsory estimate under the same names as the top-level DRAM
# traffic used for time; they are now counters.compulsory_dram_*. The old names stay for one
# version (docs/json.md).
COMPULSORY_RENAMES = {"dram_read_bytes": "compulsory_dram_read_bytes",
                      "dram_write_bytes": "compulsory_dram_write_bytes",
                      "dram_bytes": "compulsory_dram_bytes",
                      "dram_model": "compulsory_dram_model"}


def _counters_dict(counters) -> dict:
    d = counters.to_dict()
    out = {}
    for k, v in d.items():
        if k in COMPULSORY_RENAMES:
            out[COMPULSORY_RENAMES[k]] = v
        else:
            out[k] = v
    out.update({old: d[old] for old in COMPULSORY_RENAMES if old in d})   # deprecated names
    return out


def summarize_kernels(schedule, gpu) -> list:
    out = []
    for k in schedule.kernels:
        occ = occupancy(gpu, k.launch)
        waves = k.num_ctas / (occ * gpu.sm_count) if occ else math.inf
        out.append(KernelSummary(
            name=k.name, grid=tuple(k.launch.grid), ctas=k.num_ctas,
            threads_per_cta=k.launch.threads_per_cta,
            smem_bytes_per_cta=k.launch.smem_bytes_per_cta,
            registers_per_thread=k.launch.registers_per_thread,
            ctas_per_sm=occ, waves=waves, pipeline=dict(k.pipeline.__dict__)))
    return out


def _simulate(schedule, gpu, mode, l2_samples=None):
    from ..clock import sustained_simulation
    return sustained_simulation(schedule, gpu, mode=mode,
                                **({"l2_sample_budget": l2_samples} if l2_samples else {}))


def analyze(problem, gpu="h100", algorithm: str = "fa2", model: str = "sim",
            sim_mode: str = "fast", l2_samples: int | None = None,
            ablation: dict | None = None, **tiling) -> Analysis:
    """Build the schedule, count it, bound it, put it on the roofline and (model='sim')
    simulate it. l2_samples: the fast mode's L2 replay budget (None: its default)."""
    from ..errors import IosimError
    if model not in MODELS:
        raise IosimError(f"unknown model {model!r}; choose from: {', '.join(MODELS)}")
    gpu = load_gpu(gpu)
    check_problem(problem, gpu)                        # size limits: docs/limits.md
    ablation = {k: bool(v) for k, v in (ablation or {}).items()}
    if ablation:
        from ..ablation import SWITCHES
        unknown = sorted(set(ablation) - set(SWITCHES))
        if unknown:
            raise IosimError(f"unknown ablation switch(es): {', '.join(unknown)}; "
                             f"choose from: {', '.join(SWITCHES)}")
    schedule = _schedule_of(problem, gpu, algorithm, ablation, tiling)
    check_schedule(schedule, model, sim_mode)
    counters = count(schedule)
    bounds = io_bounds(problem, gpu.shared_memory_per_sm_bytes)
    sim, sim_gpu = (_simulate(schedule, gpu, sim_mode, l2_samples) if model == "sim"
                    else (None, gpu))   # sim_gpu: the GPU at the clock it was simulated at
    if sim is not None:
        dram_read, dram_write = sim.dram_read_bytes, sim.dram_write_bytes
        dram_source = f"simulated L2 ({sim_mode} mode)"
    else:
        dram_read, dram_write = counters.dram_read_bytes, counters.dram_write_bytes
        dram_source = counters.dram_model
    roof = roofline(gpu, problem.dtype, counters.mma_flops, counters.exp_count,
                    counters.alu_ops, dram_read + dram_write, counters.l2_bytes)
    if sim is not None:
        predicted, bound_by = sim.time_s, BOUND_NAMES.get(sim.bound_by, sim.bound_by)
        if sim.bound_by == "latency":
            longest = max(sim.kernels, key=lambda k: k.time_s)
            busiest = max(sorted(sim.utilization), key=lambda r: sim.utilization[r])
            if longest.num_ctas < gpu.sm_count:   # most SMs idle: too little parallel work
                bound_by = (f"parallelism ({longest.num_ctas} CTAs of {longest.name} for "
                            f"{gpu.sm_count} SMs)")
            else:                                 # no unit is ≥ 70% busy: name the busiest
                bound_by = (f"latency (busiest: {BOUND_NAMES[busiest]} "
                            f"{sim.utilization[busiest]:.0%})")
    else:
        predicted = roof.roofline_time_s + gpu.launch_overhead_s * len(schedule.kernels)
        bound_by = roof.bound
    from ..algorithms.flash_decoding import outside_design_note
    notes = tuple(schedule.notes) + tuple(n for n in (outside_design_note(schedule),) if n)
    return Analysis(
        notes=notes, algorithm=algorithm, gpu=gpu, problem=problem, schedule=schedule,
        tiling=dict(schedule.tiling), kernels=summarize_kernels(schedule, gpu),
        counters=counters, bounds=bounds, roofline=roof, simulation=sim,
        model=model if sim is not None else "roofline", predicted_time_s=predicted,
        bound_by=bound_by, dram_read_bytes=dram_read, dram_write_bytes=dram_write,
        dram_source=dram_source, ablation=ablation,
        time_breakdown=_breakdown(schedule, sim_gpu, sim))


def _schedule_of(problem, gpu, algorithm: str, ablation: dict, tiling: dict):
    """The schedule analyze() studies: the generator's, with the ablation switches applied."""
    schedule = build_schedule(problem, gpu, algorithm, **tiling)
    if ablation:
        from ..ablation import ablate
        schedule = ablate(schedule, **ablation)
    return schedule


def _analyze_detached(job: tuple) -> Analysis:
    """analyze() in a worker process, returned without its schedule (closures do not pickle)."""
    problem, gpu, algorithm, kw = job
    return replace(analyze(problem, gpu, algorithm, **kw), schedule=None)


def analyze_each(problem, gpu, algorithms, on_done=None, tiling: dict | None = None,
                 **kw) -> list:
    """analyze(problem, gpu, algorithm, **tiling, **kw) for each algorithm, in the order
    given, the analyses run in forked worker processes where the machine has more than one
    core (iosim.parallel); the same results as one after another, byte for byte.
    on_done(name) as each finishes. Each schedule is rebuilt in this process (deterministic,
    cheap)."""
    from ..parallel import fork_pool, worker_count
    names, tiling = list(algorithms), dict(tiling or {})
    pool = fork_pool(worker_count(len(names)))
    if pool is None:
        out = []
        for n in names:
            out.append(analyze(problem, gpu, n, **tiling, **kw))
            if on_done:
                on_done(n)
        return out
    _import_for_workers(kw.get("model", "sim"))
    with pool:
        futures = {pool.submit(_analyze_detached, (problem, gpu, n, {**tiling, **kw})): i
                   for i, n in enumerate(names)}
        done = [None] * len(names)
        for f in as_completed(futures):
            done[futures[f]] = f.result()
            if on_done:
                on_done(names[futures[f]])
    return [replace(a, schedule=_schedule_of(problem, load_gpu(gpu), n, a.ablation, tiling))
            for a, n in zip(done, names)]


def _import_for_workers(model: str) -> None:
    """Import here what analyze() imports lazily (the simulator, the clock model, the
    flash-decoding note), before the pool forks: its workers inherit the modules
    (iosim.parallel) instead of each importing them again, 0.06-0.09 CPU-s a worker."""
    from .. import clock                          # noqa: F401
    from ..algorithms import flash_decoding       # noqa: F401
    if model == "sim":
        from ..sim import engine, fast, reuse     # noqa: F401


def _breakdown(schedule, gpu, sim):
    if sim is None:
        return None
    from ..machine import time_breakdown
    return time_breakdown(schedule, gpu, sim)
