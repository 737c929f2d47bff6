"""Simulate a schedule at the SM clock its kernels hold under load (GpuSpec.power_capped_clock).

A tensor-heavy kernel pulls the board to its power cap and the SM clock drops below clock_hz
(measured on the H200: 1447 MHz under cuBLAS, 1605–1935 MHz under attention kernels;
measurements/h200/clocks_h200.json). Every clocked rate follows the clock: tensor cores, fp32,
exp, shared memory. The schedule is simulated at clock_hz; its tensor FLOPs per clock give the
sustained clock (GpuSpec.sustained_clock_hz); if that is lower, the schedule is simulated again
there. One clock per schedule (its kernels' FLOP-weighted rate). Both simulations share the
fast mode's clock-independent work (sim.reuse.Reuse); the results are those of two separate
simulations.
"""
from __future__ import annotations


def sustained_simulation(schedule, gpu, **kw):
    """(SimResult, the GpuSpec at the clock it was simulated at)."""
    from .hardware import load_gpu
    from .sim import simulate
    from .sim.reuse import Reuse
    gpu = load_gpu(gpu)
    if kw.get("mode", "fast") == "fast":
        kw = {**kw, "reuse": Reuse(schedule)}
    top = gpu.sm_clock_counted_max_hz
    if top is not None and top < gpu.clock_hz * 0.995:   # the SMs count cycles at most at it
        gpu = gpu.at_clock(top)
    result = simulate(schedule, gpu, **kw)
    if gpu.power_capped_clock is None or result.time_s <= 0:
        return result, gpu
    flops = schedule.totals().mma_flops
    per_hz = flops / result.time_s / gpu.clock_hz
    f = gpu.sustained_clock_hz(per_hz)
    if f >= gpu.clock_hz * 0.995:
        return result, gpu
    at = gpu.at_clock(f)
    return simulate(schedule, at, **kw), at
