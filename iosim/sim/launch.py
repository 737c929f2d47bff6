"""What a kernel's launch gives its CTAs on a GpuSpec, for both engines: how many fit on an
SM, the per-SM unit rates of its MMA instruction class, the cost of its Mma ops on the tensor
server, and the unit busy time of a program (the costs themselves are machine.py's)."""
from __future__ import annotations

from ..errors import IosimError
from ..machine import MmaCost, SmRates, occupancy
from ..schedule import program_totals


def ctas_per_sm(gpu, kernel) -> int:
    occ = occupancy(gpu, kernel.launch)
    if occ <= 0:
        raise IosimError(f"kernel {kernel.name} does not fit on an SM of {gpu.short_name}")
    return occ


def kernel_rates(gpu, dtype: str, kernel) -> SmRates:
    """Per-SM rates with the tensor rate of the kernel's MMA instruction class."""
    return SmRates.of(gpu, dtype, kernel.pipeline.mma_instruction)


def kernel_mma_cost(gpu, problem, kernel) -> MmaCost:
    return MmaCost(gpu, problem.dtype, kernel.pipeline, kernel.launch.threads_per_cta,
                   problem.elem_bytes, max(1, occupancy(gpu, kernel.launch)),
                   kernel.launch.num_ctas)


def busy_of_program(program, rates) -> tuple:
    """(tensor, exp, ALU) seconds of a program's work at the SM's full rates."""
    t = program_totals(program)
    return (t.mma_flops / rates.tensor_flops_per_s, t.exp / rates.exp_per_s,
            t.alu / rates.alu_ops_per_s)
