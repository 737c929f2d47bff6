"""AttentionProblem: the shape of one attention call (what is computed, not how)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from .errors import IosimError
from .limits import MAX_BATCH_HEADS, MAX_SEQ

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp8": 1}
DIRECTIONS = ("fwd", "bwd", "fwd+bwd")
SUPPORTED_HEAD_DIMS = (32, 64, 96, 128, 192, 256)
OPTION_NAMES = {"heads_q": "heads", "heads_kv": "kv-heads", "seq_q": "seq", "seq_kv": "seq-kv",
                "head_dim": "head-dim", "batch": "batch"}
PAGE_LAYOUTS = ("contiguous", "shuffled", "fragmented")   # see iosim/algorithms/kvcache.py


@dataclass(frozen=True)
class AttentionProblem:
    """softmax(Q Kᵀ / √d) V for `batch` × `heads_q` heads.

    Causal masking is aligned to the bottom-right corner (as FlashAttention ≥ 2.1 does):
    query row r may attend key column c iff c ≤ r + (seq_kv − seq_q). With seq_kv < seq_q the
    first seq_q − seq_kv rows attend no key (FlashAttention writes zeros there); such a problem
    is accepted, counted with those rows' zero pairs, and `warnings()` says so.
    """

    batch: int = 1
    heads_q: int = 32
    heads_kv: int | None = None
    seq_q: int = 4096
    seq_kv: int | None = None
    head_dim: int = 128
    dtype: str = "fp16"
    causal: bool = False
    direction: str = "fwd"
    # KV cache (decode/serving; iosim/algorithms/kvcache.py): per-request KV lengths, a prompt
    # prefix shared by every request (its KV stored once), and paging through a block table
    seq_kv_list: tuple | None = None
    prefix_len: int = 0
    page_size: int | None = None
    page_layout: str = "contiguous"

    def __post_init__(self):
        if self.seq_kv_list is not None:
            object.__setattr__(self, "seq_kv_list", tuple(self.seq_kv_list))
            if self.seq_kv is None and self.seq_kv_list and all(
                    isinstance(v, int) and v > 0 for v in self.seq_kv_list):
                object.__setattr__(self, "seq_kv", max(self.seq_kv_list))
        if self.heads_kv is None:
            object.__setattr__(self, "heads_kv", self.heads_q)
        if self.seq_kv is None:
            object.__setattr__(self, "seq_kv", self.seq_q)
        for name in ("batch", "heads_q", "heads_kv", "seq_q", "seq_kv", "head_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise IosimError(f"{OPTION_NAMES[name]} must be a positive integer, got {value!r}")
        for name in ("batch", "heads_q", "heads_kv"):
            if getattr(self, name) > MAX_BATCH_HEADS:
                raise IosimError(f"{OPTION_NAMES[name]} {getattr(self, name):,} is above the limit "
                                 f"of {MAX_BATCH_HEADS:,} (CUDA's grid y/z limit; docs/limits.md)")
        for name in ("seq_q", "seq_kv"):
            if getattr(self, name) > MAX_SEQ:
                raise IosimError(f"{OPTION_NAMES[name]} {getattr(self, name):,} is above the limit "
                                 f"of {MAX_SEQ:,} tokens (docs/limits.md)")
        if self.heads_q % self.heads_kv:
            raise IosimError(
                f"heads ({self.heads_q}) must be a multiple of kv-heads ({self.heads_kv}) for GQA/MQA")
        if self.head_dim not in SUPPORTED_HEAD_DIMS:
            raise IosimError(
                f"unsupported head dim {self.head_dim}; supported: "
                + ", ".join(map(str, SUPPORTED_HEAD_DIMS)))
        if not isinstance(self.dtype, str) or self.dtype not in DTYPE_BYTES:
            raise IosimError(f"unknown dtype {self.dtype!r}; choose one of: {', '.join(DTYPE_BYTES)}")
        if not isinstance(self.causal, bool):
            raise IosimError(f"causal must be true or false, got {self.causal!r}")
        if not isinstance(self.direction, str) or self.direction not in DIRECTIONS:
            raise IosimError(f"unknown direction {self.direction!r}; choose one of: {', '.join(DIRECTIONS)}")
        self._check_kv_cache()

    def _check_kv_cache(self):
        lens = self.seq_kv_list
        if lens is not None:
            if len(lens) != self.batch:
                raise IosimError(f"seq-kv-list has {len(lens)} length(s) but batch is {self.batch}")
            if any(not isinstance(v, int) or isinstance(v, bool) or v <= 0 for v in lens):
                raise IosimError(f"seq-kv-list must hold positive integers, got {list(lens)!r}")
            if max(lens) != self.seq_kv:
                raise IosimError(f"seq-kv ({self.seq_kv}) must equal the longest of seq-kv-list "
                                 f"({max(lens)})")
        if not isinstance(self.prefix_len, int) or isinstance(self.prefix_len, bool) \
                or self.prefix_len < 0:
            raise IosimError(f"prefix-len must be a non-negative integer, got {self.prefix_len!r}")
        shortest = min(n for n, _count in self.kv_length_counts)
        if self.prefix_len > shortest:
            raise IosimError(f"prefix-len {self.prefix_len} is longer than the KV length "
                             f"{shortest}")
        if self.prefix_len and self.causal and self.seq_q > 1:
            raise IosimError("prefix-len with causal multi-token queries is not modelled; "
                             "use --no-causal or --seq 1")
        ps = self.page_size
        if ps is not None:
            if not isinstance(ps, int) or isinstance(ps, bool) or ps <= 0 or ps & (ps - 1):
                raise IosimError(f"page-size must be a power of two, got {ps!r}")
            if ps > self.seq_kv:
                raise IosimError(f"page-size {ps} is larger than the KV length {self.seq_kv}")
        if self.page_layout not in PAGE_LAYOUTS:
            raise IosimError(f"unknown page layout {self.page_layout!r}; choose one of: "
                             f"{', '.join(PAGE_LAYOUTS)}")

    @property
    def kv_length_counts(self) -> tuple:
        """(KV length, requests with it) pairs in first-seen order: sums over the batch cost
        the distinct lengths, not the batch size (a batch of 10⁹ equal requests is one pair)."""
        if self.seq_kv_list is None:
            return ((self.seq_kv, self.batch),)
        counts: dict = {}
        for n in self.seq_kv_list:
            counts[n] = counts.get(n, 0) + 1
        return tuple(counts.items())

    @property
    def kv_lengths(self) -> tuple:
        """KV length of every request of the batch (all seq_kv unless seq_kv_list is given)."""
        return self.seq_kv_list if self.seq_kv_list is not None else (self.seq_kv,) * self.batch

    def check_modelled(self) -> None:
        """Refuse what a user may ask for but the project has no kernel of: an fp8 backward
        pass (FA-3's fp8 is forward only). Called where a user states the problem (the CLI's
        options, the API); schedule generators still count any dtype, as the tests do."""
        if self.dtype == "fp8" and self.direction != "fwd":
            raise IosimError(f"direction {self.direction} with dtype fp8: iosim models no fp8 "
                             f"backward pass; use fp16 or bf16, or direction fwd")

    def warnings(self) -> list[str]:
        """Accepted but probably unintended: said on stderr by the CLI, warned by the API."""
        if self.causal and self.seq_kv < self.seq_q:
            rows = self.seq_q - self.seq_kv
            return [f"causal with seq-kv {self.seq_kv} < seq {self.seq_q}: under the bottom-right "
                    f"aligned mask the first {rows:,} query rows attend no key (output zero)"]
        return []

    # ---- derived sizes -------------------------------------------------------------
    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def group_size(self) -> int:
        """Query heads sharing one KV head (1 = MHA, heads_q = MQA)."""
        return self.heads_q // self.heads_kv

    @property
    def causal_offset(self) -> int:
        return self.seq_kv - self.seq_q

    def q_bytes(self) -> int:
        return self.batch * self.heads_q * self.seq_q * self.head_dim * self.elem_bytes

    def kv_tokens_stored(self) -> int:
        """KV positions held in memory per KV head: every request's own tokens, plus the shared
        prefix once."""
        return (sum(n * count for n, count in self.kv_length_counts)
                - (self.batch - 1) * self.prefix_len)

    def kv_bytes(self) -> int:
        """Bytes of K plus V (a shared prefix counted once)."""
        return 2 * self.heads_kv * self.kv_tokens_stored() * self.head_dim * self.elem_bytes

    def o_bytes(self) -> int:
        return self.q_bytes()

    def attended_pairs_total(self) -> int:
        """(query, key) pairs that are not masked, summed over the batch, per query head."""
        if self.seq_kv_list is None:
            return self.batch * self.attended_pairs()
        return sum(self.with_(seq_kv=n, seq_kv_list=None, batch=1, prefix_len=0,
                              page_size=None).attended_pairs() for n in self.seq_kv_list)

    def attended_pairs(self, seq_kv: int | None = None) -> int:
        """(query, key) pairs that are not masked, per head (of a request with seq_kv keys)."""
        if seq_kv is not None and seq_kv != self.seq_kv:
            return self.with_(seq_kv=seq_kv, seq_kv_list=None, page_size=None,
                              prefix_len=0).attended_pairs()
        if not self.causal:
            return self.seq_q * self.seq_kv
        off = self.causal_offset
        total = 0
        # row r attends min(seq_kv, max(0, r + off + 1)) keys; closed form in pieces
        lo = max(0, -off)          # first row with at least one key
        hi = min(self.seq_q, self.seq_kv - off)  # rows below hi attend fewer than seq_kv keys
        if hi > lo:
            # sum_{r=lo}^{hi-1} (r + off + 1)
            n = hi - lo
            total += n * (off + 1) + (lo + hi - 1) * n // 2
        total += max(0, self.seq_q - max(hi, lo)) * self.seq_kv
        return total

    def useful_flops_fwd(self) -> int:
        """Matmul FLOPs of the forward pass on unmasked pairs: 2 GEMMs × 2·d per pair."""
        return 4 * self.head_dim * self.attended_pairs_total() * self.heads_q

    def useful_flops(self) -> int:
        fwd = self.useful_flops_fwd()
        return {"fwd": fwd, "bwd": int(2.5 * fwd), "fwd+bwd": int(3.5 * fwd)}[self.direction]

    def with_(self, **changes) -> "AttentionProblem":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """Every field; the KV-cache fields only when they differ from their defaults (so a
        plain problem's JSON is unchanged)."""
        d = asdict(self)
        for key, default in (("seq_kv_list", None), ("prefix_len", 0), ("page_size", None),
                             ("page_layout", "contiguous")):
            if d[key] == default:
                del d[key]
            elif isinstance(d[key], tuple):
                d[key] = list(d[key])
        return d

    def describe(self) -> str:
        gqa = f", kv-heads {self.heads_kv}" if self.heads_kv != self.heads_q else ""
        seq = f"{self.seq_q}" if self.seq_q == self.seq_kv else f"{self.seq_q}×{self.seq_kv}"
        if self.seq_kv_list is not None:
            seq = f"{self.seq_q}×[{','.join(map(str, self.seq_kv_list))}]"
        kv = ""
        if self.prefix_len:
            kv += f", shared prefix {self.prefix_len}"
        if self.page_size:
            kv += f", pages of {self.page_size} ({self.page_layout})"
        return (f"batch {self.batch}, heads {self.heads_q}{gqa}, seq {seq}, d {self.head_dim}, "
                f"{self.dtype}, {'causal' if self.causal else 'non-causal'}, {self.direction}{kv}")


# The problem vocabulary, defined once: field names as files and the API spell them, their
# defaults, and the CLI option of each (options.py builds the click options from these).
PROBLEM_KEYS = tuple(f.name for f in fields(AttentionProblem))
PROBLEM_DEFAULTS = {f.name: f.default for f in fields(AttentionProblem)}
OPTION_NAMES.update(dtype="dtype", causal="causal", direction="direction",
                    seq_kv_list="seq-kv-list", prefix_len="prefix-len", page_size="page-size",
                    page_layout="page-layout")
