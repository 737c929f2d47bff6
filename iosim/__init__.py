"""iosim: a GPU memory-hierarchy simulator and IO-complexity analyzer for attention."""
from .errors import IosimError
from .hardware import GpuSpec, load_gpu
from .problem import AttentionProblem
from .algorithms import build_schedule

__version__ = "0.1.0"
__all__ = ["IosimError", "GpuSpec", "load_gpu", "AttentionProblem", "build_schedule", "__version__"]
