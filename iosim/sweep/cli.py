"""`iosim sweep`: a grid of `iosim run` points on Dask (registered lazily by iosim.cli)."""
from __future__ import annotations

import click


@click.command("sweep")
@click.argument("grid", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Table to write: .parquet (pyarrow) or .csv. Points already in it are "
                   "skipped (resume).")
@click.option("--workers", type=click.IntRange(min=0), default=2, show_default=True,
              help="Worker processes of the local Dask cluster; 0 runs the points in this "
                   "process.")
@click.option("--scheduler", metavar="ADDRESS",
              help="Use an existing Dask cluster (e.g. tcp://host:8786) instead of a local one.")
@click.option("--progress/--no-progress", default=True, help="Progress on stderr [on].")
def sweep(grid, output, workers, scheduler, progress):
    """Analyze every point of GRID.yaml (`iosim run` options, underscores, each a list or a
    value; l2_capacity_scale, dram_bandwidth_scale, shared_memory_scale scale the GPU) and
    write one row per point."""
    import time

    from .engine import sweep as run_sweep
    t0 = time.perf_counter()
    df = run_sweep(grid, output, workers=workers, scheduler=scheduler, progress=progress)
    refused = int(df["error"].notna().sum()) if "error" in df.columns else 0
    click.echo(f"wrote {output}: {len(df)} rows ({df.attrs['points_run']} run now, "
               f"{refused} refused), "
               f"{time.perf_counter() - t0:.1f} s", err=True)
