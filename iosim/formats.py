"""The files iosim reads, as typed models: scenario YAMLs, validation sweep YAMLs and measurement
CSV rows (GPU specs are hardware.GpuSpec). A bad file is refused in one line naming
`file:field`; unsafe YAML tags are never constructed (textfiles.read_yaml). Also the flat records
iosim writes (CSV rows, the API's DataFrame rows).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr,
                      ValidationError, field_validator, model_validator)

from .errors import IosimError
from .problem import DIRECTIONS, DTYPE_BYTES
from .textfiles import read_text, read_yaml  # noqa: F401  (re-exported: formats' readers)

Dtype = Literal[tuple(DTYPE_BYTES)]            # type: ignore[valid-type]
Direction = Literal[tuple(DIRECTIONS)]         # type: ignore[valid-type]


# ---- reading: textfiles.read_text / read_yaml (re-exported) -----------------------------


def field_error(path, exc: ValidationError) -> IosimError:
    """`file:field: message` from pydantic's first error."""
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return IosimError(f"{Path(path).name}:{loc}: {msg}" if loc else f"{Path(path).name}: {msg}")


def validated(model, data, path):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise field_error(path, exc) from None


# ---- models -----------------------------------------------------------------------------
class ProblemFields(BaseModel):
    """The problem vocabulary as it appears in files (AttentionProblem's field names)."""

    model_config = ConfigDict(extra="forbid")
    batch: Optional[StrictInt] = Field(default=None, gt=0)
    heads_q: Optional[StrictInt] = Field(default=None, gt=0)
    heads_kv: Optional[StrictInt] = Field(default=None, gt=0)
    seq_q: Optional[StrictInt] = Field(default=None, gt=0)
    seq_kv: Optional[StrictInt] = Field(default=None, gt=0)
    head_dim: Optional[StrictInt] = Field(default=None, gt=0)
    dtype: Optional[Dtype] = None
    causal: Optional[StrictBool] = None
    direction: Optional[Direction] = None


class TilingFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    block_q: Optional[StrictInt] = Field(default=None, gt=0)
    block_kv: Optional[StrictInt] = Field(default=None, gt=0)
    stages: Optional[StrictInt] = Field(default=None, gt=0)
    warps: Optional[StrictInt] = Field(default=None, gt=0)


def _known_algorithm(name: str) -> str:
    from .algorithms import ALGORITHMS
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; choose from: {', '.join(ALGORITHMS)}")
    return name


class ScenarioFile(ProblemFields, TilingFields):
    """iosim/data/scenarios/*.yaml or a user's scenario: a problem, a GPU, algorithms, tiling.
    Problem or tiling fields not typed here (added to AttentionProblem or the generators'
    tiling keys later) pass through to AttentionProblem / build_schedule, which check them;
    any other key is refused."""

    model_config = ConfigDict(extra="allow")
    description: Optional[StrictStr] = None
    gpu: Optional[StrictStr] = None
    algorithm: Optional[StrictStr] = None
    algorithms: Optional[list[StrictStr]] = Field(default=None, min_length=1)
    seq_range: Optional[Union[StrictStr, StrictInt]] = None

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data):
        from .options import TILING_KEYS
        from .problem import PROBLEM_KEYS
        if isinstance(data, dict):
            known = set(cls.model_fields) | set(PROBLEM_KEYS) | set(TILING_KEYS)
            unknown = sorted(str(k) for k in data if k not in known)
            if unknown:
                raise ValueError(f"unknown field(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(known))}")
        return data

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, v):
        return v if v is None else _known_algorithm(v)

    @field_validator("algorithms")
    @classmethod
    def _algorithms(cls, v):
        return v if v is None else [_known_algorithm(a) for a in v]


class SweepConfig(ProblemFields, TilingFields):
    """One configuration of a validation sweep. Fields other modules add (implementation
    options) pass through untyped."""

    model_config = ConfigDict(extra="allow")
    id: StrictStr = Field(min_length=1)
    impl: StrictStr = Field(min_length=1)
    algorithm: StrictStr
    direction: Direction

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, v):
        return _known_algorithm(v)


class SweepFile(BaseModel):
    model_config = ConfigDict(extra="allow")
    description: Optional[StrictStr] = None
    gpu: Optional[StrictStr] = None
    configs: list[SweepConfig] = Field(min_length=1)

    @field_validator("configs")
    @classmethod
    def _unique_ids(cls, v):
        seen = set()
        for c in v:
            if c.id in seen:
                raise ValueError(f"configuration id {c.id!r} appears twice")
            seen.add(c.id)
        return v


def _blank_to_none(v):
    return None if isinstance(v, str) and v.strip() in ("", "nan", "NaN") else v


class MeasurementRow(BaseModel):
    """One row of measured_h200*.csv: a configuration's times (seconds, > 0) and byte counts
    (≥ 0). Blank cells are "not measured"; other columns pass through."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    id: StrictStr = Field(min_length=1)
    time_s: float = Field(gt=0)
    ncu_time_s: Optional[float] = Field(default=None, gt=0)
    dram_read_bytes: Optional[float] = Field(default=None, ge=0)
    dram_write_bytes: Optional[float] = Field(default=None, ge=0)
    l2_to_sm_read_bytes: Optional[float] = Field(default=None, ge=0)
    lts_bytes: Optional[float] = Field(default=None, ge=0)

    @field_validator("ncu_time_s", "dram_read_bytes", "dram_write_bytes",
                     "l2_to_sm_read_bytes", "lts_bytes", mode="before")
    @classmethod
    def _blanks(cls, v):
        return _blank_to_none(v)


class KernelRow(BaseModel):
    """One row of measured_h200*_kernels.csv: one kernel of a configuration's run, in launch
    order (kernel_index), as Nsight Compute named it. Other columns pass through."""

    model_config = ConfigDict(extra="allow")
    id: StrictStr = Field(min_length=1)
    kernel_index: int = Field(ge=0)
    kernel: StrictStr = Field(min_length=1)


# ---- loaders ----------------------------------------------------------------------------
def load_scenario_file(path: Path) -> dict:
    """A scenario's fields that are set, validated."""
    data = read_yaml(path, "scenario")
    if not isinstance(data, dict):
        raise IosimError(f"{Path(path).name}: a scenario must hold a mapping of fields")
    return validated(ScenarioFile, data, path).model_dump(exclude_none=True)


def load_sweep(path: Path) -> dict:
    """A validation sweep: {description, gpu, configs: [...]}, each config validated."""
    data = read_yaml(path, "sweep")
    if not isinstance(data, dict):
        raise IosimError(f"{Path(path).name}: a sweep must hold a mapping with `configs`")
    return validated(SweepFile, data, path).model_dump(exclude_none=True)


def _validated_rows(path: Path, what: str, model):
    """(line, typed row, text row) of every row of a CSV file, validated by `model` (line
    numbers as in the file, the header being line 1); a clear one-line error otherwise."""
    rows = list(csv.DictReader(io.StringIO(read_text(path, what))))
    for line, row in enumerate(rows, start=2):
        if None in row:
            raise IosimError(f"{Path(path).name}:line {line}: more cells than header columns")
        try:
            yield line, model.model_validate(row), row
        except ValidationError as exc:
            raise field_error(f"{Path(path).name}:line {line}", exc) from None


def load_measurements(path: Path) -> dict:
    """{config id: row} of a measurement CSV, every row validated; the rows keep their text
    values."""
    out = {}
    for line, m, row in _validated_rows(path, "measurements CSV", MeasurementRow):
        if m.id in out:
            raise IosimError(f"{Path(path).name}:line {line}:id: {m.id!r} appears twice")
        out[m.id] = row
    if not out:
        raise IosimError(f"{Path(path).name}: no measurement rows")
    return out


def load_kernel_rows(path: Path) -> dict:
    """{config id: [its kernels' rows in launch order]} of a per-kernel measurement CSV
    (measured_h200*_kernels.csv), every row validated (KernelRow), the rows keeping their text
    values; {} where the file does not exist."""
    if not Path(path).is_file():
        return {}
    runs: dict = {}
    for line, k, row in _validated_rows(path, "kernels CSV", KernelRow):
        if k.kernel_index in runs.setdefault(k.id, {}):
            raise IosimError(f"{Path(path).name}:line {line}: kernel {k.kernel_index} of "
                             f"{k.id!r} appears twice")
        runs[k.id][k.kernel_index] = row
    return {i: [ks[n] for n in sorted(ks)] for i, ks in runs.items()}


def load_kernel_names(path: Path) -> dict:
    """{config id: [kernel names in launch order]} of a per-kernel measurement CSV."""
    return {i: [r["kernel"] for r in rows] for i, rows in load_kernel_rows(path).items()}


# ---- what iosim writes ------------------------------------------------------------------
