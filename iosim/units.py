"""Human-readable numbers with units (SI prefixes, bytes in decimal units as datasheets use)."""
from __future__ import annotations

import math


def si(value: float, unit: str = "", digits: int = 3) -> str:
    if value is None:
        return "—"
    if value == 0:
        return f"0 {unit}".strip()
    if math.isinf(value) or math.isnan(value):
        return str(value)
    prefixes = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""),
                (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")]
    for scale, p in prefixes:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {p}{unit}".strip()
    return f"{value:.{digits}g} {unit}".strip()


def nbytes(value: float) -> str:
    return si(value, "B")


def seconds(value: float) -> str:
    return si(value, "s")
