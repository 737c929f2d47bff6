"""Sizes of the tensors that schedules name, from the problem alone (for compulsory traffic)."""
from __future__ import annotations

STAT_BYTES = 4
ACC_BYTES = 4


def tensor_bytes(problem, name: str) -> int | None:
    """Bytes of the whole tensor `name` in global memory, or None if iosim does not know it."""
    b, hq, hk = problem.batch, problem.heads_q, problem.heads_kv
    nq, nk, d, eb = problem.seq_q, problem.seq_kv, problem.head_dim, problem.elem_bytes
    own_kv = b * nk if problem.seq_kv_list is None else sum(problem.seq_kv_list)
    own_kv -= b * problem.prefix_len         # a shared prefix is stored once (K_prefix, V_prefix)
    pre = hk * problem.prefix_len * d * eb
    sizes = {
        "Q": b * hq * nq * d * eb, "O": b * hq * nq * d * eb,
        "dO": b * hq * nq * d * eb, "dQ": b * hq * nq * d * eb,
        "K": hk * own_kv * d * eb, "V": hk * own_kv * d * eb,
        "K_prefix": pre, "V_prefix": pre,
        "dK": b * hk * nk * d * eb, "dV": b * hk * nk * d * eb,
        "dK_expanded": b * hq * nk * d * eb, "dV_expanded": b * hq * nk * d * eb,
        "LSE": b * hq * nq * STAT_BYTES, "D": b * hq * nq * STAT_BYTES,
        "m": b * hq * nq * STAT_BYTES, "l": b * hq * nq * STAT_BYTES,
        "dQaccum": b * hq * nq * d * ACC_BYTES,
        "S": b * hq * nq * nk * eb, "P": b * hq * nq * nk * eb,
        "dP": b * hq * nq * nk * eb, "dS": b * hq * nq * nk * eb,
    }
    return sizes.get(name)
