"""What the standard softmax kernel's compiled code does (softmax.cu, single pass), as the
schedule needs it: how many dependent round trips a warp's row load takes, and how many
instructions the kernel issues per score element.

Both were read off the H200 (measurements/h200/softmax_scalar/, README there):

- The SASS (`softmax_sass.txt`: nvcc -cubin -arch=sm_90 of the committed source, cuobjdump;
  NVRTC, which the project builds with, runs the same back end) of the two copy loops of S
  into shared memory. Each warp copies its row; a lane runs `it` iterations (one access of
  `access` bytes, every 32nd), the loop's remainder first, one access per round trip, then
  unrolled blocks whose loads all go out before the first store to shared memory uses one:
    16-byte path (N·bytes a multiple of 16; `#pragma unroll 4`): the remainder loop runs
      `it mod 4` trips of one LDG.E.128, then blocks of 4 (2 KB in flight per warp);
    scalar path (otherwise: one LDG.E.U16 per lane and element; ptxas's own unroll by 4,
      then by 4 again): `it mod 4` single trips, then blocks of 16 while more than 12
      iterations are left, one of 8 if more than 4 are, one of 4 for the rest.
  A warp runs its lanes' longest remainder and then its lanes' most blocks.
- The issued instructions (Nsight Compute `smsp__inst_executed`, warp instructions per row of
  S): a·N + b + c·trips per path (`ISSUED_PER_ROW`, `issued_per_row`): per score element,
  per row (the row's setup, its two warp reductions, its normalisation) and per round trip of
  the copy loop (each remainder iteration or unrolled block carries its own loop overhead).
  Fitted by `scripts/softmax_issue_fit.py` to one launch each at N 512 ... 8192, 2008 and 4008
  (16-byte path) and 1001 ... 6001 (scalar path), measurements/h100/softmax_issue/ (an H100:
  the same NVRTC output as the H200's, whose counts at N 4008 / 4001,
  measurements/h200/softmax_scalar/, it reproduces to the instruction); within 3% of every
  16-byte launch, 7% of every scalar one. A single ratio per element (24.67 / 31.30 lane
  instructions, the N 4008 / 4001 figures) had left out the per-row part: at N 512 the kernel
  issues 34.6 lane instructions per element. The schedule spreads them over its three
  counted ALU ops per element (Alu.issue_per_op) on the SM's ALU server, whose rate (128
  lane-ops per clock) is its issue rate (4 sub-partitions, one warp instruction each per
  clock). The kernel issued in 65% / 76% of its cycles at N 4008 / 4001, so issue, not only
  DRAM, bounds it.
- One warp alone issues far below its sub-partition's rate: the compute-only variant at one
  CTA per SM (a warp per sub-partition) takes 2.0 cycles per instruction and 721 per row
  (`LONE_WARP_CYCLES`, `lone_row_cycles`; measurements/h100/softmax_issue/), 2.2-2.9x its
  issue time; three CTAs per SM reach 0.79 of the issue rate, the kernel's own occupancy at
  N <= 4096 0.89-0.93, as warps ready independently with the lone warp's share of cycles
  would (`issue_efficiency`). The schedule makes the lone time a floor under the CTA's
  compute (Alu.lone_cycles) and spreads the issue slots its occupancy leaves empty over its
  ops (Alu.issue_per_op: issue slots, its instructions over the efficiency).
- The L2 → SM bytes of a row's copy (`row_read_bytes`): each load instruction requests the
  32-byte sectors its active lanes' accesses touch. The lanes of one instruction need not be
  one contiguous run: the lanes whose remainder loop ran are a few iterations ahead of the
  others in every block, so an instruction reads two runs and each run's end can share a
  sector with the other's. The sectors of one trip (in flight together) are merged by the
  L1; those an earlier trip of the row fetched are fetched again unless the L1 still holds
  them (`copy_kept`: the L1 probe curve at the SM's copy traffic between the two trips).
  Nsight Compute on the H100, 16-byte path (measurements/h100/copy_wavefronts/, the kernel
  alone at N 1800 ... 7000 and 3008 / 3016): the requested sectors
  (`l1tex__t_sectors_pipe_lsu_mem_global_op_ld`) are this enumeration's to 4 digits at every
  N; the L2 → SM bytes (`l1tex__m_xbar2l1tex_read_bytes`) are the schedule's within
  -1.5 ... +0.1%, N 1800 +2.7% (nothing kept: +0.2 ... +1.3%, N 1800 +3.4%). The scalar path
  (2-byte loads, a 64-byte instruction spanning up to 3 sectors) requests 1.4-1.9x its row's
  bytes and merges them within each trip; its trips' boundaries split a few 32-element windows
  between the two runs. No probe has measured its L2 → SM bytes yet (scripts/experiments/
  l1_l2_reuse_h200.sh); the validation's scalar rows' softmax kernels are within
  -0.6 ... +0.3% of it, N 1500 +2.5% (0.7-3.3% short when it counted the row's bytes alone).
  Known gap: the SASS runs the scalar path's 16-block loop, its 8-block and its 4-block as
  separate sections (BSSY/BSYNC), so where lanes hold different block sets (896 of the 7175
  scalar N below 8200, N 1001 among them) the trips are one more than `row_load_trips`
  counts (N 1001: 3 + 2 + 1 + 1 = 7, not 6) and grouped by section, not by each lane's j-th
  block as here. Counting them so moves the issued-instruction fit (ISSUED_PER_ROW, five
  scalar launches) to a negative per-row term, so it waits for more scalar launches.
  `rows_read_bytes` takes each (b, h) matrix of S to start on a sector, which odd N does not.
"""
from __future__ import annotations

from functools import lru_cache

from ..l1_curve import hit_probability
from .common import LINE_BYTES, SECTOR_BYTES     # an L1 request fetches sectors

VECTOR_ACCESS_BYTES = 16          # LDG.E.128 / STG.E.128 per lane
SCALAR_ACCESS_BYTES = 2           # LDG.E.U16 per lane
WARP_LANES = 32

# warp instructions per row of S = a·N + b + c·trips (row_load_trips), by path: Nsight
# Compute's smsp__inst_executed, measurements/h100/softmax_issue/, fitted by
# scripts/softmax_issue_fit.py (benchmarks/results/softmax_issue_fit.txt); tests/
# test_softmax_code.py fits them again
ISSUED_PER_ROW = {"vector": (0.6632, 151.5, 37.37), "scalar": (0.6725, 263.3, 82.17)}
# one warp issuing its row alone (the compute-only variant at one CTA per SM): clock cycles
# per warp instruction and per row, measurements/h100/softmax_issue/ (scripts/
# softmax_issue_fit.py, lone_warp_fit: within 0.5% of N 512 ... 8192)
LONE_WARP_CYCLES = (2.018, 720.9)


def path(row_bytes: int) -> str:
    """Which copy loop the kernel runs: "vector" where a row's bytes are a multiple of 16
    (softmax.cu: `(Nkv & 7) == 0` for 2-byte elements), "scalar" otherwise."""
    return "vector" if row_bytes % VECTOR_ACCESS_BYTES == 0 else "scalar"


def _iterations(row_bytes: int, access: int) -> list:
    """Per lane: how many accesses of `access` bytes it makes of a row (every 32nd)."""
    n = row_bytes // access
    return [max(0, -(-(n - lane) // WARP_LANES)) for lane in range(WARP_LANES)]


def _vector_blocks(m: int) -> int:
    return m // 4


@lru_cache(maxsize=1024)
def row_load_trips(row_bytes: int) -> int:
    """Dependent round trips a warp's copy of one row of S takes (module docstring)."""
    kind = path(row_bytes)
    access = VECTOR_ACCESS_BYTES if kind == "vector" else SCALAR_ACCESS_BYTES
    its = _iterations(row_bytes, access)
    blocks = _vector_blocks if kind == "vector" else (lambda m: len(_scalar_block_sizes(m)))
    return max(it % 4 for it in its) + max(blocks(it - it % 4) for it in its)


def issued_per_row(n: int, elem_bytes: int) -> float:
    """Warp instructions the kernel issues per row of `n` elements of `elem_bytes`."""
    row_bytes = n * elem_bytes
    a, b, c = ISSUED_PER_ROW[path(row_bytes)]
    return a * n + b + c * row_load_trips(row_bytes)


def lone_row_cycles(n: int, elem_bytes: int) -> float:
    """Clock cycles one warp takes over its row's instructions when no other warp shares its
    SM sub-partition: each instruction waits on the ones it depends on (2.0 cycles apart on
    average), and the row's reductions and normalisation add a chain of their own."""
    per_instruction, per_row = LONE_WARP_CYCLES
    return per_instruction * issued_per_row(n, elem_bytes) + per_row


def issue_efficiency(n: int, elem_bytes: int, warps_per_subpartition: int) -> float:
    """The share of its issue slots an SM sub-partition fills with `warps_per_subpartition`
    warps each running this code: a lone warp is ready to issue in a fraction p of the cycles
    (its instructions over lone_row_cycles), and with W warps independent of each other a
    slot goes empty only when none is ready, 1 − (1 − p)^W (measurements/h100/
    softmax_issue/: the compute-only variant at 2, 3, 4 CTAs per SM against this,
    scripts/softmax_issue_fit.py)."""
    p = min(1.0, issued_per_row(n, elem_bytes) / lone_row_cycles(n, elem_bytes))
    return 1.0 - (1.0 - p) ** max(1, warps_per_subpartition)


def issued_per_element(n: int, elem_bytes: int) -> float:
    """Lane-instructions the kernel issues per score element of rows of `n` elements."""
    return issued_per_row(n, elem_bytes) * WARP_LANES / n


def _vector_block_accesses(row_bytes: int) -> list:
    """The 16-byte path's load instructions of one warp's row, by block: the remainder loop's
    trips (one instruction each), then the unrolled blocks of 4; each instruction as the
    16-byte chunk indices its active lanes read (lane l's k-th access is chunk l + 32k)."""
    its = _iterations(row_bytes, VECTOR_ACCESS_BYTES)
    done, out = [0] * WARP_LANES, []
    rem = [it % 4 for it in its]
    for _ in range(max(rem)):
        out.append([[lane + WARP_LANES * done[lane] for lane in range(WARP_LANES)
                     if done[lane] < rem[lane]]])
        done = [d + (d < r) for d, r in zip(done, rem)]
    left = [it - r for it, r in zip(its, rem)]
    while any(left):
        out.append([[lane + WARP_LANES * (done[lane] + s) for lane in range(WARP_LANES)
                     if s < left[lane]] for s in range(4)])
        done = [d + min(4, m) for d, m in zip(done, left)]
        left = [max(0, m - 4) for m in left]
    return [[ins for ins in block if ins] for block in out]


def _scalar_block_sizes(m: int) -> list:
    """The scalar path's unrolled blocks for a lane with `m` accesses left after its
    remainder trips (a multiple of 4): 16 while more than 12 are left, 8 if more than 4, 4."""
    sizes = []
    while m > 12:
        sizes.append(16)
        m -= 16
    if m > 4:
        sizes.append(8)
        m -= 8
    if m > 0:
        sizes.append(4)
    return sizes


def _trip_accesses(row_bytes: int) -> list:
    """One warp's copy of a row as its dependent round trips, in order: each trip the access
    indices (16-byte chunks or 2-byte elements, by path; lane l's k-th access is l + 32k) its
    instructions read, all in flight together. The remainder loop's trips first (one access
    per lane), then the unrolled blocks (module docstring)."""
    if path(row_bytes) == "vector":
        return [[c for ins in block for c in ins] for block in _vector_block_accesses(row_bytes)]
    its = _iterations(row_bytes, SCALAR_ACCESS_BYTES)
    rem = [it % 4 for it in its]
    trips = [[lane + WARP_LANES * t for lane in range(WARP_LANES) if t < rem[lane]]
             for t in range(max(rem))]
    blocks: list = []
    for lane in range(WARP_LANES):
        k = rem[lane]
        for j, size in enumerate(_scalar_block_sizes(its[lane] - rem[lane])):
            if j == len(blocks):
                blocks.append([])
            blocks[j].extend(lane + WARP_LANES * (k + s) for s in range(size))
            k += size
    return [t for t in trips + blocks if t]


@lru_cache(maxsize=1024)
def row_read_bytes(row_bytes: int, row_offset: int, kept: tuple = ()) -> float:
    """L2 → SM bytes of one warp's copy of a row of `row_bytes` starting `row_offset` bytes
    into a sector (module docstring): each trip fetches the sectors its instructions touch,
    once (the L1 merges requests in flight together); a sector an earlier trip of the row
    fetched `g` trips before is fetched again unless the L1 still holds it, with probability
    kept[g - 1] (none beyond the tuple: copy_kept)."""
    access = VECTOR_ACCESS_BYTES if path(row_bytes) == "vector" else SCALAR_ACCESS_BYTES
    last: dict = {}
    sectors = 0.0
    for t, accesses in enumerate(_trip_accesses(row_bytes)):
        for s in {(row_offset + access * c) // SECTOR_BYTES for c in accesses}:
            g = t - last.get(s, t)
            sectors += 1.0 - (kept[g - 1] if 0 < g <= len(kept) else 0.0) if g else 1.0
            last[s] = t
    return sectors * SECTOR_BYTES


def copy_kept(row_bytes: int, warps_per_sm: int, l1_bytes: int) -> tuple:
    """kept[g - 1]: how likely the L1 still holds a sector a warp's row copy fetched g trips
    earlier (row_read_bytes). Between a warp's trips every warp on the SM copies, on average,
    a trip's share of its own row (each warp one row, the same loop): a stack distance of
    g × warps × the row's lines / its trips, read on the H200 L1 probe's hit curve
    (l1_curve.hit_probability) in the L1 beside the kernel's carve-out."""
    trips = row_load_trips(row_bytes)
    if l1_bytes <= 0 or trips < 2:
        return ()
    row_lines_bytes = (-(-row_bytes // LINE_BYTES) + 1) * LINE_BYTES
    per_trip = warps_per_sm * row_lines_bytes / trips
    return tuple(round(hit_probability(g * per_trip, l1_bytes), 6) for g in range(1, trips))


def rows_read_bytes(first_row: int, rows: int, row_bytes: int, kept: tuple = ()) -> int:
    """L2 → SM bytes of the copies of rows [first_row, first_row + rows) of one matrix of S
    (row r starts r·row_bytes into it; a matrix starts on a sector wherever the 16-byte path
    runs: N·bytes a multiple of 16 and N even), kept as in row_read_bytes."""
    return round(sum(row_read_bytes(row_bytes, (r * row_bytes) % SECTOR_BYTES, kept)
                     for r in range(first_row, first_row + rows)))
