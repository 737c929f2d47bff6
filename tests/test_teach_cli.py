"""`iosim teach`: sections by name or number, the HTML page, and one-line errors."""
import re

import pytest
from click.testing import CliRunner

from iosim.cli import main
from iosim.teach.cli import teach

SMALL = ["--seq", "1024", "--heads", "4"]


def run(*args):
    return CliRunner().invoke(main, ["teach", *args])


def test_teach_is_registered_and_prints_every_section():
    r = run(*SMALL)
    assert r.exit_code == 0, r.output
    for n, title in enumerate(["memory hierarchy", "memory-bound", "Online softmax", "Tiling",
                               "lower bound", "backward pass", "Exercises"], 1):
        assert re.search(rf"^{n}\. .*{title}", r.output, re.M | re.I), title


@pytest.mark.parametrize("key", ["5", "lower-bound", "lower"])
def test_section_by_number_name_or_prefix(key):
    r = run(*SMALL, "--section", key)
    assert r.exit_code == 0, r.output
    assert r.output.startswith("5. The lower bound")
    assert "6. The backward pass" not in r.output


def test_section_uses_the_problem_options():
    r = run("--section", "tiling", "--gpu", "a100", "--seq", "2048", "--head-dim", "64")
    assert r.exit_code == 0, r.output
    assert "N = 2,048" in r.output


@pytest.mark.parametrize("args,fragment", [
    (["--section", "9"], "unknown section"),
    (["--section", "nope"], "unknown section"),
    (["--seq", "0"], "'--seq': 0 is not in the range"),
    (["--gpu", "nope"], "unknown GPU"),
    (["--head-dim", "100"], "unsupported head dim"),
    (["--section", "1", "--html", "x.html"], "do not combine"),
])
def test_bad_input_exits_2_with_one_line(args, fragment):
    r = run(*args)
    assert r.exit_code == 2
    assert fragment in r.output
    assert "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_group_handles_errors_when_invoked_on_its_own():
    r = CliRunner().invoke(teach, ["online-softmax", "--block", "0"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("lesson") / "lesson.html"
    r = run(*SMALL, "--html", str(out))
    assert r.exit_code == 0, r.output
    return out


def test_html_embeds_plotly_js_once_and_references_no_network(page):
    from plotly.offline import get_plotlyjs
    text = page.read_text(encoding="utf-8")
    js = get_plotlyjs()
    assert text.count(js) == 1
    rest = text.replace(js, "")
    assert not re.search(r"https?://", rest)
    assert not re.search(r"<script[^>]+src=", text)
    assert "<link" not in rest and "@import" not in rest


def test_html_has_every_section_and_a_slider(page):
    text = page.read_text(encoding="utf-8")
    for name in ("hierarchy", "standard", "online-softmax", "tiling", "lower-bound", "backward",
                 "exercises"):
        assert f'id="{name}"' in text
    assert text.count("Plotly.newPlot") >= 5
    assert '"sliders"' in text and "Plotly.addFrames" in text   # the N slider's frames


def test_html_is_not_overwritten_without_force(tmp_path):
    out = tmp_path / "l.html"
    out.write_text("precious")
    r = run(*SMALL, "--html", str(out))
    assert r.exit_code == 2 and "--force" in r.output and out.read_text() == "precious"
    r = run(*SMALL, "--html", str(out), "--force")
    assert r.exit_code == 0 and "plotly" in out.read_text(encoding="utf-8").lower()


@pytest.mark.parametrize("args", [
    ["--gpu", "a100", "--seq", "1000", "--head-dim", "64", "--causal", "--dtype", "bf16", "--heads", "2"],
    ["--gpu", "h200", "--seq", "256", "--head-dim", "256", "--heads", "1"],   # Nd = d²: no large fit
])
def test_lesson_builds_for_causal_ragged_and_tiny_problems(args):
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert "7. Exercises" in r.output
