"""Discrete-event simulation of a Schedule on a GpuSpec.

    simulate(schedule, gpu, mode="fast") -> SimResult

mode="exact": every tile op of every CTA as a SimPy event, tile-level LRU L2 (engine.py).
mode="fast" (default): each CTA class characterised once by a micro-simulation of one SM,
CTAs dispatched through a fluid model of the shared bandwidths, and the L2 replayed on a
sample of the tile accesses (fast.py). See docs/simulator.md.
"""
from __future__ import annotations

from ..errors import IosimError
from ..hardware import load_gpu
from .memory import L2_EFFECTIVE_FRACTION
from .result import KernelResult, SimResult

MODES = ("fast", "exact")


def simulate(schedule, gpu, mode: str = "fast", *,
             l2_effective_fraction: float = L2_EFFECTIVE_FRACTION, **options) -> SimResult:
    gpu = load_gpu(gpu)
    if not 0.0 < l2_effective_fraction <= 1.0:
        raise IosimError(f"l2_effective_fraction must be in (0, 1], got {l2_effective_fraction}")
    if mode == "exact":
        from .engine import simulate_exact
        return simulate_exact(schedule, gpu, l2_effective_fraction)
    if mode == "fast":
        from .fast import simulate_fast
        return simulate_fast(schedule, gpu, l2_effective_fraction, **options)
    raise IosimError(f"unknown simulation mode {mode!r}; choose one of: {', '.join(MODES)}")


__all__ = ["simulate", "SimResult", "KernelResult", "MODES"]
