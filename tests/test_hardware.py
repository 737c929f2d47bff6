import pytest
import yaml

from iosim.errors import IosimError
from iosim.hardware import available_gpus, load_gpu


@pytest.mark.parametrize("name", ["a100", "h100", "h200"])
def test_bundled_gpus_load_and_every_figure_has_a_source(name):
    g = load_gpu(name)
    numeric = [k for k in type(g).model_fields
               if k not in ("name", "short_name", "sources", "features") and getattr(g, k) is not None]
    assert set(g.sources) == set(numeric)


def test_h100_exp_rate_is_16_per_sm_per_clock():
    g = load_gpu("h100")
    assert g.exp_per_s == pytest.approx(132 * 16 * g.clock_hz)
    assert g.clock_hz == 1.98e9   # the maximum boost clock; the power cap lowers it under load


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
    for block in ("tensor_flops_per_s_achievable", "power_capped_clock"):
        figures.update({f"{block}.{k}": v for k, v in (raw.pop(block, None) or {}).items()})
        figures.pop(block, None)
    for name, points in (figures.pop("dram_trip_latency", None) or {}).items():
        figures.update({f"dram_trip_latency.{name}.{i}.{j}": x
                        for i, p in enumerate(points) for j, x in enumerate(p)})
    figures.update({f"l2_residency_miss_curve.{i}.{j}": x for i, p in
                    enumerate(figures.pop("l2_residency_miss_curve", None) or ())
                    for j, x in enumerate(p)})
    assert [k for k, v in figures.items() if not (v is None or isinstance(v, (int, float)))] == []


def test_predictions_use_the_achievable_tensor_rate_and_the_datasheet_peak_is_kept():
    g = load_gpu("h100")
    assert g.tensor_peak_rate("fp16") == 989.4e12
    assert g.tensor_rate("fp16") == g.tensor_flops_per_s_achievable.fp16


def test_power_capped_clock_is_the_fixed_point_of_the_measured_line():
    g = load_gpu("h200-calibrated")
    pc = g.power_capped_clock
    per_hz = 774.2e12 / 1447.5e6                  # the GEMM's FLOPs per clock
    f = g.sustained_clock_hz(per_hz)
    assert f == pytest.approx(pc.clock_at_zero_tensor_rate_hz
                              - pc.clock_drop_hz_per_tensor_flop_per_s * per_hz * f)
    assert 1.40e9 < f < 1.50e9                    # nvidia-smi read 1447.5 MHz under the GEMM
    assert g.sustained_clock_hz(0.0) == min(g.clock_hz, g.sm_clock_counted_max_hz or g.clock_hz)


def test_at_clock_scales_clocked_rates_and_keeps_memory_bandwidth():
    g = load_gpu("h200-calibrated")
    h = g.at_clock(g.clock_hz / 2)
    assert h.tensor_rate("fp16") == pytest.approx(g.tensor_rate("fp16") / 2)
    assert h.exp_per_s == pytest.approx(g.exp_per_s / 2)
    assert h.alu_ops_per_s == pytest.approx(g.alu_ops_per_s / 2)
    assert h.dram_bandwidth_bytes_per_s == g.dram_bandwidth_bytes_per_s
