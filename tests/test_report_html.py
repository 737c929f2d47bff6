"""`iosim report`: one self-contained, deterministic HTML page (no browser needed here)."""
import re

import pytest
from click.testing import CliRunner

from iosim.cli import main
from iosim.errors import IosimError
from iosim.problem import AttentionProblem
from iosim.hardware import load_gpu
from iosim.report import sweep
from iosim.progress import Progress

SMALL = ["report", "--gpu", "h100", "--seq", "512..1024", "--heads", "4",
         "--algos", "standard,fa2", "--model", "roofline", "--no-progress"]


def run(*args):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "r.html"
    r = run(*SMALL, "-o", str(out))
    assert r.exit_code == 0, r.output
    return out


def test_plotly_js_is_embedded_exactly_once(page):
    text = page.read_text()
    assert text.count("* plotly.js v") == 1
    assert text.count("Plotly.newPlot(") >= 4      # one per figure, library not repeated


def test_nothing_is_fetched_from_the_network(page):
    text = page.read_text()
    assert not re.search(r"<script[^>]*\ssrc\s*=", text, re.I)
    # the page's own markup (script bodies removed: plotly.js's code mentions map-tile URLs
    # it would use only for map traces) refers to nothing outside the file
    markup = re.sub(r"(<script[^>]*>).*?(</script>)", r"\1\2", text, flags=re.S | re.I)
    assert not re.search(r"<link\b|<iframe\b|<img\b|@import|url\(", markup, re.I)
    assert not re.search(r"https?://", markup, re.I)
    assert "mathjax" not in markup.lower()


def test_header_carries_the_command_that_reproduces_the_page(page):
    text = page.read_text()
    cmd = re.search(r'<pre class="cmd" id="iosim-command">(.*?)</pre>', text).group(1)
    assert cmd == ("iosim report --gpu h100 --seq 512..1024 --algos standard,fa2 --heads 4 "
                   f"--model roofline --output {page}")


def test_output_is_byte_identical_for_the_same_inputs(page, tmp_path):
    again = page.parent / "again.html"
    r = run(*SMALL, "-o", str(page), "--force")
    assert r.exit_code == 0, r.output
    first = page.read_bytes()
    r = run(*SMALL, "-o", str(page), "--force")
    assert r.exit_code == 0
    assert page.read_bytes() == first
    assert not again.exists()


def test_existing_output_is_not_overwritten_without_force(tmp_path):
    out = tmp_path / "r.html"
    out.write_text("precious")
    r = run(*SMALL, "-o", str(out))
    assert r.exit_code == 2
    assert out.read_text() == "precious"
    assert len(r.output.strip().splitlines()) == 1 and "--force" in r.output


def test_every_section_has_its_figure(page):
    text = page.read_text()
    for div in ("iosim-roofline", "iosim-bytes-vs-n", "iosim-bytes-vs-m", "iosim-compare"):
        assert f'id="{div}"' in text
    assert "No kernel trace was captured" in text or "iosim-timeline-trace" in text


def test_scenario_gives_problem_algorithms_and_range(tmp_path):
    out = tmp_path / "s.html"
    r = run("report", "--scenario", "fa-paper-sweep", "--seq", "512..1024", "--model",
            "roofline", "--no-progress", "-o", str(out))
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "heads 16" in text and "standard, fa1, fa2, fa3" in text
    assert "iosim report --scenario fa-paper-sweep --seq 512..1024" in text


@pytest.mark.parametrize("args,fragment", [
    (["--seq", "4096..1024"], "--seq must be"),
    (["--algos", "fa9"], "unknown algorithm"),
    (["--compare-seq", "3000"], "not one of the swept N"),
])
def test_bad_report_options_give_one_line_and_exit_2(tmp_path, args, fragment):
    r = run("report", "--model", "roofline", "--no-progress", "--seq", "512..1024",
            *args, "-o", str(tmp_path / "x.html"))
    assert r.exit_code == 2 and fragment in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_seq_range_is_powers_of_two_between_the_ends():
    assert sweep.parse_seq_range("1024..65536") == [1024, 2048, 4096, 8192, 16384, 32768, 65536]
    assert sweep.parse_seq_range("4096, 1024") == [1024, 4096]
    assert sweep.parse_seq_range("2048") == [2048]
    with pytest.raises(IosimError):
        sweep.parse_seq_range("a..b")


def test_comparison_n_defaults_to_the_middle_of_the_sweep():
    assert sweep.default_compare_seq([1024, 2048, 4096, 8192, 16384, 32768, 65536]) == 8192
    assert sweep.default_compare_seq([512, 1024]) == 1024


def test_fitted_slope_of_a_power_law_is_its_exponent():
    ms = [16384, 32768, 65536, 131072]
    assert sweep.fit_slope(ms, [1e12 / m for m in ms]) == pytest.approx(-1.0)
    assert sweep.fit_slope(ms, [1e9 / m ** 0.5 for m in ms]) == pytest.approx(-0.5)
    assert sweep.fit_slope([1], [1]) is None


def test_fa2_tile_traffic_in_the_sram_sweep_matches_the_closed_form():
    # square B×B tiles: Q read once, O written once, LSE (fp32) once, K and V once per Q block
    p = AttentionProblem(batch=1, heads_q=2, seq_q=2048, head_dim=128)
    gpu = load_gpu("h100")
    sizes = [64 * 1024, 200 * 1024]
    recs = sweep.sweep_m(p, gpu, sizes, ["fa2"])
    n, d, eb = 2048, 128, 2
    for rec in recs:
        b = int(rec["tiling"].split("×")[0])
        expected = 2 * (2 * n * d * eb + 4 * n + -(-n // b) * 2 * n * d * eb)  # ⌈N/B⌉ Q blocks
        assert rec["ok"] and rec["l2_bytes"] == expected
    assert recs[1]["l2_bytes"] < recs[0]["l2_bytes"]


def test_sram_sizes_include_the_d_squared_crossover():
    p = AttentionProblem(seq_q=4096, head_dim=128)
    sizes = sweep.sram_sizes(p, load_gpu("h100"))
    assert 128 * 128 * 2 in sizes
    assert sizes == sorted(sizes) and sizes[-1] <= load_gpu("h100").shared_memory_per_block_bytes


class _Stream:
    def __init__(self, tty):
        self.text, self.tty = "", tty

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_progress_off_a_terminal_writes_one_line_per_step():
    s = _Stream(tty=False)
    bar = Progress(4, desc="sweep", stream=s)
    bar.step("fa2 N=1024")
    bar.step("fa2 N=2048")
    bar.close()
    lines = s.text.splitlines()
    assert len(lines) == 2 and "\r" not in s.text
    assert lines[0].startswith("sweep:") and " 1/4 " in lines[0] and lines[0].endswith("fa2 N=1024")
    assert " 2/4 " in lines[1] and "50%" in lines[1]


def test_progress_on_a_terminal_redraws_in_place():
    s = _Stream(tty=True)
    bar = Progress(4, desc="sweep", stream=s)
    bar.step("fa2")
    bar.close()
    assert "\r" in s.text and "1/4" in s.text and s.text.endswith("\n")


def test_progress_with_a_delay_stays_quiet_while_quick():
    s = _Stream(tty=False)
    bar = Progress(3, stream=s, delay=60.0)
    bar.step("x")
    bar.close()
    assert s.text == ""


def test_progress_disabled_writes_nothing():
    s = _Stream(tty=False)
    bar = Progress(3, stream=s, enabled=False)
    bar.step("x")
    bar.close()
    assert s.text == ""
