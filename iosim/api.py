"""Python API mirroring the CLI, for notebooks: dataclasses and pandas DataFrames.

    import iosim.api as io
    a = io.run(seq=32768, gpu="h100")                 # Analysis (same as `iosim run`)
    df = io.compare(seq=4096, algos=["fa1", "fa2"])   # one row per algorithm
    df = io.sweep(seqs=[1024, 4096, 16384], algos=["standard", "fa2"])   # `iosim sweep`

Keywords are the CLI's (options.py): problem fields (seq, heads, kv_heads, seq_kv, head_dim,
batch, dtype, causal, direction, or AttentionProblem's own names), tiling overrides (block_q,
block_kv, stages, warps, and bwd_ ones). Bad input raises IosimError with the CLI's message;
the size limits of docs/limits.md apply.
"""
from __future__ import annotations

import warnings

from .analysis.analyze import Analysis, analyze

from .options import DEFAULT_ALGORITHMS, DEFAULT_GPU, algorithm_list, problem_from_kwargs


def run(algo: str = "fa2", gpu=DEFAULT_GPU, model: str = "sim", mode: str = "fast",
        l2_samples: int | None = None, **problem_and_tiling) -> Analysis:
    """`iosim run`: problem fields and tiling overrides as keyword arguments; l2_samples as
    `--l2-samples`."""
    problem, tiling = problem_from_kwargs(problem_and_tiling)
    for w in problem.warnings():
        warnings.warn(w, stacklevel=2)
    return analyze(problem, gpu, algo, model=model, sim_mode=mode, l2_samples=l2_samples,
                   **tiling)


def row(a: Analysis) -> dict:
    """One flat record of an analysis (the JSON's fields, dotted; lists as JSON text)."""
    from .records import flat
    return flat(a.to_dict())


def _names(algos) -> list[str]:
    return algorithm_list(algos if isinstance(algos, str) else ",".join(algos))


def compare(algos=DEFAULT_ALGORITHMS, gpu=DEFAULT_GPU, model: str = "sim", mode: str = "fast",
            **problem_and_tiling):
    """`iosim compare` as a DataFrame, one row per algorithm."""
    from .records import to_frame
    return to_frame([run(a, gpu, model, mode, **problem_and_tiling).to_dict()
                     for a in _names(algos)])


def sweep(seqs=None, algos=("fa2",), gpu=DEFAULT_GPU, model: str = "sim", mode: str = "fast",
          grid=None, workers: int = 0, scheduler: str | None = None, output=None,
          progress: bool = False, **axes):
    """`iosim sweep` as a DataFrame, one row per point in grid order (the same engine).

    Either `grid` (a YAML path or a dict as in a grid file) or the shorthand: every algorithm
    at every sequence length, other keyword arguments fixed or, given as lists, swept too
    (e.g. `l2_capacity_scale=[0.5, 1, 2]`). workers=0 runs in this process; workers=N starts
    a local Dask cluster; scheduler="tcp://host:8786" uses an existing one. With `output`
    (.parquet or .csv) points already there are skipped and the table is written back."""
    from .sweep.engine import sweep as run_sweep
    if grid is None:
        if seqs is None:
            raise TypeError("sweep() needs `seqs` or `grid`")
        grid = {"gpu": gpu, "seq": list(seqs), "algo": list(algos), "model": model,
                "mode": mode, **axes}
    elif seqs is not None or axes:
        raise TypeError("sweep(): give either `grid` or `seqs` and axes, not both")
    return run_sweep(grid, output, workers=workers, scheduler=scheduler, progress=progress)
