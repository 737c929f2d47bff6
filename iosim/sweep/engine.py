"""The sweep engine behind `iosim sweep` and `iosim.api.sweep`: every point of a grid analyzed
as `iosim run` would, on a Dask cluster (a local one of N worker processes, or an existing one
by its scheduler address) or, with no workers, in this process.

One point is point.py (`evaluate`: the nested record of `iosim run --format json` plus
`point_id`, `point` and `error`, None or the one-line reason a point was refused); many are
dispatch.py (on Dask, chunks of points, the most expensive first, each to whichever worker is
free). GPU configs are resolved and scaled here, before any task is sent, so workers need
neither the grid file nor GPU YAML files. Rows come back in any order; the table is sorted into
grid order before it is written, so the output does not depend on which worker finished first.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import IosimError
from ..progress import Progress
from .dispatch import heap_frozen, run_dask, run_serial
from .grid import GPU_SCALES, load_grid, point_id, points
from .point import cost_estimate, scaled_gpu

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


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
        with heap_frozen() as frozen:
            if tasks and (workers > 0 or scheduler):
                run_dask(tasks, [cost_estimate(t[1]) for t in tasks], on_result, workers,
                      scheduler, frozen)
            elif tasks:
                run_serial(tasks, on_result)
    finally:
        bar.close()
        if path is not None and (results or old is None):
            write_table(table(), path)
    out = table()
    out.attrs["points_run"] = len(results)
    return out
