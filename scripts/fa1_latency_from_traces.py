"""fa1.FWD_CHUNK_LATENCY_CYCLES / FWD_EPILOGUE_LATENCY_CYCLES / FWD_MERGE_LATENCY_CYCLES from the
committed H200 traces (tests/data/traces/fa1_fwd_*.json): per step, the clock64 gap from the m-load
record to the P̃V record (wait, barrier, every chunk's S, softmax, P̃V) and from the P̃V record to the
O-store record of full Q blocks (the epilogue), each less one 171-cycle trace write per record,
against exact mode's op times (in cycles, at the counted clock) for the same lone CTA with the
three latency figures at 0. Run from the repository root: python scripts/fa1_latency_from_traces.py"""
from __future__ import annotations

import glob
import json
import sys

import numpy as np

import iosim.sim.pipeline as P
from iosim import AttentionProblem, build_schedule
from iosim.algorithms import fa1
from iosim.hardware import load_gpu
from iosim.sim import simulate

TRACE_WRITE_CYCLES = 171      # median gap of back-to-back store records (iosim.kernels.copy_issue)
LOOP = ("S=QK^T", "mask", "softmax", "exp", "chunk stats", "rescale PV", "PV")
EPI = ("merge", "stats", "update O")


def trace_gaps(k: dict) -> tuple:
    """(m-load -> P̃V gaps, {stored O bytes: P̃V -> O-store gaps}) over a kernel's CTAs."""
    names, loop, epi = k["names"], [], {}
    for ev in k["ctas"]:
        for i, e in enumerate(ev):
            if e[0] == 1 and names[e[1]] == "m":
                j = next(x for x in range(i + 1, len(ev)) if ev[x][0] == 4 and names[ev[x][1]] == "PV")
                loop.append(ev[j][6] - e[6] - (j - i) * TRACE_WRITE_CYCLES)
                s = ev[j + 1]
                epi.setdefault(s[3], []).append(s[6] - ev[j][6] - TRACE_WRITE_CYCLES)
    return loop, epi


def model_cycles(sched, gpu) -> dict:
    """Exact mode's mean cycles per step of each named compute op of CTA 0."""
    log, orig = [], P.run_ops

    def run_ops(ctx, ops, env_vars, share, stall, do_memory):
        for op in ops:
            t0 = ctx.env.now
            yield from orig(ctx, (op,), env_vars, share, stall, do_memory)
            log.append((id(ctx), op.kind, getattr(op, "name", ""), ctx.env.now - t0))
    P.run_ops = run_ops
    try:
        simulate(sched, gpu, mode="exact")
    finally:
        P.run_ops = orig
    first = log[0][0]
    per: dict = {}
    for c, kind, name, dt in log:
        if c == first and kind in ("mma", "alu", "exp"):
            per.setdefault(name, []).append(dt * gpu.clock_hz)
    steps = len(per["PV"])
    return {n: sum(v) / steps for n, v in per.items()}


def figures(path: str) -> dict:
    t = json.loads(open(path).read())
    tl = t["tiling"]["fwd"]
    saved = (fa1.FWD_CHUNK_LATENCY_CYCLES, fa1.FWD_EPILOGUE_LATENCY_CYCLES, fa1.FWD_MERGE_LATENCY_CYCLES)
    fa1.FWD_CHUNK_LATENCY_CYCLES = fa1.FWD_EPILOGUE_LATENCY_CYCLES = fa1.FWD_MERGE_LATENCY_CYCLES = 0.0
    try:
        sched = build_schedule(AttentionProblem(**t["problem"]), "h200", "fa1",
                               **{k: tl[k] for k in ("block_q", "block_kv", "stages", "warps")})
        gpu = load_gpu("h200")
        gpu = gpu.at_clock(gpu.sm_clock_counted_max_hz).model_copy(update={"cta_turnover_cycles": None})
        m = model_cycles(sched, gpu)
    finally:
        fa1.FWD_CHUNK_LATENCY_CYCLES, fa1.FWD_EPILOGUE_LATENCY_CYCLES, fa1.FWD_MERGE_LATENCY_CYCLES = saved
    kt = sched.kernels[0]
    tiling = sched.tiling["fwd"]
    loop, epi = trace_gaps(t["kernels"][0])
    full = max(epi)
    store = full * kt.pipeline.store_issue_cycles_per_byte
    rounds = fa1.fwd_chunk_rounds(tiling)
    loop_model = sum(m.get(n, 0.0) for n in LOOP)
    epi_model = sum(m.get(n, 0.0) for n in EPI) + store
    return {"trace": path.split("/")[-1], "tiling": tiling.describe(), "wn": fa1.fwd_warps_per_row_tile(tiling),
            "rounds": rounds, "loop_trace": float(np.median(loop)), "loop_model": loop_model,
            "chunk_latency": (float(np.median(loop)) - loop_model) / rounds,
            "epilogue_trace": float(np.median(epi[full])), "epilogue_model": epi_model,
            "epilogue_latency": float(np.median(epi[full])) - epi_model}


def main() -> None:
    rows = [figures(f) for f in sorted(glob.glob("tests/data/traces/fa1_fwd_*.json"))]
    for r in rows:
        print(f"{r['trace']:42s} {r['tiling']:24s} WN {r['wn']} rounds {r['rounds']}: m->PV trace "
              f"{r['loop_trace']:6.0f} model {r['loop_model']:6.0f} -> {r['chunk_latency']:5.0f}/round; "
              f"PV->O trace {r['epilogue_trace']:5.0f} model {r['epilogue_model']:5.0f} -> {r['epilogue_latency']:5.0f}")
    chunk = float(np.median([r["chunk_latency"] for r in rows]))
    one = float(np.mean([r["epilogue_latency"] for r in rows if r["wn"] == 1]))
    merge = [(r["epilogue_latency"] - one) / (r["wn"] - 1) for r in rows if r["wn"] > 1]
    print(f"chunk latency (median) {chunk:.0f}; epilogue at WN 1 (mean) {one:.0f}; "
          f"merge per extra group {float(np.mean(merge)) if merge else float('nan'):.0f}")


if __name__ == "__main__":
    sys.exit(main())
