import pytest
import yaml

from iosim.errors import IosimError
from iosim.hardware import available_gpus, load_gpu


@pytest.mark.parametrize("name", ["a100", "h100", "h200"])
def test_bundled_gpus_load_and_every_figure_has_a_source(name):
    g = load_gpu(name)
    numeric = [k for k in type(g).model_fields if k not in ("name", "short_name", "sources", "features")]
    assert set(g.sources) == set(numeric)


def test_h100_exp_rate_is_16_per_sm_per_clock():
    g = load_gpu("h100")
    assert g.exp_per_s == pytest.approx(132 * 16 * 1.83e9)


def test_h200_differs_from_h100_in_memory_not_compute():
    h100, h200 = load_gpu("h100"), load_gpu("h200")
    assert h200.tensor_flops_per_s == h100.tensor_flops_per_s
    assert h200.dram_bandwidth_bytes_per_s / h100.dram_bandwidth_bytes_per_s == pytest.approx(4.8 / 3.35)


def test_short_names_and_config_stems_both_work():
    assert load_gpu("h100") == load_gpu("h100-sxm5-80gb")
    assert len(available_gpus()) >= 3


def _write(tmp_path, data):
    p = tmp_path / "gpu.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_negative_bandwidth_is_refused(tmp_path):
    data = load_gpu("h100").model_dump()
    data["dram_bandwidth_bytes_per_s"] = -1.0
    with pytest.raises(IosimError, match="dram_bandwidth_bytes_per_s"):
        load_gpu(str(_write(tmp_path, data)))


def test_unknown_field_is_refused(tmp_path):
    data = load_gpu("h100").model_dump()
    data["warp_drive_hz"] = 1
    with pytest.raises(IosimError, match="warp_drive_hz"):
        load_gpu(str(_write(tmp_path, data)))


def test_figure_without_source_is_refused(tmp_path):
    data = load_gpu("h100").model_dump()
    del data["sources"]["l2_capacity_bytes"]
    with pytest.raises(IosimError, match="no source given for: l2_capacity_bytes"):
        load_gpu(str(_write(tmp_path, data)))


def test_malformed_yaml_names_the_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\nsm_count: [1, 2\n")
    with pytest.raises(IosimError, match="malformed YAML"):
        load_gpu(str(p))


def test_unknown_gpu_lists_choices():
    with pytest.raises(IosimError, match="choose one of a100, h100, h200"):
        load_gpu("rtx9090")


@pytest.mark.parametrize("stem", available_gpus())
def test_config_figures_are_yaml_numbers_not_strings(stem):
    from iosim.paths import GPU_CONFIG_DIR
    raw = yaml.safe_load((GPU_CONFIG_DIR / f"{stem}.yaml").read_text())
    figures = {k: v for k, v in raw.items() if k not in ("name", "short_name", "sources", "features")}
    figures.update({f"tensor.{k}": v for k, v in raw["tensor_flops_per_s"].items()})
    figures.pop("tensor_flops_per_s")
    assert [k for k, v in figures.items() if not (v is None or isinstance(v, (int, float)))] == []
