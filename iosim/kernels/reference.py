"""Float64 NumPy reference for attention forward and backward (the correctness oracle).

Layout [batch, heads, seq, head_dim]; GQA by KV head h // group; causal masking aligned to the
bottom-right corner (row r sees column c iff c ≤ r + seq_kv − seq_q). A row that sees no key
has output 0 and log-sum-exp +inf, and contributes no gradient (the kernels' convention).
"""
from __future__ import annotations

import numpy as np


def _expand(x: np.ndarray, heads_q: int) -> np.ndarray:
    g = heads_q // x.shape[1]
    return np.repeat(x, g, axis=1) if g > 1 else x


def _mask(seq_q: int, seq_kv: int, causal: bool) -> np.ndarray:
    if not causal:
        return np.ones((seq_q, seq_kv), dtype=bool)
    r = np.arange(seq_q)[:, None]
    c = np.arange(seq_kv)[None, :]
    return c <= r + (seq_kv - seq_q)


def forward(q, k, v, causal: bool, scale: float | None = None):
    """(O, LSE) in float64."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    hq, nq, d = q.shape[1], q.shape[2], q.shape[3]
    k, v = _expand(k, hq), _expand(v, hq)
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    m = _mask(nq, k.shape[2], causal)
    s = np.where(m, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    mx_safe = np.where(np.isfinite(mx), mx, 0.0)
    p = np.exp(s - mx_safe)
    l = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhqk,bhkd->bhqd", p / np.where(l > 0, l, 1.0), v)
    lse = np.where(l[..., 0] > 0, mx_safe[..., 0] + np.log(np.where(l[..., 0] > 0, l[..., 0], 1.0)), np.inf)
    return o, lse


def backward(q, k, v, do, causal: bool, scale: float | None = None):
    """(dQ, dK, dV) in float64; dK, dV summed over each KV head's query-head group."""
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    b, hq, nq, d = q.shape
    hkv = k.shape[1]
    ke, ve = _expand(k, hq), _expand(v, hq)
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    o, lse = forward(q, k, v, causal, scale)
    s = np.einsum("bhqd,bhkd->bhqk", q, ke) * scale
    m = _mask(nq, k.shape[2], causal)
    p = np.where(m, np.exp(s - np.where(np.isfinite(lse), lse, 0.0)[..., None]), 0.0)
    p = np.where(np.isfinite(lse)[..., None], p, 0.0)
    dv = np.einsum("bhqk,bhqd->bhkd", p, do)
    dp = np.einsum("bhqd,bhkd->bhqk", do, ve)
    dd = (do * o).sum(-1, keepdims=True)
    ds = p * (dp - dd)
    dq = np.einsum("bhqk,bhkd->bhqd", ds, ke) * scale
    dk = np.einsum("bhqk,bhqd->bhkd", ds, q) * scale
    g = hq // hkv
    if g > 1:
        dk = dk.reshape(b, hkv, g, *dk.shape[2:]).sum(2)
        dv = dv.reshape(b, hkv, g, *dv.shape[2:]).sum(2)
    return dq, dk, dv


def rel_error(x, ref) -> float:
    """‖x − ref‖ / ‖ref‖ in float64; inf if x has any NaN/inf."""
    x = np.asarray(x, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        return float("inf")
    den = np.linalg.norm(ref)
    return float(np.linalg.norm(x - ref) / (den if den > 0 else 1.0))


# ---- 16-bit storage ---------------------------------------------------------------------
def to_storage(x: np.ndarray, dtype: str) -> np.ndarray:
    """float array → 16-bit storage (np.float16 for fp16, uint16 bit patterns for bf16,
    rounded to nearest even)."""
    if dtype == "fp16":
        return np.asarray(x, dtype=np.float16)
    f = np.asarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def from_storage(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "fp16" or x.dtype == np.float16:
        return np.asarray(x, dtype=np.float64)
    return (np.asarray(x, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def random_inputs(problem, rng, with_grad: bool = False) -> dict:
    """Fresh N(0,1) Q, K, V (and dO) rounded to the problem's dtype, as host arrays."""
    b, hq, hkv, nq, nkv, d = (problem.batch, problem.heads_q, problem.heads_kv, problem.seq_q,
                              problem.seq_kv, problem.head_dim)
    out = {"Q": to_storage(rng.standard_normal((b, hq, nq, d)), problem.dtype),
           "K": to_storage(rng.standard_normal((b, hkv, nkv, d)), problem.dtype),
           "V": to_storage(rng.standard_normal((b, hkv, nkv, d)), problem.dtype)}
    if with_grad:
        out["dO"] = to_storage(rng.standard_normal((b, hq, nq, d)), problem.dtype)
    return out
