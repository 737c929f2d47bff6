"""Execution units of one SM: tensor cores, special-function units (exp) and fp32 ALUs.

Each unit is a FIFO server (memory.Server) shared by every CTA resident on the SM: two CTAs
on one SM each get the SM's tensor-core rate only when the other is not using it. One CTA is
assumed able to drive all of its SM's units (4 warps cover the 4 SM sub-partitions).

The consumer warpgroups of a warp-specialized wgmma loop (pipeline._Consumers) run their
softmax tiles (pipeline.SOFTMAX_TILE_OPS) on the SM's SoftmaxTileServer instead: a warpgroup's
tile is latency-bound (one warp per sub-partition, in order), the tiles of warpgroups in their
softmax at once share the SM's issue slots and MUFU, and wgmma streams running beside them
slow them, each as the H200 probe measured (see SoftmaxTileServer).
"""
from __future__ import annotations

from ..machine import SmRates
from .memory import Server


class SmUnits:
    """The three unit servers of one SM, its GEMM epilogue path (machine.tma_epilogue_s_per_byte); when the wgmma groups of its consumer warpgroups end
    (pipeline._Consumers notes each group: note_wgmma) and the consumers' SoftmaxTileServer
    (made on first use, when the SimPy environment is known)."""

    __slots__ = ("tensor", "exp", "alu", "epilogue", "wgmma_busy", "_tiles")

    def __init__(self, rates: SmRates):
        self.tensor = Server(rates.tensor_flops_per_s)
        self.exp = Server(rates.exp_per_s)
        self.alu = Server(rates.alu_ops_per_s)
        # the SM's GEMM epilogue path (Store.tma_epilogue), served in seconds
        self.epilogue = Server(1.0)
        self.wgmma_busy: dict = {}       # a consumer's wgmma stream -> when its last group ends
        self._tiles = None

    def note_wgmma(self, stream, until_s: float) -> None:
        """A consumer's wgmma group on `stream` runs until until_s: the tiles in progress
        re-rate from now (SoftmaxTileServer counts the streams still busy)."""
        busy = self.wgmma_busy
        now = self._tiles.env.now if self._tiles is not None else None
        if now is not None and len(busy) > 64:          # forget the idle streams of past CTAs
            for st in [st for st, t in busy.items() if t <= now]:
                del busy[st]
        if until_s > busy.get(stream, 0.0):
            busy[stream] = until_s
        if self._tiles is not None:
            self._tiles.poke()

    def softmax_tiles(self, env) -> "SoftmaxTileServer":
        """The SM's SoftmaxTileServer, made on first use."""
        if self._tiles is None:
            self._tiles = SoftmaxTileServer(env, self.wgmma_busy)
        return self._tiles


class SharedServer:
    """A processor-sharing unit: the n requests in service at once each progress at rate / n
    (egalitarian processor sharing), so concurrent requests of equal work finish together.
    This is how an SM sub-partition's warp scheduler serves the warps that issue to one
    pipe: one instruction per clock from one of the eligible warps, round robin among them
    (CUDA C++ Programming Guide, "Hardware Multithreading" and the SM of CC 8.x/9.x: 4
    sub-partitions, each with its own scheduler and dispatch unit), so each warp's instruction
    stream advances instruction by instruction, not op after op. request(amount) returns a
    SimPy event that succeeds when the request's work is done; busy_s counts service time."""

    __slots__ = ("env", "rate", "jobs", "last_s", "busy_s", "_gen", "_job_rate_now")

    def __init__(self, env, rate_per_s: float):
        self.env, self.rate = env, float(rate_per_s)
        self.jobs: list = []            # [remaining amount, event]
        self.last_s = env.now
        self.busy_s = 0.0
        self._gen = 0
        self._job_rate_now = 0.0

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


# The H200 probe (python3 -m iosim.measure.wgmma_overlap; benchmarks/results/
# wgmma_overlap_h200_run2.txt): one warpgroup's softmax tile of the FA-3 d 64 consumer (64 x
# 128 scores, 64 per thread: row max, scale-subtract, exp, row sum, O's 32 accumulators
# rescaled, P packed to 16 bits) takes 1826874 cycles per 2000 tiles alone; in the schedule's
# counting (fa2.kv_iteration: 3 Alu + 1 Exp per score element, the row's alpha, 0.5 pack per
# element, d/Bc rescale per element) that tile is 41024 ops
PROBE_TILE_CYCLES = 1826874 / 2000
PROBE_TILE_OPS = 3 * 8192 + (8192 + 64) + 4096 + 4096
PROBE_TILE_EXPS = 8192 + 64   # its exps: the scores and the row's alpha
# n warpgroups in their tiles at once (softmax+softmax, softmax x 3): each tile takes 2730300 /
# 2000 and 3660683 / 2000 cycles, so the SM gets through n x alone / that tiles per lone-tile
# time: 1.338 and 1.497 (no more measured: 4 or more take the 3-warpgroup figure)
TILE_SPEEDUP = (1.0, 1.0, 2 * 1826874 / 2730300, 3 * 1826874 / 3660683)
# one tile beside m warpgroups issuing wgmma groups (mma+softmax, mma+mma+softmax): 2078163 and
# 2471663 cycles per 2000 tiles over the lone 1826874: 1.138 and 1.353 (3 or more: the 2 figure)
GEMM_SLOWDOWN = (1.0, 2078163 / 1826874, 2471663 / 1826874)


class SoftmaxTileServer(SharedServer):
    """The softmax tiles of an SM's consumer warpgroups (warp-specialized wgmma loops), work in
    seconds of a lone warpgroup's tile at the probe's cycles per op (cycles_per_op). A tile is
    latency-bound: its warpgroup has one warp per sub-partition issuing in order, so alone it
    runs at the probe's lone rate, not at the SFU's and ALUs' (913 cycles, where those units
    would take 772). n tiles in progress at once each advance at TILE_SPEEDUP[n] / n of that
    rate (they share the sub-partitions' issue slots and MUFU: processor sharing at the measured
    throughput), and all at 1 / GEMM_SLOWDOWN[m] while m of the SM's wgmma streams are busy
    (a stream is busy until its last group ends, SmUnits.note_wgmma; the rate is recomputed
    when a stream goes idle and, through poke(), when one takes new work)."""

    __slots__ = ("busy", "cycles_per_op")

    def __init__(self, env, busy: dict):
        super().__init__(env, 1.0)
        self.busy = busy                        # SmUnits.wgmma_busy: stream -> busy until
        self.cycles_per_op = PROBE_TILE_CYCLES / PROBE_TILE_OPS

    @staticmethod
    def sfu_scale(exp_per_clock: float) -> float:
        """How much slower than the probe's a tile runs on an SM with `exp_per_clock` exps per
        clock: 1 while the tile's exps on that SFU take less than the probe's tile (any SM with
        at least 9 exps per clock), else their time over the probe tile's (the tile becomes
        SFU-bound)."""
        if exp_per_clock <= 0:
            return 1.0
        return max(1.0, PROBE_TILE_EXPS / exp_per_clock / PROBE_TILE_CYCLES)

    def _rate_per_job(self) -> float:
        n, now = len(self.jobs), self.env.now
        m = sum(1 for t in self.busy.values() if t > now)
        return (TILE_SPEEDUP[min(n, len(TILE_SPEEDUP) - 1)] / n
                / GEMM_SLOWDOWN[min(m, len(GEMM_SLOWDOWN) - 1)])

    def _advance(self) -> None:
        now = self.env.now
        if self.jobs and now > self.last_s:
            done = (now - self.last_s) * self._job_rate_now
            for job in self.jobs:
                job[0] -= done
            self.busy_s += now - self.last_s
        self.last_s = now

    def _schedule(self) -> None:
        self._gen += 1
        if not self.jobs:
            return
        gen, now = self._gen, self.env.now
        self._job_rate_now = rate = self._rate_per_job()
        wait = max(0.0, min(j[0] for j in self.jobs)) / rate
        for t in self.busy.values():            # a stream going idle changes the rate
            if now < t < now + wait:
                wait = t - now
        wake = self.env.timeout(wait)
        wake.callbacks.append(lambda _ev: self._wake(gen))

    def poke(self) -> None:
        """A stream took new work: advance the tiles at the old rate, re-rate from now."""
        if self.jobs:
            self._advance()
            self._schedule()
