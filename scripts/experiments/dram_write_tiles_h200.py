"""DRAM write throughput of a GEMM-like store pattern, by the stored tile's row-segment width:
is a kernel that writes R × W-byte tiles of a large row-major matrix (cuBLAS's S = Q Kᵀ: tiles
of 128-256 rows × 256-640 bytes at a 16 KB pitch) slower to write back than a linear stream?
(The aligned S kernels of the H200 dataset write 2.95-3.24 TB/s where the write-only stream
probe, iosim/measure/dram_stream.py, reaches 4.2.)

Each CTA (256 threads) writes one 64 KB tile: R = 65536 / W rows of W bytes, 16-byte stores, a
warp's 32 stores consecutive in the tile's row-major order; tiles of a [z, N, N] fp16 stack
(N 8192: pitch 16 KB, 128 MiB a matrix, z 16: 2 GiB in all, 33x the L2) in GEMM launch order
(row tiles fastest, `order` 0) or column tiles fastest (`order` 1). W = 16384 is whole rows: a
linear stream. CUDA events, median of 9 after 3 warm-ups. No validation shape.

    python3 scripts/experiments/dram_write_tiles_h200.py OUT.json
"""
from __future__ import annotations

import json
import statistics
import sys

SRC = r"""
extern "C" __global__ void st_tiles(int4* out, long long pitch16, int rows, int width16,
                                    int tiles_x, int tiles_y, int order) {
    long long t = blockIdx.x;
    int i, j;
    long long z;
    if (order == 0) { i = t % tiles_x; j = (t / tiles_x) % tiles_y; z = t / ((long long)tiles_x * tiles_y); }
    else            { j = t % tiles_y; i = (t / tiles_y) % tiles_x; z = t / ((long long)tiles_x * tiles_y); }
    long long base = z * pitch16 * (long long)(tiles_x * rows) + (long long)i * rows * pitch16
                     + (long long)j * width16;
    int chunks = rows * width16;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
        int r = c / width16, col = c - r * width16;
        out[base + r * pitch16 + col] = make_int4(c, (int)t, r, col);
    }
}
"""


def main(out_path: str) -> None:
    import cupy as cp
    k = cp.RawModule(code=SRC, options=("-std=c++17",)).get_function("st_tiles")
    n, z = 8192, 16
    pitch = 2 * n
    buf = cp.empty(z * n * pitch // 4, dtype=cp.int32)   # z·n·pitch bytes as int4 slots
    total = z * n * pitch
    rows_out = []
    for order in (0, 1):
        for width in (128, 256, 512, 1024, 4096, 16384):
            rows = 65536 // width
            tiles_x, tiles_y = n // rows, pitch // width
            grid = tiles_x * tiles_y * z
            args = (buf, cp.int64(pitch // 16), cp.int32(rows), cp.int32(width // 16),
                    cp.int32(tiles_x), cp.int32(tiles_y), cp.int32(order))
            times = []
            for it in range(12):
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record()
                k((grid,), (256,), args)
                e.record()
                e.synchronize()
                if it >= 3:
                    times.append(cp.cuda.get_elapsed_time(s, e) * 1e-3)
            t = statistics.median(times)
            row = {"order": order, "width_bytes": width, "rows": rows, "ctas": grid,
                   "bytes": total, "median_s": t, "min_s": min(times),
                   "tb_per_s": total / t / 1e12}
            rows_out.append(row)
            print(f"order {order} W {width:6d} B x {rows:4d} rows: {t*1e3:8.3f} ms "
                  f"{total / t / 1e12:5.2f} TB/s", flush=True)
    json.dump({"probe": "dram_write_tiles", "n": n, "z": z, "rows": rows_out},
              open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
