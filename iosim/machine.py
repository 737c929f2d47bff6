"""What work costs on a GpuSpec: per-SM unit rates, what an Mma costs on the tensor server
(instruction class and shared-memory operand reads), how many CTAs an SM holds, and where a
linear CTA index sits in its grid. The simulator (both engines) and the analysis read these;
this module imports neither."""
from __future__ import annotations

from dataclasses import dataclass


def occupancy(gpu, launch) -> int:
    """CTAs one SM holds at once, limited by shared memory, registers, threads and slots."""
    limits = [gpu.ctas_per_sm_max, gpu.threads_per_sm_max // launch.threads_per_cta]
    smem = launch.smem_bytes_per_cta + launch.static_smem_bytes
    if smem:
        # CUDA reserves 1 KB of shared memory per resident block on CC 8.x/9.x (Programming Guide)
        limits.append(gpu.shared_memory_per_sm_bytes // (smem + 1024))
    regs = launch.registers_per_thread * launch.threads_per_cta
    if regs:
        limits.append(gpu.registers_per_sm // regs)
    return max(0, min(limits))


REDUCE_LAYOUTS = ("fragment", "coalesced")


def reduce_l2_costs(gpu) -> dict:
    """reduce_l2_cost of each Store.reduce_layout: {"fragment": ..., "coalesced": ...}."""
    return {layout: reduce_l2_cost(gpu, layout) for layout in REDUCE_LAYOUTS}


def reduce_l2_cost(gpu, layout: str = "fragment") -> float:
    """L2↔SM bytes of port time one byte of a `reduce` store (fp32 atomic accumulate) takes:
    the L2 bandwidth over the measured atomic-reduction rate (GpuSpec.l2_reduce_bandwidth_
    bytes_per_s; 1 where the GPU has none). Measured on the H200 (measurements/h200/
    atomics_h200.json): red.global.add.f32 in the mma accumulator-fragment layout of FA-2's
    dQaccum runs at ~1 TB/s from all SMs against 7.1 TB/s of L2 reads; in the coalesced layout
    (a warp adds 128 contiguous bytes: flash-attention's dQaccum) at 3.3 TB/s
    (GpuSpec.l2_reduce_coalesced_bandwidth_bytes_per_s; the fragment rate where a GPU has none)."""
    rate = gpu.l2_reduce_bandwidth_bytes_per_s
    if layout == "coalesced":
        rate = getattr(gpu, "l2_reduce_coalesced_bandwidth_bytes_per_s", None) or rate
    return gpu.l2_bandwidth_bytes_per_s / rate if rate else 1.0


def dram_read_rate(gpu) -> float:
    """Bytes per second the DRAM servers serve: a read-only stream's rate
    (GpuSpec.dram_read_bandwidth_bytes_per_s), the copy's where a GPU has none."""
    return getattr(gpu, "dram_read_bandwidth_bytes_per_s", None) or gpu.dram_bandwidth_bytes_per_s


def dram_write_cost(gpu) -> float:
    """Read-rate bytes of DRAM time one written byte takes. HBM turns its bus around between
    reads and writes, so a copy (as many bytes each way) streams slower than a read-only
    stream: H200, measured in one device call, read-only 4.53 / 4.58 TB/s, cupy copy
    4.21 / 4.14 TB/s (measurements/h200/dram_stream_h200*.json). A stream of R bytes read and
    W written takes (R + W·c) / read_rate, with c set so that a copy (R = W) takes exactly
    2R / copy_rate: c = 2·read_rate/copy_rate − 1 (H200: 1.18). The other measured mixes are
    within 8% of this two-anchor line (mixing in one stream costs a little more; the
    write-only row, 4.2 TB/s, runs faster than it says: no kernel here is write-only).
    1 where a GPU has no read-only figure (every byte at the copy's rate, as before)."""
    read = getattr(gpu, "dram_read_bandwidth_bytes_per_s", None)
    if not read:
        return 1.0
    return max(1.0, 2.0 * read / gpu.dram_bandwidth_bytes_per_s - 1.0)


# The stream mixes of iosim.measure.dram_stream (read share, GpuSpec field): read-only,
# reads:writes 3:1, 1:1, 1:3, write-only
DRAM_MIX_FIELDS = ((1.0, "dram_read_bandwidth_bytes_per_s"),
                   (0.75, "dram_mixed_3r1w_bandwidth_bytes_per_s"),
                   (0.5, "dram_mixed_1r1w_bandwidth_bytes_per_s"),
                   (0.25, "dram_mixed_1r3w_bandwidth_bytes_per_s"),
                   (0.0, "dram_write_bandwidth_bytes_per_s"))


def dram_mix_points(gpu):
    """((read share, bytes/s), ...) of the measured stream mixes, ascending by read share;
    None where the GPU config lacks any of them."""
    pts = [(share, getattr(gpu, name, None)) for share, name in DRAM_MIX_FIELDS]
    if any(not rate for _, rate in pts):
        return None
    return tuple(sorted(pts))


def dram_byte_cost(gpu, read_share: float) -> float:
    """Read-rate bytes of DRAM time one byte (read or written) takes in a stream whose bytes
    are `read_share` reads. Where the config has the measured mixes (dram_mix_points): their
    time per byte, interpolated linearly in the read share between the measured ones. HBM
    turns its bus around between reads and writes, and a stream that mixes the directions
    pays for it beyond each direction's own rate: H200, one kernel moving 4 GiB at each mix
    (measurements/h200/dram_stream_h200*.json, two runs): read-only 4.53 / 4.58 TB/s, 3:1
    4.14 / 4.20, 1:1 3.86 / 3.84, 1:3 3.69 / 3.70, write-only 4.22 / 4.18; the 1:1 mix runs
    12% slower than R/read + W/write. Elsewhere: the two-anchor line of dram_write_cost
    (a read byte 1, a written byte dram_write_cost)."""
    s = min(1.0, max(0.0, read_share))
    pts = dram_mix_points(gpu)
    if pts is None:
        return s + (1.0 - s) * dram_write_cost(gpu)
    read = dram_read_rate(gpu)
    for (s0, r0), (s1, r1) in zip(pts, pts[1:]):
        if s <= s1:
            f = (s - s0) / (s1 - s0)
            return read * ((1.0 - f) / r0 + f / r1)
    return read / pts[-1][1]


def dram_write_cost_at(gpu, read_share: float) -> float:
    """Read-rate bytes of DRAM time one written byte takes in a stream of `read_share` reads,
    a read byte costing 1: the written bytes carry the mix's cost, (R + W·w) = (R + W)·
    dram_byte_cost, so w = (dram_byte_cost(s) − s) / (1 − s); a stream with no writes costs
    a read-only stream's time whatever w. H200: 1.37 from read share 0.5 up, 1.31 at 1:3, 1.09
    write-only (the two-anchor line's 1.18 throughout). dram_write_cost where the config has
    no measured mixes."""
    if dram_mix_points(gpu) is None:
        return dram_write_cost(gpu)
    s = min(max(0.0, read_share), 1.0 - 1e-6)   # w is constant above the last mix below 1
    return (dram_byte_cost(gpu, s) - s) / (1.0 - s)


def dram_busy_s(gpu, read_bytes: float, write_bytes: float) -> float:
    """Seconds of DRAM time R bytes read and W written take: (R + W) bytes at the cost of
    their mix (dram_byte_cost); (R + W·dram_write_cost) / read rate where the config has no
    measured mixes."""
    total = read_bytes + write_bytes
    if not total:
        return 0.0
    return total * dram_byte_cost(gpu, read_bytes / total) / dram_read_rate(gpu)


def _interpolate(points, x: float) -> float:
    """Piecewise-linear y(x) through (x, y) points rising in x, held flat past the ends."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def loaded_trip_latency_s(gpu, utilization: float, read_share: float) -> float:
    """Seconds one dependent 2-KB warp trip to DRAM takes (Load.round_trips) while the DRAM is
    `utilization` busy (its busy time over the elapsed time, 0..1) with bytes `read_share`
    reads: the measured curves (GpuSpec.dram_trip_latency) at that utilization, read-only at
    share 1, 1:1 at 0.5 and below, linear in the share between; dram_latency_s where the
    config has none. H100, one device call (measurements/h100/dram_loaded_latency/,
    scripts/experiments/dram_loaded_latency.py): a warp's dependent 2-KB trips beside a
    background stream on the other SMs take 417 ns unloaded, 445 / 529 / 891 / 1197 ns at
    0.46 / 0.78 / 0.97 / 1.0 of the read-only stream's rate, 598 / 757 / 1001 / 1878 ns at
    0.48 / 0.76 / 0.87 / 1.0 of the 1:1 stream's (scripts/dram_trip_latency_curve.py)."""
    curve = getattr(gpu, "dram_trip_latency", None)
    if curve is None:
        return gpu.dram_latency_s
    u = min(1.0, max(0.0, utilization))
    read = _interpolate(curve.read_only, u)
    mixed = _interpolate(curve.read_write_1to1, u)
    w = min(1.0, max(0.0, (read_share - 0.5) / 0.5))
    return w * read + (1.0 - w) * mixed


def dram_access_penalty_s(gpu, totals, read_bytes: float, write_bytes: float) -> float:
    """Seconds of DRAM time beyond the bytes' own (dram_busy_s) that a kernel's awkward
    accesses take: its partial-sector writes (Totals.partial_sector_writes ×
    partial_sector_write_cost_bytes) and its misaligned row streams' extra time
    (line_misaligned_dram_factor − 1 on their DRAM bytes: the misaligned loads' share of the
    bytes read from DRAM, the misaligned stores' share of those written, each in the kernel's
    proportion of DRAM to L2 bytes), at the read rate. What the engines charge, as a busy time."""
    extra = totals.partial_sector_writes * partial_sector_write_cost_bytes(gpu)
    factor = line_misaligned_dram_factor(gpu)
    if factor > 1.0:
        loaded, stored = totals.bytes_loaded, totals.bytes_stored
        mis_load = sum(totals.misaligned_load_bytes.values())
        if loaded and mis_load:
            extra += (factor - 1.0) * mis_load * min(1.0, read_bytes / loaded)
        if stored and totals.misaligned_store_bytes:
            extra += ((factor - 1.0) * totals.misaligned_store_bytes
                      * min(1.0, write_bytes / stored) * dram_write_cost(gpu))
    return extra / dram_read_rate(gpu) if extra else 0.0


def reduce_sm_bytes_per_s(gpu, layout: str, active_sms: int = 0):
    """Bytes/s of fp32 atomic reduction one SM gets in a layout: its own limit
    (GpuSpec.l2_reduce_sm_bandwidth_bytes_per_s, one CTA on one SM alone) or, when the kernel
    occupies `active_sms` SMs (0: all), its share of the chip-wide rate, whichever is lower;
    None where the GPU has no per-SM figure. H200 (measurements/h200/atomic_scaling_h200.json):
    fragment layout 15.5 GB/s per CTA alone, 14.4 / 13.3 with 8 / 33 CTAs, 8.1 with 132 (the
    chip's 1.07 TB/s shared), 4.0 with 264; coalesced 37.6 up to 33 CTAs, 3.8 TB/s in all."""
    if layout == "coalesced":
        sm = getattr(gpu, "l2_reduce_coalesced_sm_bandwidth_bytes_per_s", None)
        chip = gpu.l2_reduce_coalesced_bandwidth_bytes_per_s or gpu.l2_reduce_bandwidth_bytes_per_s
    else:
        sm = getattr(gpu, "l2_reduce_sm_bandwidth_bytes_per_s", None)
        chip = gpu.l2_reduce_bandwidth_bytes_per_s
    if not sm:
        return None
    n = min(gpu.sm_count, active_sms) if active_sms > 0 else gpu.sm_count
    return min(sm, chip / n) if chip else sm


def reduce_hold_bytes_per_s(gpu, layout: str):
    """Bytes/s at which a reduce store holds its issuing SM (MmaCost.reduce_hold): the SM's
    own limit for its layout (GpuSpec.l2_reduce_sm_bandwidth_bytes_per_s, _coalesced_...),
    not a share of the chip-wide rate over the SMs the kernel occupies. The chip-wide rate is
    the L2's (machine.reduce_l2_cost: every reduced byte holds the L2 port for its cost, in
    exact mode's FIFO and the fast mode's fluid demand), shared only by the SMs adding at that
    moment. H200, the project's fa2_bwd.cu (measurements/h200/fa2_bwd_atomics_h200.json,
    scripts/fa2_bwd_atomics_h200.py): its dQaccum atomics cost 2.17-2.33 us per 32 KB Q-block
    step (the kernel with them against without them), 14-15 GB/s per SM, the same with 32,
    64, 128 CTAs in one wave and with 2048 CTAs in 15.5 waves; its clock64 trace has 33 of the
    132 running CTAs in their atomics phase at a time on average (p90 39), whose adds from 33
    SMs at the per-SM limit (0.51 TB/s) stay under the chip's 1.07 TB/s. None where the GPU
    has no per-SM figure."""
    if layout == "coalesced":
        return getattr(gpu, "l2_reduce_coalesced_sm_bandwidth_bytes_per_s", None)
    return getattr(gpu, "l2_reduce_sm_bandwidth_bytes_per_s", None)


def copy_issue_s_per_byte(gpu, pipeline) -> float:
    """Seconds the issuing threads of a CTA spend per byte of a load they copy themselves
    (Pipeline.copy_issue_cycles_per_byte at the GPU's clock); 0 where not modelled. With one
    warp per SM sub-partition (the decode kernel: 4 warps, one CTA per SM) nothing hides the
    copy loop's instruction latencies, so issuing a tile takes its threads as long as its
    copies' dependent address arithmetic and cp.async issue, and they compute only after it:
    a lone CTA streams at tile bytes / (issue + compute) per tile, whatever the memory could
    deliver (H200: fd_split 39 GB/s per CTA with its first copy loop, 60 GB/s with the
    current one, a bare cp.async ring of the same 2 x 64 KiB 151 GB/s;
    measurements/h200/decode/sm_stream_h200.json, docs/decode.md)."""
    cpb = getattr(pipeline, "copy_issue_cycles_per_byte", 0.0)
    return cpb / gpu.clock_hz if cpb else 0.0


def store_issue_s_per_byte(gpu, pipeline) -> float:
    """Seconds the computing threads spend per byte of a `thread_issued` store (Store): the
    kernel's own epilogue loop writing its MMA fragments to global memory
    (Pipeline.store_issue_cycles_per_byte at the GPU's clock); 0 where not modelled."""
    cpb = getattr(pipeline, "store_issue_cycles_per_byte", 0.0)
    return cpb / gpu.clock_hz if cpb else 0.0


def tma_epilogue_cost(gpu) -> tuple[float, float]:
    """(seconds per byte, serial fraction) of one SM's cuBLAS sm90 epilogue (Store.tma_epilogue:
    the accumulators converted into shared memory and written out by TMA stores, subtile by
    subtile through a few shared-memory buffers). Seconds per byte: 1 /
    (GpuSpec.tma_epilogue_bytes_per_clock_per_sm × clock), 0 where not given. Each SM has one
    such path (compute.SmUnits.epilogue, a FIFO): a tile's epilogue starts when the SM's
    previous one has drained, and holds its CTA's warps for the serial fraction of its time
    (GpuSpec.tma_epilogue_serial_fraction, 1 where not given); the rest drains while the SM's
    next tile runs its main loop."""
    rate = getattr(gpu, "tma_epilogue_bytes_per_clock_per_sm", None)
    if not rate:
        return 0.0, 1.0
    f = getattr(gpu, "tma_epilogue_serial_fraction", None)
    return 1.0 / (rate * gpu.clock_hz), 1.0 if f is None else f


def tma_epilogue_s(gpu, program) -> float:
    """Seconds an SM's epilogue path (tma_epilogue_cost) spends on one CTA's
    Store.tma_epilogue stores (the program's top-level ops: a GEMM stores its C tile once)."""
    s_per_byte = tma_epilogue_cost(gpu)[0]
    if not s_per_byte:
        return 0.0
    return s_per_byte * sum(op.bytes for op in program
                            if op.kind == "store" and op.tma_epilogue)


def cta_turnover_s(gpu, program=None) -> float:
    """Seconds an SM slot stays unavailable after its CTA's last instruction: the CTA's
    retirement and the block scheduler's launch of the next CTA into the slot
    (GpuSpec.cta_turnover_cycles at the GPU's clock; 0 where not given). H200: 420 cycles,
    whatever the threads (128-512), CTAs per SM (1, 2) or CTA length (2-8 us)
    (measurements/h200/cta_turnover_h200.json). Both engines hold a finished CTA's slot
    this long before the next CTA may take it. Given the CTA's `program`, a CTA that stored
    in the fragment layout (Store.layout) holds it GpuSpec.cta_turnover_fragment_store_cycles
    longer (H200: +292..720 cycles after 16-32 KB, median 350; same file)."""
    cycles = getattr(gpu, "cta_turnover_cycles", None) or 0.0
    if cycles and program is not None:        # an extra on the measured turnover only
        from .schedule import program_totals
        if program_totals(program).fragment_store_bytes:
            cycles += getattr(gpu, "cta_turnover_fragment_store_cycles", None) or 0.0
    return cycles / gpu.clock_hz if cycles else 0.0


def fragment_store_issue_s_per_byte(gpu) -> float:
    """Seconds the storing threads spend per byte of a store in the mma accumulator-fragment
    layout (Store.layout "fragment") beyond what the same bytes cost stored coalesced (which
    the model takes as free for the threads): GpuSpec.fragment_store_issue_cycles_per_byte at
    the GPU's clock; 0 where not given. H200: 0.060 cycles per byte for one SM storing
    16-32 KB alone (0.050-0.079 over row widths and thread counts; the committed FA-1 / FA-2
    forward traces give 0.055 / 0.051 for the kernels' own O store), unchanged with up to 66
    SMs storing at once (measurements/h200/store_layout/store_layout_h200.json). In series
    with the CTA's other work, as a thread_issued store; a thread_issued store is charged by
    its kernel's own traced figure (Pipeline.store_issue_cycles_per_byte) only."""
    cpb = getattr(gpu, "fragment_store_issue_cycles_per_byte", None)
    return cpb / gpu.clock_hz if cpb else 0.0


def partial_sector_write_cost_bytes(gpu) -> float:
    """DRAM time, in bytes at the read rate, that one write of part of a 32-byte sector costs
    beyond its bytes, where another CTA writes the sector's other part (Store.partial_sectors):
    GpuSpec.dram_partial_sector_write_cost_bytes, 0 where not given. H200: a store kernel
    writing the same 432 MB as 128 × 256 tiles ran at 3.11 TB/s at pitch 6000 B (odd rows start
    mid-sector: 864,000 partial writes) against 3.84 TB/s (median) at pitches on the sector grid,
    and Nsight Compute saw the same DRAM bytes either way (measurements/h200/gemm_pitch/,
    scripts/partial_sector_cost.py derives the figure)."""
    return getattr(gpu, "dram_partial_sector_write_cost_bytes", None) or 0.0


def dram_write_queue_s(gpu) -> float | None:
    """DRAM time of write-backs that may stay queued beyond the access that caused them
    (GpuSpec.dram_write_queue_s; None: an unbounded FIFO, write-backs fire and forget). Exact
    mode holds a load whose miss evicts a dirty line, or a store that pushes one out, until
    the DRAM server has served all but this much of its queue. H200: 0.35 µs, the resolution of
    a probe that found no queued work carried across a kernel boundary: a read kernel right
    after a 1 GiB copy ran as long as after the same copy and 2 ms of idle DRAM (−0.35 / −0.19
    / −0.19 µs at 64 MiB / 256 MiB / 1 GiB read; measurements/h200/dram_carryover/,
    tests/test_dram_write_queue.py), where an unbounded queue carried 3.9–5.0 µs out of a
    DRAM-bound softmax kernel (sim_diagnostics.py dram-backlog)."""
    return getattr(gpu, "dram_write_queue_s", None)


def line_misaligned_dram_factor(gpu) -> float:
    """DRAM time of a byte of a misaligned row stream (Load / Store.line_misaligned) over an
    aligned one's: GpuSpec.dram_line_misaligned_stream_factor, 1 where not given. H200: the
    project's softmax kernel's copy-only variant (S read, P written, plain 16-byte loads and
    stores, a warp per row) at B 2, H 16 streamed a median 3.22 TB/s at the 11 pitches off the
    128-byte line from N 1992 to 7000 and 3.74 TB/s at the 9 on it, group by group (N ~2000,
    ~3000, ~5000, ~7000, so at like CTAs per SM) 1.12-1.20 times slower; the median of the
    groups' ratios (measurements/h200/softmax_pitch/, scripts/line_misaligned_factor.py)."""
    return getattr(gpu, "dram_line_misaligned_stream_factor", None) or 1.0


def fragment_store_l2_cost(gpu) -> float:
    """L2↔SM bytes of port time one byte of a plain store in the fragment layout takes: the
    L2 bandwidth over the rate at which the L2 takes such stores from all SMs together
    (GpuSpec.l2_fragment_store_bandwidth_bytes_per_s; 1 where not given). H200: 0.92 TB/s
    (264 CTAs storing 64 KB each at once; coalesced stores 3.3-3.4 TB/s by the same measure;
    measurements/h200/store_layout/store_layout_h200.json), as the fragment-layout atomics
    (reduce_l2_cost): the half-sector, 8-line writes, not the atomicity, set that rate. No GPU
    config gives the figure (an experiment switch): charged so, exact mode queues a wave's
    end-of-CTA stores at that rate in one burst and the fast mode does not (3-9% apart on
    small problems), and the measurement itself shows 132 SMs storing at once slowed less
    (0.98-2.02 TB/s, issue -13..+47%) than a FIFO at 0.92 TB/s would (docs/validation.md)."""
    rate = getattr(gpu, "l2_fragment_store_bandwidth_bytes_per_s", None)
    return max(1.0, gpu.l2_bandwidth_bytes_per_s / rate) if rate else 1.0


def grid_index(cta: int, grid: tuple) -> tuple:
    """(x, y, z) of a linear CTA index, x fastest (CUDA launch order)."""
    x = cta % grid[0]
    y = (cta // grid[0]) % grid[1]
    z = cta // (grid[0] * grid[1])
    return x, y, z


@dataclass(frozen=True)
class SmRates:
    """Per-SM throughputs, derived from the GpuSpec."""

    tensor_flops_per_s: float   # dense tensor-core FLOP/s of the problem's dtype
    exp_per_s: float            # exp_per_clock_per_sm × clock_hz
    alu_ops_per_s: float        # fp32 elementwise ops/s (FMA = 1 op) ÷ SM count

    @classmethod
    def of(cls, gpu, dtype: str, instruction: str = "wgmma") -> "SmRates":
        """The SM's rates; tensor_flops_per_s is that of the MMA instruction class the
        kernel uses (busy time and utilization are counted against it)."""
        return cls(tensor_flops_per_s=gpu.mma_flops_per_s_per_sm(dtype, instruction),
                   exp_per_s=gpu.exp_per_clock_per_sm * gpu.clock_hz,
                   alu_ops_per_s=gpu.alu_ops_per_s / gpu.sm_count)


# default of GpuSpec.mma_sync_operands_overlap (kept for importers; the GPU config decides)
MMA_SYNC_OPERANDS_OVERLAP = False
# warp-instruction dispatch per SM: 4 sub-partitions x 1 instruction of 32 lanes per clock
ISSUE_LANES_PER_CLOCK_PER_SM = 128
SUB_PARTITIONS_PER_SM = 4     # CC 8.x/9.x SMs (CUDA C++ Programming Guide)
# whether elementwise instructions hold the SM's MMA stream for their issue cycles (MmaCost)
ELEMENTWISE_BLOCKS_MMA = True
# Mma names whose A operand is the softmax output P kept in registers (FA-1/FA-2 forward)
A_FROM_REGISTERS = frozenset({"O+=PV", "O_c+=PV_c"})
# wgmma (Hopper): one warpgroup's group of dependent wgmma (one GEMM of a consumer: the k steps
# accumulating into one register tile, committed together) takes a fixed latency plus its work
# at the SM's rate. H200 probe (`python3 -m iosim.measure.wgmma_overlap`, benchmarks/results/
# wgmma_overlap_h200_run2.txt): a warpgroup issuing groups back to back, 4 x m64n128k16 with
# both operands in shared memory (1 MFLOP) 2065834 cycles per 4000 groups = 516.5 per group, 8 x
# m64n64k16 with A in registers (FA-3's P·V at d 64, 1 MFLOP) 674.2; the work at cuBLAS's 4051
# FLOP/clk is 258.8 cycles of each, so the latencies are 257.7 and 415.4 cycles (two
# warpgroups together reach 3726 FLOP/clk, three 4016: the latency overlaps). Keyed by
# (A from registers, n); a shape not measured takes the m64n128k16 figure. Checked against the
# kernel's own stamps (measurements/h200/fa3_phases/fa3_phase_pairs_h200.json): at d 128 a
# consumer's S = Q Kᵀ (8 k steps, 2.1 MFLOP) is done within 693 cycles of its turn, the
# group's issue included: a fraction of the rate (the previous model, 0.501 of it: 1033 cycles)
# is further from that than this (258 + 518 = 776; at d 64, 4 k steps, both give 516). Each
# consumer warpgroup of a
# warp-specialized loop issues such groups on a stream of its own (pipeline.py).
WGMMA_PROBE_FLOP_PER_CLOCK = 4051          # cuBLAS's rate per SM per counted clock (same probe)
WGMMA_PROBE_GROUPS = {(False, 128): (2065834 / 4000, 4 * 2 * 64 * 128 * 16),
                      (True, 64): (2696756 / 4000, 8 * 2 * 64 * 64 * 16)}
WGMMA_GROUP_LATENCY_CYCLES = {key: cycles - flops / WGMMA_PROBE_FLOP_PER_CLOCK
                              for key, (cycles, flops) in WGMMA_PROBE_GROUPS.items()}
WGMMA_GROUP_LATENCY_CYCLES_OTHER = WGMMA_GROUP_LATENCY_CYCLES[(False, 128)]


def wgmma_group_latency_cycles(op) -> float:
    """Clock cycles one warpgroup's wgmma group of `op` takes beyond its work at the SM's rate."""
    return WGMMA_GROUP_LATENCY_CYCLES.get((op.name in A_FROM_REGISTERS, op.n),
                                          WGMMA_GROUP_LATENCY_CYCLES_OTHER)


def mma_operand_bytes(op, sync: bool, readers: int, elem_bytes: int) -> int:
    """Shared-memory bytes a CTA reads for one Mma's operands (layout: MmaCost's docstring).
    readers: the CTA's warps for mma.sync, its consumer warpgroups for wgmma."""
    if not sync:
        return (op.m * op.k + readers * op.k * op.n) * elem_bytes
    wm = max(1, min(readers, op.m // op.warp_rows))
    wn = max(1, readers // wm)
    a = 0 if op.name in A_FROM_REGISTERS else wn * op.m * op.k
    return (a + wm * op.k * op.n) * elem_bytes


def operand_readers(pipeline, threads_per_cta: int) -> tuple:
    """(sync, readers) of a kernel: mma.sync warps, or wgmma consumer warpgroups."""
    sync = getattr(pipeline, "mma_instruction", "wgmma") == "mma_sync"
    return sync, (max(1, threads_per_cta // 32) if sync
                  else max(1, pipeline.consumer_warpgroups))


class MmaCost:
    """What an Mma op costs on its SM's tensor server, whose rate is the wgmma rate: the
    op's work in wgmma-FLOP equivalents.

    - Instruction class (`Pipeline.mma_instruction`): mma.sync runs at
      `tensor_mma_sync_fraction` of the wgmma rate (H200: 632 vs 759 TFLOP/s measured).
    - Shared-memory operand reads. mma.sync warps bring their fragments into registers with
      ldmatrix. The CTA's W warps tile the m×n product as WM = min(W, m/16) warps along the
      rows (16-row MMA tiles) × WN = W/WM along the columns (the project's FA-1/FA-2 kernels,
      iosim/kernels/cuda): A (m×k) is read by the WN warps that share its rows, B (k×n) by
      the WM warps that share its columns; the A operand of the forward pass's P·V product
      (names in A_FROM_REGISTERS) stays in registers. A wgmma warpgroup reads its operands
      from shared memory itself: A once, B once per consumer warpgroup. Bytes cost
      bytes / (shared_memory_bandwidth_bytes_per_clock_per_sm × clock).
    - Overlap. wgmma is asynchronous: the tensor core streams its operands from shared
      memory while it computes, so an op takes max(tensor time, operand time). mma.sync's
      operands are brought in by ldmatrix instructions of the same warps, through the same
      issue slots and register fragments, and the MMA waits for them: tensor time + operand
      time, unless the GPU config says they overlap (`GpuSpec.mma_sync_operands_overlap`,
      sourced per architecture; docs/validation.md)."""

    __slots__ = ("scale", "readers", "elem_bytes", "smem_per_flop_rate", "sync", "memo",
                 "overlap", "issue_work_per_op", "exposed_work_per_exp", "exposed_work_per_alu",
                 "reduce_work_per_byte", "exposed_fraction", "wgmma_rate", "copy_s_per_byte",
                 "cycle_s")

    def __init__(self, gpu, dtype: str, pipeline, threads_per_cta: int, elem_bytes: int,
                 ctas_per_sm: int = 1, active_sms: int = 0):
        instr = getattr(pipeline, "mma_instruction", "wgmma")
        self.sync, self.readers = operand_readers(pipeline, threads_per_cta)
        wgmma_rate = gpu.tensor_flops_per_s_per_sm(dtype)
        self.scale = wgmma_rate / gpu.mma_flops_per_s_per_sm(dtype, instr)
        # warps per SM sub-partition of the kernel's resident CTAs (the measured mma.sync
        # rate and exposed fractions differ between 1 and 2 or more)
        per_sub = max(1, ctas_per_sm * threads_per_cta // 32 // SUB_PARTITIONS_PER_SM)
        by_warps = (getattr(gpu, "tensor_mma_sync_fraction_one_warp", None),
                    getattr(gpu, "tensor_mma_sync_fraction_two_warps", None))
        if instr == "mma_sync" and by_warps[0] is not None and by_warps[1] is not None:
            self.scale = 1.0 / (by_warps[0] if per_sub == 1 else by_warps[1])
        self.elem_bytes = elem_bytes
        smem_rate = gpu.shared_memory_bandwidth_bytes_per_clock_per_sm * gpu.clock_hz
        self.smem_per_flop_rate = wgmma_rate / smem_rate   # wgmma FLOPs per smem byte-second
        self.memo: dict = {}
        self.overlap = bool(getattr(gpu, "mma_sync_operands_overlap", MMA_SYNC_OPERANDS_OVERLAP))
        # issue-slot sharing: every elementwise instruction (one per Exp/Alu element) takes a
        # dispatch slot of its SM sub-partition (4 sub-partitions x 1 warp instruction of 32
        # lanes per clock: CUDA C++ Programming Guide, SM architecture of CC 8.x/9.x) and the
        # register-file ports the MMA datapath also uses (mma.sync operands and accumulators;
        # wgmma's register accumulators and register-sourced A), so the SM's MMA stream does
        # not advance during it. In wgmma-FLOP equivalents of the tensor server:
        # wgmma rate / (128 lanes x clock). ELEMENTWISE_BLOCKS_MMA switches it off.
        self.issue_work_per_op = (wgmma_rate / (ISSUE_LANES_PER_CLOCK_PER_SM * gpu.clock_hz)
                                  if ELEMENTWISE_BLOCKS_MMA else 0.0)
        # mma.sync kernels (GpuSpec.mma_sync_exposed_fraction_*, measured): the same 1-2
        # warps per sub-partition issue the MMAs and the softmax, in order, so most of a
        # softmax phase is not hidden under the other resident CTAs' MMAs; the MMA stream is
        # held for that fraction of the op's own unit time (exp or ALU), which covers its
        # issue slots too
        self.exposed_work_per_exp = self.exposed_work_per_alu = 0.0
        self.exposed_fraction = 0.0
        self.wgmma_rate = wgmma_rate
        self.copy_s_per_byte = copy_issue_s_per_byte(gpu, pipeline)
        self.cycle_s = 1.0 / gpu.clock_hz
        exposed = (getattr(gpu, "mma_sync_exposed_fraction_one_warp", None),
                   getattr(gpu, "mma_sync_exposed_fraction_two_warps", None))
        if self.sync and exposed[0] is not None and exposed[1] is not None and ELEMENTWISE_BLOCKS_MMA:
            f = exposed[0] if per_sub == 1 else exposed[1]
            rates = SmRates.of(gpu, dtype)
            self.exposed_fraction = f
            self.exposed_work_per_exp = f * wgmma_rate / rates.exp_per_s
            self.exposed_work_per_alu = f * wgmma_rate / rates.alu_ops_per_s
            self.issue_work_per_op = 0.0
        # reduce stores (fp32 atomics) of an mma.sync kernel hold its SM's MMA stream for their
        # bytes at the SM's own measured limit (reduce_hold_bytes_per_s); the chip-wide rate
        # is the L2 port's (reduce_l2_cost), shared by the SMs adding at the same time
        # (`active_sms`, the SMs the kernel occupies, no longer enters: kept for callers)
        self.reduce_work_per_byte = {}
        if self.sync:
            for lay in ("fragment", "coalesced"):
                rate = reduce_hold_bytes_per_s(gpu, lay)
                if rate:
                    self.reduce_work_per_byte[lay] = wgmma_rate / rate

    def copy_hold(self, issue_s: float) -> float:
        """Tensor-server work a CTA's copy issue holds the SM's MMA stream for: the warps that
        issue the copies are the MMA warps (mma.sync kernels), and time they spend on other
        instructions is not hidden under the other resident warps' MMAs but for the fraction
        measured for the softmax (GpuSpec.mma_sync_exposed_fraction_*); 0 without it."""
        return self.exposed_fraction * issue_s * self.wgmma_rate

    def reduce_hold(self, nbytes: int, layout: str) -> float:
        """Tensor-server work a reduce store holds the SM's MMA stream for: its bytes at the
        SM's own rate for its layout (reduce_hold_bytes_per_s); 0 where not measured."""
        return self.reduce_work_per_byte.get(layout, 0.0) * nbytes

    def phase_s(self, op, count: float) -> float:
        """Seconds the CTA's threads spend in a measured elementwise phase (Alu.
        phase_cycles_per_op) of `count` ops at the GPU's clock; 0 where not measured."""
        cpo = getattr(op, "phase_cycles_per_op", 0.0)
        return count * cpo * self.cycle_s if cpo else 0.0

    def barrier_s(self, op) -> float:
        """Seconds the CTA waits at the measured barrier that ends an Alu op's phase
        (Alu.barrier_cycles) at the GPU's clock, once per op; 0 where not measured."""
        cyc = getattr(op, "barrier_cycles", 0.0)
        return cyc * self.cycle_s if cyc else 0.0

    def alu_hold(self, op, count: float) -> float:
        """Tensor-server work an Alu op holds the MMA stream for: the exposed fraction of its
        measured phase (copy_hold's rule: the same warps are busy elsewhere) where it has one,
        else elementwise_hold; plus that fraction of its measured barrier wait (the warps
        waiting there issue no MMAs either)."""
        ph = self.phase_s(op, count)
        hold = self.copy_hold(ph) if ph else self.elementwise_hold("alu", count)
        bar = self.barrier_s(op)
        return hold + self.copy_hold(bar) if bar else hold

    def elementwise_hold(self, kind: str, count: float) -> float:
        """Tensor-server work an Exp or Alu op of `count` elements holds the MMA stream for:
        its issue slots, or for mma.sync kernels with a measured exposed fraction that
        fraction of the op's unit time."""
        if self.exposed_work_per_exp:
            return count * (self.exposed_work_per_exp if kind == "exp" else self.exposed_work_per_alu)
        return count * self.issue_work_per_op

    def operand_bytes(self, op) -> int:
        """Shared-memory bytes the CTA reads for one Mma's operands."""
        return mma_operand_bytes(op, self.sync, self.readers, self.elem_bytes)

    def stream_work(self, op, share: float = 1.0) -> float:
        """Work of one warpgroup's wgmma group of `share` of `op` on its stream (a server at
        the SM's rate): that work plus the group's latency (wgmma_group_latency_cycles) in
        work units; 0 for mma.sync."""
        if self.sync:
            return 0.0
        return self.work(op) * share + wgmma_group_latency_cycles(op) * self.cycle_s * self.wgmma_rate

    def work(self, op) -> float:
        key = (op.name, op.m, op.n, op.k, op.warp_rows)
        w = self.memo.get(key)
        if w is None:
            tensor = op.flops * self.scale
            smem = self.operand_bytes(op) * self.smem_per_flop_rate
            if self.sync and not self.overlap:
                w = tensor + smem
            else:
                w = tensor if tensor > smem else smem
            self.memo[key] = w
        return w



def resident_ctas_per_sm(gpu, launch) -> int:
    """CTAs per SM a launch reaches: its occupancy, or fewer where its grid does not fill that
    many per SM (a grid of at most sm_count CTAs runs each alone: 1 warp per sub-partition
    for 4-warp CTAs, whose measured mma.sync rate and exposed fraction differ from 2 warps')."""
    return min(max(1, occupancy(gpu, launch)), max(1, -(-launch.num_ctas // gpu.sm_count)))


def tensor_server_busy_s(kernel, cost: "MmaCost", server_flops_per_s: float) -> float:
    """Seconds the SMs' tensor servers spend on the kernel's Mma ops, summed over SMs:
    MmaCost.work (instruction-class rate and, for mma.sync, the ldmatrix operand reads that
    hold the same warps) over the server's rate; for an mma.sync kernel with measured exposed
    fractions also the MMA stream its own warps hold (softmax, copy issue, atomics: the warps
    that issue the MMAs are doing the other work). This, not FLOPs at peak, is the tensor busy
    time that utilization and the binding resource are judged by."""
    from .schedule import Loop, Mma
    holds = cost.exposed_fraction > 0.0

    def work(program) -> float:
        w = 0.0
        for item in program:
            if isinstance(item, Loop):
                w += item.count * work(item.body)
            elif isinstance(item, Mma):
                w += cost.work(item)
            elif holds:
                kind = item.kind
                if kind == "alu":
                    w += cost.alu_hold(item, item.count)
                elif kind == "exp":
                    w += cost.elementwise_hold(kind, item.count)
                elif kind == "load":
                    w += cost.copy_hold(item.bytes * cost.copy_s_per_byte)
                elif kind == "store" and item.reduce:
                    w += cost.reduce_hold(item.bytes, item.reduce_layout)
        return w
    return sum(count * work(kernel.program(rep)) for rep, count in kernel.classes) \
        / server_flops_per_s


def _mma_split(kernel, cost: "MmaCost") -> tuple:
    """(instruction seconds·rate, operand seconds·rate) of a kernel's Mma ops, in wgmma-FLOP
    equivalents, summed over CTAs: the tensor-core part at the instruction's rate and the
    shared-memory operand reads that do not overlap it."""
    from .schedule import Loop, Mma

    def split(program) -> tuple:
        t = o = 0.0
        for item in program:
            if isinstance(item, Loop):
                a, b = split(item.body)
                t += item.count * a
                o += item.count * b
            elif isinstance(item, Mma):
                tensor = item.flops * cost.scale
                total = cost.work(item)
                t += tensor
                o += max(0.0, total - tensor)
        return t, o
    tt = oo = 0.0
    for rep, count in kernel.classes:
        a, b = split(kernel.program(rep))
        tt += count * a
        oo += count * b
    return tt, oo


def _alu_hold_work(kernel, cost: "MmaCost") -> float:
    """MMA-stream work the kernel's Alu ops hold, summed over CTAs (MmaCost.alu_hold: the
    exposed part of a measured phase, else the elementwise hold)."""
    from .schedule import Loop

    def walk(program) -> float:
        w = 0.0
        for item in program:
            if isinstance(item, Loop):
                w += item.count * walk(item.body)
            elif getattr(item, "kind", "") == "alu":
                w += cost.alu_hold(item, item.count)
        return w
    return sum(count * walk(kernel.program(rep)) for rep, count in kernel.classes)


def time_breakdown(schedule, gpu, result) -> dict:
    """Where the predicted time goes, by mechanism, in seconds of the whole run (per-SM unit
    busy time averaged over the SMs). Units overlap, so the parts do not add up to the time:
    `unhidden_s` is what no unit's busy time covers (time − launches − the busiest unit's
    share): tail waves, prologue and epilogue, pipeline fill, memory and dependency waits."""
    from .hardware import load_gpu
    gpu = load_gpu(gpu)
    problem = schedule.problem
    wgmma_rate = gpu.tensor_flops_per_s_per_sm(problem.dtype) * gpu.sm_count
    out = {"launch_s": gpu.launch_overhead_s * len(schedule.kernels), "kernels": []}
    totals = {"mma_s": 0.0, "mma_operand_reads_s": 0.0, "issue_slots_s": 0.0,
              "copy_issue_hold_s": 0.0, "reduce_hold_s": 0.0, "exp_s": 0.0,
              "alu_s": 0.0, "epilogue_s": 0.0, "l2_s": 0.0, "dram_s": 0.0,
              "dram_access_penalty_s": 0.0, "unhidden_s": 0.0}
    for kernel, kr in zip(schedule.kernels, result.kernels):
        cost = MmaCost(gpu, problem.dtype, kernel.pipeline, kernel.launch.threads_per_cta,
                       problem.elem_bytes, resident_ctas_per_sm(gpu, kernel.launch),
                       kernel.launch.num_ctas)
        t, o = _mma_split(kernel, cost)
        busy = kr.busy_s
        kt = kernel.totals()
        part = {"name": kernel.name, "time_s": kr.time_s,
                "mma_s": t / wgmma_rate, "mma_operand_reads_s": o / wgmma_rate,
                # the tensor server held while the softmax's instructions issue (MmaCost)
                "issue_slots_s": (cost.elementwise_hold("exp", kt.exp)
                                  + _alu_hold_work(kernel, cost)) / wgmma_rate,
                # the MMA stream held while the MMA warps issue their own copies and while
                # their reduce stores drain (MmaCost.copy_hold, reduce_hold)
                "copy_issue_hold_s": cost.copy_hold(
                    sum(kt.load_bytes.values()) * copy_issue_s_per_byte(gpu, kernel.pipeline))
                / wgmma_rate,
                "reduce_hold_s": (cost.reduce_hold(kt.reduce_bytes - kt.reduce_coalesced_bytes,
                                                   "fragment")
                                  + cost.reduce_hold(kt.reduce_coalesced_bytes, "coalesced"))
                / wgmma_rate,
                "exp_s": busy.get("exp", 0.0) / gpu.sm_count,
                "alu_s": busy.get("alu", 0.0) / gpu.sm_count,
                # the SMs' GEMM epilogue paths (Store.tma_epilogue), per SM
                "epilogue_s": sum(count * tma_epilogue_s(gpu, kernel.program(rep))
                                  for rep, count in kernel.classes) / gpu.sm_count,
                "l2_s": busy.get("l2", 0.0), "dram_s": busy.get("dram", 0.0),
                # of dram_s: partial-sector writes and misaligned row streams
                "dram_access_penalty_s": dram_access_penalty_s(
                    gpu, kt, kr.dram_read_bytes, kr.dram_write_bytes)}
        covered = max(part["mma_s"] + part["mma_operand_reads_s"] + part["issue_slots_s"]
                      + part["copy_issue_hold_s"] + part["reduce_hold_s"],
                      part["exp_s"], part["alu_s"], part["epilogue_s"],
                      part["l2_s"], part["dram_s"])
        part["unhidden_s"] = max(0.0, kr.time_s - covered)
        out["kernels"].append(part)
        for k in totals:
            totals[k] += part[k]
    out.update(totals)
    out["time_s"] = result.time_s
    out["clock_hz"] = gpu.clock_hz          # the (sustained) clock the schedule ran at
    return out
