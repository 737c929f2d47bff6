"""Where standard attention's softmax kernel (softmax.cu, single pass) spends its time on the GPU.

The kernel as committed and its measurement variants (softmax.cu IOSIM_SM_VARIANT: 1 copy S to
P through shared memory, no arithmetic; 2 load S only; 3 no load, compute and store P; 4
compute only), the copy loop's unroll (IOSIM_SM_LOAD_UNROLL: 16-byte loads in flight per
lane), and CTAs per SM lowered by asking for more dynamic shared memory than the kernel uses
(`pad_smem`). Problems: the validation rows' softmax launches (B·H·N² constant up to N 4096).
CUDA-event time, median of 10 after 3 warm-ups; bytes are S read + P written (2·B·H·N²·2).

Run on the GPU: `python3 scripts/softmax_variants_h200.py -o softmax_variants_h200.json`;
`--ncu N` launches only the committed kernel once at seq N (for Nsight Compute).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

CONFIGS = (   # (seq, batch, heads, variant, unroll, smem per CTA or 0 = the kernel's)
    (8192, 2, 16, 0, 4, 0), (8192, 2, 16, 0, 16, 0), (8192, 2, 16, 1, 4, 0),
    (8192, 2, 16, 2, 4, 0), (8192, 2, 16, 3, 4, 0), (8192, 2, 16, 4, 4, 0),
    (4096, 4, 16, 0, 4, 0), (4096, 4, 16, 0, 4, 65536), (4096, 4, 16, 1, 4, 0),
    (4096, 4, 16, 1, 4, 65536), (4096, 4, 16, 3, 4, 65536),
    (2048, 8, 16, 0, 4, 0), (2048, 8, 16, 0, 4, 32768), (2048, 8, 16, 0, 4, 65536),
    (2048, 8, 16, 0, 16, 65536), (2048, 8, 16, 1, 4, 0), (2048, 8, 16, 1, 4, 65536),
    (2048, 8, 16, 2, 4, 0), (2048, 8, 16, 2, 4, 65536), (2048, 8, 16, 3, 4, 0),
    (2048, 8, 16, 3, 4, 65536), (2048, 8, 16, 4, 4, 0), (2048, 8, 16, 4, 4, 65536),
    (512, 32, 16, 0, 4, 0), (512, 32, 16, 1, 4, 0), (512, 32, 16, 2, 4, 0),
    (512, 32, 16, 3, 4, 0), (512, 32, 16, 4, 4, 0),
)


def launcher(cp, seq, batch, heads, variant, unroll, pad_smem, S, P):
    from iosim.kernels.build import get_kernel
    smem = 4 * seq * 2
    dyn = max(smem, pad_smem)
    k = get_kernel("softmax.cu", "std_softmax", {"IOSIM_D": 128, "IOSIM_CHUNK": 2048,
                                                  "IOSIM_SM_VARIANT": variant,
                                                  "IOSIM_SM_LOAD_UNROLL": unroll}, "fp16", False, dyn)
    grid = (seq // 4, batch, heads)
    args = (S, P, np.int32(heads), np.int32(seq), np.int32(seq), np.int32(0),
            np.float32(1 / math.sqrt(128)), np.int32(1), np.uint64(0), np.int32(0))
    return lambda: k(grid, (128,), args, shared_mem=dyn)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-o", "--output")
    ap.add_argument("--ncu", type=int, default=0)
    a = ap.parse_args(argv)
    import cupy as cp
    from iosim.measure.microbench import _time_ms
    props = cp.cuda.runtime.getDeviceProperties(0)
    smem_sm = props["sharedMemPerMultiprocessor"]
    elems = 2 * 16 * 8192 * 8192
    S = cp.random.standard_normal(elems // 4, dtype=cp.float32).astype(cp.float16)
    S = cp.tile(S, 4)                  # values do not change the timing; 4.3 GB
    P = cp.empty_like(S)
    if a.ncu:
        seq = a.ncu
        batch = 16384 // seq
        launcher(cp, seq, batch, 16, 0, 4, 0, S, P)()
        cp.cuda.Device().synchronize()
        return
    rows = []
    for seq, batch, heads, variant, unroll, pad in CONFIGS:
        fn = launcher(cp, seq, batch, heads, variant, unroll, pad, S, P)
        ms = _time_ms(fn, warmup=3, reps=10)
        smem = max(4 * seq * 2, pad)
        ctas_per_sm = min(16, 2048 // 128, smem_sm // (smem + 1024))
        nbytes = 2 * batch * heads * seq * seq * 2
        rows.append({"seq": seq, "batch": batch, "heads": heads, "variant": variant,
                     "load_unroll": unroll, "smem_bytes_per_cta": smem, "ctas_per_sm": ctas_per_sm,
                     "ms": ms, "s_plus_p_bytes": nbytes, "tb_per_s": nbytes / (ms * 1e-3) / 1e12})
        r = rows[-1]
        print(f"N {seq:5d} v{variant} unroll {unroll:2d} smem {smem:6d} ctas/SM {ctas_per_sm:2d}: "
              f"{ms * 1e3:8.1f} us  {r['tb_per_s']:.2f} TB/s(S+P)", flush=True)
    write_results(a.output, props,
                  __doc__.strip().splitlines()[0] + " CUDA events, median of 10 after 3 warm-ups",
                  ("0", "1", "2", "3", "4"), rows)


VARIANTS = {"0": "the kernel", "1": "copy S to P through smem, no arithmetic",
            "2": "load S only", "3": "no load (zeros), compute and store P",
            "4": "compute only"}


def write_results(path, props, method: str, variants, rows: list) -> None:
    """The probe's JSON (device, date, method, the variants run, rows) to `path`, if given."""
    if not path:
        return
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    out = {"device": name, "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
           "method": method, "variants": {v: VARIANTS[v] for v in variants}, "rows": rows}
    with open(path, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
