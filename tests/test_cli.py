import json

import pytest
from click.testing import CliRunner

from iosim.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_run_json_has_documented_top_level_keys():
    r = run("run", "--gpu", "h100", "--seq", "2048", "--format", "json", "--model", "roofline")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for key in ("algorithm", "gpu", "problem", "tiling", "kernels", "counters", "bounds",
                "roofline", "predicted_time_s", "bound_by", "dram_read_bytes"):
        assert key in d
    assert d["problem"]["seq_q"] == 2048 and d["gpu"] == "h100"


def test_run_table_names_the_binding_resource():
    r = run("run", "--seq", "1024", "--model", "roofline")
    assert r.exit_code == 0
    assert "bound by" in r.output and "L2 → SM" in r.output


@pytest.mark.parametrize("args,fragment", [
    (["run", "--seq", "0"], "'--seq': 0 is not in the range 1<=x<=16777216"),
    (["run", "--gpu", "nope"], "unknown GPU"),
    (["run", "--algo", "fa9"], "unknown algorithm"),
    (["run", "--head-dim", "100"], "unsupported head dim"),
    (["run", "--block-q", "512", "--block-kv", "512"], "would fit"),
    (["run", "--scenario", "no-such-scenario"], "unknown scenario"),
    (["run", "--dtype", "fp64"], "Invalid value for '--dtype'"),      # click's usage errors
    (["run", "--l2-samples", "10"], "Invalid value for '--l2-samples'"),
    (["run", "--no-such-option"], "No such option"),
    (["no-such-command"], "No such command"),
])
def test_bad_input_gives_exit_code_2_and_one_line(args, fragment):
    r = run(*args)
    assert r.exit_code == 2
    assert fragment in r.output
    assert "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_output_file_is_not_overwritten_without_force(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("precious")
    r = run("run", "--seq", "512", "--format", "json", "--model", "roofline", "-o", str(out))
    assert r.exit_code == 2 and out.read_text() == "precious"
    r = run("run", "--seq", "512", "--format", "json", "--model", "roofline", "-o", str(out), "--force")
    assert r.exit_code == 0 and json.loads(out.read_text())["problem"]["seq_q"] == 512


def test_scenario_fields_apply_and_options_override_them():
    r = run("run", "--scenario", "llama3-8b-prefill-8k", "--format", "json", "--model", "roofline")
    d = json.loads(r.output)
    assert (d["problem"]["heads_kv"], d["problem"]["seq_q"], d["problem"]["causal"]) == (8, 8192, True)
    r = run("run", "--scenario", "llama3-8b-prefill-8k", "--seq", "1024", "--format", "json",
            "--model", "roofline")
    assert json.loads(r.output)["problem"]["seq_q"] == 1024


def test_csv_has_a_header_and_one_row():
    r = run("run", "--seq", "512", "--format", "csv", "--model", "roofline")
    lines = r.output.strip().splitlines()
    assert len(lines) == 2 and "predicted_time_s" in lines[0].split(",")


def test_gpus_lists_the_three_bundled_configs():
    r = run("gpus")
    assert r.exit_code == 0
    for stem in ("a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb"):
        assert stem in r.output


def test_same_input_gives_byte_identical_json():
    a = run("run", "--seq", "3000", "--causal", "--format", "json", "--model", "roofline").output
    b = run("run", "--seq", "3000", "--causal", "--format", "json", "--model", "roofline").output
    assert a == b


def test_fa1_with_fewer_ctas_than_sms_is_reported_as_parallelism_bound():
    # FA-1 runs one CTA per (batch, head): 32 CTAs cannot fill an H100's 132 SMs
    r = run("run", "--algo", "fa1", "--seq", "2048", "--format", "json")
    assert json.loads(r.output)["bound_by"] == "parallelism (32 CTAs of fa1_fwd for 132 SMs)"


def test_l2_samples_sets_the_fast_modes_replay_budget():
    def sampled(*extra):
        r = run("run", "--seq", "16384", "--heads", "8", "--format", "json", *extra)
        assert r.exit_code == 0, r.output
        return json.loads(r.output)["simulation"]["model"]["l2_sampled_accesses"]
    default, more = sampled(), sampled("--l2-samples", "120000")
    assert default <= 50_000 < more <= 120_000


def test_table_says_when_the_l2_replay_saw_only_a_sample_of_the_ctas():
    small = run("run", "--seq", "1024")
    assert small.exit_code == 0 and "L2 replay" not in small.output      # simulated exactly
    big = run("run", "--seq", "32768")
    assert big.exit_code == 0
    line = next(ln for ln in big.output.splitlines() if ln.startswith("simulator"))
    # 32 heads × 32768 / 128 query rows per CTA = 8192 CTAs; the replay sees a prefix
    assert "of 8,192 CTAs" in line and "--l2-samples" in line
