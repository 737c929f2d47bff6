"""Python API mirroring the CLI, for notebooks: dataclasses and pandas DataFrames.

    import iosim.api as io
    a = io.run(seq=32768, gpu="h100")                 # Analysis (same as `iosim run`)
    df = io.compare(seq=4096, algos=["fa1", "fa2"])   # one row per algorithm
    df = io.sweep(seqs=[1024, 4096, 16384], algos=["standard", "fa2"])

Keywords are the CLI's (options.py): problem fields (seq, heads, kv_heads, seq_kv, head_dim,
batch, dtype, causal, direction, or AttentionProblem's own names), tiling overrides (block_q,
block_kv, stages, warps, and bwd_ ones). Bad input raises IosimError with the CLI's message;
the size limits of docs/limits.md apply.
"""
from __future__ import annotations

import warnings

from .analysis.analyze import Analysis, analyze
from .formats import flatten
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
    """One flat record of an analysis (the JSON's scalar fields, dotted)."""
    return flatten(a.to_dict())


def _names(algos) -> list[str]:
    return algorithm_list(algos if isinstance(algos, str) else ",".join(algos))


def compare(algos=DEFAULT_ALGORITHMS, gpu=DEFAULT_GPU, model: str = "sim", mode: str = "fast",
            **problem_and_tiling):
    """`iosim compare` as a DataFrame, one row per algorithm."""
    import pandas as pd
    return pd.DataFrame([row(run(a, gpu, model, mode, **problem_and_tiling))
                         for a in _names(algos)])


def sweep(seqs, algos=("fa2",), gpu=DEFAULT_GPU, model: str = "sim", mode: str = "fast",
          **problem_and_tiling):
    """Every algorithm at every sequence length, as a DataFrame."""
    import pandas as pd
    rows = []
    for n in seqs:
        for a in _names(algos):
            rows.append(row(run(a, gpu, model, mode, seq=n, **problem_and_tiling)))
    return pd.DataFrame(rows)
