"""Where one warp of standard attention's softmax kernel spends its row, by occupancy (one
device call): softmax.cu in trace mode with a stamp at the CTA's start (IOSIM_SM_STAMP_START),
warp 0's %globaltimer / clock64 at its start, after its row's copy into shared memory
(EV_LOAD), after the max and sum passes (EV_EXP) and after the pass that writes P (EV_STORE).
N 2048 and 8192 (16-byte path) and 3001 (scalar), 1, 2, 3, 4 CTAs per SM (more dynamic shared
memory asked for than the kernel uses) and the kernel's own occupancy; B·H·N² ≈ 2^28; each
configuration launched twice, the second recorded. Each record costs the warp ~171 cycles
(the trace mode's own, docs/validation.md), four per CTA.

    python3 scripts/experiments/softmax_phases.py -o softmax_phases.json

Per configuration: medians over CTAs of the three phases (ns and cycles) and of the CTA's
span, the kernel's time from the first start to the last store stamp, and the SM clock the
stamps imply (cycles over ns).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

SMEM_PER_SM = 233472
SEQS = (2048, 8192, 3001)
CTAS = (1, 2, 3, 4, 0)
CAP = 4


def shape(seq: int) -> tuple:
    bh = max(1, round(2 ** 28 / seq ** 2))
    heads = min(16, bh)
    return max(1, bh // heads), heads


def run(cp, seq, ctas, S, P):
    from iosim.kernels.build import get_kernel
    smem = 4 * seq * 2
    dyn = smem if not ctas else SMEM_PER_SM // ctas - 1024
    if dyn < smem:
        return None
    batch, heads = shape(seq)
    k = get_kernel("softmax.cu", "std_softmax", {"IOSIM_D": 128, "IOSIM_CHUNK": 2048,
                                                  "IOSIM_SM_STAMP_START": 1}, "fp16", True, dyn)
    grid = (-(-seq // 4), batch, heads)
    n_ctas = grid[0] * grid[1] * grid[2]
    buf = cp.zeros(n_ctas * (1 + 4 * CAP), dtype=cp.uint64)
    args = (S, P, np.int32(heads), np.int32(seq), np.int32(seq), np.int32(0),
            np.float32(1 / math.sqrt(128)), np.int32(1), buf, np.int32(CAP))
    for _ in range(2):
        buf.fill(0)
        k(grid, (128,), args, shared_mem=dyn)
        cp.cuda.Device().synchronize()
    rec = cp.asnumpy(buf).reshape(n_ctas, 1 + 4 * CAP)
    ev = rec[:, 1:].reshape(n_ctas, CAP, 4)
    t = ev[:, :, 2].astype(np.int64)          # globaltimer ns: start, load, exp, store
    c = ev[:, :, 3].astype(np.int64)          # clock64
    sm = (ev[:, 0, 0] >> 56).astype(np.int64)
    ok = rec[:, 0] == CAP
    t, c, sm = t[ok], c[ok], sm[ok]
    per_sm = min(16, SMEM_PER_SM // (dyn + 1024))

    def med(x):
        return float(np.median(x))
    dt, dc = np.diff(t, axis=1), np.diff(c, axis=1)
    return {"seq": seq, "batch": batch, "heads": heads, "ctas_per_sm": per_sm,
            "padded": bool(ctas), "ctas": int(ok.sum()),
            "load_ns": med(dt[:, 0]), "compute_ns": med(dt[:, 1]), "write_ns": med(dt[:, 2]),
            "load_cycles": med(dc[:, 0]), "compute_cycles": med(dc[:, 1]),
            "write_cycles": med(dc[:, 2]), "span_ns": med(t[:, 3] - t[:, 0]),
            "load_ns_p10_p90": [float(np.percentile(dt[:, 0], 10)), float(np.percentile(dt[:, 0], 90))],
            "kernel_ns": float(t[:, 3].max() - t[:, 0].min()),
            "clock_hz": float((c[:, 3] - c[:, 0]).sum() / max(1, (t[:, 3] - t[:, 0]).sum()) * 1e9),
            "sms": int(len(np.unique(sm)))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output")
    a = ap.parse_args(argv)
    import cupy as cp
    n = max(b * h * s * s for s in SEQS for b, h in [shape(s)])
    S = cp.random.standard_normal(n, dtype=cp.float32).astype(cp.float16)
    P = cp.empty_like(S)
    rows = []
    for seq in SEQS:
        for ctas in CTAS:
            r = run(cp, seq, ctas, S, P)
            if r is None:
                continue
            rows.append(r)
            print(f"N {seq:5d} ctas/SM {r['ctas_per_sm']:2d}{'' if ctas else ' (own)'}: load "
                  f"{r['load_ns']:7.0f} ns compute {r['compute_ns']:7.0f} write {r['write_ns']:7.0f}"
                  f"  span {r['span_ns']:7.0f}  kernel {r['kernel_ns'] / 1e3:8.1f} us  "
                  f"{r['clock_hz'] / 1e6:5.0f} MHz", flush=True)
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    out = {"device": name, "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
           "method": __doc__.strip().splitlines()[0], "rows": rows}
    if a.output:
        with open(a.output, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
