"""iosim: a GPU memory-hierarchy simulator and IO-complexity analyzer for attention.

Imports are lazy so that GPU-side modules (iosim.kernels, iosim.measure) load on machines
that have cupy but not the core's dependencies, and so that the CLI starts quickly.
"""
from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "IosimError": "iosim.errors",
    "GpuSpec": "iosim.hardware",
    "load_gpu": "iosim.hardware",
    "AttentionProblem": "iosim.problem",
    "build_schedule": "iosim.algorithms",
    "analyze": "iosim.analysis.analyze",
    "simulate": "iosim.sim",
}
__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'iosim' has no attribute {name!r}")
