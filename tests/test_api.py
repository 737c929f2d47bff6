import json

from click.testing import CliRunner

import iosim.api as io
from iosim.cli import main


def test_api_run_equals_cli_json():
    a = io.run("fa2", "h100", model="roofline", seq=1024, heads=8, causal=True)
    cli = json.loads(CliRunner().invoke(main, ["run", "--seq", "1024", "--heads", "8", "--causal",
                                               "--model", "roofline", "--format", "json"]).output)
    assert a.to_dict()["counters"] == cli["counters"]
    assert a.to_dict()["predicted_time_s"] == cli["predicted_time_s"]


def test_compare_returns_one_row_per_algorithm_with_counters():
    df = io.compare(["fa1", "fa2"], "h100", model="roofline", seq=512, heads=4)
    assert list(df["algorithm"]) == ["fa1", "fa2"]
    fa2 = df.set_index("algorithm").loc["fa2"]
    # FA-2 forward: Q once, K and V once per Q block (4 heads, N = 512, d = 128, fp16, Br = 128)
    assert fa2["counters.l2_to_smem_bytes"] == 4 * (512 * 128 * 2 + 4 * 2 * 512 * 128 * 2)


def test_sweep_rows_cover_every_length_and_algorithm():
    df = io.sweep([256, 512], ["fa2", "standard"], "a100", model="roofline", heads=2)
    assert sorted(zip(df["problem.seq_q"], df["algorithm"])) == [
        (256, "fa2"), (256, "standard"), (512, "fa2"), (512, "standard")]
