"""Clock64 cycles per KV step of the project's mma.sync kernels (fa2_fwd.cu, fa1_fwd.cu) as
they run: each CTA's main loop is timed with clock64 by thread 0 (a copy of the kernel source
with two clock reads around the loop, written to the otherwise unused trace pointer; the loop
itself is the committed code), and the launch with CUDA events. Variants of the FA-2 forward
loop, selected by macros in that copy:

- real:    the kernel as committed;
- nowait:  without the step's cp.async.wait_group (the copies are still issued, the barrier
           kept): what the wait costs;
- nocopy:  without the step's K/V copies (the loop computes on the prologue's tiles): what the
           copies cost, issue and wait together.

Configurations: a lone CTA per SM (grid = SM count) and two per SM (2 x SM count), all CTAs
reading one KV head (GQA, K/V L2-resident: the copy issue, not DRAM), and the validation rows
(iosim-fa2-fwd-N8192-d{64,128}-full, iosim-fa1-fwd-N1024-d64-full, -N1024-d128-causal) whose
event time, over the CTAs' cycles, gives the SM clock the rows ran at.

    python3 -m iosim.measure.step_cycles -o OUT.json      (on the GPU machine; needs cupy)
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

FA2_LOOP = "    for (int j = 0; j < j_stop; ++j) {"
FA2_END = "    cp_async_wait<0>();\n\n    // ---- epilogue"
FA2_ISSUE = "if (j + STAGES - 1 < j_stop) issue_kv(j + STAGES - 1);"
FA2_WAIT = "cp_async_wait<(STAGES > 1 ? STAGES - 2 : 0)>();"
FA1_LOOP = "    for (int j = 0; j < n_kv; ++j) {"
FA1_END = "    tr.finish();\n}"
# thread 0 writes (loop cycles, SM id, loop ns by %globaltimer) of its CTA
T0 = ("    u64 g0_; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(g0_));\n"
      "    const long long t0_ = clock64();\n")
STAMP = ("    { const long long t1_ = clock64(); u64 g1_; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(g1_));"
         " if (threadIdx.x == 0 && trace) {"
         " unsigned sm_; asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(sm_));"
         " long long c_ = blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);"
         " trace[3 * c_] = (u64)(t1_ - t0_); trace[3 * c_ + 1] = sm_; trace[3 * c_ + 2] = g1_ - g0_; } }\n")
HEADER = "#ifndef IOSIM_NOCOPY\n#define IOSIM_NOCOPY 0\n#endif\n#ifndef IOSIM_NOWAIT\n#define IOSIM_NOWAIT 0\n#endif\n"


def _replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"kernel source changed: {old[:40]!r} found {text.count(old)} times")
    return text.replace(old, new)


def timed_source(name: str) -> str:
    """The kernel source with clock64 around its main loop (and the variant macros)."""
    from iosim.kernels.build import source_text
    text = source_text(name)
    if name == "fa2_fwd.cu":
        text = _replace_once(text, FA2_LOOP, T0 + FA2_LOOP)
        text = _replace_once(text, FA2_END, STAMP + FA2_END)
        text = _replace_once(text, FA2_ISSUE, "if (!IOSIM_NOCOPY && j + STAGES - 1 < j_stop) issue_kv(j + STAGES - 1);")
        text = _replace_once(text, FA2_WAIT, "if (!IOSIM_NOWAIT) " + FA2_WAIT)
    else:
        text = _replace_once(text, FA1_LOOP, T0 + FA1_LOOP)
        text = _replace_once(text, FA1_END, STAMP + FA1_END)
    return HEADER + text


def _events_ms(fn, warmup=2, reps=10) -> float:
    import cupy as cp
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(times))


def measure(kernel: str, variant: str, B, Hq, Hkv, Nq, Nkv, d, bq, bkv, warps, stages, causal,
            label: str, min_seconds: float = 0.0) -> dict:
    """One configuration: loop cycles per CTA (clock64), the SM clock each CTA ran at (its
    clock64 cycles over its %globaltimer ns), the launch's CUDA-event time (median of 10).
    min_seconds > 0: first run the launch back to back for that long (the board at its
    sustained clock and power), sampling nvidia-smi's clocks.sm meanwhile."""
    import cupy as cp
    defs = {"IOSIM_D": d, "IOSIM_BQ": bq, "IOSIM_BKV": bkv, "IOSIM_WARPS": warps}
    if kernel == "fa2_fwd":
        defs["IOSIM_STAGES"] = stages
        smem = (bq * d + stages * 2 * bkv * d) * 2
        grid = ((Nq + bq - 1) // bq, B, Hq)
    else:
        smem = 2 * bkv * d * 2 + 2 * bq * d * 2 + 2 * bq * 4
        grid = (B, Hq, 1)
    if variant == "nocopy":
        defs["IOSIM_NOCOPY"] = 1
    if variant == "nowait":
        defs["IOSIM_NOWAIT"] = 1
    opts = ("-std=c++17",) + tuple(f"-D{k}={v}" for k, v in sorted(defs.items()))
    t0 = time.time()
    mod = cp.RawModule(code=timed_source(kernel + ".cu"), options=opts)
    k = mod.get_function(kernel)
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    compile_s = time.time() - t0
    rng = cp.random.default_rng(0)
    q = rng.standard_normal((B, Hq, Nq, d), dtype=cp.float32).astype(cp.float16).view(cp.uint16)
    kk = rng.standard_normal((B, Hkv, Nkv, d), dtype=cp.float32).astype(cp.float16).view(cp.uint16)
    v = rng.standard_normal((B, Hkv, Nkv, d), dtype=cp.float32).astype(cp.float16).view(cp.uint16)
    o = cp.zeros((B, Hq, Nq, d), dtype=cp.uint16)
    st1 = cp.zeros((B, Hq, Nq), dtype=cp.float32)
    st2 = cp.zeros((B, Hq, Nq), dtype=cp.float32)
    n_cta = grid[0] * grid[1] * grid[2]
    buf = cp.zeros(3 * n_cta, dtype=cp.uint64)
    dims = (np.int32(B), np.int32(Hq), np.int32(Hkv), np.int32(Nq), np.int32(Nkv),
            np.int32(1 if causal else 0), np.float32(d ** -0.5))
    if kernel == "fa2_fwd":
        args = (q, kk, v, o, st1, *dims, buf, np.int32(0))
    else:
        args = (q, kk, v, o, st1, st2, *dims, buf, np.int32(0))
    launch = lambda: k(grid, (warps * 32,), args, shared_mem=smem)   # noqa: E731
    smi = None
    if min_seconds > 0:
        smi = _sustain(launch, min_seconds)
    ms = _events_ms(launch)
    host = cp.asnumpy(buf).reshape(n_cta, 3)
    cyc, sms, ns = host[:, 0].astype(np.float64), host[:, 1], host[:, 2].astype(np.float64)
    clk = cyc / np.maximum(ns, 1.0) * 1e9
    n_kv = (Nkv + bkv - 1) // bkv
    if kernel == "fa2_fwd":
        steps = n_kv                      # full (not causal) rows only
    else:
        steps = n_kv * ((Nq + bq - 1) // bq)
    per_sm = np.bincount(sms.astype(np.int64))
    a = k.attributes
    out_ok = bool(cp.isfinite(o.view(cp.float16).astype(cp.float32)).all()) if variant == "real" else None
    return {"label": label, "kernel": kernel, "variant": variant, "B": B, "Hq": Hq, "Hkv": Hkv,
            "Nq": Nq, "Nkv": Nkv, "d": d, "tiling": [bq, bkv, stages, warps], "causal": causal,
            "grid": list(grid), "ctas": n_cta, "sms_used": int((per_sm > 0).sum()),
            "max_ctas_per_sm_total": int(per_sm.max()), "steps_per_cta": steps,
            "loop_cycles_median": float(np.median(cyc)), "loop_cycles_min": float(cyc.min()),
            "loop_cycles_max": float(cyc.max()), "loop_cycles_sum": float(cyc.sum()),
            "cycles_per_step_median": float(np.median(cyc)) / steps, "event_ms": ms,
            "num_regs": a.get("num_regs"), "local_size_bytes": a.get("local_size_bytes"),
            "compile_s": compile_s, "output_finite": out_ok,
            "sm_clock_hz_median": float(np.median(clk)), "sm_clock_hz_min": float(clk.min()),
            "sm_clock_hz_max": float(clk.max()), "nvidia_smi": smi}


def _sustain(launch, seconds: float) -> dict:
    """Run `launch` back to back for `seconds` while nvidia-smi samples clocks.sm and power
    every 50 ms; the samples after the first 0.5 s (as iosim.measure.clocks takes them)."""
    import subprocess
    import tempfile
    import cupy as cp
    with tempfile.NamedTemporaryFile("w+", suffix=".csv") as f:
        p = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                              "--format=csv,noheader,nounits", "-lms", "50"], stdout=f)
        t0 = time.time()
        calls = 0
        while time.time() - t0 < seconds:
            for _ in range(20):
                launch()
            cp.cuda.Device().synchronize()
            calls += 20
        p.terminate()
        p.wait()
        f.seek(0)
        rows = [r.split(",") for r in f.read().strip().splitlines() if r.strip()]
    vals = [(float(a), float(b)) for a, b in rows if a.strip().replace(".", "").isdigit()]
    keep = vals[int(0.5 / 0.05):] or vals
    mhz = [v[0] for v in keep]
    return {"calls": calls, "samples": len(keep), "sm_clock_mhz_median": float(np.median(mhz)) if mhz else None,
            "sm_clock_mhz_mean": float(np.mean(mhz)) if mhz else None,
            "sm_clock_mhz_min": float(min(mhz)) if mhz else None,
            "power_w_median": float(np.median([v[1] for v in keep])) if keep else None}


def cases(sm_count: int) -> list:
    c = []
    for d, bkv in ((128, 64), (64, 128)):
        for per_sm in (1, 2):
            variants = ("real", "nowait", "nocopy") if d == 128 else ("real", "nocopy")
            for var in variants:
                c.append(("fa2_fwd", var, 1, per_sm * sm_count, 1, 128, 8192, d, 128, bkv, 4, 2, False,
                          f"fa2 d{d} {per_sm} CTA/SM one KV head"))
    c.append(("fa2_fwd", "real", 2, 16, 16, 8192, 8192, 128, 128, 64, 4, 2, False, "iosim-fa2-fwd-N8192-d128-full"))
    c.append(("fa2_fwd", "nocopy", 2, 16, 16, 8192, 8192, 128, 128, 64, 4, 2, False, "iosim-fa2-fwd-N8192-d128-full"))
    c.append(("fa2_fwd", "real", 2, 16, 16, 8192, 8192, 64, 128, 128, 4, 2, False, "iosim-fa2-fwd-N8192-d64-full"))
    c.append(("fa1_fwd", "real", 16, 16, 16, 1024, 1024, 64, 64, 448, 8, 1, False, "iosim-fa1-fwd-N1024-d64-full"))
    c.append(("fa1_fwd", "real", 16, 16, 16, 1024, 1024, 128, 128, 224, 8, 1, True, "iosim-fa1-fwd-N1024-d128-causal"))
    return c


# the validation rows again, each first run back to back (seconds) at its sustained clock
SUSTAINED = (
    (("fa2_fwd", "real", 2, 16, 16, 8192, 8192, 128, 128, 64, 4, 2, False, "iosim-fa2-fwd-N8192-d128-full"), 1.5),
    (("fa2_fwd", "real", 2, 16, 16, 8192, 8192, 64, 128, 128, 4, 2, False, "iosim-fa2-fwd-N8192-d64-full"), 1.0),
    (("fa1_fwd", "real", 16, 16, 16, 1024, 1024, 64, 64, 448, 8, 1, False, "iosim-fa1-fwd-N1024-d64-full"), 1.0),
)


def table(rows: list) -> str:
    lines = [f"{'label':34} {'var':7} {'ctas':>5} {'cyc/step':>9} {'ms':>8} {'clkMHz':>6} {'smiMHz':>6} {'W':>4} {'regs':>4}"]
    for r in rows:
        smi = r.get("nvidia_smi") or {}
        lines.append(f"{r['label'][:34]:34} {r['variant']:7} {r['ctas']:5d} "
                     f"{r['cycles_per_step_median']:9.0f} {r['event_ms']:8.3f} {r['sm_clock_hz_median'] / 1e6:6.0f} "
                     f"{smi.get('sm_clock_mhz_median') or 0:6.0f} {smi.get('power_w_median') or 0:4.0f} {r['num_regs']:4d}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(0)
    sm_count = props["multiProcessorCount"]
    rows = []
    for c in cases(sm_count):
        rows.append(measure(*c))
        print(json.dumps(rows[-1]), flush=True)
    for c, seconds in SUSTAINED:
        rows.append(measure(*c, min_seconds=seconds))
        print(json.dumps(rows[-1]), flush=True)
    from iosim.measure.microbench import fa2_loop_rate, fa2_loop_table
    loops = [fa2_loop_rate(sm_count, 2048, d, bkv) for d, bkv in ((128, 64), (64, 128))]
    for lp in loops:
        print(fa2_loop_table(lp))
    result = {"device": {"name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
                         "sm_count": sm_count, "clock_hz_reported": props["clockRate"] * 1e3},
              "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
              "method": __doc__, "rows": rows, "fa2_loop": loops}
    with open(args.output, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    print(table(rows))


if __name__ == "__main__":
    main()
