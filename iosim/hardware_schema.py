"""The pydantic models of the GPU specs (hardware.py), built from the spec dataclasses' fields
when a mapping of figures fails hardware's own check: they coerce what pydantic accepts (a
numeric string, 132.0 for an int) and word the error of what it refuses. Imported only then
(pydantic takes ~0.13 s to import; hardware.py says why)."""
from __future__ import annotations

import dataclasses
from typing import Optional, get_type_hints

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, create_model,
                      field_validator, model_validator)

from . import hardware as hw


class _Rates(BaseModel):
    """TensorRates: every field a finite number, held to PLAUSIBLE in files."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _finite_number(cls, v):
        return hw._number(v)

    @field_validator("*")
    @classmethod
    def _in_range(cls, v, info: ValidationInfo):
        return hw._plausible(info.field_name, v, bool((info.context or {}).get("plausible")))


class _Plain(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Gpu(BaseModel):
    """GpuSpec: int and float figures finite numbers, all held to PLAUSIBLE in files, every
    figure with a source (GpuSpec._problem)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _finite_number(cls, v, info: ValidationInfo):
        if cls.model_fields[info.field_name].annotation in (int, float):
            return hw._number(v)
        return v

    @field_validator("*")
    @classmethod
    def _in_range(cls, v, info: ValidationInfo):
        return hw._plausible(info.field_name, v, bool((info.context or {}).get("plausible")))

    @model_validator(mode="after")
    def _every_figure_has_a_source(self):
        problem = hw.GpuSpec._built(self.model_dump())._problem()
        if problem:
            raise ValueError(problem)
        return self


_BASES = {hw.TensorRates: _Rates, hw.PowerCappedClock: _Plain, hw.TripLatencyCurve: _Plain,
          hw.Features: _Plain,
          hw.GpuSpec: _Gpu}
_MODELS: dict = {}


def model_of(cls) -> type:
    """The pydantic model of spec class `cls` (built once per process: four classes)."""
    model = _MODELS.get(cls)
    if model is None:
        hints = get_type_hints(cls)
        fields = {}
        for f in dataclasses.fields(cls):
            t = hints[f.name]
            inner = [a for a in getattr(t, "__args__", ()) if a is not type(None)]
            if t in _BASES:
                t = model_of(t)
            elif len(inner) == 1 and inner[0] in _BASES:
                t = Optional[model_of(inner[0])]
            default = ... if f.default is dataclasses.MISSING else f.default
            fields[f.name] = (t, Field(default, **f.metadata))
        model = _MODELS[cls] = create_model(cls.__name__, __base__=_BASES[cls],
                                            __module__=__name__, **fields)
    return model


def validate(cls, data, plausible: bool):
    """The spec of `data` as pydantic validates it; raises its ValidationError."""
    m = model_of(cls).model_validate(data, context={"plausible": plausible})
    return cls._built(m.model_dump())


def first_error(exc: ValidationError) -> str:
    """`field.path: message` of pydantic's first error."""
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"]) or "spec"
    return f"{loc}: {err['msg'].removeprefix('Value error, ')}"
