"""Independent references for the count tests: block classification from the elementwise
causal mask (NumPy), valid rows of ragged blocks. Nothing here imports the generators."""
import numpy as np


def block_kinds(nq, nkv, br, bc, causal):
    """0 skip / 1 partial / 2 full per (Q block, KV block), from the elementwise mask."""
    allowed = np.ones((nq, nkv), bool)
    if causal:
        allowed = np.arange(nkv)[None, :] <= np.arange(nq)[:, None] + (nkv - nq)
    tq, tk = -(-nq // br), -(-nkv // bc)
    any_, all_ = np.zeros((tq * br, tk * bc), bool), np.ones((tq * br, tk * bc), bool)
    any_[:nq, :nkv] = allowed
    all_[:nq, :nkv] = allowed
    a = any_.reshape(tq, br, tk, bc).any(axis=(1, 3))
    f = all_.reshape(tq, br, tk, bc).all(axis=(1, 3))
    return np.where(f, 2, np.where(a, 1, 0))


def valid_rows(n, block):
    return np.array([min(block, n - k * block) for k in range(-(-n // block))])
