"""The fast mode's clock-independent work, shared by the simulations of one schedule.

clock.sustained_simulation simulates a schedule at clock_hz, then again at its sustained
clock. What the fast mode derives from the schedule and the GPU's sizes alone (not from its
clocked rates) is the same both times; a Reuse carries it from the first simulation to the
next (fast.simulate_fast(..., reuse=...)). The results are the same with or without one.
"""
from __future__ import annotations


class Reuse:
    """What the fast mode computes that does not depend on the SM clock, kept across the
    simulations of one schedule (clock.sustained_simulation simulates it at clock_hz, then
    at its sustained clock): the L2 replay's walk of the sampled CTAs, keyed by all it reads
    besides the schedule (the sampling plan's ratio and replayed CTAs, the kernels' last
    partial waves), and the first waves' first loads (first_wave.first_wave_loads, keyed by
    kernel and first-wave size). One Reuse serves one schedule, which it holds; at most
    `max_walks` walks are kept (the oldest dropped); first loads: one entry per kernel and
    wave size, a few per schedule."""

    def __init__(self, schedule, max_walks: int = 2):
        self.schedule = schedule
        self.max_walks = max_walks
        self.walks: dict = {}
        self.first_loads: dict = {}

    def check(self, schedule) -> "Reuse":
        if schedule is not self.schedule:
            raise ValueError("a fast-mode Reuse serves the schedule it was made for")
        return self

    def keep(self, key, sampler) -> None:
        while len(self.walks) >= self.max_walks:
            self.walks.pop(next(iter(self.walks)))
        self.walks[key] = sampler
