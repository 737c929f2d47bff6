"""Real CUDA kernels for the schedules (CuPy RawModule), their trace mode and a float64
reference. This is the only package that imports cupy, and only inside functions: importing
`iosim.kernels` works on a machine without cupy or a GPU (trace decoding and comparison are
plain Python).

    run.run_schedule(schedule, tensors, trace=False)   launch every kernel of a Schedule
    run.capture(problem, algorithm, **tiling) -> Trace  run in trace mode and decode
    trace.Trace.save / Trace.load                       compact JSON
    trace.compare_trace(schedule, trace)                -> list of mismatches (empty: equal)
"""
from .trace import Trace, compare_trace  # noqa: F401  (no cupy needed)

__all__ = ["Trace", "compare_trace"]
