"""The lesson's context: one problem on one GPU, and iosim's analyses of it, computed once.

Every section reads its numbers from here (or computes them with iosim functions); nothing
in the lesson is a pasted constant except the definitions the papers state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..analysis.analyze import analyze
from ..hardware import load_gpu


@dataclass
class LessonContext:
    problem: object          # AttentionProblem (direction fwd; sections derive others)
    gpu: object              # GpuSpec
    seed: int = 0
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def make(cls, problem, gpu="h100", seed: int = 0) -> "LessonContext":
        return cls(problem.with_(direction="fwd"), load_gpu(gpu), seed)

    # ---- shared sizes ----------------------------------------------------------------
    @property
    def N(self) -> int:
        return max(self.problem.seq_q, self.problem.seq_kv)

    @property
    def d(self) -> int:
        return self.problem.head_dim

    @property
    def eb(self) -> int:
        return self.problem.elem_bytes

    @property
    def heads(self) -> int:
        """Independent attention heads: batch × query heads."""
        return self.problem.batch * self.problem.heads_q

    @cached_property
    def sram_elements_per_sm(self) -> int:
        """M as the bounds module takes it: shared memory per SM in elements of the dtype."""
        return self.gpu.shared_memory_per_sm_bytes // self.eb

    @cached_property
    def sram_elements_per_block(self) -> int:
        """M as the fa1 generator takes it: shared memory one CTA may use, in elements."""
        return self.gpu.shared_memory_per_block_bytes // self.eb

    # ---- analyses (roofline model for counts; `simulated` for the times iosim run gives) --
    def analysis(self, algorithm: str, direction: str = "fwd", **tiling):
        key = (algorithm, direction, tuple(sorted(tiling.items())))
        if key not in self._cache:
            self._cache[key] = analyze(self.problem.with_(direction=direction), self.gpu,
                                       algorithm, model="roofline", **tiling)
        return self._cache[key]

    def simulated(self, algorithm: str):
        """The analysis `iosim run` prints (the simulator, fast mode): the lesson quotes its
        times so that the two agree; counts come from `analysis` (they do not depend on the
        time model)."""
        key = ("sim", algorithm)
        if key not in self._cache:
            self._cache[key] = analyze(self.problem, self.gpu, algorithm, model="sim")
        return self._cache[key]

    def has_algorithm(self, name: str) -> bool:
        from ..algorithms import ALGORITHMS
        if name not in ALGORITHMS:
            return False
        try:
            __import__(f"iosim.algorithms.{name}")
        except ImportError:
            return False
        return True
