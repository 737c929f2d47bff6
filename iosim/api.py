"""Python API mirroring the CLI, for notebooks: dataclasses and pandas DataFrames.

    import iosim.api as io
    a = io.run(seq=32768, gpu="h100")                 # Analysis (same as `iosim run`)
    df = io.compare(seq=4096, algos=["fa1", "fa2"])   # one row per algorithm
    df = io.sweep(seqs=[1024, 4096, 16384], algos=["standard", "fa2"])
"""
from __future__ import annotations

from .analysis.analyze import Analysis, analyze
from .problem import AttentionProblem

_PROBLEM_ALIASES = {"seq": "seq_q", "heads": "heads_q", "kv_heads": "heads_kv"}
_TILING = ("block_q", "block_kv", "stages", "warps")


def _split(kwargs: dict) -> tuple[AttentionProblem, dict]:
    fields, tiling = {}, {}
    for k, v in kwargs.items():
        k = _PROBLEM_ALIASES.get(k, k)
        (tiling if k in _TILING or k.startswith("bwd_") else fields)[k] = v
    return AttentionProblem(**fields), tiling


def run(algo: str = "fa2", gpu="h100", model: str = "sim", mode: str = "fast",
        l2_samples: int | None = None, **problem_and_tiling) -> Analysis:
    """`iosim run`: problem fields (seq, heads, kv_heads, head_dim, batch, dtype, causal,
    direction, seq_kv) and tiling overrides as keyword arguments; l2_samples as
    `--l2-samples`."""
    problem, tiling = _split(problem_and_tiling)
    return analyze(problem, gpu, algo, model=model, sim_mode=mode, l2_samples=l2_samples,
                   **tiling)


def row(a: Analysis) -> dict:
    """One flat record of an analysis (the JSON's scalar fields, dotted)."""
    from .cli import flatten
    return flatten(a.to_dict())


def compare(algos=("standard", "fa1", "fa2", "fa3"), gpu="h100", model: str = "sim",
            mode: str = "fast", **problem_and_tiling):
    """`iosim compare` as a DataFrame, one row per algorithm."""
    import pandas as pd
    return pd.DataFrame([row(run(a, gpu, model, mode, **problem_and_tiling)) for a in algos])


def sweep(seqs, algos=("fa2",), gpu="h100", model: str = "sim", mode: str = "fast",
          **problem_and_tiling):
    """Every algorithm at every sequence length, as a DataFrame."""
    import pandas as pd
    rows = []
    for n in seqs:
        for a in algos:
            rows.append(row(run(a, gpu, model, mode, seq=n, **problem_and_tiling)))
    return pd.DataFrame(rows)
