"""The shared options (iosim/options.py): one definition per problem field, used by every
command and the API; bad values refused before any work."""
import json
import os

import pytest
from click.testing import CliRunner

from iosim.algorithms import ALGORITHMS, DECODE_KEYS, GEMM_TILE_KEYS, TILING_KEYS
from iosim.cli import main
from iosim.errors import IosimError
from iosim.options import (PROBLEM_OPTIONS, TILING_OPTIONS, algorithm_list, parse_seq_list,
                           problem_from_kwargs)
from iosim.problem import PROBLEM_KEYS


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_every_problem_field_has_exactly_one_option():
    assert set(PROBLEM_OPTIONS) == set(PROBLEM_KEYS)


def test_every_tiling_key_has_exactly_one_option():
    # per-pass tiling keys, flash-decoding's splits and standard attention's cuBLAS tiles: one
    # option each, nothing else
    assert set(TILING_OPTIONS) == set(TILING_KEYS) | set(DECODE_KEYS) | set(GEMM_TILE_KEYS)


@pytest.mark.parametrize("command", ["run", "compare", "report", "teach"])
def test_every_command_spells_the_shared_options_alike(command):
    text = run(command, "--help").output
    for flag in ("--batch", "--heads", "--head-dim", "--dtype", "--causal", "--gpu"):
        assert flag in text
    assert "16,777,216" in " ".join(text.split())      # the size limits are in the help


def test_seq_range_doubles_from_its_start_as_the_help_says():
    assert parse_seq_list("1000..4000") == [1000, 2000, 4000]
    assert parse_seq_list("1024..4096") == [1024, 2048, 4096]
    assert parse_seq_list("4096, 1024") == [1024, 4096]


@pytest.mark.parametrize("text", ["1024,,2048", ",", "", "0..4", "512..256", "a..b", "-4"])
def test_bad_seq_lists_are_refused(text):
    with pytest.raises(IosimError, match="--seq must be"):
        parse_seq_list(text)


def test_seq_list_above_the_limit_names_it():
    with pytest.raises(IosimError, match="1,099,511,627,776 is above the limit of 16,777,216"):
        parse_seq_list("1..1099511627776")


def test_algorithm_lists_refuse_empty_names_and_drop_duplicates():
    assert algorithm_list("fa2, fa1,fa2") == ["fa2", "fa1"]
    with pytest.raises(IosimError, match="empty name"):
        algorithm_list(",")
    with pytest.raises(IosimError, match="unknown algorithm.*'fa9'"):
        algorithm_list("fa2,fa9")
    assert algorithm_list(None) == ["standard", "fa1", "fa2", "fa3"]
    assert set(algorithm_list(",".join(ALGORITHMS))) == set(ALGORITHMS)


def test_api_keywords_are_the_clis():
    p, tiling = problem_from_kwargs(dict(seq=2048, heads=8, kv_heads=2, block_q=64, bwd_warps=8))
    assert (p.seq_q, p.heads_q, p.heads_kv) == (2048, 8, 2)
    assert tiling == {"block_q": 64, "bwd_warps": 8}
    with pytest.raises(IosimError, match="unknown keyword 'sequence'"):
        problem_from_kwargs(dict(sequence=5))


def test_empty_algorithm_name_is_refused_not_run_as_the_default():
    r = run("run", "--algo", "", "--model", "roofline")
    assert r.exit_code == 2 and "unknown algorithm ''" in r.output


def test_warps_must_make_whole_warpgroups():
    r = run("run", "--warps", "3", "--model", "roofline")
    assert r.exit_code == 2 and "3 is not a multiple of 4" in r.output


def test_fp8_backward_is_refused():
    r = run("run", "--dtype", "fp8", "--direction", "bwd", "--model", "roofline")
    assert r.exit_code == 2 and "no fp8 backward" in r.output


def test_causal_rows_that_attend_nothing_are_warned_and_counted_as_zero_pairs():
    r = run("run", "--causal", "--seq", "1024", "--seq-kv", "512", "--model", "roofline",
            "--format", "json")
    assert r.exit_code == 0
    assert "warning: causal with seq-kv 512 < seq 1024" in r.stderr
    assert "first 512 query rows attend no key" in r.stderr
    # rows 512..1023 attend 1..512 keys: 512·513/2 pairs per head, 4·d FLOPs per pair, 32 heads
    d = json.loads(r.stdout)
    assert d["counters"]["useful_flops"] == 4 * 128 * (512 * 513 // 2) * 32


def test_report_refuses_an_output_under_a_file_before_computing(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    r = run("report", "--seq", "1024", "--algos", "fa2", "-o", str(blocker / "r.html"))
    assert r.exit_code == 2 and "is not a directory" in r.output
    assert sorted(os.listdir(tmp_path)) == ["file.txt"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_report_refuses_a_read_only_folder_before_computing(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    r = run("report", "--seq", "1024", "--algos", "fa2", "-o", str(ro / "r.html"))
    assert r.exit_code == 2 and "not writable" in r.output
    assert os.listdir(ro) == []


def test_run_output_that_is_a_directory_is_refused(tmp_path):
    r = run("run", "--model", "roofline", "-o", str(tmp_path))
    assert r.exit_code == 2 and "is a directory" in r.output


@pytest.mark.parametrize("args,fragment", [
    (["report", "--compare-seq", "0", "-o", "x.html"], "'--compare-seq': 0 is not in the range"),
    (["report", "--sim-max-ctas", "-5", "-o", "x.html"], "'--sim-max-ctas': -5 is not in the range"),
    (["report", "--seq", "1024,,2048", "-o", "x.html"], "--seq must be"),
    (["report", "--block-q", "0", "-o", "x.html"], "'--block-q': 0 is not in the range"),
    (["compare", "--algos", ","], "empty name"),
    (["teach", "--seq", "1000000000000", "--section", "3"], "'--seq': 1000000000000 is not"),
    (["teach", "online-softmax", "--scores", "1e308,1e308", "--values", "1e308,1e308"],
     "overflow float64"),
])
def test_former_defects_exit_2_with_one_line_and_write_nothing(tmp_path, monkeypatch, args,
                                                                fragment):
    monkeypatch.chdir(tmp_path)
    r = run(*args)
    assert r.exit_code == 2
    assert fragment in r.output and len(r.output.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []


def test_compare_refuses_before_analyzing_any_algorithm(monkeypatch):
    import iosim.analysis.analyze as analyze_module
    calls = []
    monkeypatch.setattr(analyze_module, "analyze", lambda *a, **k: calls.append(a))
    # standard at N = 65,536 with 64 heads: per head 256·512 QKᵀ tiles (256×128) + 16,384
    # softmax CTAs (4 rows) + 256 PV tiles = 147,712; ×64 = 9,453,568 > the simulator's
    # 8,388,608. fa2 (512 Q blocks × 64 heads = 32,768 CTAs) alone would be accepted
    r = run("compare", "--algos", "fa2,standard", "--seq", "65536", "--heads", "64")
    assert r.exit_code == 2
    assert "launches 9,453,568 CTAs, above the simulator's limit of 8,388,608" in r.output
    assert calls == []
