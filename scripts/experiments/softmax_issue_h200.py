"""The standard softmax kernel's issue and occupancy (softmax.cu, single pass), one device call.

Two questions the committed probes (measurements/h200/softmax/, softmax_scalar/) leave open:

1. How many instructions does the kernel issue per row beside those per score element? The
   schedule's figure (softmax_code.ISSUED_INSTRUCTIONS_PER_ELEMENT) is one ratio measured at
   N 4001 / 4008; at N 512 the compute-only variant runs 1.4x that ratio's issue time. Nsight
   Compute's `smsp__inst_executed.sum` at N 512 ... 8192 (16-byte path) and 1001 ... 6001
   (scalar path), `--ncu`: one launch of each (the kernel, variant 0, and on the 16-byte path
   compute only, 4: softmax.cu's variant 4 skips the loads on that path only).
2. How fast does one warp issue? The kernel (0), its copy alone (1) and its compute alone (4)
   at 1, 2, 3, 4 CTAs per SM (one warp per SM sub-partition each: 4 warps a CTA) and at the
   kernel's own occupancy, by asking for more dynamic shared memory than the kernel uses.
   CUDA events, median of 10 after 3 warm-ups.

Problems: B·H·N² ≈ 2^28 score elements (S and P 0.5 GB each), d 128 (the scale only), fp16,
non-causal; none is a validation shape.

    python3 scripts/experiments/softmax_issue_h200.py -o softmax_issue_h200.json
    ncu --clock-control none --csv --metrics smsp__inst_executed.sum,gpu__time_duration.sum,\
sm__cycles_elapsed.avg.per_second -k std_softmax python3 scripts/experiments/softmax_issue_h200.py --ncu
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

SMEM_PER_SM = 233472          # H200: 228 KB; an SM reserves 1 KB per CTA
SEQS = (512, 1024, 2048, 4096, 8192, 1001, 3001, 6001)
VARIANTS = (0, 1, 4)
CTAS = (1, 2, 3, 4, 0)       # 0: the kernel's own shared memory


def shape(seq: int) -> tuple:
    """(batch, heads) with B·H·N² near 2^28."""
    bh = max(1, round(2 ** 28 / seq ** 2))
    heads = min(16, bh)
    return max(1, bh // heads), heads


def launcher(seq, variant, ctas, S, P, bh=None):
    from iosim.kernels.build import get_kernel
    smem = 4 * seq * 2
    dyn = smem if not ctas else SMEM_PER_SM // ctas - 1024
    if dyn < smem:
        return None, 0
    batch, heads = bh or shape(seq)
    k = get_kernel("softmax.cu", "std_softmax", {"IOSIM_D": 128, "IOSIM_CHUNK": 2048,
                                                  "IOSIM_SM_VARIANT": variant,
                                                  "IOSIM_SM_LOAD_UNROLL": 4}, "fp16", False, dyn)
    grid = (-(-seq // 4), batch, heads)
    args = (S, P, np.int32(heads), np.int32(seq), np.int32(seq), np.int32(0),
            np.float32(1 / math.sqrt(128)), np.int32(1), np.uint64(0), np.int32(0))
    per_sm = min(16, SMEM_PER_SM // (dyn + 1024))
    return (lambda: k(grid, (128,), args, shared_mem=dyn)), per_sm


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output")
    ap.add_argument("--ncu", action="store_true", help="one launch of variants 0 and 4 at each N")
    ap.add_argument("--ncu-seqs", default="", help="with --ncu: comma-separated N instead of SEQS, "
                    "B 1 H 16 (the shapes of measurements/h200/softmax_scalar/'s ncu rows)")
    ap.add_argument("--ncu-ctas", default="0", help="with --ncu-seqs: comma-separated CTAs per SM "
                    "to pad each launch to (0: the kernel's own shared memory; n: more dynamic "
                    "shared memory, so the L1 beside it shrinks)")
    a = ap.parse_args(argv)
    import cupy as cp
    from iosim.measure.microbench import _time_ms
    seqs = [int(x) for x in a.ncu_seqs.split(",")] if a.ncu_seqs else SEQS
    n = max([b * h * s * s for s in SEQS for b, h in [shape(s)]]
            + [16 * s * s for s in seqs if a.ncu_seqs])
    S = cp.random.standard_normal(n, dtype=cp.float32).astype(cp.float16)
    P = cp.empty_like(S)
    if a.ncu:
        ctas_list = [int(x) for x in a.ncu_ctas.split(",")] if a.ncu_seqs else [0]
        for seq in seqs:
            for variant in (0, 4) if (seq * 2) % 16 == 0 and not a.ncu_seqs else (0,):
                for ctas in ctas_list:
                    fn, per_sm = launcher(seq, variant, ctas, S, P, (1, 16) if a.ncu_seqs else None)
                    if fn is None:
                        print(f"ncu skip N {seq} v{variant} ctas {ctas}", flush=True)
                        continue
                    fn()
                    cp.cuda.Device().synchronize()
                    print(f"ncu launch N {seq} v{variant} ctas {ctas} per_sm {per_sm}", flush=True)
        return
    rows = []
    for seq in SEQS:
        batch, heads = shape(seq)
        # variant 4 skips the loads on the 16-byte path only (softmax.cu)
        for variant in VARIANTS if (seq * 2) % 16 == 0 else (0, 1):
            for ctas in CTAS:
                fn, per_sm = launcher(seq, variant, ctas, S, P)
                if fn is None:
                    continue
                ms = _time_ms(fn, warmup=3, reps=10)
                rows.append({"seq": seq, "batch": batch, "heads": heads, "variant": variant,
                             "ctas_per_sm": per_sm, "padded": bool(ctas), "ms": ms,
                             "score_elements": batch * heads * seq * seq})
                print(f"N {seq:5d} B {batch:3d} H {heads:2d} v{variant} ctas/SM {per_sm:2d}"
                      f"{'' if ctas else ' (own)'}: {ms * 1e3:9.1f} us", flush=True)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from softmax_variants_h200 import write_results
    write_results(a.output, cp.cuda.runtime.getDeviceProperties(0),
                  "CUDA events, median of 10 after 3 warm-ups", ("0", "1", "4"), rows)


if __name__ == "__main__":
    sys.exit(main())
