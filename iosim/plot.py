"""Plotly figures of attention analyses, for notebooks and for the HTML report (one
implementation: `iosim report` draws these same figures).

Public, each returning a plotly Figure:

    roofline(analyses)          hierarchical roofline (DRAM and L2 roofs, compute ceilings)
    bytes_vs_seq(df)            L2↔SM and DRAM bytes against N, with Θ(N²), Θ(N²d²/M), compulsory
    bytes_vs_sram(...)          tile traffic against shared-memory size M (Saha–Ye regimes)
    timeline(analysis)          the simulated CTAs by SM (first waves)
    compare(analyses)           time, bytes per level and unit utilization side by side

`analyses` are `iosim.api.run` results; `df` is a table of `iosim.api.sweep` / `compare` /
`iosim sweep` rows. The `*_figure` functions below draw from plain records (those of
iosim/report/sweep.py), which is what the report holds. Every hover label gives exact numbers
with units."""
from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .units import capacity, nbytes, seconds, si

# one colour per algorithm, used by no other series (units, byte levels and reference lines
# take the colours below, kernels of one algorithm share its colour)
COLORS = {"standard": "#d62728", "fa1": "#1f77b4", "fa2": "#2ca02c", "fa3": "#9467bd",
          "square": "#ff7f0e", "flash-decoding": "#e6550d", "flash-decoding-cascade": "#31a354",
          "measured": "#111111"}
FALLBACK = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")
UNIT_COLORS = {"tensor cores": "#17becf", "exp units": "#e377c2", "DRAM": "#8c564b",
               "L2": "#bcbd22", "shared memory": "#7f7f7f"}
REF = "#555555"
# a point whose schedule uses shared-memory operand reads for at least this share of its
# predicted time has them drawn (the roof binds it); the run table uses the same share
OPERAND_BINDS_SHARE = 0.25
LAYOUT = dict(template="plotly_white", height=460, margin=dict(l=70, r=20, t=90, b=60),
              font=dict(family="Helvetica, Arial, sans-serif", size=12),
              legend=dict(font=dict(size=11)), hoverlabel=dict(align="left"))


def color(algo: str, i: int = 0) -> str:
    return COLORS.get(algo, FALLBACK[i % len(FALLBACK)])


def exact_bytes(b: float) -> str:
    return f"{int(round(b)):,} B ({nbytes(b)})"


def _log_range(values, pad: float = 1.6) -> list:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    lo, hi = min(vals) / pad, max(vals) * pad
    return [math.log10(lo), math.log10(hi)]


def flops_per_exp(problem) -> float:
    """Matmul FLOPs per exponential of exact attention: one exp per (query, key) pair per
    pass; forward 4d FLOPs per pair, backward 10d, both 14d over two exps."""
    d = problem.head_dim
    return {"fwd": 4 * d, "bwd": 10 * d, "fwd+bwd": 7 * d}[problem.direction]


# ---- hierarchical roofline --------------------------------------------------------------
def _roofline_roofs(fig, gpu, peak: float, ok: list, xmin: float, xmax: float) -> list:
    """The DRAM and L2 roofs, the shared-memory roof where operand reads bind, and the ridge
    points; returns the points bound by shared-memory operand reads."""
    bw_d, bw_l2 = gpu.dram_bandwidth_bytes_per_s, gpu.l2_bandwidth_bytes_per_s

    def roof(name, bw, dash):
        ridge = peak / bw
        x1 = min(ridge, xmax)
        fig.add_trace(go.Scatter(
            x=[xmin, x1], y=[xmin * bw, x1 * bw], mode="lines", name=name,
            line=dict(color=REF, dash=dash, width=2),
            hovertemplate=(f"{name}<br>{bw:,.4g} B/s × intensity<br>ridge at "
                           f"{ridge:,.1f} FLOP/B<extra></extra>")))

    roof(f"DRAM roof ({si(bw_d, 'B/s')})", bw_d, "solid")
    roof(f"L2 roof ({si(bw_l2, 'B/s')})", bw_l2, "dot")
    # ridge points: where each roof meets the tensor-core ceiling
    ridges = [("DRAM", peak / bw_d), ("L2", peak / bw_l2)]
    smem_bound = [p for p in ok if p.get("intensity_smem") and p["time_s"]
                  and p["smem_operand_time_s"] >= OPERAND_BINDS_SHARE * p["time_s"]]
    bw_s = gpu.shared_memory_bandwidth_bytes_per_s
    if smem_bound:
        roof(f"shared-memory roof, MMA operands ({si(bw_s, 'B/s')})", bw_s, "dashdot")
        ridges.append(("shared memory", peak / bw_s))
    fig.add_trace(go.Scatter(
        x=[r for _, r in ridges], y=[peak] * len(ridges), mode="markers+text",
        name="ridge points", marker=dict(symbol="triangle-down", size=11, color=REF),
        text=[f"ridge {lvl}: {r:,.0f}" for lvl, r in ridges], textposition="top center",
        textfont=dict(size=10, color=REF),
        hovertemplate="%{text} FLOP/B<extra></extra>"))
    return smem_bound


def _roofline_ceilings(fig, gpu, problem, peak: float, ok: list, xmin: float,
                       xmax: float) -> float:
    """The tensor-core (wgmma), mma.sync and exp ceilings; returns the exp ceiling."""
    fpe = flops_per_exp(problem)
    exp_ceiling = gpu.exp_per_s * fpe
    fig.add_trace(go.Scatter(
        x=[xmin, xmax], y=[peak, peak], mode="lines",
        name=f"tensor-core ceiling ({si(peak, 'FLOP/s')} {problem.dtype}, wgmma)",
        line=dict(color="#000000", width=2),
        hovertemplate=f"tensor cores: {peak:,.4g} FLOP/s ({problem.dtype} dense)<extra></extra>"))
    if any("mma_sync" in p.get("mma_instructions", ()) for p in ok):
        # the 2-warps-per-sub-partition figure where the config has it (the kernels' usual
        # residency; machine.MmaCost), else the one fraction
        frac = getattr(gpu, "tensor_mma_sync_fraction_two_warps", None) or gpu.tensor_mma_sync_fraction
        fig.add_trace(go.Scatter(
            x=[xmin, xmax], y=[peak * frac, peak * frac], mode="lines",
            name=f"mma.sync ceiling ({si(peak * frac, 'FLOP/s')}, {frac:.1%} of peak)",
            line=dict(color="#000000", width=1.5, dash="dash"),
            hovertemplate=(f"mma.sync: {peak * frac:,.4g} FLOP/s = {frac:.3f} × the wgmma peak "
                           "(measured; GPU config)<extra></extra>")))
    fig.add_trace(go.Scatter(
        x=[xmin, xmax], y=[exp_ceiling, exp_ceiling], mode="lines",
        name=f"exp ceiling ({si(gpu.exp_per_s, 'exp/s')} × {fpe:g} FLOP/exp)",
        line=dict(color=UNIT_COLORS["exp units"], width=2, dash="dash"),
        hovertemplate=(f"exp units: {gpu.exp_per_s:,.4g} exp/s × {fpe:g} matmul FLOP per exp "
                       f"= {exp_ceiling:,.4g} FLOP/s<extra></extra>")))
    return exp_ceiling


def _roofline_points(fig, ok: list, smem_bound: list, bw_s: float) -> None:
    """Each algorithm's simulated points against DRAM and L2 bytes, and against shared-memory
    operand bytes where those bind."""
    algos = list(dict.fromkeys(p["algorithm"] for p in ok))
    for i, algo in enumerate(algos):
        pts = sorted((p for p in ok if p["algorithm"] == algo), key=lambda p: p["seq"])
        for level, key, symbol in (("DRAM", "intensity_dram", "circle"),
                                   ("L2", "intensity_l2", "diamond-open")):
            text = [(f"<b>{algo}</b>, N = {p['seq']:,}<br>"
                     f"intensity vs {level}: {p[key]:,.2f} FLOP/B<br>"
                     f"achieved: {p['flops_per_s']:,.4g} FLOP/s ({si(p['flops_per_s'], 'FLOP/s')})<br>"
                     f"time: {p['time_s']:.6g} s ({seconds(p['time_s'])}), bound by {p['bound_by']}<br>"
                     f"time model: {p['model']}<br>"
                     f"matmul FLOPs: {p['mma_flops']:,}<br>"
                     f"{'DRAM' if level == 'DRAM' else 'L2↔SM'} bytes: "
                     f"{exact_bytes(p['dram_bytes'] if level == 'DRAM' else p['l2_bytes'])}")
                    for p in pts]
            fig.add_trace(go.Scatter(
                x=[p[key] for p in pts], y=[p["flops_per_s"] for p in pts],
                mode="lines+markers", name=f"{algo} · vs {level}", legendgroup=algo,
                marker=dict(symbol=symbol, size=9, color=color(algo, i),
                            line=dict(width=1.5, color=color(algo, i))),
                line=dict(width=1, color=color(algo, i), dash="solid" if level == "DRAM" else "dot"),
                text=text, hovertemplate="%{text}<extra></extra>"))
    for i, algo in enumerate(algos):
        pts = sorted((p for p in smem_bound if p["algorithm"] == algo), key=lambda p: p["seq"])
        if pts:
            fig.add_trace(go.Scatter(
                x=[p["intensity_smem"] for p in pts], y=[p["flops_per_s"] for p in pts],
                mode="lines+markers", name=f"{algo} · vs shared memory", legendgroup=algo,
                marker=dict(symbol="square-open", size=9, color=color(algo, i)),
                line=dict(width=1, color=color(algo, i), dash="dashdot"),
                text=[(f"<b>{algo}</b>, N = {p['seq']:,}<br>intensity vs shared-memory operand "
                       f"reads: {p['intensity_smem']:,.2f} FLOP/B<br>operand bytes: "
                       f"{exact_bytes(p['smem_operand_bytes'])}<br>at "
                       f"{si(bw_s, 'B/s')}: {seconds(p['smem_operand_time_s'])} of "
                       f"{seconds(p['time_s'])}") for p in pts],
                hovertemplate="%{text}<extra></extra>"))


def _roofline_marks(fig, ok: list, measured, model: str | None) -> None:
    """Rings around points timed by another model than the one asked for, and measured points."""
    other = [p for p in ok if p["model"] != model] if model else []
    if other:
        fig.add_trace(go.Scatter(
            x=[p["intensity_dram"] for p in other] + [p["intensity_l2"] for p in other],
            y=[p["flops_per_s"] for p in other] * 2, mode="markers",
            name=f"timed by the {other[0]['model']} model, not {model}",
            marker=dict(symbol="circle-open", size=17, color="#000000", line=dict(width=1.5)),
            text=[f"{p['algorithm']}, N = {p['seq']:,}: timed by the {p['model']} model"
                  for p in other] * 2, hovertemplate="%{text}<extra></extra>"))
    if measured:
        for i, algo in enumerate(dict.fromkeys(m["algorithm"] for m in measured)):
            for level, symbol in (("DRAM", "x"), ("L2", "cross")):
                ms = [m for m in measured if m["algorithm"] == algo and m["level"] == level]
                if not ms:
                    continue
                fig.add_trace(go.Scatter(
                    x=[m["intensity"] for m in ms], y=[m["flops_per_s"] for m in ms],
                    mode="markers", name=f"{algo} measured · vs {level}", legendgroup=algo,
                    marker=dict(symbol=symbol, size=9, color=color(algo, i),
                                line=dict(width=1, color="#111111")),
                    text=[m["label"] for m in ms], hovertemplate="%{text}<extra></extra>"))


def roofline_figure(points, gpu, problem, measured=None, model: str | None = None) -> go.Figure:
    """`model`: the time model asked for; points timed by another one are ringed."""
    ok = [p for p in points if p["ok"]]
    peak = gpu.tensor_peak_rate(problem.dtype)
    bw_d, bw_l2 = gpu.dram_bandwidth_bytes_per_s, gpu.l2_bandwidth_bytes_per_s
    xs = [p["intensity_dram"] for p in ok] + [p["intensity_l2"] for p in ok]
    xs += [peak / bw_d, peak / bw_l2]
    if measured:
        xs += [m["intensity"] for m in measured]
    xr = _log_range(xs, 3.0)
    xmin, xmax = 10 ** xr[0], 10 ** xr[1]
    fig = go.Figure()
    smem_bound = _roofline_roofs(fig, gpu, peak, ok, xmin, xmax)
    exp_ceiling = _roofline_ceilings(fig, gpu, problem, peak, ok, xmin, xmax)
    _roofline_points(fig, ok, smem_bound, gpu.shared_memory_bandwidth_bytes_per_s)
    _roofline_marks(fig, ok, measured, model)
    ys = [p["flops_per_s"] for p in ok] + [peak, exp_ceiling, xmin * bw_d]
    fig.update_layout(**LAYOUT, title="Hierarchical roofline (simulated points; ● vs DRAM, ◇ vs L2)")
    fig.update_layout(height=520)
    fig.update_xaxes(type="log", range=xr, title="arithmetic intensity (matmul FLOP / byte)",
                     exponentformat="SI")
    fig.update_yaxes(type="log", range=_log_range(ys, 1.8), title="matmul FLOP/s",
                     exponentformat="SI")
    return fig


# ---- bytes vs N -------------------------------------------------------------------------
def bytes_vs_n_figure(points, gpu, problem, seqs) -> go.Figure:
    ok = [p for p in points if p["ok"]]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09, subplot_titles=(
        "L2 ↔ SM: tile loads + stores (the papers' “HBM accesses”)",
        "DRAM: read + write"))
    algos = list(dict.fromkeys(p["algorithm"] for p in ok))
    for col, key, level in ((1, "l2_bytes", "L2↔SM"), (2, "dram_bytes", "DRAM")):
        for i, algo in enumerate(algos):
            pts = sorted((p for p in ok if p["algorithm"] == algo), key=lambda p: p["seq"])
            text = [(f"<b>{algo}</b>, N = {p['seq']:,}<br>{level}: {exact_bytes(p[key])}"
                     + (f"<br>L2→SM {exact_bytes(p['l2_to_smem_bytes'])}<br>"
                        f"SM→L2 {exact_bytes(p['smem_to_l2_bytes'])}" if col == 1 else
                        f"<br>read {exact_bytes(p['dram_read_bytes'])}<br>"
                        f"write {exact_bytes(p['dram_write_bytes'])}<br>[{p['dram_source']}]"))
                    for p in pts]
            fig.add_trace(go.Scatter(
                x=[p["seq"] for p in pts], y=[p[key] for p in pts], mode="lines+markers",
                name=algo, legendgroup=algo, showlegend=col == 1,
                marker=dict(size=8, color=color(algo, i)), line=dict(color=color(algo, i)),
                text=text, hovertemplate="%{text}<extra></extra>"), row=1, col=col)
        refs = reference_lines_n(problem, gpu, seqs)
        for name, ys, dash in refs:
            fig.add_trace(go.Scatter(
                x=list(seqs), y=ys, mode="lines", name=name, legendgroup=name,
                showlegend=col == 1, line=dict(color=REF, dash=dash, width=1.5),
                text=[f"{name}<br>N = {n:,}: {exact_bytes(y)}" for n, y in zip(seqs, ys)],
                hovertemplate="%{text}<extra></extra>"), row=1, col=col)
    fig.update_layout(**LAYOUT, title="Bytes moved vs sequence length N (log–log)")
    fig.update_xaxes(type="log", title="N (tokens)", dtick=math.log10(2) if len(seqs) < 9 else None,
                     tickformat="d")
    fig.update_yaxes(type="log", title="bytes", exponentformat="SI")
    return fig


def reference_lines_n(problem, gpu, seqs) -> list:
    """(name, bytes per N, dash) for Θ(N²) standard, Θ(N²d²/M) and compulsory traffic."""
    from .analysis.bounds import io_bounds
    heads, eb = problem.batch * problem.heads_q, problem.elem_bytes
    m = gpu.shared_memory_per_sm_bytes
    n2 = [4 * n * n * eb * heads for n in seqs]
    bound = [io_bounds(problem.with_(seq_q=n, seq_kv=n), m) for n in seqs]
    return [("Θ(N²): 4·N²·B·H elements (S, P written + read)", n2, "dash"),
            (f"Θ(N²d²/M), M = {m // 1024} KiB ({m // eb:,} elements)",
             [b.n2d2_over_m_bytes for b in bound], "dashdot"),
            ("compulsory (Q, K, V read; O, LSE written)", [b.compulsory_bytes for b in bound], "dot")]


# ---- bytes vs SRAM size M ---------------------------------------------------------------
def bytes_vs_m_figure(mpoints, problem, sizes, refs, slopes) -> go.Figure:
    ok = [p for p in mpoints if p["ok"]]
    d, eb, n = problem.head_dim, problem.elem_bytes, problem.seq_q
    cross = d * d * eb
    fig = go.Figure()
    all_y = []
    algos = list(dict.fromkeys(p["algorithm"] for p in ok))
    for i, algo in enumerate(algos):
        pts = sorted((p for p in ok if p["algorithm"] == algo), key=lambda p: p["sram_bytes"])
        s = slopes.get(algo, {})
        label = algo
        if algo == "square" and s.get("all") is not None:
            label += f" (slope {s['all']:+.2f}, vs −½)"
        elif s.get("large") is not None:
            label += f" (slope {s['large']:+.2f} for M ≥ d², vs −1)"
        elif s.get("all") is not None:
            label += f" (slope {s['all']:+.2f}, vs −1)"
        text = [(f"<b>{algo}</b>, N = {n:,}<br>M = {p['sram_bytes']:,} B "
                 f"({p['sram_bytes'] // eb:,} elements)<br>tile {p['tiling']} ({p['tiling_rule']})<br>"
                 f"L2↔SM: {exact_bytes(p['l2_bytes'])}") for p in pts]
        all_y += [p["l2_bytes"] for p in pts]
        fig.add_trace(go.Scatter(
            x=[p["sram_bytes"] for p in pts], y=[p["l2_bytes"] for p in pts],
            mode="lines+markers", name=label, marker=dict(size=8, color=color(algo, i)),
            line=dict(color=color(algo, i)), text=text, hovertemplate="%{text}<extra></extra>"))
    for key, name, dash in (("n2d2_over_m", "Θ(N²d²/M), slope −1", "dashdot"),
                            ("n2d_over_sqrt_m", "Θ(N²d/√M), slope −½", "dot"),
                            ("fa1_theorem2", "FA-1 Thm 2 count 2Nd + 3Nd⌈N/Bc⌉", "dash")):
        ys = refs[key]
        all_y += ys
        fig.add_trace(go.Scatter(
            x=list(sizes), y=ys, mode="lines", name=name, line=dict(color=REF, dash=dash, width=1.5),
            text=[f"{name}<br>M = {m:,} B: {exact_bytes(y)}" for m, y in zip(sizes, ys)],
            hovertemplate="%{text}<extra></extra>"))
    yr = _log_range(all_y, 1.5)
    # the d² crossover as a vertical line trace (hoverable, drawn in data coordinates)
    fig.add_trace(go.Scatter(
        x=[cross, cross], y=[10 ** yr[0], 10 ** yr[1]], mode="lines",
        name=f"M = d² = {d * d:,} elements ({capacity(cross)})",
        line=dict(color="#000000", width=2),
        hovertemplate=(f"Saha–Ye crossover M = d² = {d * d:,} elements = {cross:,} B"
                       "<extra></extra>")))
    lo, hi = min(sizes), max(sizes)
    xr = [math.log10(lo / 1.15), math.log10(hi * 1.15)]
    # regimes: shaded spans (shapes take data values on log axes, annotations take log10)
    if lo < cross:
        fig.add_vrect(x0=lo / 1.15, x1=cross, fillcolor="#ff7f0e", opacity=0.08, line_width=0)
        fig.add_annotation(x=math.log10(cross), y=1.0, xref="x", yref="paper", xanchor="right",
                           yanchor="top", showarrow=False, font=dict(size=11, color="#a0522d"),
                           text="small cache M < d²: Θ(N²d/√M) ")
    if hi > cross:
        fig.add_vrect(x0=cross, x1=hi * 1.15, fillcolor="#1f77b4", opacity=0.06, line_width=0)
        fig.add_annotation(x=math.log10(cross), y=1.0, xref="x", yref="paper", xanchor="left",
                           yanchor="top", showarrow=False, font=dict(size=11, color="#1f4e79"),
                           text=" large cache M ≥ d²: Θ(N²d²/M)")
    fig.update_layout(**LAYOUT, title=f"Tile traffic vs SRAM size M at N = {n:,} (Saha–Ye regimes)")
    fig.update_layout(height=500)
    fig.update_xaxes(type="log", range=xr, title="SRAM per CTA M (bytes)", exponentformat="SI")
    fig.update_yaxes(type="log", range=yr, title="L2 ↔ SM bytes", exponentformat="SI")
    return fig


# ---- side by side at one N --------------------------------------------------------------
def comparison_figure(records, seq: int) -> go.Figure:
    recs = [r for r in records if r["ok"]]
    algos = [r["algorithm"] for r in recs]
    cols = [color(a, i) for i, a in enumerate(algos)]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, column_widths=[0.22, 0.4, 0.38],
                        subplot_titles=("predicted time", "bytes per level",
                                        "unit utilization over the predicted time"))
    fig.add_trace(go.Bar(
        x=algos, y=[r["time_s"] * 1e6 for r in recs], marker_color=cols, name="time",
        showlegend=False,
        text=[f"<b>{r['algorithm']}</b><br>time {r['time_s']:.6g} s ({seconds(r['time_s'])})<br>"
              f"bound by {r['bound_by']}<br>model: {r['model']}" for r in recs],
        hovertemplate="%{text}<extra></extra>", textposition="none"), row=1, col=1)
    levels = (("L2→SM", "l2_to_smem_bytes", UNIT_COLORS["L2"]), ("SM→L2", "smem_to_l2_bytes", "#dbdb8d"),
              ("DRAM read", "dram_read_bytes", UNIT_COLORS["DRAM"]),
              ("DRAM write", "dram_write_bytes", "#c49c94"))
    for name, key, c in levels:
        fig.add_trace(go.Bar(
            x=algos, y=[r[key] for r in recs], name=name, marker_color=c, legendgroup="bytes",
            text=[f"<b>{r['algorithm']}</b> {name}<br>{exact_bytes(r[key])}" for r in recs],
            hovertemplate="%{text}<extra></extra>", textposition="none"), row=1, col=2)
    units = tuple((u, UNIT_COLORS[u]) for u in ("tensor cores", "exp units", "DRAM", "L2"))
    for unit, c in units:
        fig.add_trace(go.Bar(
            x=algos, y=[100 * r["utilization"][unit] for r in recs], name=f"{unit} busy",
            marker_color=c, legendgroup="util",
            text=[f"<b>{r['algorithm']}</b> {unit}: {100 * r['utilization'][unit]:.2f} % busy<br>"
                  f"roofline time {r['roofline'][unit]:.6g} s ({seconds(r['roofline'][unit])})<br>"
                  f"[{r['utilization_source']}]" for r in recs],
            hovertemplate="%{text}<extra></extra>", textposition="none"), row=1, col=3)
    fig.update_layout(**LAYOUT, title=f"Algorithms side by side at N = {seq:,}", barmode="group")
    fig.update_layout(legend=dict(orientation="h", y=-0.18))
    fig.update_yaxes(title="µs", row=1, col=1)
    fig.update_yaxes(type="log", title="bytes", exponentformat="SI", row=1, col=2)
    fig.update_yaxes(title="% of predicted time", range=[0, 105], row=1, col=3)
    return fig


# ---- CTA timelines ----------------------------------------------------------------------
KERNEL_OPACITY = (1.0, 0.6, 0.35, 0.2)   # kernels of one algorithm: its colour, lighter


def timeline_figure(panels: list, title: str) -> go.Figure:
    """Gantt by SM: one subplot per panel (name, bars, total CTAs, colour). Each bar is one CTA
    {sm, lane, start_s, end_s, cta, kernel, coord, detail}; CTAs resident on one SM at once
    sit in separate lanes of that SM's row."""
    from .report.data import assign_lanes
    panels = [p for p in panels if p[1]]
    titles = [f"{name}: first {len(bars):,} of {total:,} CTAs" for name, bars, total, _ in panels]
    height = 330 * len(panels) + 110 * (len(panels) - 1) + 150
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=titles,
                        vertical_spacing=(110 / height) if len(panels) > 1 else 0.0)
    for row, (name, bars, total, base_color) in enumerate(panels, start=1):
        lanes = assign_lanes(bars)
        kernels = list(dict.fromkeys(b["kernel"] for b in bars))
        for ki, kern in enumerate(kernels):
            kb = [b for b in bars if b["kernel"] == kern]
            c = base_color
            fig.add_trace(go.Bar(
                y=[b["sm"] + (b["lane"] + 0.5) / lanes - 0.5 for b in kb],
                x=[(b["end_s"] - b["start_s"]) * 1e6 for b in kb],
                base=[b["start_s"] * 1e6 for b in kb], orientation="h", width=0.9 / lanes,
                name=f"{name}: {kern}", legendgroup=name,
                marker=dict(color=c, opacity=KERNEL_OPACITY[min(ki, len(KERNEL_OPACITY) - 1)],
                            line=dict(width=0.3, color="#ffffff")),
                text=[(f"<b>{name}</b> {kern} CTA {b['cta']} {b.get('coord', '')}<br>"
                       f"SM {b['sm']} (slot {b['lane']})<br>"
                       f"start {b['start_s'] * 1e6:.4f} µs, end {b['end_s'] * 1e6:.4f} µs<br>"
                       f"duration {(b['end_s'] - b['start_s']) * 1e6:.4f} µs"
                       + (f"<br>{b['detail']}" if b.get("detail") else "")) for b in kb],
                hovertemplate="%{text}<extra></extra>", textposition="none"), row=row, col=1)
        sms = [b["sm"] for b in bars]
        span = max(sms) - min(sms)
        fig.update_yaxes(title="SM", autorange="reversed", tick0=0,
                         dtick=1 if span <= 12 else (5 if span <= 40 else 20), row=row, col=1)
        fig.update_xaxes(title="time (µs)", row=row, col=1)
    fig.update_layout(**LAYOUT, title=title, barmode="overlay", bargap=0)
    fig.update_layout(height=height, showlegend=True)
    return fig


# ---- public: from analyses and tables ----------------------------------------------------
def _records(analyses) -> list:
    from .report.sweep import record
    return [record(a) for a in analyses]


def roofline(analyses, measured=None) -> go.Figure:
    """The hierarchical roofline of analyses of one GPU and problem shape (any N, algorithm)."""
    analyses = list(analyses)
    if not analyses:
        raise ValueError("roofline() needs at least one analysis")
    a = analyses[0]
    return roofline_figure(_records(analyses), a.gpu, a.problem, measured)


def _rows_of(df) -> list:
    """Records of the bytes-vs-N figure from a sweep/compare table (rows with an error and
    rows without counters are left out)."""
    rows = df.to_dict("records") if hasattr(df, "to_dict") else list(df)
    out = []
    for r in rows:
        if isinstance(r.get("error"), str) or r.get("counters.l2_to_smem_bytes") is None:
            continue
        l2 = r["counters.l2_to_smem_bytes"] + r["counters.smem_to_l2_bytes"]
        dram_r, dram_w = r["dram_read_bytes"], r["dram_write_bytes"]
        out.append({"ok": True, "algorithm": r["algorithm"], "seq": int(r["problem.seq_q"]),
                    "l2_bytes": l2, "l2_to_smem_bytes": r["counters.l2_to_smem_bytes"],
                    "smem_to_l2_bytes": r["counters.smem_to_l2_bytes"],
                    "dram_read_bytes": dram_r, "dram_write_bytes": dram_w,
                    "dram_bytes": dram_r + dram_w, "dram_source": r.get("dram_source", "")})
    return out


def bytes_vs_seq(df, gpu=None, problem=None) -> go.Figure:
    """Bytes against N from a table of runs of one GPU and problem shape (iosim.api.sweep,
    iosim sweep); gpu and problem (for the reference lines) default to the first row's."""
    from .hardware import load_gpu
    from .problem import AttentionProblem
    recs = _rows_of(df)
    if not recs:
        raise ValueError("bytes_vs_seq() found no row without an error")
    first = (df.to_dict("records") if hasattr(df, "to_dict") else list(df))[0]
    if problem is None:
        fields = {k.split(".", 1)[1]: v for k, v in first.items() if k.startswith("problem.")}
        fields = {k: (v.item() if hasattr(v, "item") else v) for k, v in fields.items()}
        problem = AttentionProblem(**fields)
    gpu = load_gpu(gpu or first["gpu"])
    seqs = sorted({r["seq"] for r in recs})
    return bytes_vs_n_figure(recs, gpu, problem, seqs)


def bytes_vs_sram(problem=None, gpu="h100", algorithms=None, points: int = 10,
                  **problem_fields) -> go.Figure:
    """Tile traffic against shared-memory size M for `problem` (an AttentionProblem, or its
    fields as keyword arguments: seq, heads, head_dim, ...)."""
    from .options import problem_from_kwargs as _split
    from .hardware import load_gpu
    from .report import sweep as rs
    if problem is None:
        problem, _ = _split(problem_fields)
    gpu = load_gpu(gpu)
    sizes = rs.sram_sizes(problem, gpu, points)
    mpoints = rs.sweep_m(problem, gpu, sizes, algorithms)
    return bytes_vs_m_figure(mpoints, problem, sizes, rs.m_bounds(problem, sizes),
                             rs.m_slopes(mpoints, problem))


def timeline(analysis, cap: int = 2000) -> go.Figure:
    """The simulated CTA timeline by SM of one analysis (its first `cap` CTAs)."""
    from .report.data import sim_bars
    bars, total = sim_bars(analysis, cap)
    if not bars:
        raise ValueError("timeline() needs an analysis simulated with model='sim'")
    a = analysis
    return timeline_figure([(f"{a.algorithm} (simulated)", bars, total, color(a.algorithm))],
                           f"Simulated CTA timeline by SM: {a.algorithm} on {a.gpu.short_name}, "
                           f"N = {a.problem.seq_q:,}")


def compare(analyses) -> go.Figure:
    """Analyses of one problem side by side (time, bytes per level, unit utilization)."""
    analyses = list(analyses)
    if not analyses:
        raise ValueError("compare() needs at least one analysis")
    return comparison_figure(_records(analyses), analyses[0].problem.seq_q)
