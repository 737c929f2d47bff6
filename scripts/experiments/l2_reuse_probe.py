"""How often does the L2 still hold a line read once, a given number of bytes of other reads
later? (issue 12's DRAM budget: the model's L2 is an LRU of 0.70 x its capacity, a fraction fitted
on validation rows; the cyclic re-read probe, iosim/data/validation/l2_probe.csv, measures a
buffer read over and over, where an L2 that holds the buffer misses nothing, so it cannot say how
a line read once fares while other lines stream past it: what FA-2's K/V tiles see at N >= 65,536
and torch flash's downward loops at 17-23 MiB.)

One kernel per configuration: one CTA of 256 threads per SM (grid = the SM count, all resident),
in steps separated by a grid-wide barrier (an atomic counter). At step t, CTA c reads a tile it
has not read before (tile t*G + c, G CTAs), then, from step k on, re-reads the tile CTA
(c + r) mod G read at step t - k. Between a tile's two reads the L2 sees the k*G new tiles of the
steps after it and the (k - 1)*G re-reads of the steps between: a reuse distance of about
(2k - 1) * G tiles. Tiles of 8 KiB, 16-byte ld.global.cg (no L1). After k warm-up steps, 48
steps of re-reads. Under Nsight Compute's default cache control (L2 flushed and invalidated
before each kernel) every first read misses, so the re-reads' misses are

    (dram__bytes_read - first-read bytes) / re-read bytes.

r: 0 the same CTA (SM) re-reads its own tile; 1 its neighbour's; G/2 a CTA half the grid away
(which SM is near which L2 partition is not known; the three say whether the reader's side
matters).

    python3 scripts/experiments/l2_reuse_probe.py OUT.csv      (runs ncu over itself)
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys

SRC = r"""
extern "C" __global__ void l2reuse(const int4* buf, int tile_vecs, int steps, int k, int r,
                                   unsigned int* bar, int* out, int* smids) {
    const int G = gridDim.x, c = blockIdx.x;
    int acc = 0;
    if (threadIdx.x == 0) {
        int smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid)); smids[c] = smid;
    }
    for (int t = 0; t < steps; ++t) {
        const long long fresh = ((long long)t * G + c) * tile_vecs;
        for (int i = threadIdx.x; i < tile_vecs; i += blockDim.x) {
            int4 v = __ldcg(buf + fresh + i); acc ^= v.x ^ v.w;
        }
        if (t >= k) {
            const long long again = ((long long)(t - k) * G + (c + r) % G) * tile_vecs;
            for (int i = threadIdx.x; i < tile_vecs; i += blockDim.x) {
                int4 v = __ldcg(buf + again + i); acc ^= v.y ^ v.z;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(bar, 1u);
            const unsigned int want = (unsigned int)(t + 1) * G;
            while (*((volatile unsigned int*)bar) < want) { }
        }
        __syncthreads();
    }
    if (acc == 0x5a5a5a5a) out[c * blockDim.x + threadIdx.x] = acc;
}
"""
TILE_BYTES = 8192
MEASURED_STEPS = 48
KS = (1, 2, 3, 4, 6, 8, 10, 12, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 30, 32,
      36, 40)
METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum",
           "lts__t_bytes.sum")


def configs(sm_count: int) -> list:
    """(k, r) per kernel, in launch order."""
    return [(k, r) for r in (0, 1, sm_count // 2) for k in KS]


def target() -> None:
    import cupy as cp
    g = cp.cuda.Device().attributes["MultiProcessorCount"]
    fn = cp.RawModule(code=SRC).get_function("l2reuse")
    vecs = TILE_BYTES // 16
    steps_max = max(KS) + MEASURED_STEPS
    buf = cp.arange(steps_max * g * vecs * 4, dtype=cp.int32)
    out = cp.zeros(g * 256, dtype=cp.int32)
    smids = cp.zeros(g, dtype=cp.int32)
    bar = cp.zeros(1, dtype=cp.uint32)
    for k, r in configs(g):
        bar.fill(0)
        fn((g,), (256,), (buf, cp.int32(vecs), cp.int32(k + MEASURED_STEPS), cp.int32(k),
                          cp.int32(r), bar, out, smids))
        cp.cuda.runtime.deviceSynchronize()
    print("smids", sorted(smids.get().tolist()) == list(range(g)), file=sys.stderr)


def main(out_csv: str) -> None:
    sys.path.insert(0, os.getcwd())
    import cupy as cp
    from iosim.measure.ncu import ncu_command, parse_csv
    g = cp.cuda.Device().attributes["MultiProcessorCount"]
    cmd = ncu_command([__file__, "--target"], metrics=METRICS, kernel_regex="l2reuse")
    res = subprocess.run(cmd, capture_output=True, text=True)
    with open(out_csv + ".ncu_raw.csv", "w") as f:     # every metric, as ncu printed it
        f.write(res.stdout)
    rows = parse_csv(res.stdout)
    want = configs(g)
    if len(rows) != len(want):
        print(res.stdout[-3000:], res.stderr[-3000:])
        raise SystemExit(f"expected {len(want)} kernels, got {len(rows)}")
    print(res.stderr[-500:])
    with open(out_csv, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["sm_count", "tile_bytes", "k", "r", "first_read_bytes", "reread_bytes",
                     "reuse_distance_bytes", "dram_read_bytes", "dram_write_bytes",
                     "reread_miss_fraction", "ncu_time_s"])
        for (k, r), row in zip(want, rows):
            first = (k + MEASURED_STEPS) * g * TILE_BYTES
            again = MEASURED_STEPS * g * TILE_BYTES
            dist = (2 * k - 1) * g * TILE_BYTES
            miss = (row["dram_read_bytes"] - first) / again
            wr.writerow([g, TILE_BYTES, k, r, first, again, dist, row["dram_read_bytes"],
                         row["dram_write_bytes"], f"{miss:.5f}", row["ncu_time_s"]])
            print(f"k {k:3d} r {r:3d} distance {dist / 2**20:6.1f} MiB  re-read misses "
                  f"{miss:7.2%}  ({row['ncu_time_s'] * 1e6:7.1f} us)", flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--target"]:
        target()
    else:
        main(sys.argv[1])
