"""Plain-text tables of analyses for the terminal."""
from __future__ import annotations

from ..units import capacity, nbytes, seconds, si


def _rows_to_text(rows, title: str | None = None) -> str:
    width = max(len(k) for k, _ in rows if k)
    out = [title, "-" * len(title)] if title else []
    for k, v in rows:
        out.append("" if not k else f"{k:<{width}}  {v}")
    return "\n".join(out)


# ---- the run table: sections of (label, value) rows ----------------------------------------
# Each section is a function of the Analysis returning (heading, rows) or None; the text and
# HTML renderings walk SECTIONS, so a new section (e.g. a time breakdown) is one function and
# one entry here.

def _header(a):
    p, g = a.problem, a.gpu
    rows = [("GPU", f"{g.name} ({g.short_name}): {g.sm_count} SMs, "
                    f"{capacity(g.shared_memory_per_sm_bytes)} shared memory per SM, "
                    f"{capacity(g.l2_capacity_bytes)} L2, {capacity(g.dram_capacity_bytes)} DRAM"),
            ("problem", p.describe()),
            ("algorithm", a.algorithm),
            ("tiling", "; ".join(f"{k}: {t.describe()}" for k, t in a.tiling.items()))]
    for k in a.kernels:
        instr = k.pipeline.get("mma_instruction", "wgmma").replace("_", ".")
        rows.append((f"kernel {k.name}",
                     f"grid {'×'.join(map(str, k.grid))} = {k.ctas:,} CTAs, {k.threads_per_cta} thr, "
                     f"{capacity(k.smem_bytes_per_cta)} smem, {k.registers_per_thread} regs, "
                     f"{k.ctas_per_sm} CTA/SM, {k.waves:.2f} waves, {instr}"))
    return None, rows


def _traffic(a):
    c = a.counters
    rows = [("L2 → SM (tile loads)", nbytes(c.l2_to_smem_bytes)),
            ("SM → L2 (tile stores)", nbytes(c.smem_to_l2_bytes)),
            ("DRAM read / write", f"{nbytes(a.dram_read_bytes)} / {nbytes(a.dram_write_bytes)}  "
                                  f"[{a.dram_source}]")]
    if a.simulation is not None:
        rows.append(("  compulsory (estimate)",
                     f"{nbytes(c.dram_read_bytes)} / {nbytes(c.dram_write_bytes)}  "
                     "[each tensor once: perfect L2 reuse]"))
    rows += [("shared-memory operand reads", f"{nbytes(c.smem_read_bytes_estimate)}  "
                                             f"[MMA operands, {_operand_path(a)}]"),
             ("tensor-core FLOPs", f"{si(c.mma_flops, 'FLOP')} executed, "
                                   f"{si(c.useful_flops, 'FLOP')} useful"),
             ("exponentials", si(c.exp_count)),
             ("other elementwise ops", si(c.alu_ops))]
    return "Traffic and work (counted from the schedule)", rows


def _operand_path(a) -> str:
    instrs = {k.pipeline.get("mma_instruction", "wgmma") for k in a.kernels}
    return " and ".join(sorted("ldmatrix into registers for mma.sync" if i == "mma_sync" else
                               "read by wgmma from shared memory" for i in instrs))


def _bounds(a):
    b, r = a.bounds, a.roofline
    return "IO bounds and intensity", [
        ("intensity vs DRAM", f"{si(r.intensity_dram_flop_per_byte)} FLOP/B "
                              f"(ridge {r.ridge_dram_flop_per_byte:.0f} at peak)"),
        ("intensity vs L2", f"{si(r.intensity_l2_flop_per_byte)} FLOP/B "
                            f"(ridge {r.ridge_l2_flop_per_byte:.0f} at peak)"),
        ("compulsory traffic", nbytes(b.compulsory_bytes)),
        ("IO lower bound", f"{nbytes(b.lower_bound_bytes)}  [{b.regime}, M = "
                           f"{b.sram_elements:,} elements]"),
        ("tile traffic / bound", f"{a.bound_ratio:.2f}×")]


def _peak(a):
    g, r, p = a.gpu, a.roofline, a.problem
    rows = [("tensor cores", f"{seconds(r.tensor_time_s)}  "
                             f"[{si(g.tensor_peak_rate(p.dtype), 'FLOP/s')} {p.dtype} dense]"),
            ("exp units", f"{seconds(r.exp_time_s)}  [{si(g.exp_per_s, 'exp/s')}]"),
            ("ALUs", f"{seconds(r.alu_time_s)}  [{si(g.alu_ops_per_s, 'op/s')}]"),
            ("DRAM", f"{seconds(r.dram_time_s)}  [{si(g.dram_bandwidth_bytes_per_s, 'B/s')}]"),
            ("L2", f"{seconds(r.l2_time_s)}  [{si(g.l2_bandwidth_bytes_per_s, 'B/s')}]"),
            ("roofline time", f"{seconds(r.roofline_time_s)}  (the largest: {r.bound})")]
    return "Time at datasheet peaks (roofline: each unit alone, nothing else modelled)", rows


def _simulated(a):
    sim = a.simulation
    if sim is None:
        return None
    d = sim.to_dict()
    util, t = d["utilization"], a.predicted_time_s
    g, p = a.gpu, a.problem
    b = a.time_breakdown or {}
    mma_s, operand_s = b.get("mma_s", 0.0), b.get("mma_operand_reads_s", 0.0)
    issue_s = b.get("issue_slots_s", 0.0)
    busy_s = mma_s + operand_s          # what the tensor server's busy time counts
    if getattr(g, "mma_sync_exposed_fraction_two_warps", None) is not None and any(
            k.pipeline.get("mma_instruction", "wgmma") == "mma_sync" for k in a.kernels):
        # mma.sync with measured exposure: the MMA stream its own warps hold is busy time too
        busy_s += (b.get("issue_slots_s", 0.0) + b.get("copy_issue_hold_s", 0.0)
                   + b.get("reduce_hold_s", 0.0))
    scale = b.get("clock_hz", g.clock_hz) / g.clock_hz
    raw_operand_s = a.counters.smem_read_bytes_estimate / (
        g.shared_memory_bandwidth_bytes_per_s * scale)     # all SMs' bandwidth, at the clock
    instrs = {k.pipeline.get("mma_instruction", "wgmma") for k in a.kernels}
    sync = "mma_sync" in instrs
    clock = b.get("clock_hz", g.clock_hz)
    frac = g.mma_flops_per_s_per_sm(p.dtype, "mma_sync") / g.tensor_flops_per_s_per_sm(p.dtype)
    at = f" at {clock / 1e6:,.0f} MHz (sustained under load)" if clock < g.clock_hz else ""
    one, two = (getattr(g, "tensor_mma_sync_fraction_one_warp", None),
                getattr(g, "tensor_mma_sync_fraction_two_warps", None))
    frac_note = (f"{one:.1%} / {two:.1%} (1 / 2+ warps per SM sub-partition)"
                 if one is not None and two is not None else f"{frac:.1%}")
    rate_note = (f"mma.sync at {frac_note} of wgmma's rate per clock{at}" if sync else
                 f"wgmma at its achievable rate{at}")
    binds = operand_s > 0.25 * busy_s if busy_s else False
    rows = [("predicted time", f"{seconds(t)}  [{a.model}, {d['mode']} mode]"),
            ("tensor unit busy", f"{util['tensor']:.0%} = {seconds(util['tensor'] * t)}  "
                                 f"[its work, {seconds(busy_s)} per SM: the lines below]")]
    rows.append(("  MMAs", f"{seconds(mma_s)}  [{rate_note}]"))
    if raw_operand_s:
        if sync and not getattr(g, "mma_sync_operands_overlap", False):
            overlap = "added: the same warps issue ldmatrix, then mma.sync"
        else:
            overlap = (f"overlapped by {'mma.sync' if sync else 'wgmma'}; "
                       f"{seconds(operand_s)} beyond the MMAs")
        rows.append(("  shared-memory operand reads",
                     f"{seconds(raw_operand_s)}  [{nbytes(a.counters.smem_read_bytes_estimate)} at "
                     f"{si(g.shared_memory_bandwidth_bytes_per_s, 'B/s')}; {overlap}]"
                     + ("  ← binds" if binds and sync and a.bound_by == "tensor cores" else "")))
    if issue_s:
        how = ("the measured exposed fraction of its exp/ALU time"
               if sync and getattr(g, "mma_sync_exposed_fraction_two_warps", None) is not None else
               "exp and elementwise instructions issue at 128 lanes/clock")
        exposed = sync and getattr(g, "mma_sync_exposed_fraction_two_warps", None) is not None
        rows.append(("MMA stream held by softmax", f"{seconds(issue_s)}  [{how}; "
                                                   + ("part of the tensor unit's busy time]"
                                                      if exposed else "not tensor busy time]")))
    copy_s, reduce_s = b.get("copy_issue_hold_s", 0.0), b.get("reduce_hold_s", 0.0)
    if copy_s:
        rows.append(("MMA stream held by copy issue", f"{seconds(copy_s)}  [the MMA warps issue "
                                                      f"their own cp.async copies]"))
    if reduce_s:
        rows.append(("MMA stream held by atomics", f"{seconds(reduce_s)}  [reduce stores at "
                                                   f"one SM's measured rate]"))
    names = {"exp": "exp units busy", "alu": "ALUs busy", "l2": "L2 busy", "dram": "DRAM busy"}
    for key, label in names.items():
        rows.append((label, f"{util[key]:.0%} = {seconds(util[key] * t)}"))
    if b.get("epilogue_s"):
        rows.append(("GEMM epilogue path busy",
                     f"{seconds(b['epilogue_s'])} per SM  [cuBLAS sm90 epilogues: C tiles "
                     f"through shared memory and TMA stores at the SM's measured rate]"))
    if b.get("dram_access_penalty_s"):
        rows.append(("  partial/misaligned access",
                     f"{seconds(b['dram_access_penalty_s'])}  [DRAM time beyond the bytes': "
                     f"sectors shared by two CTAs' stores, rows that start off the 128-byte "
                     f"line]"))
    stall = ", ".join(f"{k} {v:.0%}" for k, v in d["stall_fraction"].items())
    rows += [("CTA time stalled on", stall),
             ("L2 hit rate (loads)", f"{d['l2_hit_rate']:.1%}  [{d['model']['l2_policy']}, "
                                     f"{capacity(d['model']['l2_effective_capacity_bytes'])} effective]"),
             ("simulator", f"{d['mode']} mode, {d['model'].get('engine', '')} engine"
                           + _replay_note(d))]
    return "Simulated (unit rates as modelled: instruction class, operand reads, overlap)", rows


def _verdict(a):
    if a.simulation is not None:
        util = a.simulation.to_dict()["utilization"]
        busiest = max(util, key=util.get)
        why = (f"the busiest simulated unit, {util[busiest]:.0%} of the predicted time"
               if a.bound_by in BOUND_LABELS.values() else "no simulated unit is ≥ 70% busy")
    else:
        n = len(a.kernels)
        return "", [("predicted time", f"{seconds(a.predicted_time_s)}  [roofline model: roofline "
                                       f"time + {n} launch{'es' if n > 1 else ''} × "
                                       f"{seconds(a.gpu.launch_overhead_s)}]"),
                    ("bound by", f"{a.bound_by}  [the largest time at datasheet peak]"),
                    ("achieved", f"{a.achieved_tflops:.1f} TFLOP/s useful"), *_notes(a)]
    return "", [("bound by", f"{a.bound_by}  [{why}]"),
                ("achieved", f"{a.achieved_tflops:.1f} TFLOP/s useful"), *_notes(a)]


def _notes(a) -> list:
    """The schedule's notes (split-KV plan, paging, a prefill schedule on a decode problem)."""
    return [("note", n) for n in getattr(a, "notes", ())]


BOUND_LABELS = {"dram": "DRAM bandwidth", "l2": "L2 bandwidth", "tensor": "tensor cores",
                "exp": "exp units", "alu": "ALUs"}
def _breakdown(a):
    """What the simulated section's busy times leave out (machine.time_breakdown): launches and
    the time no unit's busy time covers. The per-unit lines are in the simulated section."""
    b = a.time_breakdown
    if not b:
        return None
    return "Time no unit covers", [
        ("launches", seconds(b["launch_s"])),
        ("not covered by any unit", f"{seconds(b['unhidden_s'])}  [tail waves, prologue/epilogue, "
                                    f"pipeline fill, waits]")]


SECTIONS = [_header, _traffic, _bounds, _peak, _simulated, _breakdown, _verdict]


def analysis_sections(a) -> list:
    """[(heading or None, [(label, value), ...]), ...] of the run table."""
    return [s for s in (f(a) for f in SECTIONS) if s is not None]


def analysis_table(a) -> str:
    rows = []
    for heading, section in analysis_sections(a):
        if rows:
            rows.append(("", ""))
        if heading:
            rows.append((f"{heading}:", ""))
        rows += section
    width = max(len(k) for k, _ in rows if k and not k.endswith(":"))
    title = f"iosim {a.algorithm} on {a.gpu.short_name}"
    out = [title, "-" * len(title)]
    for k, v in rows:
        out.append("" if not k else k if k.endswith(":") and not v else f"{k:<{width}}  {v}")
    return "\n".join(out)


def analysis_html(a) -> str:
    """The run table as an HTML table (Analysis._repr_html_ in Jupyter)."""
    import html
    e = html.escape
    out = [f'<table class="iosim-run"><caption style="text-align:left"><b>iosim '
           f'{e(a.algorithm)} on {e(a.gpu.short_name)}</b></caption>']
    for heading, rows in analysis_sections(a):
        if heading:
            out.append(f'<tr><th colspan="2" style="text-align:left">{e(heading)}</th></tr>')
        out += [f'<tr><td style="text-align:left">{e(k)}</td>'
                f'<td style="text-align:left">{e(v)}</td></tr>' for k, v in rows]
    out.append("</table>")
    return "\n".join(out)


def _replay_note(sim: dict) -> str:
    """Where the fast mode's L2 replay saw a sample: which, and how to widen it."""
    model = sim["model"]
    ctas = model.get("l2_simulated_ctas")
    total = [k["num_ctas"] for k in sim["kernels"]] if ctas else []
    ratio = model.get("l2_set_sampling_ratio", 1)
    parts = []
    if ratio > 1:
        parts.append(f"1 tile in {ratio}")
    if ctas and sum(ctas) < sum(total):
        parts.append(f"the first {sum(ctas):,} of {sum(total):,} CTAs")
    if not parts:
        return ""
    return f"; L2 replay of {' and '.join(parts)} (more: --l2-samples)"


def compare_table(analyses) -> str:
    cols = [a.algorithm for a in analyses]
    metrics = [
        ("tiling", lambda a: "; ".join(f"{t.block_q}×{t.block_kv}" for t in a.tiling.values())),
        ("CTAs", lambda a: f"{sum(k.ctas for k in a.kernels):,}"),
        ("L2→SM", lambda a: nbytes(a.counters.l2_to_smem_bytes)),
        ("SM→L2", lambda a: nbytes(a.counters.smem_to_l2_bytes)),
        ("DRAM", lambda a: nbytes(a.dram_read_bytes + a.dram_write_bytes)),
        ("FLOPs", lambda a: si(a.counters.mma_flops, "FLOP")),
        ("exps", lambda a: si(a.counters.exp_count)),
        ("traffic/bound", lambda a: f"{a.bound_ratio:.2f}×"),
        ("time", lambda a: seconds(a.predicted_time_s)),
        ("bound by", lambda a: a.bound_by),
        ("TFLOP/s", lambda a: f"{a.achieved_tflops:.1f}"),
    ]
    table = [["metric"] + cols] + [[name] + [f(a) for a in analyses] for name, f in metrics]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
