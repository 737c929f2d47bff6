"""A sweep grid: `iosim run` option names (underscores) mapped to a list of values (one axis
of the cartesian product) or a scalar (fixed), validated by a pydantic model.

    gpu: [h100, a100, my-gpu.yaml]
    algo: [fa2, fa3]
    seq: [1024, 4096, 16384]
    head_dim: 128
    l2_capacity_scale: [0.5, 1, 2]      # what-if: the GPU with half / twice its L2

Points are enumerated in the file's key order, the last key varying fastest, so the row order
of a sweep follows the grid file and nothing else.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import IosimError

# GPU figures a grid may scale, and the GpuSpec fields each scales
GPU_SCALES = {
    "l2_capacity_scale": ("l2_capacity_bytes",),
    "dram_bandwidth_scale": ("dram_bandwidth_bytes_per_s",),
    "shared_memory_scale": ("shared_memory_per_sm_bytes", "shared_memory_per_block_bytes"),
}


def _axis():
    """A list of values (at least one); scalars are wrapped by the model validator."""
    return Field(default=None, min_length=1)


class Grid(BaseModel):
    """Every key an `iosim sweep` grid accepts; each holds the list of values it takes."""

    model_config = ConfigDict(extra="forbid")

    algo: Optional[list[str]] = _axis()
    gpu: Optional[list[str]] = _axis()
    batch: Optional[list[int]] = _axis()
    heads: Optional[list[int]] = _axis()
    kv_heads: Optional[list[int]] = _axis()
    seq: Optional[list[int]] = _axis()
    seq_kv: Optional[list[int]] = _axis()
    head_dim: Optional[list[int]] = _axis()
    dtype: Optional[list[Literal["fp16", "bf16", "fp8"]]] = _axis()
    causal: Optional[list[bool]] = _axis()
    direction: Optional[list[Literal["fwd", "bwd", "fwd+bwd"]]] = _axis()
    block_q: Optional[list[int]] = _axis()
    block_kv: Optional[list[int]] = _axis()
    stages: Optional[list[int]] = _axis()
    warps: Optional[list[int]] = _axis()
    model: Optional[list[Literal["sim", "roofline"]]] = _axis()
    mode: Optional[list[Literal["fast", "exact"]]] = _axis()
    l2_samples: Optional[list[int]] = _axis()
    l2_capacity_scale: Optional[list[float]] = _axis()
    dram_bandwidth_scale: Optional[list[float]] = _axis()
    shared_memory_scale: Optional[list[float]] = _axis()

    @model_validator(mode="before")
    @classmethod
    def _scalars_are_fixed_axes(cls, data):
        if isinstance(data, dict):
            return {k: (v if isinstance(v, list) else [v]) for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _values_in_range(self):
        for name in ("batch", "heads", "kv_heads", "seq", "seq_kv", "head_dim", "block_q",
                     "block_kv", "stages", "warps", "l2_samples", *GPU_SCALES):
            for i, v in enumerate(getattr(self, name) or []):
                if v <= 0:
                    raise ValueError(f"{name}.{i}: must be > 0, got {v}")
        return self

    def axes(self) -> dict:
        """The keys the grid sets, in the file's order, each with its values."""
        return {k: getattr(self, k) for k in self.model_fields_set if getattr(self, k)}


def load_grid(source) -> tuple[Grid, list[str]]:
    """(grid, key order) from a YAML path or a dict; errors name the file and the field."""
    if isinstance(source, dict):
        data, where = source, "grid"
    else:
        path = Path(source)
        where = str(source)
        if not path.is_file():
            raise IosimError(f"grid file not found: {source}")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise IosimError(f"{where}{f':{mark.line + 1}' if mark else ''}: malformed YAML") \
                from None
    if not isinstance(data, dict) or not data:
        raise IosimError(f"{where}: a grid maps `iosim run` option names to values")
    data = {str(k).replace("-", "_"): v for k, v in data.items()}
    try:
        grid = Grid.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key; a grid takes: {', '.join(Grid.model_fields)}"
        raise IosimError(f"{where}:{loc}: {msg}" if loc else f"{where}:{msg}") from None
    base = None if isinstance(source, dict) else Path(source).parent
    grid.gpu = [_check_gpu(g, i, where, base) for i, g in enumerate(grid.gpu or [])] or None
    return grid, [k for k in data if data[k] is not None]


def _check_gpu(name: str, i: int, where: str, base: Path | None) -> str:
    """A GPU name or YAML path that loads; a relative path is tried from the working
    directory, then from the grid file's folder."""
    from ..hardware import load_gpu
    if base is not None and not Path(name).exists() and (base / name).is_file():
        name = str(base / name)
    try:
        load_gpu(name)
    except IosimError as exc:
        raise IosimError(f"{where}:gpu.{i}: {exc}") from None
    return name


def points(grid: Grid, order: list[str]) -> list[dict]:
    """The cartesian product as dicts, first key slowest, last key fastest."""
    axes = grid.axes()
    keys = [k for k in order if k in axes]
    return [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))]


def point_id(point: dict) -> str:
    """A stable text key of a point (sorted keys), for resuming a sweep."""
    return json.dumps(point, sort_keys=True, separators=(",", ":"))
