"""The output tiles of cuBLAS's GEMMs, as a user or a measurement names them.

cuBLAS chooses a GEMM's kernel by a closed heuristic; `standard.gemm_tile` is the rule that
reproduces its power-of-two choices on the H200 (measurements/h200/cublas_tiles/). Off the
powers of two it runs other tiles (Nsight Compute kernel names of the odd-N rows:
`nvjet_sm90_hsh_128x200_64x5_2x1_v_bz_coopA_TNT` at N 2200, 64x464 for P·V at N 1800, 152x256 at
N 5000), which no rule here predicts. Where the tile is known (a measured kernel's name, or a
user's what-if) the standard schedule takes it as given: `gemm_tiles`, a text of
`kernel=ROWSxCOLSxSTAGES` items, e.g. "std_fwd_qk=200x128x5;std_fwd_pv=184x64x6".

nvjet's names read `nvjet_sm90_hsh_<A>x<B>_<BK>x<stages>_<CA>x<CB>_...` in cuBLAS's
column-major view: A is the row-major output's columns, B its rows (measurements/h200/
cublas_tiles/README.md: P·V at d 64 ran 64x512, a 512-row tile one head-dimension wide), and
the thread-block cluster is CA tiles along the columns by CB along the rows. A cluster pads
the grid of tiles: the persistent scheduler rounds the tile count along each output mode up
to a multiple of the cluster's extent there (CUTLASS's sm90 persistent scheduler,
`get_tiled_cta_shape_mnl`: "Round up to nearest multiple of cluster dim along each mode"), and
the padded tiles run their whole main loop on TMA boxes that lie past the tensor's edge.
Nsight Compute counts those boxes' bytes as L2→SM reads (tests/test_cublas_given_tiles.py:
the S kernels under 2x4 and 4x1 clusters read 15–17% more than their tiles, within 0.1% of
the padded grid's boxes).

Text form of one tile: `ROWSxCOLSxSTAGES`, or `ROWSxCOLSxSTAGES/CRxCC` with a cluster of CR
tiles along the rows by CC along the columns; or, where S's pitch is off 16 bytes and cuBLAS
runs CUTLASS's fallback kernels, the kernel's own name (`std_fwd_pv=cutlass_80_tensorop_f16_
s16816gemm_f16_64x64_64x4_nn_align2`; cublas_fallback.tile_of_kernel_name: its tile, K step,
stages and the launch Nsight Compute measured).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import IosimError
from . import cublas_fallback as fallback

MAX_CLUSTER_CTAS = 16   # the most CTAs a thread-block cluster may hold on sm90 (non-portable
#                         size, CUDA C++ Programming Guide "Thread Block Clusters"; 8 portable)

_NVJET = re.compile(r"nvjet_sm\d+_[a-z]+_(\d+)x(\d+)_(\d+)x(\d+)(?:_(\d+)x(\d+)_)?")
_FALLBACK_ITEM = re.compile(r"\s*([A-Za-z0-9_]+)\s*=\s*(cutlass_[A-Za-z0-9_]+)\s*")
_ITEM = re.compile(r"\s*([A-Za-z0-9_]+)\s*=\s*(\d+)x(\d+)x(\d+)(?:\s*/\s*(\d+)x(\d+))?\s*")


@dataclass(frozen=True)
class GemmTile:
    """One GEMM's output tile: rows × cols of the row-major output, its pipeline stages, and
    the thread-block cluster it runs in (tiles along the rows × along the columns)."""

    rows: int
    cols: int
    stages: int
    cluster_rows: int = 1
    cluster_cols: int = 1

    @property
    def cluster(self) -> tuple:
        """(CTAs along the rows, along the columns) of its thread-block cluster."""
        return self.cluster_rows, self.cluster_cols

    def text(self) -> str:
        cluster = "" if self.cluster == (1, 1) else f"/{self.cluster_rows}x{self.cluster_cols}"
        return f"{self.rows}x{self.cols}x{self.stages}{cluster}"


def tile_of_kernel_name(name: str) -> GemmTile | None:
    """The output tile an nvjet kernel name states; None for any other kernel (CUTLASS's
    fallback kernels, the softmax)."""
    m = _NVJET.search(name)
    if not m:
        return None
    cols, rows, _bk, stages = (int(g) for g in m.groups()[:4])
    along_cols, along_rows = (int(g) if g else 1 for g in m.groups()[4:])
    return GemmTile(rows, cols, stages, along_rows, along_cols)


def parse(text: str | None) -> dict:
    """`kernel=ROWSxCOLSxSTAGES[/CRxCC];...` → {kernel name: GemmTile}; a clear error
    otherwise."""
    if not text:
        return {}
    out = {}
    for item in text.split(";"):
        fm = _FALLBACK_ITEM.fullmatch(item)
        if fm:
            tile = fallback.tile_of_kernel_name(fm.group(2))
            if tile is None or tile.kernel != fm.group(2):
                raise IosimError(f"gemm_tiles {item.strip()!r}: no fallback kernel of that name "
                                 "has a measured launch (cublas_fallback.MEASURED_LAUNCH)")
            out[fm.group(1)] = tile
            continue
        m = _ITEM.fullmatch(item)
        if not m:
            raise IosimError(f"gemm_tiles item {item.strip()!r} is not "
                             "KERNEL=ROWSxCOLSxSTAGES[/CRxCC] (e.g. std_fwd_qk=200x128x5/1x2)")
        rows, cols, stages = (int(g) for g in m.groups()[1:4])
        cr, cc = (int(g) if g else 1 for g in m.groups()[4:])
        if min(rows, cols, stages) < 1 or rows % 8 or cols % 8:
            raise IosimError(f"gemm_tiles {item.strip()!r}: rows and columns must be positive "
                             "multiples of 8 and stages at least 1")
        if not 1 <= cr * cc <= MAX_CLUSTER_CTAS:
            raise IosimError(f"gemm_tiles {item.strip()!r}: a cluster holds 1 to "
                             f"{MAX_CLUSTER_CTAS} CTAs")
        out[m.group(1)] = GemmTile(rows, cols, stages, cr, cc)
    return out


def text(tiles: dict) -> str:
    """The inverse of parse (kernels in the given order)."""
    return ";".join(f"{k}={t.text()}" for k, t in tiles.items())


def from_kernel_names(names: list, gemm_kernels: tuple) -> str | None:
    """The gemm_tiles text of a measured run: its kernels' names in launch order, the
    schedule's GEMM kernels in the same order. None unless every GEMM the run launched is an
    nvjet kernel or a CUTLASS fallback kernel of measured launch (cublas_fallback.
    tile_of_kernel_name) and they are as many as the schedule's."""
    gemms = [n for n in names if "softmax" not in n and not n.startswith("std_")]
    tiles = [tile_of_kernel_name(n) or fallback.tile_of_kernel_name(n) for n in gemms]
    if len(tiles) != len(gemm_kernels) or any(t is None for t in tiles):
        return None
    return text(dict(zip(gemm_kernels, tiles)))
