"""Execution units of one SM: tensor cores, special-function units (exp) and fp32 ALUs.

Each unit is a FIFO server (memory.Server) shared by every CTA resident on the SM: two CTAs
on one SM each get the SM's tensor-core rate only when the other is not using it. One CTA is
assumed able to drive all of its SM's units (4 warps cover the 4 SM sub-partitions).

The consumer warpgroups of a warp-specialized wgmma loop (pipeline._Consumers) run the kinds
of elementwise op named in pipeline.SHARED_ELEMENTWISE (the exps) on the SM's SharedServer
units instead: the warp schedulers issue one instruction per clock from any eligible warp, so
two warpgroups in their softmax at once interleave instruction by instruction and both
progress at half the rate, rather than one finishing its whole tile first (processor sharing,
not FIFO; see SharedServer).
"""
from __future__ import annotations

from ..machine import SmRates
from .memory import Server


class SmUnits:
    """The three unit servers of one SM, and (made on first use by the consumer warpgroups
    of a warp-specialized loop, which know the SimPy environment) processor-sharing units of
    the same rates for the kinds in pipeline.SHARED_ELEMENTWISE."""

    __slots__ = ("tensor", "exp", "alu", "_shared")

    def __init__(self, rates: SmRates):
        self.tensor = Server(rates.tensor_flops_per_s)
        self.exp = Server(rates.exp_per_s)
        self.alu = Server(rates.alu_ops_per_s)
        self._shared: dict = {}

    def shared(self, env, kind: str) -> "SharedServer":
        """The SM's processor-sharing unit for `kind` ("exp" or "alu"), at that unit's rate."""
        unit = self._shared.get(kind)
        if unit is None:
            unit = self._shared[kind] = SharedServer(env, getattr(self, kind).rate)
        return unit


class SharedServer:
    """A processor-sharing unit: the n requests in service at once each progress at rate / n
    (egalitarian processor sharing), so concurrent requests of equal work finish together.
    This is how an SM sub-partition's warp scheduler serves the warps that issue to one
    pipe: one instruction per clock from one of the eligible warps, round robin among them
    (CUDA C++ Programming Guide, "Hardware Multithreading" and the SM of CC 8.x/9.x: 4
    sub-partitions, each with its own scheduler and dispatch unit), so each warp's instruction
    stream advances instruction by instruction, not op after op. request(amount) returns a
    SimPy event that succeeds when the request's work is done; busy_s counts service time."""

    __slots__ = ("env", "rate", "jobs", "last_s", "busy_s", "_gen")

    def __init__(self, env, rate_per_s: float):
        self.env, self.rate = env, float(rate_per_s)
        self.jobs: list = []            # [remaining amount, event]
        self.last_s = env.now
        self.busy_s = 0.0
        self._gen = 0

    def _advance(self) -> None:
        now = self.env.now
        if self.jobs and now > self.last_s:
            done = (now - self.last_s) * self.rate / len(self.jobs)
            for job in self.jobs:
                job[0] -= done
            self.busy_s += now - self.last_s
        self.last_s = now

    def _schedule(self) -> None:
        self._gen += 1
        if not self.jobs:
            return
        gen = self._gen
        left = min(j[0] for j in self.jobs)
        wake = self.env.timeout(max(0.0, left) * len(self.jobs) / self.rate)
        wake.callbacks.append(lambda _ev: self._wake(gen))

    def _wake(self, gen: int) -> None:
        if gen != self._gen:            # a later arrival or departure rescheduled
            return
        self._advance()
        eps = self.rate * 1e-15         # a femtosecond's work: rounding
        finished = [j for j in self.jobs if j[0] <= eps]
        self.jobs = [j for j in self.jobs if j[0] > eps]
        for _left, ev in finished:
            ev.succeed()
        self._schedule()

    def request(self, amount: float):
        ev = self.env.event()
        if amount <= 0.0:
            ev.succeed()
            return ev
        self._advance()
        self.jobs.append([float(amount), ev])
        self._schedule()
        return ev
