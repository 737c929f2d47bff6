"""The lesson as one offline HTML page: each section's text plus interactive plotly figures.
plotly.js is embedded once, inline; the page fetches nothing."""
from __future__ import annotations

import html as _html
from pathlib import Path

from ..errors import IosimError
from .lesson import preamble

SLIDER_NS = (512, 1024, 2048, 4096, 8192, 16384)


def _go():
    try:
        import plotly.graph_objects as go
    except ImportError:  # pragma: no cover - plotly is a core dependency
        raise IosimError("the HTML lesson needs plotly (pip install plotly)") from None
    return go


def roofline_over_n(ctx) -> "go.Figure":
    """Standard vs fa2 on the DRAM roofline, one frame per N (slider)."""
    go = _go()
    from ..analysis.analyze import analyze
    from ..plot import color
    ns = sorted(set(SLIDER_NS) | {ctx.problem.seq_q})
    rate = ctx.gpu.tensor_peak_rate(ctx.problem.dtype)
    bw = ctx.gpu.dram_bandwidth_bytes_per_s
    ridge = rate / bw
    xs = [1, ridge, 1e5]
    roof = go.Scatter(x=xs, y=[min(rate, x * bw) / 1e12 for x in xs], mode="lines",
                      name="DRAM roofline", line=dict(color="gray"))

    def points(n):
        p = ctx.problem.with_(seq_q=n, seq_kv=n)
        pts = {}
        for alg in ("standard", "fa2"):
            a = analyze(p, ctx.gpu, alg, model="roofline")
            i = a.roofline.intensity_dram_flop_per_byte
            pts[alg] = (i, min(rate, i * bw) / 1e12, a.predicted_time_s)
        return go.Scatter(
            x=[pts[a][0] for a in pts], y=[pts[a][1] for a in pts], mode="markers+text",
            text=[f"{a} (N={n})" for a in pts], textposition="top center", name="algorithms",
            marker=dict(size=12, color=[color(a) for a in pts]),
            hovertemplate="%{text}<br>intensity %{x:.1f} FLOP/B<br>attainable %{y:.0f} TFLOP/s"
                          "<extra></extra>")
    frames = [go.Frame(data=[roof, points(n)], name=str(n)) for n in ns]
    start = ns.index(ctx.problem.seq_q)
    fig = go.Figure(data=frames[start].data, frames=frames)
    fig.update_layout(
        title=f"DRAM roofline of the {ctx.gpu.short_name} ({ctx.problem.dtype}): ridge "
              f"{ridge:.0f} FLOP/B. Slide N.",
        xaxis=dict(type="log", title="arithmetic intensity (FLOP per DRAM byte)"),
        yaxis=dict(type="log", title="attainable TFLOP/s"),
        sliders=[dict(active=start, currentvalue=dict(prefix="N = "),
                      steps=[dict(label=str(n), method="animate",
                                  args=[[str(n)], dict(mode="immediate", frame=dict(duration=0,
                                                                                    redraw=True))])
                             for n in ns])])
    return fig


def online_softmax_figure(f3: dict) -> "go.Figure":
    go = _go()
    steps = f3["example"]["steps"]
    x = [s["block"] for s in steps]
    fig = go.Figure()
    for key, name in (("m", "m (running max)"), ("l", "ℓ (running sum)"),
                      ("alpha", "α (rescale)"), ("out", "o/ℓ (output so far)")):
        fig.add_trace(go.Scatter(x=x, y=[s[key] for s in steps], mode="lines+markers", name=name))
    fig.add_hline(y=f3["example"]["direct"], line_dash="dot",
                  annotation_text="direct softmax output")
    fig.update_layout(title="Online softmax on the worked example, block by block",
                      xaxis=dict(title="after block", dtick=1))
    return fig


def tiling_figure(f4: dict) -> "go.Figure":
    go = _go()
    names = ["fa1", "fa2"]
    fig = go.Figure([
        go.Bar(name="formula × bytes × heads", x=names,
               y=[f4[n]["formula_bytes_all_heads"] for n in names]),
        go.Bar(name="counted by the schedule", x=names, y=[f4[n]["counted_bytes"] for n in names]),
        go.Bar(name="N²d²/M × bytes × heads", x=names,
               y=[f4["n2d2_over_m_elements"] * f4["eb"] * f4["heads"]] * 2)])
    fig.update_layout(barmode="group", title="Tile traffic: formula vs counted", yaxis_title="bytes")
    return fig


def sweep_figure(f5: dict) -> "go.Figure":
    go = _go()
    s = f5["sweep"]
    rows = s["rows"]
    ms = [r["M"] for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ms, y=[r["fa2_bytes"] for r in rows], mode="lines+markers",
                             name="fa2, Br = ⌊M/4d⌋"))
    fig.add_trace(go.Scatter(x=ms, y=[r["square_bytes"] for r in rows], mode="lines+markers",
                             name="square, B = ⌊√(M/3)⌋"))
    fig.add_trace(go.Scatter(x=ms, y=[r["saha_ye_bytes"] for r in rows], mode="lines",
                             name="min(N²d/√M, N²d²/M)", line=dict(dash="dash")))
    fig.add_trace(go.Scatter(x=ms, y=[s["compulsory_bytes"]] * len(ms), mode="lines",
                             name="compulsory", line=dict(dash="dot", color="gray")))
    fig.add_vline(x=s["d"] ** 2, line_dash="dot", annotation_text="M = d²")
    fig.add_vline(x=s["N"] * s["d"], line_dash="dot", annotation_text="M = Nd")
    fig.update_layout(
        title=f"Tile traffic per head against SRAM size M (N = {s['N']}, d = {s['d']}); slopes: "
              f"fa2 {s['slope_fa2_large']:+.2f} (M ≥ d²), square {s['slope_square_small']:+.2f} "
              "(M < d²)" if s["slope_fa2_large"] is not None and s["slope_square_small"] is not None
              else "Tile traffic per head against SRAM size M",
        xaxis=dict(type="log", title="M (elements)"), yaxis=dict(type="log", title="bytes"))
    return fig


def backward_figure(f6: dict) -> "go.Figure":
    go = _go()
    fig = go.Figure([go.Bar(x=["extra FLOPs (recompute) at peak", "N×N traffic at DRAM bandwidth"],
                            y=[f6["extra_flops_time_s"] * 1e6, f6["n2_traffic_time_s"] * 1e6])])
    fig.update_layout(title="What recomputation costs vs what storing P costs",
                      yaxis_title="µs")
    return fig


STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}
pre{background:#f6f8fa;padding:1em;overflow-x:auto;font-size:13px;line-height:1.35}
nav a{margin-right:1em}"""


def lesson_html(problem, gpu="h100", seed: int = 0) -> str:
    from plotly.offline import get_plotlyjs
    from .context import LessonContext
    ctx = LessonContext.make(problem, gpu, seed)
    from .lesson import build_section, SECTIONS
    from . import decode as decode_section
    sections = [build_section(ctx, n) for n in range(1, len(SECTIONS) + 1)]
    by_name = {s.name: s for s in sections}
    figures = {
        "standard": [roofline_over_n(ctx)],
        "online-softmax": [online_softmax_figure(by_name["online-softmax"].facts)],
        "tiling": [tiling_figure(by_name["tiling"].facts)],
        "lower-bound": [sweep_figure(by_name["lower-bound"].facts)],
        "backward": [backward_figure(by_name["backward"].facts)],
        "decode": [decode_section.figure(by_name["decode"].facts)],
    }
    esc = _html.escape
    head = preamble(ctx.problem, ctx.gpu)
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<title>iosim lesson: the IO complexity of attention</title>",
             f"<style>{STYLE}</style>",
             f"<script type=\"text/javascript\">{get_plotlyjs()}</script>", "</head><body>",
             f"<pre>{esc(head)}</pre>",
             "<nav>" + "".join(f"<a href=\"#{s.name}\">{s.number}. {esc(s.title)}</a>"
                               for s in sections) + "</nav>"]
    for s in sections:
        parts.append(f"<section id=\"{s.name}\"><pre>{esc(s.text)}</pre>")
        for fig in figures.get(s.name, []):
            parts.append(fig.to_html(full_html=False, include_plotlyjs=False,
                                     config={"displaylogo": False}))
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(path, problem, gpu="h100", force: bool = False, seed: int = 0) -> Path:
    out = Path(path)
    if out.exists() and not force:
        raise IosimError(f"{path} exists; pass --force to overwrite it")
    if out.exists() and out.is_dir():
        raise IosimError(f"{path} is a directory")
    text = lesson_html(problem, gpu, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
