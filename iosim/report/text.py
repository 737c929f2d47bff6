"""Plain-text tables of analyses for the terminal."""
from __future__ import annotations

from ..units import nbytes, seconds, si


def _rows_to_text(rows, title: str | None = None) -> str:
    width = max(len(k) for k, _ in rows if k)
    out = [title, "-" * len(title)] if title else []
    for k, v in rows:
        out.append("" if not k else f"{k:<{width}}  {v}")
    return "\n".join(out)


def analysis_table(a) -> str:
    p, g, c, b, r = a.problem, a.gpu, a.counters, a.bounds, a.roofline
    rows = [("GPU", f"{g.name} ({g.short_name})"),
            ("problem", p.describe()),
            ("algorithm", a.algorithm),
            ("tiling", "; ".join(f"{k}: {t.describe()}" for k, t in a.tiling.items())),
            ("", "")]
    for k in a.kernels:
        rows.append((f"kernel {k.name}",
                     f"grid {'×'.join(map(str, k.grid))} = {k.ctas:,} CTAs, {k.threads_per_cta} thr, "
                     f"{k.smem_bytes_per_cta / 1024:.0f} KiB smem, {k.registers_per_thread} regs, "
                     f"{k.ctas_per_sm} CTA/SM, {k.waves:.2f} waves"))
    rows += [("", ""),
             ("L2 → SM (tile loads)", nbytes(c.l2_to_smem_bytes)),
             ("SM → L2 (tile stores)", nbytes(c.smem_to_l2_bytes)),
             ("DRAM read / write", f"{nbytes(a.dram_read_bytes)} / {nbytes(a.dram_write_bytes)}  "
                                   f"[{a.dram_source}]"),
             ("shared-memory reads (est.)", nbytes(c.smem_read_bytes_estimate)),
             ("tensor-core FLOPs", f"{si(c.mma_flops, 'FLOP')} executed, "
                                   f"{si(c.useful_flops, 'FLOP')} useful"),
             ("exponentials", si(c.exp_count)),
             ("other elementwise ops", si(c.alu_ops)),
             ("", ""),
             ("intensity vs DRAM", f"{si(r.intensity_dram_flop_per_byte)} FLOP/B "
                                   f"(ridge {r.ridge_dram_flop_per_byte:.0f})"),
             ("intensity vs L2", f"{si(r.intensity_l2_flop_per_byte)} FLOP/B "
                                 f"(ridge {r.ridge_l2_flop_per_byte:.0f})"),
             ("compulsory traffic", nbytes(b.compulsory_bytes)),
             ("IO lower bound", f"{nbytes(b.lower_bound_bytes)}  [{b.regime}, M = "
                                f"{b.sram_elements:,} elements]"),
             ("tile traffic / bound", f"{a.bound_ratio:.2f}×"),
             ("", ""),
             ("roofline time", f"{seconds(r.roofline_time_s)} ({r.bound})"),
             ("per-unit times", f"tensor {seconds(r.tensor_time_s)}, exp {seconds(r.exp_time_s)}, "
                                f"ALU {seconds(r.alu_time_s)}, DRAM {seconds(r.dram_time_s)}, "
                                f"L2 {seconds(r.l2_time_s)}"),
             ("predicted time", f"{seconds(a.predicted_time_s)}  [{a.model}]"),
             *_simulation_rows(a),
             ("bound by", a.bound_by),
             ("achieved", f"{a.achieved_tflops:.1f} TFLOP/s useful")]
    rows += [("note", n) for n in getattr(a, "notes", ())]   # schedule and fit notes
    return _rows_to_text(rows, f"iosim {a.algorithm} on {g.short_name}")


def _simulation_rows(a) -> list:
    sim = a.simulation
    if sim is None:
        return []
    d = sim.to_dict()
    util = ", ".join(f"{k} {v:.0%}" for k, v in d["utilization"].items())
    stall = ", ".join(f"{k} {v:.0%}" for k, v in d["stall_fraction"].items())
    return [("utilization", util),
            ("CTA time stalled on", stall),
            ("L2 hit rate (loads)", f"{d['l2_hit_rate']:.1%}  [{d['model']['l2_policy']}, "
                                    f"{nbytes(d['model']['l2_effective_capacity_bytes'])} effective]"),
            ("simulator", f"{d['mode']} mode, {d['model'].get('engine', '')} engine"
                          + _replay_note(d))]


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
