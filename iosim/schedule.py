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
# The ops and loops are value objects (equal and hashed by their fields; programs are cached by
# value), never mutated once built. They are not frozen dataclasses only for speed: a frozen
# dataclass's __init__ sets each field through object.__setattr__ (3.5 µs a Load against 0.9),
# and the fast mode's L2 replay builds the programs of tens of thousands of CTAs (standard
# attention at N 65,536: 46,000), so the check is this comment's, not the interpreter's.
@dataclass(slots=True, unsafe_hash=True)
class Load:
    """Global memory (L2/DRAM) → shared memory or registers: one tile of `tensor`."""

    tensor: str
    coord: Coord
    rows: int
    cols: int
    bytes: int
    # indirect: the loads after it in the same loop iteration take their addresses from it
    # (a block table): they are issued when it lands, and the issuing thread waits for it
    indirect: bool = False
    # oob_bytes: a TMA tensor copy's box past the tensor's edge (the rows of a ragged last tile
    # the copy engine fills with zeros). They hold no data and no DRAM or L2 capacity, but they
    # cross the L2→SM path: Nsight Compute counts them (the project's FA-3 at d 64, 192-row Q
    # tiles: measured L2→SM bytes exceed the valid rows' by exactly the box's missing rows,
    # 8 or 16 KB per head at every N of the sweep); also the rest of the sectors a copy's
    # requests touch beyond its bytes (TMA box rows off the sector, standard.Operand.panel;
    # cuBLAS's align2 kernels' 4-byte copies, standard.copy_excess_bytes; the softmax's row
    # loads, algorithms/softmax_code.row_read_bytes)
    oob_bytes: int = 0
    # multicast: the CTAs of a thread-block cluster that one L2 read of this copy reaches (TMA
    # multicast: each CTA copies its slice of a box the cluster shares and the fabric delivers
    # it to all of them). Nsight Compute counts its bytes at every CTA it reaches; the L2 port
    # carries them once (Load.port_bytes): cuBLAS's P·V at N 2200 d 128 moved 10.8 TB/s of
    # counted L2→SM bytes where the port reads 7.14 (measured_h200_oddn_holdout_kernels.csv;
    # calibration.json)
    multicast: int = 1
    # l1: the copy looks up the SM's L1 (cp.async.ca / ld.global.ca: the project's 4-byte
    # row-statistic copies, iosim_common.cuh cp_async4, which cannot be .cg); a hit crosses no
    # L2→SM bytes (sim/l1.py). False: the copy bypasses L1 (cp.async.cg, TMA), as all others
    l1: bool = False
    # line_misaligned: a row stream the SM's threads read with plain loads (LDG, a warp
    # instruction per 512 bytes) whose rows start off the 128-byte line (standard attention's
    # softmax at N·bytes not a multiple of 128): its DRAM bytes take longer
    # (machine.line_misaligned_dram_factor). TMA and the flash kernels' tiles never are.
    line_misaligned: bool = False
    # round_trips: the issuing warps read their rows in this many dependent round trips (a
    # plain-load loop whose unrolled body keeps a fixed number of bytes in flight per warp:
    # standard attention's softmax); the tile is not in shared memory before that many
    # memory latencies have passed (memory.trip_latency_s), however idle the servers
    round_trips: int = 1
    # multicast: the CTAs of a thread-block cluster that one L2 read of this copy reaches (TMA
    # multicast: each CTA copies its slice of a box the cluster shares, delivered to all of
    # them). Nsight Compute counts the bytes at every CTA they reach; the L2 port carries them
    # once (port_bytes): cuBLAS's P·V at N 2200 d 128 moved 10.8 TB/s of counted L2→SM bytes,
    # its N 6200 P·V 8.7 TB/s, where the port reads 7.14 (measured_h200_oddn_holdout_kernels.csv,
    # calibration.json; scripts/cublas_given_tiles.py prints each kernel's rate)
    multicast: int = 1
    kind = "load"

    @property
    def port_bytes(self) -> float:
        """The bytes the copy holds the L2 → SM port for: its box, once per cluster."""
        return (self.bytes + self.oob_bytes) / self.multicast


@dataclass(slots=True, unsafe_hash=True)
class Store:
    """Registers / shared memory → global memory. `reduce` marks an atomic accumulate;
    `reduce_layout` says how the kernel's code issues it: "fragment" (a warp instruction adds
    the mma.sync accumulator fragment, 8 rows x 4 lanes x 2 floats: fa2_bwd.cu's atomicAdd) or
    "coalesced" (a warp adds 32 consecutive floats, 128 bytes: flash-attention's dQaccum,
    GmemTiledCopydQaccumAtomicAdd in csrc/flash_attn/src/kernel_traits.h). Each layout has its
    measured rate (machine.reduce_l2_costs). `thread_issued`: the computing threads write it
    themselves from their MMA fragments (plain st.global, 4 bytes a lane: FA-1's O epilogue),
    which takes them Pipeline.store_issue_cycles_per_byte per byte, in series with compute.
    `layout` says how a plain (non-reduce) store reaches global memory: "coalesced" (the
    tile staged through shared memory and copied out in full lines: flash-attention, FA-3,
    cuDNN, cuBLAS epilogues; the default) or "fragment" (straight from the MMA accumulator
    fragments, one 4-byte st.global per lane, a warp instruction writing 8 rows x 16 bytes:
    the project's fa2_fwd.cu / fa3_fwd.cu / fa1_fwd.cu O and fa2_bwd.cu dK/dV), which costs
    the storing threads, the L2 and the slot's turnover more (machine.fragment_store_*).
    `partial_sectors`: the 32-byte sectors the tile writes only part of, their other part
    written by another CTA (a row pitch or tile width off the sector:
    algorithms.common.partial_sector_writes); each costs DRAM time beyond its bytes
    (machine.partial_sector_write_cost_bytes). `tma_epilogue`: the C tile of a cuBLAS sm90
    GEMM, written out by its epilogue (accumulators to shared memory, TMA stores) at the SM's
    measured epilogue rate (machine.tma_epilogue_s_per_byte)."""

    tensor: str
    coord: Coord
    rows: int
    cols: int
    bytes: int
    reduce: bool = False
    reduce_layout: str = "fragment"
    thread_issued: bool = False
    layout: str = "coalesced"
    partial_sectors: int = 0
    line_misaligned: bool = False    # as Load.line_misaligned, for plain stores (STG)
    tma_epilogue: bool = False       # a cuBLAS sm90 GEMM's C tile (machine.tma_epilogue_s_per_byte)
    kind = "store"


@dataclass(slots=True, unsafe_hash=True)
class Mma:
    """A tensor-core matrix product C[m×n] += A[m×k]·B[k×n] on the executed (padded) tile.
    warp_rows: the fewest rows of C one mma.sync warp owns in the kernel's warp grid (16: the
    FA-2 forward's warps split the rows only; 32: the backward's 2-D warp grids, fa2_bwd.cu's
    WM = min(warps, rows / 32) and flash-attention's AtomLayoutMSdP/NdKV/MdQ, e.g. 2 x 4 for
    64 x 128 S and dQ, 4 x 2 for 128 x 128 dK/dV at d 128; machine.mma_operand_bytes)."""

    name: str
    m: int
    n: int
    k: int
    warp_rows: int = 16
    kind = "mma"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


@dataclass(slots=True, unsafe_hash=True)
class Exp:
    """Exponentials on the special-function units."""

    name: str
    count: int
    kind = "exp"


@dataclass(slots=True, unsafe_hash=True)
class Alu:
    """Other elementwise work on the fp32 ALUs (max, sum, scale, mask, rescale...).
    phase_cycles_per_op: where a kernel's phase around this work is measured (its operands
    read and written through shared memory, the barrier after it), the clock cycles its CTA
    spends per counted op, in series with its compute (machine.MmaCost.phase_s); the SM's
    MMA stream is held for the exposed fraction of that time instead of the op's unit time.
    0: the ALU unit time and MmaCost.elementwise_hold alone.
    barrier_cycles: where the phase ends at a __syncthreads before a GEMM and the CTA's wait
    there is measured, its clock cycles (once per op, whatever its count), in series after the
    phase (machine.MmaCost.barrier_s); 0: the barrier costs nothing beyond the ordering.
    issue_per_op: where the kernel's issued instructions are measured, the issue slots its
    code takes per counted op: the lane-instructions it issues (loads, stores, conversions,
    address and loop arithmetic around the op's arithmetic) over the issue efficiency of its
    occupancy (algorithms/softmax_code.issue_efficiency; slots its sub-partitions leave
    empty): the op takes count × issue_per_op on the SM's ALU server,
    whose rate is its issue rate (Totals.alu_issue); `count` stays the algorithm's ops, and
    so does the MMA-stream hold (MmaCost.elementwise_hold: only a kernel without MMAs, the
    standard softmax, has a measured figure). 1: one instruction per op.
    lone_cycles: where a lone warp's issue of the kernel's code is measured, the fewest clock
    cycles the op takes (its CTA's warps, one per SM sub-partition, each waiting on its own
    dependent instructions rather than on the SM's issue rate): a floor under its time on the
    ALU server, other units not held; 0: none."""

    name: str
    count: int
    phase_cycles_per_op: float = 0.0
    barrier_cycles: float = 0.0
    issue_per_op: float = 1.0
    lone_cycles: float = 0.0
    kind = "alu"

    @property
    def issued(self) -> int:
        """Issue slots of the op, in lane-instructions (count × issue_per_op, to the nearest one, so
        that totals add up exactly in any order)."""
        return self.count if self.issue_per_op == 1.0 else round(self.count * self.issue_per_op)


@dataclass(slots=True, unsafe_hash=True)
class Barrier:
    """A point where the CTA's threads wait for each other. `cycles`: the clock cycles the
    wait itself and the dependent-instruction latency before it add beyond the unit work of
    the ops around it (a measured, sourced figure of the kernel; 0: only the ordering).
    Not recorded by the kernels' traces (iosim.kernels.trace compares without it)."""

    name: str = "syncthreads"
    cycles: float = 0.0
    kind = "barrier"


Op = Union[Load, Store, Mma, Exp, Alu, Barrier]


@dataclass(slots=True, unsafe_hash=True)
class Loop:
    """`count` iterations of `body`, the variable `var` running from `start` by `step`
    (+1: upwards, the default; −1: downwards from `start`, as flash-attention's loops run:
    its forward visits KV blocks from the last to the first, its backward Q blocks likewise,
    flash_fwd_kernel.h / flash_bwd_kernel.h). Iteration j binds var to `value(j)`."""

    var: str
    start: int
    count: int
    body: tuple
    step: int = 1
    kind = "loop"

    def value(self, j: int) -> int:
        """The loop variable's value at iteration j (0 ≤ j < count)."""
        return self.start + self.step * j

    def values(self) -> range:
        """The loop variable's values in iteration order."""
        return range(self.start, self.start + self.step * self.count, self.step)

    @property
    def lowest(self) -> int:
        """The smallest value the loop variable takes."""
        return self.start if self.step > 0 else self.start + self.step * (self.count - 1)


Item = Union[Op, Loop]


def loop(var: str, start: int, stop: int, body: Iterable[Item], reverse: bool = False) -> tuple:
    """A Loop over [start, stop) as a 0- or 1-item tuple (empty ranges vanish), for splicing
    into programs; `reverse`: the same values from stop − 1 down to start."""
    count = stop - start
    if count <= 0:
        return ()
    if reverse:
        return (Loop(var, stop - 1, count, tuple(body), -1),)
    return (Loop(var, start, count, tuple(body)),)


# ---- totals -------------------------------------------------------------------------
@dataclass
class Totals:
    """Exact sums over a program, a kernel or a schedule."""

    load_bytes: Counter = field(default_factory=Counter)   # per tensor, global → SM
    store_bytes: Counter = field(default_factory=Counter)  # per tensor, SM → global
    reduce_bytes: int = 0    # of those, bytes stored by `reduce` (atomic accumulate) stores
    reduce_coalesced_bytes: int = 0   # of those, in the coalesced layout (Store.reduce_layout)
    fragment_store_bytes: int = 0     # plain (non-reduce) stores in Store.layout "fragment"
    partial_sector_writes: int = 0    # Store.partial_sectors summed
    # bytes of Load / Store.line_misaligned ops (loads per tensor)
    misaligned_load_bytes: Counter = field(default_factory=Counter)
    misaligned_store_bytes: int = 0
    oob_load_bytes: int = 0  # Load.oob_bytes: L2→SM bytes of no tensor (in bytes_loaded)
    multicast_bytes: float = 0.0  # of bytes_loaded, those a cluster's multicast delivers
    #                               without an L2 port transfer of their own (Load.multicast)
    l1_load_bytes: int = 0   # of the load bytes, those of Load.l1 copies (which may hit in L1)
    loads: int = 0
    stores: int = 0
    mma_flops: int = 0
    mma_ops: int = 0
    exp: int = 0
    alu: int = 0
    alu_issue: int = 0         # the Alu ops' issue slots, in lane-instructions (Alu.issued)
    barriers: int = 0

    def add(self, other: "Totals", times: int = 1) -> None:
        for t, b in other.load_bytes.items():
            self.load_bytes[t] += b * times
        for t, b in other.store_bytes.items():
            self.store_bytes[t] += b * times
        self.loads += other.loads * times
        self.stores += other.stores * times
        self.reduce_bytes += other.reduce_bytes * times
        self.reduce_coalesced_bytes += other.reduce_coalesced_bytes * times
        self.fragment_store_bytes += other.fragment_store_bytes * times
        self.partial_sector_writes += other.partial_sector_writes * times
        for t, b in other.misaligned_load_bytes.items():
            self.misaligned_load_bytes[t] += b * times
        self.misaligned_store_bytes += other.misaligned_store_bytes * times
        self.oob_load_bytes += other.oob_load_bytes * times
        self.multicast_bytes += other.multicast_bytes * times
        self.l1_load_bytes += other.l1_load_bytes * times
        self.mma_flops += other.mma_flops * times
        self.mma_ops += other.mma_ops * times
        self.exp += other.exp * times
        self.alu += other.alu * times
        self.alu_issue += other.alu_issue * times
        self.barriers += other.barriers * times

    @property
    def bytes_loaded(self) -> int:
        """Global → SM bytes, the copies' out-of-bounds boxes (Load.oob_bytes) included."""
        return sum(self.load_bytes.values()) + self.oob_load_bytes

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
            t.oob_load_bytes += item.oob_bytes
            if item.multicast > 1:
                t.multicast_bytes += item.bytes + item.oob_bytes - item.port_bytes
            if item.l1:
                t.l1_load_bytes += item.bytes
            if item.line_misaligned:
                t.misaligned_load_bytes[item.tensor] += item.bytes
            t.loads += 1
        elif isinstance(item, Store):
            t.store_bytes[item.tensor] += item.bytes
            t.stores += 1
            t.partial_sector_writes += item.partial_sectors
            if item.line_misaligned:
                t.misaligned_store_bytes += item.bytes
            if item.reduce:
                t.reduce_bytes += item.bytes
                if item.reduce_layout == "coalesced":
                    t.reduce_coalesced_bytes += item.bytes
            elif item.layout == "fragment":
                t.fragment_store_bytes += item.bytes
        elif isinstance(item, Mma):
            t.mma_flops += item.flops
            t.mma_ops += 1
        elif isinstance(item, Exp):
            t.exp += item.count
        elif isinstance(item, Alu):
            t.alu += item.count
            t.alu_issue += item.issued
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
            for v in item.values():
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
    smem_bytes_per_cta: int          # the dynamic shared memory the launch requests
    registers_per_thread: int
    # shared memory the kernel declares statically (__shared__ arrays), beyond
    # smem_bytes_per_cta: it counts towards the SM's shared-memory carve-out (and so its
    # L1's capacity, sim/l1.py) and towards occupancy (machine.occupancy)
    static_smem_bytes: int = 0

    @property
    def num_ctas(self) -> int:
        n = 1
        for g in self.grid:
            n *= g
        return n


@dataclass(frozen=True)
class Pipeline:
    """How a kernel overlaps memory and compute.

    stages: tiles of the loop's loads in flight (1 = load, wait, compute; ≥ 2: cp.async or
      TMA copies into the free slots run while the SM computes).
    warp_specialized: a producer warp(group) issues copies; consumers only compute.
    consumer_warpgroups: consumers that ping-pong (one's softmax under the other's GEMMs).
    intra_overlap: a consumer overlaps its own softmax with its next GEMM (FA-3).
    separate_kv_release: with warp specialization, the iteration's first load (K, read by the
      first GEMM) and the others (V) have rings of their own, K's slot released as soon as
      every consumer's first GEMM on it finished (FA-3's pipeline_k / pipeline_v); False: one
      ring, a stage released after the iteration's last GEMM (the project's fa3 kernel before
      issue 12, built with FA3_SEPARATE_KV_RELEASE=0).
    mma_instruction: the tensor-core instruction its GEMMs use: "wgmma" (Hopper warpgroup
      MMA reading operands from shared memory asynchronously: cuBLAS sm90, FA-3, cuDNN) or
      "mma_sync" (warp-level MMA from registers, operands brought in by ldmatrix: FA-1,
      FA-2, torch flash). The simulator charges its rate and shared-memory operand reads.
    copy_issue_cycles_per_byte: clock cycles the CTA's threads spend issuing one byte of a
      load (cp.async copies issued by the computing threads: cycles per 16-byte copy per
      thread / (16 × threads)), in series with their compute
      (machine.copy_issue_s_per_byte); 0: not modelled (the kernel's copy issue is not
      measured, or a producer/TMA issues it).
    store_issue_cycles_per_byte: the same for the bytes of its `thread_issued` stores
      (machine.store_issue_s_per_byte); 0: not modelled.
    consumer_step_overhead_cycles: with warp specialization, the clock cycles a consumer
      spends in turn before each GEMM issue on the waits that do not block (the K / V full
      barriers, the ping-pong's named barrier, the wgmma fence); 0: not measured.
    rescale_phase_cycles: with warp specialization, the fewest clock cycles a consumer's ops
      after its softmax take per step (O's rescale, P's conversion, up to the next step);
      0: not measured (the ops' own costs).
    """

    stages: int = 1
    warp_specialized: bool = False
    consumer_warpgroups: int = 1
    intra_overlap: bool = False
    mma_instruction: str = "wgmma"
    copy_issue_cycles_per_byte: float = 0.0
    store_issue_cycles_per_byte: float = 0.0
    separate_kv_release: bool = True
    consumer_step_overhead_cycles: float = 0.0
    rescale_phase_cycles: float = 0.0


def _only_class(cta: int) -> int:
    return 0


@dataclass(frozen=True, eq=False)
class Kernel:
    """One kernel launch: its shape and, for every CTA in launch order, its program.

    CTA classes: `classes` lists (representative CTA, count) pairs and `class_of(cta)` gives a
    CTA's class (an index into `classes`). CTAs of one class have programs of one shape: the
    same ops, loop counts and tile sizes, differing only in tile coordinates (batch, head,
    block). So counting never builds every CTA's program, and the simulator costs a class
    once. `class_period`: class_of(cta + class_period) == class_of(cta) for every CTA (the
    classes repeat along the launch order; 1 when there is one class). The generator knows
    which CTAs are alike and says so; a kernel of one class may leave class_of out.
    """

    name: str
    launch: Launch
    program: Callable[[int], tuple]
    classes: tuple            # ((representative_cta, count), ...)
    cta_coord: Callable[[int], tuple]
    pipeline: Pipeline = Pipeline()
    coord_names: tuple = ("x", "y", "z")
    class_of: Callable[[int], int] | None = None
    class_period: int = 1

    def __post_init__(self):
        if self.class_of is None:
            if len(self.classes) != 1:
                raise ValueError(f"kernel {self.name} has {len(self.classes)} CTA classes but no "
                                 "class_of saying which CTA is in which")
            object.__setattr__(self, "class_of", _only_class)
        if sum(count for _rep, count in self.classes) != self.num_ctas:
            raise ValueError(f"kernel {self.name}: its CTA classes count "
                             f"{sum(c for _r, c in self.classes)} CTAs, its grid {self.num_ctas}")

    @property
    def num_ctas(self) -> int:
        return self.launch.num_ctas

    @property
    def representatives(self) -> list:
        return [rep for rep, _count in self.classes]

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


def classes_along_x(grid: tuple, key_of_x: Callable[[int], object]):
    """CTA classes of a kernel whose CTAs differ only along grid x (x fastest in launch
    order): CTAs whose x have equal keys (key_of_x: what decides the program's shape) form
    one class. Returns (classes, class_of, class_period) for Kernel."""
    from array import array
    g0 = grid[0]
    others = 1
    for g in grid[1:]:
        others *= g
    index, reps, counts, seen = array("l"), [], [], {}
    for x in range(g0):
        key = key_of_x(x)
        c = seen.get(key)
        if c is None:
            c = seen[key] = len(reps)
            reps.append(x)
            counts.append(0)
        counts[c] += others
        index.append(c)
    classes = tuple(zip(reps, counts))
    if len(reps) == 1:
        return classes, _only_class, 1

    def class_of(cta: int) -> int:
        return index[cta % g0]
    return classes, class_of, g0


def classes_by_edges(grid: tuple, ragged_x: bool = True, ragged_y: bool = True,
                     pad_x: int = 0, pad_y: int = 0):
    """CTA classes of a tiled kernel whose last row and last column of tiles (grid x and y)
    are short when ragged: interior, last column, last row, corner (those that exist). The
    last pad_x rows / pad_y columns of the grid are tiles past the tensor's edge (a cluster's
    padding, cublas_tiles.py), classes of their own.
    Returns (classes, class_of, class_period) for Kernel."""
    g0, g1, g2 = grid

    def bands(g: int, ragged: bool, pad: int) -> tuple:
        """(start, count) of the interior, the ragged last valid tile, the padding."""
        valid = g - pad
        out = ((0, valid - 1), (valid - 1, 1)) if ragged else ((0, valid),)
        return tuple(b for b in out + ((valid, pad),) if b[1] > 0)
    rows, cols = bands(g0, ragged_x, pad_x), bands(g1, ragged_y, pad_y)
    classes, slot = [], {}
    for bi, (i, ci) in enumerate(rows):
        for bj, (j, cj) in enumerate(cols):
            slot[bi, bj] = len(classes)
            classes.append((i + j * g0, ci * cj * g2))
    if len(classes) == 1:
        return tuple(classes), _only_class, 1
    row_of = [bi for bi, (_, ci) in enumerate(rows) for _ in range(ci)]
    col_of = [bj for bj, (_, cj) in enumerate(cols) for _ in range(cj)]

    def class_of(cta: int) -> int:
        return slot[row_of[cta % g0], col_of[(cta // g0) % g1]]
    return tuple(classes), class_of, (g0 * g1 if len(cols) > 1 else g0)


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
