"""Turn per-kernel spans, byte counts and the timeline into a SimResult (both modes)."""
from __future__ import annotations

from ..machine import dram_access_penalty_s, dram_busy_s
from .result import RESOURCES, KernelResult, SimResult, bound_of


def unit_busy_s(totals, rates) -> dict:
    """Seconds each per-SM unit type is busy, summed over SMs (exact: work ÷ per-SM rate)."""
    return {"tensor": totals.mma_flops / rates.tensor_flops_per_s,
            "exp": totals.exp / rates.exp_per_s,
            "alu": totals.alu_issue / rates.alu_ops_per_s}


def kernel_result(kernel, gpu, rates, start_s, end_s, occ, mem: dict,
                  totals=None, tensor_busy_s: float | None = None) -> KernelResult:
    totals = totals if totals is not None else kernel.totals()
    busy = unit_busy_s(totals, rates)
    if tensor_busy_s is not None:      # the tensor server's time, operand reads included
        busy["tensor"] = tensor_busy_s
    busy["dram"] = (dram_busy_s(gpu, mem["dram_read_bytes"], mem["dram_write_bytes"])
                    + dram_access_penalty_s(gpu, totals, mem["dram_read_bytes"],
                                            mem["dram_write_bytes"]))
    # the loads that hit in the SMs' L1 (sim/l1.py) cross no L2→SM bytes
    l1_hit = mem.get("l1_hit_bytes", 0)
    l2_to_sm = totals.bytes_loaded - l1_hit
    busy["l2"] = (l2_to_sm + totals.bytes_stored) / gpu.l2_bandwidth_bytes_per_s
    span = end_s - start_s
    util = {r: (busy[r] / (span * (1 if r in ("dram", "l2") else gpu.sm_count)) if span > 0 else 0.0)
            for r in RESOURCES}
    return KernelResult(name=kernel.name, start_s=start_s, end_s=end_s,
                        num_ctas=kernel.num_ctas, ctas_per_sm=occ,
                        waves=kernel.num_ctas / (occ * gpu.sm_count),
                        l2_to_sm_bytes=l2_to_sm, sm_to_l2_bytes=totals.bytes_stored,
                        l1_hit_bytes=l1_hit,
                        dram_read_bytes=mem["dram_read_bytes"],
                        dram_write_bytes=mem["dram_write_bytes"],
                        busy_s={r: busy[r] for r in RESOURCES}, utilization=util,
                        bound_by=bound_of(util))


def schedule_result(mode, schedule, gpu, kernels: list, mem_total: dict, timeline,
                    model: dict) -> SimResult:
    time_s = kernels[-1].end_s if kernels else 0.0
    busy = {r: 0.0 for r in RESOURCES}
    for k in kernels:
        for r in RESOURCES:
            busy[r] += k.busy_s[r]
    util = {r: (busy[r] / (time_s * (1 if r in ("dram", "l2") else gpu.sm_count))
                if time_s > 0 else 0.0) for r in RESOURCES}
    stall = {"memory": timeline.column_sum("memory_stall_s"),
             "tensor": timeline.column_sum("tensor_stall_s"),
             "exp": timeline.column_sum("exp_stall_s"),
             "alu": timeline.column_sum("alu_stall_s")}
    cta_time = timeline.column_sum("end_s") - timeline.column_sum("start_s")
    return SimResult(mode=mode, algorithm=schedule.algorithm, gpu=gpu.short_name, time_s=time_s,
                     bound_by=bound_of(util), kernels=kernels, busy_s=busy, utilization=util,
                     l2_to_sm_bytes=sum(k.l2_to_sm_bytes for k in kernels),
                     sm_to_l2_bytes=sum(k.sm_to_l2_bytes for k in kernels),
                     dram_read_bytes=mem_total["dram_read_bytes"],
                     dram_write_bytes=mem_total["dram_write_bytes"],
                     dram_write_flush_bytes=mem_total["dram_write_flush_bytes"],
                     l2_load_hit_bytes=mem_total["load_hit_bytes"],
                     l2_load_miss_bytes=mem_total["load_miss_bytes"],
                     stall_s=stall, cta_time_s=cta_time, timeline=timeline, model=model)


def with_bytes_of(timed: SimResult, counted: SimResult, gpu, schedule) -> SimResult:
    """`timed` (time, timeline, stalls) with the L2/DRAM byte counts of `counted`, a run of
    the same schedule under another L2 protocol (exact mode's time_protocol)."""
    for k, c, kernel in zip(timed.kernels, counted.kernels, schedule.kernels):
        k.dram_read_bytes, k.dram_write_bytes = c.dram_read_bytes, c.dram_write_bytes
        k.busy_s["dram"] = (dram_busy_s(gpu, k.dram_read_bytes, k.dram_write_bytes)
                            + dram_access_penalty_s(gpu, kernel.totals(), k.dram_read_bytes,
                                                    k.dram_write_bytes))
        span = k.time_s
        k.utilization["dram"] = k.busy_s["dram"] / span if span > 0 else 0.0
        k.bound_by = bound_of(k.utilization)
    for name in ("dram_read_bytes", "dram_write_bytes", "dram_write_flush_bytes",
                 "l2_load_hit_bytes", "l2_load_miss_bytes"):
        setattr(timed, name, getattr(counted, name))
    timed.busy_s["dram"] = sum(k.busy_s["dram"] for k in timed.kernels)
    timed.utilization["dram"] = timed.busy_s["dram"] / timed.time_s if timed.time_s > 0 else 0.0
    timed.bound_by = bound_of(timed.utilization)
    timed.model = dict(counted.model, time_protocol=timed.model.get("l2_protocol"))
    return timed
