"""One self-contained HTML page: plotly.js inlined once, every figure a fixed-id div, nothing
fetched from the network, and byte-identical output for the same inputs.

A small script at the end of the page writes a JSON status into <pre id="iosim-status">
once every figure has drawn its SVG and its data traces (or after ~10 s):
{"figures": n, "rendered": k, "with_data": m, "errors": [...], "done": true|false}.
Headless Chromium's --dump-dom shows it; tests/test_report_browser.py reads it.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field

from .. import __version__
from ..units import capacity, seconds, si
from . import data, sweep
from .. import plot as figures
from ..progress import Progress

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True,
                 "toImageButtonOptions": {"format": "png", "scale": 2}}
TIMELINE_CAP = 400   # CTAs per timeline panel: about two waves on a 132-SM GPU


@dataclass
class ReportSpec:
    problem: object              # AttentionProblem (seq_q is replaced per point)
    gpu: object                  # GpuSpec
    algorithms: list
    seqs: list
    compare_seq: int
    model: str = "sim"
    sim_mode: str = "fast"
    tiling: dict = field(default_factory=dict)
    command: str = ""
    m_points: int = 10
    timeline_cap: int = TIMELINE_CAP
    sim_max_ctas: int | None = sweep.SIM_MAX_CTAS


def _fig_html(fig, div_id: str) -> str:
    import plotly.io as pio
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id,
                       config=PLOTLY_CONFIG, validate=True)


def _table(rows, head=None, cls="") -> str:
    out = [f'<table class="{cls}">' if cls else "<table>"]
    if head:
        out.append("<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in head) + "</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def gpu_table(gpu, dtype: str) -> str:
    e = html.escape
    src = gpu.sources
    rows = [
        ("SMs", f"{gpu.sm_count}", "sm_count"),
        ("clock", si(gpu.clock_hz, "Hz"), "clock_hz"),
        ("shared memory / SM, / CTA", f"{gpu.shared_memory_per_sm_bytes:,} B "
                                      f"({capacity(gpu.shared_memory_per_sm_bytes)}), "
                                      f"{gpu.shared_memory_per_block_bytes:,} B "
                                      f"({capacity(gpu.shared_memory_per_block_bytes)})",
         "shared_memory_per_sm_bytes"),
        ("registers / SM", f"{gpu.registers_per_sm:,}", "registers_per_sm"),
        ("L2 capacity", f"{gpu.l2_capacity_bytes:,} B ({capacity(gpu.l2_capacity_bytes)})",
         "l2_capacity_bytes"),
        ("L2 → SM bandwidth", si(gpu.l2_bandwidth_bytes_per_s, "B/s"), "l2_bandwidth_bytes_per_s"),
        ("DRAM capacity", f"{gpu.dram_capacity_bytes:,} B ({capacity(gpu.dram_capacity_bytes)})",
         "dram_capacity_bytes"),
        ("DRAM bandwidth", si(gpu.dram_bandwidth_bytes_per_s, "B/s"), "dram_bandwidth_bytes_per_s"),
        (f"tensor cores ({dtype}, dense)", si(gpu.tensor_peak_rate(dtype), "FLOP/s"), "tensor_flops_per_s"),
        ("exp units", f"{si(gpu.exp_per_s, 'exp/s')} ({gpu.exp_per_clock_per_sm:g} / clock / SM)",
         "exp_per_clock_per_sm"),
        ("fp32 ALUs", si(gpu.fp32_flops_per_s, "FLOP/s"), "fp32_flops_per_s"),
        ("launch overhead", seconds(gpu.launch_overhead_s), "launch_overhead_s"),
    ]
    return _table([(e(k), e(v), f'<span class="src">{e(src.get(s, ""))}</span>')
                   for k, v, s in rows], ("figure", "value", "source"), "spec")


def comparison_table(records) -> str:
    rows = []
    for r in records:
        if not r["ok"]:
            rows.append((f"<b>{html.escape(r['algorithm'])}</b>",
                         f'<span class="err">{html.escape(r["error"])}</span>', "", "", "", "", ""))
            continue
        u = r["utilization"]
        rows.append((f"<b>{html.escape(r['algorithm'])}</b>", html.escape(r["tiling"]),
                     f"{r['ctas']:,} ({r['waves']:.2f} waves)",
                     f"{seconds(r['time_s'])}", html.escape(r["bound_by"]),
                     f"{si(r['useful_flops_per_s'], 'FLOP/s')}",
                     f"tensor {100 * u['tensor cores']:.0f} %, exp {100 * u['exp units']:.0f} %, "
                     f"DRAM {100 * u['DRAM']:.0f} %, L2 {100 * u['L2']:.0f} %"))
    return _table(rows, ("algorithm", "tiling", "CTAs", "time", "bound by", "useful FLOP/s",
                         "busy"), "cmp")


STYLE = """
body{font-family:Helvetica,Arial,sans-serif;margin:0 auto;max-width:1360px;padding:8px 20px;color:#222}
h1{font-size:22px;margin:10px 0 4px} h2{font-size:18px;margin:26px 0 6px;border-bottom:1px solid #ddd}
p,li{font-size:13.5px;line-height:1.45;max-width:1100px} .muted{color:#666}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} .src{color:#777;font-size:11px} .err{color:#a00}
.head{display:flex;gap:24px;flex-wrap:wrap} .head>div{flex:1 1 520px}
pre.cmd{background:#f6f6f6;border:1px solid #ddd;padding:6px 10px;white-space:pre-wrap;font-size:12.5px}
#iosim-status{display:none}
"""

ERROR_HOOK = """window.__iosimErrors=[];
window.addEventListener('error',function(e){window.__iosimErrors.push(String((e&&e.message)||e));});
window.addEventListener('unhandledrejection',function(e){window.__iosimErrors.push('unhandled rejection: '+String(e&&e.reason));});"""

STATUS_SCRIPT = """(function(){
  var el=document.getElementById('iosim-status'), tries=0;
  function check(){
    var divs=document.querySelectorAll('div.plotly-graph-div'), r=0, w=0, ids=[];
    for(var i=0;i<divs.length;i++){
      var gd=divs[i], svg=gd.querySelector('.main-svg');
      if(svg){r++;}
      var marks=gd.querySelectorAll('.trace .point, .trace path.js-line, .trace .js-fill').length;
      if(svg && gd.data && gd.data.length>0 && marks>0){w++;}else{ids.push(gd.id);}
    }
    return {figures:divs.length, rendered:r, with_data:w, missing:ids,
            errors:window.__iosimErrors.slice()};
  }
  function tick(){
    var s=check(); tries++;
    var done=s.figures>0 && s.rendered===s.figures && s.with_data===s.figures;
    if(done || tries>=100){ s.done=done; el.textContent=JSON.stringify(s);
      el.setAttribute('data-done', done?'1':'0'); }
    else { setTimeout(tick,100); }
  }
  if(document.readyState==='complete'){setTimeout(tick,50);}
  else{window.addEventListener('load',function(){setTimeout(tick,50);});}
})();"""


@dataclass
class _Collected:
    """What one report page is drawn from: the N sweep, the SRAM sweep and measured points."""
    base: object                 # the problem at the comparison N
    res: object                  # sweep.sweep_n's result
    sizes: list                  # SRAM sizes of the M sweep
    m_algos: list
    mpoints: list
    measured: list
    measured_note: str
    compare: list                # records at the comparison N
    slopes: dict

    @property
    def ok_points(self) -> list:
        return [q for q in self.res.points if q["ok"]]


def _collect(spec: ReportSpec, progress: bool) -> _Collected:
    p, gpu = spec.problem, spec.gpu
    base = p.with_(seq_q=spec.compare_seq, seq_kv=spec.compare_seq)
    sizes = sweep.sram_sizes(base, gpu, spec.m_points)
    m_algos = sweep.m_sweep_algorithms()
    bar = Progress(len(spec.algorithms) * len(spec.seqs) + len(m_algos) * len(sizes),
                   desc="report", enabled=progress, delay=2.0)
    res = sweep.sweep_n(p, gpu, spec.algorithms, spec.seqs, spec.compare_seq, spec.model,
                        spec.sim_mode, spec.tiling, bar, spec.sim_max_ctas)
    mpoints = sweep.sweep_m(base, gpu, sizes, m_algos, bar)
    bar.close(f"{len(res.points)} analyses, {len(mpoints)} SRAM sizes")
    measured, measured_note = data.measured_points(gpu, p, spec.algorithms, spec.seqs)
    return _Collected(base, res, sizes, m_algos, mpoints, measured, measured_note,
                      [r for r in res.points if r["seq"] == spec.compare_seq],
                      sweep.m_slopes(mpoints, base))


def _timeline_panels(spec: ReportSpec, c: _Collected) -> tuple[list, list]:
    """Simulated CTA timelines at the comparison N, and captured traces of the same problem."""
    sim_panels = []
    for algo in spec.algorithms:
        a = c.res.analyses.get((algo, spec.compare_seq))
        if a is not None and a.simulation is not None:
            bars, total = data.sim_bars(a, spec.timeline_cap)
            if bars:
                sim_panels.append((f"{algo} (simulated, {spec.sim_mode} mode)", bars, total,
                                   figures.color(algo)))
    trace_panels = []
    for path in data.find_traces(c.base):
        label, bars, total = data.trace_bars(path, spec.timeline_cap)
        if bars:
            trace_panels.append((label, bars, total, figures.color(label.split(" ")[0])))
    return sim_panels, trace_panels


def _figure_divs(spec: ReportSpec, c: _Collected, sim_panels: list,
                 trace_panels: list) -> dict:
    """Every figure of the page as its fixed-id div, keyed by that id."""
    p, gpu = spec.problem, spec.gpu
    figs = []   # (div id, figure)
    if c.ok_points:
        figs.append(("iosim-roofline", figures.roofline_figure(c.res.points, gpu, p, c.measured,
                                                                  spec.model)))
        figs.append(("iosim-bytes-vs-n", figures.bytes_vs_n_figure(c.res.points, gpu, p, spec.seqs)))
    if any(m["ok"] for m in c.mpoints):
        figs.append(("iosim-bytes-vs-m", figures.bytes_vs_m_figure(
            c.mpoints, c.base, c.sizes, sweep.m_bounds(c.base, c.sizes), c.slopes)))
    if any(r["ok"] for r in c.compare):
        figs.append(("iosim-compare", figures.comparison_figure(c.compare, spec.compare_seq)))
    if sim_panels:
        figs.append(("iosim-timeline-sim", figures.timeline_figure(
            sim_panels, f"Simulated CTA timeline by SM at N = {spec.compare_seq:,} "
                        f"(first waves)")))
    if trace_panels:
        figs.append(("iosim-timeline-trace", figures.timeline_figure(
            trace_panels, "Captured CTA timeline by SM (from the kernel's trace mode)")))
    return {fid: _fig_html(fig, fid) for fid, fig in figs}


def _head_html(spec: ReportSpec, c: _Collected, model_used: list, dram_src: list) -> str:
    """The page up to the first section: title, setup table, reproduce command, GPU table."""
    import plotly.offline

    p, gpu = spec.problem, spec.gpu
    e = html.escape
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>iosim report: {e(gpu.short_name)}, {e(', '.join(spec.algorithms))}, N {spec.seqs[0]:,}–{spec.seqs[-1]:,}</title>
<style>{STYLE}</style>
<script type="text/javascript">{ERROR_HOOK}</script>
<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>
</head><body>
<h1>iosim report — {e(gpu.name)}</h1>
<p class="muted">Attention IO: bytes per memory level, time and what binds it, for
{e(', '.join(spec.algorithms))} over N = {', '.join(f'{n:,}' for n in spec.seqs)}.
Hover any point for exact numbers.</p>
<div class="head"><div>
<h2 id="setup">Setup</h2>
{_table([
    ("problem", e(c.base.describe())
     + f" (N swept: {', '.join(f'{n:,}' for n in spec.seqs)})"),
    ("algorithms", e(", ".join(spec.algorithms))),
    ("comparison and SRAM sweep at", f"N = {spec.compare_seq:,}"),
    ("time model", e(", ".join(model_used)) + (f" (simulator mode {e(spec.sim_mode)})"
                                               if "sim" in model_used else "")),
    ("tiling overrides", e(", ".join(f"{k}={v}" for k, v in sorted(spec.tiling.items())) or "none (defaults)")),
    ("DRAM bytes", e("; ".join(dram_src))),
    ("iosim version", e(__version__)),
])}
<p>Reproduce this page:</p>
<pre class="cmd" id="iosim-command">{e(spec.command)}</pre>
</div><div>
<h2 id="gpu">GPU</h2>
{gpu_table(gpu, p.dtype)}
</div></div>
"""


def _figure_sections(spec: ReportSpec, c: _Collected, divs: dict, dram_src: list,
                     have_sim_timeline: bool) -> list[str]:
    """The sections that each hold one figure (the simulated timeline's last)."""
    p, gpu, e = spec.problem, spec.gpu, html.escape
    parts: list[str] = []

    def section(sid: str, title: str, intro: str, fid: str | None, missing: str = "") -> None:
        parts.append(f'<h2 id="{sid}">{e(title)}</h2>\n<p>{intro}</p>\n')
        if fid and fid in divs:
            parts.append(divs[fid] + "\n")
        elif missing:
            parts.append(f'<p class="muted">{missing}</p>\n')

    fpe = figures.flops_per_exp(p)
    section("roofline", "Hierarchical roofline",
            "Each algorithm at each N is one simulated run, drawn twice at the same height "
            "(achieved matmul FLOP/s): at its intensity against DRAM bytes (●) and against "
            "L2↔SM tile bytes (◇). A point under a roof's sloped part is limited by that "
            "level's bandwidth. The exp ceiling is the matmul FLOP rate the exponential units "
            f"allow: {si(gpu.exp_per_s, 'exp/s')} × {fpe:g} matmul FLOP per exponential "
            f"({'4d' if p.direction == 'fwd' else 'per pass'} for d = {p.head_dim}), "
            "a horizontal line because attention's exps grow with its FLOPs. "
            + e(c.measured_note) + ".", "iosim-roofline", "No point could be analyzed.")
    section("bytes-vs-n", "Bytes moved vs N",
            "Left: tile traffic between L2 and the SMs (what the FlashAttention papers count as "
            "HBM accesses); right: DRAM traffic "
            f"({e('; '.join(dram_src))}). Standard attention follows Θ(N²) (it writes and reads "
            "S and P); the flash algorithms follow Θ(N²d²/M) with M the shared memory of one SM; "
            "the dotted line is the compulsory traffic.", "iosim-bytes-vs-n")
    slope_txt = "; ".join(
        f"{a}: {s['large']:+.2f} for M ≥ d²" + (f", {s['small']:+.2f} below" if s["small"] is not None else "")
        for a, s in c.slopes.items() if s.get("large") is not None)
    section("bytes-vs-m", "Bytes vs SRAM size M",
            f"FA-1 and FA-2 at N = {spec.compare_seq:,} on the same GPU with M bytes of shared "
            "memory per CTA. FA-1 re-derives the paper's blocks (B<sub>c</sub> = ⌈M/4d⌉, "
            "B<sub>r</sub> = min(B<sub>c</sub>, d)); FA-2, whose default tiles do not follow M, "
            "uses the largest square tile that fits (one stage). "
            "Saha–Ye: the IO complexity is Θ(min(N²d/√M, N²d²/M)); the two terms cross at "
            f"M = d² = {c.base.head_dim ** 2:,} elements ({capacity(c.base.head_dim ** 2 * c.base.elem_bytes)}). Fitted log–log slopes: "
            f"{e(slope_txt) or 'n/a'} (Θ(N²d²/M) predicts −1)."
            + ("" if "square" in c.m_algos else " The square-tiling algorithm for the small-cache "
               "regime is not available in this iosim, so only the bound is drawn there."),
            "iosim-bytes-vs-m", "No SRAM size could be analyzed.")
    util_src = sorted({r["utilization_source"] for r in c.compare if r["ok"]})
    section("compare", f"Side by side at N = {spec.compare_seq:,}",
            "Time, bytes per level and the fraction of the predicted time each unit is busy "
            f"({e('; '.join(util_src) or 'n/a')}).", "iosim-compare",
            "No algorithm could be analyzed at this N.")
    parts.append(comparison_table(c.compare) + "\n")
    section("timeline", "CTA timeline",
            "Each bar is one CTA on one SM (CTAs resident together share the SM's row in "
            f"separate slots); at most {spec.timeline_cap} CTAs per algorithm, the earliest "
            "to start, so the page stays small.", "iosim-timeline-sim",
            "No simulated timeline: " + ("the simulator is not available in this iosim, or the "
                                          "time model is the roofline." if not have_sim_timeline else ""))
    return parts


def _tail_html(spec: ReportSpec, c: _Collected, divs: dict) -> str:
    """Captured timeline, model notes, skipped points, and the status script."""
    e = html.escape
    parts = []
    if "iosim-timeline-trace" in divs:
        parts.append(divs["iosim-timeline-trace"] + "\n")
    else:
        parts.append(f'<p class="muted">No kernel trace was captured for this problem '
                     f'(none in tests/data/traces/ for {e(c.base.describe())}).</p>\n')
    notes = sorted(c.res.notes) + c.res.substituted
    if notes:
        parts.append('<h2 id="notes">Model notes</h2>\n<ul>' + "".join(
            f"<li>{e(n)}</li>" for n in notes) + "</ul>\n")
    failures = [q for q in c.res.points if not q["ok"]] + [m for m in c.mpoints if not m["ok"]]
    if failures:
        parts.append('<h2 id="skipped">Skipped points</h2>\n<ul>' + "".join(
            f"<li>{e(f['algorithm'])} "
            + (f"N = {f['seq']:,}" if "sram_bytes" not in f else f"M = {f['sram_bytes']:,} B")
            + f": {e(f['error'])}</li>" for f in failures) + "</ul>\n")
    parts.append(f'<p class="muted">Generated by iosim {e(__version__)}. Self-contained: '
                 'plotly.js is embedded; nothing is fetched from the network.</p>\n'
                 '<pre id="iosim-status">{"pending": true}</pre>\n'
                 f'<script type="text/javascript">{STATUS_SCRIPT}</script>\n</body></html>\n')
    return "".join(parts)


def build_report(spec: ReportSpec, progress: bool = True) -> str:
    """The report page for `spec`, as one HTML string."""
    c = _collect(spec, progress)
    sim_panels, trace_panels = _timeline_panels(spec, c)
    divs = _figure_divs(spec, c, sim_panels, trace_panels)
    model_used = sorted({q["model"] for q in c.ok_points}) or [spec.model]
    dram_src = sorted({q["dram_source"] for q in c.ok_points})
    return (_head_html(spec, c, model_used, dram_src)
            + "".join(_figure_sections(spec, c, divs, dram_src, bool(sim_panels)))
            + _tail_html(spec, c, divs))
