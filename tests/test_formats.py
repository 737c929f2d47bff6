"""File formats: scenario and sweep YAMLs and measurement CSVs are typed; a bad file is refused
in one line naming file:field."""
import pytest

from iosim.errors import IosimError
from iosim.formats import load_measurements, load_scenario_file, load_sweep
from iosim.paths import VALIDATION_DIR
from iosim.scenarios import available_scenarios, load_scenario


def _file(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_every_bundled_scenario_validates():
    for name in available_scenarios():
        assert load_scenario(name)["description"]


def test_scenario_causal_as_a_string_is_refused_with_file_and_field(tmp_path):
    p = _file(tmp_path, "s.yaml", 'seq_q: 1024\ncausal: "no"\n')
    with pytest.raises(IosimError, match=r"^s.yaml:causal: Input should be a valid boolean"):
        load_scenario_file(p)


def test_scenario_algorithms_as_a_string_is_refused_as_not_a_list(tmp_path):
    p = _file(tmp_path, "s.yaml", "algorithms: fa2\n")
    with pytest.raises(IosimError, match=r"^s.yaml:algorithms: Input should be a valid list"):
        load_scenario_file(p)


def test_scenario_unknown_field_is_named(tmp_path):
    p = _file(tmp_path, "s.yaml", "seq_q: 1024\nsequence: 5\n")
    with pytest.raises(IosimError, match=r"^s.yaml: unknown field\(s\) sequence; known: "):
        load_scenario_file(p)


def test_scenario_unknown_algorithm_is_named(tmp_path):
    p = _file(tmp_path, "s.yaml", "algorithm: fa9\n")
    with pytest.raises(IosimError, match=r"s.yaml:algorithm: unknown algorithm 'fa9'"):
        load_scenario_file(p)


def test_binary_file_is_refused_with_its_name(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(IosimError, match=r"scenario .*s.yaml is not UTF-8 text"):
        load_scenario_file(p)


def test_unsafe_yaml_tag_is_refused_not_constructed(tmp_path):
    p = _file(tmp_path, "sw.yaml", '!!python/object/apply:os.system ["true"]\n')
    with pytest.raises(IosimError, match=r"malformed YAML in sweep .*sw.yaml at line 1"):
        load_sweep(p)


def test_the_committed_sweep_and_measurements_validate():
    assert len(load_sweep(VALIDATION_DIR / "sweep.yaml")["configs"]) == 41
    assert len(load_measurements(VALIDATION_DIR / "measured_h200.csv")) == 40


def test_sweep_configs_must_be_a_list(tmp_path):
    p = _file(tmp_path, "sw.yaml", "configs: 5\n")
    with pytest.raises(IosimError, match=r"^sw.yaml:configs: Input should be a valid list"):
        load_sweep(p)


@pytest.mark.parametrize("missing", ["algorithm", "direction"])
def test_sweep_config_missing_a_required_field_names_it(tmp_path, missing):
    fields = {"id": "a", "impl": "iosim", "algorithm": "fa2", "direction": "fwd", "seq_q": 512}
    del fields[missing]
    body = "".join(f"  {k}: {v}\n" for k, v in fields.items()).replace("  ", "- ", 1)
    p = _file(tmp_path, "sw.yaml", "configs:\n" + body)
    with pytest.raises(IosimError, match=rf"^sw.yaml:configs.0.{missing}: Field required"):
        load_sweep(p)


def test_sweep_ids_must_be_unique(tmp_path):
    one = "- {id: a, impl: iosim, algorithm: fa2, direction: fwd}\n"
    p = _file(tmp_path, "sw.yaml", "configs:\n" + one + one)
    with pytest.raises(IosimError, match="'a' appears twice"):
        load_sweep(p)


def test_measurement_with_zero_ncu_time_is_refused_with_line_and_column(tmp_path):
    p = _file(tmp_path, "m.csv", "id,time_s,ncu_time_s\na,0.001,0.0005\nb,0.002,0\n")
    with pytest.raises(IosimError, match=r"^m.csv:line 3:ncu_time_s: Input should be greater than 0"):
        load_measurements(p)


def test_measurement_blank_cells_mean_not_measured(tmp_path):
    p = _file(tmp_path, "m.csv", "id,time_s,ncu_time_s,dram_read_bytes\na,0.001,,nan\n")
    assert load_measurements(p) == {"a": {"id": "a", "time_s": "0.001", "ncu_time_s": "",
                                          "dram_read_bytes": "nan"}}


def test_measurement_time_must_be_finite(tmp_path):
    p = _file(tmp_path, "m.csv", "id,time_s\na,inf\n")
    with pytest.raises(IosimError, match=r"^m.csv:line 2:time_s: Input should be a finite number"):
        load_measurements(p)


def test_every_bundled_yaml_parses_alike_with_libyaml_and_pure_python():
    import yaml

    from iosim.textfiles import _FAST_SAFE_LOADER, read_yaml
    from iosim.paths import DATA_DIR
    paths = sorted(DATA_DIR.rglob("*.yaml"))
    assert len(paths) >= 5
    for path in paths:
        text = path.read_text(encoding="utf-8")
        pure = yaml.load(text, Loader=yaml.SafeLoader)
        assert yaml.load(text, Loader=_FAST_SAFE_LOADER) == pure, path
        assert read_yaml(path, "data file") == pure, path


def test_a_user_yaml_with_a_tab_inside_a_plain_key_is_refused_as_pure_python_refuses_it(tmp_path):
    from iosim.textfiles import read_yaml
    bad = tmp_path / "gpu.yaml"
    bad.write_text("name: x\nsm\tcount: 3\n")     # libyaml alone would accept it
    with pytest.raises(IosimError, match="malformed YAML .* line 2"):
        read_yaml(bad, "GPU config")
