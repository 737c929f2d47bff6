"""Exact mode: every CTA of every kernel is a SimPy process that runs every tile op of its
program (pipeline.py) on its SM's units, through the tile-level LRU L2 and the DRAM and
L2↔SM bandwidth servers (memory.py). Kernels run back to back, `launch_overhead_s` apart.
"""
from __future__ import annotations

import simpy

from ..machine import (SmRates, copy_issue_s_per_byte, store_issue_s_per_byte, cta_turnover_s,
                       tensor_server_busy_s, fragment_store_issue_s_per_byte, tma_epilogue_cost)
from .compute import SmUnits
from .launch import busy_of_program, ctas_per_sm, kernel_mma_cost, kernel_rates
from .dispatch import SlotPicker, launch_ready
from .l1 import L1Front, SmL1, exact_l1
from .memory import MemoryCounters, exact_memory, l2_policy
from .pipeline import CtaContext, run_program
from .summary import kernel_result, schedule_result
from .timeline import Timeline


def _counters_dict(c: MemoryCounters) -> dict:
    return {name: getattr(c, name) for name in MemoryCounters.__slots__}


def simulate_exact(schedule, gpu, l2_effective_fraction: float, l2_protocol: str = "warm"):
    dtype = schedule.problem.dtype
    rates = SmRates.of(gpu, dtype)           # the servers run at the wgmma rate
    env = simpy.Environment()
    mem = exact_memory(gpu, gpu.l2_capacity_bytes * l2_effective_fraction)
    sms = [SmUnits(rates) for _ in range(gpu.sm_count)]
    frag_s = fragment_store_issue_s_per_byte(gpu)
    epilogue = tma_epilogue_cost(gpu)
    timeline = Timeline()
    timeline.kernel_names = [k.name for k in schedule.kernels]
    spans = []

    def run_kernel(ki: int, kernel):
        occ = ctas_per_sm(gpu, kernel)
        n = kernel.num_ctas
        k_rates = kernel_rates(gpu, dtype, kernel)
        mma = kernel_mma_cost(gpu, schedule.problem, kernel)
        copy_s = copy_issue_s_per_byte(gpu, kernel.pipeline)
        store_s = store_issue_s_per_byte(gpu, kernel.pipeline)
        picker = SlotPicker(gpu.sm_count, occ)
        state = {"next": 0, "left": n}
        done = env.event()
        # the SMs' L1s for the kernel's L1 loads (sim/l1.py; invalidated at each launch)
        l1 = exact_l1(gpu, kernel, occ)
        l1_sms = [SmL1(l1[1]) for _ in range(gpu.sm_count)] if l1 else None
        l1_counts = {"l1_hit_bytes": 0, "l1_load_bytes": 0}

        def cta(c: int, sm: int):
            front = (mem if l1_sms is None else
                     L1Front(mem, l1_sms[sm], l1[0], gpu.l1_latency_s or 0.0, l1_counts))
            ctx = CtaContext(env, sms[sm], front, kernel.pipeline, mma, copy_s, store_s, frag_s,
                             cycle_s=1.0 / gpu.clock_hz, epilogue=epilogue)
            start_s = env.now
            program = kernel.program(c)
            yield from run_program(ctx, program, {})
            turnover_s = cta_turnover_s(gpu, program)
            if turnover_s:           # retirement + the next launch hold the slot
                yield env.timeout(turnover_s)
            timeline.add(ki, c, sm, start_s, env.now, ctx.stall, busy_of_program(program, k_rates))
            picker.release(sm)
            state["left"] -= 1
            launch_more()
            if state["left"] == 0:
                done.succeed()

        def launch_more():
            launch_ready(env, picker, state, n, cta)

        if ki and l2_protocol == "ncu":       # profiler: write back + invalidate, unmeasured
            mem.invalidate()
        mem.kernel_counters = MemoryCounters()
        mem.begin_kernel(env.now)
        start_s = env.now
        launch_more()
        if n:
            yield done
        drained_s = max(u.epilogue.free_s for u in sms)   # the last tiles' epilogues
        if drained_s > env.now:
            yield env.timeout(drained_s - env.now)
        spans.append((start_s, env.now, occ, {**_counters_dict(mem.kernel_counters), **l1_counts}))

    def main():
        for ki, kernel in enumerate(schedule.kernels):
            if ki:
                yield env.timeout(gpu.launch_overhead_s)
            yield from run_kernel(ki, kernel)

    env.process(main())
    env.run()
    return _exact_result(schedule, gpu, rates, mem, spans, timeline, l2_effective_fraction,
                         l2_protocol)


def _exact_result(schedule, gpu, rates, mem, spans: list, timeline, l2_effective_fraction: float,
                  l2_protocol: str):
    """The exact run's SimResult: per kernel its span and counters (the warm protocol's final
    write-back counted with the last kernel), the totals and the timeline."""
    dtype = schedule.problem.dtype
    if l2_protocol == "warm":
        before_flush = mem.counters.dram_write_bytes
        mem.flush()
        if spans:   # the flush belongs to no kernel's time; count its bytes with the last kernel
            spans[-1][3]["dram_write_bytes"] += mem.counters.dram_write_bytes - before_flush
    kernels = [kernel_result(k, gpu, kernel_rates(gpu, dtype, k), s, e, occ, m,
                             tensor_busy_s=tensor_server_busy_s(
                                 k, kernel_mma_cost(gpu, schedule.problem, k),
                                 rates.tensor_flops_per_s))
               for k, (s, e, occ, m) in zip(schedule.kernels, spans)]
    total = _counters_dict(mem.counters)
    model = {"l2_effective_fraction": l2_effective_fraction,
             "l2_effective_capacity_bytes": gpu.l2_capacity_bytes * l2_effective_fraction,
             "l2_policy": l2_policy(gpu),
             "l2_protocol": l2_protocol}
    return schedule_result("exact", schedule, gpu, kernels, total,
                           timeline.sorted_by_kernel_cta(), model)
