"""What the project's FA-2 backward kernel (fa2_bwd.cu) spends on its dQaccum atomics, on the
H200, in one device call: the main kernel timed alone with its dQ update as atomicAdd (the
kernel as committed, IOSIM_DQ_MODE 0), left out (1: dQ computed, not written) and as plain
stores of the same fragment (2), on the validation rows at d 128 and on one-wave grids of
32 / 64 / 128 CTAs (one CTA per SM: how the atomics' cost grows with the SMs adding at once);
then the committed kernel in trace mode on a one-wave and a full row, summarised per phase
(median clock64 gap before each record) and by how many CTAs are in their atomics phase at
once (dQ=dS K record -> dQaccum record, %globaltimer).

    OUT=<dir> python3 scripts/fa2_bwd_atomics_h200.py      (writes <dir>/fa2_bwd_atomics_h200.json)
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT", "out"))

CONFIGS = [  # (label, batch, heads, seq)
    ("1wave-32cta-N4096", 1, 1, 4096),
    ("1wave-64cta-N4096", 1, 2, 4096),
    ("1wave-128cta-N4096", 1, 4, 4096),
    ("1wave-128cta-N16384", 1, 1, 16384),
    ("row-B16-H16-N1024", 16, 16, 1024),
    ("row-B4-H16-N4096", 4, 16, 4096),
    ("row-B1-H16-N16384", 1, 16, 16384),
]
MODES = (0, 1, 2)
TRACED = ("1wave-32cta-N4096", "1wave-128cta-N4096", "row-B4-H16-N4096")


def problem_of(b, h, n):
    from iosim import AttentionProblem
    return AttentionProblem(batch=b, heads_q=h, heads_kv=h, seq_q=n, seq_kv=n, head_dim=128,
                            dtype="fp16", causal=False, direction="bwd")


def defines(schedule, mode):
    t = schedule.tiling["bwd"]
    return {"IOSIM_D": 128, "IOSIM_BQ": t.block_q, "IOSIM_BKV": t.block_kv,
            "IOSIM_WARPS": t.warps, "IOSIM_STAGES": t.stages, "IOSIM_DQ_MODE": mode}


def _compile(args):
    mode, trace = args
    from iosim import build_schedule
    from iosim.kernels.build import get_kernel
    s = build_schedule(problem_of(1, 1, 1024), "h200", "fa2")
    t0 = time.time()
    get_kernel("fa2_bwd.cu", "fa2_bwd", defines(s, mode), "fp16", trace,
               s.kernels[1].launch.smem_bytes_per_cta)
    return f"mode {mode} trace {trace}: {time.time() - t0:.1f}s"


def trace_summary(kt, names) -> dict:
    """Per phase: median clock64 gap before each record kind; CTAs in their atomics phase."""
    gaps: dict = {}
    spans, intervals = [], []
    for evs in kt.ctas:
        for a, b in zip(evs, evs[1:]):
            gaps.setdefault(f"{b.kind}:{b.name}", []).append(b.clock - a.clock)
        spans.append((evs[0].t_ns, evs[-1].t_ns, evs[0].smid))
        t_dq = None
        for e in evs:
            if e.kind == "mma" and e.name == "dQ=dS K":
                t_dq = e.t_ns
            elif e.kind == "store" and e.name == "dQaccum" and t_dq is not None:
                intervals.append((t_dq, e.t_ns))
                t_dq = None
    out = {"phase_gap_cycles_median": {k: statistics.median(v) for k, v in gaps.items()},
           "phase_gap_cycles_mean": {k: statistics.fmean(v) for k, v in gaps.items()},
           "cta_span_ns": {"median": statistics.median(e - s for s, e, _ in spans),
                           "min": min(e - s for s, e, _ in spans),
                           "max": max(e - s for s, e, _ in spans)},
           "kernel_span_ns": max(e for _, e, _ in spans) - min(s for s, _, _ in spans)}
    # CTAs in their atomics phase at once, sampled on a 200-ns grid over the middle 80%
    t0, t1 = min(s for s, _, _ in spans), max(e for _, e, _ in spans)
    lo, hi = t0 + 0.1 * (t1 - t0), t0 + 0.9 * (t1 - t0)
    import numpy as np
    grid = np.arange(lo, hi, 200.0)
    if len(grid) and intervals:
        iv = np.array(intervals, dtype=float)
        starts, ends = np.sort(iv[:, 0]), np.sort(iv[:, 1])
        n = np.searchsorted(starts, grid, side="right") - np.searchsorted(ends, grid, side="right")
        run = np.searchsorted(np.sort([s for s, _, _ in spans]), grid, side="right") - \
            np.searchsorted(np.sort([e for _, e, _ in spans]), grid, side="right")
        out["atomics_phase_ctas"] = {"mean": float(n.mean()), "p10": float(np.percentile(n, 10)),
                                     "p50": float(np.percentile(n, 50)),
                                     "p90": float(np.percentile(n, 90)), "max": int(n.max())}
        out["running_ctas_mean"] = float(run.mean())
        out["atomics_phase_ns_median"] = float(np.median(iv[:, 1] - iv[:, 0]))
    return out


def main():
    import cupy as cp
    import numpy as np
    from iosim import build_schedule
    from iosim.kernels.build import get_kernel
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import Launcher, device_inputs, forward_schedule, run_schedule
    from iosim.kernels.trace import decode
    from iosim.schedule import expand
    from iosim.measure.timing import time_op

    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    jobs = [(m, False) for m in MODES] + [(0, True)]
    with Pool(len(jobs)) as pool:
        for line in pool.imap_unordered(_compile, jobs):
            print("compiled", line, flush=True)
    print(f"compile {time.time() - t0:.1f}s", flush=True)
    res = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "command": "OUT=<dir> python3 scripts/fa2_bwd_atomics_h200.py", "rows": [],
           "traces": {}}
    rng = np.random.default_rng(0)
    for label, b, h, n in CONFIGS:
        p = problem_of(b, h, n)
        s = build_schedule(p, "h200", "fa2")
        T = device_inputs(random_inputs(p, rng, with_grad=True), "fp16")
        run_schedule(forward_schedule(p, "fa2", "h200"), T)
        run_schedule(s, T)                    # preprocess, main, convert: D and dQaccum exist
        kern = s.kernels[1]
        assert kern.name == "fa2_bwd"
        ln = Launcher(s)
        la = kern.launch
        args = (T["Q"], T["K"], T["V"], T["dO"], T["LSE"], T["D"], T["dQaccum"], T["dK"], T["dV"],
                *ln._dims(), np.uint64(0), np.int32(0))
        for mode in MODES:
            k = get_kernel("fa2_bwd.cu", "fa2_bwd", defines(s, mode), "fp16", False,
                           la.smem_bytes_per_cta)

            def op(_i, k=k):
                k(tuple(la.grid), (la.threads_per_cta,), args, shared_mem=la.smem_bytes_per_cta)
            r = time_op(op, 1, warmup=2, repeat=10)
            row = {"config": label, "batch": b, "heads": h, "seq": n, "ctas": la.num_ctas,
                   "q_steps_per_cta": -(-n // s.tiling["bwd"].block_q), "dq_mode": mode, **r}
            res["rows"].append(row)
            print(f"{label:22s} mode {mode}  {r['time_s'] * 1e6:10.1f} us  "
                  f"(min {r['time_min_s'] * 1e6:.1f}, max {r['time_max_s'] * 1e6:.1f})", flush=True)
        if label in TRACED and time.time() - t0 < 200:
            kt_k = get_kernel("fa2_bwd.cu", "fa2_bwd", defines(s, 0), "fp16", True,
                              la.smem_bytes_per_cta)
            cap = len(list(expand(kern.program(0)))) + 64     # full rows: every CTA alike
            buf = cp.zeros(la.num_ctas * (1 + 4 * cap), dtype=np.uint64)
            kt_k(tuple(la.grid), (la.threads_per_cta,), (*args[:-2], buf, np.int32(cap)),
                 shared_mem=la.smem_bytes_per_cta)
            cp.cuda.runtime.deviceSynchronize()
            kt = decode(buf.get(), kern.name, tuple(la.grid), la.threads_per_cta,
                        la.smem_bytes_per_cta, cap)
            res["traces"][label] = trace_summary(kt, None)
            print(label, "trace:", json.dumps(res["traces"][label])[:1500], flush=True)
        del T
        cp.get_default_memory_pool().free_all_blocks()
        (OUT / "fa2_bwd_atomics_h200.json").write_text(json.dumps(res, indent=1))
    print(f"total {time.time() - t0:.1f}s")
    print("\nconfig                 ctas  atomics_us  none_us  plain_us  atomics-none per step (us)")
    by = {}
    for r in res["rows"]:
        by.setdefault(r["config"], {})[r["dq_mode"]] = r
    for c, m in by.items():
        steps = m[0]["q_steps_per_cta"] * max(1, m[0]["ctas"] / 132)
        print(f"{c:22s} {m[0]['ctas']:5d} {m[0]['time_s'] * 1e6:10.1f} {m[1]['time_s'] * 1e6:8.1f} "
              f"{m[2]['time_s'] * 1e6:9.1f}  {(m[0]['time_s'] - m[1]['time_s']) * 1e6 / steps:.3f}")


if __name__ == "__main__":
    main()
