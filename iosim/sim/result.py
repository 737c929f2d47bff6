"""SimResult: what a simulation predicts, with stable keys for JSON (docs/simulator.md)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .timeline import Timeline

RESOURCES = ("dram", "l2", "tensor", "exp", "alu")
BOUND_THRESHOLD = 0.7   # a resource busy ≥ 70% of the time binds; otherwise "latency"


@dataclass
class KernelResult:
    name: str
    start_s: float
    end_s: float
    num_ctas: int
    ctas_per_sm: int
    waves: float
    l2_to_sm_bytes: int
    sm_to_l2_bytes: int
    dram_read_bytes: float
    dram_write_bytes: float
    busy_s: dict            # resource → seconds busy (summed over SMs for per-SM units)
    utilization: dict       # resource → busy / (capacity × time)
    bound_by: str
    # load bytes that hit in the SMs' L1 (Load.l1; sim/l1.py): not in l2_to_sm_bytes
    l1_hit_bytes: float = 0

    @property
    def time_s(self) -> float:
        return self.end_s - self.start_s

    def to_dict(self) -> dict:
        return {"name": self.name, "start_s": self.start_s, "end_s": self.end_s,
                "time_s": self.time_s, "num_ctas": self.num_ctas,
                "ctas_per_sm": self.ctas_per_sm, "waves": self.waves,
                "l2_to_sm_bytes": self.l2_to_sm_bytes, "sm_to_l2_bytes": self.sm_to_l2_bytes,
                "l1_hit_bytes": self.l1_hit_bytes,
                "dram_read_bytes": self.dram_read_bytes,
                "dram_write_bytes": self.dram_write_bytes,
                "busy_s": {r: self.busy_s[r] for r in RESOURCES},
                "utilization": {r: self.utilization[r] for r in RESOURCES},
                "bound_by": self.bound_by}


@dataclass
class SimResult:
    """Predicted time and traffic of one Schedule on one GPU.

    Bytes: l2_to_sm / sm_to_l2 are what the SMs load and store (the papers' "HBM accesses");
    dram_read / dram_write are what passes between L2 and DRAM after the L2 model
    (dram_write includes the end-of-schedule flush of dirty lines, also given alone).
    """

    mode: str
    algorithm: str
    gpu: str
    time_s: float
    bound_by: str
    kernels: list
    busy_s: dict
    utilization: dict
    l2_to_sm_bytes: int
    sm_to_l2_bytes: int
    dram_read_bytes: float
    dram_write_bytes: float
    dram_write_flush_bytes: float
    l2_load_hit_bytes: float
    l2_load_miss_bytes: float
    stall_s: dict                    # memory / tensor / exp / alu: CTA-seconds blocked
    cta_time_s: float                # Σ over CTAs of (end − start)
    timeline: Timeline = field(repr=False)
    model: dict = field(default_factory=dict)   # settings and sampling of the model

    @property
    def l2_hit_rate(self) -> float:
        loads = self.l2_load_hit_bytes + self.l2_load_miss_bytes
        return self.l2_load_hit_bytes / loads if loads else 1.0

    @property
    def dram_bytes(self) -> float:
        return self.dram_read_bytes + self.dram_write_bytes

    def timeline_df(self):
        """The per-CTA timeline as a pandas DataFrame (one row per CTA)."""
        return self.timeline.to_dataframe()

    def to_dict(self) -> dict:
        stall_total = sum(self.stall_s[k] for k in ("memory", "tensor", "exp", "alu"))
        return {
            "mode": self.mode,
            "algorithm": self.algorithm,
            "gpu": self.gpu,
            "time_s": self.time_s,
            "bound_by": self.bound_by,
            "busy_s": {r: self.busy_s[r] for r in RESOURCES},
            "utilization": {r: self.utilization[r] for r in RESOURCES},
            "bytes": {
                "l2_to_sm": self.l2_to_sm_bytes,
                "sm_to_l2": self.sm_to_l2_bytes,
                "dram_read": self.dram_read_bytes,
                "dram_write": self.dram_write_bytes,
                "dram_write_flush": self.dram_write_flush_bytes,
                "l2_load_hit": self.l2_load_hit_bytes,
                "l2_load_miss": self.l2_load_miss_bytes,
            },
            "l2_hit_rate": self.l2_hit_rate,
            "stall_s": {k: self.stall_s[k] for k in ("memory", "tensor", "exp", "alu")},
            "stall_fraction": {k: (self.stall_s[k] / self.cta_time_s if self.cta_time_s else 0.0)
                               for k in ("memory", "tensor", "exp", "alu")},
            "stall_total_s": stall_total,
            "cta_time_s": self.cta_time_s,
            "timeline_rows": len(self.timeline),
            "kernels": [k.to_dict() for k in self.kernels],
            "model": self.model,
        }


def bound_of(utilization: dict) -> str:
    name = max(RESOURCES, key=lambda r: (utilization[r], -RESOURCES.index(r)))
    return name if utilization[name] >= BOUND_THRESHOLD else "latency"
