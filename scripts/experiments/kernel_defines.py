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
