"""Flash-Decoding on the GPU: the split-KV kernel and the combine kernel of cuda/decode.cu,
their launch arithmetic, a float64 reference for ragged, paged and prefix-sharing KV caches, and
trace capture. The launch follows iosim.algorithms.flash_decoding (its docstring is the
schedule): `DecodeLaunch.from_schedule` reads grid, tiling and splits from a Schedule.

    DecodeLaunch(...)                    one problem's launch shape
    run_decode(launch, T, trace=False)   launch fd_split (+ fd_combine when splits > 1)
    reference(host, launch)              float64 (O, LSE) for the same inputs
    random_decode_inputs(launch, rng)    Q, K, V (contiguous or paged), seqlens, block table

Layouts (see cuda/decode.cu):
  Q, O         [B][Hq][Sq][D]      16-bit
  LSE          [B][Hq][Sq]         fp32 (+inf for a row that sees no key)
  K, V         contiguous: [B][Hkv][Nmax][D] (request b's own keys, after any shared prefix);
               paged: [pages][Hkv][P][D], token n of request b in page block_table[b][n // P],
               row n % P
  K_prefix, V_prefix  [Hkv][prefix_len][D] (a prompt prefix shared by every request)
  seqlens      [B] int32: each request's whole KV length (prefix included)
  O_partial    [B][Hkv][n_m][splits][block_q][D] fp32, ML_partial [...][block_q][2] fp32
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import IosimError
from .build import get_kernel

MAX_SPLITS = 128          # FD_MAX_SPLITS in decode.cu (the combine's shared (m, l) buffer)
COMBINE_THREADS = 128


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class DecodeLaunch:
    """The launch shape of one split-KV decode problem (the schedule's Tiling and Plan)."""

    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seqlens: tuple                # each request's KV length, prefix included
    head_dim: int = 128
    dtype: str = "fp16"
    causal: bool = False
    splits: int = 1               # asked for; the launch uses `n_splits` (no empty chunk for the longest)
    block_q: int = 16
    block_kv: int = 64
    stages: int = 3
    warps: int = 4
    page_size: int = 0            # 0: contiguous cache
    prefix_len: int = 0

    def __post_init__(self):
        object.__setattr__(self, "seqlens", tuple(int(n) for n in self.seqlens))
        if self.head_dim not in (64, 128):
            raise IosimError(f"the decode kernel supports head dims 64 and 128, not {self.head_dim}")
        if self.heads_q % self.heads_kv:
            raise IosimError(f"heads ({self.heads_q}) must be a multiple of kv-heads ({self.heads_kv})")
        if self.block_q not in (16, 32):
            raise IosimError(f"the decode kernel packs 16 or 32 query rows per tile, not block_q {self.block_q}")
        if self.block_kv % (16 * self.warps) or self.warps not in (1, 2, 4, 8):
            raise IosimError(f"decode block_kv must be a multiple of 16 x warps, got {self.block_kv} "
                             f"with {self.warps} warps")
        if self.stages < 2:
            raise IosimError(f"the decode kernel streams K/V through >= 2 stages, got {self.stages}")
        P = self.page_size
        if P and (P & (P - 1) or (P % self.block_kv and self.block_kv % P)):
            raise IosimError(f"page size {P}: a power of two dividing or divided by block_kv {self.block_kv}")
        if P and self.block_kv // P > 32:
            raise IosimError(f"page size {P}: the decode kernel reads a tile's page ids one per lane, "
                             f"so block_kv {self.block_kv} may span at most 32 pages")
        if P and self.prefix_len:
            raise IosimError("the decode kernel reads a shared prefix from a contiguous cache only")
        if len(self.seqlens) != self.batch or min(self.seqlens) <= self.prefix_len:
            raise IosimError(f"seqlens must be {self.batch} lengths longer than the prefix {self.prefix_len}")
        if self.splits < 1 or self.n_splits > MAX_SPLITS:
            raise IosimError(f"splits must be 1..{MAX_SPLITS}, got {self.splits}")

    @classmethod
    def from_schedule(cls, schedule) -> "DecodeLaunch":
        p, t = schedule.problem, schedule.tiling["fwd"]
        split = next(k for k in schedule.kernels if k.name == "fd_split")
        return cls(batch=p.batch, heads_q=p.heads_q, heads_kv=p.heads_kv, seq_q=p.seq_q,
                   seqlens=tuple(p.kv_lengths), head_dim=p.head_dim, dtype=p.dtype, causal=p.causal,
                   splits=split.launch.grid[0], block_q=t.block_q, block_kv=t.block_kv,
                   stages=t.stages, warps=t.warps, page_size=p.page_size or 0,
                   prefix_len=p.prefix_len)

    # ---- the plan (iosim.algorithms.flash_decoding.plan) --------------------------------
    @property
    def group(self) -> int:
        return self.heads_q // self.heads_kv

    @property
    def rows(self) -> int:
        """Packed query rows per KV head: query tokens x query heads of the group."""
        return self.group * self.seq_q

    @property
    def n_m(self) -> int:
        return ceil_div(self.rows, self.block_q)

    @property
    def seq_kv_max(self) -> int:
        return max(self.seqlens)

    @property
    def own_max(self) -> int:
        return self.seq_kv_max - self.prefix_len

    def n_blocks(self, length: int) -> int:
        """KV blocks of a request: the prefix's, then its own."""
        pre = ceil_div(self.prefix_len, self.block_kv) if self.prefix_len else 0
        return pre + ceil_div(length - self.prefix_len, self.block_kv)

    @property
    def n_max(self) -> int:
        return max(self.n_blocks(n) for n in self.seqlens)

    @property
    def per_split(self) -> int:
        return ceil_div(self.n_max, self.splits)

    @property
    def n_splits(self) -> int:
        return ceil_div(self.n_max, self.per_split)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def smem_bytes(self) -> int:
        """Q tile + stages x (K tile + V tile), 16-bit elements."""
        return 2 * self.head_dim * (self.block_q + 2 * self.stages * self.block_kv)

    @property
    def split_grid(self) -> tuple:
        return (self.n_splits, self.heads_kv * self.n_m, self.batch)

    @property
    def combine_grid(self) -> tuple:
        return (self.n_m, self.heads_kv, self.batch)

    def block_range(self, length: int, split: int) -> tuple:
        """Blocks [g0, g1) of a request's list that CTA `split` reads (no causal clamp)."""
        n = self.n_blocks(length)
        return min(n, split * self.per_split), min(n, (split + 1) * self.per_split)

    def defines(self) -> dict:
        return {"IOSIM_D": self.head_dim, "IOSIM_BKV": self.block_kv, "IOSIM_STAGES": self.stages,
                "IOSIM_WARPS": self.warps, "IOSIM_MT": self.block_q // 16, "IOSIM_PAGE": self.page_size}

    def pages_per_seq(self) -> int:
        return ceil_div(self.own_max, self.page_size) if self.page_size else 0


def splits_heuristic(tiles: int, sms: int, ctas_per_sm: int, n_blocks: int,
                     max_splits: int = MAX_SPLITS) -> int:
    """FlashAttention-2's num_splits_heuristic (flash_api.cpp), as
    iosim.algorithms.flash_decoding states it: slots = SMs x CTAs per SM; no split when the
    tiles fill 80% of the slots, else the fewest splits (among those that change the blocks per
    split) whose wave efficiency is within 85% of the best."""
    slots = sms * ctas_per_sm
    if tiles >= 0.8 * slots:
        return 1
    top = max(1, min(max_splits, slots, n_blocks))
    eff = {}
    for s in range(1, top + 1):
        if s == 1 or ceil_div(n_blocks, s) != ceil_div(n_blocks, s - 1):
            waves = tiles * s / slots
            eff[s] = waves / math.ceil(waves)
    best = max(eff.values())
    return next(s for s in sorted(eff) if eff[s] >= 0.85 * best)


# ---- inputs and the float64 reference ---------------------------------------------------
def random_decode_inputs(launch: DecodeLaunch, rng, page_order: str = "shuffled") -> dict:
    """N(0,1) Q, K, V (and K_prefix, V_prefix) rounded to the dtype; for a paged cache the
    pages of all requests in one pool, placed `page_order` ("contiguous" or "shuffled")."""
    from .reference import to_storage
    L = launch
    d = L.head_dim
    host = {"Q": to_storage(rng.standard_normal((L.batch, L.heads_q, L.seq_q, d)), L.dtype),
            "seqlens": np.asarray(L.seqlens, dtype=np.int32)}
    if L.prefix_len:
        for n in ("K_prefix", "V_prefix"):
            host[n] = to_storage(rng.standard_normal((L.heads_kv, L.prefix_len, d)), L.dtype)
    if not L.page_size:
        for n in ("K", "V"):
            host[n] = to_storage(rng.standard_normal((L.batch, L.heads_kv, L.own_max, d)), L.dtype)
        host["block_table"] = np.zeros((L.batch, 1), dtype=np.int32)
        return host
    per = L.pages_per_seq()
    ids = np.arange(L.batch * per, dtype=np.int32)
    if page_order == "shuffled":
        ids = rng.permutation(ids).astype(np.int32)
    elif page_order != "contiguous":
        raise IosimError(f"page order must be contiguous or shuffled, got {page_order!r}")
    host["block_table"] = ids.reshape(L.batch, per)
    for n in ("K", "V"):
        host[n] = to_storage(rng.standard_normal((L.batch * per, L.heads_kv, L.page_size, d)), L.dtype)
    return host


def gather_kv(host: dict, launch: DecodeLaunch, name: str, b: int) -> np.ndarray:
    """Request b's keys (or values), prefix first, as a float64 [Hkv][len_b][D] array."""
    from .reference import from_storage
    own = int(host["seqlens"][b]) - launch.prefix_len
    x = host[name]
    if launch.page_size:
        pages = host["block_table"][b, : ceil_div(own, launch.page_size)]
        seq = np.concatenate([x[p] for p in pages], axis=1)[:, :own]
    else:
        seq = x[b, :, :own]
    if launch.prefix_len:
        seq = np.concatenate([host[name + "_prefix"], seq], axis=1)
    return from_storage(seq, launch.dtype)


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


def split_trace_cap(launch: DecodeLaunch) -> int:
    """Events one fd_split CTA records at most: Q, per block [the block-table read,] K and V
    pieces and 3 phases, 2 stores."""
    pieces = max(1, launch.block_kv // launch.page_size) if launch.page_size else 1
    table = 1 if launch.page_size else 0
    return 1 + launch.per_split * (table + 2 * pieces + 3) + 2 + 8


def run_decode(launch: DecodeLaunch, T: dict, trace: bool = False) -> list:
    """Launch fd_split (and fd_combine when splits > 1) on the device arrays in T (Q, K, V,
    seqlens, block_table, [K_prefix, V_prefix]); T gains O and LSE (and O_partial, ML_partial).
    Returns the decoded KernelTraces (empty unless `trace`)."""
    from .run import poisoned
    from .trace import decode
    cp = _cp()
    L = launch
    S, bq, d = L.n_splits, L.block_q, L.head_dim
    scale = np.float32(1.0 / math.sqrt(d))
    if "O" not in T:
        T["O"] = poisoned((L.batch, L.heads_q, L.seq_q, d), L.dtype)
        T["LSE"] = poisoned((L.batch, L.heads_q, L.seq_q), L.dtype, fp32=True)
    if S > 1 and "O_partial" not in T:
        tiles = L.batch * L.heads_kv * L.n_m * S
        T["O_partial"] = poisoned((tiles, bq, d), L.dtype, fp32=True)
        T["ML_partial"] = poisoned((tiles, bq, 2), L.dtype, fp32=True)
    dummy = T["LSE"]
    opart, mlpart = T.get("O_partial", dummy), T.get("ML_partial", dummy)
    kp, vp = T.get("K_prefix", T["K"]), T.get("V_prefix", T["V"])
    out = []

    k = get_kernel("decode.cu", "fd_split", L.defines(), L.dtype, trace, L.smem_bytes)
    grid = L.split_grid
    n_ctas = grid[0] * grid[1] * grid[2]
    cap = split_trace_cap(L) if trace else 0
    buf = cp.zeros(n_ctas * (1 + 4 * cap), dtype=np.uint64) if trace else np.uint64(0)
    bt = T["block_table"]
    k(grid, (L.threads,),
      (T["Q"], T["K"], T["V"], kp, vp, T["seqlens"], bt, np.int32(bt.shape[1]), T["O"], T["LSE"],
       opart, mlpart, np.int32(L.batch), np.int32(L.heads_q), np.int32(L.heads_kv),
       np.int32(L.seq_q), np.int32(L.own_max), np.int32(L.prefix_len), np.int32(S),
       np.int32(L.per_split), np.int32(L.n_m), np.int32(1 if L.causal else 0), scale, buf,
       np.int32(cap)),
      shared_mem=L.smem_bytes)
    if trace:
        out.append(decode(buf.get(), "fd_split", grid, L.threads, L.smem_bytes, cap))
    if S > 1:
        c = get_kernel("decode.cu", "fd_combine", L.defines(), L.dtype, trace, 0)
        cgrid = L.combine_grid
        ccap = 3 * S + 2 + 8 if trace else 0
        n_c = cgrid[0] * cgrid[1] * cgrid[2]
        cbuf = cp.zeros(n_c * (1 + 4 * ccap), dtype=np.uint64) if trace else np.uint64(0)
        c(cgrid, (COMBINE_THREADS,),
          (opart, mlpart, T["O"], T["LSE"], np.int32(L.batch), np.int32(L.heads_q),
           np.int32(L.heads_kv), np.int32(L.seq_q), np.int32(S), np.int32(L.n_m), cbuf,
           np.int32(ccap)))
        if trace:
            out.append(decode(cbuf.get(), "fd_combine", cgrid, COMBINE_THREADS, 0, ccap))
    return out


def make_runner(launch: DecodeLaunch, T: dict):
    """A callable that launches fd_split (+ fd_combine) on T with every argument, output array
    and kernel attribute prepared once: per call, only the two kernel launches (what timing
    uses; `run_decode` prepares on every call)."""
    L = launch
    run_decode(L, T)                 # allocates the outputs, compiles, sets the smem limit
    S = L.n_splits
    scale = np.float32(1.0 / math.sqrt(L.head_dim))
    dummy = T["LSE"]
    opart, mlpart = T.get("O_partial", dummy), T.get("ML_partial", dummy)
    bt = T["block_table"]
    k = get_kernel("decode.cu", "fd_split", L.defines(), L.dtype, False, L.smem_bytes)
    kargs = (T["Q"], T["K"], T["V"], T.get("K_prefix", T["K"]), T.get("V_prefix", T["V"]), T["seqlens"],
             bt, np.int32(bt.shape[1]), T["O"], T["LSE"], opart, mlpart, np.int32(L.batch),
             np.int32(L.heads_q), np.int32(L.heads_kv), np.int32(L.seq_q), np.int32(L.own_max),
             np.int32(L.prefix_len), np.int32(S), np.int32(L.per_split), np.int32(L.n_m),
             np.int32(1 if L.causal else 0), scale, np.uint64(0), np.int32(0))
    grid, block, smem = L.split_grid, (L.threads,), L.smem_bytes
    if S == 1:
        return lambda: k(grid, block, kargs, shared_mem=smem)
    c = get_kernel("decode.cu", "fd_combine", L.defines(), L.dtype, False, 0)
    cargs = (opart, mlpart, T["O"], T["LSE"], np.int32(L.batch), np.int32(L.heads_q),
             np.int32(L.heads_kv), np.int32(L.seq_q), np.int32(S), np.int32(L.n_m), np.uint64(0),
             np.int32(0))
    cgrid, cblock = L.combine_grid, (COMBINE_THREADS,)

    def run():
        k(grid, block, kargs, shared_mem=smem)
        c(cgrid, cblock, cargs)
    return run


def device_decode_inputs(host: dict) -> dict:
    cp = _cp()
    return {k: cp.asarray(v) for k, v in host.items()}


def schedule_inputs(problem, T: dict) -> dict:
    """Turn the contiguous Q, K, V [B][Hkv][seq_kv][D] that `reference.random_inputs` makes for
    `problem` into the cache the decode kernel reads: per-request lengths, the shared prefix
    (request 0's first prefix_len keys, stored once), pages placed by
    `iosim.algorithms.kvcache.block_table` (pool [pages][Hkv][P][D])."""
    cp = _cp()
    L = problem
    out = dict(T)
    out["seqlens"] = cp.asarray(np.asarray(L.kv_lengths, dtype=np.int32))
    P = L.prefix_len
    if P:
        out["K_prefix"] = cp.ascontiguousarray(T["K"][0, :, :P])
        out["V_prefix"] = cp.ascontiguousarray(T["V"][0, :, :P])
        out["K"] = cp.ascontiguousarray(T["K"][:, :, P:])
        out["V"] = cp.ascontiguousarray(T["V"][:, :, P:])
    if not L.page_size:
        out["block_table"] = cp.zeros((L.batch, 1), dtype=np.int32)
        return out
    from ..algorithms.kvcache import block_table
    tables = block_table(L)
    ps = L.page_size
    width = max(len(t) for t in tables)
    bt = np.zeros((L.batch, width), dtype=np.int32)
    for b, t in enumerate(tables):
        bt[b, :len(t)] = t
    n_pages = int(bt.max()) + 1
    for name in ("K", "V"):
        x = T[name]
        pool = cp.zeros((n_pages, L.heads_kv, ps, L.head_dim), dtype=x.dtype)
        for b, t in enumerate(tables):
            n = L.kv_lengths[b]
            full = n // ps
            if full:
                pool[cp.asarray(np.asarray(t[:full], dtype=np.int64))] = \
                    x[b, :, :full * ps].reshape(L.heads_kv, full, ps, L.head_dim).transpose(1, 0, 2, 3)
            if n % ps:
                pool[t[full], :, :n % ps] = x[b, :, full * ps:n]
        out[name] = pool
    out["block_table"] = cp.asarray(bt)
    return out


def copy_issue_cycles(trace: dict) -> list:
    """Cycles one thread of fd_split spends per 16-byte cp.async of a K/V tile, from a trace's
    clock64 stamps (a captured trace as JSON, decode.cu as of the one-loop K/V copy): per tile
    whose previous event is a load (Q, the previous tile's V, a block-table read: nothing but
    the copy loop and one trace write lie between), (stamp of its first K event - that
    event's) less one trace write (the median gap between a tile's last K and first V events,
    where the kernel does nothing but record), over the thread's copies of the tile (K and V:
    2 x block_kv x head_dim / 8 / threads)."""
    k = next(k for k in trace["kernels"] if k["name"] == "fd_split")
    d = trace["problem"].get("head_dim", 128)
    copies = 2 * trace["tiling"]["fwd"]["block_kv"] * d // 8 / k["threads"]
    K, V = k["names"].index("K"), k["names"].index("V")
    writes, gaps = [], []
    for events in k["ctas"]:
        for a, b in zip(events, events[1:]):
            if a[0] == 1 and b[0] == 1 and a[1] == K and b[1] == V:
                writes.append(b[6] - a[6])
        for i in range(1, len(events)):
            a, b = events[i - 1], events[i]
            if (b[0] == 1 and b[1] == K and (len(b[2]) == 3 or b[2][2] == 0)
                    and a[0] == 1 and a[1] != K):
                gaps.append(b[6] - a[6])
    if not writes or not gaps:
        return []
    w = float(np.median(writes))
    return [(g - w) / copies for g in gaps]
