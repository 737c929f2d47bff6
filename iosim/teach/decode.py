"""Section 8: decode is memory-bound. One new token per request reads the whole KV cache and
does 4·d FLOPs per (query head, key) pair, so its arithmetic intensity is about the number of
query heads per KV head (fp16/bf16): far below any GPU's ridge point.

Per request and KV head, with g query heads per KV head, s query tokens and L keys:
FLOPs 4·d·L·g·s (QKᵀ and PV), bytes 2·L·d·e (K and V, e bytes per element) plus the small Q
and O; intensity ≈ 2·g·s / e FLOP per byte: g for one token in fp16. The live numbers below
are iosim's counts of the flash-decoding schedule (roofline model: counts, not simulation)
on the lesson's GPU, at the lesson's N as the context length.
"""
from __future__ import annotations

from ..analysis.analyze import analyze
from .fmt import heading, nbytes, si, table

NAME = "decode"
TITLE = "Decode: why one token at a time is memory-bound"
NUMBER = 8


def _groups(heads: int) -> list:
    return [g for g in (1, 2, 4, 8, 16) if heads % g == 0] or [1]


def facts(ctx) -> dict:
    p0, gpu = ctx.problem, ctx.gpu
    L, d, eb = ctx.N, ctx.d, ctx.eb
    peak = gpu.tensor_peak_rate(p0.dtype)
    bw = gpu.dram_bandwidth_bytes_per_s
    rows = []
    for g in _groups(p0.heads_q):
        p = p0.with_(seq_q=1, seq_kv=L, heads_kv=p0.heads_q // g, causal=False)
        a = analyze(p, gpu, "flash-decoding", model="roofline")
        dram = a.dram_read_bytes + a.dram_write_bytes
        rows.append({"group": g, "heads_kv": p.heads_kv, "useful_flops": a.counters.useful_flops,
                     "dram_bytes": dram, "kv_bytes": p.kv_bytes(),
                     "intensity": a.counters.useful_flops / dram,
                     "closed_form_intensity": 2 * g / eb,
                     "time_s": a.predicted_time_s, "bound_by": a.bound_by,
                     "kv_time_s": p.kv_bytes() / bw})
    g_max = rows[-1]["group"]
    return {"L": L, "d": d, "eb": eb, "heads": p0.heads_q, "batch": p0.batch,
            "dtype": p0.dtype, "gpu": gpu.short_name, "peak_flops_per_s": peak,
            "dram_bytes_per_s": bw, "ridge_flop_per_byte": peak / bw, "rows": rows,
            "tokens_to_ridge": peak / bw / (2 * g_max / eb), "g_max": g_max}


def text(f: dict) -> str:
    rows = [(r["group"], r["heads_kv"], nbytes(r["kv_bytes"]), si(r["useful_flops"], "FLOP"),
             f"{r['intensity']:.2f}", f"{r['closed_form_intensity']:g}", si(r["time_s"], "s"),
             si(r["kv_time_s"], "s"), r["bound_by"]) for r in f["rows"]]
    return "\n".join([
        heading(NUMBER, TITLE), "",
        "In decode each request adds one query token and attends to its whole KV cache. Per KV",
        "head the kernel must read K and V (2·L·d elements) and does 4·d FLOPs for each of the",
        "g·L (query head, key) pairs: arithmetic intensity ≈ 2·g / (bytes per element), i.e. g",
        "FLOP/B in fp16/bf16 with g = query heads per KV head.", "",
        f"{f['gpu']}: {si(f['peak_flops_per_s'], 'FLOP/s')} of tensor cores ({f['dtype']}) and "
        f"{si(f['dram_bytes_per_s'], 'B/s')} of DRAM: ridge point "
        f"{f['ridge_flop_per_byte']:.0f} FLOP/B.",
        f"Flash-decoding at L = {f['L']:,} keys, {f['heads']} query heads, d = {f['d']}, "
        f"batch {f['batch']} (iosim counts):", "",
        table(["g", "KV heads", "KV cache", "useful FLOPs", "FLOP/B", "2g/e", "time",
               "KV / DRAM bw", "bound by"], rows), "",
        f"Even the densest row is {f['ridge_flop_per_byte'] / f['rows'][-1]['intensity']:.0f}× "
        "left of the ridge: the time is the KV cache divided by the DRAM",
        "bandwidth (plus launches), whatever the tensor cores could do. GQA helps",
        "because it shrinks the cache, not because it adds work: g× fewer KV heads, g× the",
        "intensity. Batching does not help attention (every request has its own cache); a",
        "shared prompt prefix does, when a cascade schedule reads its KV once for many requests.",
        f"s query tokens per request multiply the intensity by s: with g = {f['g_max']} the ridge "
        f"needs ~{f['tokens_to_ridge']:.0f} tokens,",
        "more than speculative decoding verifies at once (a handful).",
        "FA-2's prefill schedule is worse still: one query row in a 128-row tile per query",
        "head, and one CTA per head streaming the whole cache (`iosim report --decode`).",
    ])


def figure(f: dict):
    import plotly.graph_objects as go
    gs = [r["group"] for r in f["rows"]]
    fig = go.Figure([go.Bar(x=[str(g) for g in gs], y=[r["intensity"] for r in f["rows"]],
                            name="decode intensity (FLOP per DRAM byte)")])
    fig.add_hline(y=f["ridge_flop_per_byte"], line_dash="dash",
                  annotation_text=f"ridge {f['ridge_flop_per_byte']:.0f} FLOP/B")
    fig.update_layout(title="Decode arithmetic intensity vs query heads per KV head",
                      xaxis_title="g (query heads per KV head)", yaxis=dict(type="log",
                                                                           title="FLOP/B"))
    return fig
