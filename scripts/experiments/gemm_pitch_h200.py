"""Why the standard attention's S = Q Kᵀ GEMM is slow per byte when N is not a power of two:
cuBLAS's tile choice, or the output's row pitch (N·2 bytes, a multiple of 32 only when N is a
multiple of 16, of 128 only when N is a multiple of 64).

Part A (`gemm`): torch.matmul (as iosim/kernels/run.py calls it) in fp16 for S = Q Kᵀ
([z, N, d] × [z, d, N]) and O = P V, N over powers of two and not, z chosen so S holds about
216 M elements (432 MB); kernel names and grids from the torch profiler, time from CUDA events
(median of 10 after 2 warm-ups).
Part B (`store`): a plain store kernel writing the same [z, N, N] fp16 array as 128 × 256 tiles,
16-byte vector stores, a warp per row segment (what a GEMM epilogue writes, without the GEMM),
for pitches N = 2944 .. 3072: whether a pitch off the 32-byte sector costs DRAM/L2 time.
Part C (`ncu`, optional): Nsight Compute byte counts for a few of the above.

    python3 scripts/experiments/gemm_pitch_h200.py gemm OUT.json
    python3 scripts/experiments/gemm_pitch_h200.py store OUT.json
    python3 scripts/experiments/gemm_pitch_h200.py one qk N z d     # one call, for ncu

The holdout sweep's shapes (z 24 at N 3000 d 64; z 16 at N 6144 d 128) are left out on purpose.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cublas_tiles_h200 import kernels_of  # noqa: E402  (the torch-profiler kernel list)

NS = (2048, 2560, 2944, 2976, 3008, 3040, 3072, 3520, 3584, 4000, 4096, 5000, 5120, 6000, 6016,
      6144, 7000, 7168)
TARGET_ELEMENTS = 216_000_000
HOLDOUT = {(3000, 24, 64), (6144, 16, 128)}


def z_for(n: int) -> int:
    return max(1, round(TARGET_ELEMENTS / (n * n)))


def event_time_us(fn, reps: int = 10) -> float:
    import torch
    for _ in range(2):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)


def operands(n: int, z: int, d: int):
    import torch
    q = torch.randn(1, z, n, d, device="cuda", dtype=torch.float16)
    k = torch.randn(1, z, n, d, device="cuda", dtype=torch.float16)
    p = torch.randn(1, z, n, n, device="cuda", dtype=torch.float16)
    return q, k, p


def gemm(out: Path) -> None:
    import torch
    rows = []
    for d in (64, 128):
        for n in NS + (3000,):
            for z in sorted({z_for(n), 16 if n == 3000 else z_for(n)}):
                if (n, z, d) in HOLDOUT:
                    continue
                q, k, p = operands(n, z, d)
                qk = lambda: torch.matmul(q, k.transpose(-1, -2))  # noqa: E731
                pv = lambda: torch.matmul(p, k)  # noqa: E731
                row = {"d": d, "n": n, "z": z, "qk": kernels_of(qk), "pv": kernels_of(pv),
                       "qk_us": event_time_us(qk), "pv_us": event_time_us(pv)}
                s_bytes = z * n * n * 2
                print(f"d{d} N{n} z{z} qk {row['qk_us']:8.1f} us {s_bytes / row['qk_us'] / 1e6:5.2f} TB/s "
                      f"{row['qk'][0]['name'][15:40]:25s} {row['qk'][0]['grid']}  pv {row['pv_us']:8.1f} us "
                      f"{row['pv'][0]['name'][15:40]:25s} {row['pv'][0]['grid']}", flush=True)
                rows.append(row)
                del q, k, p
                torch.cuda.empty_cache()
    out.write_text(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                               "target_elements": TARGET_ELEMENTS, "rows": rows}, indent=1))


STORE_SRC = r"""
#include <cuda_fp16.h>
// one CTA per 128-row x 256-column tile of a [z, n, n] fp16 array; 8 warps, a warp writes one
// 256-column row segment (32 lanes x 16 bytes) per step, rows strided by the warp count
extern "C" __global__ void tile_store(__half *out, int n, int tiles_c, int tiles_r) {
  int t = blockIdx.x;
  int tc = t % tiles_c, tr = (t / tiles_c) % tiles_r, m = t / (tiles_c * tiles_r);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  size_t base = (size_t)m * n * n;
  int col = tc * 256 + lane * 8;
  uint4 v = make_uint4(0x3c003c00u + lane, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u);
  for (int r = warp; r < 128; r += 8) {
    int row = tr * 128 + r;
    if (row >= n) break;
    __half *p = out + base + (size_t)row * n + col;
    if (col + 8 <= n) {
      // 16-byte store when aligned, else two 8-byte or four 4-byte stores
      size_t a = (size_t)p;
      if ((a & 15) == 0) *(uint4 *)p = v;
      else if ((a & 7) == 0) { ((uint2 *)p)[0] = make_uint2(v.x, v.y); ((uint2 *)p)[1] = make_uint2(v.z, v.w); }
      else { ((unsigned *)p)[0] = v.x; ((unsigned *)p)[1] = v.y; ((unsigned *)p)[2] = v.z; ((unsigned *)p)[3] = v.w; }
    } else {
      for (int e = 0; e < 8 && col + e < n; ++e) p[e] = __float2half(1.0f);
    }
  }
}
"""


def store(out: Path) -> None:
    import cupy as cp
    kern = cp.RawKernel(STORE_SRC, "tile_store")
    rows = []
    for n in (2944, 2960, 2976, 2992, 3000, 3008, 3024, 3040, 3056, 3072, 4000, 4096, 6000, 6144):
        z = z_for(n)
        a = cp.empty((z, n, n), dtype=cp.float16)
        tc, tr = -(-n // 256), -(-n // 128)
        grid = (tc * tr * z,)

        def fn():
            kern(grid, (256,), (a, cp.int32(n), cp.int32(tc), cp.int32(tr)))
        for _ in range(2):
            fn()
        cp.cuda.Device().synchronize()
        ts = []
        for _ in range(10):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
        us = statistics.median(ts)
        nbytes = a.nbytes
        print(f"store N{n} z{z} {us:8.1f} us {nbytes / us / 1e6:5.2f} TB/s  pitch mod 32 B = {(2 * n) % 32}",
              flush=True)
        rows.append({"n": n, "z": z, "bytes": nbytes, "us": us, "pitch_mod_32": (2 * n) % 32})
        del a
    out.write_text(json.dumps({"rows": rows}, indent=1))


def one(which: str, n: int, z: int, d: int) -> None:
    if which == "store":
        import cupy as cp
        kern = cp.RawKernel(STORE_SRC, "tile_store")
        a = cp.empty((z, n, n), dtype=cp.float16)
        tc, tr = -(-n // 256), -(-n // 128)
        kern((tc * tr * z,), (256,), (a, cp.int32(n), cp.int32(tc), cp.int32(tr)))
        cp.cuda.Device().synchronize()
        return
    import torch
    q, k, p = operands(n, z, d)
    (torch.matmul(q, k.transpose(-1, -2)) if which == "qk" else torch.matmul(p, k))
    torch.cuda.synchronize()


if __name__ == "__main__":
    if sys.argv[1] == "one":
        one(sys.argv[2], *map(int, sys.argv[3:6]))
    else:
        {"gemm": gemm, "store": store}[sys.argv[1]](Path(sys.argv[2]))
