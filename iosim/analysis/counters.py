"""Exact traffic and work of a schedule, level by level.

- l2_to_smem: bytes CTAs load from global memory (through L2) into shared memory/registers:
  the tile-level traffic the FlashAttention papers call "HBM accesses".
- smem_to_l2: bytes CTAs store to global memory.
- dram (estimate): each tensor's bytes once per direction it moves (compulsory: perfect L2
  reuse within the schedule), capped by its tile traffic. A bound from below on a real GPU,
  labelled as an estimate; the simulator's L2 model replaces it.
- smem reads (estimate): MMA operands read from shared memory, by the layout the simulator
  charges (iosim.machine.mma_operand_bytes: ldmatrix per warp for mma.sync, once per
  consumer warpgroup for wgmma).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..schedule import Loop, Mma
from ..machine import mma_operand_bytes, operand_readers
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


def _smem_operand_bytes(program: tuple, sync: bool, readers: int, eb: int) -> int:
    total = 0
    for item in program:
        if isinstance(item, Loop):
            total += item.count * _smem_operand_bytes(item.body, sync, readers, eb)
        elif isinstance(item, Mma):
            total += mma_operand_bytes(item, sync, readers, eb)
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
        sync, readers = operand_readers(k.pipeline, k.launch.threads_per_cta)
        for rep, n in k.classes:
            smem_reads += n * _smem_operand_bytes(k.program(rep), sync, readers,
                                                  problem.elem_bytes)
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
