"""A fingerprint of what exact mode's results depend on, to key cached exact-mode results.

Exact mode's time and bytes for a problem are a function of the schedule (algorithms,
schedule.py), the cost model (machine.py, hardware.py), the GPU config and the exact engine
(sim/engine.py and the modules it shares with the fast mode: pipeline, memory, compute,
dispatch, ...). The fingerprint hashes the source of every iosim module loaded once the
engine and the schedule builders are imported, except the fast mode's own modules (which
exact mode never runs), and the GPU spec's fields. A cache entry stored under another
fingerprint is stale: the benchmarks recompute it instead of comparing against it.
Conservative on purpose: an edit to any shared module (even a comment) invalidates.
"""
from __future__ import annotations

import hashlib
import importlib
import pkgutil
import sys
from dataclasses import asdict, is_dataclass
from pathlib import Path

# modules only the aggregated fast mode runs (exact mode's results cannot depend on them)
FAST_ONLY = ("iosim.sim.fast", "iosim.sim.fluid", "iosim.sim.characterize", "iosim.sim.lockstep",
             "iosim.sim.wait_cohorts",
             "iosim.sim.first_wave", "iosim.sim.l2model", "iosim.sim.wave_queue",
             "iosim.gcpause")


def exact_fingerprint(gpu) -> str:
    """Hex digest (16 characters) of the exact engine's sources and the GPU spec."""
    import iosim
    import iosim.algorithms as algorithms
    importlib.import_module("iosim.sim.engine")
    importlib.import_module("iosim.sim.l2_residency")     # memory.l2_cache imports it lazily
    for info in pkgutil.iter_modules(algorithms.__path__):     # every schedule generator
        importlib.import_module(f"iosim.algorithms.{info.name}")
    root = Path(iosim.__file__).resolve().parent
    h = hashlib.sha256()
    files = []
    for name, mod in list(sys.modules.items()):
        if not name.startswith("iosim") or name in FAST_ONLY:
            continue
        f = getattr(mod, "__file__", None)
        if f and f.endswith(".py"):
            files.append(Path(f).resolve())
    for f in sorted(set(files)):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    spec = asdict(gpu) if is_dataclass(gpu) else vars(gpu)
    h.update(repr(sorted(spec.items())).encode())
    return h.hexdigest()[:16]
