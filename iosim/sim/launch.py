"""What a kernel's launch gives its CTAs on a GpuSpec, for both engines: how many fit on an
SM, the per-SM unit rates of its MMA instruction class, the cost of its Mma ops on the tensor
server, and the unit busy time of a program (the costs themselves are machine.py's)."""
from __future__ import annotations

from ..errors import IosimError
from ..machine import MmaCost, SmRates, occupancy, resident_ctas_per_sm
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
    """The kernel's MMA cost at the CTAs per SM it reaches (machine.resident_ctas_per_sm)."""
    la = kernel.launch
    return MmaCost(gpu, problem.dtype, kernel.pipeline, la.threads_per_cta,
                   problem.elem_bytes, resident_ctas_per_sm(gpu, la), la.num_ctas)


def busy_of_program(program, rates) -> tuple:
    """(tensor, exp, ALU) seconds of a program's work at the SM's full rates."""
    t = program_totals(program)
    return (t.mma_flops / rates.tensor_flops_per_s, t.exp / rates.exp_per_s,
            t.alu_issue / rates.alu_ops_per_s)
