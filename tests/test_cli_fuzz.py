"""Property: whatever a user types, iosim ends with exit 0, or with exit 2 and one line on
stderr; never a traceback, never past a deadline, and nothing written on exit 2.

Option values are drawn inside and outside their valid ranges (docs/limits.md); GPU specs and
scenarios are the bundled files with one field mutated. Problems drawn as valid are small, so
the examples stay cheap; values beyond the limits must be refused before any work.
Deterministic: hypothesis runs derandomized (the same examples on every run).
"""
from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from iosim.cli import main
from iosim.limits import MAX_SEQ
from iosim.paths import GPU_CONFIG_DIR, SCENARIO_DIR

FUZZ = settings(derandomize=True, deadline=timedelta(seconds=30), database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def fuzz(examples: int):
    return settings(FUZZ, max_examples=examples)

# ---- values inside and outside the valid ranges ----------------------------------------------
def mostly(valid: list, invalid: list):
    """A valid value about seven times in eight, else an invalid one."""
    return st.sampled_from([True] * 7 + [False]).flatmap(
        lambda ok: st.sampled_from(valid if ok else invalid))


BAD_INTS = ["0", "-1", "-5", str(MAX_SEQ + 1), str(10 ** 12), "1e3", "abc", "", "3.5", "0x10"]
seq = mostly(["1", "17", "128", "256", "1000"], BAD_INTS)
count = mostly(["1", "2", "4"], BAD_INTS + ["1000000000"])
head_dim = mostly(["32", "64", "96", "128", "256"], ["0", "7", "100", "512", "-64", "x"])
dtype = mostly(["fp16", "bf16", "fp8"], ["fp7", "", "FP16"])
direction = mostly(["fwd", "bwd", "fwd+bwd"], ["back", ""])
block = mostly(["16", "32", "64", "128"], ["0", "-16", "17", "100000", "x"])
warps = mostly(["4", "8", "12"], ["3", "0", "33", "64", "-4"])
stages = mostly(["1", "2", "4"], ["0", "-1", "1000"])
algo = mostly(["fa2", "fa1", "fa3", "standard", "square"], ["", "nosuch", "fa2,fa1"])
algos = mostly(["fa2", "fa1,fa2", " fa2 , fa3 ", "standard,square"],
               [",", "", "fa2,,fa1", "nosuch"])
gpu = mostly(["h100", "a100", "h200"], ["nosuchgpu", "", "/nonexistent.yaml", "."])


def option_args(draw, with_seq=True) -> list[str]:
    """A random subset of the problem/tiling options (each present one time in three), each
    with a drawn value."""
    table = [("--batch", count), ("--heads", count), ("--kv-heads", count),
             ("--head-dim", head_dim), ("--dtype", dtype), ("--direction", direction),
             ("--block-q", block), ("--block-kv", block), ("--warps", warps),
             ("--stages", stages), ("--gpu", gpu)]
    if with_seq:
        table += [("--seq", seq), ("--seq-kv", seq)]
    args = []
    for flag, strategy in table:
        if draw(st.integers(0, 2)) == 0:
            args += [flag, draw(strategy)]
    if draw(st.booleans()):
        args.append(draw(st.sampled_from(["--causal", "--no-causal"])))
    return args


def check_outcome(result, before: set, cwd: Path) -> None:
    """Exit 0, or exit 2 with exactly one `error:` line on stderr and no new file."""
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    if result.exit_code == 2:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert set(os.listdir(cwd)) == before, "a file was written on exit 2"


def invoke(args: list[str], cwd: Path):
    before = set(os.listdir(cwd))
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, args)
    finally:
        os.chdir(old)
    check_outcome(result, before, cwd)
    for name in set(os.listdir(cwd)) - before:     # what an accepted run wrote: start clean
        shutil.rmtree(cwd / name) if (cwd / name).is_dir() else (cwd / name).unlink()
    event(f"exit {result.exit_code}")        # --hypothesis-show-statistics shows the mix
    return result


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


# ---- run and compare ------------------------------------------------------------------------
@fuzz(100)
@given(data=st.data())
def test_run_with_random_options_exits_0_or_2_with_one_line(workdir, data):
    args = ["run", "--algo", data.draw(algo)] + option_args(data.draw)
    if not any(a in args for a in ("--seq",)):
        args += ["--seq", "256"]
    args += data.draw(mostly([["--model", "roofline"], ["--model", "sim"],
                              ["--model", "sim", "--l2-samples", "1000"]],
                             [["--model", "roofline", "--l2-samples", "10"],
                              ["--model", "exact"]]))
    args += data.draw(mostly([[], ["--format", "json", "-o", "out.json"],
                              ["--format", "csv", "-o", "sub/out.csv"]],
                             [["--format", "xml", "-o", "out.xml"], ["-o", "."]]))
    invoke(args, workdir)


@fuzz(40)
@given(data=st.data())
def test_compare_with_random_algorithm_lists_exits_0_or_2_with_one_line(workdir, data):
    args = ["compare", "--algos", data.draw(algos), "--model", "roofline",
            "--seq", data.draw(seq), "--heads", "2"] + option_args(data.draw, with_seq=False)
    invoke(args, workdir)


# ---- report and teach -----------------------------------------------------------------------
seq_list = mostly(["256", "256,512", "256..512", "100..400"],
                  ["256,,512", ",", "1..1099511627776", "0..4", "512..256", "a..b",
                   str(MAX_SEQ + 1), "-4", ""])


@fuzz(12)
@given(data=st.data())
def test_report_with_random_options_exits_0_or_2_and_writes_only_on_0(workdir, data):
    args = ["report", "--seq", data.draw(seq_list), "--algos", data.draw(algos),
            "--model", "roofline", "--heads", "2", "--no-progress", "-o", "r.html"]
    extra = data.draw(mostly([[], ["--compare-seq", "512"], ["--head-dim", "64"]],
                             [["--compare-seq", "0"], ["--sim-max-ctas", "-5"],
                              ["--block-q", "0"], ["--warps", "3"], ["--head-dim", "7"]]))
    invoke(args + extra, workdir)


@fuzz(30)
@given(data=st.data())
def test_teach_with_random_options_exits_0_or_2_with_one_line(workdir, data):
    args = ["teach", "--section", data.draw(mostly(["1", "3", "hierarchy"], ["9", "x"])),
            "--seq", data.draw(seq), "--heads", data.draw(count),
            "--head-dim", data.draw(head_dim), "--dtype", data.draw(dtype)]
    invoke(args, workdir)


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10))


@fuzz(40)
@given(scores=st.lists(numbers, min_size=1, max_size=6), values=st.lists(numbers, min_size=1,
       max_size=6), block=st.sampled_from(["1", "2", "0", "-1", "x"]))
def test_online_softmax_by_hand_with_random_numbers_exits_0_or_2(workdir, scores, values, block):
    invoke(["teach", "online-softmax", "--scores", ",".join(map(str, scores)),
            "--values", ",".join(map(str, values)), "--block", block], workdir)


# ---- mutated files ----------------------------------------------------------------------------
MUTANTS = st.one_of(
    st.sampled_from([0, -1, -5, 1e-300, 1e300, True, False, None, "", "abc", "1e9", [1, 2],
                     {"a": 1}, float("inf"), float("-inf"), float("nan"), 2 ** 64]),
    st.integers(-10 ** 6, 10 ** 15), st.floats(allow_nan=True, allow_infinity=True))


def mutate(data: dict, draw) -> dict:
    """The mapping with one (possibly nested) field replaced, deleted or added."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    key = draw(st.sampled_from(sorted(out) + ["bogus_field"]))
    target = out
    if isinstance(out.get(key), dict) and out[key] and key != "sources":
        target, key = out[key], draw(st.sampled_from(sorted(out[key])))
    action = draw(st.sampled_from(["scale", "scale", "replace", "delete"]))
    value = target.get(key)
    if action == "delete":
        target.pop(key, None)
    elif action == "scale" and isinstance(value, (int, float)) and not isinstance(value, bool):
        scaled = value * draw(st.sampled_from([0.5, 0.9, 1.1, 2]))   # plausible neighbours
        target[key] = type(value)(scaled)
    else:
        target[key] = draw(MUTANTS)
    return out


H100 = yaml.safe_load((GPU_CONFIG_DIR / "h100-sxm5-80gb.yaml").read_text())
SCENARIO = yaml.safe_load((SCENARIO_DIR / "llama3-8b-prefill-8k.yaml").read_text())


@fuzz(80)
@given(data=st.data())
def test_mutated_gpu_spec_is_used_or_refused_in_one_line(workdir, tmp_path_factory, data):
    spec = mutate(H100, data.draw)
    path = tmp_path_factory.mktemp("gpu") / "gpu.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    invoke(["run", "--gpu", str(path), "--seq", "512", "--heads", "2",
            "--model", data.draw(st.sampled_from(["roofline", "sim"]))], workdir)


@fuzz(60)
@given(data=st.data())
def test_mutated_scenario_is_used_or_refused_in_one_line(workdir, tmp_path_factory, data):
    scen = mutate(SCENARIO, data.draw)
    path = tmp_path_factory.mktemp("scn") / "scn.yaml"
    path.write_text(yaml.safe_dump(scen, allow_unicode=True))
    invoke(["run", "--scenario", str(path), "--seq", "512", "--model", "roofline"], workdir)


@fuzz(20)
@given(blob=st.binary(min_size=1, max_size=64))
def test_arbitrary_bytes_as_a_gpu_file_are_refused_in_one_line(workdir, tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("bin") / "gpu.yaml"
    path.write_bytes(blob)
    result = invoke(["run", "--gpu", str(path), "--seq", "256", "--model", "roofline"], workdir)
    assert result.exit_code == 2
