"""The report as a person sees it: headless Chromium opens the page with every host
unresolvable, waits for the plots, and the page's status element says every figure drew its
data and no JavaScript error occurred. A screenshot is saved next to the page."""
import pytest
from click.testing import CliRunner

from iosim.cli import main
from iosim.report.browser import find_chromium, page_status, screenshot

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="chromium not installed (apt-get install chromium; .ci/run installs it)")


@pytest.fixture(scope="module")
def small_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser") / "report.html"
    # simulated (fast mode) where the simulator is available, so the CTA timeline is drawn
    r = CliRunner().invoke(main, ["report", "--gpu", "h100", "--seq", "512..1024", "--heads", "4",
                                  "--algos", "standard,fa1,fa2,fa3", "--no-progress",
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_every_figure_renders_with_data_and_no_javascript_error(small_report):
    status = page_status(small_report)
    assert status["errors"] == []
    assert status["done"] is True, status
    assert status["figures"] >= 4
    assert status["rendered"] == status["figures"]
    assert status["with_data"] == status["figures"], status["missing"]


def test_timeline_is_drawn_when_the_simulation_has_one(small_report):
    text = small_report.read_text()
    status = page_status(small_report)
    expected = 4 + ('id="iosim-timeline-sim"' in text) + ('id="iosim-timeline-trace"' in text)
    assert status["figures"] == expected


def test_screenshot_is_saved(small_report):
    png = screenshot(small_report, small_report.with_suffix(".png"), height=4000)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000


def test_captured_trace_timeline_renders_when_a_trace_matches(tmp_path):
    from iosim.report.data import find_traces
    from iosim.problem import AttentionProblem
    if not find_traces(AttentionProblem(batch=1, heads_q=2, seq_q=256, head_dim=128)):
        pytest.skip("no captured trace of B1 H2 N256 d128 in tests/data/traces")
    out = tmp_path / "trace.html"
    r = CliRunner().invoke(main, ["report", "--gpu", "h200", "--seq", "256", "--heads", "2",
                                  "--algos", "fa1,fa2", "--model", "roofline", "--no-progress",
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert 'id="iosim-timeline-trace"' in out.read_text()
    status = page_status(out)
    assert status["errors"] == [] and status["done"] is True
    assert status["with_data"] == status["figures"] == 5
