"""hardware.py takes a well-formed mapping of GPU figures without pydantic (hardware._checked)
and hands every other one to the pydantic models (hardware_schema.py): whatever the fast check
accepts, pydantic accepts with the same figures, and what it refuses pydantic decides."""
import math
import subprocess
import sys

import pytest

from iosim import hardware, hardware_schema
from iosim.hardware import GpuSpec, PLAUSIBLE, available_gpus, load_gpu


def _pydantic(data, plausible=True):
    """pydantic's verdict: the validated dump, or the first error's text."""
    try:
        m = hardware_schema.model_of(GpuSpec).model_validate(data,
                                                             context={"plausible": plausible})
    except ValueError as exc:
        return hardware_schema.first_error(exc)
    return m.model_dump()


@pytest.mark.parametrize("name", available_gpus())
def test_a_bundled_gpu_passes_the_fast_check_with_pydantics_figures(name):
    from iosim.textfiles import read_yaml
    data = read_yaml(hardware._resolve(name), "GPU config")
    fast = hardware._checked(GpuSpec, data, True)
    assert fast is not None
    assert fast.model_dump() == _pydantic(data)
    # ints in the file stay ints where the field is an int, floats where it is a float
    assert type(fast.sm_count) is int and type(fast.clock_hz) is float


def test_loading_a_bundled_gpu_does_not_import_pydantic():
    code = ("import sys; from iosim.hardware import load_gpu; g = load_gpu('h100'); "
            "g.at_clock(1.5e9); g.with_(sm_count=66); print('pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_int_written_for_a_float_figure_is_widened_as_pydantic_widens_it():
    data = load_gpu("h100").model_dump()
    data["clock_hz"] = 1_980_000_000
    fast = hardware._checked(GpuSpec, data, True)
    assert type(fast.clock_hz) is float and fast.model_dump() == _pydantic(data)


def test_a_numeric_string_goes_to_pydantic_which_coerces_it(tmp_path):
    import yaml
    data = load_gpu("h100").model_dump()
    data["sm_count"] = "132"
    assert hardware._checked(GpuSpec, data, True) is None
    p = tmp_path / "gpu.yaml"
    p.write_text(yaml.safe_dump(data))
    assert load_gpu(str(p)).sm_count == 132


# one figure changed: (field, value); nested fields as "outer.inner"
MUTATIONS = [(f, v) for f in ("sm_count", "clock_hz", "l2_latency_s", "dram_latency_s",
                              "l2_reduce_bandwidth_bytes_per_s", "mma_sync_exposed_fraction_one_warp",
                              "tensor_flops_per_s.fp16", "tensor_flops_per_s.fp8",
                              "power_capped_clock.clock_drop_hz_per_tensor_flop_per_s",
                              "features.tma", "mma_sync_operands_overlap", "name")
             for v in (0, -1, 1, 0.5, 1.5, 132, 132.0, 1e9, 2e9, 1e300, math.inf, math.nan,
                       True, None, "132", [1])]


@pytest.mark.parametrize("plausible", [True, False])
def test_whatever_the_fast_check_accepts_pydantic_accepts_alike(plausible):
    base = load_gpu("h100").model_dump()
    for path, value in MUTATIONS:
        data = load_gpu("h100").model_dump()
        outer, _, inner = path.partition(".")
        if inner:
            data[outer][inner] = value
        else:
            data[outer] = value
        fast = hardware._checked(GpuSpec, data, plausible)
        slow = _pydantic(data, plausible)
        if fast is not None:
            assert fast.model_dump() == slow, (path, value)
        elif isinstance(slow, dict):      # refused by the fast check only: pydantic's figures
            assert GpuSpec.model_validate(data, context={"plausible": plausible}).model_dump() \
                == slow, (path, value)
    assert base == load_gpu("h100").model_dump()


def test_an_unknown_or_missing_key_is_left_to_pydantic_and_its_error():
    data = load_gpu("h100").model_dump()
    data["warp_drive_hz"] = 1
    assert hardware._checked(GpuSpec, data, True) is None
    assert _pydantic(data) == "warp_drive_hz: Extra inputs are not permitted"
    del data["warp_drive_hz"], data["sm_count"]
    assert hardware._checked(GpuSpec, data, True) is None
    assert _pydantic(data) == "sm_count: Field required"


def test_the_sources_rule_refuses_in_both_paths_with_one_message():
    data = load_gpu("h100").model_dump()
    del data["sources"]["l2_capacity_bytes"]
    assert hardware._checked(GpuSpec, data, True) is None
    assert _pydantic(data) == "spec: no source given for: l2_capacity_bytes"


def test_json_round_trip_and_copy_keep_the_spec():
    g = load_gpu("h200")
    assert GpuSpec.model_validate_json(g.model_dump_json()) == g
    c = g.model_copy(update={"cta_turnover_cycles": None})
    assert c.cta_turnover_cycles is None and c.sm_count == g.sm_count and g.cta_turnover_cycles
    assert list(type(g).model_fields)[:3] == ["name", "short_name", "sm_count"]


def test_plausible_ranges_cover_only_known_figures():
    known = set(GpuSpec.model_fields) | set(hardware.TensorRates.model_fields)
    assert set(PLAUSIBLE) <= known


def test_a_field_of_another_type_leaves_the_check_to_pydantic():
    """A spec field whose annotation the fast check has no rule for (here a tuple of ints) is
    not guessed at: a mapping with it goes to the pydantic models, which validate it."""
    import dataclasses

    @hardware._spec
    class Probe(hardware._Spec):
        n: int = hardware._figure(gt=0)
        shape: "tuple[int, int]" = hardware._figure((1, 1))

    assert hardware._rules(Probe)["shape"][0] is None
    assert hardware._checked(Probe, {"n": 3}, False) == Probe(n=3)
    assert hardware._checked(Probe, {"n": 3, "shape": (2, 4)}, False) is None
    assert dataclasses.fields(Probe)[1].default == (1, 1)
