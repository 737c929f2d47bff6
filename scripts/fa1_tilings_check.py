"""Model vs measured clock64 cycles per (i, j) step of fa1_fwd.cu at the tilings of
measurements/h200/fa1_tilings_h200.json (iosim.measure.fa1_tilings), with fa1's latency figures
(FWD_CHUNK/EPILOGUE/MERGE_LATENCY_CYCLES) as committed and at 0: the same problem (B 1, H = SM
count, one KV head, N 1024) in exact mode at the counted clock, each CTA's span less its init
stores, over its steps. Run from the repository root: python scripts/fa1_tilings_check.py"""
from __future__ import annotations

import json

import numpy as np

from iosim import AttentionProblem, build_schedule
from iosim.algorithms import fa1
from iosim.hardware import load_gpu
from iosim.sim import simulate  # noqa: E402

MEAS = "measurements/h200/fa1_tilings_h200.json"


def model_step_cycles(r: dict, latency: bool) -> float:
    saved = (fa1.FWD_CHUNK_LATENCY_CYCLES, fa1.FWD_EPILOGUE_LATENCY_CYCLES, fa1.FWD_MERGE_LATENCY_CYCLES)
    if not latency:
        fa1.FWD_CHUNK_LATENCY_CYCLES = fa1.FWD_EPILOGUE_LATENCY_CYCLES = fa1.FWD_MERGE_LATENCY_CYCLES = 0.0
    try:
        bq, bkv, stages, w = r["tiling"]
        p = AttentionProblem(batch=r["B"], heads_q=r["Hq"], heads_kv=r["Hkv"], seq_q=r["Nq"],
                             seq_kv=r["Nkv"], head_dim=r["d"], causal=r["causal"])
        s = build_schedule(p, "h200", "fa1", block_q=bq, block_kv=bkv, stages=stages, warps=w)
        gpu = load_gpu("h200")
        gpu = gpu.at_clock(gpu.sm_clock_counted_max_hz)
        df = simulate(s, gpu, mode="exact").timeline_df()
    finally:
        fa1.FWD_CHUNK_LATENCY_CYCLES, fa1.FWD_EPILOGUE_LATENCY_CYCLES, fa1.FWD_MERGE_LATENCY_CYCLES = saved
    span = float(np.median((df.end_s - df.start_s).to_numpy())) * gpu.clock_hz
    return span / r["steps_per_cta"]


def main() -> None:
    rows = [r for r in json.load(open(MEAS))["rows"] if "error" not in r]
    print(f"{'tiling':24s} {'WN':>2} {'rnd':>3} {'measured':>8} {'before':>14} {'after':>14}")
    errs_b, errs_a = [], []
    for r in rows:
        bq, bkv, _, w = r["tiling"]
        try:
            build_schedule(AttentionProblem(batch=1, heads_q=1, seq_q=r["Nq"], head_dim=r["d"]), "h200",
                           "fa1", block_q=bq, block_kv=bkv, warps=w)
        except Exception as e:   # noqa: BLE001 (a tiling the schedule's fit check refuses)
            print(f"d{r['d']} {bq}x{bkv} w{w}".ljust(24) + f" measured {r['cycles_per_step_median']:.0f}; "
                  f"not modelled: {str(e)[:90]}")
            continue
        t = build_schedule(AttentionProblem(batch=1, heads_q=1, seq_q=r["Nq"], head_dim=r["d"]), "h200",
                           "fa1", block_q=bq, block_kv=bkv, warps=w).tiling["fwd"]
        m = r["cycles_per_step_median"]
        b, a = model_step_cycles(r, False), model_step_cycles(r, True)
        errs_b.append(b / m - 1)
        errs_a.append(a / m - 1)
        print(f"d{r['d']} {bq}x{bkv} w{w}".ljust(24) + f" {fa1.fwd_warps_per_row_tile(t):2d} {fa1.fwd_chunk_rounds(t):3d} "
              f"{m:8.0f} {b:7.0f} {100 * (b / m - 1):+5.1f}% {a:7.0f} {100 * (a / m - 1):+5.1f}%")
    print(f"mean |err| before {100 * np.mean(np.abs(errs_b)):.1f}%  after {100 * np.mean(np.abs(errs_a)):.1f}%")


if __name__ == "__main__":
    main()
