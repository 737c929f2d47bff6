"""GpuSpec: one GPU's figures, each with its source, loaded from iosim/data/gpus/*.yaml.

The specs are frozen dataclasses whose fields carry their bounds (`_figure`). A mapping of
figures (a GPU file, a derived spec's) is checked here against the fields' types and bounds, the
plausible ranges and the sources rule (`_checked`); one that passes is taken as it is, ints
widened to float where the field is a float. Any other mapping (a key missing or unknown, a
string for a number, a figure out of bounds) goes to the pydantic models of the same fields
(hardware_schema.py), which coerce what they accept and word the error. Importing pydantic's
models takes ~0.13 s on the project's 2-core machine (`python -c "from pydantic import
BaseModel, Field, ..."` 0.17 s against 0.04 s for `python -c pass`, medians of 7), a third of
the headline `iosim run` (benchmarks/results/headline_cost.txt), so a well-formed file does
not pay for it. The specs keep pydantic's API where iosim uses it: model_dump, model_copy,
model_validate, model_dump_json, model_validate_json, model_fields.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .errors import IosimError
from .paths import GPU_CONFIG_DIR

SHORT_NAMES = {
    "a100": "a100-sxm4-80gb",
    "h100": "h100-sxm5-80gb",
    "h200": "h200-sxm-141gb",
    "h200-calibrated": "h200-sxm-141gb-calibrated",
}


# Plausible ranges of a GPU file's figures (inclusive): a spec outside them is a typo or a unit
# slip (GB/s for B/s, MHz for Hz), refused when a YAML file is loaded. They bracket every
# NVIDIA datacenter GPU from V100 to B200 with one to three orders of magnitude of room
# (datasheets and whitepapers: e.g. H100 SXM5 132 SMs, 1.98 GHz boost, 50 MiB L2,
# 3.35 TB/s HBM3, 989 TFLOP/s dense fp16, 228 KiB shared memory per SM, 2048 threads per SM).
# Hypothetical specs derived in code (GpuSpec.with_, e.g. a larger shared memory for the
# lesson's M sweep) are only held to finite and positive.
KiB, MiB, GiB = 2 ** 10, 2 ** 20, 2 ** 30
PLAUSIBLE = {
    "sm_count": (1, 1024),
    "clock_hz": (0.1e9, 5e9),
    "sm_clock_counted_max_hz": (0.1e9, 5e9),
    "threads_per_sm_max": (32, 4096),
    "ctas_per_sm_max": (1, 128),
    "registers_per_sm": (1024, 1 << 20),
    "registers_per_thread_max": (16, 1024),
    "shared_memory_per_sm_bytes": (1 * KiB, 16 * MiB),
    "shared_memory_per_block_bytes": (1 * KiB, 16 * MiB),
    "shared_memory_bandwidth_bytes_per_clock_per_sm": (1, 4096),
    "l1_shared_memory_bytes_per_sm": (16 * KiB, 16 * MiB),
    "l1_latency_s": (1e-10, 1e-6),
    "l2_capacity_bytes": (64 * KiB, 4 * GiB),
    "l2_bandwidth_bytes_per_s": (1e9, 1e15),
    "l2_latency_s": (1e-9, 1e-5),
    "l2_reduce_bandwidth_bytes_per_s": (1e9, 1e15),
    "l2_reduce_coalesced_bandwidth_bytes_per_s": (1e9, 1e15),
    "l2_reduce_sm_bandwidth_bytes_per_s": (1e6, 1e13),
    "l2_reduce_coalesced_sm_bandwidth_bytes_per_s": (1e6, 1e13),
    "dram_capacity_bytes": (100e6, 10e12),
    "dram_bandwidth_bytes_per_s": (1e9, 1e14),
    "dram_read_bandwidth_bytes_per_s": (1e9, 1e14),
    "dram_mixed_3r1w_bandwidth_bytes_per_s": (1e9, 1e14),
    "dram_mixed_1r1w_bandwidth_bytes_per_s": (1e9, 1e14),
    "dram_mixed_1r3w_bandwidth_bytes_per_s": (1e9, 1e14),
    "dram_write_bandwidth_bytes_per_s": (1e9, 1e14),
    "dram_latency_s": (1e-8, 1e-4),
    "fp32_flops_per_s": (1e9, 1e16),
    "exp_per_clock_per_sm": (1, 1024),
    "launch_overhead_s": (0, 1e-3),
    "cta_turnover_cycles": (0, 1e5),
    "cta_turnover_fragment_store_cycles": (0, 1e5),
    "fragment_store_issue_cycles_per_byte": (0, 10),
    "l2_fragment_store_bandwidth_bytes_per_s": (1e9, 1e15),
    "dram_partial_sector_write_cost_bytes": (0, 1e4),
    "dram_line_misaligned_stream_factor": (1, 10),
    "dram_write_queue_s": (0, 1e-4),
    "tma_epilogue_bytes_per_clock_per_sm": (1, 1024),
    "tma_epilogue_serial_fraction": (0, 1),
    "fp16": (1e9, 1e17), "bf16": (1e9, 1e17), "tf32": (1e9, 1e17), "fp8": (1e9, 1e17),
}


def _number(v):
    """Numbers only (a YAML `true` is not 1), and finite (no .inf / .nan)."""
    if isinstance(v, bool):
        raise ValueError(f"must be a number, got {v!r}")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"must be a finite number, got {v!r}")
    return v


def _plausible(name: str, v, plausible: bool):
    if v is None or not plausible:
        return v
    lo, hi = PLAUSIBLE.get(name, (None, None))
    if lo is not None and not lo <= v <= hi:
        raise ValueError(f"{v:g} is outside the plausible range {lo:g} to {hi:g}")
    return v


def _figure(default=dataclasses.MISSING, **bounds):
    """A field with its bounds (gt, ge, le: what pydantic's Field takes) in its metadata."""
    return field(default=default, metadata=bounds)


class _Spec:
    """What the spec dataclasses share: pydantic's API where iosim uses it, and the check of a
    mapping of figures (module docstring)."""

    model_fields: dict = {}          # name → dataclasses.Field, set by _spec

    def model_dump(self) -> dict:
        return {f: (v.model_dump() if isinstance(v, _Spec) else dict(v) if isinstance(v, dict)
                    else v) for f, v in ((f, getattr(self, f)) for f in self.model_fields)}

    def model_dump_json(self) -> str:
        return json.dumps(self.model_dump(), separators=(",", ":"))

    def model_copy(self, update: dict | None = None):
        """A copy with `update` applied, not validated (as pydantic's)."""
        return dataclasses.replace(self, **(update or {}))

    @classmethod
    def model_validate(cls, data, context: dict | None = None):
        """The spec of a mapping of figures; context {"plausible": True}: held to PLAUSIBLE.
        Raises pydantic's ValidationError (a ValueError) for an invalid one."""
        plausible = bool((context or {}).get("plausible"))
        spec = _checked(cls, data, plausible)
        if spec is not None:
            return spec
        from .hardware_schema import validate
        return validate(cls, _as_mapping(data), plausible)

    @classmethod
    def model_validate_json(cls, text: str):
        return cls.model_validate(json.loads(text))

    @classmethod
    def _built(cls, dump: dict):
        """The spec of pydantic's validated dump (nested specs as mappings), unchecked."""
        kw = {}
        for name, v in dump.items():
            kind = _rules(cls)[name][0]
            spec = kind is not None and issubclass(kind, _Spec) and v is not None
            kw[name] = kind._built(v) if spec else v
        return cls(**kw)

    def _problem(self) -> str | None:
        """What the figures break beyond each one's own rule (None: nothing)."""
        return None


def _spec(cls):
    cls = dataclass(frozen=True, kw_only=True)(cls)
    cls.model_fields = {f.name: f for f in dataclasses.fields(cls)}
    return cls


def _as_mapping(data):
    """data with every spec in it as a mapping (what the pydantic models take)."""
    if isinstance(data, _Spec):
        return data.model_dump()
    if isinstance(data, dict):
        return {k: _as_mapping(v) for k, v in data.items()}
    return data




@_spec
class TensorRates(_Spec):
    """Dense tensor-core throughput in FLOP/s (no sparsity); null where the GPU lacks the type."""

    fp16: float = _figure(gt=0)
    bf16: float = _figure(gt=0)
    tf32: float = _figure(gt=0)
    fp8: Optional[float] = _figure(None, gt=0)


@_spec
class PowerCappedClock(_Spec):
    """The SM clock a kernel holds at the board's power cap, as a line in the kernel's tensor-core
    FLOP rate: clock = clock_at_zero_tensor_rate_hz − clock_drop_hz_per_tensor_flop_per_s × rate,
    capped at the GPU's clock_hz (measured: iosim.measure.clocks)."""

    clock_at_zero_tensor_rate_hz: float = _figure(gt=0)
    clock_drop_hz_per_tensor_flop_per_s: float = _figure(ge=0)


@_spec
class TripLatencyCurve(_Spec):
    """The latency of one dependent 2-KB warp trip to DRAM (a warp's 4 x 16 B per lane, the
    next trip's address in the last one's data) against the DRAM's utilization by other
    traffic: [utilization, seconds] points, utilization being the stream's rate over the
    saturated rate of the same mix, from 0 (unloaded) up (machine.loaded_trip_latency_s)."""

    read_only: tuple[tuple[float, float], ...] = _figure()
    read_write_1to1: tuple[tuple[float, float], ...] = _figure()

    def _problem(self) -> str | None:
        for name in ("read_only", "read_write_1to1"):
            pts = getattr(self, name)
            us = [u for u, _ in pts]
            if not pts or us[0] != 0.0 or us != sorted(set(us)) or us[-1] > 1.0:
                return f"dram_trip_latency.{name}: utilizations must rise from 0 to at most 1"
            if any(s <= 0 for _, s in pts):
                return f"dram_trip_latency.{name}: latencies must be positive"
        return None


@_spec
class Features(_Spec):
    async_copy: bool = _figure()
    tma: bool = _figure()
    wgmma: bool = _figure()


@_spec
class GpuSpec(_Spec):
    """Figures of one GPU. Every numeric figure must name its source in `sources`."""

    name: str = _figure()
    short_name: str = _figure()
    sm_count: int = _figure(gt=0)
    clock_hz: float = _figure(gt=0)
    threads_per_sm_max: int = _figure(gt=0)
    ctas_per_sm_max: int = _figure(gt=0)
    registers_per_sm: int = _figure(gt=0)
    registers_per_thread_max: int = _figure(gt=0)
    shared_memory_per_sm_bytes: int = _figure(gt=0)
    shared_memory_per_block_bytes: int = _figure(gt=0)
    shared_memory_bandwidth_bytes_per_clock_per_sm: float = _figure(gt=0)
    # the SM's unified L1 data cache / shared-memory array: a kernel's shared-memory carve-out
    # is taken from it, the rest caches the loads that look up L1 (Load.l1; sim/l1.py).
    # None: no L1 model (every load crosses L2 -> SM)
    l1_shared_memory_bytes_per_sm: Optional[int] = _figure(None, gt=0)
    # an L1 hit's latency (sim/l1.py); None: 0
    l1_latency_s: Optional[float] = _figure(None, gt=0)
    l2_capacity_bytes: int = _figure(gt=0)
    # the fraction of re-reads that miss by their reuse distance: [distance in L2 capacities,
    # miss fraction] points, measured by the L2 reuse probe (sim/l2_residency.py); None: the
    # L2 is an LRU of the effective capacity (memory.TileLru)
    l2_residency_miss_curve: Optional[tuple[tuple[float, float], ...]] = _figure(None)
    l2_bandwidth_bytes_per_s: float = _figure(gt=0)
    l2_latency_s: float = _figure(gt=0)
    # chip-wide rate of fp32 atomic reductions (red.global.add.f32) into L2 in the layout a
    # schedule's `reduce` stores issue (machine.reduce_l2_cost); None: served as plain stores
    l2_reduce_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    # the same with a warp adding 128 contiguous bytes (Store.reduce_layout "coalesced")
    l2_reduce_coalesced_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    dram_capacity_bytes: int = _figure(gt=0)
    # a copy's rate (bytes read + written over the time): what a kernel that reads and writes
    # alike streams at; machine.dram_write_cost derives the cost of a written byte from it
    dram_bandwidth_bytes_per_s: float = _figure(gt=0)
    # a read-only stream's rate (the DRAM servers run at it); None: the copy's rate, and a
    # written byte costs what a read one does
    dram_read_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    # one kernel's stream rate (bytes read + written over the time) with reads:writes 3:1,
    # 1:1, 1:3 and write-only (iosim.measure.dram_stream); with the read-only rate they set
    # a byte's DRAM time by the mix of directions in flight (machine.dram_byte_cost). None
    # (any of them): a written byte costs machine.dram_write_cost
    dram_mixed_3r1w_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    dram_mixed_1r1w_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    dram_mixed_1r3w_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    dram_write_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    dram_latency_s: float = _figure(gt=0)
    # a dependent 2-KB warp trip's latency by the DRAM's utilization (Load.round_trips;
    # machine.loaded_trip_latency_s); None: every trip takes dram_latency_s
    dram_trip_latency: Optional[TripLatencyCurve] = _figure(None)
    # datasheet peak (dense): what the vendor quotes; shown by `iosim gpus`, never predicted with
    # when an achievable rate is given
    tensor_flops_per_s: TensorRates = _figure()
    # achievable dense rate of the GPU's best MMA path (cuBLAS-class GEMM), measured or from a
    # published microbenchmark; the rate every prediction uses. None: the datasheet peak
    tensor_flops_per_s_achievable: Optional[TensorRates] = _figure(None)
    # whether mma.sync's ldmatrix shared-memory operand reads overlap the MMAs (machine.MmaCost)
    mma_sync_operands_overlap: bool = _figure(False)
    # mma.sync kernels: the fraction of the MMA warps' time on other work (the softmax's
    # exp/ALU time, their own copy issue) during which the SM's MMA stream does not advance,
    # with 1 and with 2 or more warps per SM sub-partition; None: only the elementwise
    # instructions' issue slots hold it (machine.MmaCost)
    mma_sync_exposed_fraction_one_warp: Optional[float] = _figure(None, ge=0, le=1)
    mma_sync_exposed_fraction_two_warps: Optional[float] = _figure(None, ge=0, le=1)
    # fp32 atomic reduction one SM gets alone, by layout (machine.reduce_sm_bytes_per_s);
    # None: reduce stores do not hold the issuing SM (only the L2 port serves them)
    l2_reduce_sm_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    l2_reduce_coalesced_sm_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    # the clock under load (None: clock_hz whatever the load)
    power_capped_clock: Optional[PowerCappedClock] = _figure(None)
    # the highest SM clock the SMs' own cycle counter runs at under the kernels (clock64
    # cycles over %globaltimer ns inside the CTAs; iosim.measure.step_cycles): where it is
    # below clock_hz (the reported boost clock) kernels run at most at it (sustained_clock_hz,
    # clock.sustained_simulation); None: clock_hz
    sm_clock_counted_max_hz: Optional[float] = _figure(None, gt=0)
    # mma.sync throughput per clock as a fraction of the wgmma rate, with 1 and with 2 or more
    # warps per SM sub-partition, measured in clock64 cycles (machine.MmaCost); None:
    # tensor_mma_sync_fraction whatever the warps
    tensor_mma_sync_fraction_one_warp: Optional[float] = _figure(None, gt=0, le=1)
    tensor_mma_sync_fraction_two_warps: Optional[float] = _figure(None, gt=0, le=1)
    # mma.sync (warp-level MMA from registers) throughput as a fraction of tensor_flops_per_s
    # (the rate of the GPU's best MMA instruction: wgmma on Hopper); 1 where there is no wgmma
    tensor_mma_sync_fraction: float = _figure(gt=0, le=1)
    fp32_flops_per_s: float = _figure(gt=0)
    exp_per_clock_per_sm: float = _figure(gt=0)
    launch_overhead_s: float = _figure(ge=0)
    # SM clock cycles from a CTA's last instruction to the first instruction of the CTA the
    # block scheduler puts into its slot next (retirement + launch); None: not modelled
    cta_turnover_cycles: Optional[float] = _figure(None, ge=0)
    # stores in the mma accumulator-fragment layout (Store.layout "fragment": one 4-byte
    # st.global per lane, a warp instruction writing 8 rows x 16 bytes), beyond what the same
    # bytes stored coalesced cost (machine.fragment_store_issue_s_per_byte,
    # fragment_store_l2_cost, cta_turnover_s); None: not modelled.
    # - cycles the storing CTA's threads spend per byte issuing them, one SM storing alone
    fragment_store_issue_cycles_per_byte: Optional[float] = _figure(None, ge=0)
    # - the rate at which the chip's L2 takes them from all SMs together
    l2_fragment_store_bandwidth_bytes_per_s: Optional[float] = _figure(None, gt=0)
    # - extra cycles the CTA's slot stays unavailable after its exit
    cta_turnover_fragment_store_cycles: Optional[float] = _figure(None, ge=0)
    # DRAM time (in bytes at the read rate) one write of part of a 32-byte sector costs beyond
    # its bytes, where the sector's other part is written by another CTA (Store.partial_sectors,
    # machine.partial_sector_write_cost_bytes); None: not modelled
    dram_partial_sector_write_cost_bytes: Optional[float] = _figure(None, ge=0)
    # DRAM time of a byte of a row stream read or written with plain loads / stores whose rows
    # start off the 128-byte line, over an aligned one's (Load / Store.line_misaligned,
    # machine.line_misaligned_dram_factor); None: not modelled
    dram_line_misaligned_stream_factor: Optional[float] = _figure(None, ge=1)
    # DRAM time of write-backs the memory controllers hold queued beyond the accesses that
    # caused them: an access whose eviction would queue more waits until the DRAM has served
    # all but this much (machine.dram_write_queue_s); None: an unbounded queue (fire and forget)
    dram_write_queue_s: Optional[float] = _figure(None, ge=0)
    # a cuBLAS sm90 GEMM's epilogue (accumulators -> shared memory -> TMA store of the C
    # tile, Store.tma_epilogue): bytes per SM clock one SM's epilogue writes out, and the
    # fraction of that time the CTA's own warps are held (the rest drains under the next
    # tile's main loop; machine.tma_epilogue_s_per_byte); None: not modelled
    tma_epilogue_bytes_per_clock_per_sm: Optional[float] = _figure(None, gt=0)
    tma_epilogue_serial_fraction: Optional[float] = _figure(None, ge=0, le=1)
    features: Features = _figure()
    sources: dict[str, str] = _figure()

    def _problem(self) -> str | None:
        figures = [k for k in self.model_fields
                   if k not in ("name", "short_name", "sources", "features")
                   and getattr(self, k) is not None]
        missing = [k for k in figures if not self.sources.get(k, "").strip()]
        if missing:
            return f"no source given for: {', '.join(missing)}"
        unknown = sorted(set(self.sources) - set(self.model_fields))
        if unknown:
            return f"sources names unknown figures: {', '.join(unknown)}"
        if self.shared_memory_per_block_bytes > self.shared_memory_per_sm_bytes:
            return "shared_memory_per_block_bytes exceeds shared_memory_per_sm_bytes"
        if self.dram_trip_latency is not None and self.dram_trip_latency._problem():
            return self.dram_trip_latency._problem()
        curve = self.l2_residency_miss_curve
        if curve is not None:
            xs, ms = [x for x, _ in curve], [m for _, m in curve]
            if not curve or xs[0] != 0.0 or xs != sorted(set(xs)):
                return "l2_residency_miss_curve: distances must rise from 0"
            if ms != sorted(ms) or ms[0] < 0.0 or ms[-1] > 1.0:
                return "l2_residency_miss_curve: miss fractions must rise within [0, 1]"
        return None

    # ---- derived rates -------------------------------------------------------------
    def tensor_rate(self, dtype: str) -> float:
        """Dense tensor-core FLOP/s the model predicts with: the achievable rate where the
        config gives one, else the datasheet peak."""
        rates = self.tensor_flops_per_s_achievable or self.tensor_flops_per_s
        rate = getattr(rates, dtype, None)
        if rate is None:
            raise IosimError(f"{self.name} has no {dtype} tensor cores")
        return rate

    def tensor_peak_rate(self, dtype: str) -> float:
        """The datasheet's dense tensor-core FLOP/s."""
        rate = getattr(self.tensor_flops_per_s, dtype, None)
        if rate is None:
            raise IosimError(f"{self.name} has no {dtype} tensor cores")
        return rate

    def tensor_flops_per_s_per_sm(self, dtype: str) -> float:
        return self.tensor_rate(dtype) / self.sm_count

    def mma_flops_per_s_per_sm(self, dtype: str, instruction: str = "wgmma") -> float:
        """Per-SM tensor rate of one MMA instruction class ("wgmma" or "mma_sync")."""
        scale = self.tensor_mma_sync_fraction if instruction == "mma_sync" else 1.0
        return self.tensor_flops_per_s_per_sm(dtype) * scale

    @property
    def exp_per_s(self) -> float:
        return self.exp_per_clock_per_sm * self.sm_count * self.clock_hz

    @property
    def shared_memory_bandwidth_bytes_per_s(self) -> float:
        return self.shared_memory_bandwidth_bytes_per_clock_per_sm * self.sm_count * self.clock_hz

    @property
    def alu_ops_per_s(self) -> float:
        """fp32 elementwise ops per second (one FMA = 2 FLOPs = 1 op)."""
        return self.fp32_flops_per_s / 2

    def sustained_clock_hz(self, tensor_flops_per_hz: float) -> float:
        """The clock a kernel holds when its tensor cores do `tensor_flops_per_hz` FLOPs per
        clock cycle (chip-wide): the fixed point of clock = a − b·rate with rate = that × clock,
        capped at clock_hz; clock_hz where the config has no power model."""
        pc = self.power_capped_clock
        top = self.clock_hz if self.sm_clock_counted_max_hz is None else min(
            self.clock_hz, self.sm_clock_counted_max_hz)
        if pc is None or tensor_flops_per_hz <= 0:
            return top
        f = pc.clock_at_zero_tensor_rate_hz / (1 + pc.clock_drop_hz_per_tensor_flop_per_s
                                               * tensor_flops_per_hz)
        return min(top, f)

    def at_clock(self, clock_hz: float) -> "GpuSpec":
        """The same GPU with its SM clock at clock_hz: the clocked rates (tensor cores, fp32,
        exp and shared memory, which are per clock) scale; memory bandwidths do not."""
        if abs(clock_hz - self.clock_hz) < 1.0:
            return self
        k = clock_hz / self.clock_hz
        data = self.model_dump()
        data["clock_hz"] = clock_hz
        data["fp32_flops_per_s"] = self.fp32_flops_per_s * k
        for key in ("tensor_flops_per_s_achievable",):
            if data.get(key):
                data[key] = {dt: (v * k if v else v) for dt, v in data[key].items()}
        if not data.get("tensor_flops_per_s_achievable"):
            data["tensor_flops_per_s_achievable"] = {
                dt: (v * k if v else v) for dt, v in data["tensor_flops_per_s"].items()}
            data["sources"]["tensor_flops_per_s_achievable"] = "the datasheet peak at the clock"
        return GpuSpec.model_validate(data)

    def with_(self, **changes) -> "GpuSpec":
        data = self.model_dump()
        data.update(changes)
        return GpuSpec.model_validate(data)


def available_gpus() -> list[str]:
    return sorted(p.stem for p in GPU_CONFIG_DIR.glob("*.yaml"))


def _known_names() -> list[str]:
    return sorted(k for k, v in SHORT_NAMES.items() if (GPU_CONFIG_DIR / f"{v}.yaml").is_file())


def _resolve(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if p.is_dir():
            raise IosimError(f"GPU config {name_or_path} is a directory, not a YAML file")
        if not p.is_file():
            raise IosimError(f"GPU config file not found: {name_or_path}")
        return p
    stem = SHORT_NAMES.get(name_or_path.lower(), name_or_path.lower())
    candidate = GPU_CONFIG_DIR / f"{stem}.yaml"
    if not candidate.is_file():
        raise IosimError(
            f"unknown GPU {name_or_path!r}; choose one of {', '.join(_known_names())} "
            f"or give a path to a YAML file")
    return candidate


def load_gpu(name_or_path: "str | GpuSpec") -> GpuSpec:
    """Load a GpuSpec by short name (a100, h100, h200), config stem, or YAML path."""
    if isinstance(name_or_path, GpuSpec):
        return name_or_path
    from .textfiles import read_yaml
    path = _resolve(str(name_or_path))
    data = read_yaml(path, "GPU config")
    if not isinstance(data, dict):
        raise IosimError(f"{path} must hold a mapping of GPU figures")
    try:   # files are held to the plausible ranges (PLAUSIBLE); derived specs are not
        return GpuSpec.model_validate(data, context={"plausible": True})
    except ValueError as exc:       # only the pydantic models raise: pydantic is loaded
        from .hardware_schema import first_error
        raise IosimError(f"invalid GPU config {path.name}: {first_error(exc)}") from None


# ---- the check of a mapping of figures ------------------------------------------------------
_BAD = object()
_RULES: dict = {}


def _rules(cls) -> dict:
    """name → (kind, optional, bounds, required) of a spec class's fields; kind: int, float,
    bool, str, dict (the sources), a spec class, or None for any other annotation (a mapping
    with that field is left to the pydantic models)."""
    rules = _RULES.get(cls)
    if rules is None:
        kinds = {"int": int, "float": float, "bool": bool, "str": str, "dict[str, str]": dict,
                 "tuple[tuple[float, float], ...]": tuple,
                 **{c.__name__: c for c in (TensorRates, PowerCappedClock, TripLatencyCurve,
                                            Features)}}
        rules = {}
        for f in dataclasses.fields(cls):
            t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
            optional = t.startswith("Optional[")
            kind = kinds.get(t[len("Optional["):-1] if optional else t)
            rules[f.name] = (kind, optional, f.metadata, f.default is dataclasses.MISSING)
        _RULES[cls] = rules
    return rules


def _value(name: str, rule: tuple, v, plausible: bool):
    """The field's value if v passes its rule as it is (ints widened for float fields), else
    _BAD (the pydantic models then decide)."""
    kind, optional, bounds, _ = rule
    if kind is None:
        return _BAD
    if v is None:
        return None if optional else _BAD
    if issubclass(kind, _Spec):
        return _checked(kind, v, plausible) or _BAD
    if kind is tuple:      # [x, y] pairs of finite numbers
        if type(v) not in (list, tuple) or not all(
                type(p) in (list, tuple) and len(p) == 2
                and all(type(x) in (int, float) and math.isfinite(x) for x in p) for p in v):
            return _BAD
        return tuple((float(x), float(y)) for x, y in v)
    t = type(v)
    if kind is float:
        if t is not float and t is not int or not math.isfinite(v):
            return _BAD
        v = float(v)
    elif t is not kind or kind is dict and not all(type(k) is str and type(x) is str
                                                   for k, x in v.items()):
        return _BAD
    if kind is int or kind is float:
        if (("gt" in bounds and not v > bounds["gt"]) or ("ge" in bounds and not v >= bounds["ge"])
                or ("le" in bounds and not v <= bounds["le"])):
            return _BAD
        lo, hi = PLAUSIBLE.get(name, (None, None))
        if plausible and lo is not None and not lo <= v <= hi:
            return _BAD
    return dict(v) if kind is dict else v


def _checked(cls, data, plausible: bool):
    """The spec of `data` if every figure passes its rule as it is, else None."""
    if type(data) is not dict:
        return None
    rules = _rules(cls)
    if not data.keys() <= rules.keys():
        return None
    kw = {}
    for name, rule in rules.items():
        if name in data:
            v = _value(name, rule, data[name], plausible)
            if v is _BAD:
                return None
            kw[name] = v
        elif rule[3]:
            return None
    spec = cls(**kw)
    return spec if spec._problem() is None else None
