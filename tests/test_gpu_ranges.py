"""GPU files are held to finite, positive, plausible figures (hardware.PLAUSIBLE); specs
derived in code (GpuSpec.with_) only to finite and positive."""
import pytest
import yaml

from iosim.errors import IosimError
from iosim.hardware import PLAUSIBLE, available_gpus, load_gpu


def _spec_file(tmp_path, **changes):
    data = load_gpu("h100").model_dump()
    for key, value in changes.items():
        if key in data["tensor_flops_per_s"]:
            data["tensor_flops_per_s"][key] = value
        else:
            data[key] = value
    p = tmp_path / "gpu.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_every_bundled_gpu_is_inside_the_plausible_ranges():
    for name in available_gpus():
        g = load_gpu(name)
        assert PLAUSIBLE["clock_hz"][0] <= g.clock_hz <= PLAUSIBLE["clock_hz"][1]


@pytest.mark.parametrize("field,value,fragment", [
    ("dram_bandwidth_bytes_per_s", float("inf"), "must be a finite number, got inf"),
    ("l2_latency_s", float("nan"), "must be a finite number, got nan"),
    ("clock_hz", 1e-300, "clock_hz: 1e-300 is outside the plausible range 1e+08 to 5e+09"),
    ("clock_hz", 1830.0, "outside the plausible range"),          # MHz written as Hz
    ("sm_count", True, "sm_count: must be a number, got True"),
    ("sm_count", 100000, "sm_count: 100000 is outside the plausible range 1 to 1024"),
    ("fp16", 989.0, "tensor_flops_per_s.fp16: 989 is outside the plausible range"),   # TFLOP/s
    ("dram_bandwidth_bytes_per_s", 3350.0, "outside the plausible range 1e+09 to 1e+14"),
])
def test_implausible_figures_are_refused_naming_file_and_field(tmp_path, field, value, fragment):
    with pytest.raises(IosimError, match="invalid GPU config gpu.yaml: ") as exc:
        load_gpu(str(_spec_file(tmp_path, **{field: value})))
    assert fragment in str(exc.value)


def test_a_derived_spec_may_leave_the_plausible_ranges_but_not_be_infinite():
    h100 = load_gpu("h100")
    big = h100.with_(shared_memory_per_block_bytes=2 ** 32, shared_memory_per_sm_bytes=2 ** 32)
    assert big.shared_memory_per_sm_bytes == 2 ** 32        # the lesson's M sweep needs this
    with pytest.raises(ValueError, match="finite"):
        h100.with_(clock_hz=float("inf"))


def test_a_directory_as_gpu_is_named_as_a_directory(tmp_path):
    with pytest.raises(IosimError, match="is a directory, not a YAML file"):
        load_gpu(str(tmp_path))
