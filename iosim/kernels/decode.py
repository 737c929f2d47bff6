"""Flash-Decoding on the GPU: the split-KV kernel and the combine kernel of cuda/decode.cu,
their launch arithmetic, a float64 reference for ragged and paged KV caches, and trace capture.

    DecodeLaunch(...)                    one problem's launch shape (grid, threads, smem, splits)
    run_decode(launch, T, trace=False)   launch fd_split (+ fd_combine when splits > 1)
    reference(host, launch)              float64 (O, LSE) for the same inputs
    random_decode_inputs(launch, rng)    Q, K, V (contiguous or paged), seqlens, block table

Layouts (see cuda/decode.cu):
  Q, O         [B][Hq][Sq][D]      16-bit
  LSE          [B][Hq][Sq]         fp32 (+inf for a row that sees no key)
  K, V         contiguous: [B][Hkv][Nmax][D]; paged: [pages][Hkv][P][D], token n of sequence b
               in page block_table[b][n // P], row n % P
  seqlens      [B] int32, 1 ≤ len_b ≤ Nmax
  O_partial    [splits][B][Hq][Sq][D] fp32, LSE_partial [splits][B][Hq][Sq] fp32
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import IosimError
from .build import get_kernel

COMBINE_ROWS = 4          # query rows per fd_combine CTA (FD_CROWS in decode.cu)


@dataclass(frozen=True)
class DecodeLaunch:
    """The launch shape of one split-KV decode problem."""

    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seq_kv_max: int               # Nmax: the longest sequence (contiguous cache row length)
    head_dim: int = 128
    dtype: str = "fp16"
    causal: bool = False
    splits: int = 1
    block_kv: int = 64            # keys per tile = 16 x warps
    stages: int = 3
    page_size: int = 0            # 0: contiguous cache

    def __post_init__(self):
        if self.head_dim not in (64, 128):
            raise IosimError(f"the decode kernel supports head dims 64 and 128, not {self.head_dim}")
        if self.heads_q % self.heads_kv:
            raise IosimError(f"heads ({self.heads_q}) must be a multiple of kv-heads ({self.heads_kv})")
        if self.block_kv % 16 or not 16 <= self.block_kv <= 128:
            raise IosimError(f"decode block_kv must be 16..128 in steps of 16, got {self.block_kv}")
        if self.stages < 2:
            raise IosimError(f"decode stages must be >= 2, got {self.stages}")
        if self.page_size and self.page_size & (self.page_size - 1):
            raise IosimError(f"page size must be a power of two, got {self.page_size}")
        if self.rows > 32:
            raise IosimError(f"query heads per KV head x query tokens = {self.rows}: the decode kernel "
                             "packs at most 32 rows per tile")
        if self.splits < 1:
            raise IosimError(f"splits must be >= 1, got {self.splits}")

    @property
    def group(self) -> int:
        return self.heads_q // self.heads_kv

    @property
    def rows(self) -> int:
        """Q rows per CTA: the group's query heads x query tokens (GQA packing)."""
        return self.group * self.seq_q

    @property
    def mt(self) -> int:
        return -(-self.rows // 16)

    @property
    def warps(self) -> int:
        return self.block_kv // 16

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def smem_bytes(self) -> int:
        """Q tile (16·MT rows) + STAGES × (K + V tile)."""
        return 2 * self.head_dim * (16 * self.mt + 2 * self.stages * self.block_kv)

    @property
    def split_grid(self) -> tuple:
        return (self.splits, self.heads_kv, self.batch)

    @property
    def combine_rows(self) -> int:
        return self.batch * self.heads_q * self.seq_q

    @property
    def combine_grid(self) -> tuple:
        return (-(-self.combine_rows // COMBINE_ROWS), 1, 1)

    def tile_range(self, length: int, split: int) -> tuple:
        """KV tiles [j0, j1) that CTA `split` reads of a sequence of `length` keys."""
        n_tiles = -(-length // self.block_kv)
        per = -(-n_tiles // self.splits)
        return min(n_tiles, split * per), min(n_tiles, (split + 1) * per)

    def defines(self) -> dict:
        return {"IOSIM_D": self.head_dim, "IOSIM_BKV": self.block_kv, "IOSIM_STAGES": self.stages,
                "IOSIM_MT": self.mt, "IOSIM_PAGE": self.page_size}

    def pages_per_seq(self) -> int:
        return -(-self.seq_kv_max // self.page_size) if self.page_size else 0


def splits_heuristic(batch_heads_kv: int, n_tiles: int, sms: int, ctas_per_sm: int,
                     max_splits: int = 128) -> int:
    """FlashAttention-2's num_splits_heuristic (flash_api.cpp): with `slots` = SMs × CTAs per
    SM, no split when batch × KV heads already fills 80% of the slots; otherwise the fewest
    splits whose wave efficiency (waves / ceil(waves)) is within 85% of the best over
    1..min(max_splits, slots, n_tiles). Used by the benchmark; the schedule's own choice is
    iosim.algorithms.flash_decoding's."""
    slots = sms * ctas_per_sm
    if batch_heads_kv >= 0.8 * slots:
        return 1
    top = max(1, min(max_splits, slots, n_tiles))
    eff = []
    for s in range(1, top + 1):
        waves = batch_heads_kv * s / slots
        eff.append(waves / math.ceil(waves))
    best = max(eff)
    return next(s for s, e in enumerate(eff, 1) if e >= 0.85 * best)


# ---- inputs and the float64 reference ---------------------------------------------------
def random_decode_inputs(launch: DecodeLaunch, rng, seqlens=None, page_order: str = "shuffled") -> dict:
    """N(0,1) Q, K, V rounded to the dtype; seqlens (default all Nmax); for a paged cache the
    pages of all sequences in one pool, placed in `page_order` ("contiguous" or "shuffled")."""
    from .reference import to_storage
    L = launch
    lens = np.full(L.batch, L.seq_kv_max, dtype=np.int32) if seqlens is None \
        else np.asarray(seqlens, dtype=np.int32)
    if lens.shape != (L.batch,) or lens.min() < 1 or lens.max() > L.seq_kv_max:
        raise IosimError(f"seqlens must be {L.batch} lengths in 1..{L.seq_kv_max}")
    d = L.head_dim
    host = {"Q": to_storage(rng.standard_normal((L.batch, L.heads_q, L.seq_q, d)), L.dtype),
            "seqlens": lens}
    if not L.page_size:
        for n in ("K", "V"):
            host[n] = to_storage(rng.standard_normal((L.batch, L.heads_kv, L.seq_kv_max, d)), L.dtype)
        host["block_table"] = np.zeros((L.batch, 1), dtype=np.int32)
        return host
    per = L.pages_per_seq()
    n_pages = L.batch * per
    ids = np.arange(n_pages, dtype=np.int32)
    if page_order == "shuffled":
        ids = rng.permutation(ids).astype(np.int32)
    elif page_order != "contiguous":
        raise IosimError(f"page order must be contiguous or shuffled, got {page_order!r}")
    host["block_table"] = ids.reshape(L.batch, per)
    for n in ("K", "V"):
        host[n] = to_storage(rng.standard_normal((n_pages, L.heads_kv, L.page_size, d)), L.dtype)
    return host


def gather_kv(host: dict, launch: DecodeLaunch, name: str, b: int) -> np.ndarray:
    """Sequence b's keys (or values) as a float64 [Hkv][len_b][D] array."""
    from .reference import from_storage
    n = int(host["seqlens"][b])
    x = host[name]
    if not launch.page_size:
        return from_storage(x[b, :, :n], launch.dtype)
    pages = host["block_table"][b, : -(-n // launch.page_size)]
    seq = np.concatenate([x[p] for p in pages], axis=1)       # [Hkv][pages·P][D]
    return from_storage(seq[:, :n], launch.dtype)


def reference(host: dict, launch: DecodeLaunch):
    """float64 (O [B][Hq][Sq][D], LSE [B][Hq][Sq]) of the decode problem in `host`."""
    from .reference import forward, from_storage
    q = from_storage(host["Q"], launch.dtype)
    os_, ls = [], []
    for b in range(launch.batch):
        k, v = gather_kv(host, launch, "K", b), gather_kv(host, launch, "V", b)
        o, lse = forward(q[b:b + 1], k[None], v[None], launch.causal)
        os_.append(o[0])
        ls.append(lse[0])
    return np.stack(os_), np.stack(ls)


# ---- launching ----------------------------------------------------------------------------
def _cp():
    from .run import _cp as cp
    return cp()


def _trace_buffer(n_ctas: int, cap: int):
    cp = _cp()
    return cp.zeros(n_ctas * (1 + 4 * cap), dtype=np.uint64)


def split_trace_cap(launch: DecodeLaunch) -> int:
    """Events one fd_split CTA records at most: Q, per tile K and V pieces and 3 phases, 2 stores."""
    n_tiles = -(-launch.seq_kv_max // launch.block_kv)
    per = -(-n_tiles // launch.splits)
    pieces = max(1, launch.block_kv // launch.page_size) if launch.page_size else 1
    return 1 + per * (2 * pieces + 3) + 2 + 8


def run_decode(launch: DecodeLaunch, T: dict, trace: bool = False) -> list:
    """Launch fd_split (and fd_combine when splits > 1) on the device arrays in T (Q, K, V,
    seqlens, block_table); T gains O and LSE (and O_partial, LSE_partial). Returns the decoded
    KernelTraces (empty unless `trace`)."""
    from .run import poisoned
    from .trace import decode
    cp = _cp()
    L = launch
    scale = np.float32(1.0 / math.sqrt(L.head_dim))
    if "O" not in T:
        T["O"] = poisoned((L.batch, L.heads_q, L.seq_q, L.head_dim), L.dtype)
        T["LSE"] = poisoned((L.batch, L.heads_q, L.seq_q), L.dtype, fp32=True)
    if L.splits > 1 and "O_partial" not in T:
        T["O_partial"] = poisoned((L.splits, L.batch, L.heads_q, L.seq_q, L.head_dim), L.dtype, fp32=True)
        T["LSE_partial"] = poisoned((L.splits, L.batch, L.heads_q, L.seq_q), L.dtype, fp32=True)
    dummy = T["LSE"]
    opart, lpart = T.get("O_partial", dummy), T.get("LSE_partial", dummy)
    out = []

    k = get_kernel("decode.cu", "fd_split", L.defines(), L.dtype, trace, L.smem_bytes)
    grid = L.split_grid
    n_ctas = grid[0] * grid[1] * grid[2]
    cap = split_trace_cap(L) if trace else 0
    buf = _trace_buffer(n_ctas, cap) if trace else np.uint64(0)
    bt = T["block_table"]
    k(grid, (L.threads,),
      (T["Q"], T["K"], T["V"], T["seqlens"], bt, np.int32(bt.shape[1]), T["O"], T["LSE"], opart, lpart,
       np.int32(L.batch), np.int32(L.heads_q), np.int32(L.heads_kv), np.int32(L.seq_q),
       np.int32(L.seq_kv_max), np.int32(L.splits),
       np.int32(1 if L.causal else 0), scale, buf, np.int32(cap)),
      shared_mem=L.smem_bytes)
    if trace:
        out.append(decode(buf.get(), "fd_split", grid, L.threads, L.smem_bytes, cap))
    if L.splits > 1:
        c = get_kernel("decode.cu", "fd_combine", L.defines(), L.dtype, trace, 0)
        cgrid = L.combine_grid
        ccap = 8 if trace else 0
        cbuf = _trace_buffer(cgrid[0], ccap) if trace else np.uint64(0)
        c(cgrid, (32 * COMBINE_ROWS,),
          (opart, lpart, T["O"], T["LSE"], np.int32(L.combine_rows), np.int32(L.splits), cbuf,
           np.int32(ccap)))
        if trace:
            out.append(decode(cbuf.get(), "fd_combine", cgrid, 32 * COMBINE_ROWS, 0, ccap))
    return out


def device_decode_inputs(host: dict) -> dict:
    cp = _cp()
    return {k: cp.asarray(v) for k, v in host.items()}
