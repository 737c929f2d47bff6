"""CUDA-event timing: warm-up, median of many runs, inputs rotated so the L2 cannot hold them.

`time_op(op, n_sets)` calls `op(k)` with k cycling over n_sets independent input sets (the
caller allocates them); each call sits between two CUDA events on the current stream. The
median of the per-call times is the figure reported (the minimum and spread are kept).
"""
from __future__ import annotations

import math
import statistics

L2_BYTES = 60 * 1024 * 1024


def sets_to_defeat_l2(bytes_per_set: int, l2_bytes: int = L2_BYTES, most: int = 8) -> int:
    """Input sets so that consecutive runs never find their inputs in L2 (≥ 2×L2 in total)."""
    return max(1, min(most, math.ceil(2 * l2_bytes / max(1, bytes_per_set))))


def _events():
    try:
        import cupy as cp
        return (lambda: cp.cuda.Event()), (lambda a, b: cp.cuda.get_elapsed_time(a, b)), \
            (lambda: cp.cuda.runtime.deviceSynchronize())
    except ImportError:
        import torch
        return (lambda: torch.cuda.Event(enable_timing=True)), (lambda a, b: a.elapsed_time(b)), \
            torch.cuda.synchronize


def time_op(op, n_sets: int = 1, warmup: int = 3, repeat: int = 20, min_time_s: float = 0.0) -> dict:
    """Median / min / spread of `repeat` timed calls of op(k), after `warmup` untimed ones."""
    new_event, elapsed_ms, sync = _events()
    for w in range(warmup):
        op(w % n_sets)
    sync()
    starts = [new_event() for _ in range(repeat)]
    ends = [new_event() for _ in range(repeat)]
    for r in range(repeat):
        starts[r].record()
        op(r % n_sets)
        ends[r].record()
    sync()
    times = sorted(elapsed_ms(a, b) / 1e3 for a, b in zip(starts, ends))
    return {"time_s": statistics.median(times), "time_min_s": times[0], "time_max_s": times[-1],
            "runs": repeat, "input_sets": n_sets}
