"""What the causal mask's code costs a KV step of the project's FA-3 and FA-2 forward kernels:
each built with IOSIM_FORCE_MASK=1 (every step runs the mask's compares and selects; on a
non-causal problem they mask nothing, so the work is otherwise the same) and timed against the
kernel as built, on non-causal fp16 problems with long KV loops (N 4096, H 16, B 4, the
validation tilings). Per CTA step: (t_forced − t) / (waves × steps), waves = CTAs / (132 ×
resident CTAs per SM). CUDA events, median of 10 after 2 warm-ups, 4 input sets. For FA-3 also
the static SASS instruction mix of both builds (cuobjdump), whose difference per score element
is the mask's instruction count.

    python3 scripts/experiments/mask_cost_h200.py OUT.json      # H200
"""
from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iosim import AttentionProblem  # noqa: E402
from iosim.algorithms import build_schedule  # noqa: E402

SHAPES = [("fa3", 64), ("fa3", 128), ("fa2", 64), ("fa2", 128)]
OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")


def sass_histogram(cubin: bytes) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        sass = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True).stdout
    return dict(collections.Counter(m.group(1) for m in OP.finditer(sass)))


def main(out: Path) -> None:
    import cupy as cp
    import numpy as np
    from iosim.kernels import hopper
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import device_inputs
    from kernel_defines import launcher
    from iosim.machine import resident_ctas_per_sm
    from iosim.measure.timing import sets_to_defeat_l2, time_op

    res = {}
    for algo, d in SHAPES:
        p = AttentionProblem(batch=4, heads_q=16, seq_q=4096, head_dim=d, dtype="fp16")
        sched = build_schedule(p, "h200", algo)
        k = sched.kernels[0]
        t = sched.tiling["fwd"]
        n_sets = sets_to_defeat_l2(p.q_bytes() * 2 + p.kv_bytes(), most=4)
        rng = np.random.default_rng(d)
        sets = [device_inputs(random_inputs(p, rng), p.dtype) for _ in range(n_sets)]
        row = {"ctas": k.num_ctas, "resident_per_sm": resident_ctas_per_sm(load_h200(), k.launch),
               "steps_per_cta": -(-p.seq_kv // t.block_kv), "block_q": t.block_q, "block_kv": t.block_kv}
        outs_ref = None
        for force in (0, 1):
            ln = launcher(sched, IOSIM_FORCE_MASK=force)
            outs = [dict(x) for x in sets]
            T = ln.run(outs[0])
            o = cp.asnumpy(T["O"]).astype(np.float32)
            if force == 0:
                outs_ref = o
            else:
                row["max_abs_diff_forced_vs_built"] = float(np.nanmax(np.abs(o - outs_ref)))
            row[f"time_s_force{force}"] = time_op(lambda s, ln=ln, outs=outs: ln.run(outs[s]), n_sets, 2, 10)["time_s"]
            if algo == "fa3":
                defs = hopper.defines(p, t, ln.fa3_variant)
                row[f"sass_force{force}"] = sass_histogram(hopper.compile_cubin(defs, p.dtype, False)[0])
        waves = row["ctas"] / (132 * row["resident_per_sm"])
        row["mask_s_per_cta_step"] = (row["time_s_force1"] - row["time_s_force0"]) / (waves * row["steps_per_cta"])
        res[f"{algo}-d{d}"] = row
        print(f"{algo} d{d}: built {row['time_s_force0'] * 1e6:.1f} us, forced mask {row['time_s_force1'] * 1e6:.1f} us, "
              f"{row['mask_s_per_cta_step'] * 1e9:.1f} ns per CTA step, |dO| {row['max_abs_diff_forced_vs_built']:.1e}",
              flush=True)
        if algo == "fa3":
            a, b = row["sass_force0"], row["sass_force1"]
            diff = {op: b.get(op, 0) - a.get(op, 0) for op in set(a) | set(b) if b.get(op, 0) != a.get(op, 0)}
            row["sass_diff"] = diff
            print("   SASS forced - built:", json.dumps(dict(sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:12])),
                  flush=True)
        del sets
        cp.get_default_memory_pool().free_all_blocks()
    out.write_text(json.dumps(res, indent=1, sort_keys=True))


def load_h200():
    from iosim import load_gpu
    return load_gpu("h200")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
