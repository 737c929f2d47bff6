"""Human-readable numbers with units: SI prefixes; traffic in decimal bytes (GB = 10⁹ B, as
bandwidths are stated); capacities in binary units named as such (MiB, GiB), which is what
vendors mean by the "50 MB" L2 and "80 GB" HBM of an H100."""
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


def capacity(value: float) -> str:
    """A memory size in binary units: 52,428,800 B → '50 MiB', 85,899,345,920 B → '80 GiB'."""
    if value is None:
        return "—"
    for scale, unit in ((2 ** 40, "TiB"), (2 ** 30, "GiB"), (2 ** 20, "MiB"), (2 ** 10, "KiB")):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:.0f} B"
