"""Fast mode: which CTAs of a kernel share one profile (a CTA class)."""
from __future__ import annotations

from ..machine import grid_index
from .characterize import shape_key


class KernelClasses:
    """cta → class index, and one representative program per class.

    `Kernel.classes` lists representatives and counts but not the members; two layouts are
    recognised and spot-checked against program shapes: classes that differ in some grid
    coordinates (FA-2: the Q block), and edge classes (standard's GEMMs: interior, last row of
    tiles, last column, corner). Anything else is grouped by enumerating every CTA's program."""

    def __init__(self, kernel):
        self.kernel = kernel
        grid = kernel.launch.grid
        self._g0, self._g1 = grid[0], grid[1]
        self._key = None
        for key_of, count_of in (self._by_coordinates(kernel), self._by_edges(kernel)):
            keys = [key_of(grid_index(rep, grid)) for rep, _count in kernel.classes]
            lookup = {k: i for i, k in enumerate(keys)}
            if (len(lookup) == len(keys) and sum(c for _r, c in kernel.classes) == kernel.num_ctas
                    and all(count_of(k) == c for k, (_r, c) in zip(keys, kernel.classes))):
                self._key, self._lookup = key_of, lookup
                self._by_x = None
                if getattr(key_of, "dims", None) == (0,):    # class = f(grid x) alone
                    self._by_x = [lookup.get((x,), 0) for x in range(grid[0])]
                self.reps = [rep for rep, _count in kernel.classes]
                if self._spot_check():
                    break
                self._key = None
        if self._key is None:       # enumerate: every CTA's program shape
            self._map, shapes, self.reps = [], {}, []
            for cta in range(kernel.num_ctas):
                key = shape_key(kernel.program(cta))
                c = shapes.get(key)
                if c is None:
                    c = shapes[key] = len(self.reps)
                    self.reps.append(cta)
                self._map.append(c)
        self.programs = [kernel.program(rep) for rep in self.reps]

    @staticmethod
    def _varying_dims(kernel) -> tuple:
        """Grid dimensions along which the class representatives differ, and the number of
        CTAs per class along the other dimensions."""
        grid = kernel.launch.grid
        coords = [grid_index(rep, grid) for rep, _c in kernel.classes]
        varying = tuple(d for d in range(3) if len({c[d] for c in coords}) > 1)
        others = 1
        for d in range(3):
            if d not in varying:
                others *= grid[d]
        return grid, varying, others

    @classmethod
    def _by_coordinates(cls, kernel):
        _grid, varying, others = cls._varying_dims(kernel)

        def key(c):
            return tuple(c[d] for d in varying)
        key.dims = varying
        return key, (lambda k: others)

    @classmethod
    def _by_edges(cls, kernel):
        grid, varying, others = cls._varying_dims(kernel)

        def count(k):
            n = others
            for flag, d in zip(k, varying):
                n *= 1 if flag else grid[d] - 1
            return n
        return (lambda c: tuple(c[d] == grid[d] - 1 for d in varying)), count

    def _spot_check(self) -> bool:
        n = self.kernel.num_ctas
        for cta in sorted({0, n - 1, n // 2, n // 3 + 1, (2 * n) // 3 + 2, n // 7 + 3}):
            if cta < n and shape_key(self.kernel.program(cta)) != \
                    shape_key(self.kernel.program(self.reps[self(cta)])):
                return False
        return True

    def __call__(self, cta: int) -> int:
        if self._key is None:
            return self._map[cta]
        if self._by_x is not None:
            return self._by_x[cta % self._g0]
        g0, g1 = self._g0, self._g1
        return self._lookup[self._key((cta % g0, (cta // g0) % g1, cta // (g0 * g1)))]
