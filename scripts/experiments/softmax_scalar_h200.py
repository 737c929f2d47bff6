"""The softmax kernel's scalar path (softmax.cu, single pass, N_kv not a multiple of 8: one
2-byte load and one 2-byte store per lane and element, where the aligned path moves 16 bytes).

Shapes next to each other that differ only in N_kv mod 8 (none a validation shape), B 1 x H 16:
the kernel (variant 0), its copy-only variant (1: the same loads and stores, no arithmetic)
and its load-only variant (2); at N 3001 / 3008 and 6001 / 6008 also the CTAs per SM lowered
by asking for more dynamic shared memory than the kernel uses (a latency-bound loop's time
scales with the warps in flight, a bandwidth-bound one's does not). CUDA events, median of
10 after 3 warm-ups. `--ncu N` launches only the committed kernel once at N (for Nsight
Compute; `--ctas-per-sm K` lowers the CTAs per SM to K); `--sass FILE` writes the kernel's SASS (nvcc -cubin -arch=sm_90 of the same source
and defines, cuobjdump -sass).

    python3 scripts/experiments/softmax_scalar_h200.py OUT.json
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from softmax_pitch_h200 import events_us   # noqa: E402  (the pitch probe's CUDA-event timer)

NS = (2001, 2002, 2004, 2008, 3001, 3002, 3004, 3008, 4001, 4002, 4004, 4008,
      6001, 6002, 6004, 6008, 8001, 8008)
OCCUPANCY_NS = (3001, 3008, 6001, 6008)
CTAS_PER_SM = (1, 2, 4)
B, H = 1, 16
DEFINES = {"IOSIM_D": 128, "IOSIM_CHUNK": 2048}


def launcher(cp, n, variant, dyn, S, P):
    from iosim.kernels.build import get_kernel
    k = get_kernel("softmax.cu", "std_softmax", {**DEFINES, "IOSIM_SM_VARIANT": variant},
                   "fp16", False, dyn)
    grid = (-(-n // 4), B, H)
    args = (S, P, np.int32(H), np.int32(n), np.int32(n), np.int32(0),
            np.float32(1 / math.sqrt(128)), np.int32(1), np.uint64(0), np.int32(0))
    return lambda: k(grid, (128,), args, shared_mem=dyn)


def sass(out: Path) -> None:
    from iosim.kernels.build import source_text
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "softmax.cu"
        src.write_text(source_text("softmax.cu"))
        cubin = Path(d) / "softmax.cubin"
        subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-std=c++17",
                        *[f"-D{k}={v}" for k, v in DEFINES.items()], "-o", str(cubin), str(src)],
                       check=True)
        text = subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True,
                              capture_output=True, text=True).stdout
    out.write_text(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("output", nargs="?")
    ap.add_argument("--ncu", type=int, default=0)
    ap.add_argument("--ctas-per-sm", type=int, default=0,
                    help="with --ncu: lower the CTAs per SM to this by dynamic shared memory")
    ap.add_argument("--sass")
    a = ap.parse_args(argv)
    if a.sass:
        sass(Path(a.sass))
        return
    import cupy as cp
    smem_sm = cp.cuda.runtime.getDeviceProperties(0)["sharedMemPerMultiprocessor"]
    nmax = max(NS)
    S = cp.random.standard_normal(B * H * nmax * nmax, dtype=cp.float32).astype(cp.float16)
    P = cp.empty_like(S)
    if a.ncu:
        dyn = 4 * a.ncu * 2
        if a.ctas_per_sm:
            dyn = max(dyn, smem_sm // a.ctas_per_sm - 1024 - 64)
        launcher(cp, a.ncu, 0, dyn, S, P)()
        cp.cuda.Device().synchronize()
        return
    rows = []
    for n in NS:
        smem = 4 * n * 2
        pads = [(0, min(16, smem_sm // (smem + 1024)))]
        if n in OCCUPANCY_NS:
            pads += [(smem_sm // k - 1024 - 64, k) for k in CTAS_PER_SM]
        for pad, k in pads:
            dyn = max(smem, pad)
            row = {"n": n, "n_mod_8": n % 8, "batch": B, "heads": H, "smem_bytes_per_cta": dyn,
                   "ctas_per_sm": k, "s_plus_p_bytes": 2 * B * H * n * n * 2}
            for variant in (0, 1, 2):
                row[f"v{variant}_us"] = events_us(cp, launcher(cp, n, variant, dyn, S, P))
            rows.append(row)
            print(f"N {n:5d} mod8 {n % 8} ctas/SM {k:2d}  kernel {row['v0_us']:8.1f} us "
                  f"{row['s_plus_p_bytes'] / row['v0_us'] / 1e6:5.2f} TB/s  copy "
                  f"{row['v1_us']:8.1f}  load {row['v2_us']:8.1f} us", flush=True)
    if a.output:
        Path(a.output).write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
