"""Two questions the odd-N standard-attention rows left (measurements/h200/oddn/):

1. `softmax`: does the project's softmax kernel (softmax.cu, single pass) slow down when S's row
   pitch is off the 128-byte line, at the same CTAs per SM? N from 1984 to 2048 and around
   3000 / 5000 / 7000, B 2 x H 16, the kernel (variant 0) and its copy-only variant (1:
   the same loads and stores, no arithmetic); CUDA events, median of 10 after 3 warm-ups.
2. `l2store`: is a partial-sector write's cost paid in DRAM or in the L2? The pitch probe's
   tile_store (scripts/experiments/gemm_pitch_h200.py) on one matrix small enough to stay in
   the L2 (N 1500 / 1504 and 3000 / 3008: 4.5 and 18 MB), 50 launches back to back per timing:
   if N 3000 costs no more than 3008 here, the cost is the DRAM's.

    python3 scripts/experiments/softmax_pitch_h200.py OUT.json
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

SOFTMAX_NS = (1984, 1992, 2000, 2008, 2016, 2024, 2032, 2040, 2048, 2944, 2976, 3000, 3008,
              3072, 4992, 5000, 5120, 6976, 7000, 7168)
B, H = 2, 16


def events_us(cp, fn, reps=10, warm=3):
    for _ in range(warm):
        fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
    return statistics.median(ts)


def softmax(cp) -> list:
    from softmax_variants_h200 import launcher
    rows = []
    for n in SOFTMAX_NS:
        S = cp.random.standard_normal(B * H * n * n, dtype=cp.float32).astype(cp.float16)
        P = cp.empty_like(S)
        row = {"n": n, "pitch_mod_128": (2 * n) % 128, "bytes": 2 * S.nbytes}
        for variant in (0, 1):
            row[f"v{variant}_us"] = events_us(cp, launcher(cp, n, B, H, variant, 4, 0, S, P))
        print(f"softmax N{n} pitch mod 128 = {row['pitch_mod_128']:3d}  kernel {row['v0_us']:8.1f} us "
              f"{row['bytes'] / row['v0_us'] / 1e6:5.2f} TB/s  copy {row['v1_us']:8.1f} us "
              f"{row['bytes'] / row['v1_us'] / 1e6:5.2f} TB/s", flush=True)
        rows.append(row)
        del S, P
    return rows


def l2store(cp) -> list:
    from gemm_pitch_h200 import STORE_SRC
    kern = cp.RawKernel(STORE_SRC, "tile_store")
    rows = []
    for n in (1500, 1504, 3000, 3008):
        a = cp.empty((1, n, n), dtype=cp.float16)
        tc, tr = -(-n // 256), -(-n // 128)

        def fn():
            for _ in range(50):
                kern((tc * tr,), (256,), (a, cp.int32(n), cp.int32(tc), cp.int32(tr)))
        us = events_us(cp, fn) / 50
        print(f"l2store N{n} ({a.nbytes / 1e6:.1f} MB) {us:7.2f} us per launch "
              f"{a.nbytes / us / 1e6:5.2f} TB/s", flush=True)
        rows.append({"n": n, "bytes": a.nbytes, "us_per_launch": us})
        del a
    return rows


def main(out: Path) -> None:
    import cupy as cp
    res = {"l2store": l2store(cp), "softmax": softmax(cp)}
    out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
