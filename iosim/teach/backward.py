"""Section 6: the backward pass. FlashAttention recomputes S and P from Q, K and the row
log-sum-exp instead of storing the N×N matrices: extra FLOPs against the N² memory saved."""
from __future__ import annotations

from ..analysis.tensors import tensor_bytes
from .fmt import heading, nbytes, si, table

NAME = "backward"
TITLE = "The backward pass: recomputation against N² memory"

N2_TENSORS = ("S", "P", "dP", "dS")


def facts(ctx) -> dict:
    p = ctx.problem.with_(direction="fwd+bwd")
    std = ctx.analysis("standard", "fwd+bwd")
    fa2 = ctx.analysis("fa2", "fwd+bwd")
    cs, cf = std.counters, fa2.counters
    n2_traffic = {t: cs.l2_to_smem_bytes_by_tensor.get(t, 0) + cs.smem_to_l2_bytes_by_tensor.get(t, 0)
                  for t in N2_TENSORS}
    extra_flops = cf.mma_flops - cs.mma_flops
    saved_memory = tensor_bytes(p, "P")             # P kept from forward to backward
    stats_memory = tensor_bytes(p, "LSE")           # what fa2 keeps instead
    rate = fa2.roofline.tensor_flops_per_s
    bw = ctx.gpu.dram_bandwidth_bytes_per_s
    return {
        "N": ctx.N, "d": ctx.d, "heads": ctx.heads, "causal": p.causal,
        "std_flops": cs.mma_flops, "fa2_flops": cf.mma_flops, "extra_flops": extra_flops,
        "recompute_flops_closed_form": 2 * p.attended_pairs() * p.head_dim * ctx.heads,
        "extra_flops_share": extra_flops / cs.mma_flops,
        "saved_memory_bytes": saved_memory, "stats_memory_bytes": stats_memory,
        "n2_traffic": n2_traffic, "n2_traffic_total": sum(n2_traffic.values()),
        "std_dram_bytes": std.dram_read_bytes + std.dram_write_bytes,
        "fa2_dram_bytes": fa2.dram_read_bytes + fa2.dram_write_bytes,
        "extra_flops_time_s": extra_flops / rate,
        "n2_traffic_time_s": sum(n2_traffic.values()) / bw,
        "std_time_s": std.predicted_time_s, "fa2_time_s": fa2.predicted_time_s,
        "std_bound_by": std.bound_by, "fa2_bound_by": fa2.bound_by,
    }


def text(f: dict) -> str:
    rows = [(t, nbytes(b)) for t, b in f["n2_traffic"].items()]
    return "\n".join([
        heading(6, TITLE), "",
        "The gradient needs P (dV = Pᵀ dO, dS = P ∘ (dP − D)). Standard attention keeps P from the",
        "forward pass: N² elements per head in DRAM. FlashAttention keeps only the row",
        "log-sum-exp LSE (N floats per head) and recomputes S = QKᵀ and P = exp(S − LSE) block",
        "by block in the backward pass.", "",
        f"Forward + backward, N = {f['N']:,}, d = {f['d']}, {f['heads']} heads (schedule counters):",
        f"  tensor-core FLOPs: standard {si(f['std_flops'], 'FLOP')}, fa2 {si(f['fa2_flops'], 'FLOP')}",
        f"  extra FLOPs of recomputation: {si(f['extra_flops'], 'FLOP')} "
        f"({100 * f['extra_flops_share']:+.1f}%); one more QKᵀ is 2·N²·d per head, × heads = "
        f"{si(f['recompute_flops_closed_form'], 'FLOP')}",
        f"  memory saved: P = {nbytes(f['saved_memory_bytes'])} not kept between the passes "
        f"(fa2 keeps LSE: {nbytes(f['stats_memory_bytes'])})", "",
        "Standard attention's N×N traffic (written + read) over both passes:", "",
        table(["tensor", "bytes"], rows + [("total", nbytes(f["n2_traffic_total"]))]), "",
        f"At peak rates the extra FLOPs cost {si(f['extra_flops_time_s'], 's')} of tensor-core "
        f"time; moving the N×N tensors costs {si(f['n2_traffic_time_s'], 's')} of DRAM time.",
        f"DRAM traffic: standard {nbytes(f['std_dram_bytes'])}, fa2 {nbytes(f['fa2_dram_bytes'])}. "
        f"Roofline model (datasheet peaks, not the simulator): standard "
        f"{si(f['std_time_s'], 's')} ({f['std_bound_by']}), fa2 "
        f"{si(f['fa2_time_s'], 's')} ({f['fa2_bound_by']}).",
        *(["(Causal: fa2 skips masked blocks while standard computes all of S, so the difference "
           "also includes that saving.)"] if f["causal"] else []),
        "Recomputation buys back an N² memory term with FLOPs that are cheap on a GPU whose",
        "ridge point is hundreds of FLOPs per byte.",
    ])
