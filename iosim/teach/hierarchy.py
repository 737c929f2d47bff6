"""Section 1: the memory hierarchy and the roofline ridge points, from the GpuSpec."""
from __future__ import annotations

from .fmt import capacity, heading, si, table

NAME = "hierarchy"
TITLE = "The memory hierarchy and the ridge point"


def facts(ctx) -> dict:
    g, p = ctx.gpu, ctx.problem
    # the roofline iosim puts this configuration on (fa2's; the ridge depends on the GPU only)
    roof = ctx.analysis("fa2").roofline
    levels = [
        # name, capacity (bytes, whole GPU), bandwidth (bytes/s), where it is
        ("registers", g.registers_per_sm * 4 * g.sm_count, None, "per SM, private to threads"),
        ("shared memory (SRAM)", g.shared_memory_per_sm_bytes * g.sm_count,
         g.shared_memory_bandwidth_bytes_per_s, "per SM, shared by a CTA's threads"),
        ("L2 cache", g.l2_capacity_bytes, g.l2_bandwidth_bytes_per_s, "shared by all SMs"),
        ("DRAM (HBM)", g.dram_capacity_bytes, g.dram_bandwidth_bytes_per_s, "off chip"),
    ]
    return {
        "gpu": g.name, "dtype": p.dtype, "sm_count": g.sm_count,
        "levels": levels,
        "registers_per_sm_bytes": g.registers_per_sm * 4,
        "smem_per_sm_bytes": g.shared_memory_per_sm_bytes,
        "sram_elements": ctx.sram_elements_per_sm,
        "tensor_flops_per_s": roof.tensor_flops_per_s,
        "exp_per_s": roof.exp_per_s,
        "ridge_dram": roof.ridge_dram_flop_per_byte,
        "ridge_l2": roof.ridge_l2_flop_per_byte,
        "ridge_smem": roof.tensor_flops_per_s / g.shared_memory_bandwidth_bytes_per_s,
        "flops_per_exp": roof.tensor_flops_per_s / roof.exp_per_s,
        "dram_over_l2_capacity": g.dram_capacity_bytes / g.l2_capacity_bytes,
    }


def text(f: dict) -> str:
    rows = [(n, capacity(c), si(b, "B/s") if b else "(operands of every instruction)", w)
            for n, c, b, w in f["levels"]]
    return "\n".join([
        heading(1, TITLE), "",
        f"{f['gpu']}, {f['sm_count']} SMs. From fastest and smallest to slowest and largest:", "",
        table(["level", "capacity (whole GPU)", "bandwidth", "where"], rows, "lrrl"), "",
        f"Each SM has {capacity(f['registers_per_sm_bytes'])} of registers and "
        f"{capacity(f['smem_per_sm_bytes'])} of shared memory: in {f['dtype']} that is "
        f"M = {f['sram_elements']:,} elements, the 'SRAM size' M of the IO-complexity results.",
        "",
        f"The tensor cores do {si(f['tensor_flops_per_s'], 'FLOP/s')} ({f['dtype']}, dense).",
        "A kernel is compute-bound only if it does at least (peak FLOP/s) / (bandwidth) FLOPs",
        "per byte it moves: the ridge point of the roofline.", "",
        table(["memory level", "ridge point (FLOP/B)"],
              [("DRAM", f"{f['ridge_dram']:.1f}"), ("L2", f"{f['ridge_l2']:.1f}"),
               ("shared memory", f"{f['ridge_smem']:.1f}")]), "",
        f"Below {f['ridge_dram']:.0f} FLOP per DRAM byte, DRAM bandwidth, not the tensor cores,",
        "sets the time. The exponential units are a third roof: "
        f"{si(f['exp_per_s'], 'exp/s')}, i.e. {f['flops_per_exp']:.0f} matmul FLOPs per exp.",
    ])
