"""Exact traffic and work of a schedule, level by level.

- l2_to_smem: bytes CTAs load from global memory (through L2) into shared memory/registers:
  the tile-level traffic the FlashAttention papers call "HBM accesses".
- smem_to_l2: bytes CTAs store to global memory.
- dram (estimate): each tensor's bytes once per direction it moves (compulsory: perfect L2
  reuse within the schedule), capped by its tile traffic. A bound from below on a real GPU,
  labelled as an estimate; the simulator's L2 model replaces it.
- smem reads (estimate): MMA operands read from shared memory, the B operand once per warp.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..schedule import Mma, expand, Loop
from .tensors import tensor_bytes

DRAM_ESTIMATE_LABEL = "compulsory estimate (each tensor once; perfect L2 reuse)"


@dataclass
class Counters:
    l2_to_smem_bytes: int
    smem_to_l2_bytes: int
    l2_to_smem_bytes_by_tensor: dict
    smem_to_l2_bytes_by_tensor: dict
    dram_read_bytes: int
    dram_write_bytes: int
    dram_model: str
    smem_read_bytes_estimate: int
    mma_flops: int
    useful_flops: int
    exp_count: int
    alu_ops: int
    kernels: int
    ctas: int
    loads: int
    stores: int

    @property
    def dram_bytes(self) -> int:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def l2_bytes(self) -> int:
        return self.l2_to_smem_bytes + self.smem_to_l2_bytes

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["dram_bytes"] = self.dram_bytes
        d["l2_bytes"] = self.l2_bytes
        return d


def _smem_operand_bytes(program: tuple, warps: int, eb: int) -> int:
    total = 0
    for item in program:
        if isinstance(item, Loop):
            total += item.count * _smem_operand_bytes(item.body, warps, eb)
        elif isinstance(item, Mma):
            total += (item.m * item.k + warps * item.k * item.n) * eb
    return total


def count(schedule) -> Counters:
    problem = schedule.problem
    t = schedule.totals()
    dram_read = dram_write = 0
    for name, traffic in sorted(t.load_bytes.items()):
        size = tensor_bytes(problem, name)
        dram_read += traffic if size is None else min(size, traffic)
    for name, traffic in sorted(t.store_bytes.items()):
        size = tensor_bytes(problem, name)
        dram_write += traffic if size is None else min(size, traffic)
    smem_reads = 0
    for k in schedule.kernels:
        warps = max(1, k.launch.threads_per_cta // 32)
        for rep, n in k.classes:
            smem_reads += n * _smem_operand_bytes(k.program(rep), warps, problem.elem_bytes)
    return Counters(
        l2_to_smem_bytes=t.bytes_loaded,
        smem_to_l2_bytes=t.bytes_stored,
        l2_to_smem_bytes_by_tensor=dict(sorted(t.load_bytes.items())),
        smem_to_l2_bytes_by_tensor=dict(sorted(t.store_bytes.items())),
        dram_read_bytes=dram_read,
        dram_write_bytes=dram_write,
        dram_model=DRAM_ESTIMATE_LABEL,
        smem_read_bytes_estimate=smem_reads,
        mma_flops=t.mma_flops,
        useful_flops=problem.useful_flops(),
        exp_count=t.exp,
        alu_ops=t.alu,
        kernels=len(schedule.kernels),
        ctas=sum(k.num_ctas for k in schedule.kernels),
        loads=t.loads,
        stores=t.stores,
    )
