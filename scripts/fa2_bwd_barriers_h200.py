"""What the barriers that end the project's FA-2 backward's P and dS phases cost, and what a
trace record costs inside its Q loop, on the H200 in one device call: fa2_bwd.cu at d 128
timed alone (CUDA events) as committed, without the barrier after P (IOSIM_PHASE_BARRIERS_OFF
1), without the one after dS (2), without both (3) (results wrong, time right), and the
committed kernel in trace mode (the record cost: traced less untraced, per record).
Checks fa2.BWD_PHASE_BARRIER_CYCLES and fa2.BWD_TRACE_RECORD_CYCLES, measured from traces.

    OUT=<dir> python3 scripts/fa2_bwd_barriers_h200.py      (writes <dir>/fa2_bwd_barriers_h200.json)
"""
from __future__ import annotations

import json
import os
import sys
import time
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
OUT = Path(os.environ.get("OUT", "out"))
from fa2_bwd_atomics_h200 import problem_of  # noqa: E402

CONFIGS = [("1wave-32cta-N4096", 1, 1, 4096), ("row-B4-H16-N4096", 4, 16, 4096)]
VARIANTS = (0, 1, 2, 3)


def defines(schedule, off):
    t = schedule.tiling["bwd"]
    return {"IOSIM_D": 128, "IOSIM_BQ": t.block_q, "IOSIM_BKV": t.block_kv,
            "IOSIM_WARPS": t.warps, "IOSIM_STAGES": t.stages, "IOSIM_PHASE_BARRIERS_OFF": off}


def _compile(args):
    off, trace = args
    from iosim import build_schedule
    from iosim.kernels.build import get_kernel
    s = build_schedule(problem_of(1, 1, 1024), "h200", "fa2")
    t0 = time.time()
    get_kernel("fa2_bwd.cu", "fa2_bwd", defines(s, off), "fp16", trace,
               s.kernels[1].launch.smem_bytes_per_cta)
    return f"off {off} trace {trace}: {time.time() - t0:.1f}s"


def main():
    import cupy as cp
    import numpy as np
    from iosim import build_schedule
    from iosim.kernels.build import get_kernel
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import Launcher, device_inputs, forward_schedule, run_schedule
    from iosim.schedule import expand
    from iosim.measure.timing import time_op

    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    jobs = [(v, False) for v in VARIANTS] + [(0, True)]
    with Pool(len(jobs)) as pool:
        for line in pool.imap_unordered(_compile, jobs):
            print("compiled", line, flush=True)
    res = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "command": "OUT=<dir> python3 scripts/fa2_bwd_barriers_h200.py", "rows": []}
    rng = np.random.default_rng(0)
    for label, b, h, n in CONFIGS:
        p = problem_of(b, h, n)
        s = build_schedule(p, "h200", "fa2")
        T = device_inputs(random_inputs(p, rng, with_grad=True), "fp16")
        run_schedule(forward_schedule(p, "fa2", "h200"), T)
        run_schedule(s, T)
        kern = s.kernels[1]
        ln = Launcher(s)
        la = kern.launch
        args = (T["Q"], T["K"], T["V"], T["dO"], T["LSE"], T["D"], T["dQaccum"], T["dK"], T["dV"],
                *ln._dims())
        cap = len(list(expand(kern.program(0)))) + 64
        buf = cp.zeros(la.num_ctas * (1 + 4 * cap), dtype=np.uint64)
        for v, trace in [(x, False) for x in VARIANTS] + [(0, True)]:
            k = get_kernel("fa2_bwd.cu", "fa2_bwd", defines(s, v), "fp16", trace, la.smem_bytes_per_cta)
            tail = (buf, np.int32(cap)) if trace else (np.uint64(0), np.int32(0))

            def op(_i, k=k, tail=tail):
                k(tuple(la.grid), (la.threads_per_cta,), (*args, *tail), shared_mem=la.smem_bytes_per_cta)
            r = time_op(op, 1, warmup=2, repeat=10)
            row = {"config": label, "batch": b, "heads": h, "seq": n, "ctas": la.num_ctas,
                   "q_steps_per_cta": -(-n // s.tiling["bwd"].block_q),
                   "records_per_cta": cap - 64 + 2, "barriers_off": v, "traced": trace, **r}
            res["rows"].append(row)
            print(f"{label:22s} off {v} trace {int(trace)} {r['time_s'] * 1e6:10.1f} us "
                  f"(min {r['time_min_s'] * 1e6:.1f})", flush=True)
        del T
        cp.get_default_memory_pool().free_all_blocks()
        (OUT / "fa2_bwd_barriers_h200.json").write_text(json.dumps(res, indent=1))
    print(f"total {time.time() - t0:.1f}s")
    print("\nconfig                 per step (cycles at 1.79 GHz): P barrier, dS barrier, both; record")
    for label, *_ in CONFIGS:
        rows = {(r["barriers_off"], r["traced"]): r for r in res["rows"] if r["config"] == label}
        r0 = rows[(0, False)]
        steps = r0["q_steps_per_cta"] * max(1, r0["ctas"] / 132)
        cyc = lambda a, b: (rows[a]["time_s"] - rows[b]["time_s"]) / steps * 1.79e9
        rec = (rows[(0, True)]["time_s"] - r0["time_s"]) / (steps * 11) * 1.79e9
        print(f"{label:22s} {cyc((0, False), (1, False)):8.0f} {cyc((0, False), (2, False)):8.0f} "
              f"{cyc((0, False), (3, False)):8.0f}   {rec:6.1f}")


if __name__ == "__main__":
    main()
