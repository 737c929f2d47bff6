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
- The issued instructions (Nsight Compute `smsp__inst_executed`, lanes counted: × 32, over
  B·H·N² score elements; B 1, H 16, N 4008 and 4001 — not validation shapes): 24.67 per
  element on the 16-byte path, 31.30 on the scalar path (load requests 0.152 and 1.008 per
  warp-element: the scalar path issues a load and a store per element and lane). The
  schedule spreads them over its three counted ALU ops per element (Alu.issue_per_op) on
  the SM's ALU server, whose rate (128 lane-ops per clock) is its issue rate (4
  sub-partitions, one warp instruction each per clock). The kernel issued in
  65% / 76% of its cycles there, so issue, not only DRAM, bounds it.
"""
from __future__ import annotations

VECTOR_ACCESS_BYTES = 16          # LDG.E.128 / STG.E.128 per lane
SCALAR_ACCESS_BYTES = 2           # LDG.E.U16 per lane
WARP_LANES = 32

# Nsight Compute on the H200 (measurements/h200/softmax_scalar/ncu_4008.csv, ncu_4001.csv):
# smsp__inst_executed.sum × 32 / (16 · N²), tests/test_softmax_code.py recomputes them
ISSUED_INSTRUCTIONS_PER_ELEMENT = {"vector": 24.67, "scalar": 31.30}


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


def _scalar_blocks(m: int) -> int:
    blocks = 0
    while m > 12:
        m -= 16
        blocks += 1
    if m > 4:
        m -= 8
        blocks += 1
    return blocks + (1 if m > 0 else 0)


def row_load_trips(row_bytes: int) -> int:
    """Dependent round trips a warp's copy of one row of S takes (module docstring)."""
    kind = path(row_bytes)
    access = VECTOR_ACCESS_BYTES if kind == "vector" else SCALAR_ACCESS_BYTES
    its = _iterations(row_bytes, access)
    blocks = _vector_blocks if kind == "vector" else _scalar_blocks
    return max(it % 4 for it in its) + max(blocks(it - it % 4) for it in its)


def issued_per_element(row_bytes: int) -> float:
    """Lane-instructions the kernel issues per score element of rows of `row_bytes`."""
    return ISSUED_INSTRUCTIONS_PER_ELEMENT[path(row_bytes)]
