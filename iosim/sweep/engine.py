"""The sweep engine behind `iosim sweep` and `iosim.api.sweep`: every point of a grid analyzed
as `iosim run` would, on a Dask cluster (a local one of N worker processes, or an existing one
by its scheduler address) or, with no workers, in this process.

`evaluate(point, gpu_figures_json)` returns the nested record of `iosim run --format json`
plus `point_id`, `point` (the grid values) and `error` (None, or the one-line reason a point
was refused). GPU configs are resolved and scaled here, before any task is sent, so workers
need neither the grid file nor GPU YAML files. On Dask, points travel in chunks, the most
expensive first, each chunk to whichever worker is free (see `chunks`). Rows come back in any
order; the table is sorted into grid order before it is written, so the output does not depend
on which worker finished first.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path

from ..errors import IosimError
from ..progress import Progress
from .grid import GPU_SCALES, load_grid, point_id, points

SCALE_LABELS = {"l2_capacity_scale": "L2 capacity", "dram_bandwidth_scale": "DRAM bandwidth",
                "shared_memory_scale": "shared memory"}
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


# ---- one point ----------------------------------------------------------------------------
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


# ---- many points --------------------------------------------------------------------------
# A point takes 3 ms to 1 s (fast simulator; the 200-point benchmark grid: seq 256 fa2 ~3 ms,
# seq 4096 standard ~0.8 s). Sent one by one, each point would cost a few messages between the
# client, the scheduler and a worker, and on a busy machine each message waits for its process
# to be scheduled; sent as a few fixed batches, one slow batch sets the wall time. So points go
# in chunks, largest first by an estimate of their cost, and the scheduler hands the next
# chunk to whichever worker has a free slot (Dask's task queuing, in priority order): the
# longest-processing-time-first rule with dynamic dispatch (Graham 1969: within 4/3 of the
# optimal makespan when the costs are known; here they are estimated, and a wrong estimate
# costs balance, never a result). Chunk sizes follow guided self-scheduling (Polychronopoulos
# & Kuck 1987): a chunk takes at most 1/(CHUNKS_PER_SLOT x slots) of the points still to deal
# and of their estimated cost, so the expensive points go one by one and the last chunks are
# single cheap points, which bounds the idle tail. CHUNKS_PER_SLOT sets the granularity: 4
# chunks per worker slot at the start, fewer messages than one task per point.
CHUNKS_PER_SLOT = 4


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


def chunks(tasks: list, costs: list, slots: int) -> list:
    """tasks (any items) dealt into chunks, most expensive first (by `costs`, stable: equal
    costs keep grid order, so a chunk holds neighbouring points as serial runs them)."""
    if not tasks:
        return []
    share = CHUNKS_PER_SLOT * max(1, slots)
    order = sorted(range(len(tasks)), key=lambda k: -costs[k])
    left_n, left_cost = len(tasks), float(sum(costs))
    out, cur, cur_cost = [], [], 0.0
    for k in order:
        if cur and (len(cur) >= -(-left_n // share) or cur_cost + costs[k] > left_cost / share):
            out.append(cur)
            left_n -= len(cur)
            left_cost -= cur_cost
            cur, cur_cost = [], 0.0
        cur.append(tasks[k])
        cur_cost += costs[k]
    out.append(cur)
    return out


# A local cluster's workers run CPU-bound points and nothing else: no 10 ms stack sampling
# (the profiler behind the dashboard's profile page), no work stealing (queued tasks already go
# to whichever worker is free), and slower health monitors, whose wake-ups otherwise take CPU
# from the points on a small machine (Dask's configuration keys; an existing cluster keeps its
# own).
LOCAL_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.scheduler.work-stealing": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.tick.interval": "200ms",
}


def start_method() -> str:
    """How a local cluster starts its worker processes. On Linux, fork: a worker is a copy of
    this process with numpy, pydantic, Dask and iosim already imported, where spawn starts a
    fresh interpreter that imports them again. Measured for 2 workers (start, a first task
    each, close; 2-core machine at load average ~7): spawn 3.4 s wall and 1.4 CPU-s in the
    workers, fork 0.4 s and 0.1 CPU-s. The fork happens in Dask's event-loop thread while the
    calling thread waits; a worker runs only Dask's worker code and iosim's pure-Python points
    (never CUDA, which a forked child could not use). Elsewhere (macOS, where fork is unsafe with the
    system's frameworks; Windows, which has no fork), spawn, Dask's default."""
    import multiprocessing
    import sys
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


@contextmanager
def _heap_frozen():
    """Python's full (generation 2) garbage collections skip the objects that existed before
    the sweep (the imported modules and whatever the caller holds: not garbage the sweep
    makes), serially and in every worker: gc.freeze moves them to a permanent generation and
    forked workers inherit it (the fork recipe of the gc module's documentation, which also
    keeps collections from writing to, and so copying, pages shared with the parent). Without
    it, each full collection walks every object the process holds: a worker forked from a
    process with Dask and pandas imported inherits ~140,000, and on 24 points of the benchmark
    grid (seq 1024-2048) its 5 full collections took 0.44-0.55 of 2.7-3.3 CPU-seconds, 0.10-0.12
    frozen (gc callbacks, one worker, the same points serially: 0.47 of 2.84). Left alone when
    the caller froze objects itself."""
    import gc
    mine = gc.get_freeze_count() == 0
    if mine:
        gc.freeze()
    try:
        yield mine
    finally:
        if mine:
            gc.unfreeze()


def _serial(tasks, on_result):
    for i, point, gpu in tasks:
        on_result(i, evaluate(point, gpu))


def _local_cluster(workers: int, freeze: bool):
    import gc

    import dask
    from dask.distributed import LocalCluster
    config = {**LOCAL_CLUSTER_CONFIG, "distributed.worker.multiprocessing-method": start_method()}
    if freeze:
        gc.freeze()   # what was imported since the sweep began (Dask), before the fork
    with dask.config.set(config):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                            dashboard_address=":0", silence_logs=logging.CRITICAL)


def _dask(tasks, costs, on_result, workers: int, scheduler: str | None, freeze: bool = False):
    try:
        from dask.distributed import Client, as_completed
    except ImportError as exc:
        raise IosimError(f"sweeping on Dask needs dask[distributed]: {exc}") from None
    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="15s")
            except (OSError, TimeoutError) as exc:
                raise IosimError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") \
                    from None
        else:
            cluster = _local_cluster(workers, freeze)
            client = Client(cluster)
        with client:
            slots = sum(client.nthreads().values()) or workers or 1
            dealt = chunks(tasks, costs, slots)
            futures = [client.submit(evaluate_chunk, chunk, pure=False, priority=len(dealt) - r)
                       for r, chunk in enumerate(dealt)]
            for _fut, results in as_completed(futures, with_results=True):
                for i, record in results:
                    on_result(i, record)
    finally:
        if cluster is not None:
            cluster.close()


def read_table(path: Path):
    import pandas as pd
    fmt = output_format(path)
    try:
        return pd.read_parquet(path) if fmt == "parquet" else pd.read_csv(path)
    except Exception as exc:   # noqa: BLE001 - any unreadable file gets the same one-line error
        raise IosimError(f"cannot resume from {path}: {' '.join(str(exc).split())}") from None


def write_table(df, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    if output_format(path) == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)
    else:
        df.to_csv(tmp, index=False, lineterminator="\n")
    tmp.replace(path)


def output_format(path: Path) -> str:
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise IosimError(f"{path}: the output must end in .parquet or .csv")
    return fmt


def sweep(grid, output=None, workers: int = 0, scheduler: str | None = None,
          progress: bool = False):
    """Analyze every point of `grid` (a YAML path or a dict); returns the table (a DataFrame,
    one row per point in grid order). With `output`, points already there are skipped and the
    table (old rows and new) is written back. workers = 0 and no scheduler: in this process."""
    import pandas as pd

    from ..records import to_frame
    grid_model, order = load_grid(grid)
    pts = points(grid_model, order)
    ids = [point_id(p) for p in pts]
    where = {pid: i for i, pid in enumerate(ids)}
    old = None
    path = Path(output) if output is not None else None
    if path is not None:
        output_format(path)
        if path.exists():
            old = read_table(path)
            if "point_id" not in old.columns:
                raise IosimError(f"cannot resume from {path}: it has no point_id column "
                                 "(not written by iosim sweep)")
    done = set(old["point_id"]) if old is not None else set()
    todo = [i for i, pid in enumerate(ids) if pid not in done]
    gpus = {}
    tasks = []
    for i in todo:
        p = pts[i]
        key = (p.get("gpu", "h100"),) + tuple(p.get(k) for k in GPU_SCALES)
        if key not in gpus:
            gpus[key] = scaled_gpu(key[0], p).model_dump_json()
        tasks.append((i, p, gpus[key]))
    results = {}
    bar = Progress(len(tasks), desc="sweep", enabled=progress and bool(tasks))
    varying = [k for k in order if len(grid_model.axes().get(k) or ()) > 1]

    def on_result(i, record):
        results[i] = record
        bar.step(" ".join(f"{k}={pts[i][k]}" for k in varying if k in pts[i])
                 + (" (refused)" if record["error"] else ""))

    def table():
        new = to_frame([results[i] for i in sorted(results)])
        frames = [f for f in (old, new) if f is not None and len(f)]
        if not frames:
            return pd.DataFrame(columns=["point_id", "error"])
        df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        rank = df["point_id"].map(where).fillna(len(ids)).astype(int)
        df = df.iloc[rank.argsort(kind="stable")].reset_index(drop=True)
        first = ["point_id"] + [c for c in df.columns if c.startswith("point.")]
        last = ["error"]
        return df[first + [c for c in df.columns if c not in first + last] + last]

    try:
        with _heap_frozen() as frozen:
            if tasks and (workers > 0 or scheduler):
                _dask(tasks, [cost_estimate(t[1]) for t in tasks], on_result, workers,
                      scheduler, frozen)
            elif tasks:
                _serial(tasks, on_result)
    finally:
        bar.close()
        if path is not None and (results or old is None):
            write_table(table(), path)
    out = table()
    out.attrs["points_run"] = len(results)
    return out
