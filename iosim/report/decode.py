"""The decode page of `iosim report --decode`: one query token per request against a KV cache.

Three figures, each from analyses run here (nothing measured, nothing fitted):
  - time vs context length for FA-2 and Flash-Decoding (the flat curve: split-KV keeps every
    SM streaming the cache, so time grows with the bytes, not with a per-CTA serial loop);
  - K/V bytes moved L2 → SM vs the GQA group size (query heads per KV head): FA-2 reads a KV
    head once per query head, Flash-Decoding once per group;
  - what the page size costs: K/V load operations and the unused tail of last pages.
"""
from __future__ import annotations

import html

import plotly.graph_objects as go

from .. import __version__
from ..units import nbytes, seconds, si
from .. import plot as figures   # the one implementation of the shared figure style

DECODE_SEQ_KV = (1024, 4096, 16384, 65536, 131072)
DECODE_ALGOS = ("fa2", "flash-decoding")
GROUP_SIZES = (1, 2, 4, 8, 16, 32)
PAGE_SIZES = (8, 16, 32, 64, 128, 256)


def time_records(problem, gpu, seq_kvs=DECODE_SEQ_KV, algorithms=DECODE_ALGOS, model="sim") -> list:
    from ..analysis.analyze import analyze
    out = []
    for algo in algorithms:
        for n in seq_kvs:
            p = problem.with_(seq_q=1, seq_kv=n, seq_kv_list=None, prefix_len=0, page_size=None)
            a = analyze(p, gpu, algo, model=model)
            out.append({"algorithm": algo, "seq_kv": n, "time_s": a.predicted_time_s,
                        "bound_by": a.bound_by, "kv_bytes": p.kv_bytes(),
                        "dram_bytes": a.dram_read_bytes + a.dram_write_bytes})
    return out


def group_records(problem, gpu, groups=GROUP_SIZES, seq_kv=32768, algorithms=DECODE_ALGOS) -> list:
    """K+V bytes loaded L2 → SM (exact counts) at heads_kv fixed, heads_q = g · heads_kv."""
    from ..algorithms import build_schedule
    out = []
    for algo in algorithms:
        for g in groups:
            p = problem.with_(seq_q=1, seq_kv=seq_kv, heads_q=g * problem.heads_kv,
                              seq_kv_list=None, prefix_len=0, page_size=None)
            t = build_schedule(p, gpu, algo).totals()
            out.append({"algorithm": algo, "group": g,
                        "kv_load_bytes": t.load_bytes["K"] + t.load_bytes["V"],
                        "kv_cache_bytes": p.kv_bytes()})
    return out


def page_records(problem, gpu, pages=PAGE_SIZES, seq_kv=32768) -> list:
    """Flash-Decoding's K/V load operations and the footprint's unused bytes per page size."""
    from ..algorithms import build_schedule
    from ..algorithms.kvcache import footprint
    out = []
    lens = tuple(seq_kv - 997 * i for i in range(8))       # 8 requests of unequal lengths
    base = problem.with_(batch=8, seq_q=1, seq_kv=seq_kv, seq_kv_list=lens, prefix_len=0)
    for ps in pages:
        p = base.with_(page_size=ps)
        s = build_schedule(p, gpu, "flash-decoding")
        loads = 0
        for k in s.kernels:
            for rep, count in k.classes:
                loads += count * _kv_loads(k.program(rep))
        f = footprint(p)
        out.append({"page_size": ps, "kv_loads": loads, "unused_bytes": f.unused_bytes,
                    "footprint_bytes": f.bytes, "kv_load_bytes": s.totals().load_bytes["K"] * 2})
    return out


def _kv_loads(program) -> int:
    from ..schedule import Load, Loop
    n = 0
    for item in program:
        if isinstance(item, Loop):
            n += item.count * _kv_loads(item.body)
        elif isinstance(item, Load) and item.tensor in ("K", "V"):
            n += 1
    return n


def time_figure(records) -> go.Figure:
    fig = go.Figure()
    for i, algo in enumerate(dict.fromkeys(r["algorithm"] for r in records)):
        rs = [r for r in records if r["algorithm"] == algo]
        fig.add_trace(go.Scatter(
            x=[r["seq_kv"] for r in rs], y=[r["time_s"] * 1e6 for r in rs], mode="lines+markers",
            name=algo, line=dict(color=figures.color(algo, i)),
            text=[f"{algo}, KV length {r['seq_kv']:,}<br>time {seconds(r['time_s'])}<br>"
                  f"KV cache {nbytes(r['kv_bytes'])}<br>bound by {html.escape(r['bound_by'])}<br>"
                  f"time per KV byte {r['time_s'] / r['kv_bytes'] * 1e12:.3f} ps/B" for r in rs],
            hoverinfo="text"))
    fig.update_layout(**figures.LAYOUT, title="Decode time vs context length (one token)",
                      xaxis=dict(title="KV length (tokens)", type="log"),
                      yaxis=dict(title="time (µs)", type="log"))
    return fig


def group_figure(records) -> go.Figure:
    fig = go.Figure()
    for i, algo in enumerate(dict.fromkeys(r["algorithm"] for r in records)):
        rs = [r for r in records if r["algorithm"] == algo]
        fig.add_trace(go.Scatter(
            x=[r["group"] for r in rs], y=[r["kv_load_bytes"] for r in rs], mode="lines+markers",
            name=algo, line=dict(color=figures.color(algo, i)),
            text=[f"{algo}, {r['group']} query heads per KV head<br>K+V loaded "
                  f"{figures.exact_bytes(r['kv_load_bytes'])}<br>KV cache "
                  f"{figures.exact_bytes(r['kv_cache_bytes'])}" for r in rs], hoverinfo="text"))
    rs = [r for r in records if r["algorithm"] == records[0]["algorithm"]]
    fig.add_trace(go.Scatter(x=[r["group"] for r in rs], y=[r["kv_cache_bytes"] for r in rs],
                             mode="lines", name="KV cache (read once)",
                             line=dict(color=figures.REF, dash="dot"), hoverinfo="skip"))
    fig.update_layout(**figures.LAYOUT, title="K+V bytes loaded vs GQA group size",
                      xaxis=dict(title="query heads per KV head", type="log"),
                      yaxis=dict(title="bytes L2 → SM", type="log"))
    return fig


def page_figure(records) -> go.Figure:
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[r["page_size"] for r in records], y=[r["kv_loads"] for r in records],
        mode="lines+markers", name="K/V load operations", line=dict(color="#2ca02c"),
        text=[f"pages of {r['page_size']}<br>{r['kv_loads']:,} K/V loads<br>K+V bytes "
              f"{figures.exact_bytes(r['kv_load_bytes'])}" for r in records], hoverinfo="text"))
    fig.add_trace(go.Scatter(
        x=[r["page_size"] for r in records], y=[max(r["unused_bytes"], 1) for r in records],
        mode="lines+markers", name="unused bytes in last pages", yaxis="y2",
        line=dict(color="#9467bd", dash="dash"),
        text=[f"pages of {r['page_size']}<br>unused {figures.exact_bytes(r['unused_bytes'])}"
              f"<br>footprint {figures.exact_bytes(r['footprint_bytes'])}" for r in records],
        hoverinfo="text"))
    fig.update_layout(**figures.LAYOUT, title="What the page size costs (flash-decoding)",
                      xaxis=dict(title="page size (tokens)", type="log"),
                      yaxis=dict(title="K/V load operations", type="log"),
                      yaxis2=dict(title="unused bytes", type="log", overlaying="y", side="right"))
    return fig


def build_decode_report(problem, gpu, model: str = "sim", command: str = "",
                        seq_kvs=DECODE_SEQ_KV) -> str:
    """A self-contained HTML page with the three decode figures and their tables."""
    import plotly.offline

    from .page import ERROR_HOOK, STATUS_SCRIPT, STYLE, _fig_html, _table, gpu_table
    e = html.escape
    times = time_records(problem, gpu, seq_kvs, model=model)
    groups = group_records(problem, gpu)
    pages = page_records(problem, gpu)
    by = {(r["algorithm"], r["seq_kv"]): r for r in times}
    lo, hi = seq_kvs[0], seq_kvs[-1]
    growth = {a: by[(a, hi)]["time_s"] / by[(a, lo)]["time_s"] for a in DECODE_ALGOS}
    speedup = by[("fa2", hi)]["time_s"] / by[("flash-decoding", hi)]["time_s"]
    bw = {a: by[(a, hi)]["kv_bytes"] / by[(a, hi)]["time_s"] for a in DECODE_ALGOS}
    rows = [(f"{n:,}", nbytes(by[("fa2", n)]["kv_bytes"]),
             seconds(by[("fa2", n)]["time_s"]), seconds(by[("flash-decoding", n)]["time_s"]),
             f"{by[('fa2', n)]['time_s'] / by[('flash-decoding', n)]['time_s']:.1f}×",
             e(by[("flash-decoding", n)]["bound_by"])) for n in seq_kvs]
    parts = [f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>iosim decode report: {e(gpu.short_name)}</title>
<style>{STYLE}</style>
<script type="text/javascript">{ERROR_HOOK}</script>
<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>
</head><body>
<h1>iosim decode report — {e(gpu.name)}</h1>
<p class="muted">One new query token per request against a KV cache:
{e(problem.with_(seq_q=1, seq_kv=hi).describe())}, KV length swept {lo:,}–{hi:,}.
Hover any point for exact numbers.</p>
<pre class="cmd" id="iosim-command">{e(command)}</pre>
{gpu_table(gpu, problem.dtype)}
<h2 id="decode-time">Time vs context length</h2>
<p>FA-2 runs one CTA per query head over the whole cache: {problem.batch * problem.heads_q} CTAs
for {gpu.sm_count} SMs, each a serial loop over the KV blocks, so its time grows
{growth['fa2']:.0f}× from {lo:,} to {hi:,} keys and sits far above what the bytes need.
Flash-Decoding splits the cache over the SMs and packs a KV group's query heads into one tile:
its time follows the KV bytes at DRAM bandwidth ({growth['flash-decoding']:.0f}× over the same
range, the bytes grow {hi // lo}×) and is {speedup:.1f}× faster at {hi:,} keys.
KV bytes per second at {hi:,} keys: fa2 {si(bw['fa2'], 'B/s')}, flash-decoding
{si(bw['flash-decoding'], 'B/s')}, against {si(gpu.dram_bandwidth_bytes_per_s, 'B/s')} of
DRAM bandwidth. Below ~16k keys even Flash-Decoding cannot fill the GPU (too few KV blocks to
split) and its curve flattens towards launch and latency cost.</p>
{_fig_html(time_figure(times), "iosim-decode-time")}
{_table(rows, head=("KV length", "KV cache", "fa2", "flash-decoding", "speed-up", "flash-decoding bound by"))}
<h2 id="decode-gqa">KV bytes vs GQA group size</h2>
<p>At {problem.heads_kv} KV heads and 32,768 keys, adding query heads per KV head multiplies
FA-2's K/V reads (one pass per query head), while Flash-Decoding's stay at the cache size
until the packed rows outgrow one Q tile (64 rows).</p>
{_fig_html(group_figure(groups), "iosim-decode-gqa")}
<h2 id="decode-pages">Page size</h2>
<p>Paged KV splits each K/V tile at page boundaries: pages smaller than the tile mean more,
smaller loads (the bytes do not change); pages larger waste the unused tail of each request's
last page. Eight requests of 32,768 − 997·i keys (i = 0 … 7).</p>
{_fig_html(page_figure(pages), "iosim-decode-pages")}
{_table([(r['page_size'], f"{r['kv_loads']:,}", nbytes(r['kv_load_bytes']), nbytes(r['footprint_bytes']), nbytes(r['unused_bytes'])) for r in pages], head=("page size", "K/V loads", "K+V bytes", "footprint", "unused"))}
<p class="muted">Generated by iosim {e(__version__)}; time model: {e(model)}.</p>
<pre id="iosim-status">{{"pending": true}}</pre>
<script type="text/javascript">{STATUS_SCRIPT}</script>
</body></html>
"""]
    return "".join(parts)
