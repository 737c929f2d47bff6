"""The output tiles of cuBLAS's GEMMs, as a user or a measurement names them.

cuBLAS chooses a GEMM's kernel by a closed heuristic; `standard.gemm_tile` is the rule that
reproduces its power-of-two choices on the H200 (measurements/h200/cublas_tiles/). Off the
powers of two it runs other tiles (Nsight Compute kernel names of the odd-N rows:
`nvjet_sm90_hsh_128x200_64x5_2x1_v_bz_coopA_TNT` at N 2200, 64x464 for P·V at N 1800, 152x256 at
N 5000), which no rule here predicts. Where the tile is known (a measured kernel's name, or a
user's what-if) the standard schedule takes it as given: `gemm_tiles`, a text of
`kernel=ROWSxCOLSxSTAGES` items, e.g. "std_fwd_qk=200x128x5;std_fwd_pv=184x64x6".

nvjet's names read `nvjet_sm90_hsh_<A>x<B>_<BK>x<stages>_...` in cuBLAS's column-major view:
A is the row-major output's columns, B its rows (measurements/h200/cublas_tiles/README.md:
P·V at d 64 ran 64x512, a 512-row tile one head-dimension wide).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import IosimError

_NVJET = re.compile(r"nvjet_sm\d+_[a-z]+_(\d+)x(\d+)_(\d+)x(\d+)")
_ITEM = re.compile(r"\s*([A-Za-z0-9_]+)\s*=\s*(\d+)x(\d+)x(\d+)\s*")


@dataclass(frozen=True)
class GemmTile:
    """One GEMM's output tile: rows × cols of the row-major output, its pipeline stages."""

    rows: int
    cols: int
    stages: int

    def text(self) -> str:
        return f"{self.rows}x{self.cols}x{self.stages}"


def tile_of_kernel_name(name: str) -> GemmTile | None:
    """The output tile an nvjet kernel name states; None for any other kernel (CUTLASS's
    fallback kernels, the softmax)."""
    m = _NVJET.search(name)
    if not m:
        return None
    cols, rows, _bk, stages = (int(g) for g in m.groups())
    return GemmTile(rows, cols, stages)


def parse(text: str | None) -> dict:
    """`kernel=ROWSxCOLSxSTAGES;...` → {kernel name: GemmTile}; a clear error otherwise."""
    if not text:
        return {}
    out = {}
    for item in text.split(";"):
        m = _ITEM.fullmatch(item)
        if not m:
            raise IosimError(f"gemm_tiles item {item.strip()!r} is not KERNEL=ROWSxCOLSxSTAGES "
                             "(e.g. std_fwd_qk=200x128x5)")
        rows, cols, stages = (int(g) for g in m.groups()[1:])
        if min(rows, cols, stages) < 1 or rows % 8 or cols % 8:
            raise IosimError(f"gemm_tiles {item.strip()!r}: rows and columns must be positive "
                             "multiples of 8 and stages at least 1")
        out[m.group(1)] = GemmTile(rows, cols, stages)
    return out


def text(tiles: dict) -> str:
    """The inverse of parse (kernels in the given order)."""
    return ";".join(f"{k}={t.text()}" for k, t in tiles.items())


def from_kernel_names(names: list, gemm_kernels: tuple) -> str | None:
    """The gemm_tiles text of a measured run: its kernels' names in launch order, the
    schedule's GEMM kernels in the same order. None unless every GEMM the run launched is an
    nvjet kernel and they are as many as the schedule's (a fallback CUTLASS run keeps its own
    description, algorithms/cublas_fallback.py)."""
    gemms = [n for n in names if "softmax" not in n and not n.startswith("std_")]
    tiles = [tile_of_kernel_name(n) for n in gemms]
    if len(tiles) != len(gemm_kernels) or any(t is None for t in tiles):
        return None
    return text(dict(zip(gemm_kernels, tiles)))
