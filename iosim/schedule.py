"""The Schedule: what every CTA of every kernel loads, computes and stores, as a loop nest.

One representation sits between the algorithms (which generate it), the CUDA kernels (whose
trace mode records it), the simulator (which replays it) and the analysis (which counts it).

A CTA's *program* is a tuple of items. An item is an operation or a `Loop`, whose body is
again a tuple of items. Operation coordinates are tuples of ints, or of loop-variable names
(strings) that `expand` replaces by the iteration's value. Loops are uniform: every iteration
moves the same bytes and does the same work, so totals are body × count and never need the
loop unrolled. Pipelining (how far loads run ahead of compute) is not written into the order
of operations; it is a property of the kernel (`Pipeline`), which the simulator interprets.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterable, Iterator, Union

Coord = tuple  # of int | str (loop variable)


# ---- operations ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Load:
    """Global memory (L2/DRAM) → shared memory or registers: one tile of `tensor`."""

    tensor: str
    coord: Coord
    rows: int
    cols: int
    bytes: int
    kind = "load"


@dataclass(frozen=True, slots=True)
class Store:
    """Registers / shared memory → global memory. `reduce` marks an atomic accumulate."""

    tensor: str
    coord: Coord
    rows: int
    cols: int
    bytes: int
    reduce: bool = False
    kind = "store"


@dataclass(frozen=True, slots=True)
class Mma:
    """A tensor-core matrix product C[m×n] += A[m×k]·B[k×n] on the executed (padded) tile."""

    name: str
    m: int
    n: int
    k: int
    kind = "mma"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


@dataclass(frozen=True, slots=True)
class Exp:
    """Exponentials on the special-function units."""

    name: str
    count: int
    kind = "exp"


@dataclass(frozen=True, slots=True)
class Alu:
    """Other elementwise work on the fp32 ALUs (max, sum, scale, mask, rescale...)."""

    name: str
    count: int
    kind = "alu"


@dataclass(frozen=True, slots=True)
class Barrier:
    name: str = "syncthreads"
    kind = "barrier"


Op = Union[Load, Store, Mma, Exp, Alu, Barrier]


@dataclass(frozen=True, slots=True)
class Loop:
    """`count` iterations of `body`, the variable `var` running from `start`."""

    var: str
    start: int
    count: int
    body: tuple
    kind = "loop"


Item = Union[Op, Loop]


def loop(var: str, start: int, stop: int, body: Iterable[Item]) -> tuple:
    """A Loop as a 0- or 1-item tuple (empty ranges vanish), for splicing into programs."""
    count = stop - start
    return (Loop(var, start, count, tuple(body)),) if count > 0 else ()


# ---- totals -------------------------------------------------------------------------
@dataclass
class Totals:
    """Exact sums over a program, a kernel or a schedule."""

    load_bytes: Counter = field(default_factory=Counter)   # per tensor, global → SM
    store_bytes: Counter = field(default_factory=Counter)  # per tensor, SM → global
    loads: int = 0
    stores: int = 0
    mma_flops: int = 0
    mma_ops: int = 0
    exp: int = 0
    alu: int = 0
    barriers: int = 0

    def add(self, other: "Totals", times: int = 1) -> None:
        for t, b in other.load_bytes.items():
            self.load_bytes[t] += b * times
        for t, b in other.store_bytes.items():
            self.store_bytes[t] += b * times
        self.loads += other.loads * times
        self.stores += other.stores * times
        self.mma_flops += other.mma_flops * times
        self.mma_ops += other.mma_ops * times
        self.exp += other.exp * times
        self.alu += other.alu * times
        self.barriers += other.barriers * times

    @property
    def bytes_loaded(self) -> int:
        return sum(self.load_bytes.values())

    @property
    def bytes_stored(self) -> int:
        return sum(self.store_bytes.values())


@lru_cache(maxsize=65536)
def program_totals(program: tuple) -> Totals:
    """Totals of one CTA program (cached: programs are hashable and often repeat)."""
    t = Totals()
    for item in program:
        if isinstance(item, Loop):
            t.add(program_totals(item.body), item.count)
        elif isinstance(item, Load):
            t.load_bytes[item.tensor] += item.bytes
            t.loads += 1
        elif isinstance(item, Store):
            t.store_bytes[item.tensor] += item.bytes
            t.stores += 1
        elif isinstance(item, Mma):
            t.mma_flops += item.flops
            t.mma_ops += 1
        elif isinstance(item, Exp):
            t.exp += item.count
        elif isinstance(item, Alu):
            t.alu += item.count
        elif isinstance(item, Barrier):
            t.barriers += 1
        else:  # pragma: no cover - a generator bug
            raise TypeError(f"not a schedule item: {item!r}")
    return t


# ---- expansion ----------------------------------------------------------------------
def _bind(coord: Coord, env: dict) -> tuple:
    return tuple(env[c] if isinstance(c, str) else c for c in coord)


def expand(program: tuple, env: dict | None = None) -> Iterator[Op]:
    """Every operation of a program in order, loop variables replaced by their values."""
    env = dict(env or {})
    for item in program:
        if isinstance(item, Loop):
            for v in range(item.start, item.start + item.count):
                env[item.var] = v
                yield from expand(item.body, env)
            env.pop(item.var, None)
        elif isinstance(item, (Load, Store)) and any(isinstance(c, str) for c in item.coord):
            yield type(item)(**{**_asdict(item), "coord": _bind(item.coord, env)})
        else:
            yield item


def _asdict(op) -> dict:
    return {name: getattr(op, name) for name in op.__slots__}


# ---- kernels and schedules ------------------------------------------------------------
@dataclass(frozen=True)
class Launch:
    grid: tuple          # CUDA grid dims (x, y, z); CTAs launch x fastest
    threads_per_cta: int
    smem_bytes_per_cta: int
    registers_per_thread: int

    @property
    def num_ctas(self) -> int:
        n = 1
        for g in self.grid:
            n *= g
        return n


@dataclass(frozen=True)
class Pipeline:
    """How a kernel overlaps memory and compute.

    stages: tiles of the loop's loads in flight (1 = load, wait, compute).
    async_copy: cp.async / TMA copies that run while the SM computes.
    warp_specialized: a producer warp(group) issues copies; consumers only compute.
    consumer_warpgroups: consumers that ping-pong (one's softmax under the other's GEMMs).
    intra_overlap: a consumer overlaps its own softmax with its next GEMM (FA-3).
    mma_instruction: the tensor-core instruction its GEMMs use: "wgmma" (Hopper warpgroup
      MMA reading operands from shared memory asynchronously: cuBLAS sm90, FA-3, cuDNN) or
      "mma_sync" (warp-level MMA from registers, operands brought in by ldmatrix: FA-1,
      FA-2, torch flash). The simulator charges its rate and shared-memory operand reads.
    """

    stages: int = 1
    async_copy: bool = False
    warp_specialized: bool = False
    consumer_warpgroups: int = 1
    intra_overlap: bool = False
    mma_instruction: str = "wgmma"


@dataclass(frozen=True, eq=False)
class Kernel:
    """One kernel launch: its shape and, for every CTA in launch order, its program.

    `classes` lists (representative CTA, count) pairs: CTAs of one class have programs with
    equal totals (they differ only in the batch/head coordinates), so counting never needs
    every CTA's program built.
    """

    name: str
    launch: Launch
    program: Callable[[int], tuple]
    classes: tuple            # ((representative_cta, count), ...)
    cta_coord: Callable[[int], tuple]
    pipeline: Pipeline = Pipeline()
    coord_names: tuple = ("x", "y", "z")

    @property
    def num_ctas(self) -> int:
        return self.launch.num_ctas

    def totals(self) -> Totals:
        t = Totals()
        for rep, count in self.classes:
            t.add(program_totals(self.program(rep)), count)
        return t

    def totals_by_enumeration(self) -> Totals:
        """The same totals by building every CTA's program (slow; for tests)."""
        t = Totals()
        for cta in range(self.num_ctas):
            t.add(program_totals(self.program(cta)))
        return t


@dataclass(frozen=True, eq=False)
class Schedule:
    algorithm: str
    problem: object          # AttentionProblem
    tiling: object           # the algorithm's Tiling dataclass
    kernels: tuple           # of Kernel, in launch order
    notes: tuple = ()

    def totals(self) -> Totals:
        t = Totals()
        for k in self.kernels:
            t.add(k.totals())
        return t

    def num_events(self) -> int:
        return sum(len(list(expand(k.program(c)))) for k in self.kernels for c in range(k.num_ctas))

    def event_table(self, max_events: int = 2_000_000):
        """Every operation of every CTA as a pandas DataFrame (small problems only)."""
        import pandas as pd

        rows = []
        for ki, k in enumerate(self.kernels):
            for cta in range(k.num_ctas):
                for seq, op in enumerate(expand(k.program(cta))):
                    rows.append((ki, k.name, cta, seq, op.kind,
                                 getattr(op, "tensor", getattr(op, "name", "")),
                                 str(getattr(op, "coord", "")), getattr(op, "bytes", 0),
                                 getattr(op, "flops", 0) if op.kind == "mma" else 0,
                                 getattr(op, "count", 0)))
                    if len(rows) > max_events:
                        from .errors import IosimError
                        raise IosimError(
                            f"schedule has more than {max_events:,} events; expand a smaller problem")
        return pd.DataFrame(rows, columns=["kernel_index", "kernel", "cta", "seq", "op", "name",
                                           "coord", "bytes", "flops", "count"])
