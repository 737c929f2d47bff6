"""The MMA instruction class and shared-memory operand reads (compute.MmaCost)."""
from dataclasses import replace

import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.schedule import Mma, Pipeline
from iosim.sim import simulate
from iosim.machine import MmaCost

H200 = load_gpu("h200-calibrated")


def test_calibrated_mma_sync_fraction_is_the_measured_per_clock_ratio():
    # measurements/h200/clocks_h200.json: mma.sync 624.0 TFLOP/s at 1980 MHz, cuBLAS 774.2
    # TFLOP/s at 1447.5 MHz (nvidia-smi medians): the ratio per clock
    assert H200.tensor_mma_sync_fraction == pytest.approx(
        (623.993678782579e12 / 1980e6) / (774.246411265822e12 / 1447.5e6), abs=1e-4)
    assert load_gpu("a100").tensor_mma_sync_fraction == 1.0


def test_mma_sync_operands_are_read_by_the_warps_sharing_rows_and_columns():
    # 4 warps over a 128-row product: 4 warps along rows (WM = 4, WN = 1)
    cost = MmaCost(H200, "fp16", Pipeline(mma_instruction="mma_sync"), 128, 2)
    assert cost.operand_bytes(Mma("S=QK^T", 128, 128, 64)) == (128 * 64 + 4 * 64 * 128) * 2
    assert cost.operand_bytes(Mma("O+=PV", 128, 64, 128)) == 4 * 128 * 64 * 2   # P in registers
    # 8 warps over a 64-row product: WM = 4 along rows, WN = 2 along columns
    cost8 = MmaCost(H200, "fp16", Pipeline(mma_instruction="mma_sync"), 256, 2)
    assert cost8.operand_bytes(Mma("S=QK^T", 64, 128, 64)) == (2 * 64 * 64 + 4 * 64 * 128) * 2


def _mma_sync_times(gpu):
    op = Mma("S=QK^T", 128, 128, 128)
    cost = MmaCost(gpu, "fp16", Pipeline(mma_instruction="mma_sync"), 128, 2)
    wgmma_rate = gpu.tensor_flops_per_s_per_sm("fp16")
    # 4 warps, 1 CTA per SM: 1 warp per sub-partition (the by-warps figure where the config has it)
    frac = gpu.tensor_mma_sync_fraction_one_warp or gpu.tensor_mma_sync_fraction
    tensor_s = op.flops / (wgmma_rate * frac)
    smem_s = (128 * 128 + 4 * 128 * 128) * 2 / (
        gpu.shared_memory_bandwidth_bytes_per_clock_per_sm * gpu.clock_hz)
    return cost.work(op) / wgmma_rate, tensor_s, smem_s


def test_mma_sync_time_is_tensor_time_at_its_rate_plus_operand_time_where_not_overlapped():
    # a config saying the operand reads do not overlap (every shipped one says they do since
    # H200/H100 measured, A100 taken as the H200)
    serial = H200.model_copy(update={"mma_sync_operands_overlap": False})
    got, tensor_s, smem_s = _mma_sync_times(serial)
    assert got == pytest.approx(tensor_s + smem_s)


def test_mma_sync_time_is_the_slower_of_tensor_and_operand_time_on_hopper():
    # H200: unrolled ldmatrix + mma.sync run at the slower ceiling (mma_ldsm_h200.json)
    assert H200.mma_sync_operands_overlap
    got, tensor_s, smem_s = _mma_sync_times(H200)
    assert got == pytest.approx(max(tensor_s, smem_s))


def test_wgmma_overlaps_its_operand_reads_with_the_tensor_cores():
    op = Mma("S=QK^T", 128, 128, 128)
    cost = MmaCost(H200, "fp16", Pipeline(), 384, 2)
    assert cost.work(op) == op.flops       # operand time (96 KB at 128 B/clk) < tensor time


def test_a_compute_bound_fa2_kernel_slows_by_the_mma_sync_and_operand_cost():
    problem = AttentionProblem(seq_q=4096, heads_q=16)
    schedule = build_schedule(problem, H200, "fa2")
    assert schedule.kernels[0].pipeline.mma_instruction == "mma_sync"
    as_wgmma = replace(schedule, kernels=tuple(
        replace(k, pipeline=replace(k.pipeline, mma_instruction="wgmma"))
        for k in schedule.kernels))
    t_sync = simulate(schedule, H200).time_s
    t_wgmma = simulate(as_wgmma, H200).time_s
    assert t_sync > 1.3 * t_wgmma


def test_backward_products_follow_the_backward_kernels_2d_warp_grid():
    # fa2_bwd.cu / flash-attention at d 128: 8 warps, 64 x 128 S tile as 2 x 4 warps (each warp
    # >= 32 rows): Q (64x128) read by the 4 warp columns, K (128x128) by the 2 warp rows
    cost8 = MmaCost(H200, "fp16", Pipeline(mma_instruction="mma_sync"), 256, 2)
    assert cost8.operand_bytes(Mma("S=QK^T", 64, 128, 128, 32)) == (4 * 64 * 128 + 2 * 128 * 128) * 2
    # dK += dS^T Q, 128 x 128 over k = 64: 4 x 2 warps
    assert cost8.operand_bytes(Mma("dK+=dS^T Q", 128, 128, 64, 32)) == (2 * 128 * 64 + 4 * 64 * 128) * 2


def test_the_fa2_backward_schedule_gives_its_products_the_kernels_warp_rows():
    s = build_schedule(AttentionProblem(seq_q=1024, heads_q=2, direction="bwd"), H200, "fa2")
    (bwd,) = [k for k in s.kernels if k.name == "fa2_bwd"]
    body = bwd.program(0)[-4].body          # the Q-block loop
    assert {op.warp_rows for op in body if op.kind == "mma"} == {32}
