"""FA-3's KV step phase by phase with two clock64 stamps per step instead of eight: how much of
the stamped step is the stamps' own cost, and each phase's length with less perturbation.

fa3_phase_stamps_h200.py stamps eight events per step (fa3_fwd.cu's PSTAMP, events in its
docstring); its steps are ~20-30% longer than the untraced %globaltimer steps of
measurements/h200/q_latency/fa3_steps_h200.json. Here the kernel is built with
-DIOSIM_PHASE_MASK=m (only the events whose bit is set in m are stamped): m = {3} (S_j done
only: the step length with one stamp per step), each pair of consecutive events (one phase per
build), all eight, and all eight without the stamps' "memory" clobber (IOSIM_PHASE_NOCLOBBER).
Every build also carries the untraced %globaltimer slots (IOSIM_STAMPS: slot 3 consumer 0's
first S done, 11-13 its S_1..S_3 done), so each variant gives its steps in ns and in clock64
cycles (the SM clock of the run), and the build with only the %globaltimer slots
(IOSIM_PHASE_STAMPS off) the untraced steps of the same session.

Shapes (fp16): one CTA alone (B 1, H 1, N_q one tile, N_kv 896: seven steps) at d 64 with the
192-row tile (3 consumers) and the 128-row tile (2), and d 128 (128 rows, 2 consumers), as built
and without the intra-warpgroup overlap; the full grid of the N 512 validation row at d 64
(B 32, H 16), its first 264 CTAs stamped. Twelve launches of one input set, the last one's
stamps. The builds are compiled in parallel first (one process each).

    python3 scripts/experiments/fa3_phase_pairs_h200.py OUT.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iosim import AttentionProblem  # noqa: E402

STAMP_SLOTS = 16
PHASE_SLOTS = 3 * 8 * 8
N_STAMPED = 264
ALL = 0xff
PAIRS = (0x03, 0x06, 0x0c, 0x18, 0x30, 0x60, 0x41)      # (0,1) (1,2) ... (5,6) (6, next 0)
# (name, d, block_q, batch, heads, n_q, n_kv, intra overlap, masks; None: globaltimer only)
SHAPES = [("d64-bq192-lone", 64, 192, 1, 1, 192, 896, 1, (None, 0x08, ALL, "noclobber") + PAIRS),
          ("d64-bq192-grid", 64, 192, 32, 16, 512, 512, 1, (None, 0x08, 0x18, 0x03, ALL)),
          ("d128-bq128-lone", 128, 128, 1, 1, 128, 896, 1, (None, 0x08) + PAIRS),
          ("d64-bq128-lone", 64, 128, 1, 1, 128, 896, 1, (0x08, 0x18)),
          ("d64-bq192-lone", 64, 192, 1, 1, 192, 896, 0, (0x08, 0x18)),
          ("d128-bq128-lone", 128, 128, 1, 1, 128, 896, 0, (0x08, 0x18))]


def defines_of(mask, intra: int) -> dict:
    d = {"IOSIM_STAMPS": 1}
    if mask is not None:
        d["IOSIM_PHASE_STAMPS"] = N_STAMPED
        d["IOSIM_PHASE_MASK"] = ALL if mask == "noclobber" else mask
        if mask == "noclobber":
            d["IOSIM_PHASE_NOCLOBBER"] = 1
    if not intra:
        d["FA3_INTRA_OVERLAP"] = 0
    return d


def launcher_for(problem, block_q: int, defines: dict):
    import cupy as cp
    import numpy as np
    from iosim.algorithms import build_schedule
    from kernel_defines import launcher
    sched = build_schedule(problem, "h200", "fa3", block_q=block_q)
    n_ctas = sched.kernels[0].num_ctas
    extra = N_STAMPED * PHASE_SLOTS if "IOSIM_PHASE_STAMPS" in defines else 0

    def buffer(k):
        return cp.full(k.num_ctas * STAMP_SLOTS + extra, -1, dtype=np.int64).view(np.uint64)
    return launcher(sched, stamps=buffer, **defines), n_ctas


def main(out: Path) -> None:
    import cupy as cp
    import numpy as np
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import device_inputs

    runs = []
    for name, d, bq, b, h, nq, nkv, intra, masks in SHAPES:
        for m in masks:
            p = AttentionProblem(batch=b, heads_q=h, seq_q=nq, seq_kv=nkv, head_dim=d, dtype="fp16")
            runs.append((name, d, bq, p, intra, m))
    inputs = {}
    for name, d, bq, p, intra, m in runs:
        key = (p.batch, p.heads_q, p.seq_q, p.seq_kv, d)
        if key not in inputs:
            inputs[key] = device_inputs(random_inputs(p, np.random.default_rng(1)), p.dtype)
    res = {}
    for name, d, bq, p, intra, m in runs:
        defs = defines_of(m, intra)
        ln, n_ctas = launcher_for(p, bq, defs)
        tensors = inputs[(p.batch, p.heads_q, p.seq_q, p.seq_kv, d)]
        ln.run(tensors)                   # builds the kernel
        for _ in range(12):
            ln.run(tensors)
        cp.cuda.runtime.deviceSynchronize()
        raw = cp.asnumpy(ln.stamps).view(np.int64)
        ns = raw[:n_ctas * STAMP_SLOTS].reshape(n_ctas, STAMP_SLOTS)
        n_st = min(N_STAMPED, n_ctas)
        mname = "gt" if m is None else m if isinstance(m, str) else f"m{m:02x}"
        key = f"fa3-{name}-nkv{p.seq_kv}-{'full' if intra else 'no_intra'}-{mname}"
        row = {"consumers": bq // 64, "steps": p.seq_kv // 128, "mask": m,
               "ns_slots": ns[:n_st].tolist()}
        steps_ns = [np.median(ns[:n_st, b_] - ns[:n_st, a_]) for a_, b_ in ((3, 11), (11, 12), (12, 13))]
        row["steps_ns"] = [float(x) for x in steps_ns]
        if m is not None:
            ph = raw[n_ctas * STAMP_SLOTS:].reshape(N_STAMPED, 3, 8, 8)[:n_st]
            big = np.iinfo(np.int64).max
            rel = np.where(ph >= 0, ph - np.where(ph >= 0, ph, big).min(axis=(1, 2, 3), keepdims=True), -1)
            row["cycles"] = rel.tolist()
            c3 = ph[0, 0, :, 3]
            if (c3[1:4] >= 0).all():      # S_1 .. S_3 done: cycles over ns, the run's SM clock
                row["clock_ghz"] = float((c3[3] - c3[1]) / (ns[0, 13] - ns[0, 11]))
        res[key] = row
        print(key, "steps ns", [round(x) for x in steps_ns], "clock",
              round(row.get("clock_ghz", 0.0), 3), flush=True)
    out.write_text(json.dumps(res))
    print("wrote", out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
