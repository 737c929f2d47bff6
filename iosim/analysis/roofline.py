"""Hierarchical roofline: the time each unit or memory level needs at its peak rate, the
largest of which is the roofline time, and the arithmetic intensities against DRAM and L2."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Roofline:
    tensor_time_s: float
    exp_time_s: float
    alu_time_s: float
    dram_time_s: float
    l2_time_s: float
    roofline_time_s: float
    bound: str                              # which roof binds
    intensity_dram_flop_per_byte: float | None
    intensity_l2_flop_per_byte: float | None
    ridge_dram_flop_per_byte: float         # tensor rate / DRAM bandwidth
    ridge_l2_flop_per_byte: float           # tensor rate / L2 bandwidth
    tensor_flops_per_s: float
    exp_per_s: float

    def to_dict(self) -> dict:
        return asdict(self)


def roofline(gpu, dtype: str, mma_flops: int, exp_count: int, alu_ops: int,
             dram_bytes: int, l2_bytes: int) -> Roofline:
    rate = gpu.tensor_peak_rate(dtype)      # the datasheet peak: a roofline is drawn at peaks
    times = {
        "tensor cores": mma_flops / rate,
        "exp units": exp_count / gpu.exp_per_s,
        "ALUs": alu_ops / gpu.alu_ops_per_s,
        "DRAM bandwidth": dram_bytes / gpu.dram_bandwidth_bytes_per_s,
        "L2 bandwidth": l2_bytes / gpu.l2_bandwidth_bytes_per_s,
    }
    bound = max(times, key=lambda k: (times[k], k))
    return Roofline(
        tensor_time_s=times["tensor cores"], exp_time_s=times["exp units"],
        alu_time_s=times["ALUs"], dram_time_s=times["DRAM bandwidth"],
        l2_time_s=times["L2 bandwidth"], roofline_time_s=times[bound], bound=bound,
        intensity_dram_flop_per_byte=mma_flops / dram_bytes if dram_bytes else None,
        intensity_l2_flop_per_byte=mma_flops / l2_bytes if l2_bytes else None,
        ridge_dram_flop_per_byte=rate / gpu.dram_bandwidth_bytes_per_s,
        ridge_l2_flop_per_byte=rate / gpu.l2_bandwidth_bytes_per_s,
        tensor_flops_per_s=rate, exp_per_s=gpu.exp_per_s)
