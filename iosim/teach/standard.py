"""Section 2: why standard attention is memory-bound (its S and P round trips through DRAM)."""
from __future__ import annotations

from ..analysis.tensors import tensor_bytes
from .fmt import heading, nbytes, si, table

NAME = "standard"
TITLE = "Why standard attention is memory-bound"

ROUND_TRIP_TENSORS = ("S", "P")


def closed_form(N: int, d: int, eb: int, heads: int) -> dict:
    """Standard attention's DRAM traffic when each tensor moves once per kernel (used only
    when the standard schedule is not available): read Q, K; write S; read S; write P;
    read P, V; write O."""
    nd, nn = N * d * eb * heads, N * N * eb * heads
    return {"round_trip_bytes": 4 * nn, "total_bytes": 4 * nd + 4 * nn,
            "flops": 4 * N * N * d * heads}


def facts(ctx) -> dict:
    p, N, d, eb = ctx.problem, ctx.N, ctx.d, ctx.eb
    out = {"N": N, "d": d, "heads": ctx.heads, "dtype": p.dtype}
    fa2 = ctx.analysis("fa2")
    ridge = fa2.roofline.ridge_dram_flop_per_byte
    if ctx.has_algorithm("standard"):
        a = ctx.analysis("standard")
        c = a.counters
        trips = []
        for t in ROUND_TRIP_TENSORS:
            trips.append((t, c.smem_to_l2_bytes_by_tensor.get(t, 0),
                          c.l2_to_smem_bytes_by_tensor.get(t, 0)))
        out.update(
            source="the standard schedule's counters (iosim.algorithms.standard)",
            kernels=[k.name for k in a.kernels],
            trips=trips,
            round_trip_bytes=sum(w + r for _, w, r in trips),
            dram_bytes=a.dram_read_bytes + a.dram_write_bytes,
            flops=c.mma_flops,
            intensity=a.roofline.intensity_dram_flop_per_byte,
            dram_time_s=a.roofline.dram_time_s, tensor_time_s=a.roofline.tensor_time_s,
            roofline_time_s=a.roofline.roofline_time_s, roofline_bound=a.roofline.bound)
        sim = ctx.simulated("standard")
        out.update(time_s=sim.predicted_time_s, bound_by=sim.bound_by,
                   sim_dram_bytes=sim.dram_read_bytes + sim.dram_write_bytes)
    else:  # pragma: no cover - the generator exists in this tree
        cf = closed_form(N, d, eb, ctx.heads)
        nn = N * N * eb * ctx.heads
        out.update(source="closed form (standard schedule unavailable)", kernels=[],
                   trips=[("S", nn, nn), ("P", nn, nn)], round_trip_bytes=cf["round_trip_bytes"],
                   dram_bytes=cf["total_bytes"], flops=cf["flops"],
                   intensity=cf["flops"] / cf["total_bytes"], time_s=None, bound_by=None,
                   dram_time_s=None, tensor_time_s=None)
    fa2_sim = ctx.simulated("fa2")
    out.update(fa2_time_s=fa2_sim.predicted_time_s, fa2_bound_by=fa2_sim.bound_by,
               fa2_sim_dram_bytes=fa2_sim.dram_read_bytes + fa2_sim.dram_write_bytes)
    out.update(
        s_tensor_bytes=tensor_bytes(p, "S"),
        compulsory_bytes=fa2.bounds.compulsory_bytes,
        round_trip_share=out["round_trip_bytes"] / out["dram_bytes"],
        ridge=ridge,
        fa2_dram_bytes=fa2.dram_read_bytes + fa2.dram_write_bytes,
        fa2_intensity=fa2.roofline.intensity_dram_flop_per_byte,
        fa2_roofline_time_s=fa2.roofline.roofline_time_s, fa2_roofline_bound=fa2.roofline.bound,
        intensity_limit=d / eb,   # 4N²d FLOPs / (4N² elements · eb) as N → ∞
    )
    return out


def text(f: dict) -> str:
    rows = [(t, nbytes(w), nbytes(r), nbytes(w + r)) for t, w, r in f["trips"]]
    lines = [
        heading(2, TITLE), "",
        f"Standard attention writes the N×N score matrix S = QKᵀ/√d to DRAM, reads it back for",
        f"the softmax, writes P = softmax(S), and reads P again for O = PV. Here N = {f['N']:,},",
        f"d = {f['d']}, {f['heads']} heads, {f['dtype']}: one N×N matrix is "
        f"{nbytes(f['s_tensor_bytes'])} over all heads.", "",
        f"Counted from {f['source']}"
        + (f" (kernels: {', '.join(f['kernels'])})" if f["kernels"] else "") + ":", "",
        table(["tensor", "written", "read back", "round trip"], rows + [
            ("S + P", "", "", nbytes(f["round_trip_bytes"]))]), "",
        f"DRAM traffic in all: {nbytes(f['dram_bytes'])}, of which the S/P round trips are "
        f"{100 * f['round_trip_share']:.1f}%. The inputs and output alone (compulsory) are "
        f"{nbytes(f['compulsory_bytes'])}.",
        f"Tensor-core work: {si(f['flops'], 'FLOP')}. Arithmetic intensity: "
        f"{f['intensity']:.1f} FLOP per DRAM byte, against a ridge point of {f['ridge']:.1f}.",
        f"Since 4N²d FLOPs meet ~4N² elements of S/P traffic, the intensity tends to "
        f"d / (bytes per element) = {f['intensity_limit']:.0f} FLOP/B however long the sequence:",
        f"{'below' if f['intensity_limit'] < f['ridge'] else 'above'} the ridge, so standard attention "
        "stays memory-bound at every N.",
    ]
    if f.get("time_s") is not None:
        lines += ["",
                  f"At datasheet peaks (the roofline: each unit alone) DRAM needs "
                  f"{si(f['dram_time_s'], 's')} and the tensor cores "
                  f"{si(f['tensor_time_s'], 's')}: {si(f['roofline_time_s'], 's')}, bound by "
                  f"{f['roofline_bound']}.",
                  f"Simulated (what `iosim run --algo standard` prints): {si(f['time_s'], 's')}, "
                  f"bound by {f['bound_by']}.",
                  f"FlashAttention-2 on the same problem moves {nbytes(f['fa2_dram_bytes'])} to and "
                  f"from DRAM if L2 reuse were perfect (compulsory; {nbytes(f['fa2_sim_dram_bytes'])} "
                  f"simulated), intensity {f['fa2_intensity']:.0f} FLOP/B.",
                  f"Its roofline time is {si(f['fa2_roofline_time_s'], 's')} ("
                  f"{f['fa2_roofline_bound']} at peak); simulated (`iosim run`): "
                  f"{si(f['fa2_time_s'], 's')}, bound by {f['fa2_bound_by']}: its mma.sync "
                  "MMAs and their shared-memory operand reads take longer than the peak rates "
                  "say (`iosim run` shows the split)."
                  if f["fa2_bound_by"] == "tensor cores" else
                  f"Its roofline time is {si(f['fa2_roofline_time_s'], 's')} ("
                  f"{f['fa2_roofline_bound']} at peak); simulated (`iosim run`): "
                  f"{si(f['fa2_time_s'], 's')}, bound by {f['fa2_bound_by']}."]
    return "\n".join(lines)
