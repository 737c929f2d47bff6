"""Which part of cuBLAS's S = Q Kᵀ epilogue caps its DRAM writes at 2.95-3.24 TB/s (the aligned
S kernels of the H200 dataset) where plain tiled stores reach 4.15-4.37 (../dram_write_tiles/)?
Two candidates, one kernel each way, 64 KB tiles of 128 rows × 512 bytes (cuBLAS's 256x128
S tile) of a [16, 8192, 8192] fp16 stack (2 GiB, 33x the L2), one tile per CTA:

- path: "st" — 16-byte st.global from registers (as dram_write_tiles); "bulk" — the tile staged
  in shared memory and written by TMA bulk copies (cp.async.bulk.global.shared::cta, one per
  row, as cuBLAS's TMA store writes the tile from shared memory);
- reads: 16-byte loads (ld.global.cg, unrolled, before the stores) per stored 16 bytes from a
  16 MiB buffer that stays in L2 (the GEMM's operand reads hit in L2: cuBLAS's N 8192 d 128 S
  kernel reads 1.5 L2→SM bytes per stored byte), 0 / 1 / 2 per store;
- ctas_per_sm: 1 or 3, by dynamic shared memory (cuBLAS's persistent kernel runs one).

CUDA events, median of 9 after 3 warm-ups. No validation shape.

    python3 scripts/experiments/dram_write_paths_h200.py OUT.json
"""
from __future__ import annotations

import json
import os
import statistics
import sys

SRC = r"""
extern "C" __global__ void tiles(char* out, long long pitch, int rows, int width, int tiles_x,
                                 int tiles_y, int bulk, int reads, const int4* __restrict__ l2buf,
                                 int l2_mask) {
    extern __shared__ __align__(128) unsigned char smem[];
    long long t = blockIdx.x;
    int i = t % tiles_x, j = (t / tiles_x) % tiles_y;
    long long z = t / ((long long)tiles_x * tiles_y);
    long long base = (z * tiles_x * rows + (long long)i * rows) * pitch + (long long)j * width;
    int chunks = rows * width / 16, w16 = width / 16;
    int acc = 0;
    // the L2 reads first, independent of the stores and unrolled (many in flight), as a
    // GEMM's operand loads run ahead of its epilogue
    #pragma unroll 8
    for (int c = threadIdx.x; c < chunks * reads; c += blockDim.x) {
        int4 v = __ldcg(l2buf + ((c + (int)t * 4096) & l2_mask));   // coalesced
        acc += v.x;
    }
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
        int4 val = make_int4(c, (int)t, 2, 3);
        if (bulk) reinterpret_cast<int4*>(smem)[c] = val;
        else {
            int r = c / w16, col = c - r * w16;
            *reinterpret_cast<int4*>(out + base + (long long)r * pitch + col * 16) = val;
        }
    }
    if (bulk) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        for (int r = threadIdx.x; r < rows; r += blockDim.x) {
            char* dst = out + base + (long long)r * pitch;
            unsigned s = (unsigned)__cvta_generic_to_shared(smem + r * width);
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                         :: "l"(dst), "r"(s), "r"(width) : "memory");
        }
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
    if (acc == 0x7fffffff) out[0] = 1;
}
"""


def main(out_path: str) -> None:
    import cupy as cp
    mod = cp.RawModule(code=SRC, options=("-std=c++17", "-arch=sm_90"))
    k = mod.get_function("tiles")
    n, z, rows, width = 8192, 16, 128, 512
    pitch = 2 * n
    buf = cp.empty(z * n * pitch // 4, dtype=cp.int32)
    l2_elems = (16 << 20) // 16
    l2buf = cp.arange(l2_elems * 4, dtype=cp.int32)
    total = z * n * pitch
    tiles_x, tiles_y = n // rows, pitch // width
    grid = tiles_x * tiles_y * z
    smem_sm = cp.cuda.runtime.getDeviceProperties(0)["sharedMemPerMultiprocessor"]
    out = []
    for ctas in (1, 3):
        smem = max(rows * width, smem_sm // ctas - 2048)
        k.max_dynamic_shared_size_bytes = smem
        for bulk in (0, 1):
            for reads in (0, 1, 2):
                args = (buf, cp.int64(pitch), cp.int32(rows), cp.int32(width), cp.int32(tiles_x),
                        cp.int32(tiles_y), cp.int32(bulk), cp.int32(reads), l2buf,
                        cp.int32(l2_elems - 1))
                times = []
                once = os.environ.get("PROBE_ONCE") == "1"    # under Nsight Compute
                for it in range(1 if once else 12):
                    s, e = cp.cuda.Event(), cp.cuda.Event()
                    s.record()
                    k((grid,), (256,), args, shared_mem=smem)
                    e.record()
                    e.synchronize()
                    if it >= 3 or once:
                        times.append(cp.cuda.get_elapsed_time(s, e) * 1e-3)
                t = statistics.median(times)
                row = {"ctas_per_sm": ctas, "smem_bytes": smem, "path": "bulk" if bulk else "st",
                       "l2_reads_per_store": reads, "bytes": total, "median_s": t,
                       "min_s": min(times), "tb_per_s": total / t / 1e12}
                out.append(row)
                print(f"{ctas} CTA/SM {row['path']:4s} reads {reads}: {t*1e3:8.3f} ms "
                      f"{total / t / 1e12:5.2f} TB/s", flush=True)
    json.dump({"probe": "dram_write_paths", "n": n, "z": z, "tile": [rows, width], "rows": out},
              open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
