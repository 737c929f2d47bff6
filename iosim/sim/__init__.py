"""Discrete-event simulation of a Schedule on a GpuSpec.

    simulate(schedule, gpu, mode="fast") -> SimResult

mode="exact": every tile op of every CTA as a SimPy event, tile-level LRU L2 (engine.py).
mode="fast" (default): a schedule of at most `exact_below_events` tile ops (small problems,
where the aggregated model's transients matter most and exact costs < ~0.5 s) is simulated
exactly; larger ones by the aggregated model: each CTA class characterised once by a
micro-simulation of one SM, CTAs dispatched through a fluid model of the shared bandwidths,
and the L2 replayed on a sample of the tile accesses (fast.py). `result.model["engine"]` says
which ran. See docs/simulator.md.
"""
from __future__ import annotations

from ..errors import IosimError
from ..hardware import load_gpu
from .memory import L2_EFFECTIVE_FRACTION, L2_PROTOCOLS
from .result import KernelResult, SimResult

MODES = ("fast", "exact")
EXACT_BELOW_EVENTS = 150_000


def tile_events(schedule) -> int:
    """Tile ops (loads, stores, MMAs, exps, ALU ops, barriers) exact mode would execute."""
    from .l2model import count_ops
    memo: dict = {}
    return sum(count * count_ops(k.program(rep), memo)
               for k in schedule.kernels for rep, count in k.classes)


def simulate(schedule, gpu, mode: str = "fast", *,
             l2_effective_fraction: float = L2_EFFECTIVE_FRACTION,
             exact_below_events: int = EXACT_BELOW_EVENTS, l2_protocol: str = "warm",
             time_protocol: str | None = None, **options) -> SimResult:
    """Predict time and traffic of `schedule` on `gpu` (a GpuSpec, short name or YAML path).

    l2_protocol: "warm" (one L2 across the schedule's kernels, final flush counted) or "ncu"
    (every kernel starts with an invalidated L2 and dirty lines left at a kernel's end are not
    counted: what Nsight Compute measures). time_protocol: the protocol the predicted time
    assumes, when it differs from the one the bytes are counted under (validation: CUDA-event
    times are warm, ncu's bytes are not). options (aggregated fast mode only):
    l2_sample_budget."""
    gpu = load_gpu(gpu)
    if not 0.0 < l2_effective_fraction <= 1.0:
        raise IosimError(f"l2_effective_fraction must be in (0, 1], got {l2_effective_fraction}")
    if mode not in MODES:
        raise IosimError(f"unknown simulation mode {mode!r}; choose one of: {', '.join(MODES)}")
    time_protocol = time_protocol or l2_protocol
    for p in (l2_protocol, time_protocol):
        if p not in L2_PROTOCOLS:
            raise IosimError(f"unknown L2 protocol {p!r}; choose one of: {', '.join(L2_PROTOCOLS)}")
    if mode == "exact" or tile_events(schedule) <= exact_below_events:
        from .engine import simulate_exact
        result = simulate_exact(schedule, gpu, l2_effective_fraction, time_protocol)
        if time_protocol != l2_protocol:
            from .summary import with_bytes_of
            result = with_bytes_of(result, simulate_exact(schedule, gpu, l2_effective_fraction,
                                                          l2_protocol), gpu, schedule)
        result.mode = mode
        result.model["engine"] = "exact" if mode == "exact" else "exact (small schedule)"
        return result
    from .fast import simulate_fast
    result = simulate_fast(schedule, gpu, l2_effective_fraction, l2_protocol=l2_protocol,
                           time_protocol=time_protocol, **options)
    result.model["engine"] = "aggregated"
    return result


__all__ = ["simulate", "SimResult", "KernelResult", "MODES", "L2_PROTOCOLS"]
