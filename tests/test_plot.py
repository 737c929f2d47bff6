"""iosim.plot: public figures for notebooks (the report draws the same ones), and an Analysis
that renders itself in Jupyter."""
import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

import iosim.api as io
from iosim import plot

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def runs():
    return [io.run(a, "h100", model="roofline", seq=n, heads=4) for a in ("fa1", "fa2")
            for n in (512, 1024)]


def traces(fig, prefix):
    return [t for t in fig.data if (t.name or "").startswith(prefix)]


def test_roofline_plots_each_algorithm_against_dram_and_l2(runs):
    fig = plot.roofline(runs)
    assert isinstance(fig, go.Figure)
    fa2 = traces(fig, "fa2 · vs DRAM")[0]
    a = runs[2]
    assert list(fa2.x)[0] == pytest.approx(a.roofline.intensity_dram_flop_per_byte)
    assert list(fa2.y)[0] == pytest.approx(a.counters.mma_flops / a.predicted_time_s)
    assert len(traces(fig, "fa1 · vs L2")[0].x) == 2


def test_bytes_vs_seq_draws_the_sweep_table():
    df = io.sweep([256, 512], ["fa2"], "h100", model="roofline", heads=2)
    fig = plot.bytes_vs_seq(df)
    fa2 = [t for t in fig.data if t.name == "fa2"]
    l2 = df["counters.l2_to_smem_bytes"] + df["counters.smem_to_l2_bytes"]
    assert list(fa2[0].x) == [256, 512] and list(fa2[0].y) == list(l2)


def test_bytes_vs_sram_has_a_point_per_size_and_the_d_squared_line():
    fig = plot.bytes_vs_sram(seq=512, heads=2, head_dim=64)
    assert any((t.name or "").startswith("M = d² = 4,096 elements") for t in fig.data)
    assert len(traces(fig, "fa2")[0].x) >= 5


def test_timeline_has_one_bar_per_simulated_cta():
    a = io.run("fa2", "h100", seq=1024, heads=2)
    fig = plot.timeline(a)
    assert sum(len(t.x) for t in fig.data) == sum(k.ctas for k in a.kernels)


def test_timeline_of_a_roofline_analysis_is_refused(runs):
    with pytest.raises(ValueError, match="model='sim'"):
        plot.timeline(runs[0])


def test_compare_shows_each_algorithms_time(runs):
    fig = plot.compare(runs[1::2])
    bars = fig.data[0]
    assert list(bars.x) == ["fa1", "fa2"]
    assert list(bars.y) == pytest.approx([a.predicted_time_s * 1e6 for a in runs[1::2]])


def test_analysis_renders_itself_as_an_html_table(runs):
    html = runs[0]._repr_html_()
    assert html.startswith("<table") and "predicted time" in html and "fa1" in html


def test_notebook_example_runs_and_writes_its_figures(tmp_path):
    out = subprocess.run([sys.executable, str(EXAMPLES / "notebook_sweep.py"), "--out",
                          str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bytes_vs_seq.html", "bytes_vs_sram.html", "compare.html", "roofline.html",
        "timeline.html"]


def _colors(trace):
    out = set()
    for part in (getattr(trace, "marker", None), getattr(trace, "line", None)):
        c = getattr(part, "color", None) if part is not None else None
        if isinstance(c, str):
            out.add(c)
    return out


def test_ridge_points_sit_on_the_tensor_ceiling(runs):
    fig = plot.roofline(runs)
    ridge = traces(fig, "ridge points")[0]
    g = runs[0].gpu
    peak = g.tensor_peak_rate("fp16")   # a roofline is drawn at the datasheet peak
    assert list(ridge.x)[:2] == pytest.approx([peak / g.dram_bandwidth_bytes_per_s,
                                               peak / g.l2_bandwidth_bytes_per_s])
    assert set(ridge.y) == {peak}


def test_mma_sync_ceiling_and_shared_memory_roof_drawn_where_they_bind():
    fa2 = io.run("fa2", "h100", model="roofline", seq=4096, heads=4)     # mma.sync
    fig = plot.roofline([fa2])
    g = fa2.gpu
    ceiling = traces(fig, "mma.sync ceiling")[0]
    assert list(ceiling.y) == pytest.approx([g.tensor_peak_rate("fp16") * g.tensor_mma_sync_fraction] * 2)
    assert traces(fig, "shared-memory roof")
    pts = traces(fig, "fa2 · vs shared memory")[0]
    assert list(pts.x) == [pytest.approx(fa2.counters.mma_flops
                                         / fa2.counters.smem_read_bytes_estimate)]
    fa3 = io.run("fa3", "h100", model="roofline", seq=4096, heads=4)     # wgmma only
    assert not traces(plot.roofline([fa3]), "mma.sync ceiling")


def test_points_timed_by_another_model_are_ringed(runs):
    from iosim.report.sweep import record
    fig = plot.roofline_figure([record(a) for a in runs], runs[0].gpu, runs[0].problem,
                               model="sim")
    ring = traces(fig, "timed by the roofline model")[0]
    assert len(ring.x) == 2 * len(runs)
    assert not traces(plot.roofline_figure([record(a) for a in runs], runs[0].gpu,
                                           runs[0].problem, model="roofline"), "timed by")


def test_no_other_series_reuses_an_algorithm_colour(runs):
    algo_colors = {plot.color(a) for a in ("standard", "fa1", "fa2", "fa3", "square")}
    sim = [io.run(a, "h100", seq=1024, heads=2) for a in ("fa1", "fa2")]
    for fig in (plot.roofline(runs), plot.compare(sim), plot.bytes_vs_sram(seq=512, heads=2)):
        for t in fig.data:
            if not any((t.name or "").startswith(a) for a in ("standard", "fa1", "fa2", "fa3",
                                                             "square")):
                assert not _colors(t) & algo_colors, t.name
