"""The sweep engine behind `iosim sweep` and `iosim.api.sweep`: every point of a grid analyzed
as `iosim run` would, on a Dask cluster (a local one of N worker processes, or an existing one
by its scheduler address) or, with no workers, in this process.

Each point is one task: `evaluate(point, gpu_figures)` returns the nested record of
`iosim run --format json` plus `point_id`, `point` (the grid values) and `error` (None, or the
one-line reason a point was refused). GPU configs are resolved and scaled here, before any task
is sent, so workers need neither the grid file nor GPU YAML files. Rows come back in any order;
the table is sorted into grid order before it is written, so the output does not depend on which
worker finished first.
"""
from __future__ import annotations

import logging
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


def evaluate(point: dict, gpu_figures: dict) -> dict:
    """Analyze one point (run on a worker). Input errors become the record's `error`."""
    from ..analysis.analyze import analyze
    from ..hardware import GpuSpec
    from ..options import API_ALIASES, TILING_KEYS, problem_from_kwargs
    from ..problem import PROBLEM_KEYS
    head = {"point_id": point_id(point), "point": dict(point)}
    try:
        gpu = GpuSpec.model_validate(gpu_figures)
        # the run options' vocabulary (options.py): problem fields, their aliases, tiling
        problem, tiling = problem_from_kwargs(
            {k: v for k, v in point.items()
             if k in PROBLEM_KEYS or k in API_ALIASES or k in TILING_KEYS})
        a = analyze(problem, gpu, point.get("algo", "fa2"), model=point.get("model", "sim"),
                    sim_mode=point.get("mode", "fast"), l2_samples=point.get("l2_samples"),
                    **tiling)
    except (IosimError, ValueError, MemoryError) as exc:
        return {**head, "error": " ".join(str(exc).split()) or type(exc).__name__}
    return {**head, **a.to_dict(), "error": None}


def evaluate_batch(items: list) -> list:
    """evaluate() over [(index, (point, gpu_figures)), ...]; one Dask task."""
    return [(i, evaluate(*args)) for i, args in items]


# ---- many points --------------------------------------------------------------------------
# A point takes 0.05-5 s. Sent one by one, each costs a few messages between the client, the
# scheduler and a worker, and on a busy machine every message waits for its process to be
# scheduled. So points go in batches, TASKS_PER_WORKER per worker thread, dealt round-robin
# (point k to batch k mod B) so that the expensive corners of a grid spread over the batches.
TASKS_PER_WORKER = 4


# A local cluster's workers run CPU-bound points and nothing else: no 10 ms stack sampling
# (the profiler behind the dashboard's profile page) and slower health monitors, whose
# wake-ups otherwise take CPU from the points on a small machine (Dask's configuration keys;
# an existing cluster keeps its own).
LOCAL_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.tick.interval": "200ms",
}


def batches(tasks: list, slots: int) -> list:
    n = max(1, min(len(tasks), TASKS_PER_WORKER * max(1, slots)))
    return [tasks[k::n] for k in range(n)]


def _serial(tasks, on_result):
    for i, args in tasks:
        on_result(i, evaluate(*args))


def _dask(tasks, on_result, workers: int, scheduler: str | None):
    try:
        from dask.distributed import Client, LocalCluster, as_completed
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
            import dask
            with dask.config.set(LOCAL_CLUSTER_CONFIG):
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=logging.CRITICAL)
            client = Client(cluster)
        with client:
            slots = sum(client.nthreads().values()) or workers or 1
            futures = [client.submit(evaluate_batch, b, pure=False)
                       for b in batches(tasks, slots)]
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
            gpus[key] = scaled_gpu(key[0], p).model_dump()
        tasks.append((i, (p, gpus[key])))
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
        if tasks and (workers > 0 or scheduler):
            _dask(tasks, on_result, workers, scheduler)
        elif tasks:
            _serial(tasks, on_result)
    finally:
        bar.close()
        if path is not None and (results or old is None):
            write_table(table(), path)
    out = table()
    out.attrs["points_run"] = len(results)
    return out
