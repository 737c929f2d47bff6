"""Worker processes for independent simulations (`iosim validate`'s rows, `iosim compare`'s
algorithms): how many, and a pool of forked workers (fork: the children inherit the loaded
modules and GPU specs instead of importing them again; where fork is not the platform's start
method the callers run serially)."""
from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor

MAX_WORKERS = 4


def worker_count(n_jobs: int, env_var: str = "IOSIM_WORKERS") -> int:
    """Workers for n_jobs independent jobs: `env_var` if set, else one per core up to
    MAX_WORKERS and n_jobs."""
    env = os.environ.get(env_var)
    if env:
        return max(1, int(env))
    return max(1, min(n_jobs, os.cpu_count() or 1, MAX_WORKERS))


def fork_pool(workers: int) -> ProcessPoolExecutor | None:
    """A pool of `workers` forked processes, or None (one worker, or no fork on this OS)."""
    if workers < 2 or not sys.platform.startswith("linux"):
        return None
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
