"""One point of a sweep: its GPU (a named config with the grid's scale factors), its analysis
as `iosim run` would make it (`evaluate`, the record plus `point_id`, `point` and `error`), and
an estimate of what it costs to simulate (`cost_estimate`, which orders the points on Dask).
Workers run `evaluate_chunk`; GPU figures travel as JSON text and are validated once per
process."""
from __future__ import annotations

from ..errors import IosimError
from .grid import GPU_SCALES, point_id

SCALE_LABELS = {"l2_capacity_scale": "L2 capacity", "dram_bandwidth_scale": "DRAM bandwidth",
                "shared_memory_scale": "shared memory"}


def scaled_gpu(name: str, point: dict):
    """The GpuSpec a point runs on: the named config with the point's scale factors applied."""
    from ..hardware import load_gpu
    gpu = load_gpu(name)
    changes, notes = {}, []
    for key, fields in GPU_SCALES.items():
        factor = point.get(key)
        if factor is None or factor == 1:
            continue
        for f in fields:
            value = getattr(gpu, f) * factor
            changes[f] = int(round(value)) if isinstance(getattr(gpu, f), int) else value
        notes.append(f"{SCALE_LABELS[key]} ×{factor:g}")
    if not changes:
        return gpu
    return gpu.with_(**changes, name=f"{gpu.name} [{', '.join(notes)}]")


# GpuSpec of each GPU variant, validated once per process (serial or worker) from the figures
# the client sends: a point's task carries the figures as JSON text, the text is the key.
# (Validation is ~60 µs, so this saves little; it keeps a worker doing what serial does.)
_GPUS: dict = {}


def _gpu(figures_json: str):
    gpu = _GPUS.get(figures_json)
    if gpu is None:
        from ..hardware import GpuSpec
        if len(_GPUS) > 256:
            _GPUS.clear()
        gpu = _GPUS[figures_json] = GpuSpec.model_validate_json(figures_json)
    return gpu


def _run_keys(point: dict) -> dict:
    """The point's problem and tiling keys (the run options' vocabulary, options.py)."""
    from ..options import API_ALIASES, TILING_KEYS
    from ..problem import PROBLEM_KEYS
    return {k: v for k, v in point.items()
            if k in PROBLEM_KEYS or k in API_ALIASES or k in TILING_KEYS}


def evaluate(point: dict, gpu_figures_json: str) -> dict:
    """Analyze one point (run on a worker). Input errors become the record's `error`."""
    from ..analysis.analyze import analyze
    from ..options import problem_from_kwargs
    head = {"point_id": point_id(point), "point": dict(point)}
    try:
        gpu = _gpu(gpu_figures_json)
        problem, tiling = problem_from_kwargs(_run_keys(point))
        a = analyze(problem, gpu, point.get("algo", "fa2"), model=point.get("model", "sim"),
                    sim_mode=point.get("mode", "fast"), l2_samples=point.get("l2_samples"),
                    **tiling)
    except (IosimError, ValueError, MemoryError) as exc:
        return {**head, "error": " ".join(str(exc).split()) or type(exc).__name__}
    return {**head, **a.to_dict(), "error": None}


def evaluate_chunk(items: list) -> list:
    """evaluate() over [(index, point, gpu_figures_json), ...]; one Dask task."""
    return [(i, evaluate(p, g)) for i, p, g in items]



def cost_estimate(point: dict) -> float:
    """What a point costs to simulate, up to a constant: the problem's matmul FLOPs (the
    simulated CTAs' work scales with the attended pairs) for the simulator, 0 for the roofline
    model (closed forms) and for points refused before any work. Only the order and relative
    size matter: it orders points and sizes chunks, never changes a result."""
    if point.get("model", "sim") == "roofline":
        return 0.0
    from ..options import problem_from_kwargs
    try:
        problem, _ = problem_from_kwargs(_run_keys(point))
        return float(problem.useful_flops())
    except (IosimError, ValueError, TypeError, MemoryError):
        return 0.0
