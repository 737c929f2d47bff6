"""What a few CTAs per SM can store (the softmax kernel's P stores, measurements/h200/
softmax_scalar/: its copy variant's stores cost 394-598 us at N 6001 with 1-4 CTAs per SM).
A store-only kernel shaped like the softmax (B 1, H 16, rows of N fp16 elements, 4 rows and
128 threads a CTA, a warp a row): mode 0 16-byte stores from registers, 1 2-byte stores from
registers, 2 16-byte shared-memory loads then stores, 3 2-byte shared-memory loads then
stores (the copy variant's store loop without its loads); N 6008 (16-byte rows) and 6001
(2-byte); CTAs per SM lowered to 1 / 2 / 4 / 8 by dynamic shared memory. CUDA events, median
of 10 after 3 warm-ups. None is a validation shape.

    python3 scripts/experiments/store_rate_h200.py OUT.json
"""
from __future__ import annotations

import json
import statistics
import sys

SRC = r"""
#include <cuda_fp16.h>
extern "C" __global__ void st_rows(__half* out, int n, long long rows, int mode) {
    extern __shared__ __align__(16) unsigned char smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row = (long long)blockIdx.x * 4 + warp;
    if (row >= rows) return;
    __half* dst = out + row * n;
    if (mode == 0 || mode == 2) {                 // 16-byte stores (n % 8 == 0)
        int4* d4 = reinterpret_cast<int4*>(dst);
        const int4* s4 = reinterpret_cast<const int4*>(smem) + warp * 64;
        for (int i = lane; i < n / 8; i += 32) {
            int4 v = mode == 0 ? make_int4(i, (int)row, 1, 2) : s4[i % 64];
            d4[i] = v;
        }
    } else {                                      // 2-byte stores
        const __half* s2 = reinterpret_cast<const __half*>(smem) + warp * 512;
        for (int i = lane; i < n; i += 32) {
            __half v = mode == 1 ? __int2half_rn(i) : s2[i % 512];
            dst[i] = v;
        }
    }
}
"""


def main(out_path: str) -> None:
    import cupy as cp
    k = cp.RawModule(code=SRC, options=("-std=c++17",)).get_function("st_rows")
    smem_sm = cp.cuda.runtime.getDeviceProperties(0)["sharedMemPerMultiprocessor"]
    rows_out = []
    for n in (6008, 6001):
        rows = 16 * n
        buf = cp.empty(rows * n, dtype=cp.float16)
        for mode in ((0, 2) if n % 8 == 0 else (1, 3)):
            for per_sm in (1, 2, 4, 8):
                dyn = max(4096, smem_sm // per_sm - 1024 - 64)
                k.max_dynamic_shared_size_bytes = dyn
                grid = ((rows + 3) // 4,)

                def run():
                    k(grid, (128,), (buf, cp.int32(n), cp.int64(rows), cp.int32(mode)),
                      shared_mem=dyn)
                for _ in range(3):
                    run()
                cp.cuda.Device().synchronize()
                ts = []
                for _ in range(10):
                    a, b = cp.cuda.Event(), cp.cuda.Event()
                    a.record()
                    run()
                    b.record()
                    b.synchronize()
                    ts.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
                us = statistics.median(ts)
                r = {"n": n, "mode": mode, "ctas_per_sm": per_sm, "us": us,
                     "bytes": rows * n * 2, "tb_per_s": rows * n * 2 / us / 1e6}
                rows_out.append(r)
                print(f"N {n} mode {mode} ctas/SM {per_sm}: {us:8.1f} us {r['tb_per_s']:5.2f} TB/s",
                      flush=True)
        del buf
    open(out_path, "w").write(json.dumps({"rows": rows_out}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
