"""Section 3: the online-softmax recurrence, step by step, and what "exact" means in floats.

For one query row with scores s (length n) and values V (n × dv), split into blocks of b keys.
After block j (keys in B_j), with m₀ = −∞, ℓ₀ = 0, o₀ = 0:

    m_j = max(m_{j−1}, max_{k∈B_j} s_k)          running maximum
    α_j = exp(m_{j−1} − m_j)                       rescale factor for what came before
    ℓ_j = α_j ℓ_{j−1} + Σ_{k∈B_j} exp(s_k − m_j)   running denominator
    o_j = α_j o_{j−1} + Σ_{k∈B_j} exp(s_k − m_j) v_k   running numerator (unnormalised)

and softmax(s)·V = o_T / ℓ_T exactly, in real arithmetic. In floating point the sums are
associated differently from the direct softmax, so the two agree to rounding, not bitwise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import IosimError
from .fmt import fnum, heading, sci, table

NAME = "online-softmax"
TITLE = "Online softmax: the recurrence that removes S and P"

EXAMPLE_SCORES = (1.0, 3.0, 4.0, 2.0)
EXAMPLE_VALUES = (1.0, 2.0, 3.0, 4.0)
EXAMPLE_BLOCK = 2
RANDOM_ROWS = 64


@dataclass(frozen=True)
class Step:
    block: int
    start: int
    stop: int
    m: np.ndarray        # running max, per row
    alpha: np.ndarray    # exp(m_old − m_new), per row (0 for the first block: m_old = −∞)
    l: np.ndarray        # running denominator, per row
    o: np.ndarray        # running unnormalised numerator, rows × dv
    out: np.ndarray      # o / ℓ: the softmax of the keys seen so far applied to their values


def _as_2d(scores, values, dtype):
    s = np.asarray(scores, dtype=dtype)
    v = np.asarray(values, dtype=dtype)
    if s.ndim == 1:
        s = s[None, :]
    if v.ndim == 1:
        v = v[:, None]
    return s, v


def online_softmax(scores, values, block: int, dtype=np.float64) -> list[Step]:
    """Every step of the recurrence, all arithmetic in `dtype`. scores: (n,) or (rows, n);
    values: (n,) or (n, dv)."""
    s, v = _as_2d(scores, values, dtype)
    rows, n = s.shape
    m = np.full(rows, -np.inf, dtype=dtype)
    l = np.zeros(rows, dtype=dtype)
    o = np.zeros((rows, v.shape[1]), dtype=dtype)
    steps = []
    for j, start in enumerate(range(0, n, block)):
        stop = min(n, start + block)
        sj = s[:, start:stop]
        m_new = np.maximum(m, sj.max(axis=1))
        alpha = np.exp(m - m_new)                      # exp(−∞) = 0 on the first block
        p = np.exp(sj - m_new[:, None])
        l = alpha * l + p.sum(axis=1, dtype=dtype)
        o = alpha[:, None] * o + p @ v[start:stop]
        m = m_new
        steps.append(Step(j + 1, start, stop, m.copy(), alpha, l.copy(), o.copy(),
                          o / l[:, None]))
    return steps


def direct_softmax(scores, values, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """(P, P·V) by the textbook two-pass softmax, all arithmetic in `dtype`."""
    s, v = _as_2d(scores, values, dtype)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True, dtype=dtype)
    return p, p @ v


def parse_floats(text: str, what: str) -> list[float]:
    parts = [x.strip() for x in str(text).split(",")]
    if not parts or any(x == "" for x in parts):
        raise IosimError(f"--{what} must be a comma-separated list of numbers, got {text!r}")
    try:
        vals = [float(x) for x in parts]
    except ValueError:
        raise IosimError(f"--{what} must be a comma-separated list of numbers, got {text!r}") from None
    if not all(np.isfinite(vals)):
        raise IosimError(f"--{what} must be finite numbers, got {text!r}")
    return vals


def check_inputs(scores, values, block) -> None:
    if len(scores) != len(values):
        raise IosimError(f"--scores has {len(scores)} numbers but --values has {len(values)}; "
                         "give one value per score")
    if not isinstance(block, int) or isinstance(block, bool) or block <= 0:
        raise IosimError(f"--block must be a positive integer, got {block!r}")


# ---- the worked example -------------------------------------------------------------
def walkthrough(scores, values, block: int) -> dict:
    """The recurrence on one row of scalars, with the direct softmax beside it (float64)."""
    check_inputs(scores, values, block)
    steps = online_softmax(scores, values, block)
    p, direct = direct_softmax(scores, values)
    tiled = float(steps[-1].out[0, 0])
    return {
        "scores": list(map(float, scores)), "values": list(map(float, values)), "block": block,
        "steps": [{"block": s.block, "keys": (s.start, s.stop),
                   "m": float(s.m[0]), "alpha": float(s.alpha[0]), "l": float(s.l[0]),
                   "o": float(s.o[0, 0]), "out": float(s.out[0, 0])} for s in steps],
        "tiled": tiled, "direct": float(direct[0, 0]),
        "probabilities": [float(x) for x in p[0]],
        "abs_diff": abs(tiled - float(direct[0, 0])),
    }


def walkthrough_text(w: dict) -> str:
    rows = []
    for st in w["steps"]:
        a, b = st["keys"]
        rows.append((st["block"], ",".join(fnum(x) for x in w["scores"][a:b]),
                     fnum(st["m"]), fnum(st["alpha"]), fnum(st["l"]), fnum(st["o"]),
                     fnum(st["out"])))
    return "\n".join([
        f"scores {', '.join(fnum(x) for x in w['scores'])}; values "
        f"{', '.join(fnum(x) for x in w['values'])}; blocks of {w['block']} keys "
        "(m₀ = −∞, ℓ₀ = 0, o₀ = 0):", "",
        table(["block", "scores", "m", "α = e^(m_old−m)", "ℓ", "o", "o/ℓ"], rows), "",
        "(α of the first block is e^(−∞) = 0: there is nothing to rescale yet.)", "",
        f"online (tiled) output o/ℓ = {fnum(w['tiled'], 10)}",
        f"direct softmax: p = [{', '.join(fnum(x) for x in w['probabilities'])}], "
        f"Σ p·v = {fnum(w['direct'], 10)}",
        f"|difference| = {sci(w['abs_diff'])} (float64)",
    ])


# ---- the float experiment -----------------------------------------------------------
def float_experiment(n: int, dv: int, block: int, seed: int = 0, rows: int = RANDOM_ROWS) -> dict:
    """Seeded random scores (rows × n) and values (n × dv): tiled against direct softmax in
    float64 and in float32, with float64 as the reference for the float32 errors."""
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((rows, n)) * 2.0
    v = rng.standard_normal((n, dv))
    out = {"rows": rows, "n": n, "dv": dv, "block": block, "seed": seed}
    ref = None
    for name, dt in (("float64", np.float64), ("float32", np.float32)):
        tiled = online_softmax(s.astype(dt), v.astype(dt), block, dt)[-1].out
        _, direct = direct_softmax(s.astype(dt), v.astype(dt), dt)
        if ref is None:
            ref = direct
        scale = float(np.abs(ref).max())
        diff = np.abs(tiled.astype(np.float64) - direct.astype(np.float64))
        out[name] = {
            "eps": float(np.finfo(dt).eps),
            "max_abs_diff": float(diff.max()),
            "max_rel_diff": float(diff.max() / scale),
            "identical_fraction": float(np.mean(tiled == direct)),
            "tiled_err_vs_f64": float(np.abs(tiled - ref).max() / scale),
            "direct_err_vs_f64": float(np.abs(direct - ref).max() / scale),
        }
    return out


def float_text(x: dict) -> str:
    rows = []
    for name in ("float64", "float32"):
        r = x[name]
        rows.append((name, sci(r["max_abs_diff"]), sci(r["max_rel_diff"]),
                     f"{r['max_rel_diff'] / r['eps']:.1f}", f"{100 * r['identical_fraction']:.1f}%",
                     sci(r["tiled_err_vs_f64"]), sci(r["direct_err_vs_f64"])))
    f32 = x["float32"]
    return "\n".join([
        f"Random data (seed {x['seed']}): {x['rows']} query rows, n = {x['n']:,} keys, "
        f"values {x['n']:,}×{x['dv']}, blocks of {x['block']} keys, scores ~ N(0, 2²):", "",
        table(["arithmetic", "max|tiled−direct|", "relative", "÷ eps", "bitwise equal",
               "tiled err", "direct err"], rows), "",
        "('relative' divides by max|output|; 'err' columns are against the float64 direct result.)",
        "In float64 the two agree to rounding. In float32 they differ by "
        f"{sci(f32['max_abs_diff'])} ({f32['max_rel_diff'] / f32['eps']:.1f} × eps = "
        f"{sci(f32['eps'])}): not zero,",
        "and no larger than either result's own error against float64. The online softmax is",
        "exact in real arithmetic; in floats it is a different association of the same sums.",
        "So \"tiled attention is bitwise identical to standard attention\" is a myth: it is",
        "identical up to the rounding that any reordering of a floating-point sum causes.",
    ])


def facts(ctx) -> dict:
    block = ctx.analysis("fa2").tiling["fwd"].block_kv
    return {"example": walkthrough(EXAMPLE_SCORES, EXAMPLE_VALUES, EXAMPLE_BLOCK),
            "random": float_experiment(ctx.N, ctx.d, block, ctx.seed)}


def text(f: dict) -> str:
    return "\n".join([
        heading(3, TITLE), "",
        "Softmax needs the row maximum and the row sum before any output, which is why standard",
        "attention materialises the whole row of S. The online softmax keeps three running",
        "quantities per query row instead, and rescales them when the maximum grows:", "",
        "    m_j = max(m_{j−1}, max S_j)            α_j = exp(m_{j−1} − m_j)",
        "    ℓ_j = α_j ℓ_{j−1} + Σ exp(S_j − m_j)    o_j = α_j o_{j−1} + exp(S_j − m_j) V_j",
        "    output = o_T / ℓ_T", "",
        walkthrough_text(f["example"]), "",
        float_text(f["random"]), "",
        "Check: iosim teach online-softmax --scores 1,3,4,2 --values 1,2,3,4 --block 2",
    ])
