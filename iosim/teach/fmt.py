"""Small formatting helpers shared by the sections (numbers stay numbers in the facts)."""
from __future__ import annotations

import math

from ..units import capacity, nbytes, si

__all__ = ["capacity", "nbytes", "si", "fnum", "table", "heading", "sci"]


def fnum(x: float, digits: int = 6) -> str:
    """A float with `digits` significant digits, no SI prefix (for small worked numbers)."""
    if x is None:
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "−∞" if x < 0 else "∞"
    return f"{x:.{digits}g}"


def sci(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}e}"


def table(header: list, rows: list, align: str | None = None) -> str:
    """A plain monospace table; `align` is a string of 'l'/'r' per column (default: first l)."""
    cols = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    align = align or ("l" + "r" * (len(header) - 1))

    def line(r):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                         for c, w, a in zip(r, widths, align)).rstrip()
    out = [line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cols[1:]]
    return "\n".join(out)


def heading(number: int, title: str) -> str:
    t = f"{number}. {title}"
    return f"{t}\n{'=' * len(t)}"
