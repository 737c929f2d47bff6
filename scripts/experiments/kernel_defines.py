"""The project's kernels built with extra compile-time defines (the experiment switches of the
.cu sources: IOSIM_O_STORE, IOSIM_FORCE_MASK, IOSIM_STAMPS), for the device experiments here.

    ln = launcher(schedule, IOSIM_FORCE_MASK=1)              # a Launcher building with them
    ln = launcher(schedule, stamps=buffer_of, IOSIM_STAMPS=1)  # ... and a stamps buffer per kernel
"""
from __future__ import annotations

from dataclasses import dataclass, field


def launcher(schedule, stamps=None, **defines):
    """A kernels.run.Launcher whose kernels (FA-3's through its Fa3Variant, the others through
    their tiling defines) are compiled with `defines` added. `stamps(kernel)`: a device buffer
    passed as the kernel's trace argument (IOSIM_STAMPS); the launcher keeps the last one in
    `.stamps` and records no trace."""
    from iosim.kernels import hopper
    from iosim.kernels.run import Launcher

    @dataclass(frozen=True)
    class Variant(hopper.Fa3Variant):
        extra: tuple = field(default=())

        def defines(self) -> dict:
            return {**super().defines(), **dict(self.extra)}

    class DefinesLauncher(Launcher):
        def _defines(self, t):
            return {**super()._defines(t), **defines}

        def _trace_buffer(self, kernel):
            if stamps is None:
                return super()._trace_buffer(kernel)
            self.stamps = stamps(kernel)
            return self.stamps, 0, None

        def _record(self, kernel, buf, cap):
            if stamps is None:
                super()._record(kernel, buf, cap)

    return DefinesLauncher(schedule, fa3_variant=Variant(extra=tuple(sorted(defines.items()))))


STAMP_SLOTS = 16     # iosim_common.cuh: %globaltimer slots per CTA under IOSIM_STAMPS


def stamped_run(problem, algorithm: str, launches: int = 12, **defines):
    """Build the schedule's kernels with -DIOSIM_STAMPS (and `defines`), launch them
    `launches` times on one input set and return the last launch's stamps, one row of
    STAMP_SLOTS int64 per CTA (slot 7: the SM id; the others %globaltimer ns, raw)."""
    import cupy as cp
    import numpy as np
    from iosim.algorithms import build_schedule
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import device_inputs
    ln = launcher(build_schedule(problem, "h200", algorithm),
                  stamps=lambda k: cp.zeros(k.num_ctas * STAMP_SLOTS, dtype=np.uint64),
                  IOSIM_STAMPS=1, **defines)
    tensors = device_inputs(random_inputs(problem, np.random.default_rng(1)), problem.dtype)
    for _ in range(launches):
        ln.run(tensors)
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(ln.stamps).reshape(-1, STAMP_SLOTS).astype(np.int64)


def relative_rows(stamps):
    """The stamps with the time slots (0-6, 8-10) relative to the first CTA's entry."""
    rows = stamps.copy()
    t0 = stamps[:, 0].min()
    rows[:, :7] -= t0
    rows[:, 8:11] -= t0
    return rows

